// Tests of the shared HTTP layer (engine/src/lib/http): SSE framing and parsing, the OpenAI
// error shape, and an in-process server driven over real loopback sockets (limits, keep-alive,
// streaming, client timeouts, graceful drain).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lib/http/http_client.h"
#include "lib/http/http_server.h"
#include "lib/openai/openai_error.h"
#include "lib/openai/sse.h"
#include "lib/http/wake_signal.h"
#include "server_fixture.h"

namespace disagg::http {
namespace {

using namespace std::chrono_literals;

// ---- SSE ------------------------------------------------------------------------------------

TEST(Sse, FramesOneEventPerDataLine) {
  // GIVEN a JSON payload WHEN framed THEN it is "data: <payload>\n\n"
  EXPECT_EQ(sse_event(R"({"a":1})"), "data: {\"a\":1}\n\n");
  std::string out;
  append_sse_event(out, "x");
  out.append(kSseDone);
  EXPECT_EQ(out, "data: x\n\ndata: [DONE]\n\n");
}

TEST(Sse, ParserReassemblesEventsSplitAnywhere) {
  // GIVEN a stream of three events, one with CRLF endings, a comment and a two-line data field
  const std::string stream =
      "data: {\"k\":1}\n\n: keep-alive comment\n\ndata: line1\r\ndata: line2\r\n\r\nevent: x\ndata:[DONE]\n\n";
  // WHEN it is fed in every possible two-piece split
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    SseParser p;
    std::vector<std::string> events;
    ASSERT_TRUE(p.feed(std::string_view(stream).substr(0, cut), events));
    ASSERT_TRUE(p.feed(std::string_view(stream).substr(cut), events));
    // THEN the same events come out, and [DONE] is recognised
    ASSERT_EQ(events.size(), 3u) << "cut at " << cut;
    EXPECT_EQ(events[0], "{\"k\":1}");
    EXPECT_EQ(events[1], "line1\nline2");
    EXPECT_EQ(events[2], "[DONE]");
    EXPECT_TRUE(p.done());
    EXPECT_EQ(p.buffered(), 0u);
  }
}

TEST(Sse, ParserRefusesOversizedEvents) {
  // GIVEN a parser limited to 16 bytes per event WHEN a longer line arrives THEN it fails for good
  SseParser p(16);
  std::vector<std::string> events;
  EXPECT_TRUE(p.feed("data: short\n\n", events));
  EXPECT_FALSE(p.feed("data: 0123456789abcdef0123\n\n", events));
  EXPECT_FALSE(p.feed("data: ok\n\n", events));
  EXPECT_EQ(events.size(), 1u);
}

TEST(OpenAiError, HasTheFourFields) {
  // GIVEN a 404 with a param and a code WHEN rendered THEN the OpenAI shape comes out
  const auto j = nlohmann::json::parse(openai_error_body(404, "no such model", "model", "model_not_found"));
  EXPECT_EQ(j["error"]["message"], "no such model");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  const auto k = nlohmann::json::parse(openai_error_body(503, "busy"));
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_TRUE(k["error"]["code"].is_null());
  EXPECT_EQ(k["error"]["type"], "overloaded_error");
  EXPECT_EQ(openai_error_type(500), "server_error");
}

TEST(TargetPath, DropsTheQuery) {
  EXPECT_EQ(target_path("/v1/models?x=1"), "/v1/models");
  EXPECT_EQ(target_path("/health"), "/health");
}

// ---- server over loopback ---------------------------------------------------------------------

// An HttpServer on an ephemeral port with two threads (server_fixture.h), and client helpers.
class ServerFixture : public test::ServerFixture {
 protected:
  // Sends raw bytes on a new connection and returns everything until the server closes it.
  std::string raw(const std::string& bytes) {
    net::io_context io;
    tcp::socket s(io);
    s.connect(endpoint());
    boost::system::error_code ec;
    net::write(s, net::buffer(bytes), ec);
    std::string out;
    char buf[4096];
    while (true) {
      const std::size_t n = s.read_some(net::buffer(buf), ec);
      out.append(buf, n);
      if (ec) break;
    }
    return out;
  }
  // Runs a client coroutine on its own io_context and returns its result.
  template <class T>
  T client(std::function<Task<T>(net::any_io_executor)> fn) {
    net::io_context io;
    std::optional<T> result;
    net::co_spawn(
        io, [&]() -> Task<void> { result.emplace(co_await fn(io.get_executor())); }, net::detached);
    io.run();
    return std::move(*result);
  }
};

Handler echo_handler() {
  return [](Request& req, ResponseWriter& w) -> Task<void> {
    co_await w.send(200, std::string(req.target()) + "|" + req.body(), "text/plain");
  };
}

TEST_F(ServerFixture, RefusesOversizedBodiesBeforeReadingThem) {
  // GIVEN a 1 KiB body limit
  ServerOptions o;
  o.max_body_bytes = 1024;
  start(echo_handler(), o);
  // WHEN a request declares 5000 bytes THEN 413 with an OpenAI error, before the body is sent
  const std::string res = raw("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n");
  EXPECT_EQ(res.rfind("HTTP/1.1 413", 0), 0u) << res;
  EXPECT_NE(res.find("\"invalid_request_error\""), std::string::npos);
  // WHEN a chunked body grows past the limit THEN 413 too
  std::string chunked = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) chunked += "200\r\n" + std::string(512, 'a') + "\r\n";
  chunked += "0\r\n\r\n";
  EXPECT_EQ(raw(chunked).rfind("HTTP/1.1 413", 0), 0u);
}

TEST_F(ServerFixture, AnswersMalformedRequestsWith400And431) {
  start(echo_handler());
  // GIVEN garbage instead of a request line THEN 400
  EXPECT_EQ(raw("THIS IS NOT HTTP\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  // GIVEN a bad Content-Length THEN 400
  EXPECT_EQ(raw("POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  // GIVEN a header over the 16 KiB default limit THEN 431
  const std::string big = "GET / HTTP/1.1\r\nX-Big: " + std::string(20000, 'b') + "\r\n\r\n";
  EXPECT_EQ(raw(big).rfind("HTTP/1.1 431", 0), 0u);
  // GIVEN Content-Length together with Transfer-Encoding (a smuggling vector) THEN 400
  EXPECT_EQ(raw("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
                .rfind("HTTP/1.1 400", 0),
            0u);
  // GIVEN a transfer coding the server cannot decode THEN 501; GIVEN HTTP/2.0 on this port THEN 505
  EXPECT_EQ(raw("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").rfind("HTTP/1.1 501", 0), 0u);
  EXPECT_EQ(raw("GET / HTTP/2.0\r\n\r\n").rfind("HTTP/1.1 505", 0), 0u);
  // GIVEN empty lines before the request line THEN they are skipped (RFC 9112 2.2)
  EXPECT_NE(raw("\r\nGET /slow HTTP/1.1\r\nConnection: close\r\n\r\n").find("/slow|"), std::string::npos);
}

TEST_F(ServerFixture, ReadsChunkedBodiesAndAnswersExpectContinue) {
  start(echo_handler());
  // GIVEN a chunked body with an extension and a trailer, then a second request on the connection
  const std::string res =
      raw("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n"
          "GET /d HTTP/1.1\r\nConnection: close\r\n\r\n");
  // THEN the handler sees the decoded body, and the next request is served after it
  EXPECT_NE(res.find("/c|abcde"), std::string::npos) << res;
  EXPECT_NE(res.find("/d|"), std::string::npos) << res;
  // GIVEN `Expect: 100-continue` WHEN only the head is sent THEN 100 Continue comes before the body
  net::io_context io;
  tcp::socket s(io);
  s.connect(endpoint());
  net::write(s, net::buffer(std::string(
                    "POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\nConnection: close\r\n\r\n")));
  std::string got(64, '\0');
  got.resize(s.read_some(net::buffer(got)));
  EXPECT_EQ(got, "HTTP/1.1 100 Continue\r\n\r\n");
  net::write(s, net::buffer(std::string("body")));
  boost::system::error_code ec;
  std::string rest;
  char buf[1024];
  while (!ec) rest.append(buf, s.read_some(net::buffer(buf), ec));
  EXPECT_EQ(rest.rfind("HTTP/1.1 200", 0), 0u) << rest;
  EXPECT_NE(rest.find("/e|body"), std::string::npos) << rest;
}

TEST_F(ServerFixture, KeepsConnectionsAlive) {
  start(echo_handler());
  // GIVEN two pipelined requests on one connection, the second asking to close
  const std::string res =
      raw("POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi"
          "GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  // THEN both are answered in order on the same connection
  const auto first = res.find("/a|hi");
  const auto second = res.find("/b|");
  EXPECT_NE(first, std::string::npos) << res;
  EXPECT_NE(second, std::string::npos) << res;
  EXPECT_LT(first, second);
}

TEST_F(ServerFixture, AnswersHttp10InKind) {
  start(echo_handler());
  // GIVEN an HTTP/1.0 request asking for keep-alive, then a plain one on the same connection
  const std::string res = raw("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n");
  // THEN both are answered as HTTP/1.0: the first says it keeps the connection, the second does
  // not (and the server closes it, which ends raw())
  const auto second = res.find("HTTP/1.0 200 OK\r\n", 1);
  ASSERT_EQ(res.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << res;
  ASSERT_NE(second, std::string::npos) << res;
  EXPECT_NE(res.substr(0, second).find("Connection: keep-alive\r\n"), std::string::npos) << res;
  EXPECT_EQ(res.substr(second).find("Connection:"), std::string::npos) << res;
  EXPECT_NE(res.find("/b|"), std::string::npos) << res;
}

TEST_F(ServerFixture, StreamsChunkedSseThatTheClientReadsIncrementally) {
  // GIVEN a handler that streams its first event, then holds the rest until the client has read it
  // (at most 5 s), then streams 4 more: the client can only see the first event early if the
  // server sent it unbuffered (a causal check, not a clock one)
  std::atomic<bool> client_saw_first{false};
  std::atomic<bool> held_until_seen{false};
  start([&](Request&, ResponseWriter& w) -> Task<void> {
    co_await w.start_stream();
    co_await w.write(sse_event("{\"i\":0}"));
    net::steady_timer t(w.executor());
    for (int waited = 0; waited < 500 && !client_saw_first.load(); ++waited) {
      t.expires_after(10ms);
      co_await t.async_wait(net::use_awaitable);
    }
    held_until_seen = client_saw_first.load();
    for (int i = 1; i < 5; ++i) co_await w.write(sse_event("{\"i\":" + std::to_string(i) + "}"));
    co_await w.write(kSseDone);
    co_await w.finish();
  });
  const std::uint16_t port = server_->port();
  // WHEN the client streams it
  struct Seen {
    std::vector<std::string> events;
    std::string content_type;
  };
  auto seen = client<Seen>([port, &client_saw_first](net::any_io_executor ex) -> Task<Seen> {
    Seen out;
    ClientRequest req;
    req.method = bhttp::verb::post;
    req.target = "/v1/completions";
    req.body = "{}";
    auto s = co_await ClientStream::open(ex, "127.0.0.1", port, req);
    if (!s) co_return out;
    out.content_type = std::string((*s)->headers()["Content-Type"]);
    SseParser parser;
    while (true) {
      auto piece = co_await (*s)->read_some();
      if (!piece || piece->empty()) break;
      parser.feed(*piece, out.events);
      if (!out.events.empty()) client_saw_first = true;
    }
    co_return out;
  });
  // THEN every event arrives, and the first one reached the client while the rest were held back
  ASSERT_EQ(seen.events.size(), 6u);
  EXPECT_EQ(seen.events[0], "{\"i\":0}");
  EXPECT_EQ(seen.events[5], "[DONE]");
  EXPECT_EQ(seen.content_type, "text/event-stream");
  EXPECT_TRUE(held_until_seen.load());
}

TEST_F(ServerFixture, ClientReportsTimeoutsAndRefusedConnections) {
  // GIVEN a handler that answers after 300 ms
  start([](Request&, ResponseWriter& w) -> Task<void> {
    net::steady_timer t(w.executor(), 300ms);
    co_await t.async_wait(net::use_awaitable);
    co_await w.send(200, "late", "text/plain");
  });
  const std::uint16_t port = server_->port();
  // WHEN the client allows 50 ms to the first byte THEN first_byte_timeout, before any response
  auto err = client<ClientError>([port](net::any_io_executor ex) -> Task<ClientError> {
    ClientOptions o;
    o.first_byte_timeout = 50ms;
    ClientRequest req;  // named: g++ 12 mishandles braced temporaries inside co_await
    auto r = co_await fetch(ex, "127.0.0.1", port, std::move(req), o);
    if (r) co_return ClientError();
    co_return r.error();
  });
  EXPECT_EQ(err.code, ClientErrc::first_byte_timeout) << err.message();
  EXPECT_TRUE(err.before_response);
  // WHEN it allows enough THEN the body arrives
  auto body = client<std::string>([port](net::any_io_executor ex) -> Task<std::string> {
    ClientRequest req;
    auto r = co_await fetch(ex, "127.0.0.1", port, std::move(req));
    if (!r) co_return r.error().message();
    co_return r->body;
  });
  EXPECT_EQ(body, "late");
  // WHEN nothing listens on the port THEN connect_failed
  tcp::acceptor probe(ioc_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  const std::uint16_t closed = probe.local_endpoint().port();
  probe.close();
  auto refused = client<ClientError>([closed](net::any_io_executor ex) -> Task<ClientError> {
    ClientRequest req;
    auto r = co_await fetch(ex, "127.0.0.1", closed, std::move(req));
    if (r) co_return ClientError();
    co_return r.error();
  });
  EXPECT_EQ(refused.code, ClientErrc::connect_failed) << refused.message();
}

TEST_F(ServerFixture, PooledClientReusesKeepAliveConnections) {
  // GIVEN a server that closes idle keep-alive connections after 150 ms, and a client pool
  ServerOptions o;
  o.idle_timeout = 150ms;
  start(echo_handler(), o);
  const std::uint16_t port = server_->port();
  ConnectionPool pool;
  auto run = [&](int n) {
    return client<std::string>([&pool, port, n](net::any_io_executor ex) -> Task<std::string> {
      std::string bodies;
      for (int i = 0; i < n; ++i) {
        ClientRequest req;
        req.target = "/r" + std::to_string(i);
        ClientOptions opts;
        opts.pool = &pool;
        auto r = co_await fetch(ex, "127.0.0.1", port, std::move(req), opts);
        if (!r) co_return r.error().message();
        bodies += r->body + ";";
      }
      co_return bodies;
    });
  };
  // WHEN three requests run one after another
  EXPECT_EQ(run(3), "/r0|;/r1|;/r2|;");
  // THEN the second and third reused the first connection, which is parked again
  EXPECT_EQ(pool.reused(), 2u);
  EXPECT_EQ(pool.idle(), 1u);
  EXPECT_EQ(server_->connections(), 1u);
  // WHEN the server has closed the idle connection THEN the next request still succeeds
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(run(1), "/r0|;");
  EXPECT_EQ(pool.idle(), 1u);
  // WHEN the endpoint is dropped (it left DNS) THEN its idle connection is closed
  pool.drop("127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(pool.idle(), 0u);
}

// Wakes the handler that watches its client (ResponseWriter::watch_close).
struct Wake {
  WakeSignal signal;
  void operator()() const { signal.notify(); }
};

TEST_F(ServerFixture, WatchCloseWakesAHandlerWhoseClientHungUp) {
  // GIVEN a handler that would wait 30 s for its answer, unless its client leaves
  std::atomic<int> closed_seen{0};
  start([&](Request&, ResponseWriter& w) -> Task<void> {
    WakeSignal signal(w.executor());
    w.watch_close(Wake{signal});
    co_await signal.wait(30s);
    if (w.client_closed()) {
      closed_seen.fetch_add(1);
      w.abort();
      co_return;
    }
    co_await w.send(200, "late", "text/plain");
  });
  // WHEN a client sends a request and hangs up before the answer
  {
    net::io_context io;
    tcp::socket s(io);
    s.connect(endpoint());
    net::write(s, net::buffer(std::string("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi")));
    s.close();
  }
  // THEN the handler learns it long before its 30 s wait ends
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (closed_seen.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(closed_seen.load(), 1);
}

// Reads from `s` until `until` is in what was read, or EOF / an error (then `eof` is set).
std::string read_until(tcp::socket& s, const std::string& until, bool* eof = nullptr) {
  std::string out;
  char buf[1024];
  boost::system::error_code ec;
  while (out.find(until) == std::string::npos) {
    const std::size_t n = s.read_some(net::buffer(buf), ec);
    out.append(buf, n);
    if (ec) {
      if (eof != nullptr) *eof = true;
      break;
    }
  }
  return out;
}

// A handler that watches its client, waits `delay`, counts a close it saw, then echoes the target.
Handler watching_echo(std::chrono::milliseconds delay, std::atomic<int>& closed_seen) {
  return [delay, &closed_seen](Request& req, ResponseWriter& w) -> Task<void> {
    WakeSignal signal(w.executor());
    w.watch_close(Wake{signal});
    co_await signal.wait(delay);
    if (w.client_closed()) closed_seen.fetch_add(1);
    co_await w.send(200, std::string(req.target()), "text/plain");
  };
}

TEST_F(ServerFixture, WatchCloseLeavesAClientThatStaysAlone) {
  // GIVEN a handler that watches its client and answers after 50 ms
  std::atomic<int> closed_seen{0};
  start(watching_echo(50ms, closed_seen));
  // WHEN one keep-alive connection sends a request, reads the answer, then sends another
  net::io_context io;
  tcp::socket s(io);
  s.connect(endpoint());
  auto exchange = [&](const std::string& request, const std::string& until) {
    net::write(s, net::buffer(request));
    return read_until(s, until);
  };
  const std::string first = exchange("GET /one HTTP/1.1\r\nHost: h\r\n\r\n", "/one");
  const std::string second = exchange("GET /two HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", "/two");
  // THEN both are answered on the same connection and no close was reported
  EXPECT_NE(first.find("200 OK"), std::string::npos) << first;
  EXPECT_NE(second.find("/two"), std::string::npos) << second;
  EXPECT_EQ(closed_seen.load(), 0);
}

TEST_F(ServerFixture, PipelinedRequestsAreServedInOrderWhileTheHandlerWatches) {
  // GIVEN a handler that watches its client and answers after 30 ms
  std::atomic<int> closed_seen{0};
  start(watching_echo(30ms, closed_seen));
  // WHEN a client sends three requests in one write (the next ones arrive while the first is served)
  net::io_context io;
  tcp::socket s(io);
  s.connect(endpoint());
  net::write(s, net::buffer(std::string("GET /p1 HTTP/1.1\r\nHost: h\r\n\r\n"
                                        "POST /p2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
                                        "GET /p3 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")));
  bool eof = false;
  const std::string out = read_until(s, "\r\n\r\n/p3", &eof);
  // THEN all three are answered, in order, and none was taken for a client that left
  const auto p1 = out.find("/p1"), p2 = out.find("/p2"), p3 = out.find("/p3");
  ASSERT_NE(p3, std::string::npos) << out;
  EXPECT_LT(p1, p2);
  EXPECT_LT(p2, p3);
  EXPECT_EQ(closed_seen.load(), 0);
}

TEST_F(ServerFixture, AnIdleKeepAliveConnectionTimesOutAndDrainsAfterItsResponse) {
  // GIVEN a server that closes keep-alive connections idle for 300 ms
  ServerOptions o;
  o.idle_timeout = 300ms;
  start(echo_handler(), o);
  net::io_context io;
  const auto ask = [&](tcp::socket& s) {
    s.connect(endpoint());
    net::write(s, net::buffer(std::string("GET /idle HTTP/1.1\r\nHost: h\r\n\r\n")));
    return read_until(s, "/idle|");
  };
  // WHEN a client gets its answer and then sends nothing
  tcp::socket a(io);
  EXPECT_NE(ask(a).find("200 OK"), std::string::npos);
  const auto t0 = std::chrono::steady_clock::now();
  bool eof = false;
  read_until(a, "never", &eof);
  const auto waited = std::chrono::steady_clock::now() - t0;
  // THEN the server closes it after the idle timeout, not before
  EXPECT_TRUE(eof);
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 5s);
  // WHEN another connection is idle after its answer and the server drains
  tcp::socket b(io);
  EXPECT_NE(ask(b).find("200 OK"), std::string::npos);
  std::promise<void> drained;
  server_->drain([&] {
    drained.set_value();
    ioc_.stop();
  });
  // THEN that connection is closed at once and the drain completes well before the idle timeout
  EXPECT_EQ(drained.get_future().wait_for(200ms), std::future_status::ready);
  eof = false;
  read_until(b, "never", &eof);
  EXPECT_TRUE(eof);
}

TEST_F(ServerFixture, DrainFinishesInFlightRequestsAndStopsAccepting) {
  // GIVEN a request in flight that takes 200 ms
  std::atomic<bool> entered{false};
  start([&entered](Request&, ResponseWriter& w) -> Task<void> {
    entered = true;
    net::steady_timer t(w.executor(), 200ms);
    co_await t.async_wait(net::use_awaitable);
    co_await w.send(200, "done", "text/plain");
  });
  const std::uint16_t port = server_->port();
  auto in_flight = std::async(std::launch::async, [this] { return raw("GET /slow HTTP/1.1\r\nHost: h\r\n\r\n"); });
  while (!entered) std::this_thread::sleep_for(1ms);
  // WHEN the server drains
  std::promise<void> drained;
  server_->drain([&] {
    drained.set_value();
    ioc_.stop();
  });
  // THEN the in-flight request completes with Connection: close, and drained fires after it
  const std::string res = in_flight.get();
  EXPECT_EQ(res.rfind("HTTP/1.1 200", 0), 0u) << res;
  EXPECT_NE(res.find("Connection: close"), std::string::npos) << res;
  EXPECT_EQ(drained.get_future().wait_for(2s), std::future_status::ready);
  // AND new connections are refused
  net::io_context io;
  tcp::socket s(io);
  boost::system::error_code ec;
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  EXPECT_TRUE(ec) << "still accepting after drain";
}

// ---- one io_context per thread (the router's layout) --------------------------------------------

TEST(ThreadPerContext, ConnectionsSpreadOverContextsAndChunksFrameByHand) {
  // GIVEN a server whose connections go round robin to two io_contexts, each run by one thread, and
  // a handler that streams with the first chunk in start_stream() and the last one in finish()
  net::io_context a(1), b(1);
  auto guard_a = net::make_work_guard(a);
  auto guard_b = net::make_work_guard(b);
  std::mutex mu;
  std::set<std::thread::id> threads;
  ServerOptions o;
  o.connection_contexts = {&a, &b};
  auto s = HttpServer::create(a, o, [&](Request&, ResponseWriter& w) -> Task<void> {
    {
      std::lock_guard lock(mu);
      threads.insert(std::this_thread::get_id());
    }
    if (co_await w.start_stream(200, "text/event-stream", {}, "first")) {
      co_await w.write("mid");
      co_await w.finish("last!");
    }
  });
  ASSERT_TRUE(s.has_value()) << s.error().message;
  HttpServer& server = **s;
  server.start();
  std::thread ta([&a] { a.run(); });
  std::thread tb([&b] { b.run(); });
  // WHEN four connections each send one request
  std::vector<std::string> answers;
  for (int i = 0; i < 4; ++i) {
    net::io_context io;
    tcp::socket sock(io);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server.port()));
    boost::system::error_code ec;
    net::write(sock, net::buffer(std::string("GET /s HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")), ec);
    std::string out;
    char buf[4096];
    while (!ec) {
      const std::size_t n = sock.read_some(net::buffer(buf), ec);
      out.append(buf, n);
    }
    answers.push_back(out);
  }
  std::promise<void> drained;
  server.drain([&] { drained.set_value(); });
  drained.get_future().wait_for(2s);
  guard_a.reset();
  guard_b.reset();
  a.stop();
  b.stop();
  ta.join();
  tb.join();
  // THEN both threads served requests, and each answer is a correctly framed chunked stream
  EXPECT_EQ(threads.size(), 2u);
  for (const std::string& r : answers) {
    EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
    EXPECT_NE(r.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << r;
    EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos) << r;
    const std::size_t body = r.find("\r\n\r\n");
    ASSERT_NE(body, std::string::npos) << r;
    EXPECT_EQ(r.substr(body + 4), "5\r\nfirst\r\n3\r\nmid\r\n5\r\nlast!\r\n0\r\n\r\n");
  }
}

TEST_F(ServerFixture, RegisteredPoolReusesSocketsOnTheirOwnContext) {
  // GIVEN a keep-alive server that answers "/slow" after 300 ms, and, on one client io_context, a
  // pool that parks registered sockets (with their deadline timers)
  start([](Request& req, ResponseWriter& w) -> Task<void> {
    if (req.target() == "/slow") {
      net::steady_timer t(w.executor(), 300ms);
      co_await t.async_wait(net::use_awaitable);
    }
    co_await w.send(200, std::string(req.target()) + "|" + req.body(), "text/plain");
  });
  const std::uint16_t port = server_->port();
  // WHEN five requests run one after another with a pool that lives inside the client coroutine
  // (it must go before its io_context), then a sixth, slow one with a 100 ms first-byte timeout,
  // then a seventh, whose connection is parked when the pool goes
  struct Counts {
    std::string bodies;
    std::uint64_t reused = 0;
    std::size_t idle = 0;
  };
  auto counts = client<Counts>([port](net::any_io_executor ex) -> Task<Counts> {
    ConnectionPool::Options po;
    po.keep_registered = true;
    ConnectionPool pool(po);
    Counts out;
    for (int i = 0; i < 7; ++i) {
      ClientRequest req;
      req.method = bhttp::verb::post;
      req.target = i == 5 ? "/slow" : "/r" + std::to_string(i);
      req.body = "b" + std::to_string(i);
      ClientOptions opts;
      opts.pool = &pool;
      // A parked deadline that outlived its pool would keep this io_context running for 10 minutes:
      // ctest's timeout for this suite (120 s) fails the test then.
      opts.first_byte_timeout = i == 5 ? 100ms : 600s;
      opts.connect_timeout = 600s;
      auto r = co_await fetch(ex, "127.0.0.1", port, std::move(req), opts);
      out.bodies += r ? r->body + ";" : std::string(to_string(r.error().code)) + ";";
      if (i == 4) {
        out.reused = pool.reused();
        out.idle = pool.idle();
      }
    }
    co_return out;
  });
  // THEN every answer is right, four requests reused the first connection, which is parked again
  EXPECT_EQ(counts.bodies, "/r0|b0;/r1|b1;/r2|b2;/r3|b3;/r4|b4;first_byte_timeout;/r6|b6;");
  EXPECT_EQ(counts.reused, 4u);
  EXPECT_EQ(counts.idle, 1u);
}

// A scripted upstream on one thread: on each accepted connection it answers requests with the
// next entries of `script` (raw bytes; an empty entry closes the connection without a byte, one
// starting with '~' sends the rest and then closes it), and counts connections and requests.
class ScriptedUpstream {
 public:
  explicit ScriptedUpstream(std::vector<std::string> script)
      : script_(std::move(script)), acceptor_(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedUpstream() {
    stop_.store(true);
    boost::system::error_code ec;
    tcp::socket wake(io_);  // unblocks a pending accept()
    wake.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }

 private:
  void serve() {
    std::size_t next = 0;
    while (next < script_.size()) {
      boost::system::error_code ec;
      tcp::socket s(io_);
      acceptor_.accept(s, ec);
      if (ec || stop_.load()) return;
      connections_.fetch_add(1);
      std::string in;
      while (next < script_.size()) {
        char buf[4096];
        const std::size_t n = s.read_some(net::buffer(buf), ec);
        if (ec) break;  // the client closed this connection
        in.append(buf, n);
        if (in.find("\r\n\r\n") == std::string::npos) continue;
        in.clear();
        requests_.fetch_add(1);
        std::string_view answer = script_[next++];
        if (answer.empty()) break;  // close without answering
        const bool then_close = answer.front() == '~';
        if (then_close) answer.remove_prefix(1);
        net::write(s, net::buffer(answer), ec);
        if (then_close) break;
      }
      s.close(ec);
    }
  }

  std::vector<std::string> script_;
  net::io_context io_;
  tcp::acceptor acceptor_;
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// fetch() with `pool` of GET `target`; "body" or the error's code.
Task<std::string> pooled_get(net::any_io_executor ex, std::uint16_t port, ConnectionPool& pool, std::string target,
                             SocketReactor reactor) {
  ClientRequest req;
  req.target = std::move(target);
  ClientOptions opts;
  opts.pool = &pool;
  opts.one_thread_reactor = reactor;
  auto r = co_await fetch(ex, "127.0.0.1", port, std::move(req), opts);
  co_return r ? r->body : std::string(to_string(r.error().code));
}

// GETs `targets` one after another through `pool` on a new io_context; each "body;" or "code;".
// The context is run by one thread, as the router's are, so the client's first read of each
// answer skips its try (read_response.h); `one_thread_reads` false: Asio's own reads.
std::string pooled_gets(std::uint16_t port, ConnectionPool& pool, std::vector<std::string> targets,
                        bool one_thread_reads = true) {
  net::io_context io(1);
  const SocketReactor reactor = one_thread_reads ? SocketReactor(io) : SocketReactor();
  std::string got;
  net::co_spawn(
      io,
      [&]() -> Task<void> {
        for (std::string& target : targets) {
          got += co_await pooled_get(io.get_executor(), port, pool, std::move(target), reactor) + ";";
        }
      },
      net::detached);
  io.run();
  return got;
}

TEST(PooledConnection, ClosedBeforeAnyByteIsResentOnceOnANewConnection) {
  // GIVEN an upstream that answers one request, then closes that kept-alive connection when the
  // second request arrives on it (as if it had timed it out unseen), then answers on a new one
  ScriptedUpstream up(
      {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none", "", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo"});
  ConnectionPool pool;
  // WHEN two requests run one after another over the pool
  const std::string got = pooled_gets(up.port(), pool, {"/a", "/b"});
  // THEN the second was sent on the pooled connection, met its close before any byte, and was
  // resent once on a new connection, which succeeded
  EXPECT_EQ(got, "one;two;");
  EXPECT_EQ(up.requests(), 3);
  EXPECT_EQ(up.connections(), 2);
  EXPECT_EQ(pool.reused(), 1u);
}

TEST(PooledConnection, ClosedAfterAResponseByteIsNeverResent) {
  // GIVEN an upstream that answers one request, then sends part of a status line for the second
  // and closes the connection
  ScriptedUpstream up({"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none", "~HTTP/1.1 200 OK\r\nContent-Le",
                       "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nthree"});
  ConnectionPool pool;
  // WHEN two requests run one after another over the pool
  const std::string got = pooled_gets(up.port(), pool, {"/a", "/b"});
  // THEN the second fails (its answer had started): it is not sent again
  EXPECT_EQ(got.substr(0, 4), "one;");
  EXPECT_NE(got, "one;three;");
  EXPECT_EQ(up.requests(), 2);
  EXPECT_EQ(up.connections(), 1);
}

class PooledConnectionReads : public ::testing::TestWithParam<bool> {};

TEST_P(PooledConnectionReads, ClientReadsEveryResponseFraming) {
  // GIVEN an upstream that answers, in turn: a 100 Continue then a chunked body with a trailer; a
  // Content-Length body; a body delimited by closing the connection; a broken chunked body; and a
  // head larger than the client's 16 KiB read buffer
  const std::string big(20000, 'h');
  ScriptedUpstream up(
      {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
       "3\r\none\r\n0\r\nT: x\r\n\r\n",
       "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo", "~HTTP/1.1 200 OK\r\n\r\nthree-until-close",
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n",
       "HTTP/1.1 200 OK\r\nX-Big: " + big + "\r\nContent-Length: 4\r\n\r\nfour"});
  ConnectionPool pool;
  // WHEN five requests run one after another over the pool
  const std::string got = pooled_gets(up.port(), pool, {"/1", "/2", "/3", "/4", "/5"}, GetParam());
  // THEN each body comes out whole (the 1xx skipped, the trailer dropped), the first two share a
  // connection, the close-delimited one is not pooled, and the broken one is a protocol error
  EXPECT_EQ(got, "one;two;three-until-close;protocol_error;four;");
  EXPECT_EQ(up.requests(), 5);
  EXPECT_EQ(up.connections(), 3);
  EXPECT_EQ(pool.reused(), 2u);
}

// true: the client's first read of each answer skips its try (read_response.h); false: Asio's
// own reads.
INSTANTIATE_TEST_SUITE_P(OneThreadReads, PooledConnectionReads, ::testing::Bool());

}  // namespace
}  // namespace disagg::http
