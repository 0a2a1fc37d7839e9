// The two reads of read_response.h over real loopback sockets: what each reads, when it completes,
// and the behaviour the header states, including what it gives up (a FIN that came with drained
// data). Tests of the operation itself are skipped where it is not built (another Boost, another
// reactor); the rest hold for Asio's own reads too.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "lib/http/read_response.h"

namespace disagg::http {
namespace {

using namespace std::chrono_literals;

// A connected loopback pair: `ours` on `io` (the side under test), `peer` a blocking socket on its
// own context, written from the test's thread.
struct Pair {
  explicit Pair(net::io_context& io) : ours(io), peer(peer_io) {
    tcp::acceptor acceptor(peer_io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    ours.connect(acceptor.local_endpoint());
    acceptor.accept(peer);
  }
  // Writes `bytes` from the peer and waits until they are readable on `ours`.
  void send(const std::string& bytes) {
    net::write(peer, net::buffer(bytes));
    wait_available(bytes.size());
  }
  void wait_available(std::size_t n) {
    for (int i = 0; i < 2000 && ours.available() < n; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_GE(ours.available(), n);
  }
  net::io_context peer_io;
  tcp::socket ours;
  tcp::socket peer;
};

struct Result {
  boost::system::error_code ec;
  std::size_t n = 0;
};

// One read under test: its buffer and, once it completed, its result.
struct Read {
  char buf[64];
  std::optional<Result> got;
  auto buffer() { return net::buffer(buf); }
  // The completion handler of the next read (the last result is dropped).
  auto handler() {
    got.reset();
    return [this](boost::system::error_code ec, std::size_t n) { got = Result{ec, n}; };
  }
  std::string text() const { return std::string(buf, got->n); }
};

// Runs `io`'s reactor once without blocking: takes the readiness events that are there and runs
// what they complete. (A plain poll() of a context with no work stops it and runs no reactor.)
void pump(net::io_context& io) {
  io.restart();
  auto busy = net::make_work_guard(io);
  io.poll();
  io.restart();
}

// Bytes already readable on `p.ours` whose readiness event the context has taken (as it would
// have, had they come before the request, which an answer cannot).
void early_bytes(net::io_context& io, Pair& p) {
  p.send("early ");
  pump(io);
}

// Runs `io` until `done` is set, at most about 5 s of polling.
void run_until(net::io_context& io, const std::optional<Result>& done) {
  for (int i = 0; i < 5000 && !done; ++i) {
    io.run_one_for(1ms);
    io.restart();
  }
}

// Whether the read pending on `p.ours` waits (one pump completes nothing), then completes once the
// peer sends `bytes`.
::testing::AssertionResult waits_then_reads(net::io_context& io, Pair& p, Read& r, const std::string& bytes) {
  pump(io);
  if (r.got) return ::testing::AssertionFailure() << "completed before any new bytes, with " << r.got->n;
  p.send(bytes);
  run_until(io, r.got);
  if (!r.got) return ::testing::AssertionFailure() << "did not complete after \"" << bytes << "\" came";
  return ::testing::AssertionSuccess();
}

TEST(ReadResponse, ReadsTheAnswerThatComesAfterTheWrite) {
  if (!DISAGG_READ_RESPONSE_OP) GTEST_SKIP() << "read_response.h's operation is not built for this Boost or reactor";
  // GIVEN a one-thread context and a request just written on it
  net::io_context io(1);
  Pair p(io);
  ASSERT_TRUE(made_for_one_thread(io));
  net::write(p.ours, net::buffer(std::string("ping")));
  Read r;
  // WHEN the answer is read, and the peer answers later
  async_read_response(p.ours, SocketReactor(io), r.buffer(), r.handler());
  // THEN the read completes with the answer
  ASSERT_TRUE(waits_then_reads(io, p, r, "pong"));
  EXPECT_FALSE(r.got->ec);
  EXPECT_EQ(r.text(), "pong");
}

TEST(ReadResponse, SkipsTheFirstTryAndReadsOnTheNextEvent) {
  if (!DISAGG_READ_RESPONSE_OP) GTEST_SKIP() << "read_response.h's operation is not built for this Boost or reactor";
  // GIVEN bytes already readable whose readiness event the context has taken (as it would have,
  // had they come before the request, which an answer cannot)
  net::io_context io(1);
  Pair p(io);
  early_bytes(io, p);
  Read r;
  // WHEN a read starts
  async_read_response(p.ours, SocketReactor(io), r.buffer(), r.handler());
  // THEN it has not tried a recv: it waits for the next event, and then reads everything there
  ASSERT_TRUE(waits_then_reads(io, p, r, "answer"));
  EXPECT_EQ(r.text(), "early answer");
}

TEST(ReadResponse, WithoutAReactorItIsAsiosOwnReadAndTriesAtOnce) {
  // GIVEN the same bytes, and no reactor (the caller cannot promise a context run by one thread)
  net::io_context io(1);
  Pair p(io);
  early_bytes(io, p);
  Read r;
  // WHEN a read starts THEN it reads them at once
  async_read_response(p.ours, SocketReactor(), r.buffer(), r.handler());
  run_until(io, r.got);
  ASSERT_TRUE(r.got);
  EXPECT_EQ(r.text(), "early ");
}

TEST(ReadResponse, TellsAContextMadeForOneThread) {
  if (!DISAGG_READ_RESPONSE_OP) GTEST_SKIP() << "read_response.h's operation is not built for this Boost or reactor";
  net::io_context one(1);
  net::io_context any;
  EXPECT_TRUE(made_for_one_thread(one));
  EXPECT_FALSE(made_for_one_thread(any));
  EXPECT_TRUE(SocketReactor(one));
  EXPECT_FALSE(SocketReactor());
}

TEST(ReadResponse, EndOfFileCancelAndCloseComplete) {
  Read r;
  {
    // GIVEN a pending read WHEN the peer closes THEN it completes with end of file
    net::io_context io(1);
    Pair p(io);
    async_read_response(p.ours, SocketReactor(io), r.buffer(), r.handler());
    pump(io);
    p.peer.close();
    run_until(io, r.got);
    ASSERT_TRUE(r.got);
    EXPECT_EQ(r.got->ec, net::error::eof);
  }
  for (const bool close : {false, true}) {
    // GIVEN a pending read WHEN our socket is cancelled or closed THEN it completes aborted
    net::io_context io(1);
    Pair p(io);
    async_read_response(p.ours, SocketReactor(io), r.buffer(), r.handler());
    pump(io);
    if (close) {
      p.ours.close();
    } else {
      p.ours.cancel();
    }
    run_until(io, r.got);
    ASSERT_TRUE(r.got);
    EXPECT_EQ(r.got->ec, net::error::operation_aborted) << (close ? "close" : "cancel");
  }
  {
    // GIVEN a pending read WHEN its context is destroyed THEN the handler is dropped, not called
    bool called = false;
    {
      net::io_context io(1);
      Pair p(io);
      async_read_response(p.ours, SocketReactor(io), r.buffer(),
                          [&](boost::system::error_code, std::size_t) { called = true; });
      pump(io);
    }
    EXPECT_FALSE(called);
  }
}

TEST(ReadResponse, WorksAsACoroutineRead) {
  // GIVEN a coroutine that writes a request and reads the answer with use_awaitable
  net::io_context io(1);
  Pair p(io);
  std::string answer;
  net::co_spawn(
      io,
      [&]() -> Task<void> {
        net::write(p.ours, net::buffer(std::string("ping")));
        char buf[64];
        boost::system::error_code ec;
        const std::size_t n = co_await async_read_response(p.ours, SocketReactor(io), net::buffer(buf),
                                                           net::redirect_error(net::use_awaitable, ec));
        answer.assign(buf, n);
      },
      net::detached);
  pump(io);
  // WHEN the peer answers THEN the coroutine gets it
  p.send("pong");
  for (int i = 0; i < 5000 && answer.empty(); ++i) {
    io.run_one_for(1ms);
    io.restart();
  }
  EXPECT_EQ(answer, "pong");
}

TEST(ReadDraining, AfterAShortReadTheNextWaitsForData) {
  // GIVEN a draining read that took everything there was
  net::io_context io(1);
  Pair p(io);
  p.send("first");
  Read r;
  async_read_draining(p.ours, SocketReactor(io), r.buffer(), r.handler());
  run_until(io, r.got);
  ASSERT_TRUE(r.got);
  EXPECT_EQ(r.text(), "first");
  // WHEN the next read starts and data comes later, and then the peer closes
  async_read_draining(p.ours, SocketReactor(io), r.buffer(), r.handler());
  // THEN each read gets what came, and end of file is seen
  ASSERT_TRUE(waits_then_reads(io, p, r, "second"));
  EXPECT_EQ(r.text(), "second");
  async_read_draining(p.ours, SocketReactor(io), r.buffer(), r.handler());
  p.peer.close();
  run_until(io, r.got);
  ASSERT_TRUE(r.got);
  EXPECT_EQ(r.got->ec, net::error::eof);
}

TEST(ReadDraining, AFullReadLeavesTheNextToTryAtOnce) {
  // GIVEN more bytes than the buffer holds
  net::io_context io(1);
  Pair p(io);
  p.send("0123456789");
  Read r;
  std::string all;
  // WHEN draining reads of 4 bytes follow each other, with no new event between them
  for (int i = 0; i < 3; ++i) {
    async_read_draining(p.ours, SocketReactor(io), net::buffer(r.buf, 4), r.handler());
    run_until(io, r.got);
    ASSERT_TRUE(r.got);
    all.append(r.buf, r.got->n);
  }
  // THEN a full read did not mark the socket drained: the rest was read without another event
  EXPECT_EQ(all, "0123456789");
}

TEST(ReadDraining, AFinThatCameWithTheDrainedDataWaitsForAnotherEvent) {
  if (!DISAGG_READ_RESPONSE_OP) GTEST_SKIP() << "read_response.h's operation is not built for this Boost or reactor";
  // GIVEN a peer that sends its last bytes and half-closes at once, both there before the read
  net::io_context io(1);
  Pair p(io);
  net::write(p.peer, net::buffer(std::string("last")));
  p.peer.shutdown(tcp::socket::shutdown_send);
  p.wait_available(4);
  std::this_thread::sleep_for(20ms);  // the FIN follows the bytes on loopback
  pump(io);                           // their readiness event is taken before the read
  Read r;
  async_read_draining(p.ours, SocketReactor(io), r.buffer(), r.handler());
  run_until(io, r.got);
  ASSERT_TRUE(r.got);
  EXPECT_EQ(r.text(), "last");
  // WHEN the next read starts
  async_read_draining(p.ours, SocketReactor(io), r.buffer(), r.handler());
  pump(io);
  // THEN it does not see the end of file yet, as the header states (a server's keep-alive
  // timeout ends such a connection); a cancel still ends it
  EXPECT_FALSE(r.got);
  p.ours.cancel();
  run_until(io, r.got);
  ASSERT_TRUE(r.got);
  EXPECT_EQ(r.got->ec, net::error::operation_aborted);
}

}  // namespace
}  // namespace disagg::http
