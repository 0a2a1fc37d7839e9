// router_loopback.h — an in-process Router on loopback for the router's tests: a worker stand-in
// (healthy, no load gauges, a completion that records the headers it got), a router run on its own
// thread until the test ends, and a raw HTTP/1.1 client (one request per connection).
#pragma once

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "router.h"
#include "lib/http/http_server.h"

namespace disagg::router::testing {

using namespace std::chrono_literals;

struct Reply {
  int status = 0;
  std::string head;
  std::string body;
};

/// One request on a fresh connection (Connection: close), read to the end.
inline Reply call(std::uint16_t port, const std::string& method, const std::string& target,
                  const std::string& authorization, const std::string& body = "") {
  Reply r;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return r;
  }
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: router\r\nConnection: close\r\n";
  if (!authorization.empty()) req += "Authorization: " + authorization + "\r\n";
  if (!body.empty()) req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string in;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) in.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  const std::size_t end = in.find("\r\n\r\n");
  if (in.size() < 12 || end == std::string::npos) return r;
  r.status = std::stoi(in.substr(9, 3));
  r.head = in.substr(0, end);
  r.body = in.substr(end + 4);
  return r;
}

/// A worker stand-in: healthy, no load gauges, and a completion that records the headers it got.
class Upstream {
 public:
  Upstream() {
    http::ServerOptions o;
    o.port = 0;
    auto s = http::HttpServer::create(ioc_, o, [this](http::Request& req, http::ResponseWriter& w) -> http::Task<void> {
      const std::string_view path = http::target_path(req.target());
      if (path == "/health") {
        co_await w.send(200, "{}");
      } else if (path == "/metrics") {
        co_await w.send(200, "", "text/plain");
      } else {
        {
          std::lock_guard lock(mu_);
          ++posts_;
          authorization_seen_ |= !req["Authorization"].empty();
        }
        co_await w.send(200, R"({"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" ok"}]})");
      }
    });
    EXPECT_TRUE(s.has_value());
    server_ = std::move(*s);
    server_->start();
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~Upstream() {
    server_->drain([this] { ioc_.stop(); });
    thread_.join();
  }
  std::uint16_t port() const { return server_->port(); }
  int posts() {
    std::lock_guard lock(mu_);
    return posts_;
  }
  bool authorization_seen() {
    std::lock_guard lock(mu_);
    return authorization_seen_;
  }

 private:
  http::net::io_context ioc_;
  std::unique_ptr<http::HttpServer> server_;
  std::thread thread_;
  std::mutex mu_;
  int posts_ = 0;
  bool authorization_seen_ = false;
};

/// A router with one static aggregated endpoint on `upstream_port`, fast health checks, one thread.
inline RouterConfig config_for(std::uint16_t upstream_port) {
  RouterConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.served_models = {"m"};
  c.threads = 1;
  c.health_interval_ms = 50;
  c.scrape_interval_ms = 50;
  c.drain_timeout_ms = 1'000;
  EndpointSpec e;
  e.pool = "workers";
  e.host = "127.0.0.1";
  e.port = upstream_port;
  c.endpoints = {e};
  return c;
}

/// Runs a router on its own thread until it is ready; drains it at the end.
class RunningRouter {
 public:
  explicit RunningRouter(RouterConfig c) {
    auto r = Router::create(std::move(c));
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error());
    router_ = std::move(*r);
    thread_ = std::thread([this] { router_->run(); });
    for (int i = 0; i < 200 && call(port(), "GET", "/ready", "").status != 200; ++i) std::this_thread::sleep_for(20ms);
  }
  ~RunningRouter() {
    router_->drain();
    thread_.join();
  }
  std::uint16_t port() const { return router_->port(); }

 private:
  std::unique_ptr<Router> router_;
  std::thread thread_;
};

/// The value of one sample of the router's /metrics page; -1 when absent.
inline double metric(std::uint16_t port, const std::string& sample) {
  const std::string page = call(port, "GET", "/metrics", "").body;
  const std::size_t at = page.find("\n" + sample + " ");
  return at == std::string::npos ? -1 : std::stod(page.substr(at + sample.size() + 2));
}

}  // namespace disagg::router::testing
