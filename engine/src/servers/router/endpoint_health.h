// endpoint_health.h — one endpoint's live state (health, ejection, load) and its transitions.
//
// Health: an endpoint is routable when its last active check (GET /health) passed and it is not
// ejected. Failures count from both sides: active checks that fail, and proxied requests that fail
// before the first byte (connect error, 5xx, first-byte timeout) or break mid-stream. A refused
// connection marks it down at once (nothing listens). `eject_after` consecutive failures eject it
// for `eject_ms`; after that a passing health check restores it (and resets the count). Any
// successful proxied request resets the count too.
//
// Draining: an endpoint that answers a request 503 (or a health check 503 that says "draining") is
// leaving the pool (a worker scaled down answers 503 + Retry-After while it finishes what it has).
// From then on it is not routable, and that is not a failure: no strike, no ejection (nor for its
// health checks' 503s while it drains). A health check that starts after the mark and passes clears
// it (a worker that was only overloaded, at its connection limit, comes back).
//
// All fields are atomics: proxies, the health loop and the metrics page update and read them
// without the router's lock. `present`, `generation` and `spec` change only under that lock.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "router_config.h"
#include "router_metrics.h"

namespace disagg::router {

struct HealthPolicy {
  std::int32_t eject_after = 3;
  std::int64_t eject_ms = 5'000;
};

struct EndpointSlot {
  // Identity (router lock).
  bool present = false;
  /// Bumped when the slot gets a new endpoint; read without the lock by proxies and probes.
  std::atomic<std::uint32_t> generation{0};
  EndpointSpec spec;
  std::string label;  ///< "host:port"
  bool from_dns = false;

  // Health.
  std::atomic<bool> up{false};
  std::atomic<bool> checked{false};  ///< at least one health check finished
  std::atomic<std::int32_t> failures{0};
  std::atomic<std::int64_t> ejected_until_ms{0};
  std::atomic<std::uint64_t> ejections{0};
  std::atomic<bool> probing{false};
  /// When the endpoint said it is draining (steady ms); 0 = not draining.
  std::atomic<std::int64_t> draining_since_ms{0};
  std::atomic<bool> scraping{false};

  // Load: scraped from /metrics, and counted by the router.
  std::atomic<std::int32_t> running{0};
  std::atomic<std::int32_t> waiting{0};
  std::atomic<double> kv_usage{0};
  std::atomic<std::int32_t> inflight{0};
  std::atomic<std::int64_t> inflight_prefill_tokens{0};
  /// Requests routed here (a metric): sharded per thread like the router's other counters.
  Counter requests;
  /// Prompt tokens routed here, and of them the tokens the router found cached here (metrics).
  Counter routed_prompt_tokens;
  /// The squares of those prompts, / 16 (their spread, for the prefill pool's queueing bound;
  /// / 16 keeps a billion 128k-token prompts within 64 bits).
  Counter routed_prompt_squares;
  Counter predicted_hit_tokens;
  /// The worker's own prefix-cache counters (vllm:prefix_cache_hits/queries), last scraped; -1
  /// until a scrape finds them.
  std::atomic<double> reported_prefix_hits{-1};
  std::atomic<double> reported_prefix_queries{-1};
  /// The worker's KV blocks in use (vllm:kv_cache_usage_perc x the num_gpu_blocks of
  /// vllm:cache_config_info), in the router's blocks; -1 until a scrape finds both.
  std::atomic<double> reported_kv_blocks{-1};
  /// Of the prefix-cache hits the worker reported between its last two scrapes that counted any,
  /// the share the router predicted when it routed (predicted_hit_tokens over the same interval), at
  /// most 1; -1 until known. predicted_at_scrape: predicted_hit_tokens at the last scrape.
  std::atomic<double> known_hit_ratio{-1};
  std::atomic<double> predicted_at_scrape{-1};
  /// The engine's data-parallel rank: the spec's, else the first `data_parallel_rank` its KV events
  /// carried; -1 while unknown (router lock; read for metrics under it).
  std::int32_t data_parallel_rank = -1;
  /// Whether a batch naming another rank was logged (once per endpoint; router lock).
  bool rank_mismatch_logged = false;

  /// Resets the live state for a new endpoint in this slot (router lock held).
  void reset_live() {
    up = false;
    checked = false;
    failures = 0;
    ejected_until_ms = 0;
    draining_since_ms = 0;
    running = 0;
    waiting = 0;
    kv_usage = 0;
    inflight_prefill_tokens = 0;
    reported_prefix_hits = -1;
    reported_prefix_queries = -1;
    reported_kv_blocks = -1;
    known_hit_ratio = -1;
    predicted_at_scrape = -1;
  }
};

/// Whether the endpoint may receive requests at `now_ms`.
inline bool routable(const EndpointSlot& e, std::int64_t now_ms) {
  return e.up.load(std::memory_order_acquire) && now_ms >= e.ejected_until_ms.load(std::memory_order_acquire) &&
         e.draining_since_ms.load(std::memory_order_acquire) == 0;
}

/// The endpoint answered a request 503 at `now_ms`: it is draining. Returns
/// true when this is news (it was not marked yet).
inline bool record_draining(EndpointSlot& e, std::int64_t now_ms) {
  std::int64_t expected = 0;
  return e.draining_since_ms.compare_exchange_strong(expected, std::max<std::int64_t>(now_ms, 1),
                                                     std::memory_order_acq_rel);
}

/// A failure seen at `now_ms`. `definitive`: nothing listens (connection refused): down at once.
/// Returns true when this failure ejected the endpoint.
inline bool record_failure(EndpointSlot& e, std::int64_t now_ms, const HealthPolicy& policy, bool definitive) {
  if (definitive) e.up.store(false, std::memory_order_release);
  const std::int32_t n = e.failures.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (n >= policy.eject_after && now_ms >= e.ejected_until_ms.load(std::memory_order_acquire)) {
    e.ejected_until_ms.store(now_ms + policy.eject_ms, std::memory_order_release);
    e.ejections.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return false;
}

/// A proxied request succeeded.
/// Writes only when there is a count to reset: every proxied request ends here, and a store of the
/// 0 already there would still take the line from the other HTTP threads' cores.
inline void record_success(EndpointSlot& e) {
  if (e.failures.load(std::memory_order_relaxed) != 0) e.failures.store(0, std::memory_order_release);
}

/// An active health check that started at `started_ms` finished at `now_ms` (`ok`: it passed; a 503
/// goes to record_draining instead). Returns true when the endpoint became routable again.
inline bool record_health(EndpointSlot& e, bool ok, std::int64_t now_ms, const HealthPolicy& policy,
                          std::int64_t started_ms = 0) {
  const bool was = routable(e, now_ms);
  e.checked.store(true, std::memory_order_release);
  // Only a check sent after the drain began says the endpoint stopped draining.
  if (ok) {
    std::int64_t since = e.draining_since_ms.load(std::memory_order_acquire);
    if (since != 0 && started_ms >= since) {
      e.draining_since_ms.compare_exchange_strong(since, 0, std::memory_order_acq_rel);
    }
  }
  if (!ok) {
    e.up.store(false, std::memory_order_release);
    record_failure(e, now_ms, policy, false);
    return false;
  }
  e.up.store(true, std::memory_order_release);
  if (now_ms >= e.ejected_until_ms.load(std::memory_order_acquire)) { e.failures.store(0, std::memory_order_release); }
  return !was && routable(e, now_ms);
}

}  // namespace disagg::router
