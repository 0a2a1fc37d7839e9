// dns_discovery.h — endpoints from DNS: one thread resolves each pool's name (a headless Service)
// every refresh_seconds and makes the pool's endpoints in the EndpointTable match its addresses
// (EndpointTable::sync_dns_pool). A failed lookup keeps the endpoints known so far: a DNS hiccup
// must not empty a pool.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "endpoint_table.h"
#include "router_config.h"

namespace disagg::router {

class DnsDiscovery {
 public:
  /// `table` must outlive this object.
  DnsDiscovery(EndpointTable& table, std::vector<DnsPoolSpec> pools) : table_(table), pools_(std::move(pools)) {}
  ~DnsDiscovery() { stop(); }
  DnsDiscovery(const DnsDiscovery&) = delete;
  DnsDiscovery& operator=(const DnsDiscovery&) = delete;

  /// Starts the thread (none when there are no pools).
  void start();
  /// Stops and joins it (idempotent).
  void stop();

  /// The A and AAAA addresses of `host`, as text; nullopt when the lookup fails.
  static std::optional<std::set<std::string>> resolve(const std::string& host);

 private:
  void loop();

  EndpointTable& table_;
  std::vector<DnsPoolSpec> pools_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace disagg::router
