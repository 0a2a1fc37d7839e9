// The server over a real loopback socket: pipelining, errors that keep the connection usable,
// limits, AUTH and /metrics.
#include "server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

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

TEST(Server, OversizedValueIsRejectedAndConnectionStaysUsable) {
  ServerConfig cfg = small_config();
  cfg.store.max_value_bytes = 1024;
  cfg.parser.max_bulk_bytes = 1024;
  RunningServer server(cfg);
  Client c(server.port());
  c.send(cmd({"SET", "k", std::string(100000, 'x')}));
  const std::string err = c.line();
  EXPECT_NE(err.find("--max-value-bytes"), std::string::npos) << err;
  EXPECT_EQ(c.call(cmd({"EXISTS", "k"}), 4), ":0\r\n");
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

}  // namespace
}  // namespace disagg::kvstore
