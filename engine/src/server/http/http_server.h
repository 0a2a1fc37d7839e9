// http_server.h — a small HTTP/1.1 server on Boost.Beast for the engine's servers.
//
// One C++20 coroutine per connection (asio::awaitable), each on its own strand, over an
// io_context that the caller runs on as many threads as it likes. Keep-alive is honoured;
// requests on one connection are served in order (no pipelining of responses).
//
// Limits and the replies they produce (the connection is closed after each of these):
//   header larger than max_header_bytes          -> 431, OpenAI error body
//   Content-Length or body over max_body_bytes   -> 413 (checked before the body is read)
//   unparsable request line, header or chunking  -> 400
//   no complete header within idle_timeout       -> connection closed silently
//   body not received within read_timeout        -> 408
//   connections beyond max_connections           -> 503 and close
// `Expect: 100-continue` is answered after the size check, so oversized uploads are refused
// before they are sent.
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
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "asio.h"
#include "disagg/expected.h"

namespace disagg::http {

/// A parsed request; the body is complete when the handler runs.
using Request = bhttp::request<bhttp::string_body>;

/// The path of a request target, without the query string.
std::string_view target_path(std::string_view target);

struct ServerOptions {
  std::string host = "127.0.0.1";
  /// 0 = an ephemeral port (see HttpServer::port()).
  std::uint16_t port = 0;
  std::size_t max_body_bytes = 8u << 20;
  std::size_t max_header_bytes = 16u << 10;
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds read_timeout{30'000};
  /// Per write: a client that accepts no bytes for this long is dropped.
  std::chrono::milliseconds write_timeout{60'000};
  std::chrono::milliseconds drain_timeout{30'000};
  std::size_t max_connections = 10'000;
  int listen_backlog = 1024;
  /// Value of the Server header.
  std::string server_name = "disagg-engine";
  /// When non-empty, accepted connections are handed round robin to these io_contexts (not
  /// owned), each of which the caller runs on exactly one thread: a connection then stays on one
  /// thread without a strand, so serving a request wakes no other thread. Empty: each connection
  /// gets a strand of the server's io_context, which any number of threads may run.
  std::vector<net::io_context*> connection_contexts;
};

/// Per-connection state of ResponseWriter::watch_close(). Shared with the pending socket wait, so
/// that a completion arriving after its request ended touches only this (and ignores itself).
struct CloseWatch {
  std::uint64_t generation = 0;  ///< bumped when a watch ends: older completions are stale
  bool armed = false;
  bool closed = false;  ///< the client closed or reset the connection during the watch
  char peeked = 0;      ///< target of the watch's MSG_PEEK receive (never consumed)
};

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
  ResponseWriter(beast::tcp_stream& stream, const Request& request, bool keep_alive,
                 const ServerOptions& options, const std::atomic<bool>* draining = nullptr,
                 std::shared_ptr<CloseWatch> close_watch = nullptr);
  ~ResponseWriter();
  ResponseWriter(const ResponseWriter&) = delete;
  ResponseWriter& operator=(const ResponseWriter&) = delete;

  /// Sends a complete response. Returns false when the client is gone.
  Task<bool> send(unsigned status, std::string body,
                  std::string_view content_type = "application/json",
                  std::span<const Header> headers = {});
  /// Sends an OpenAI error body (see openai_error.h).
  Task<bool> send_error(unsigned status, std::string_view message, std::string_view param = {},
                        std::string_view code = {}, std::span<const Header> headers = {});

  /// Starts a chunked response (text/event-stream by default, no caching). `first`, when not
  /// empty, is the first chunk, sent in the same write as the header. False: client gone.
  Task<bool> start_stream(unsigned status = 200,
                          std::string_view content_type = "text/event-stream",
                          std::span<const Header> headers = {}, std::string_view first = {});
  /// Sends `data` as one chunk (empty data is skipped). False: client gone or write timed out.
  Task<bool> write(std::string_view data);
  /// Ends the stream; `last`, when not empty, is a final chunk sent in the same write.
  /// False: client gone.
  Task<bool> finish(std::string_view last = {});
  /// Ends the connection without completing the response (the client sees a truncated stream).
  void abort();

  /// Watches for the client going away while the response is pending: the request was read in
  /// full, so the socket turning readable means EOF, a reset, or pipelined bytes. When the client
  /// closed or reset the connection, client_closed() becomes true and `on_close()` runs once, on the
  /// connection's strand (e.g. to wake the handler, or cancel an upstream request). The watch ends
  /// at send(), finish(), abort(), unwatch_close() or the writer's end, and `on_close` never runs
  /// after that, so it may refer to handler state that outlives the watch. Pipelined bytes end the
  /// watch quietly (the client is still there; they stay unread). Cost: one 1-byte MSG_PEEK receive
  /// queued on the socket (no epoll_ctl, no allocation beyond Asio's recycled handler memory); Asio
  /// first tries it at once (one non-blocking recv answering EAGAIN) unless the request's own read
  /// left the socket known-drained. Only handlers that call it pay this: the sim-worker's and the
  /// router's generation requests. Does nothing after a complete response, while watching, or
  /// without a watch slot.
  template <class F>
  void watch_close(F on_close);
  /// Ends the watch (no-op when none). Call while no other operation is pending on the connection
  /// (true in a handler between its own awaited writes): it cancels the socket's pending wait.
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
  void fill_common(bhttp::fields& f, std::span<const Header> headers);
  bool decide_keep_alive();

  template <class F>
  struct CloseWait;

  beast::tcp_stream& stream_;
  const ServerOptions& options_;
  const std::atomic<bool>* draining_;
  std::shared_ptr<CloseWatch> watch_;
  unsigned version_;
  bool keep_alive_;
  bool broken_ = false;
  State state_ = State::none;
};

template <class F>
struct ResponseWriter::CloseWait {
  std::shared_ptr<CloseWatch> watch;
  std::uint64_t generation;
  F on_close;

  void operator()(const boost::system::error_code& ec, std::size_t bytes) {
    if (watch->generation != generation || !watch->armed) return;  // the watch ended
    watch->armed = false;
    if (!ec && bytes > 0) return;  // pipelined bytes (peeked, not read): the client is still there
    watch->closed = true;          // EOF, a reset, or the connection was closed under us
    on_close();
  }
};

template <class F>
void ResponseWriter::watch_close(F on_close) {
  if (watch_ == nullptr || watch_->armed || broken_ || state_ == State::sent ||
      state_ == State::finished) {
    return;
  }
  watch_->armed = true;
  watch_->closed = false;
  stream_.socket().async_receive(net::buffer(&watch_->peeked, 1), tcp::socket::message_peek,
                                 CloseWait<F>{watch_, watch_->generation, std::move(on_close)});
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
  static Expected<std::unique_ptr<HttpServer>, ServerError> create(net::io_context& ioc,
                                                                   ServerOptions options,
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

 private:
  struct Conn;
  HttpServer(net::io_context& ioc, ServerOptions options, Handler handler);
  Task<void> accept_loop();
  Task<void> session(tcp::socket socket, std::shared_ptr<Conn> conn);
  Task<void> drain_wait(std::function<void()> on_drained);

  net::io_context& ioc_;
  ServerOptions options_;
  Handler handler_;
  tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<std::size_t> active_{0};
  std::mutex conns_mu_;
  std::list<std::weak_ptr<Conn>> conns_;
};

}  // namespace disagg::http
