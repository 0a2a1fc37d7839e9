// health_monitor.cc — the health and scrape loop (health_monitor.h).
#include "health_monitor.h"

#include <algorithm>

#include "lib/http/http_client.h"

namespace disagg::router {

namespace net = http::net;

void HealthMonitor::wake() {
  net::post(ioc_, [this] { timer_.cancel(); });
}

http::Task<Expected<http::ClientResponse, http::ClientError>> HealthMonitor::get(std::string host, std::uint16_t port,
                                                                                 std::string target,
                                                                                 std::size_t max_body_bytes) {
  http::ClientOptions o = clients_.options(ioc_.get_executor());
  o.connect_timeout = o.first_byte_timeout = o.idle_timeout = std::chrono::milliseconds(config_.health_timeout_ms);
  o.max_body_bytes = max_body_bytes;
  http::ClientRequest r;
  r.method = http::bhttp::verb::get;
  r.target = std::move(target);
  co_return co_await http::fetch(ioc_.get_executor(), std::move(host), port, std::move(r), o);
}

http::Task<void> HealthMonitor::probe(int id, std::uint32_t generation, std::string host, std::uint16_t port) {
  const std::int64_t started = now_ms();
  auto res = co_await get(std::move(host), port, "/health", 64 << 10);
  const bool ok = res && res->status == 200;
  // A 503 that says "draining" (the sim-worker's while it drains), or any 503 from an endpoint
  // already marked draining: the endpoint is leaving, not failing (EndpointTable::health_checked).
  const bool draining = res && res->status == 503;
  const bool says_draining = draining && res->body.find("draining") != std::string::npos;
  table_.health_checked(id, generation, ok,
                        ok    ? std::string()
                        : res ? "HTTP " + std::to_string(res->status)
                              : res.error().message(),
                        started, draining, says_draining);
  table_.slot(id).probing.store(false);
}

http::Task<void> HealthMonitor::scrape(int id, std::uint32_t generation, std::string host, std::uint16_t port) {
  auto res = co_await get(std::move(host), port, "/metrics", 4 << 20);
  if (res && res->status == 200) table_.load_reported(id, generation, parse_vllm_load(res->body));
  table_.slot(id).scraping.store(false);
}

http::Task<void> HealthMonitor::run() {
  std::array<std::int64_t, kMaxRoutingEndpoints> next_probe{};
  std::array<std::int64_t, kMaxRoutingEndpoints> next_scrape{};
  std::array<std::uint32_t, kMaxRoutingEndpoints> seen_generation{};
  std::vector<EndpointTable::Present> present;
  present.reserve(kMaxRoutingEndpoints);
  while (!ioc_.stopped()) {
    const std::int64_t now = now_ms();
    std::int64_t due = now + 60'000;  // none present: an added endpoint wakes the loop
    // One hold of the table's lock per round (the request path takes it for every decision).
    table_.present(present);
    for (EndpointTable::Present& e : present) {
      const auto i = static_cast<std::size_t>(e.id);
      EndpointSlot& s = table_.slot(e.id);
      if (seen_generation[i] != e.generation) {  // new endpoint: check at once
        seen_generation[i] = e.generation;
        next_probe[i] = 0;
        next_scrape[i] = 0;
      }
      if (now >= next_probe[i] && !s.probing.exchange(true)) {
        next_probe[i] = now + config_.health_interval_ms;
        net::co_spawn(ioc_, probe(e.id, e.generation, e.host, e.port), net::detached);
      }
      if (now >= next_scrape[i] && !s.scraping.exchange(true)) {
        next_scrape[i] = now + config_.scrape_interval_ms;
        net::co_spawn(ioc_, scrape(e.id, e.generation, std::move(e.host), e.port), net::detached);
      }
      due = std::min({due, next_probe[i], next_scrape[i]});
    }
    // At least 20 ms, so that a probe that outlives its interval is not polled in a busy loop.
    timer_.expires_after(std::chrono::milliseconds(std::max<std::int64_t>(due - now, 20)));
    boost::system::error_code ec;
    co_await timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
}

}  // namespace disagg::router
