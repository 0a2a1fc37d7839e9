#include "server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <malloc.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "reply_queue.h"
#include "resp_parser.h"

namespace disagg::kvstore {
namespace {

enum : std::uint64_t { kListen = 1, kMetricsListen = 2, kWake = 3, kClient = 4, kMetricsClient = 5, kDiskDone = 6 };

std::uint64_t tag(std::uint64_t kind, int fd) {
  return (kind << 32) | static_cast<std::uint32_t>(fd);
}

constexpr std::size_t kReadChunk = 256u << 10;
// Reads into the input buffer are this long unless the parser knows the command needs more. Kept
// short so little of a large value arrives with its header (that prefix is the only part of a
// value copied in user space; the rest is read straight into the value's Blob). Redis uses 16 KiB.
constexpr std::size_t kSmallRead = 16u << 10;
constexpr std::size_t kMaxReadPerEvent = 8u << 20;  // fairness between connections
constexpr std::size_t kIdleBufferCap = 1u << 20;    // shrink buffers above this when idle

int listen_on(const std::string& bind, int port, int* bound_port, std::string* error, const char* flag) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket(): ") + std::strerror(errno);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, bind.c_str(), &addr.sin_addr) != 1) {
    *error = "'--bind' (" + bind + ") is not an IPv4 address; use e.g. 127.0.0.1 or the pod IP";
    ::close(fd);
    return -1;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 1024) != 0) {
    *error = std::string("cannot listen on ") + bind + ":" + std::to_string(port) + " (" + flag +
             "): " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace
}  // namespace disagg::kvstore

// gperftools' tcmalloc, when linked into the binary (engine/CMakeLists.txt); weak, so glibc builds
// link too.
extern "C" void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));

namespace disagg::kvstore {
namespace {

// Hands memory the allocator keeps for reuse back to the system. tcmalloc (and glibc's arenas)
// keep freed large blocks for the next allocation, which is what steady SET traffic wants (a
// released page costs a fault when it is used again: twice the CPU per 1 MiB SET when memory was
// released at every pause). So it is called only after values in flight were abandoned (a client
// left mid-value), once the server is quiet, so that memory does not outlive the hostile client.
void release_free_memory() {
  if (MallocExtension_ReleaseFreeMemory != nullptr) {
    MallocExtension_ReleaseFreeMemory();
  } else {
    ::malloc_trim(0);
  }
}

double monotonic_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

/// Unconsumed input of a connection: [begin, end) of a buffer that grows to the size of the
/// largest command in flight (the parser says how large) and never zero-fills.
class InputBuffer {
 public:
  std::string_view view() const { return {data_.get() + begin_, end_ - begin_}; }
  void consume(std::size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  // Makes room for at least `min_free` bytes after end, and for `want_total` unconsumed bytes.
  void reserve(std::size_t min_free, std::size_t want_total) {
    const std::size_t used = end_ - begin_;
    const std::size_t need = std::max(used + min_free, want_total);
    if (cap_ - begin_ >= need && cap_ - end_ >= min_free) return;
    if (cap_ >= need) {
      std::memmove(data_.get(), data_.get() + begin_, used);
    } else {
      std::size_t cap = std::max<std::size_t>(cap_ * 2, kReadChunk);
      while (cap < need) cap *= 2;
      std::unique_ptr<char[]> fresh(new char[cap]);
      if (used > 0) std::memcpy(fresh.get(), data_.get() + begin_, used);
      data_ = std::move(fresh);
      cap_ = cap;
    }
    begin_ = 0;
    end_ = used;
  }
  // Drops the unconsumed bytes from `offset` (relative to the view) on.
  void truncate(std::size_t offset) {
    end_ = begin_ + offset;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  char* write_ptr() { return data_.get() + end_; }
  std::size_t free_space() const { return cap_ - end_; }
  void commit(std::size_t n) { end_ += n; }
  void shrink_if_idle() {
    if (begin_ == end_ && cap_ > kIdleBufferCap) {
      data_.reset();
      cap_ = begin_ = end_ = 0;
    }
  }

 private:
  std::unique_ptr<char[]> data_;
  std::size_t cap_ = 0, begin_ = 0, end_ = 0;
};

struct Server::Connection {
  int fd = -1;
  InputBuffer in;
  RespParser parser;
  ReplyQueue out;
  Session session;
  std::size_t unanswered = 0;  // replies queued since the queue was last empty
  bool stalled = false;        // at --max-pipeline: not reading until replies drain
  bool close_after_flush = false;
  bool peer_closed = false;
  std::uint64_t reserved = 0;    // TieredStore::reserve()d for the command in flight (values arriving)
  bool finish_deferred = false;  // in Server::deferred_: finish_event() runs after this epoll batch
  std::uint32_t interest = 0;
  explicit Connection(const ParserLimits& limits) : parser(limits) {}
};

struct Server::MetricsConnection {
  int fd = -1;
  std::string request;
  std::string response;
  std::size_t written = 0;
};

Server::Server(const ServerConfig& config) : config_(config) {}

std::unique_ptr<Server> Server::create(const ServerConfig& config, std::string* error) {
  std::unique_ptr<Server> s(new Server(config));
  s->store_ = TieredStore::open(config.store, CommandExecutor::now_ms(), error);
  if (!s->store_) return nullptr;
  s->executor_ = std::make_unique<CommandExecutor>(s->store_.get(), &s->config_, &s->counters_);
  s->listen_fd_ = listen_on(config.bind, config.port, &s->port_, error, "--port");
  if (s->listen_fd_ < 0) return nullptr;
  s->config_.port = s->port_;
  if (config.metrics_port != 0) {
    s->metrics_fd_ = listen_on(config.bind, config.metrics_port, &s->metrics_port_, error, "--metrics-port");
    if (s->metrics_fd_ < 0) return nullptr;
  }
  s->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  s->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->epoll_fd_ < 0 || s->wake_fd_ < 0) {
    *error = std::string("epoll/eventfd: ") + std::strerror(errno);
    return nullptr;
  }
  const auto add = [&](int fd, std::uint64_t kind) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag(kind, fd);
    ::epoll_ctl(s->epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  };
  add(s->listen_fd_, kListen);
  add(s->wake_fd_, kWake);
  if (s->store_->has_disk()) {
    s->disk_reader_ = std::make_unique<DiskReader>(config.disk_read_hook);
    if (s->disk_reader_->event_fd() < 0) {
      *error = std::string("eventfd for the disk reader: ") + std::strerror(errno);
      return nullptr;
    }
    add(s->disk_reader_->event_fd(), kDiskDone);
    s->executor_->set_async_disk_reads(true);
  }
  if (s->metrics_fd_ >= 0) add(s->metrics_fd_, kMetricsListen);
  return s;
}

Server::~Server() {
  for (auto& [fd, c] : clients_) ::close(fd);
  for (auto& [fd, m] : metrics_clients_) ::close(fd);
  for (int fd : {listen_fd_, metrics_fd_, wake_fd_, epoll_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void Server::stop() {
  stopping_.store(true);
  const std::uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof(one));
}

int Server::run() {
  std::vector<epoll_event> events(256);
  double last_sweep = monotonic_now();
  while (!stopping_.load()) {
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 100);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      const std::uint64_t kind = events[i].data.u64 >> 32;
      const int fd = static_cast<int>(events[i].data.u64 & 0xFFFFFFFFu);
      if (kind == kListen) {
        accept_clients();
      } else if (kind == kMetricsListen) {
        accept_metrics();
      } else if (kind == kWake) {
        std::uint64_t v;
        (void)!::read(wake_fd_, &v, sizeof(v));
      } else if (kind == kDiskDone) {
        on_disk_reads_done();
      } else if (kind == kClient) {
        auto it = clients_.find(fd);
        if (it != clients_.end()) on_client_event(it->second.get(), events[i].events);
      } else if (kind == kMetricsClient) {
        auto it = metrics_clients_.find(fd);
        if (it != metrics_clients_.end()) on_metrics_event(it->second.get(), events[i].events);
      }
    }
    finish_deferred();
    const double now = monotonic_now();
    if (now - last_sweep >= 0.1) {
      store_->sweep_expired(CommandExecutor::now_ms());
      if (n == 0 && abandoned_in_flight_) {  // a quiet 100 ms after a client left mid-value
        release_free_memory();
        abandoned_in_flight_ = false;
      }
      last_sweep = now;
    }
  }
  return 0;
}

void Server::accept_clients() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a transient error (EMFILE): try again on the next event
    if (clients_.size() >= config_.max_clients) {
      static constexpr char kFull[] = "-ERR max number of clients reached (--max-clients)\r\n";
      (void)!::write(fd, kFull, sizeof(kFull) - 1);
      ::close(fd);
      ++counters_.connections_rejected;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Connection>(config_.parser);
    c->fd = fd;
    c->session.id = next_client_id_++;
    c->session.authenticated = config_.requirepass.empty();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag(kClient, fd);
    c->interest = EPOLLIN;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    clients_[fd] = std::move(c);
    ++counters_.connections_accepted;
    ++counters_.connections_current;
  }
}

void Server::release_reservation(Connection* c) {
  store_->release(c->reserved);
  c->reserved = 0;
}

void Server::close_client(Connection* c) {
  if (c->reserved > 0) abandoned_in_flight_ = true;
  release_reservation(c);
  waiting_disk_.erase(c->session.id);  // a read still in flight is dropped when it completes
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  ::close(c->fd);
  --counters_.connections_current;
  clients_.erase(c->fd);  // destroys c
}

void Server::update_interest(Connection* c) {
  std::uint32_t want = 0;
  if (!c->stalled && !c->peer_closed && !c->close_after_flush && !c->session.read_pending) want |= EPOLLIN;
  if (!c->out.empty()) want |= EPOLLOUT;
  if (want == c->interest) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = tag(kClient, c->fd);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  c->interest = want;
}

bool Server::flush(Connection* c) {
  const std::size_t before = c->out.bytes();
  const ReplyQueue::FlushResult r = c->out.flush(c->fd);
  counters_.bytes_out += before - c->out.bytes();
  if (r == ReplyQueue::FlushResult::kError) return false;
  if (c->out.empty()) c->unanswered = 0;
  return true;
}

void Server::process_input(Connection* c) {
  const std::size_t max_out_bytes = std::max<std::size_t>(64u << 20, 2 * config_.store.max_value_bytes);
  while (!c->close_after_flush && !c->session.read_pending) {
    if (c->unanswered >= config_.max_pipeline || c->out.bytes() >= max_out_bytes) {
      if (!flush(c)) {
        c->close_after_flush = true;
        c->peer_closed = true;
        return;
      }
      if (c->unanswered >= config_.max_pipeline || c->out.bytes() >= max_out_bytes) {
        if (!c->stalled) ++counters_.pipeline_stalls;
        c->stalled = true;
        return;
      }
    }
    c->stalled = false;
    const std::string_view data = c->in.view();
    const ParseStatus st = c->parser.parse(data);
    switch (st) {
      case ParseStatus::kNeedMore: {
        c->in.consume(c->parser.take_discardable());
        const std::size_t used = c->in.view().size();
        c->in.reserve(0, c->parser.wanted() > used ? c->parser.wanted() : 0);
        return;
      }
      case ParseStatus::kPayload:
        // The payload's buffered prefix was copied into its Blob; the rest is read into it directly.
        c->in.truncate(c->parser.payload_offset());
        return;
      case ParseStatus::kAdmit: {
        // A large command is arriving: its declared bytes are held against --memory-bytes from now
        // until it executes, so values in flight cannot take memory past the budget. One that
        // cannot fit is refused now, before its bytes come, and its bytes are skipped unbuffered.
        const std::uint64_t declared = c->parser.declared_bytes();
        if (store_->reserve(declared - c->reserved)) {
          c->reserved = declared;
          break;
        }
        ++counters_.rejected_requests;
        ++counters_.errors;
        const std::uint64_t budget = store_->memory_budget();
        if (declared > budget) {
          c->out.error("OOM command of " + std::to_string(declared) + " bytes does not fit --memory-bytes (" +
                       std::to_string(budget) + "): values are held in memory while they arrive; raise --memory-bytes");
        } else {
          c->out.error("OOM command of " + std::to_string(declared) + " bytes does not fit --memory-bytes (" +
                       std::to_string(budget) + ") beside " + std::to_string(store_->reserved_bytes() - c->reserved) +
                       " bytes of other values still arriving; retry later or raise --memory-bytes");
        }
        ++c->unanswered;
        release_reservation(c);
        c->parser.refuse("answered when refused");  // the reply above is its only one
        break;
      }
      case ParseStatus::kCommand: {
        release_reservation(c);  // set() now finds the room the reservation held
        const auto& args = c->parser.args();
        if (!args.empty()) {
          executor_->execute(args, &c->session, &c->out, &c->parser.payloads());
          ++c->unanswered;
          if (c->session.close_after_reply) c->close_after_flush = true;
        }
        c->parser.release_payloads();
        c->in.consume(c->parser.consumed());
        if (c->session.read_pending) submit_disk_read(c);
        break;
      }
      case ParseStatus::kRejected:
        // The end of a command refused at kAdmit, which was answered then.
        c->in.consume(c->parser.consumed());
        break;
      case ParseStatus::kProtocolError:
        if (c->reserved > 0) abandoned_in_flight_ = true;
        release_reservation(c);
        ++counters_.protocol_errors;
        ++counters_.errors;
        c->out.error(c->parser.error());
        c->close_after_flush = true;
        return;
    }
  }
}

void Server::on_client_event(Connection* c, std::uint32_t events) {
  if (events & (EPOLLERR)) {
    close_client(c);
    return;
  }
  if (events & EPOLLOUT) {
    if (!flush(c)) {
      close_client(c);
      return;
    }
    if (c->stalled && c->out.empty()) process_input(c);
  }
  if ((events & EPOLLHUP) && c->session.read_pending) {
    // Both directions are shut: the pending reply cannot be delivered, and level-triggered HUP
    // would spin the loop until the read completes.
    close_client(c);
    return;
  }
  if ((events & (EPOLLIN | EPOLLHUP)) && !c->stalled && !c->close_after_flush && !c->session.read_pending) {
    std::size_t total = 0;
    while (total < kMaxReadPerEvent && !c->stalled && !c->close_after_flush && !c->session.read_pending) {
      // A large argument in flight is read straight into its Blob (exactly its missing bytes), and
      // what follows it (its CRLF, the next command) into the buffer, in one readv. Otherwise read
      // into the buffer exactly the rest of the command in flight when the parser knows it, else
      // kSmallRead: never far past what is needed, so a following large value's bytes mostly land
      // in its own Blob.
      const std::size_t missing = c->parser.payload_missing();
      const std::size_t used = c->in.view().size();
      const std::size_t wanted = c->parser.wanted();
      const std::size_t buffer_len =
          missing == 0 && wanted > used ? std::min<std::size_t>(kReadChunk, wanted - used) : kSmallRead;
      c->in.reserve(buffer_len, missing == 0 ? wanted : 0);
      iovec iov[2];
      int iov_count = 0;
      if (missing > 0) iov[iov_count++] = {c->parser.payload_space(), missing};
      iov[iov_count++] = {c->in.write_ptr(), buffer_len};
      const ssize_t r = ::readv(c->fd, iov, iov_count);
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        close_client(c);
        return;
      }
      if (r == 0) {
        c->peer_closed = true;
        break;
      }
      const auto got = static_cast<std::size_t>(r);
      total += got;
      counters_.bytes_in += got;
      const std::size_t to_payload = std::min(got, missing);
      if (to_payload > 0) c->parser.commit_payload(to_payload);
      if (got > to_payload) c->in.commit(got - to_payload);
      if (c->parser.payload_missing() == 0) process_input(c);
      // A short read drained the socket: skip the read that would only say EAGAIN (epoll is
      // level-triggered, so anything arriving meanwhile is reported again).
      if (got < missing + buffer_len) break;
    }
  }
  defer_finish(c);
}

void Server::defer_finish(Connection* c) {
  if (c->finish_deferred) return;
  c->finish_deferred = true;
  deferred_.push_back({c->fd, c->session.id});
}

void Server::finish_deferred() {
  // Replies of every connection served in this epoll batch are written back to back, as Redis does
  // in beforeSleep(): a client with many connections (redis-benchmark, LMCache's pool) then finds
  // several replies ready per wake-up instead of being woken once per reply.
  for (const auto& [fd, id] : deferred_) {
    auto it = clients_.find(fd);
    if (it == clients_.end() || it->second->session.id != id) continue;  // closed meanwhile
    Connection* c = it->second.get();
    c->finish_deferred = false;
    finish_event(c);
  }
  deferred_.clear();
}

void Server::finish_event(Connection* c) {
  if (!flush(c)) {
    close_client(c);
    return;
  }
  if (c->stalled && c->out.empty()) {
    process_input(c);
    if (!flush(c)) {
      close_client(c);
      return;
    }
  }
  if ((c->close_after_flush || c->peer_closed) && c->out.empty() && !c->session.read_pending) {
    close_client(c);
    return;
  }
  if (c->out.empty()) c->in.shrink_if_idle();
  update_interest(c);
}

void Server::submit_disk_read(Connection* c) {
  DiskReader::Job job;
  job.cookie = c->session.id;
  job.read = c->session.pending_read;
  job.fd = store_->dup_disk_fd(job.read.location.segment);
  if (job.fd < 0) {
    // No descriptor (segment gone, or out of fds): let the store settle it synchronously.
    executor_->finish_get(&c->session, DiskError::kIo, Blob(), &c->out);
    return;
  }
  waiting_disk_[c->session.id] = c;
  disk_reader_->submit(std::move(job));
}

void Server::on_disk_reads_done() {
  done_jobs_.clear();
  disk_reader_->drain(&done_jobs_);
  for (DiskReader::Job& job : done_jobs_) {
    auto it = waiting_disk_.find(job.cookie);
    if (it == waiting_disk_.end()) continue;  // the client left meanwhile
    Connection* c = it->second;
    waiting_disk_.erase(it);
    executor_->finish_get(&c->session, job.error, std::move(job.value), &c->out);
    process_input(c);  // commands that arrived behind the GET
    defer_finish(c);
  }
  done_jobs_.clear();
}

void Server::accept_metrics() {
  for (;;) {
    const int fd = ::accept4(metrics_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (metrics_clients_.size() >= 64) {
      ::close(fd);
      continue;
    }
    auto m = std::make_unique<MetricsConnection>();
    m->fd = fd;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag(kMetricsClient, fd);
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    metrics_clients_[fd] = std::move(m);
  }
}

void Server::on_metrics_event(MetricsConnection* m, std::uint32_t events) {
  const auto close_it = [&] {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, m->fd, nullptr);
    ::close(m->fd);
    metrics_clients_.erase(m->fd);
  };
  if (m->response.empty() && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
    char buf[4096];
    for (;;) {
      const ssize_t r = ::read(m->fd, buf, sizeof(buf));
      if (r > 0) {
        m->request.append(buf, static_cast<std::size_t>(r));
        if (m->request.size() > 16384) return close_it();
        continue;
      }
      if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return close_it();
      break;
    }
    if (m->request.find("\r\n\r\n") == std::string::npos) return;
    std::string body;
    const char* status = "200 OK";
    if (m->request.rfind("GET /metrics ", 0) == 0 || m->request.rfind("GET /metrics?", 0) == 0) {
      body = render_metrics(*store_, counters_);
    } else if (m->request.rfind("GET /healthz ", 0) == 0) {
      body = "ok\n";
    } else {
      status = "404 Not Found";
      body = "not found; try GET /metrics\n";
    }
    m->response =
        std::string("HTTP/1.1 ") + status +
        "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\nConnection: close\r\n\r\n" + body;
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.u64 = tag(kMetricsClient, m->fd);
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, m->fd, &ev);
  }
  if (!m->response.empty()) {
    while (m->written < m->response.size()) {
      const ssize_t w = ::write(m->fd, m->response.data() + m->written, m->response.size() - m->written);
      if (w > 0) {
        m->written += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (w < 0 && errno == EINTR) continue;
      return close_it();
    }
    close_it();
  }
}

}  // namespace disagg::kvstore
