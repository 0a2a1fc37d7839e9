// http_client.h — HTTP/1.1 client for the router: one request per connection, streamed body.
//
// Timeouts (each one ends the request with its own error code):
//   connect_timeout     resolving + TCP connect
//   first_byte_timeout  from the end of the request write to the complete response header
//   idle_timeout        between two body reads that each bring data
// The error says whether anything of the response had arrived (ClientError::before_response),
// which is what a caller needs to decide whether a retry is safe.
//
// Usage (inside a coroutine):
//   auto s = co_await ClientStream::open(ex, "10.0.0.7", 8000, req, opts);
//   if (!s) ...;                               // s.error().code
//   (*s)->status();                            // header is there
//   while (true) { auto piece = co_await (*s)->read_some(); if (!piece) ...; if (piece->empty()) break; }
// cancel() (on the stream's executor) aborts a pending read, e.g. when the downstream client left.
// Pass requests as named variables (std::move(req)), not braced temporaries inside a co_await
// expression: g++ 12 mis-destroys such temporaries in coroutines (a double free was observed).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "asio.h"
#include "disagg/expected.h"
#include "http_parse.h"
#include "read_response.h"

namespace disagg::http {

class ConnectionPool;
class ClientStream;

/// Aborts a request from outside while it is under way (open() or the reads of the stream it
/// returned), e.g. when the downstream client left: pass it as ClientOptions::cancel and call
/// cancel() on the request's executor. The request then ends with ClientErrc::cancelled, and its
/// connection is closed, never pooled. Owned by the caller; must outlive the request.
class ClientCancel {
 public:
  void cancel();
  bool cancelled() const { return cancelled_; }

 private:
  friend class ClientStream;
  ClientStream* current_ = nullptr;  // the stream of the request under way, if any
  bool cancelled_ = false;
};

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds first_byte_timeout{60'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::size_t max_header_bytes = 64u << 10;
  /// Limit of fetch() (read_some() streams any size).
  std::size_t max_body_bytes = 64u << 20;
  /// Bytes per read_some() at most.
  std::size_t read_chunk_bytes = 16u << 10;
  /// Reuse keep-alive connections from this pool (not owned; must outlive the requests).
  /// nullptr: one connection per request, `Connection: close`.
  ConnectionPool* pool = nullptr;
  /// Lets the caller abort the request (not owned; see ClientCancel). nullptr: no abort but
  /// ClientStream::cancel() on the stream open() returned.
  ClientCancel* cancel = nullptr;
  /// Set it (SocketReactor::of(executor)) only when the executor's io_context is run by one
  /// thread: the first read of each answer then waits for readiness instead of failing a recv
  /// (read_response.h). Empty: Asio's own reads.
  SocketReactor one_thread_reactor;
};

namespace detail {
/// A lazily armed deadline for a ClientStream: setting it costs no timer operation while a wait is
/// pending (the timer, when it fires early, re-arms for the current deadline), so a request arms
/// the timer at most once, not once per read; a pooled connection keeps its deadline (parked with
/// no socket and no deadline), so its next request usually finds the timer armed. Shared with the
/// pending wait, which may complete after the stream is gone.
struct Deadline {
  explicit Deadline(const net::any_io_executor& executor) : timer(executor) {}
  net::steady_timer timer;
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::time_point::max();
  bool armed = false;             ///< a wait is pending
  bool expired = false;           ///< it fired and cancelled the socket's operations
  tcp::socket* socket = nullptr;  ///< cancelled when the deadline passes; nullptr: stream gone
};
}  // namespace detail

/// Idle keep-alive connections per upstream "host:port", shared by every thread. A connection
/// goes back to the pool when its response was read to the end and both sides allow keep-alive;
/// take() drops those idle longer than idle_ttl but does not probe the others (as nginx, no
/// system call per reuse): a request on a reused connection that fails before any response byte
/// (the upstream had closed it unseen) is resent once on a new connection by ClientStream::open(),
/// never after a response byte, and is not reported as a failure. Bounded by
/// max_idle_per_endpoint; thread-safe.
class ConnectionPool {
 public:
  struct Options {
    std::size_t max_idle_per_endpoint = 64;
    std::chrono::milliseconds idle_ttl{30'000};
    /// Park the socket objects themselves, still registered with their io_context: take() with
    /// the executor a connection was parked from (one pool per single-threaded io_context) then
    /// costs no system call; any other executor gets the descriptor moved over.
    /// Only when the pool is destroyed before every io_context its connections came from.
    /// false: park bare descriptors (re-registered on every take()).
    bool keep_registered = false;
  };
  ConnectionPool() : ConnectionPool(Options{}) {}
  explicit ConnectionPool(Options options) : options_(options) {}
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  /// A parked connection, and its deadline when it comes back on the executor it was parked from.
  struct Taken {
    tcp::socket socket;
    std::shared_ptr<detail::Deadline> deadline;  ///< nullptr: make a new one
  };
  /// An idle, still-open connection to `endpoint`, re-homed onto `executor`; nullopt if none.
  std::optional<Taken> take(const std::string& endpoint, const net::any_io_executor& executor);
  /// Parks an open connection (closes it when the endpoint already has max_idle_per_endpoint),
  /// with its deadline (kept only with keep_registered; it must have no socket and no deadline).
  void put(const std::string& endpoint, tcp::socket socket, std::shared_ptr<detail::Deadline> deadline = nullptr);
  /// Closes every idle connection to `endpoint` (e.g. an endpoint that left DNS: its entries
  /// would otherwise stay until a take() for it that never comes).
  void drop(const std::string& endpoint);
  /// Idle connections held, all endpoints.
  std::size_t idle() const;
  /// Connections handed out by take() so far (for tests and metrics).
  std::uint64_t reused() const;

 private:
  struct Idle {
    std::optional<tcp::socket> socket;           // keep_registered
    std::shared_ptr<detail::Deadline> deadline;  // keep_registered: its timer, on the same context
    int fd = -1;                                 // otherwise
    bool v6 = false;
    std::chrono::steady_clock::time_point since;
  };
  Options options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::vector<Idle>> idle_;
  std::uint64_t reused_ = 0;
};

enum class ClientErrc {
  resolve_failed,  ///< the host name did not resolve
  connect_failed,  ///< refused, unreachable, reset while connecting
  connect_timeout,
  write_failed,        ///< the request could not be sent
  first_byte_timeout,  ///< no complete response header in time
  idle_timeout,        ///< the body stopped flowing
  read_failed,         ///< the connection broke while reading
  protocol_error,      ///< unparsable response
  body_too_large,      ///< fetch(): over max_body_bytes
  cancelled,           ///< cancel() was called
};
std::string_view to_string(ClientErrc code);

struct ClientError {
  ClientErrc code = ClientErrc::connect_failed;
  std::string detail;
  /// True when no byte of the response had been parsed: the upstream did not start answering.
  bool before_response = true;
  std::string message() const;
};

struct ClientRequest {
  bhttp::verb method = bhttp::verb::get;
  std::string target = "/";
  std::string body;
  /// When not empty, the body sent instead of `body`, without a copy (e.g. a proxied request's own
  /// body); the bytes must stay alive until open() or fetch() completes.
  std::string_view body_view;
  /// Not owned: a literal, or bytes that outlive open() or fetch(). (A std::string here allocated
  /// on every request: "application/json" is one byte past the short-string buffer.)
  std::string_view content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

namespace detail {
/// Memory of ClientStream's read buffers. Blocks of 4 KiB and more are recycled per thread (one
/// size at a time, a few dozen at most): under load, taking two 16 KiB blocks per request from
/// malloc's shared bins cost a fifth of the router's instructions.
void* take_block(std::size_t bytes);
void give_block(void* p, std::size_t bytes) noexcept;
}  // namespace detail

class ClientStream {
 public:
  /// Connects to host:port, sends `request` and reads the response header (1xx responses are
  /// skipped).
  static Task<Expected<std::unique_ptr<ClientStream>, ClientError>> open(net::any_io_executor executor,
                                                                         std::string host, std::uint16_t port,
                                                                         ClientRequest request,
                                                                         ClientOptions options = {});

  unsigned status() const { return head_.status; }
  /// The response head (fields by name: headers()["Content-Type"]); valid for the stream's life.
  const Head& headers() const { return head_; }

  /// The next piece of the body: every body byte received so far (at least one, waiting for it when
  /// none is), up to the read chunk size; an empty view at the end. Valid until the next call.
  Task<Expected<std::string_view, ClientError>> read_some();
  /// Whether the whole body has been read.
  bool done() const { return done_; }
  /// Whether bytes arrived beyond what was parsed so far (they may be only chunk framing: this does
  /// not promise that the next read_some() will not wait).
  bool buffered() const { return end_ > begin_; }
  /// Whether this request went over a pooled connection.
  bool reused_connection() const { return reused_; }
  /// Aborts pending and future reads (ClientErrc::cancelled). Call on the stream's executor.
  void cancel();
  ~ClientStream();

 private:
  explicit ClientStream(ClientOptions options);
  void set_deadline(std::chrono::milliseconds timeout);
  // Reads more bytes after end_ (room is made first); sets `ec`. `after_write`: the first read
  // after a request written in full in the same handler (read_response.h).
  Task<void> read_more(boost::system::error_code& ec, bool after_write = false);
  // Makes room after end_: moves unparsed bytes back to base_, or grows the buffer (for a head
  // up to max_header_bytes). False: no room can be made.
  bool make_room();
  // Moves the body bytes received so far into a piece; sets done_. Empty: none yet.
  Expected<std::string_view, ClientError> take_piece();
  void recycle();

  ClientOptions options_;
  std::string endpoint_;
  bool reused_ = false;
  bool cancelled_ = false;
  bool done_ = false;
  // Emplaced by open() (moved from the pool or connected): constructing a socket looks up its
  // io_context's service under a lock, which a pooled connection does not need.
  std::optional<tcp::socket> socket_;
  std::shared_ptr<detail::Deadline> deadline_;
  // Read buffer (detail::take_block): the response head stays at its front (head_ points into
  // it); body bytes are decoded in place after it, from base_ on. [begin_, end_) is unparsed.
  char* buf_ = nullptr;
  std::size_t cap_ = 0;
  std::size_t base_ = 0;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  Head head_;
  ChunkedDecoder chunks_;
  std::uint64_t remaining_ = 0;  // of a Content-Length body
};

struct ClientResponse {
  unsigned status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  /// The value of the first header field called `name` (case-insensitive), or "".
  std::string_view header(std::string_view name) const;
};

/// open() + read the whole body (at most options.max_body_bytes).
Task<Expected<ClientResponse, ClientError>> fetch(net::any_io_executor executor, std::string host, std::uint16_t port,
                                                  ClientRequest request, ClientOptions options = {});

}  // namespace disagg::http
