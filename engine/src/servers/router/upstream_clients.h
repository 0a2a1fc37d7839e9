// upstream_clients.h — the router's HTTP clients to its endpoints: per HTTP thread's io_context,
// a keep-alive connection pool and the context's reactor, and the client options of a request made
// on a given executor. Every leg, health check and scrape goes through them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "router_config.h"
#include "lib/http/http_client.h"
#include "lib/http/read_response.h"

namespace disagg::router {

class UpstreamClients {
 public:
  /// `contexts[i]` is run by HTTP thread i alone and outlives this object. Keep-alive is off when
  /// config.upstream_keepalive is 0.
  UpstreamClients(std::vector<http::net::io_context*> contexts, const RouterConfig& config)
      : contexts_(std::move(contexts)) {
    for (http::net::io_context* ctx : contexts_) reactors_.emplace_back(*ctx);
    if (config.upstream_keepalive > 0) {
      http::ConnectionPool::Options po;
      po.max_idle_per_endpoint = static_cast<std::size_t>(config.upstream_keepalive);
      po.idle_ttl = std::chrono::milliseconds(config.upstream_keepalive_ms);
      po.keep_registered = true;  // each pool serves one single-threaded context
      for (std::size_t i = 0; i < contexts_.size(); ++i) pools_.push_back(std::make_unique<http::ConnectionPool>(po));
    }
  }

  /// Options for a request on the io_context that runs `ex`: its pool (none when reuse is off) and
  /// its reactor. Timeouts are the caller's to set.
  http::ClientOptions options(const http::net::any_io_executor& ex) const {
    http::ClientOptions o;
    const std::size_t i = context_index(ex);
    o.pool = pools_.empty() ? nullptr : pools_[i].get();
    o.one_thread_reactor = reactors_[i];
    return o;
  }

  /// Closes the idle connections to `host_port` in every pool (an endpoint that left).
  void drop(const std::string& host_port) {
    for (auto& pool : pools_) pool->drop(host_port);
  }

  /// Requests sent over a kept-alive connection, and idle connections now, all pools.
  double reused() const {
    double n = 0;
    for (const auto& pool : pools_) n += static_cast<double>(pool->reused());
    return n;
  }
  double idle() const {
    double n = 0;
    for (const auto& pool : pools_) n += static_cast<double>(pool->idle());
    return n;
  }

 private:
  // Index of the io_context that runs `ex` in contexts_.
  std::size_t context_index(const http::net::any_io_executor& ex) const {
    const http::net::execution_context* ctx = &http::net::query(ex, http::net::execution::context);
    for (std::size_t i = 1; i < contexts_.size(); ++i) {
      if (ctx == contexts_[i]) return i;
    }
    return 0;
  }

  std::vector<http::net::io_context*> contexts_;
  std::vector<http::SocketReactor> reactors_;
  // Destroyed before the contexts (the router declares its contexts first).
  std::vector<std::unique_ptr<http::ConnectionPool>> pools_;
};

}  // namespace disagg::router
