// dns_discovery.cc — the DNS thread (dns_discovery.h).
#include "dns_discovery.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "router_log.h"

namespace disagg::router {

std::optional<std::set<std::string>> DnsDiscovery::resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return std::nullopt;
  std::set<std::string> out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf, sizeof buf);
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, buf, sizeof buf);
    } else {
      continue;
    }
    out.insert(buf);
  }
  freeaddrinfo(res);
  return out;
}

void DnsDiscovery::start() {
  if (!pools_.empty() && !thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void DnsDiscovery::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DnsDiscovery::loop() {
  std::vector<std::int64_t> next(pools_.size(), 0);
  std::vector<bool> failing(pools_.size(), false);
  while (true) {
    const std::int64_t now = now_ms();
    for (std::size_t i = 0; i < pools_.size(); ++i) {
      const DnsPoolSpec& p = pools_[i];
      if (now < next[i]) continue;
      next[i] = now + static_cast<std::int64_t>(p.refresh_seconds * 1000);
      auto addrs = resolve(p.host);
      if (!addrs) {
        if (!failing[i]) log_line("cannot resolve " + p.host + " (pool " + p.pool + "); keeping its known endpoints");
        failing[i] = true;
        continue;
      }
      failing[i] = false;
      table_.sync_dns_pool(p, *addrs);
    }
    // Sleep until the next pool's refresh is due (lookups may have taken a while); stop() wakes it.
    const std::int64_t due = *std::min_element(next.begin(), next.end());
    const auto wait = std::chrono::milliseconds(std::max<std::int64_t>(due - now_ms(), 10));
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, wait, [&] { return stop_; })) return;
  }
}

}  // namespace disagg::router
