// Hostile clients against the shared HTTP server (engine/src/lib/http), over real loopback
// sockets: a body over the limit still sent in full (lingering close), a head trickled a byte at a
// time (header timeout from the first byte), a stalled body (408), and more idle connections than
// the connection limit (idle ones reclaimed, not a 503). Every wait is bounded by a count of bytes,
// connections or reads; no test asserts a wall-clock time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lib/http/http_server.h"
#include "lib/http/memory_release.h"
#include "server_fixture.h"

namespace disagg::http {
namespace {

using namespace std::chrono_literals;

// An HttpServer on an ephemeral port, run by two threads (server_fixture.h).
using Hostile = test::ServerFixture;

Handler echo() {
  return [](Request& req, ResponseWriter& w) -> Task<void> {
    co_await w.send(200, std::string(req.target()) + "|" + std::to_string(req.body().size()), "text/plain");
  };
}

// Everything `s` receives until EOF or an error.
std::string read_all(tcp::socket& s) {
  std::string out;
  char buf[4096];
  boost::system::error_code ec;
  while (!ec) out.append(buf, s.read_some(net::buffer(buf), ec));
  return out;
}

// Sends one keep-alive request on `s` and reads its answer (up to the echo's "|<size>").
std::string ask(tcp::socket& s, const std::string& target) {
  net::write(s, net::buffer("GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n"));
  std::string out;
  char buf[1024];
  while (out.find(target + "|") == std::string::npos) {
    boost::system::error_code ec;
    out.append(buf, s.read_some(net::buffer(buf), ec));
    if (ec) break;
  }
  return out;
}

TEST_F(Hostile, ABodyOverTheLimitSentInFullStillGetsThe413) {
  // GIVEN a 1 KiB body limit
  ServerOptions o;
  o.max_body_bytes = 1024;
  start(echo(), o);
  // WHEN a client sends its whole 16 MiB body before it reads, as HTTP clients without
  // Expect: 100-continue do (the openai SDK, fetch)
  net::io_context io;
  tcp::socket s(io);
  s.connect(endpoint());
  const std::string body(16u << 20, 'x');
  const std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  boost::system::error_code ec;
  net::write(s, std::array<net::const_buffer, 2>{net::buffer(head), net::buffer(body)}, ec);
  // THEN the write completes (the server read and discarded the body instead of resetting the
  // connection: no EPIPE / ECONNRESET) and the answer is the 413, naming the limit
  ASSERT_FALSE(ec) << ec.message();
  const std::string res = read_all(s);
  EXPECT_EQ(res.rfind("HTTP/1.1 413", 0), 0u) << res.substr(0, 200);
  EXPECT_NE(res.find("limit of 1024 bytes"), std::string::npos) << res;
  EXPECT_NE(res.find("Connection: close"), std::string::npos) << res;
}

TEST_F(Hostile, LingeringIsBoundedInBytes) {
  // GIVEN a server that discards at most 64 KiB after an error reply
  ServerOptions o;
  o.max_body_bytes = 1024;
  o.linger_bytes = 64u << 10;
  start(echo(), o);
  // WHEN a client keeps sending past that (up to 64 MiB, in 64 KiB writes)
  net::io_context io;
  tcp::socket s(io);
  s.connect(endpoint());
  net::write(s, net::buffer(std::string("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 999999999\r\n\r\n")));
  const std::string chunk(64u << 10, 'x');
  boost::system::error_code ec;
  int writes = 0;
  for (; writes < 1024 && !ec; ++writes) net::write(s, net::buffer(chunk), ec);
  // THEN the server closes the connection long before: the writes fail
  EXPECT_TRUE(ec);
  EXPECT_LT(writes, 1024);
}

TEST_F(Hostile, AHeadTrickledAByteAtATimeTimesOutFromItsFirstByte) {
  // GIVEN a 300 ms header timeout and a 60 s keep-alive timeout
  ServerOptions o;
  o.header_timeout = 300ms;
  o.idle_timeout = 60s;
  start(echo(), o);
  // WHEN a client sends a head one byte every 20 ms (each byte well inside any timeout)
  net::io_context io;
  tcp::socket s(io);
  s.connect(endpoint());
  ASSERT_EQ(ask(s, "/first").rfind("HTTP/1.1 200", 0), 0u);  // a keep-alive request first
  s.non_blocking(true);
  const std::string head = "GET /slow HTTP/1.1\r\nHost: h\r\nX-Pad: " + std::string(400, 'p') + "\r\n\r\n";
  std::string answer;
  std::size_t sent = 0;
  boost::system::error_code ec;
  for (; sent < head.size(); ++sent) {
    net::write(s, net::buffer(&head[sent], 1), ec);
    if (ec) break;
    std::this_thread::sleep_for(20ms);
    char buf[1024];
    const std::size_t n = s.read_some(net::buffer(buf), ec);
    answer.append(buf, n);
    if (ec != net::error::would_block) break;  // an answer, EOF or a reset
    ec = {};
  }
  // THEN the server gives up on the head before the client has sent it (about 15 bytes in, where a
  // timeout reset by each byte never fires), and says why
  EXPECT_LT(sent, head.size());
  s.non_blocking(false);
  answer += read_all(s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_NE(answer.find("header timeout"), std::string::npos) << answer;
}

TEST_F(Hostile, TheHeaderClockStartsAtTheFirstByteNotAtTheAccept) {
  // GIVEN a 200 ms header timeout
  ServerOptions o;
  o.header_timeout = 200ms;
  start(echo(), o);
  // WHEN a client connects and writes its request only after twice that (as a loaded client that
  // opened its connections early does)
  net::io_context io;
  tcp::socket s(io);
  s.connect(endpoint());
  std::this_thread::sleep_for(400ms);
  net::write(s, net::buffer(std::string("GET /late HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")));
  // THEN it is served: an idle connection is bounded by the idle timeout, not the header's
  const std::string res = read_all(s);
  EXPECT_EQ(res.rfind("HTTP/1.1 200", 0), 0u) << res;
}

TEST_F(Hostile, AStalledBodyGets408) {
  // GIVEN a 200 ms body timeout
  ServerOptions o;
  o.body_timeout = 200ms;
  start(echo(), o);
  // WHEN a client sends 3 of 10 body bytes and stops
  net::io_context io;
  tcp::socket s(io);
  s.connect(endpoint());
  net::write(s, net::buffer(std::string("POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")));
  // THEN the answer is a 408 that names the body timeout (not a silent close)
  const std::string res = read_all(s);
  EXPECT_EQ(res.rfind("HTTP/1.1 408", 0), 0u) << res;
  EXPECT_NE(res.find("body timeout"), std::string::npos) << res;
  // AND a body that keeps coming, each piece inside the timeout, is read in full
  tcp::socket t(io);
  t.connect(endpoint());
  net::write(t,
             net::buffer(std::string("POST /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: 4\r\n\r\n")));
  for (char c : std::string("wxyz")) {
    std::this_thread::sleep_for(50ms);
    net::write(t, net::buffer(&c, 1));
  }
  const std::string ok = read_all(t);
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
  EXPECT_NE(ok.find("/b|4"), std::string::npos) << ok;
}

TEST_F(Hostile, IdleConnectionsBeyondTheLimitAreReclaimedNotRefused) {
  // GIVEN a limit of 50 connections and a long keep-alive timeout
  ServerOptions o;
  o.max_connections = 50;
  o.idle_timeout = 60s;
  o.header_timeout = 60s;
  start(echo(), o);
  // WHEN 60 clients each get an answer and keep their connection idle, then 10 more connect and
  // send nothing
  net::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> socks;
  for (int i = 0; i < 60; ++i) {
    socks.push_back(std::make_unique<tcp::socket>(io));
    socks.back()->connect(endpoint());
    const std::string target = "/c" + std::to_string(i);
    const std::string res = ask(*socks.back(), target);
    // THEN every one is served: a new client reclaims an idle connection instead of getting a 503
    ASSERT_EQ(res.rfind("HTTP/1.1 200", 0), 0u) << i << ": " << res;
  }
  for (int i = 0; i < 10; ++i) {
    socks.push_back(std::make_unique<tcp::socket>(io));
    socks.back()->connect(endpoint());
  }
  tcp::socket late(io);
  late.connect(endpoint());
  EXPECT_EQ(ask(late, "/late").rfind("HTTP/1.1 200", 0), 0u);
  // AND the connections closed were the longest idle: the first client's is gone, the last
  // served one's still answers
  std::string first = read_all(*socks[0]);
  EXPECT_EQ(first, "");
  EXPECT_EQ(ask(*socks[59], "/again").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_GE(server_->reclaimed(), 20u);
}

TEST_F(Hostile, WhenEveryConnectionIsBusyANewOneGets503) {
  // GIVEN a limit of 4 connections and a handler that holds its request until released
  ServerOptions o;
  o.max_connections = 4;
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  std::atomic<int> entered{0};
  start(
      [released, &entered](Request&, ResponseWriter& w) -> Task<void> {
        entered.fetch_add(1);
        while (released.wait_for(0s) != std::future_status::ready) {
          net::steady_timer t(w.executor(), 5ms);
          co_await t.async_wait(net::use_awaitable);
        }
        co_await w.send(200, "done", "text/plain");
      },
      o);
  net::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> busy;
  for (int i = 0; i < 4; ++i) {
    busy.push_back(std::make_unique<tcp::socket>(io));
    busy.back()->connect(endpoint());
    net::write(*busy.back(), net::buffer(std::string("GET /hold HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")));
  }
  for (int spins = 0; entered.load() < 4 && spins < 2000; ++spins) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(entered.load(), 4);
  // WHEN a fifth client sends a request
  tcp::socket fifth(io);
  fifth.connect(endpoint());
  net::write(fifth, net::buffer(std::string("GET /x HTTP/1.1\r\nHost: h\r\n\r\n")));
  // THEN it reads a 503 that names the limit (the server read its request before closing, so no
  // reset hides the answer); the busy requests are not disturbed
  const std::string res = read_all(fifth);
  EXPECT_EQ(res.rfind("HTTP/1.1 503", 0), 0u) << res;
  EXPECT_NE(res.find("all 4"), std::string::npos) << res;
  release->set_value();
  for (auto& s : busy) EXPECT_EQ(read_all(*s).rfind("HTTP/1.1 200", 0), 0u);
}

// Resident memory of this process, in bytes (Linux).
std::size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<std::size_t>(resident) * 4096u;
}

TEST(MemoryRelease, HandsFreedHeapBackBeyondWhatItKeeps) {
  // GIVEN 64 MiB allocated in pieces below any mmap threshold and touched, then every other piece
  // freed: the holes cannot merge into the heap's top, so the allocator does not give them back on
  // its own
  std::vector<std::unique_ptr<char[]>> pieces;
  for (int i = 0; i < 1024; ++i) {
    pieces.emplace_back(new char[64u << 10]);
    std::memset(pieces.back().get(), i, 64u << 10);
  }
  for (std::size_t i = 0; i < pieces.size(); i += 2) pieces[i].reset();
  const std::size_t before = resident_bytes();
  // WHEN the free memory beyond 8 MiB is released
  const MemoryRelease r = release_free_memory(8u << 20);
  // THEN the allocator held the holes free, and the excess left the process's resident memory
  EXPECT_GE(r.free_bytes, 30u << 20);
  EXPECT_EQ(r.released_bytes, r.free_bytes - (8u << 20));
  EXPECT_LT(resident_bytes() + (16u << 20), before);
  // AND a keep above what is free releases nothing
  EXPECT_EQ(release_free_memory(std::size_t{1} << 40).released_bytes, 0u);
}

}  // namespace
}  // namespace disagg::http
