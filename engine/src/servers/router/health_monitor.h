// health_monitor.h — active health checks (GET /health) and load scraping (GET /metrics: vLLM's
// running, waiting and KV-usage gauges) of every present endpoint, on the router's first
// io_context. Results go to the EndpointTable (health transitions are logged there).
//
// A health check answered 503 by an endpoint marked draining is no failure (endpoint_health.h).
// Each endpoint is probed every health_interval_ms and scraped every scrape_interval_ms, at most
// one of each in flight per endpoint; a new endpoint is checked at once (wake()). Between rounds
// the loop sleeps until the next probe or scrape is due (at least 20 ms).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "endpoint_table.h"
#include "router_config.h"
#include "lib/http/asio.h"
#include "lib/http/http_client.h"
#include "upstream_clients.h"

namespace disagg::router {

class HealthMonitor {
 public:
  /// All must outlive the monitor; `ioc` runs it.
  HealthMonitor(EndpointTable& table, http::net::io_context& ioc, const UpstreamClients& clients,
                const RouterConfig& config)
      : table_(table), ioc_(ioc), clients_(clients), config_(config), timer_(ioc) {}

  /// The loop; runs until the io_context stops. Spawn once.
  http::Task<void> run();
  /// An endpoint was added: check it now. Thread-safe.
  void wake();

 private:
  // GET `target` with the health timeout, the body read up to `max_body_bytes`.
  http::Task<Expected<http::ClientResponse, http::ClientError>> get(std::string host, std::uint16_t port,
                                                                    std::string target, std::size_t max_body_bytes);
  http::Task<void> probe(int id, std::uint32_t generation, std::string host, std::uint16_t port);
  http::Task<void> scrape(int id, std::uint32_t generation, std::string host, std::uint16_t port);

  EndpointTable& table_;
  http::net::io_context& ioc_;
  const UpstreamClients& clients_;
  const RouterConfig& config_;
  http::net::steady_timer timer_;
};

}  // namespace disagg::router
