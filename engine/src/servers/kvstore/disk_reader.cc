#include "disk_reader.h"

#include <sys/eventfd.h>
#include <unistd.h>

namespace disagg::kvstore {

DiskReader::DiskReader(std::function<void(std::string_view key)> before_read, int threads)
    : before_read_(std::move(before_read)), event_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

DiskReader::~DiskReader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  for (Job& job : todo_) ::close(job.fd);
  if (event_fd_ >= 0) ::close(event_fd_);
}

void DiskReader::submit(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    todo_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void DiskReader::drain(std::vector<Job>* out) {
  std::uint64_t count = 0;
  (void)!::read(event_fd_, &count, sizeof(count));
  std::lock_guard<std::mutex> lock(mu_);
  for (Job& job : done_) out->push_back(std::move(job));
  done_.clear();
}

void DiskReader::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !todo_.empty(); });
      if (stopping_) return;
      job = std::move(todo_.front());
      todo_.pop_front();
    }
    if (before_read_) before_read_(job.read.key);
    job.error = DiskTier::read_record(job.fd, job.read.location, job.read.key, &job.value);
    ::close(job.fd);
    job.fd = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back(std::move(job));
    }
    const std::uint64_t one = 1;
    (void)!::write(event_fd_, &one, sizeof(one));
  }
}

}  // namespace disagg::kvstore
