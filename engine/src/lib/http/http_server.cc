#include "http_server.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <optional>

#include "memory_release.h"
#include "lib/openai/openai_error.h"
#include "serialize.h"
#include "write_now.h"

namespace disagg::http {

namespace {

// "HTTP/1.1 <status> <reason>\r\n", built once per status code: formatting the number and looking
// up the reason per response showed in the router's profile.
std::string_view status_line(unsigned status) {
  static const std::array<std::string, 600> lines = [] {
    std::array<std::string, 600> all;
    for (unsigned s = 100; s < all.size(); ++s) {
      const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(s));
      all[s] = "HTTP/1.1 " + std::to_string(s) + " " + std::string(reason.data(), reason.size()) + "\r\n";
    }
    return all;
  }();
  return lines[status >= 100 && status < lines.size() ? status : 500];
}

// Response headers are serialized by hand (the bytes Beast's keep_alive() + prepare_payload()
// give): Beast's generic serializer cost as many instructions as the rest of the router's request
// path. Appends the status line, Server, `headers` and Content-Type.
void append_head(std::string& out, unsigned version, unsigned status, std::string_view server,
                 std::span<const Header> headers, std::string_view content_type) {
  const std::size_t start = out.size();
  append_pieces(out, {status_line(status), "Server: ", server, "\r\n"});
  if (version == 10) out[start + 7] = '0';  // "HTTP/1.0"
  for (const Header& h : headers) append_field(out, h.name, h.value);
  append_field(out, "Content-Type", content_type);
}

// Appends the Connection field that `keep_alive` needs in this HTTP version, then the blank line.
void end_head(std::string& out, unsigned version, bool keep_alive) {
  if (version >= 11 && !keep_alive) {
    append_pieces(out, {"Connection: close\r\n\r\n"});
  } else if (version < 11 && keep_alive) {
    append_pieces(out, {"Connection: keep-alive\r\n\r\n"});
  } else {
    append_pieces(out, {"\r\n"});
  }
}

// The size line of a chunk of `n` bytes ("<hex>\r\n") in `buf`; returns its length.
std::size_t chunk_size_line(char (&buf)[24], std::size_t n) {
  return static_cast<std::size_t>(std::snprintf(buf, sizeof buf, "%zx\r\n", n));
}

using Clock = std::chrono::steady_clock;

constexpr std::string_view kCrlf = "\r\n";
constexpr std::string_view kLastChunk = "0\r\n\r\n";

// The bytes received and not yet parsed.
std::string_view buffered(const beast::flat_buffer& buffer) {
  const auto data = buffer.data();
  return {static_cast<const char*>(data.data()), data.size()};
}

// How much one read into `buffer` asks for: as much as Beast's own reads did (its free room, at
// least 512 bytes, at most 64 KiB); the parser applies the header and body limits to what arrives.
std::size_t read_size(const beast::flat_buffer& buffer) {
  const std::size_t room = buffer.capacity() - buffer.size();
  return std::min<std::size_t>(std::max<std::size_t>(512, room), 65536);
}

// The reply to a request head that does not parse.
unsigned parse_error_status(ParseError e) {
  switch (e) {
    case ParseError::too_many_fields: return 431;
    case ParseError::bad_version: return 505;
    case ParseError::unsupported_transfer_encoding: return 501;
    default: return 400;
  }
}

}  // namespace

ParseError Request::assign_head(std::string_view head) {
  raw_.assign(head.data(), head.size());
  body_.clear();
  return parse_request_head(raw_, head_);
}

std::string_view target_path(std::string_view target) {
  const std::size_t q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

// ---- ResponseWriter -------------------------------------------------------------------------

ResponseWriter::ResponseWriter(beast::tcp_stream& stream, const Request& request, bool keep_alive,
                               const ServerOptions& options, const std::atomic<bool>* draining,
                               std::shared_ptr<CloseWatch> close_watch)
    : stream_(stream),
      options_(options),
      draining_(draining),
      watch_(std::move(close_watch)),
      version_(request.version()),
      keep_alive_(keep_alive) {}

ResponseWriter::~ResponseWriter() {
  unwatch_close();
}

std::string& ResponseWriter::head_buffer() {
  std::string& head = watch_ != nullptr ? watch_->head : own_head_;
  head.clear();
  head.reserve(256);
  return head;
}

void ResponseWriter::unwatch_close() {
  if (watch_ == nullptr || !watch_->armed) return;
  watch_->armed = false;
  watch_->on_close.reset();
}

// ---- read of the next request -----------------------------------------------------------------

namespace {

// Completion of the read of the next request (CloseWatch). Runs on the connection's strand (the
// socket's executor).
struct NextReadDone {
  std::shared_ptr<CloseWatch> w;
  void operator()(const boost::system::error_code& ec, std::size_t bytes) const {
    w->reading = false;
    if (!ec && bytes > 0) {
      w->buffer.commit(bytes);  // the next request (or part of it): the client is still there
      w->armed = false;
      w->on_close.reset();
    } else {
      w->read_failed = true;  // EOF, a reset, an idle timeout, a drain or our own close
      if (w->armed) {
        w->armed = false;
        w->closed = true;
        w->on_close();
        w->on_close.reset();
      }
    }
    if (w->waiter) {  // the session waits for this read: resume it (we are on its strand)
      auto resume = std::move(*w->waiter);
      w->waiter.reset();
      resume();
    }
  }
};

// The lazy idle timer of CloseWatch: ends a wait for the next request that has lasted
// `timeout`; re-arms for the end of a wait that began later; stops when nobody waits.
struct IdleTick {
  std::shared_ptr<CloseWatch> w;
  std::chrono::milliseconds timeout;
  void operator()(const boost::system::error_code& ec) const;
};

void arm_idle_timer(const std::shared_ptr<CloseWatch>& w, std::chrono::milliseconds timeout) {
  w->timer_armed = true;
  w->idle_timer.expires_at(w->wait_since + timeout);
  w->idle_timer.async_wait(IdleTick{w, timeout});
}

void IdleTick::operator()(const boost::system::error_code& ec) const {
  w->timer_armed = false;
  if (ec || w->socket == nullptr || !w->waiter) return;  // cancelled, connection gone, or no wait
  if (std::chrono::steady_clock::now() - w->wait_since < timeout) {
    arm_idle_timer(w, timeout);  // this wait began after the timer was armed
    return;
  }
  boost::system::error_code ignored;
  w->socket->cancel(ignored);  // the read completes aborted, and the session closes the connection
}

// Waits (on the connection's strand) until the pending read of the next request completes, at
// most `timeout` from `now`.
Task<void> wait_next_read(const std::shared_ptr<CloseWatch>& w, std::chrono::milliseconds timeout,
                          Clock::time_point now) {
  if (!w->reading) co_return;
  w->wait_since = now;
  if (!w->timer_armed) arm_idle_timer(w, timeout);
  co_await net::async_initiate<const net::use_awaitable_t<>&, void()>(
      [&w](auto handler) { w->waiter.emplace(std::move(handler)); }, net::use_awaitable);
}

}  // namespace

void start_next_read(const std::shared_ptr<CloseWatch>& w) {
  if (w->reading || w->read_failed || w->socket == nullptr || w->buffer.size() != 0) return;
  w->reading = true;
  // Started when the next request cannot be there yet: the read that got this one drained the
  // socket, so this one waits for readiness instead of failing a recv first (read_response.h).
  async_read_draining(*w->socket, w->reactor, w->buffer.prepare(read_size(w->buffer)), NextReadDone{w});
}

bool ResponseWriter::decide_keep_alive() {
  if (draining_ != nullptr && draining_->load(std::memory_order_acquire)) keep_alive_ = false;
  return keep_alive_;
}

Task<bool> ResponseWriter::send(unsigned status, std::string_view body, std::string_view content_type,
                                std::span<const Header> headers) {
  if (state_ != State::none || broken_) co_return false;
  state_ = State::sent;
  unwatch_close();
  // Header and body in one gathered write.
  std::string& head = head_buffer();
  append_head(head, version_, status, options_.server_name, headers, content_type);
  if (status >= 200 && status != 204 && status != 304) {
    char digits[24];
    append_field(head, "Content-Length", decimal(digits, body.size()));
  }
  end_head(head, version_, decide_keep_alive());
  const std::array<net::const_buffer, 2> buffers = {net::buffer(head), net::buffer(body)};
  boost::system::error_code ec;
  const std::size_t sent = write_now(stream_.socket(), buffers, ec);
  if (!ec && sent < net::buffer_size(buffers)) co_await write_rest(stream_, buffers, sent, options_.write_timeout, ec);
  if (ec) broken_ = true;
  co_return !broken_;
}

Task<bool> ResponseWriter::send_error(unsigned status, std::string_view message, std::string_view param,
                                      std::string_view code, std::span<const Header> headers) {
  co_return co_await send(status, openai_error_body(status, message, param, code), "application/json", headers);
}

Task<bool> ResponseWriter::start_stream(unsigned status, std::string_view content_type, std::span<const Header> headers,
                                        std::string_view first) {
  if (state_ != State::none || broken_) co_return false;
  state_ = State::streaming;
  std::string& head = head_buffer();
  append_head(head, version_, status, options_.server_name, headers, content_type);
  append_pieces(head, {"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"});
  end_head(head, version_, decide_keep_alive());
  // The first chunk, if given, goes in the same write as the header.
  char size_line[24];
  const std::size_t n = first.empty() ? 0 : chunk_size_line(size_line, first.size());
  const std::array<net::const_buffer, 4> buffers = {net::buffer(head), net::buffer(size_line, n),
                                                    net::buffer(first.data(), first.size()),
                                                    net::buffer(kCrlf.data(), first.empty() ? 0 : 2)};
  boost::system::error_code ec;
  const std::size_t sent = write_now(stream_.socket(), buffers, ec);
  if (!ec && sent < net::buffer_size(buffers)) co_await write_rest(stream_, buffers, sent, options_.write_timeout, ec);
  if (ec) broken_ = true;
  co_return !broken_;
}

Task<bool> ResponseWriter::write(std::string_view data) {
  if (state_ != State::streaming || broken_) co_return false;
  if (data.empty()) co_return true;
  // Chunk framing by hand (hex size, CRLF, data, CRLF) in one gathered write: Beast's chunk
  // buffer sequences cost more than the write itself.
  char size_line[24];
  const std::array<net::const_buffer, 3> chunk = {net::buffer(size_line, chunk_size_line(size_line, data.size())),
                                                  net::buffer(data.data(), data.size()),
                                                  net::buffer(kCrlf.data(), kCrlf.size())};
  boost::system::error_code ec;
  const std::size_t sent = write_now(stream_.socket(), chunk, ec);
  if (!ec && sent < net::buffer_size(chunk)) co_await write_rest(stream_, chunk, sent, options_.write_timeout, ec);
  if (ec) broken_ = true;
  co_return !broken_;
}

Task<bool> ResponseWriter::finish(std::string_view last) {
  if (state_ != State::streaming || broken_) co_return false;
  state_ = State::finished;
  unwatch_close();
  // The final chunk, if given, goes in the same write as the end of the stream.
  char size_line[24];
  const std::size_t n = last.empty() ? 0 : chunk_size_line(size_line, last.size());
  const std::array<net::const_buffer, 4> buffers = {net::buffer(size_line, n), net::buffer(last.data(), last.size()),
                                                    net::buffer(kCrlf.data(), last.empty() ? 0 : 2),
                                                    net::buffer(kLastChunk.data(), kLastChunk.size())};
  boost::system::error_code ec;
  const std::size_t sent = write_now(stream_.socket(), buffers, ec);
  if (!ec && sent < net::buffer_size(buffers)) co_await write_rest(stream_, buffers, sent, options_.write_timeout, ec);
  if (ec) broken_ = true;
  co_return !broken_;
}

void ResponseWriter::abort() {
  unwatch_close();
  broken_ = true;
  boost::system::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
}

// ---- HttpServer -----------------------------------------------------------------------------

namespace detail {

struct ServerConn {
  explicit ServerConn(net::any_io_executor ex) : strand(ex), watch(ex), read_timer(std::move(ex)) {}
  net::any_io_executor strand;
  beast::tcp_stream* stream = nullptr;  // set and read on the strand only
  bool idle = true;                     // waiting for a request; strand only
  CloseWatch watch;                     // read buffer, next-request read, close watch; strand only
  Request request;                      // the request being served; reused (keeps its capacity)

  // The deadline of the read under way (read_before()). Strand only. Armed lazily, as
  // CloseWatch::idle_timer: a read sets its deadline and arms the timer only when no wait that
  // ends no later is pending, and the timer, when it fires, re-arms for a deadline that moved on.
  // So a body read in many pieces costs no timer operation per read.
  net::steady_timer read_timer;
  Clock::time_point read_deadline{};
  Clock::time_point timer_at{};  // expiry of the pending wait, while timer_armed
  bool timer_armed = false;
  bool read_pending = false;
  bool read_expired = false;

  // Reclaim (HttpServer::reclaim_idle_locked), read by the acceptor's thread. When the connection
  // began to wait for a request's first byte with nothing buffered (steady clock ticks, at least
  // 1); 0 while a request is under way. Written by the strand.
  std::atomic<Clock::rep> idle_since{0};
  // Chosen to be closed, and counted in HttpServer::closing_ until this is cleared.
  std::atomic<bool> reclaim{false};
};

}  // namespace detail

namespace {

using Conn = detail::ServerConn;

void arm_read_timer(const std::shared_ptr<Conn>& c);

// The read timer's completion: ends the read under way once its deadline passed.
void on_read_timer(const std::shared_ptr<Conn>& c, Clock::time_point at, const boost::system::error_code& ec) {
  if (ec || !c->timer_armed || at != c->timer_at) return;  // cancelled, or replaced by an earlier wait
  c->timer_armed = false;
  if (!c->read_pending || c->stream == nullptr) return;  // no read now: the next one arms again
  if (Clock::now() < c->read_deadline) {
    arm_read_timer(c);  // the deadline moved on (a body read made progress)
    return;
  }
  c->read_expired = true;
  boost::system::error_code ignored;
  c->stream->socket().cancel(ignored);  // the read completes aborted; the socket stays open
}

void arm_read_timer(const std::shared_ptr<Conn>& c) {
  if (c->timer_armed && c->timer_at <= c->read_deadline) return;
  c->timer_armed = true;
  c->timer_at = c->read_deadline;
  c->read_timer.expires_at(c->timer_at);  // a later wait pending is cancelled (operation_aborted)
  c->read_timer.async_wait([c, at = c->timer_at](const boost::system::error_code& ec) { on_read_timer(c, at, ec); });
}

// Reads some bytes into `buf`, waiting at most until `deadline`: past it the read fails with
// net::error::timed_out and the socket stays open, so that a 408 can still be written (Beast's
// stream timeouts close the socket). Other failures as async_read_some's. Strand only.
Task<std::size_t> read_before(const std::shared_ptr<Conn>& c, net::mutable_buffer buf, Clock::time_point deadline,
                              boost::system::error_code& ec) {
  c->read_deadline = deadline;
  c->read_pending = true;
  c->read_expired = false;
  arm_read_timer(c);
  const std::size_t n = co_await c->stream->socket().async_read_some(buf, net::redirect_error(net::use_awaitable, ec));
  c->read_pending = false;
  if (ec && c->read_expired) ec = net::error::timed_out;
  co_return n;
}

// Whether to read and discard what the client still sends before closing (see ServerOptions).
enum class Linger : bool { no, yes };

// Answers a request that failed before it reached the handler, then the connection closes; with
// Linger::yes, after reading and discarding what the client still sends (lingering close): until
// it closes its side, linger_timeout passes without a byte, linger_time passes in all, or
// linger_bytes were discarded.
Task<void> reply_and_close(const std::shared_ptr<Conn>& c, const ServerOptions& options, unsigned status,
                           std::string_view message, Linger linger) {
  beast::tcp_stream& stream = *c->stream;
  const std::string body = openai_error_body(status, message);
  std::string head;
  append_head(head, 11, status, options.server_name, {}, "application/json");
  char digits[24];
  append_field(head, "Content-Length", decimal(digits, body.size()));
  end_head(head, 11, false);
  const std::array<net::const_buffer, 2> buffers = {net::buffer(head), net::buffer(body)};
  boost::system::error_code ec;
  const std::size_t sent = write_now(stream.socket(), buffers, ec);
  if (!ec && sent < net::buffer_size(buffers)) co_await write_rest(stream, buffers, sent, options.write_timeout, ec);
  if (ec) co_return;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (linger == Linger::no || ec) co_return;
  beast::flat_buffer& scratch = c->watch.buffer;
  scratch.clear();
  const auto end = Clock::now() + options.linger_time;
  std::size_t discarded = 0;
  while (discarded < options.linger_bytes) {
    const auto deadline = std::min(end, Clock::now() + options.linger_timeout);
    discarded += co_await read_before(c, scratch.prepare(65536), deadline, ec);
    if (ec) break;  // EOF (the client read the answer and closed), a reset or a timeout
  }
}

}  // namespace

HttpServer::HttpServer(net::io_context& ioc, ServerOptions options, Handler handler)
    : ioc_(ioc),
      options_(std::move(options)),
      handler_(std::move(handler)),
      acceptor_(ioc),
      release_timer_(net::make_strand(ioc)) {}

HttpServer::~HttpServer() = default;

Expected<std::unique_ptr<HttpServer>, ServerError> HttpServer::create(net::io_context& ioc, ServerOptions options,
                                                                      Handler handler) {
  std::unique_ptr<HttpServer> s(new HttpServer(ioc, std::move(options), std::move(handler)));
  const std::string where = s->options_.host + ":" + std::to_string(s->options_.port);
  boost::system::error_code ec;
  const auto addr = net::ip::make_address(s->options_.host, ec);
  if (ec) {
    return unexpected(
        ServerError{"'--host' (" + s->options_.host + ") is not an IP address; pass e.g. 127.0.0.1 or 0.0.0.0"});
  }
  const tcp::endpoint ep(addr, s->options_.port);
  s->acceptor_.open(ep.protocol(), ec);
  if (!ec) s->acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s->acceptor_.bind(ep, ec);
  if (!ec) s->acceptor_.listen(s->options_.listen_backlog, ec);
  if (ec) return unexpected(ServerError{"cannot listen on " + where + ": " + ec.message()});
  s->port_ = s->acceptor_.local_endpoint().port();
  return s;
}

void HttpServer::start() {
  net::co_spawn(acceptor_.get_executor(), accept_loop(), net::detached);
  if (options_.memory_release_interval.count() > 0) {
    net::co_spawn(release_timer_.get_executor(), release_loop(), net::detached);
  }
}

Task<void> HttpServer::release_loop() {
  while (true) {
    boost::system::error_code ec;
    release_timer_.expires_after(options_.memory_release_interval);
    co_await release_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    if (ec || draining()) co_return;  // cancelled by drain(), or the server is going away
    release_free_memory(options_.memory_keep_bytes);
  }
}

Task<void> HttpServer::accept_loop() {
  std::size_t next = 0;
  const auto& contexts = options_.connection_contexts;
  while (!draining()) {
    boost::system::error_code ec;
    // A single-threaded context needs no strand (see ServerOptions::connection_contexts).
    const net::any_io_executor strand = contexts.empty()
                                            ? net::any_io_executor(net::make_strand(ioc_))
                                            : net::any_io_executor(contexts[next++ % contexts.size()]->get_executor());
    tcp::socket socket(strand);
    co_await acceptor_.async_accept(socket, net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) co_return;
      // EMFILE and the like: back off briefly instead of spinning.
      net::steady_timer t(acceptor_.get_executor(), std::chrono::milliseconds(10));
      co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto conn = std::make_shared<Conn>(strand);
    bool over_limit = false;
    {
      std::lock_guard lock(conns_mu_);
      // Sweep entries of finished connections now and then, so the list stays bounded
      // (amortized O(1) per accept).
      if (conns_.size() > 2 * active_.load(std::memory_order_acquire) + 64) {
        conns_.remove_if([](const std::weak_ptr<Conn>& w) { return w.expired(); });
      }
      if (counted_connections() >= options_.max_connections) reclaim_idle_locked();
      over_limit = counted_connections() >= options_.max_connections;
      conns_.push_back(conn);
    }
    active_.fetch_add(1, std::memory_order_acq_rel);
    net::co_spawn(strand, session(std::move(socket), conn, over_limit), net::detached);
  }
}

std::size_t HttpServer::counted_connections() const {
  const std::size_t active = active_.load(std::memory_order_acquire);
  const std::size_t closing = closing_.load(std::memory_order_acquire);
  return active > closing ? active - closing : 0;
}

void HttpServer::reclaim_idle_locked() {
  // The longest-idle connections, in a max-heap on idle_since of at most kBatch entries (the
  // newest on top, replaced by an older one): one pass over the list, no allocation.
  constexpr std::size_t kBatch = 32;
  std::array<std::pair<Clock::rep, std::shared_ptr<Conn>>, kBatch> oldest;
  const auto newer = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::size_t n = 0;
  std::size_t idle = 0;
  for (const std::weak_ptr<Conn>& weak : conns_) {
    std::shared_ptr<Conn> c = weak.lock();
    if (c == nullptr || c->reclaim.load(std::memory_order_relaxed)) continue;
    const Clock::rep since = c->idle_since.load(std::memory_order_relaxed);
    if (since == 0) continue;  // a request is under way
    ++idle;
    if (n < kBatch) {
      oldest[n++] = {since, std::move(c)};
      std::push_heap(oldest.begin(), oldest.begin() + static_cast<std::ptrdiff_t>(n), newer);
    } else if (since < oldest[0].first) {
      std::pop_heap(oldest.begin(), oldest.end(), newer);
      oldest[kBatch - 1] = {since, std::move(c)};
      std::push_heap(oldest.begin(), oldest.end(), newer);
    }
  }
  // As nginx's ngx_drain_connections: an eighth of the idle ones, at least 1, at most 32.
  std::size_t take = std::clamp<std::size_t>(idle / 8, 1, kBatch);
  std::sort_heap(oldest.begin(), oldest.begin() + static_cast<std::ptrdiff_t>(n), newer);  // oldest first
  for (std::size_t i = 0; i < n && take > 0; ++i) {
    std::shared_ptr<Conn>& c = oldest[i].second;
    if (c->reclaim.exchange(true, std::memory_order_acq_rel)) continue;
    --take;
    closing_.fetch_add(1, std::memory_order_acq_rel);
    reclaimed_.fetch_add(1, std::memory_order_relaxed);
    net::post(c->strand, [this, c] {
      if (c->stream != nullptr && c->idle_since.load(std::memory_order_relaxed) != 0) {
        boost::system::error_code ignored;
        c->stream->socket().cancel(ignored);  // its wait for a request ends; the session closes
      } else if (c->reclaim.exchange(false, std::memory_order_acq_rel)) {
        closing_.fetch_sub(1, std::memory_order_acq_rel);  // busy again (or gone): not reclaimed
      }
    });
  }
}

void HttpServer::uncount_reclaim(Conn& conn) {
  if (conn.reclaim.load(std::memory_order_relaxed) && conn.reclaim.exchange(false, std::memory_order_acq_rel)) {
    closing_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

Task<void> HttpServer::session(tcp::socket socket, std::shared_ptr<Conn> conn, bool over_limit) {
  beast::tcp_stream stream(std::move(socket));
  conn->stream = &stream;
  // The aliasing pointer shares the connection's ownership: no allocation per request.
  const std::shared_ptr<CloseWatch> next(conn, &conn->watch);
  next->socket = &stream.socket();
  beast::flat_buffer& buffer = next->buffer;
  boost::system::error_code ec;
  if (over_limit) {
    co_await reply_and_close(conn, options_, 503,
                             "too many connections: all " + std::to_string(options_.max_connections) +
                                 " (the server's connection limit) have a request under way; retry later",
                             Linger::yes);
  }
  Request& req = conn->request;
  while (!over_limit && !draining()) {
    ec = {};
    conn->idle = true;
    if (buffer.size() == 0) {
      // Nothing of a request yet: the connection is idle (idle_timeout, a new connection's first
      // request included), and may be reclaimed meanwhile. The header clock does not run yet: a
      // client may open its connection well before it writes (a loaded client writing large bodies
      // on other connections first did, and a clock from the accept cut it off).
      const Clock::time_point now = Clock::now();
      conn->idle_since.store(std::max<Clock::rep>(1, now.time_since_epoch().count()), std::memory_order_relaxed);
      if (next->reading) {
        // The read of this request started during the previous response (CloseWatch).
        co_await wait_next_read(next, options_.idle_timeout, now);
      } else if (!next->read_failed) {
        buffer.commit(co_await read_before(conn, buffer.prepare(read_size(buffer)), now + options_.idle_timeout, ec));
      }
      conn->idle_since.store(0, std::memory_order_relaxed);
      uncount_reclaim(*conn);
      // The client left, the idle timeout, a reclaim or a drain: close silently.
      if (next->read_failed || ec || buffer.size() == 0) break;
    }
    // The header clock starts at the request's first byte, which has just arrived (or came with
    // the previous request): set at the first read below, only if one is needed.
    Clock::time_point head_deadline = Clock::time_point::max();
    // The head: usually buffered whole already (read during the previous response). Each byte is
    // searched once, however the head arrives.
    std::size_t searched = 0;
    std::size_t head_end = 0;
    while ((head_end = find_head_end(buffered(buffer), searched)) == 0 && buffer.size() <= options_.max_header_bytes) {
      if (head_deadline == Clock::time_point::max()) head_deadline = Clock::now() + options_.header_timeout;
      const std::size_t n = co_await read_before(conn, buffer.prepare(read_size(buffer)), head_deadline, ec);
      buffer.commit(n);
      if (ec) break;
    }
    if (ec) {
      if (ec == net::error::timed_out) {
        co_await reply_and_close(conn, options_, 408,
                                 "request header not complete within " +
                                     std::to_string(options_.header_timeout.count()) +
                                     " ms of its first byte (the server's header timeout); send the whole "
                                     "header at once",
                                 Linger::no);
      }
      break;  // otherwise the client left
    }
    conn->idle = false;
    if (head_end == 0 || head_end > options_.max_header_bytes) {
      co_await reply_and_close(
          conn, options_, 431,
          "request header is larger than the limit of " + std::to_string(options_.max_header_bytes) + " bytes",
          Linger::yes);
      break;
    }
    const ParseError bad = req.assign_head(buffered(buffer).substr(0, head_end));
    buffer.consume(head_end);
    if (bad != ParseError::none) {
      co_await reply_and_close(conn, options_, parse_error_status(bad),
                               "malformed HTTP request: " + std::string(to_string(bad)), Linger::yes);
      break;
    }
    const Head& hdr = req.head_;
    if (hdr.body == BodyKind::length && hdr.content_length > options_.max_body_bytes) {
      co_await reply_and_close(conn, options_, 413,
                               "request body (" + std::to_string(hdr.content_length) +
                                   " bytes) is larger than the limit of " + std::to_string(options_.max_body_bytes) +
                                   " bytes",
                               Linger::yes);
      break;
    }
    if (hdr.expect_continue && hdr.version >= 11 && hdr.body != BodyKind::none && buffer.size() == 0) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      const std::array<net::const_buffer, 1> cont = {net::buffer(kContinue.data(), kContinue.size())};
      const std::size_t sent = write_now(stream.socket(), cont, ec);
      if (!ec && sent < kContinue.size()) co_await write_rest(stream, cont, sent, options_.write_timeout, ec);
      if (ec) break;
    }
    // The body: what arrived with the head is taken from the buffer; the rest is read with at most
    // body_timeout between two reads.
    std::string& body = req.body_;
    unsigned refuse = 0;  // the status that ends the connection, when the body is refused
    if (hdr.body == BodyKind::length) {
      const std::size_t need = static_cast<std::size_t>(hdr.content_length);
      const std::size_t take = std::min(buffer.size(), need);
      body.assign(buffered(buffer).data(), take);
      buffer.consume(take);
      if (body.size() < need) body.resize(need);  // read in place below, not through the buffer
      std::size_t have = take;
      while (have < need) {
        have += co_await read_before(conn, net::buffer(body.data() + have, need - have),
                                     Clock::now() + options_.body_timeout, ec);
        if (ec) break;
      }
    } else if (hdr.body == BodyKind::chunked) {
      ChunkedDecoder chunks(options_.max_header_bytes);
      while (true) {
        // Decoded bytes are never more than the input: room for all of it, trimmed after.
        const std::size_t old = body.size();
        body.resize(old + buffer.size());
        const auto r = chunks.decode(buffered(buffer).data(), buffer.size(), body.data() + old, buffer.size());
        body.resize(old + r.produced);
        buffer.consume(r.consumed);
        if (r.error != ParseError::none) {
          refuse = 400;
          break;
        }
        if (body.size() > options_.max_body_bytes) {
          refuse = 413;
          break;
        }
        if (chunks.done()) break;
        buffer.commit(
            co_await read_before(conn, buffer.prepare(read_size(buffer)), Clock::now() + options_.body_timeout, ec));
        if (ec) break;
      }
      if (refuse == 400) {
        co_await reply_and_close(conn, options_, 400, "malformed HTTP request: malformed chunked body", Linger::yes);
        break;
      }
    }
    if (refuse == 413) {
      co_await reply_and_close(
          conn, options_, 413,
          "request body is larger than the limit of " + std::to_string(options_.max_body_bytes) + " bytes",
          Linger::yes);
      break;
    }
    if (ec) {
      if (ec == net::error::timed_out) {
        // Lingers: a client that was only slow, and resumes, still reads why it was cut off.
        co_await reply_and_close(conn, options_, 408,
                                 "request body not received in time: no byte for " +
                                     std::to_string(options_.body_timeout.count()) + " ms (the server's body timeout)",
                                 Linger::yes);
      }
      break;  // otherwise the client left
    }
    const bool keep_alive = req.keep_alive() && !draining();
    next->closed = false;
    // Read the next request while this one is served: its EOF tells that the client left.
    if (keep_alive) start_next_read(next);
    ResponseWriter writer(stream, req, keep_alive, options_, &draining_, next);
    std::exception_ptr failure;
    try {
      co_await handler_(req, writer);
    } catch (...) { failure = std::current_exception(); }
    if (!writer.responded() && !writer.broken()) {
      writer.close_after();
      co_await writer.send_error(
          500, failure ? "internal error while handling the request" : "the handler sent no response");
    } else if (failure || (writer.streaming() && !writer.broken())) {
      writer.abort();  // a half-written response cannot be completed
    }
    // A large body's buffer is not kept for the next request (see kKeptBodyCapacity).
    if (body.capacity() > kKeptBodyCapacity) std::string().swap(body);
    if (!writer.keep_alive() || draining()) break;
  }
  conn->stream = nullptr;
  uncount_reclaim(*conn);
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream.close();  // a pending read of the next request completes, aborted, and changes nothing
  next->socket = nullptr;
  next->idle_timer.cancel();
  conn->read_timer.cancel();
  active_.fetch_sub(1, std::memory_order_acq_rel);
}

void HttpServer::drain(std::function<void()> on_drained) {
  if (draining_.exchange(true, std::memory_order_acq_rel)) return;
  // Work for ioc_ until drain_wait() is spawned: closing the listener and the last connection can
  // leave ioc_ with nothing else to do, and its run() would return before the spawn, so that
  // on_drained never ran (seen as a drain that hung in ServerFixture tests, about 1 run in 20).
  const auto work = net::make_work_guard(ioc_);
  net::post(acceptor_.get_executor(), [this] {
    boost::system::error_code ec;
    acceptor_.close(ec);
  });
  net::post(release_timer_.get_executor(), [this] { release_timer_.cancel(); });
  std::lock_guard lock(conns_mu_);
  for (auto& weak : conns_) {
    if (auto conn = weak.lock()) {
      net::post(conn->strand, [conn] {
        if (conn->stream != nullptr && conn->idle) conn->stream->cancel();
      });
    }
  }
  net::co_spawn(ioc_, drain_wait(std::move(on_drained)), net::detached);
}

Task<void> HttpServer::drain_wait(std::function<void()> on_drained) {
  const auto deadline = std::chrono::steady_clock::now() + options_.drain_timeout;
  net::steady_timer timer(ioc_);
  while (active_.load(std::memory_order_acquire) > 0 && std::chrono::steady_clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(20));
    boost::system::error_code ec;
    co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  if (on_drained) on_drained();
}

}  // namespace disagg::http
