// server_fixture.h — an HttpServer on an ephemeral loopback port, run by two threads, for the HTTP
// layer's tests (http_test.cc, http_hostile_test.cc). start() once per test; TearDown drains it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "lib/http/http_server.h"

namespace disagg::http::test {

class ServerFixture : public ::testing::Test {
 protected:
  void start(Handler handler, ServerOptions options = {}) {
    options.port = 0;
    auto s = HttpServer::create(ioc_, options, std::move(handler));
    ASSERT_TRUE(s.has_value()) << s.error().message;
    server_ = std::move(*s);
    server_->start();
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }
  void TearDown() override {
    if (server_ && !server_->draining()) server_->drain([this] { ioc_.stop(); });
    for (auto& t : threads_) t.join();
  }
  // The server's loopback address, for test clients.
  tcp::endpoint endpoint() const { return {net::ip::make_address("127.0.0.1"), server_->port()}; }

  net::io_context ioc_;
  std::unique_ptr<HttpServer> server_;
  std::vector<std::thread> threads_;
};

}  // namespace disagg::http::test
