// http_server.h — a small HTTP/1.1 server on Boost.Asio for the engine's servers.
//
// One C++20 coroutine per connection (asio::awaitable), each on its own strand, over an
// io_context that the caller runs on as many threads as it likes. Keep-alive is honoured;
// requests on one connection are served in order (no pipelining of responses). Requests are
// parsed in place by http_parse.h; responses are serialized by hand.
//
// Limits and the replies they produce (the connection is closed after each of these):
//   header larger than max_header_bytes, or over Head::kMaxFields fields  -> 431, OpenAI error body
//   Content-Length or body over max_body_bytes   -> 413 (checked before the body is read)
//   unparsable request line, header or chunking  -> 400 (also: Content-Length with
//                                                   Transfer-Encoding, two different lengths)
//   a transfer coding other than chunked         -> 501
//   a version other than HTTP/1.0 and HTTP/1.1   -> 505
//   head not complete header_timeout after its first byte -> 408
//   no body byte for body_timeout                -> 408
//   no byte of a request within idle_timeout (a new connection's first one included)
//                                                -> closed silently
//   max_connections open: the longest-idle connections (none of their requests under way) are
//   closed to make room; when every one is busy -> 503
// After a 413, 400, 431, 501, 505, 503 or a body's 408 the server keeps reading and discarding
// what the client still sends, within linger_time, linger_timeout and linger_bytes, before it
// closes (nginx's lingering close): closing with unread bytes resets the connection, and a client
// still sending its body would see a broken pipe instead of the answer.
// `Expect: 100-continue` is answered after the size check, so oversized uploads are refused
// before they are sent.
//
// While a handler runs, the connection already reads the next request (CloseWatch): what arrives
// is parsed after the response, and EOF or a reset there tells the handler that its client left
// (ResponseWriter::watch_close) at no extra system call.
//
// A handler either sends one response (send) or streams one (start_stream, write..., finish);
// a handler that returns without responding produces a 500. Exceptions escaping a handler are
// caught and answered with a 500 when nothing was sent yet, otherwise the connection is closed.
//
// Graceful drain (drain()): the listener closes, idle keep-alive connections are closed, busy
// ones finish their current response (with `Connection: close`), and `on_drained` runs when the
// last connection is gone or after drain_timeout, whichever comes first.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "asio.h"
#include "read_response.h"
#include "disagg/expected.h"
#include "http_parse.h"

namespace disagg::http {

/// A parsed request; the body is complete when the handler runs. Owned by the connection and
/// reused for its next request (its buffers keep their capacity): valid until the handler returns.
class Request {
 public:
  /// The method, as Beast names it (bhttp::verb::unknown for a method it does not know).
  bhttp::verb method() const { return bhttp::string_to_verb(head_.method); }
  std::string_view method_string() const { return head_.method; }
  /// The request target as sent, e.g. "/v1/completions?x=1" (see target_path()).
  std::string_view target() const { return head_.target; }
  /// 10 or 11.
  unsigned version() const { return head_.version; }
  /// Whether the client allows another request on this connection.
  bool keep_alive() const { return head_.keep_alive; }
  const std::string& body() const { return body_; }
  std::string& body() { return body_; }
  /// The first header field called `name` (case-insensitive), or nullptr.
  const Field* find(std::string_view name) const { return head_.find(name); }
  /// The value of header field `name`, or "" when absent.
  std::string_view operator[](std::string_view name) const { return head_[name]; }
  std::span<const Field> fields() const { return head_.all_fields(); }

  /// Parses `head` (a complete head, through its empty line) into this request, copying the bytes
  /// first, and empties the body. For the server and for tests.
  ParseError assign_head(std::string_view head);

 private:
  friend class HttpServer;
  std::string raw_;  // the head's bytes; head_ points into them
  Head head_;
  std::string body_;
};

/// The path of a request target, without the query string.
std::string_view target_path(std::string_view target);

struct ServerOptions {
  std::string host = "127.0.0.1";
  /// 0 = an ephemeral port (see HttpServer::port()).
  std::uint16_t port = 0;
  std::size_t max_body_bytes = 8u << 20;
  std::size_t max_header_bytes = 16u << 10;
  /// How long a connection may wait for the first byte of a request (its first one, or the next
  /// one after a response); then it is closed silently (nginx: keepalive_timeout). Such a
  /// connection is idle: it may be reclaimed at max_connections.
  std::chrono::milliseconds idle_timeout{60'000};
  /// How long a request head may take from its first byte to its empty line; then 408. Not reset
  /// by each byte, so a client that trickles a head cannot hold a connection (nginx:
  /// client_header_timeout, which nginx also starts at the accept; here a connection waiting for
  /// its first byte is idle instead, bounded by idle_timeout and reclaimable).
  std::chrono::milliseconds header_timeout{10'000};
  /// Longest wait between two reads of a request body; then 408 (nginx: client_body_timeout).
  std::chrono::milliseconds body_timeout{30'000};
  /// Per write: a client that accepts no bytes for this long is dropped.
  std::chrono::milliseconds write_timeout{60'000};
  std::chrono::milliseconds drain_timeout{30'000};
  /// Open connections at most (lingering ones included). A new connection beyond it first closes
  /// the longest-idle ones (waiting for a request, none under way): up to 32 at a time, an eighth
  /// of the idle ones at most, as nginx reuses its keep-alive connections. Only when every
  /// connection is busy does it get a 503.
  std::size_t max_connections = 10'000;
  /// Lingering close after an error reply (see the header comment): at most this long in all,
  /// this long between two reads, and this many bytes discarded (nginx: lingering_time 30 s,
  /// lingering_timeout 5 s).
  std::chrono::milliseconds linger_time{30'000};
  std::chrono::milliseconds linger_timeout{5'000};
  std::size_t linger_bytes = 64u << 20;
  /// Every this long the server hands the allocator's free memory beyond memory_keep_bytes back to
  /// the OS (memory_release.h), so that a burst of large requests does not leave the process at
  /// its peak for good; 0 = never. The allocator is process-wide: one server per process is enough.
  std::chrono::milliseconds memory_release_interval{5'000};
  std::size_t memory_keep_bytes = 32u << 20;
  int listen_backlog = 1024;
  /// Value of the Server header.
  std::string server_name = "disagg-engine";
  /// When non-empty, accepted connections are handed round robin to these io_contexts (not
  /// owned), each of which the caller runs on exactly one thread: a connection then stays on one
  /// thread without a strand, so serving a request wakes no other thread. Empty: each connection
  /// gets a strand of the server's io_context, which any number of threads may run.
  std::vector<net::io_context*> connection_contexts;
};

/// A request body's buffer keeps its capacity for the connection's next request up to this size;
/// a larger one is freed after its request, so that idle keep-alive connections do not each hold
/// a body of up to max_body_bytes.
inline constexpr std::size_t kKeptBodyCapacity = 64u << 10;

namespace detail {
struct ServerConn;  // one connection's state (http_server.cc)

/// A callable kept in place (no allocation) for CloseWatch: up to 32 bytes, e.g. a pointer, or a
/// shared_ptr plus a pointer.
class CloseCallback {
 public:
  CloseCallback() = default;
  CloseCallback(const CloseCallback&) = delete;
  CloseCallback& operator=(const CloseCallback&) = delete;
  ~CloseCallback() { reset(); }
  template <class F>
  void emplace(F f) {
    static_assert(sizeof(F) <= sizeof(storage_) && alignof(F) <= alignof(std::max_align_t),
                  "watch_close(): the callable must fit in 32 bytes; capture a pointer instead");
    reset();
    ::new (static_cast<void*>(storage_)) F(std::move(f));
    call_ = [](void* p) { (*static_cast<F*>(p))(); };
    destroy_ = [](void* p) { static_cast<F*>(p)->~F(); };
  }
  void operator()() {
    if (call_ != nullptr) call_(storage_);
  }
  void reset() {
    if (destroy_ != nullptr) destroy_(storage_);
    call_ = nullptr;
    destroy_ = nullptr;
  }

 private:
  alignas(std::max_align_t) unsigned char storage_[32];
  void (*call_)(void*) = nullptr;
  void (*destroy_)(void*) = nullptr;
};
}  // namespace detail

/// Per-connection read state. While a response is pending, the server already reads the next
/// request (that read is needed after the response anyway, so watching costs no extra system
/// call): bytes that arrive are kept for the next request, and EOF or an error on that read means
/// the client left, which is what ResponseWriter::watch_close() reports. Owned by the connection;
/// the pending read shares its ownership, so a late completion touches only this. Strand only.
struct CloseWatch {
  explicit CloseWatch(net::any_io_executor executor)
      : reactor(SocketReactor::of(executor)), idle_timer(std::move(executor)) {}
  SocketReactor reactor;          ///< of the connection's io_context (read_response.h)
  beast::flat_buffer buffer;      ///< the connection's read buffer
  tcp::socket* socket = nullptr;  ///< while the connection's session runs
  bool reading = false;           ///< a read of the next request is pending on the socket
  bool read_failed = false;       ///< that read met EOF, a reset or a cancel: the connection is done
  bool armed = false;             ///< a watch is on: a failed read calls on_close
  bool closed = false;            ///< the client closed or reset the connection during the request
  detail::CloseCallback on_close;
  /// The session, when it waits for the read after its response.
  std::optional<net::async_result<net::use_awaitable_t<>, void()>::handler_type> waiter;
  /// idle_timeout while the session waits for the read. Armed lazily: a wait only notes when it
  /// began, and the timer, when it fires, checks the wait under way and re-arms for its end, so
  /// that a request costs no timer operation (each is a round through the reactor).
  net::steady_timer idle_timer;
  std::chrono::steady_clock::time_point wait_since{};
  bool timer_armed = false;
  /// The response head being written: one buffer per connection, reused by each response (a
  /// connection writes one at a time), instead of an allocation per response.
  std::string head;
};

/// Starts the read of the next request on `watch` (see CloseWatch): no-op while one is pending,
/// once one failed, or when bytes are already buffered (a pipelined request: no watch needed).
void start_next_read(const std::shared_ptr<CloseWatch>& watch);

/// One extra response header.
struct Header {
  std::string_view name;
  std::string_view value;
};

/// Writes the response of one request. Not thread-safe: use it from the handler's coroutine.
class ResponseWriter {
 public:
  /// `draining`: when set by the time the header goes out, the response says Connection: close.
  /// `close_watch`: the connection's slot for watch_close() (none: watch_close() does nothing).
  ResponseWriter(beast::tcp_stream& stream, const Request& request, bool keep_alive, const ServerOptions& options,
                 const std::atomic<bool>* draining = nullptr, std::shared_ptr<CloseWatch> close_watch = nullptr);
  ~ResponseWriter();
  ResponseWriter(const ResponseWriter&) = delete;
  ResponseWriter& operator=(const ResponseWriter&) = delete;

  /// Sends a complete response. Returns false when the client is gone. `body` is not copied: it
  /// must stay valid until the returned task completes (a temporary in the co_await expression
  /// does; a proxy can send from its upstream's buffer).
  Task<bool> send(unsigned status, std::string_view body, std::string_view content_type = "application/json",
                  std::span<const Header> headers = {});
  /// Sends an OpenAI error body (see openai_error.h).
  Task<bool> send_error(unsigned status, std::string_view message, std::string_view param = {},
                        std::string_view code = {}, std::span<const Header> headers = {});

  /// Starts a chunked response (text/event-stream by default, no caching). `first`, when not
  /// empty, is the first chunk, sent in the same write as the header. False: client gone.
  Task<bool> start_stream(unsigned status = 200, std::string_view content_type = "text/event-stream",
                          std::span<const Header> headers = {}, std::string_view first = {});
  /// Sends `data` as one chunk (empty data is skipped). False: client gone or write timed out.
  Task<bool> write(std::string_view data);
  /// Ends the stream; `last`, when not empty, is a final chunk sent in the same write.
  /// False: client gone.
  Task<bool> finish(std::string_view last = {});
  /// Ends the connection without completing the response (the client sees a truncated stream).
  void abort();

  /// Watches for the client going away while the response is pending: the request was read in
  /// full, and the server's read of the next request is pending (see CloseWatch), so EOF or an
  /// error on that read means the client closed or reset the connection. Then client_closed()
  /// becomes true and `on_close()` runs once, on the connection's strand (at once, inside this
  /// call, when the client had already left), e.g. to wake the handler or cancel an upstream
  /// request. The watch ends at send(), finish(), abort(), unwatch_close() or the writer's end,
  /// and `on_close` never runs after that, so it may refer to handler state that outlives the
  /// watch. Bytes of a pipelined request end the watch quietly (the client is still there; they
  /// are served after this response). Cost: none beyond storing `on_close` (at most 32 bytes, kept
  /// in place: no allocation); the read it rides on is the one the connection needs anyway. Does
  /// nothing after a complete response, while watching, or without a watch slot.
  template <class F>
  void watch_close(F on_close);
  /// Ends the watch (no-op when none). The read of the next request stays pending.
  void unwatch_close();
  /// Whether a watch saw the client close or reset the connection.
  bool client_closed() const { return watch_ != nullptr && watch_->closed; }

  bool responded() const { return state_ != State::none; }
  bool streaming() const { return state_ == State::streaming; }
  /// Whether the connection can serve another request after this one.
  bool keep_alive() const { return keep_alive_ && !broken_; }
  bool broken() const { return broken_; }
  /// Asks for `Connection: close` (only effective before the header is sent).
  void close_after() { keep_alive_ = false; }
  net::any_io_executor executor() { return stream_.get_executor(); }

 private:
  enum class State : std::uint8_t { none, sent, streaming, finished };
  bool decide_keep_alive();
  // An empty buffer for the response head: the connection's, kept for its next response.
  std::string& head_buffer();

  beast::tcp_stream& stream_;
  const ServerOptions& options_;
  const std::atomic<bool>* draining_;
  std::shared_ptr<CloseWatch> watch_;
  std::string own_head_;  // the head buffer of a writer without a connection's (no watch)
  unsigned version_;
  bool keep_alive_;
  bool broken_ = false;
  State state_ = State::none;
};

template <class F>
void ResponseWriter::watch_close(F on_close) {
  if (watch_ == nullptr || watch_->armed || broken_ || state_ == State::sent || state_ == State::finished) { return; }
  if (watch_->read_failed) {  // the client left before the watch began
    watch_->closed = true;
    on_close();
    return;
  }
  start_next_read(watch_);       // usually pending already (keep-alive requests)
  if (!watch_->reading) return;  // pipelined bytes buffered: the client is there
  watch_->on_close.emplace(std::move(on_close));
  watch_->armed = true;
}

/// Handles one request. Runs on the connection's strand.
using Handler = std::function<Task<void>(Request& request, ResponseWriter& response)>;

/// Why the server could not start.
struct ServerError {
  std::string message;  ///< e.g. "cannot listen on 127.0.0.1:8000: Address already in use"
};

class HttpServer {
 public:
  /// Binds and listens now (so the port is known and bind errors surface here); accepting starts
  /// with start(). The io_context must outlive the server.
  static Expected<std::unique_ptr<HttpServer>, ServerError> create(net::io_context& ioc, ServerOptions options,
                                                                   Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Starts accepting connections.
  void start();
  /// The bound port (useful with port 0).
  std::uint16_t port() const { return port_; }
  /// Graceful drain (see the header comment). Thread-safe; the second call does nothing.
  void drain(std::function<void()> on_drained);
  bool draining() const { return draining_.load(std::memory_order_acquire); }
  /// Connections open now.
  std::size_t connections() const { return active_.load(std::memory_order_acquire); }
  /// Idle connections closed so far to make room for new ones (see max_connections).
  std::uint64_t reclaimed() const { return reclaimed_.load(std::memory_order_relaxed); }

 private:
  using Conn = detail::ServerConn;
  HttpServer(net::io_context& ioc, ServerOptions options, Handler handler);
  Task<void> accept_loop();
  Task<void> session(tcp::socket socket, std::shared_ptr<Conn> conn, bool over_limit);
  Task<void> drain_wait(std::function<void()> on_drained);
  Task<void> release_loop();
  // Open connections that count against max_connections: those being reclaimed do not.
  std::size_t counted_connections() const;
  // Closes a batch of the longest-idle connections (see max_connections). Caller holds conns_mu_.
  void reclaim_idle_locked();
  // Stops counting `conn` as closing when it was chosen for reclaim. On its strand.
  void uncount_reclaim(Conn& conn);

  net::io_context& ioc_;
  ServerOptions options_;
  Handler handler_;
  tcp::acceptor acceptor_;
  net::steady_timer release_timer_;  // release_loop()'s, on a strand of its own; cancelled by drain()
  std::uint16_t port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<std::size_t> active_{0};
  // Connections chosen by reclaim_idle_locked() whose sessions have not ended yet.
  std::atomic<std::size_t> closing_{0};
  std::atomic<std::uint64_t> reclaimed_{0};
  std::mutex conns_mu_;
  std::list<std::weak_ptr<Conn>> conns_;
};

}  // namespace disagg::http
