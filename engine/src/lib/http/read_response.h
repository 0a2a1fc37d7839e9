// read_response.h — two socket reads that do not try a recv they know would fail.
//
// Asio's epoll reactor tries every read at once and waits for readiness only after that recv fails
// with EAGAIN. It skips the try only after a read that hit end of file. A proxy reads mostly where
// nothing can be there yet: the answer right after it wrote the request, the client's next request
// right after the last one arrived. Those failing recv calls were 1.5 of the router's 6 system calls
// per request; nginx, which reads only after epoll reports data, makes none.
//
// async_read_response(): the first read of an answer to a request written just now. It skips the
// reactor's immediate try and is queued (a read waits without an epoll_ctl: Asio registers sockets
// for input once, edge-triggered); the first readiness event after the write performs it. Skipping
// is safe only when no event for the socket can have been consumed since the request went out, as
// it would be by another thread's epoll_wait or by this thread's after a suspension. Contract:
// - call it in the handler that wrote the request in full, before anything that may suspend;
// - only on an io_context run by one thread (the router's are): the caller says so by passing
//   that context's SocketReactor; with an empty one it is plain async_read_some.
// Whatever arrives after the write raises an event: the answer, the peer's FIN, or the RST that a
// closed peer sends in reply to the request.
//
// async_read_draining(): a read that, when it returns fewer bytes than the buffer had room for,
// tells the reactor the socket is drained (a stream socket's recv returns all it has, up to the
// room), so the next read on the socket waits for readiness instead of trying. The reactor keeps
// that flag under its descriptor lock, and every arrival after the drain raises an edge, so no data
// is missed. What is missed: a FIN that arrived with the drained data raised its event before the
// drain, so a later read on the socket sees that end of file only when something else arrives or
// the read's timeout ends it. Use it where that is harmless, as for a server's read of the next
// request (a client that half-closes after its request still reads the answer; the keep-alive
// timeout ends the connection).
//
// Both take the SocketReactor of the socket's io_context, looked up once (Asio's lookup of a
// service takes a lock and compares type names: a tenth of the router's per-request instructions
// when done per read). Otherwise both behave as socket.async_read_some(buffer, token) for one
// mutable buffer:
// completion (error_code, bytes), end of file as net::error::eof, cancel() and close() abort them
// with operation_aborted, at most one read pending per socket. They are built on Asio's reactor
// internals (reactor_op, handler_work) as found in Boost 1.74 to 1.81 (Debian 12 ships 1.74); with
// another version, or a reactor that is not epoll, both are plain async_read_some.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include <boost/version.hpp>

#include "asio.h"

#if BOOST_VERSION >= 107400 && BOOST_VERSION <= 108100 && defined(BOOST_ASIO_HAS_EPOLL) && \
    !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT) && !defined(BOOST_ASIO_DISABLE_EPOLL)
#define DISAGG_READ_RESPONSE_OP 1
#include <boost/asio/detail/bind_handler.hpp>
#include <boost/asio/detail/fenced_block.hpp>
#include <boost/asio/detail/handler_alloc_helpers.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/detail/handler_work.hpp>
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#include <boost/asio/detail/scheduler.hpp>
#include <boost/asio/detail/socket_ops.hpp>
#else
#define DISAGG_READ_RESPONSE_OP 0
#endif

namespace disagg::http {

namespace read_response_detail {

enum class ReadKind { response, draining };

#if DISAGG_READ_RESPONSE_OP
namespace ad = boost::asio::detail;

// A socket's reactor registration: basic_socket keeps its implementation protected, and a pointer
// to member formed through a derived class may be applied to any socket.
struct SocketAccess : net::ip::tcp::socket {
  static auto& impl(net::ip::tcp::socket& s) { return (s.*&SocketAccess::impl_).get_implementation(); }
};

// The operation being started on this thread with its try skipped: the reactor's immediate try,
// made inside start_op(), finds it here. A try from another thread's reactor does not.
inline thread_local const ad::reactor_op* skipping_try = nullptr;

template <class Handler, class IoExecutor>
class ReadOp : public ad::reactor_op {
 public:
  ReadOp(int fd, net::mutable_buffer buffer, bool draining, Handler&& handler, const IoExecutor& io_ex)
      : ad::reactor_op(boost::system::error_code(), &ReadOp::perform_read, &ReadOp::complete),
        fd_(fd),
        buffer_(buffer),
        draining_(draining),
        handler_(std::move(handler)),
        work_(handler_, io_ex) {}

  // Called under the reactor's descriptor lock: at start (unless the try is skipped or the
  // socket was drained), then on each readiness event.
  static status perform_read(ad::reactor_op* base) {
    if (skipping_try == base) return not_done;
    auto* o = static_cast<ReadOp*>(base);
    if (!ad::socket_ops::non_blocking_recv1(o->fd_, o->buffer_.data(), o->buffer_.size(), 0,
                                            /*is_stream=*/true, o->ec_, o->bytes_transferred_)) {
      return not_done;  // EAGAIN: wait for the next event
    }
    // Asio's own reads report a drain at end of file only (0 bytes, which is short here too).
    return o->draining_ && o->bytes_transferred_ < o->buffer_.size() ? done_and_exhausted : done;
  }

  // Called by the scheduler with the result, or with owner == nullptr when the io_context is
  // destroyed with the read pending: then it only frees.
  static void complete(void* owner, ad::operation* base, const boost::system::error_code& /*ec*/,
                       std::size_t /*bytes*/) {
    auto* o = static_cast<ReadOp*>(base);
    ad::handler_work<Handler, IoExecutor> work(std::move(o->work_));
    // The handler moves out and the memory is freed before the upcall, which may start the next
    // read in the same (recycled) memory.
    ad::binder2<Handler, boost::system::error_code, std::size_t> call(o->handler_, o->ec_, o->bytes_transferred_);
    o->~ReadOp();
    boost_asio_handler_alloc_helpers::deallocate(o, sizeof(ReadOp), call.handler_);
    if (owner != nullptr) {
      ad::fenced_block fence(ad::fenced_block::half);
      work.complete(call, call.handler_);
    }
  }

  static ReadOp* make(int fd, net::mutable_buffer buffer, bool draining, Handler&& handler, const IoExecutor& io_ex) {
    void* memory = boost_asio_handler_alloc_helpers::allocate(sizeof(ReadOp), handler);
    return new (memory) ReadOp(fd, buffer, draining, std::move(handler), io_ex);
  }

 private:
  int fd_;
  net::mutable_buffer buffer_;
  bool draining_;
  Handler handler_;
  ad::handler_work<Handler, IoExecutor> work_;
};

// Starts a ReadOp of `kind` on `socket`; falls back to Asio's own read where the op cannot help.
template <class Handler>
void start_read(net::ip::tcp::socket& socket, ad::reactor& reactor, net::mutable_buffer buffer, ReadKind kind,
                Handler&& handler);
#endif

}  // namespace read_response_detail

/// The reactor of an io_context, for the reads below. Empty: they are Asio's own reads.
class SocketReactor {
 public:
  SocketReactor() = default;
  /// Looks the reactor of `context` up (once: keep the result).
  explicit SocketReactor(net::execution_context& context) {
#if DISAGG_READ_RESPONSE_OP
    reactor_ = &net::use_service<read_response_detail::ad::reactor>(context);
#else
    (void)context;
#endif
  }
  /// That of the io_context behind `executor`.
  static SocketReactor of(const net::any_io_executor& executor) {
    return SocketReactor(net::query(executor, net::execution::context));
  }
  explicit operator bool() const {
    return reactor_ != nullptr;
  }
#if DISAGG_READ_RESPONSE_OP
  read_response_detail::ad::reactor* get() const {
    return reactor_;
  }
#endif

 private:
#if DISAGG_READ_RESPONSE_OP
  read_response_detail::ad::reactor* reactor_ = nullptr;
#else
  void* reactor_ = nullptr;
#endif
};

/// Whether `context` was made for one thread (concurrency hint 1), as async_read_response()
/// requires of the context it reads on (a check for tests and assertions: it takes a lookup).
inline bool made_for_one_thread(net::io_context& context) {
#if DISAGG_READ_RESPONSE_OP
  return net::use_service<read_response_detail::ad::scheduler>(context).concurrency_hint() == 1;
#else
  (void)context;
  return false;
#endif
}

#if DISAGG_READ_RESPONSE_OP
template <class Handler>
void read_response_detail::start_read(net::ip::tcp::socket& socket, ad::reactor& reactor, net::mutable_buffer buffer,
                                      ReadKind kind, Handler&& handler) {
  using CompletionHandler = std::decay_t<Handler>;
  using IoExecutor = net::ip::tcp::socket::executor_type;
  auto& impl = SocketAccess::impl(socket);
  const bool skip_try = kind == ReadKind::response;
  boost::system::error_code ec;
  if (buffer.size() == 0 || impl.socket_ == ad::invalid_socket ||
      ((impl.state_ & ad::socket_ops::non_blocking) == 0 &&
       !ad::socket_ops::set_internal_non_blocking(impl.socket_, impl.state_, true, ec))) {
    // Nothing to read into, a closed socket, or no non-blocking mode: Asio's own read handles
    // each as it should.
    socket.async_read_some(buffer, std::forward<Handler>(handler));
    return;
  }
  const bool continuation = boost_asio_handler_cont_helpers::is_continuation(handler);
  auto* op = ReadOp<CompletionHandler, IoExecutor>::make(impl.socket_, buffer, kind == ReadKind::draining,
                                                         std::move(handler), socket.get_executor());
  if (skip_try) skipping_try = op;
  reactor.start_op(ad::reactor::read_op, impl.socket_, impl.reactor_data_, op, continuation,
                   /*allow_speculative=*/true);
  skipping_try = nullptr;
}
#endif

namespace read_response_detail {

// One of the reads below, or Asio's own without a reactor.
template <class Token>
auto async_read(ReadKind kind, net::ip::tcp::socket& socket, SocketReactor reactor, net::mutable_buffer buffer,
                Token&& token) {
#if DISAGG_READ_RESPONSE_OP
  if (reactor) {
    return net::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [&socket, reactor, buffer, kind](auto handler) {
          start_read(socket, *reactor.get(), buffer, kind, std::move(handler));
        },
        token);
  }
#else
  (void)kind;
  (void)reactor;
#endif
  return socket.async_read_some(buffer, std::forward<Token>(token));
}

}  // namespace read_response_detail

/// Reads some bytes of the answer to a request just written on `socket`, whose io_context is run
/// by one thread and has `reactor` (see the contract above).
template <class Token>
auto async_read_response(net::ip::tcp::socket& socket, SocketReactor reactor, net::mutable_buffer buffer,
                         Token&& token) {
  return read_response_detail::async_read(read_response_detail::ReadKind::response, socket, reactor, buffer,
                                          std::forward<Token>(token));
}

/// Reads some bytes from `socket`, whose io_context has `reactor`; a short read marks it drained
/// (see the contract above).
template <class Token>
auto async_read_draining(net::ip::tcp::socket& socket, SocketReactor reactor, net::mutable_buffer buffer,
                         Token&& token) {
  return read_response_detail::async_read(read_response_detail::ReadKind::draining, socket, reactor, buffer,
                                          std::forward<Token>(token));
}

}  // namespace disagg::http
