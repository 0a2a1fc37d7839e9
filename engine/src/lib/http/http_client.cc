#include "http_client.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "serialize.h"
#include "write_now.h"

namespace disagg::http {

std::string_view to_string(ClientErrc code) {
  switch (code) {
    case ClientErrc::resolve_failed: return "resolve_failed";
    case ClientErrc::connect_failed: return "connect_failed";
    case ClientErrc::connect_timeout: return "connect_timeout";
    case ClientErrc::write_failed: return "write_failed";
    case ClientErrc::first_byte_timeout: return "first_byte_timeout";
    case ClientErrc::idle_timeout: return "idle_timeout";
    case ClientErrc::read_failed: return "read_failed";
    case ClientErrc::protocol_error: return "protocol_error";
    case ClientErrc::body_too_large: return "body_too_large";
    case ClientErrc::cancelled: return "cancelled";
  }
  return "unknown";
}

std::string ClientError::message() const {
  return std::string(to_string(code)) + (detail.empty() ? "" : ": " + detail);
}

// ---- ConnectionPool -------------------------------------------------------------------------

namespace {

// Ends the pending wait of a deadline the pool no longer keeps: on its own context (this may be
// another thread), so that a context whose work is done is not kept running until the wait's
// expiry.
void let_go(std::shared_ptr<detail::Deadline> d) {
  if (d == nullptr) return;
  auto ex = d->timer.get_executor();
  net::post(ex, [d = std::move(d)] {
    if (d->armed && d->socket == nullptr) d->timer.cancel();
  });
}

}  // namespace

ConnectionPool::~ConnectionPool() {
  for (auto& [endpoint, list] : idle_) {
    for (Idle& c : list) {
      if (c.fd >= 0) ::close(c.fd);
      let_go(std::move(c.deadline));
    }
  }
}

std::optional<ConnectionPool::Taken> ConnectionPool::take(const std::string& endpoint,
                                                          const net::any_io_executor& executor) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  auto it = idle_.find(endpoint);
  if (it == idle_.end()) return std::nullopt;
  auto& list = it->second;
  while (!list.empty()) {
    Idle c = std::move(list.back());  // most recently parked first: the likeliest to be open
    list.pop_back();
    // No liveness probe (it cost a system call per reuse, as nginx does not pay): a connection
    // the upstream closed meanwhile fails before any response byte and open() resends once on a
    // new one.
    if (now - c.since > options_.idle_ttl) {
      if (!c.socket) ::close(c.fd);  // too old (a parked socket object closes itself)
      let_go(std::move(c.deadline));
      continue;
    }
    boost::system::error_code ec;
    if (c.socket && c.socket->get_executor() == executor) {
      ++reused_;
      return Taken{std::move(*c.socket), std::move(c.deadline)};
    }
    let_go(std::move(c.deadline));  // its timer belongs to the other context
    if (c.socket) {                 // parked from another io_context or strand: move the descriptor over
      c.v6 = c.socket->local_endpoint(ec).address().is_v6();
      if (ec) continue;
      c.fd = c.socket->release(ec);
      if (ec) continue;
    }
    tcp::socket s(executor);
    s.assign(c.v6 ? tcp::v6() : tcp::v4(), c.fd, ec);
    if (ec) {
      ::close(c.fd);
      continue;
    }
    ++reused_;
    return Taken{std::move(s), nullptr};
  }
  return std::nullopt;
}

void ConnectionPool::put(const std::string& endpoint, tcp::socket socket, std::shared_ptr<detail::Deadline> deadline) {
  // put() runs on the connection's own context (ClientStream::recycle): a deadline that is not
  // kept is cancelled here and now, so that its wait does not keep the context running.
  const auto cancel = [&deadline] {
    if (deadline != nullptr && deadline->armed) deadline->timer.cancel();
    deadline = nullptr;
  };
  if (!options_.keep_registered) cancel();
  if (!socket.is_open()) {
    cancel();
    return;
  }
  Idle c;
  c.since = std::chrono::steady_clock::now();
  if (!options_.keep_registered) {
    boost::system::error_code ec;
    c.v6 = socket.local_endpoint(ec).address().is_v6();
    if (ec) return;
  }
  std::lock_guard lock(mu_);
  auto& list = idle_[endpoint];
  if (list.size() >= options_.max_idle_per_endpoint) {
    cancel();
    return;  // `socket` closes on return
  }
  if (options_.keep_registered) {
    c.socket.emplace(std::move(socket));
    c.deadline = std::move(deadline);
  } else {
    boost::system::error_code ec;
    c.fd = socket.release(ec);
    if (ec) return;
  }
  list.push_back(std::move(c));
}

void ConnectionPool::drop(const std::string& endpoint) {
  std::vector<Idle> gone;  // closed outside the lock
  {
    std::lock_guard lock(mu_);
    auto it = idle_.find(endpoint);
    if (it == idle_.end()) return;
    gone = std::move(it->second);
    idle_.erase(it);
  }
  for (Idle& c : gone) {
    if (c.fd >= 0) ::close(c.fd);
    let_go(std::move(c.deadline));
  }
}

std::size_t ConnectionPool::idle() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [endpoint, list] : idle_) n += list.size();
  return n;
}

std::uint64_t ConnectionPool::reused() const {
  std::lock_guard lock(mu_);
  return reused_;
}

// ---- read buffers ---------------------------------------------------------------------------

namespace detail {

namespace {

constexpr std::size_t kMinCachedBytes = 4096;  // smaller blocks are cheap in malloc's own cache
constexpr std::size_t kMaxCachedBlocks = 64;

struct BlockCache {
  std::size_t bytes = 0;
  std::vector<void*> free;
  ~BlockCache() {
    for (void* p : free) ::operator delete(p);
  }
};

thread_local BlockCache block_cache;

}  // namespace

void* take_block(std::size_t bytes) {
  BlockCache& c = block_cache;
  if (bytes == c.bytes && !c.free.empty()) {
    void* p = c.free.back();
    c.free.pop_back();
    return p;
  }
  return ::operator new(bytes);
}

void give_block(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  BlockCache& c = block_cache;
  if (bytes >= kMinCachedBytes && (c.free.empty() || bytes == c.bytes) && c.free.size() < kMaxCachedBlocks) {
    try {
      if (c.free.capacity() == 0) c.free.reserve(kMaxCachedBlocks);  // push_back below never allocates
      c.bytes = bytes;
      c.free.push_back(p);
      return;
    } catch (...) {  // no memory for the list: free the block instead
    }
  }
  ::operator delete(p);
}

}  // namespace detail

// ---- ClientStream ---------------------------------------------------------------------------

namespace {

struct DeadlineTick {
  std::shared_ptr<detail::Deadline> d;
  void operator()(const boost::system::error_code& ec) const;
};

void arm(const std::shared_ptr<detail::Deadline>& d) {
  d->armed = true;
  d->timer.expires_at(d->at);
  d->timer.async_wait(DeadlineTick{d});
}

void DeadlineTick::operator()(const boost::system::error_code& ec) const {
  if (ec) return;  // cancelled: re-armed earlier, or the stream is gone (its owner reset `armed`)
  d->armed = false;
  if (d->socket == nullptr || d->at == std::chrono::steady_clock::time_point::max()) return;
  if (std::chrono::steady_clock::now() < d->at) {
    arm(d);  // the deadline moved on since the timer was armed
    return;
  }
  d->expired = true;
  boost::system::error_code ignored;
  d->socket->cancel(ignored);  // the pending operation completes aborted and reports the timeout
}

}  // namespace

ClientStream::ClientStream(ClientOptions options) : options_(options), chunks_(options.max_header_bytes) {
  // Not zero-filled: filling 16 KiB per request was a tenth of the router's CPU time.
  cap_ = std::max<std::size_t>(options_.read_chunk_bytes, 1024);
  buf_ = static_cast<char*>(detail::take_block(cap_));
}

ClientStream::~ClientStream() {
  if (options_.cancel != nullptr && options_.cancel->current_ == this) options_.cancel->current_ = nullptr;
  if (deadline_ != nullptr) {  // not parked with its connection
    deadline_->socket = nullptr;
    if (deadline_->armed) deadline_->timer.cancel();
  }
  detail::give_block(buf_, cap_);
}

void ClientStream::set_deadline(std::chrono::milliseconds timeout) {
  detail::Deadline& d = *deadline_;
  d.at = std::chrono::steady_clock::now() + timeout;
  d.expired = false;
  if (!d.armed) {
    arm(deadline_);
  } else if (d.timer.expiry() > d.at) {
    arm(deadline_);  // a shorter timeout than the pending wait's: re-arm (cancels that wait)
  }
}

void ClientStream::cancel() {
  cancelled_ = true;
  boost::system::error_code ignored;
  if (socket_) socket_->cancel(ignored);
}

void ClientCancel::cancel() {
  cancelled_ = true;
  if (current_ != nullptr) current_->cancel();
}

bool ClientStream::make_room() {
  if (end_ < cap_) return true;
  if (begin_ > base_) {  // bytes before begin_ were handed out or parsed: reuse their room
    std::memmove(buf_ + base_, buf_ + begin_, end_ - begin_);
    end_ -= begin_ - base_;
    begin_ = base_;
    return true;
  }
  // Full of unparsed bytes: only a head can need more (a body piece is taken before reading), and
  // once a head is parsed the buffer must not move (head_ points into it).
  if (cap_ >= options_.max_header_bytes || base_ != 0) return false;
  const std::size_t bigger = std::min(cap_ * 2, options_.max_header_bytes);
  char* grown = static_cast<char*>(detail::take_block(bigger));
  std::memcpy(grown, buf_, end_);
  detail::give_block(buf_, cap_);
  buf_ = grown;
  cap_ = bigger;
  return true;
}

Task<void> ClientStream::read_more(boost::system::error_code& ec, bool after_write) {
  if (!make_room()) {
    ec = net::error::no_buffer_space;
    co_return;
  }
  // Right after the request: no recv until the answer is there. Otherwise (no reactor) Asio's read.
  end_ +=
      co_await async_read_response(*socket_, after_write ? options_.one_thread_reactor : SocketReactor(),
                                   net::buffer(buf_ + end_, cap_ - end_), net::redirect_error(net::use_awaitable, ec));
}

Expected<std::string_view, ClientError> ClientStream::take_piece() {
  using Result = Expected<std::string_view, ClientError>;
  const std::size_t start = begin_;
  std::size_t n = 0;
  switch (head_.body) {
    case BodyKind::length:
      n = static_cast<std::size_t>(std::min<std::uint64_t>(end_ - begin_, remaining_));
      begin_ += n;
      remaining_ -= n;
      done_ = remaining_ == 0;
      break;
    case BodyKind::chunked: {
      // In place: the data bytes move down over the framing, from `start` on.
      const auto r = chunks_.decode(buf_ + begin_, end_ - begin_, buf_ + begin_, end_ - begin_);
      if (r.error != ParseError::none) {
        ClientError e;
        e.code = ClientErrc::protocol_error;
        e.detail = std::string(to_string(r.error));
        e.before_response = false;
        return Result(unexpected(std::move(e)));
      }
      n = r.produced;
      begin_ += r.consumed;
      done_ = chunks_.done();
      break;
    }
    case BodyKind::until_close:
      n = end_ - begin_;
      begin_ = end_;
      break;
    case BodyKind::none: done_ = true; break;
  }
  if (begin_ == end_) begin_ = end_ = base_;  // nothing left unparsed: the next read starts at base_
  return Result(std::string_view(buf_ + start, n));
}

void ClientStream::recycle() {
  if (options_.pool == nullptr || !done_ || !head_.keep_alive || end_ != begin_ || cancelled_ || !socket_ ||
      !socket_->is_open()) {
    return;
  }
  // The deadline goes with the connection, its wait (if any) still pending: the next request on it
  // then arms no timer.
  deadline_->at = std::chrono::steady_clock::time_point::max();
  deadline_->socket = nullptr;
  options_.pool->put(endpoint_, std::move(*socket_), std::move(deadline_));
  deadline_ = nullptr;
  socket_.reset();
}

namespace {

// Error results are built outside the coroutines: g++ 12 mishandles some temporaries (braced
// initializers) in co_return expressions.
template <class T>
Expected<T, ClientError> client_error(ClientErrc code, std::string detail, bool before_response) {
  ClientError e;
  e.code = code;
  e.detail = std::move(detail);
  e.before_response = before_response;
  return unexpected(std::move(e));
}

// A request as bytes: its header, and the body moved from the ClientRequest (or the caller's
// bytes, ClientRequest::body_view).
struct WireRequest {
  std::string head;
  std::string owned;
  std::string_view view;
  std::string_view body() const { return view.empty() ? std::string_view(owned) : view; }
};

// Serialized by hand: Beast's generic serializer cost as many instructions as the rest of the
// router's request path. The bytes are what Beast's keep_alive() + prepare_payload() would give:
// Content-Length when there is a body (or for POST, PUT and OPTIONS), `Connection: close` when
// the connection is not kept.
WireRequest make_request(ClientRequest& request, const std::string& where, bool keep_alive) {
  WireRequest w;
  w.owned = std::move(request.body);
  w.view = request.body_view;
  const std::size_t body_size = w.body().size();
  w.head.reserve(192 + request.target.size());
  const auto method = bhttp::to_string(request.method);
  append_pieces(w.head, {std::string_view(method.data(), method.size()), " ", request.target,
                         " HTTP/1.1\r\nHost: ", where, "\r\nUser-Agent: disagg-engine\r\n"});
  for (const auto& [name, value] : request.headers) append_field(w.head, name, value);
  const bhttp::verb m = request.method;
  if (body_size != 0 || m == bhttp::verb::post) append_field(w.head, "Content-Type", request.content_type);
  if (body_size != 0 || m == bhttp::verb::post || m == bhttp::verb::put || m == bhttp::verb::options) {
    char digits[24];
    append_field(w.head, "Content-Length", decimal(digits, body_size));
  }
  append_pieces(w.head, {keep_alive ? "\r\n" : "Connection: close\r\n\r\n"});
  return w;
}

}  // namespace

Task<Expected<std::unique_ptr<ClientStream>, ClientError>> ClientStream::open(net::any_io_executor executor,
                                                                              std::string host, std::uint16_t port,
                                                                              ClientRequest request,
                                                                              ClientOptions options) {
  using Stream = std::unique_ptr<ClientStream>;
  boost::system::error_code ec;
  const std::string where = host + ":" + std::to_string(port);
  const bool keep_alive = options.pool != nullptr;
  const bool head_request = request.method == bhttp::verb::head;
  // The serialized request, kept for a retry after a stale pooled connection.
  const WireRequest req = make_request(request, where, keep_alive);
  const std::string_view req_body = req.body();
  const std::array<net::const_buffer, 2> req_buffers = {net::buffer(req.head),
                                                        net::buffer(req_body.data(), req_body.size())};

  for (int attempt = 0;; ++attempt) {
    Stream s(new ClientStream(options));
    s->endpoint_ = where;
    if (options.cancel != nullptr) {
      if (options.cancel->cancelled_) co_return client_error<Stream>(ClientErrc::cancelled, where, true);
      options.cancel->current_ = s.get();
    }
    if (keep_alive && attempt == 0) {
      if (auto pooled = options.pool->take(where, executor)) {
        s->socket_.emplace(std::move(pooled->socket));
        s->deadline_ = std::move(pooled->deadline);
        s->reused_ = true;
      }
    }
    if (s->deadline_ == nullptr) s->deadline_ = std::make_shared<detail::Deadline>(executor);
    if (!s->reused_) {
      s->socket_.emplace(executor);
      s->deadline_->socket = &*s->socket_;  // for connect_timeout
      // Resolve (an IP literal resolves without DNS) and connect, both under connect_timeout.
      tcp::resolver resolver(executor);
      net::steady_timer resolve_timer(executor, options.connect_timeout);
      resolve_timer.async_wait([&resolver](const boost::system::error_code& e) {
        if (!e) resolver.cancel();
      });
      const auto endpoints =
          co_await resolver.async_resolve(host, std::to_string(port), net::redirect_error(net::use_awaitable, ec));
      resolve_timer.cancel();
      if (ec) {
        const ClientErrc code =
            ec == net::error::operation_aborted ? ClientErrc::connect_timeout : ClientErrc::resolve_failed;
        co_return client_error<Stream>(code, where + ": " + ec.message(), true);
      }
      if (s->cancelled_) co_return client_error<Stream>(ClientErrc::cancelled, where, true);
      s->set_deadline(options.connect_timeout);
      co_await net::async_connect(*s->socket_, endpoints, net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        const ClientErrc code = s->cancelled_           ? ClientErrc::cancelled
                                : s->deadline_->expired ? ClientErrc::connect_timeout
                                                        : ClientErrc::connect_failed;
        const std::string why = s->deadline_->expired ? "timed out" : ec.message();
        co_return client_error<Stream>(code, where + ": " + why, true);
      }
      s->socket_->set_option(tcp::no_delay(true), ec);
    }
    s->deadline_->socket = &*s->socket_;
    // Writing and the response head share first_byte_timeout.
    s->set_deadline(options.first_byte_timeout);
    const std::size_t sent = write_now(*s->socket_, req_buffers, ec);
    if (!ec && sent < net::buffer_size(req_buffers)) {
      beast::buffers_suffix<std::array<net::const_buffer, 2>> rest(req_buffers);
      rest.consume(sent);
      co_await net::async_write(*s->socket_, rest, net::redirect_error(net::use_awaitable, ec));
    }
    const bool written = !ec;
    // The first read follows a request written in full, in this handler (read_response.h); a
    // request that needed async_write suspended, and an early answer may have raised its event.
    bool after_write = sent == net::buffer_size(req_buffers);
    ParseError bad = ParseError::none;
    if (written) {
      std::size_t searched = 0;
      while (true) {
        const std::size_t head_end = find_head_end(std::string_view(s->buf_, s->end_), searched);
        if (head_end == 0) {
          co_await s->read_more(ec, after_write);
          after_write = false;
          if (!ec && s->end_ == 0) ec = net::error::eof;
          if (ec) break;
          continue;
        }
        bad = parse_response_head(std::string_view(s->buf_, head_end), s->head_, head_request);
        if (bad != ParseError::none) break;
        if (s->head_.status < 200 && s->head_.status != 101) {  // 100 Continue and the like: skipped
          std::memmove(s->buf_, s->buf_ + head_end, s->end_ - head_end);
          s->end_ -= head_end;
          searched = 0;
          continue;
        }
        s->base_ = s->begin_ = head_end;
        s->remaining_ = s->head_.content_length;
        s->done_ = s->head_.body == BodyKind::none || (s->head_.body == BodyKind::length && s->remaining_ == 0);
        if (s->done_) s->recycle();
        co_return Expected<Stream, ClientError>(std::move(s));
      }
    }
    if (bad != ParseError::none) {
      co_return client_error<Stream>(ClientErrc::protocol_error, where + ": " + std::string(to_string(bad)), true);
    }
    if (ec == net::error::no_buffer_space) {
      co_return client_error<Stream>(
          ClientErrc::protocol_error,
          where + ": response header over " + std::to_string(options.max_header_bytes) + " bytes", true);
    }
    // A pooled connection the upstream closed unseen (the pool does not probe them) fails before
    // any response byte: resend once on a new connection; the upstream never saw the request.
    // Never after a response byte arrived, and not after a timeout (the upstream may be working).
    if (s->reused_ && !s->deadline_->expired && !s->cancelled_ && s->end_ == 0) continue;
    const ClientErrc code = s->cancelled_           ? ClientErrc::cancelled
                            : s->deadline_->expired ? ClientErrc::first_byte_timeout
                            : written               ? ClientErrc::read_failed
                                                    : ClientErrc::write_failed;
    const std::string why = s->deadline_->expired ? "timed out" : ec.message();
    co_return client_error<Stream>(code, where + ": " + why, true);
  }
}

Task<Expected<std::string_view, ClientError>> ClientStream::read_some() {
  using Result = Expected<std::string_view, ClientError>;
  while (!done_) {
    if (cancelled_) co_return client_error<std::string_view>(ClientErrc::cancelled, "", false);
    if (begin_ > base_) {  // the last piece is no longer needed: unparsed bytes move down
      std::memmove(buf_ + base_, buf_ + begin_, end_ - begin_);
      end_ -= begin_ - base_;
      begin_ = base_;
    }
    if (end_ > begin_) {
      // Bytes already received are decoded here: an asynchronous read would take a round through
      // the reactor for them without reading anything.
      auto piece = take_piece();
      if (!piece) co_return Result(unexpected(piece.error()));
      if (done_) recycle();
      if (!piece->empty()) co_return piece;
      if (done_) break;
    }
    set_deadline(options_.idle_timeout);
    boost::system::error_code ec;
    const std::size_t before = end_;
    co_await read_more(ec);
    if (!ec && end_ == before) ec = net::error::eof;
    if (ec == net::error::eof && head_.body == BodyKind::until_close && !cancelled_) {
      done_ = true;  // the body ends with the connection
      break;
    }
    if (ec) {
      const ClientErrc code = cancelled_           ? ClientErrc::cancelled
                              : deadline_->expired ? ClientErrc::idle_timeout
                                                   : ClientErrc::read_failed;
      co_return client_error<std::string_view>(code, deadline_->expired ? "timed out" : ec.message(), false);
    }
  }
  co_return Result(std::string_view{});
}

std::string_view ClientResponse::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (iequals(n, name)) return v;
  }
  return {};
}

Task<Expected<ClientResponse, ClientError>> fetch(net::any_io_executor executor, std::string host, std::uint16_t port,
                                                  ClientRequest request, ClientOptions options) {
  using Result = Expected<ClientResponse, ClientError>;
  auto opened = co_await ClientStream::open(executor, std::move(host), port, std::move(request), options);
  if (!opened) co_return Result(unexpected(opened.error()));
  ClientStream& s = **opened;
  ClientResponse out;
  out.status = s.status();
  for (const Field& f : s.headers().all_fields()) out.headers.emplace_back(f.name, f.value);
  while (true) {
    auto piece = co_await s.read_some();
    if (!piece) co_return Result(unexpected(piece.error()));
    if (piece->empty()) break;
    if (out.body.size() + piece->size() > options.max_body_bytes) {
      co_return client_error<ClientResponse>(ClientErrc::body_too_large,
                                             "over " + std::to_string(options.max_body_bytes) + " bytes", false);
    }
    out.body.append(*piece);
  }
  co_return Result(std::move(out));
}

}  // namespace disagg::http
