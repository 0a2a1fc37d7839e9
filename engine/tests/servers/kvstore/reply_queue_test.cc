// ReplyQueue: the bytes that reach the socket are exactly the RESP replies queued, in order, however
// the socket splits the writes, with small replies packed and large values sent by reference.
#include "reply_queue.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <string>

namespace disagg::kvstore {
namespace {

// Reads whatever is available on a non-blocking fd.
void drain(int fd, std::string* out) {
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r <= 0) return;
    out->append(buf, static_cast<std::size_t>(r));
  }
}

TEST(ReplyQueue, BytesOnTheWireAreTheRepliesInOrderAcrossPartialWrites) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    // GIVEN a socket pair with small buffers, so writes are cut short often
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    const int small = 4096;
    ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    ::setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
    // WHEN random replies (small ones, values by reference, errors with CR/LF) are queued between
    // flushes, while the reader takes what arrives
    std::mt19937_64 rng(seed);
    ReplyQueue q;
    std::string expected, got;
    for (int i = 0; i < 3000; ++i) {
      switch (rng() % 6) {
        case 0:
          q.simple("OK");
          expected += "+OK\r\n";
          break;
        case 1: {
          const auto v = static_cast<std::int64_t>(rng() % 200000) - 100000;
          q.integer(v);
          expected += ":" + std::to_string(v) + "\r\n";
          break;
        }
        case 2: {
          const std::size_t n = rng() % 64 == 0 ? 20000 + rng() % 300000 : rng() % 100;
          Blob b = Blob::allocate(n);
          for (std::size_t k = 0; k < n; ++k) b.data()[k] = static_cast<char>(rng());
          q.bulk(b);
          expected += "$" + std::to_string(n) + "\r\n" + std::string(b.view()) + "\r\n";
          break;
        }
        case 3:
          q.error("ERR bad\r\nthing");
          expected += "-ERR bad  thing\r\n";
          break;
        case 4:
          q.null_bulk();
          expected += "$-1\r\n";
          break;
        case 5: {
          const std::size_t n = rng() % 5;
          q.array(n);
          expected += "*" + std::to_string(n) + "\r\n";
          break;
        }
      }
      if (rng() % 3 == 0) {
        ASSERT_NE(q.flush(fds[0]), ReplyQueue::FlushResult::kError);
        drain(fds[1], &got);
      }
    }
    while (!q.empty()) {
      ASSERT_NE(q.flush(fds[0]), ReplyQueue::FlushResult::kError);
      drain(fds[1], &got);
    }
    drain(fds[1], &got);
    // THEN nothing is left queued and the reader saw exactly the replies, in order
    EXPECT_EQ(q.bytes(), 0u);
    ASSERT_EQ(got.size(), expected.size()) << "seed " << seed;
    EXPECT_TRUE(got == expected) << "seed " << seed;
    ::close(fds[0]);
    ::close(fds[1]);
  }
}

}  // namespace
}  // namespace disagg::kvstore
