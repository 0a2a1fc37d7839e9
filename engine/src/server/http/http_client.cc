#include "http_client.h"

#include <unistd.h>

#include <array>
#include <limits>

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

ConnectionPool::~ConnectionPool() {
  for (auto& [endpoint, list] : idle_) {
    for (const Idle& c : list) {
      if (c.fd >= 0) ::close(c.fd);
    }
  }
}

std::optional<tcp::socket> ConnectionPool::take(const std::string& endpoint,
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
      continue;
    }
    boost::system::error_code ec;
    if (c.socket && c.socket->get_executor() == executor) {
      ++reused_;
      return std::move(c.socket);
    }
    if (c.socket) {  // parked from another io_context or strand: move the descriptor over
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
    return s;
  }
  return std::nullopt;
}

void ConnectionPool::put(const std::string& endpoint, tcp::socket socket) {
  if (!socket.is_open()) return;
  Idle c;
  c.since = std::chrono::steady_clock::now();
  if (!options_.keep_registered) {
    boost::system::error_code ec;
    c.v6 = socket.local_endpoint(ec).address().is_v6();
    if (ec) return;
  }
  std::lock_guard lock(mu_);
  auto& list = idle_[endpoint];
  if (list.size() >= options_.max_idle_per_endpoint) return;  // `socket` closes on return
  if (options_.keep_registered) {
    c.socket.emplace(std::move(socket));
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
  for (const Idle& c : gone) {
    if (c.fd >= 0) ::close(c.fd);
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

ClientStream::ClientStream(net::any_io_executor executor, ClientOptions options)
    : options_(options), stream_(std::move(executor)) {
  parser_.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
  // Streamed: the caller bounds what it keeps. (Not boost::none: Beast 1.74 then refuses every
  // Content-Length body, comparing the length against an empty optional.)
  parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
  // Not zero-filled: filling 16 KiB per request was a tenth of the router's CPU time.
  chunk_ = std::unique_ptr<char, detail::BlockDeleter>(
      static_cast<char*>(detail::take_block(options_.read_chunk_bytes)),
      detail::BlockDeleter{options_.read_chunk_bytes});
  // Beast reads at most the free space of this buffer per system call (512 bytes when empty):
  // room for a whole small response, and fewer reads for long ones.
  buffer_.reserve(options_.read_chunk_bytes);
}

void ClientStream::recycle() {
  if (options_.pool == nullptr || !parser_.is_done() || !parser_.get().keep_alive() ||
      buffer_.size() != 0 || cancelled_) {
    return;
  }
  stream_.expires_never();
  options_.pool->put(endpoint_, std::move(stream_.socket()));
}

void ClientStream::cancel() {
  cancelled_ = true;
  stream_.cancel();
}

ClientStream::~ClientStream() {
  if (options_.cancel != nullptr && options_.cancel->current_ == this) options_.cancel->current_ = nullptr;
}

void ClientCancel::cancel() {
  cancelled_ = true;
  if (current_ != nullptr) current_->cancel();
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
  const auto field = [](std::string& out, std::string_view name, std::string_view value) {
    out.append(name).append(": ").append(value).append("\r\n");
  };
  WireRequest w;
  w.owned = std::move(request.body);
  w.view = request.body_view;
  const std::size_t body_size = w.body().size();
  w.head.reserve(192 + request.target.size());
  const auto method = bhttp::to_string(request.method);
  w.head.append(method.data(), method.size()).append(" ").append(request.target).append(" HTTP/1.1\r\n");
  field(w.head, "Host", where);
  field(w.head, "User-Agent", "disagg-engine");
  for (const auto& [name, value] : request.headers) field(w.head, name, value);
  const bhttp::verb m = request.method;
  if (body_size != 0 || m == bhttp::verb::post) field(w.head, "Content-Type", request.content_type);
  if (body_size != 0 || m == bhttp::verb::post || m == bhttp::verb::put || m == bhttp::verb::options) {
    field(w.head, "Content-Length", std::to_string(body_size));
  }
  if (!keep_alive) field(w.head, "Connection", "close");
  w.head.append("\r\n");
  return w;
}

ClientErrc header_error_code(const boost::system::error_code& ec, bool cancelled) {
  if (ec == beast::error::timeout) return ClientErrc::first_byte_timeout;
  if (cancelled) return ClientErrc::cancelled;
  if (ec.category() == bhttp::make_error_code(bhttp::error::bad_field).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    return ClientErrc::protocol_error;
  }
  return ClientErrc::read_failed;
}

}  // namespace

Task<Expected<std::unique_ptr<ClientStream>, ClientError>> ClientStream::open(
    net::any_io_executor executor, std::string host, std::uint16_t port, ClientRequest request,
    ClientOptions options) {
  using Stream = std::unique_ptr<ClientStream>;
  boost::system::error_code ec;
  const std::string where = host + ":" + std::to_string(port);
  const bool keep_alive = options.pool != nullptr;
  // The serialized request, kept for a retry after a stale pooled connection.
  const WireRequest req = make_request(request, where, keep_alive);
  const std::string_view req_body = req.body();
  const std::array<net::const_buffer, 2> req_buffers = {net::buffer(req.head),
                                                        net::buffer(req_body.data(), req_body.size())};

  for (int attempt = 0;; ++attempt) {
    Stream s(new ClientStream(executor, options));
    s->endpoint_ = where;
    if (options.cancel != nullptr) {
      if (options.cancel->cancelled_) co_return client_error<Stream>(ClientErrc::cancelled, where, true);
      options.cancel->current_ = s.get();
    }
    if (keep_alive && attempt == 0) {
      if (auto pooled = options.pool->take(where, executor)) {
        s->stream_.socket() = std::move(*pooled);
        s->reused_ = true;
      }
    }
    if (!s->reused_) {
      // Resolve (an IP literal resolves without DNS) and connect, both under connect_timeout.
      tcp::resolver resolver(executor);
      net::steady_timer resolve_timer(executor, options.connect_timeout);
      resolve_timer.async_wait([&resolver](const boost::system::error_code& e) {
        if (!e) resolver.cancel();
      });
      const auto endpoints = co_await resolver.async_resolve(
          host, std::to_string(port), net::redirect_error(net::use_awaitable, ec));
      resolve_timer.cancel();
      if (ec) {
        const ClientErrc code = ec == net::error::operation_aborted ? ClientErrc::connect_timeout
                                                                  : ClientErrc::resolve_failed;
        co_return client_error<Stream>(code, where + ": " + ec.message(), true);
      }
      if (s->cancelled_) co_return client_error<Stream>(ClientErrc::cancelled, where, true);
      s->stream_.expires_after(options.connect_timeout);
      co_await s->stream_.async_connect(endpoints, net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        const ClientErrc code =
            s->cancelled_              ? ClientErrc::cancelled
            : ec == beast::error::timeout ? ClientErrc::connect_timeout
                                          : ClientErrc::connect_failed;
        co_return client_error<Stream>(code, where + ": " + ec.message(), true);
      }
      s->stream_.socket().set_option(tcp::no_delay(true), ec);
    }
    const std::size_t sent = write_now(s->stream_.socket(), req_buffers, ec);
    if (!ec && sent < net::buffer_size(req_buffers)) {
      co_await write_rest(s->stream_, req_buffers, sent, options.first_byte_timeout, ec);
    }
    const bool written = !ec;
    if (written) {
      s->stream_.expires_after(options.first_byte_timeout);
      co_await bhttp::async_read_header(s->stream_, s->buffer_, s->parser_,
                                        net::redirect_error(net::use_awaitable, ec));
      if (!ec) co_return Expected<Stream, ClientError>(std::move(s));
    }
    // A pooled connection the upstream closed unseen (the pool does not probe them) fails before
    // any response byte: resend once on a new connection; the upstream never saw the request.
    // Never after a response byte arrived, and not after a timeout (the upstream may be working).
    if (s->reused_ && ec != beast::error::timeout && !s->cancelled_ && !s->parser_.got_some() &&
        s->buffer_.size() == 0) {
      continue;
    }
    const ClientErrc code = s->cancelled_ ? ClientErrc::cancelled
                            : written     ? header_error_code(ec, false)
                                          : ClientErrc::write_failed;
    co_return client_error<Stream>(code, where + ": " + ec.message(), true);
  }
}

Task<Expected<std::string_view, ClientError>> ClientStream::read_some() {
  using Result = Expected<std::string_view, ClientError>;
  while (!parser_.is_done()) {
    if (cancelled_) co_return client_error<std::string_view>(ClientErrc::cancelled, "", false);
    auto& body = parser_.get().body();
    body.data = chunk_.get();
    body.size = options_.read_chunk_bytes;
    boost::system::error_code ec;
    if (buffer_.size() != 0) {
      // Bytes already received are parsed here: an asynchronous read would take a round through
      // the reactor for them without reading anything.
      const std::size_t used = parser_.put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == bhttp::error::need_more || ec == bhttp::error::need_buffer) ec = {};
      if (ec) co_return client_error<std::string_view>(ClientErrc::read_failed, ec.message(), false);
      const std::size_t n = options_.read_chunk_bytes - parser_.get().body().size;
      if (n > 0) {
        const std::size_t all = n + parse_buffered();
        if (parser_.is_done()) recycle();
        co_return Result(std::string_view(chunk_.get(), all));
      }
      if (used > 0 || parser_.is_done()) continue;
    }
    stream_.expires_after(options_.idle_timeout);
    co_await bhttp::async_read_some(stream_, buffer_, parser_,
                                    net::redirect_error(net::use_awaitable, ec));
    const std::size_t n = options_.read_chunk_bytes - parser_.get().body().size;
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) {
      ClientErrc code = ClientErrc::read_failed;
      if (ec == beast::error::timeout) code = ClientErrc::idle_timeout;
      else if (cancelled_) code = ClientErrc::cancelled;
      co_return client_error<std::string_view>(code, ec.message(), false);
    }
    if (n > 0) {
      const std::size_t all = n + parse_buffered();
      if (parser_.is_done()) recycle();
      co_return Result(std::string_view(chunk_.get(), all));
    }
  }
  recycle();
  co_return Result(std::string_view{});
}

std::size_t ClientStream::parse_buffered() {
  // Every complete body byte already received joins the piece: a piece ends where the received bytes
  // do, never at a chunk boundary (whose CRLF or next chunk header may already sit in the buffer, so
  // "bytes are buffered" does not mean "more body is ready"). A parse error is left in the buffer for
  // the next read_some() to report.
  std::size_t added = 0;
  while (buffer_.size() != 0 && !parser_.is_done() && parser_.get().body().size > 0) {
    const std::size_t before = parser_.get().body().size;
    boost::system::error_code ec;
    const std::size_t used = parser_.put(buffer_.data(), ec);
    buffer_.consume(used);
    added += before - parser_.get().body().size;
    if ((ec && ec != bhttp::error::need_more && ec != bhttp::error::need_buffer) || used == 0) break;
  }
  return added;
}

Task<Expected<ClientResponse, ClientError>> fetch(net::any_io_executor executor, std::string host,
                                                  std::uint16_t port, ClientRequest request,
                                                  ClientOptions options) {
  using Result = Expected<ClientResponse, ClientError>;
  auto opened = co_await ClientStream::open(executor, std::move(host), port, std::move(request),
                                            options);
  if (!opened) co_return Result(unexpected(opened.error()));
  ClientStream& s = **opened;
  ClientResponse out;
  out.status = s.status();
  out.headers = s.headers();
  while (true) {
    auto piece = co_await s.read_some();
    if (!piece) co_return Result(unexpected(piece.error()));
    if (piece->empty()) break;
    if (out.body.size() + piece->size() > options.max_body_bytes) {
      co_return client_error<ClientResponse>(
          ClientErrc::body_too_large, "over " + std::to_string(options.max_body_bytes) + " bytes",
          false);
    }
    out.body.append(*piece);
  }
  co_return Result(std::move(out));
}

}  // namespace disagg::http
