// write_now.h — writes that skip the reactor when the kernel takes the bytes at once.
//
// An asynchronous write through Asio (and Beast's tcp_stream on top) tries the socket at once too,
// but it still builds a composed operation, arms and cancels the stream's timer, and posts its
// completion back through the scheduler before the coroutine resumes: on the router's request path
// that costs more than the send itself. A response of a few KiB on a connection whose send buffer
// has room, which is nearly every write here, is taken whole by one non-blocking send. So the
// servers write in two steps, as nginx does: write_now() sends what the socket takes without
// waiting, and only the rest (a slow client, a full buffer) goes through write_rest(), which waits
// for the socket under the stream's timeout.
#pragma once

#include <chrono>
#include <cstddef>

#include "asio.h"

namespace disagg::http {

/// Sends as much of `buffers` as `socket` takes without waiting (one system call) and returns how
/// many bytes that was. Puts the socket in non-blocking mode on first use (Asio's asynchronous
/// operations work in either mode). Sets `ec` on a real failure (reset, broken pipe); a full send
/// buffer is not a failure: it returns what was sent, possibly 0.
template <class ConstBufferSequence>
std::size_t write_now(tcp::socket& socket, const ConstBufferSequence& buffers, boost::system::error_code& ec) {
  ec = {};
  if (!socket.non_blocking()) {
    socket.non_blocking(true, ec);
    if (ec) return 0;
  }
  const std::size_t n = socket.write_some(buffers, ec);
  if (ec == net::error::would_block || ec == net::error::try_again) {
    ec = {};
    return 0;
  }
  return ec ? 0 : n;
}

/// Writes the bytes of `buffers` after the first `done` (what write_now() sent) and waits for
/// them, at most `timeout` per wait (the stream's timeout, as Beast counts it). Sets `ec`.
template <class ConstBufferSequence>
Task<void> write_rest(beast::tcp_stream& stream, const ConstBufferSequence& buffers, std::size_t done,
                      std::chrono::steady_clock::duration timeout, boost::system::error_code& ec) {
  beast::buffers_suffix<ConstBufferSequence> rest(buffers);
  rest.consume(done);
  stream.expires_after(timeout);
  co_await net::async_write(stream, rest, net::redirect_error(net::use_awaitable, ec));
}

}  // namespace disagg::http
