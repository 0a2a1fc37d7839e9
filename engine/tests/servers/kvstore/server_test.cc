// The server over a real loopback socket: pipelining, errors that keep the connection usable,
// limits, AUTH and /metrics.
#include "server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace disagg::kvstore {
namespace {

class RunningServer {
 public:
  explicit RunningServer(ServerConfig config) {
    config.port = 0;
    std::string error;
    server_ = Server::create(config, &error);
    EXPECT_TRUE(server_) << error;
    thread_ = std::thread([this] { server_->run(); });
  }
  ~RunningServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return server_->port(); }
  int metrics_port() const { return server_->metrics_port(); }

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t w = ::write(fd_, bytes.data() + off, bytes.size() - off);
      if (w <= 0) return;
      off += static_cast<std::size_t>(w);
    }
  }
  // Reads until `n` bytes arrived (or the peer closed / timed out).
  std::string read_exactly(std::size_t n) {
    std::string out;
    char buf[65536];
    while (out.size() < n) {
      const ssize_t r = ::read(fd_, buf, std::min(sizeof(buf), n - out.size()));
      if (r <= 0) break;
      out.append(buf, static_cast<std::size_t>(r));
    }
    return out;
  }
  // Reads one CRLF-terminated line.
  std::string line() {
    std::string out;
    char c;
    while (::read(fd_, &c, 1) == 1) {
      out.push_back(c);
      if (out.size() >= 2 && out.compare(out.size() - 2, 2, "\r\n") == 0) break;
    }
    return out;
  }
  std::string call(const std::string& bytes, std::size_t reply_bytes) {
    send(bytes);
    return read_exactly(reply_bytes);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string cmd(std::initializer_list<std::string> args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

ServerConfig small_config() {
  ServerConfig cfg;
  cfg.store.memory_bytes = 16u << 20;
  return cfg;
}

TEST(Server, PipelinedCommandsAnswerInOrder) {
  RunningServer server(small_config());
  Client c(server.port());
  ASSERT_TRUE(c.connected());
  // GIVEN SET, GET, a miss and DEL sent in one write
  const std::string batch = cmd({"SET", "a", "hello"}) + cmd({"GET", "a"}) + cmd({"GET", "zz"}) + cmd({"DEL", "a"});
  const std::string expected = "+OK\r\n$5\r\nhello\r\n$-1\r\n:1\r\n";
  // THEN the replies come back in order
  EXPECT_EQ(c.call(batch, expected.size()), expected);
}

TEST(Server, UnknownCommandGetsErrorAndConnectionStaysUsable) {
  RunningServer server(small_config());
  Client c(server.port());
  c.send(cmd({"NOSUCH", "x"}));
  EXPECT_EQ(c.line().rfind("-ERR unknown command 'NOSUCH'", 0), 0u);
  c.send(cmd({"GET"}));
  EXPECT_EQ(c.line(), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(c.call(cmd({"PING"}), 7), "+PONG\r\n");
}

TEST(Server, DeclaredLengthOverTheLimitIsRefusedAtItsHeader) {
  // GIVEN the default 512 MiB value limit
  RunningServer server(small_config());
  Client c(server.port());
  // WHEN a client declares a 2 GiB value and sends none of it
  c.send("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2147483648\r\n");
  // THEN it is answered at once, as Redis answers a length over its proto-max-bulk-len, and the
  // connection closes (a server that waited for the bytes would answer nothing: line() gives up
  // after the client's 5 s receive timeout and returns "")
  const std::string err = c.line();
  EXPECT_EQ(err.rfind("-ERR Protocol error: invalid bulk length", 0), 0u) << err;
  EXPECT_NE(err.find("--max-value-bytes"), std::string::npos) << err;
  EXPECT_EQ(c.read_exactly(1), "");
}

// Reads INFO and returns the value of `field` ("" when absent).
std::string info_field(Client& c, const std::string& field) {
  c.send(cmd({"INFO"}));
  const std::string head = c.line();
  if (head.size() < 3 || head[0] != '$') return "";
  const std::string body = c.read_exactly(std::stoul(head.substr(1)) + 2);
  const auto at = body.find("\r\n" + field + ":");
  if (at == std::string::npos) return "";
  const auto start = at + 3 + field.size();
  return body.substr(start, body.find("\r\n", start) - start);
}

std::string set_header(const std::string& key, std::size_t value_bytes) {
  return "*3\r\n$3\r\nSET\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n$" + std::to_string(value_bytes) +
         "\r\n";
}

TEST(Server, ValuesInFlightAreBoundedByTheMemoryBudget) {
  // GIVEN a 16 MiB memory tier and client A half-way through sending a 10 MiB value
  RunningServer server(small_config());
  constexpr std::size_t kValue = 10u << 20;
  auto a = std::make_unique<Client>(server.port());
  Client b(server.port()), c(server.port());
  a->send(set_header("a", kValue) + std::string(1u << 20, 'a'));
  const std::string held = std::to_string(3 + 1 + kValue);  // "SET", "a" and the value
  for (int i = 0; i < 500 && info_field(c, "inflight_bytes") != held; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(info_field(c, "inflight_bytes"), held);
  // WHEN client B declares another 10 MiB value, sending none of it yet
  b.send(set_header("b", kValue));
  // THEN B is refused at once (the two would pass the budget), before any of its bytes are sent
  const std::string err = b.line();
  EXPECT_EQ(err.rfind("-OOM", 0), 0u) << err;
  EXPECT_NE(err.find("--memory-bytes"), std::string::npos) << err;
  EXPECT_EQ(info_field(c, "inflight_bytes"), held);
  // AND B's bytes, when they come, are skipped: the SET gets no second reply and B stays usable
  b.send(std::string(kValue, 'b') + "\r\n");
  EXPECT_EQ(b.call(cmd({"PING"}), 7), "+PONG\r\n");
  // AND when A goes away mid-value, its reservation is returned and a new 10 MiB SET fits
  a.reset();
  for (int i = 0; i < 500 && info_field(c, "inflight_bytes") != "0"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(info_field(c, "inflight_bytes"), "0");
  EXPECT_EQ(c.call(cmd({"SET", "c", std::string(kValue, 'c')}), 5), "+OK\r\n");
  EXPECT_EQ(c.call(cmd({"EXISTS", "a", "b", "c"}), 4), ":1\r\n");
  EXPECT_EQ(info_field(c, "inflight_bytes"), "0");
}

TEST(Server, ValueLargerThanTheMemoryBudgetIsRefusedAtItsHeader) {
  // GIVEN a 16 MiB memory tier (and a disk tier, which does not take values in flight)
  testing::TempDir dir;
  ServerConfig cfg = small_config();
  cfg.store.disk_dir = dir.path();
  cfg.store.disk_bytes = 256u << 20;
  RunningServer server(cfg);
  Client c(server.port());
  // WHEN a client declares a 20 MiB value
  c.send(set_header("big", 20u << 20));
  // THEN it is refused before its bytes come, saying which flag to raise
  const std::string err = c.line();
  EXPECT_EQ(err.rfind("-OOM", 0), 0u) << err;
  EXPECT_NE(err.find("raise --memory-bytes"), std::string::npos) << err;
}

TEST(Server, InlineCommandsTakeQuotesAndRefuseUnbalancedOnes) {
  RunningServer server(small_config());
  Client c(server.port());
  // GIVEN inline commands as typed into telnet, with quoted arguments
  EXPECT_EQ(c.call("SET \"my key\" 'it\\'s \"x\"'\r\n", 5), "+OK\r\n");
  const std::string expected = "$8\r\nit's \"x\"\r\n";
  EXPECT_EQ(c.call("GET \"my\\x20key\"\r\n", expected.size()), expected);
  // WHEN a quote is left open
  c.send("SET k \"open\r\n");
  // THEN the reply is Redis's, and the connection closes
  EXPECT_EQ(c.line(), "-ERR Protocol error: unbalanced quotes in request\r\n");
  EXPECT_EQ(c.read_exactly(1), "");
}

TEST(Server, StrlenAndKeys) {
  RunningServer server(small_config());
  Client c(server.port());
  c.call(cmd({"MSET", "user:1", "alice", "user:2", "bob", "item:1", std::string(40000, 'x')}), 5);
  // STRLEN: the value's length, 0 for a missing key (a large value is not read to count it)
  EXPECT_EQ(c.call(cmd({"STRLEN", "user:1"}), 4), ":5\r\n");
  EXPECT_EQ(c.call(cmd({"STRLEN", "item:1"}), 8), ":40000\r\n");
  EXPECT_EQ(c.call(cmd({"STRLEN", "nope"}), 4), ":0\r\n");
  // KEYS: every key matching a Redis glob
  c.send(cmd({"KEYS", "user:[0-9]"}));
  EXPECT_EQ(c.line(), "*2\r\n");
  std::set<std::string> got;
  for (int i = 0; i < 2; ++i) {
    c.line();
    const std::string k = c.line();
    got.insert(k.substr(0, k.size() - 2));
  }
  EXPECT_EQ(got, (std::set<std::string>{"user:1", "user:2"}));
  c.send(cmd({"KEYS", "*"}));
  EXPECT_EQ(c.line(), "*3\r\n");
  for (int i = 0; i < 6; ++i) c.line();
  EXPECT_EQ(c.call(cmd({"KEYS", "item:\\?"}), 4), "*0\r\n");
  EXPECT_EQ(c.call(cmd({"KEYS", "item:\\1"}), 4 + 6 + 8), "*1\r\n$6\r\nitem:1\r\n");
}

TEST(Server, LargeValuesRoundTrip) {
  RunningServer server(small_config());
  Client c(server.port());
  std::string value(1 << 20, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 31 + 7);
  EXPECT_EQ(c.call(cmd({"SET", "big", value}), 5), "+OK\r\n");
  const std::string expected = "$" + std::to_string(value.size()) + "\r\n" + value + "\r\n";
  EXPECT_EQ(c.call(cmd({"GET", "big"}), expected.size()), expected);
}

TEST(Server, MaxClientsRejectsExtraConnectionsWithAnError) {
  ServerConfig cfg = small_config();
  cfg.max_clients = 1;
  RunningServer server(cfg);
  Client first(server.port());
  EXPECT_EQ(first.call(cmd({"PING"}), 7), "+PONG\r\n");
  Client second(server.port());
  EXPECT_EQ(second.line(), "-ERR max number of clients reached (--max-clients)\r\n");
  EXPECT_EQ(first.call(cmd({"PING"}), 7), "+PONG\r\n");
}

TEST(Server, DeepPipelineIsThrottledNotDropped) {
  // GIVEN a pipeline limit of 8 and a client that sends 20000 commands before reading anything
  ServerConfig cfg = small_config();
  cfg.max_pipeline = 8;
  RunningServer server(cfg);
  Client c(server.port());
  std::string batch;
  for (int i = 0; i < 20000; ++i) batch += cmd({"PING"});
  std::thread writer([&] { c.send(batch); });
  // THEN every command is still answered, in order
  const std::string replies = c.read_exactly(20000 * 7);
  writer.join();
  ASSERT_EQ(replies.size(), 20000u * 7);
  for (std::size_t i = 0; i < replies.size(); i += 7) ASSERT_EQ(replies.compare(i, 7, "+PONG\r\n"), 0) << i;
}

TEST(Server, AuthGatesCommands) {
  ServerConfig cfg = small_config();
  cfg.requirepass = "s3cret";
  RunningServer server(cfg);
  Client c(server.port());
  c.send(cmd({"GET", "a"}));
  EXPECT_EQ(c.line(), "-NOAUTH Authentication required.\r\n");
  c.send(cmd({"AUTH", "wrong"}));
  EXPECT_EQ(c.line().rfind("-WRONGPASS", 0), 0u);
  EXPECT_EQ(c.call(cmd({"AUTH", "s3cret"}), 5), "+OK\r\n");
  EXPECT_EQ(c.call(cmd({"GET", "a"}), 5), "$-1\r\n");
}

TEST(Server, Hello3IsRefusedClearlyAndHello2Works) {
  RunningServer server(small_config());
  Client c(server.port());
  c.send(cmd({"HELLO", "3"}));
  EXPECT_EQ(c.line().rfind("-NOPROTO", 0), 0u);
  c.send(cmd({"HELLO", "2"}));
  EXPECT_EQ(c.line(), "*14\r\n");
}

TEST(Server, ProtocolErrorClosesTheConnection) {
  RunningServer server(small_config());
  Client c(server.port());
  c.send("*1\r\n+PING\r\n");
  EXPECT_EQ(c.line().rfind("-ERR Protocol error", 0), 0u);
  EXPECT_EQ(c.read_exactly(1), "");  // closed
}

TEST(Server, MetricsEndpointServesPrometheusText) {
  ServerConfig cfg = small_config();
  cfg.metrics_port = 0;
  cfg.store.memory_bytes = 1 << 20;
  // metrics_port 0 disables it; pick an ephemeral one by binding first
  int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  cfg.metrics_port = ntohs(addr.sin_port);
  ::close(probe);
  RunningServer server(cfg);
  Client c(server.port());
  c.call(cmd({"SET", "a", "1"}) + cmd({"GET", "a"}) + cmd({"GET", "b"}), 5 + 7 + 5);
  Client http(server.metrics_port());
  http.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string body = http.read_exactly(1 << 20);
  EXPECT_NE(body.find("HTTP/1.1 200 OK"), std::string::npos);
  EXPECT_NE(body.find("kvstore_hits_total{tier=\"memory\"} 1\n"), std::string::npos);
  EXPECT_NE(body.find("kvstore_misses_total 1\n"), std::string::npos);
  EXPECT_NE(body.find("kvstore_command_duration_seconds_bucket{command=\"get\",le=\"+Inf\"} 2\n"), std::string::npos);
}

TEST(Server, PipelinedLargeValuesRoundTrip) {
  // GIVEN 12 SETs of 200 KiB values (received straight into their stored Blobs) and their GETs,
  // sent in one write so that values, headers and CRLFs straddle every read boundary
  ServerConfig cfg = small_config();
  cfg.store.memory_bytes = 64u << 20;
  RunningServer server(cfg);
  Client c(server.port());
  std::mt19937_64 rng(77);
  std::vector<std::string> values;
  std::string batch, expected;
  for (int i = 0; i < 12; ++i) {
    values.push_back(testing::make_value(rng, 200 * 1024 + static_cast<std::size_t>(i)));
    batch += cmd({"SET", "k" + std::to_string(i), values.back()});
    expected += "+OK\r\n";
  }
  for (int i = 11; i >= 0; --i) {
    batch += cmd({"GET", "k" + std::to_string(i)});
    expected += "$" + std::to_string(values[i].size()) + "\r\n" + values[i] + "\r\n";
  }
  std::thread writer([&] { c.send(batch); });
  // THEN every reply is right and in order
  const std::string replies = c.read_exactly(expected.size());
  writer.join();
  EXPECT_TRUE(replies == expected);
}

// A server whose memory tier holds two of three 400 KiB values, so "cold" (written first) is
// demoted to disk while "hot" stays in memory; disk reads named "cold" wait for the test's gate.
class SlowDiskServer {
 public:
  SlowDiskServer() {
    ServerConfig cfg = small_config();
    cfg.store.memory_bytes = 1u << 20;
    cfg.store.disk_dir = dir_.path();
    cfg.store.disk_bytes = 64u << 20;
    cfg.store.demote_min_reads = 0;
    cfg.disk_read_hook = [this](std::string_view key) {
      if (key != "cold") return;
      entered_.set_value();
      gate_.wait();
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back("cold read done");
    };
    server_ = std::make_unique<RunningServer>(cfg);
    Client c(server_->port());
    std::mt19937_64 rng(5);
    cold_ = testing::make_value(rng, 400 * 1024);
    hot_ = testing::make_value(rng, 400 * 1024);
    EXPECT_EQ(c.call(cmd({"SET", "cold", cold_}), 5), "+OK\r\n");
    EXPECT_EQ(c.call(cmd({"SET", "hot", hot_}), 5), "+OK\r\n");
    EXPECT_EQ(c.call(cmd({"SET", "filler", hot_}), 5), "+OK\r\n");
  }
  ~SlowDiskServer() { open_gate(); }  // never leave the I/O thread blocked
  int port() const { return server_->port(); }
  // Waits (bounded, so a broken server fails instead of hanging) until a "cold" read is held.
  bool cold_read_started() { return entered_future_.wait_for(std::chrono::seconds(10)) == std::future_status::ready; }
  void open_gate() {
    if (!opened_) release_.set_value();
    opened_ = true;
  }
  void note(const std::string& event) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(event);
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  static std::string bulk(const std::string& v) { return "$" + std::to_string(v.size()) + "\r\n" + v + "\r\n"; }
  std::string cold_, hot_;

 private:
  testing::TempDir dir_;
  std::promise<void> entered_;
  std::future<void> entered_future_ = entered_.get_future();
  std::promise<void> release_;
  std::shared_future<void> gate_ = release_.get_future().share();
  bool opened_ = false;
  std::mutex mu_;
  std::vector<std::string> events_;
  std::unique_ptr<RunningServer> server_;
};

TEST(Server, SlowDiskReadDoesNotStallMemoryHits) {
  // GIVEN client A's GET of the disk-resident key, held inside the disk read
  SlowDiskServer s;
  Client a(s.port());
  a.send(cmd({"GET", "cold"}));
  ASSERT_TRUE(s.cold_read_started());
  // WHEN client B asks for the memory-resident key while that read is still held
  Client b(s.port());
  const std::string hot_reply = b.call(cmd({"GET", "hot"}), SlowDiskServer::bulk(s.hot_).size());
  s.note("hot reply received");
  s.open_gate();
  // THEN B was answered first (a server blocked on the disk could not have answered it at all),
  // and A then gets its value intact
  EXPECT_TRUE(hot_reply == SlowDiskServer::bulk(s.hot_));
  EXPECT_TRUE(a.read_exactly(SlowDiskServer::bulk(s.cold_).size()) == SlowDiskServer::bulk(s.cold_));
  EXPECT_EQ(s.events(), (std::vector<std::string>{"hot reply received", "cold read done"}));
}

TEST(Server, RepliesStayInOrderBehindADiskRead) {
  // GIVEN one connection that pipelines a disk hit, a memory hit and a PING
  SlowDiskServer s;
  Client a(s.port());
  a.send(cmd({"GET", "cold"}) + cmd({"GET", "filler"}) + cmd({"PING"}));
  ASSERT_TRUE(s.cold_read_started());
  s.open_gate();
  // THEN its replies come back in request order, the disk hit first
  const std::string expected = SlowDiskServer::bulk(s.cold_) + SlowDiskServer::bulk(s.hot_) + "+PONG\r\n";
  EXPECT_TRUE(a.read_exactly(expected.size()) == expected);
}

}  // namespace
}  // namespace disagg::kvstore
