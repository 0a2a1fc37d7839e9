// DiskReader: a few I/O threads that serve the server's disk-tier reads, so a GET that misses memory
// does not hold up the epoll loop (and every other client's memory hits) for the length of a
// pread. Jobs go in through a mutex-guarded queue; finished jobs come back through another, and an
// eventfd (in the server's epoll set) says when there are some.
//
// The thread touches no store state: a job carries a dup'd descriptor of the record's segment
// (valid even if the segment is dropped meanwhile), the record's location and key; the server
// thread reconciles the outcome with the store (TieredStore::finish_get).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "blob.h"
#include "disk_tier.h"
#include "tiered_store.h"

namespace disagg::kvstore {

class DiskReader {
 public:
  struct Job {
    std::uint64_t cookie = 0;  ///< the caller's tag (the server uses the client id)
    DiskRead read;
    int fd = -1;  ///< owned: closed by the reader once read
    DiskError error = DiskError::kIo;
    Blob value;  ///< set when error == kOk
  };

  /// `before_read` (may be empty) runs on the I/O thread before each read: a test hook that makes
  /// the disk slow on demand.
  /// `threads` reads may be in flight at once (an NVMe drive needs queue depth for bandwidth).
  explicit DiskReader(std::function<void(std::string_view key)> before_read = {}, int threads = 4);
  /// Stops the thread; jobs not yet read are dropped (their descriptors closed).
  ~DiskReader();
  DiskReader(const DiskReader&) = delete;
  DiskReader& operator=(const DiskReader&) = delete;

  /// Non-blocking eventfd that becomes readable when finished jobs are waiting; -1 if it failed.
  [[nodiscard]] int event_fd() const { return event_fd_; }
  void submit(Job job);
  /// Moves every finished job to `out` (in completion order) and resets the eventfd.
  void drain(std::vector<Job>* out);

 private:
  void loop();

  std::function<void(std::string_view)> before_read_;
  int event_fd_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> todo_;
  std::vector<Job> done_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace disagg::kvstore
