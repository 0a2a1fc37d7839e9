// router_metrics.h — the router's Prometheus metrics (lock-free counters and fixed histograms),
// and the parser of the workers' load gauges it scrapes.
//
// Exposed names (all prefixed disagg_router_):
//   requests_total{route, outcome}              completed requests: route completions|chat,
//                                               outcome ok|error|client_gone
//   errors_total{cause}                         see ErrorCause
//   retries_total                               upstream attempts repeated on another endpoint
//   drained_endpoint_retries_total              requests sent again elsewhere because their endpoint
//                                               answered 503 (draining); not failures, not in retries_total
//   pool_* {pool}                               the scaling signals (scaling_signals.h)
//   decision_seconds                            histogram: routing decision (policy + P/D decider)
//   overhead_seconds                            histogram: request received -> upstream request sent
//                                               (parse, tokenize, hash, admit, decide), excluding
//                                               queueing and the prefill leg
//   ttft_seconds, tpot_seconds, e2e_seconds     histograms as clients see them (TTFT and TPOT
//                                               from streamed responses; E2E for all)
//   queue_seconds                               histogram: wait for an admission slot
//   pd_decisions_total{reason}                  PdDecider reasons; prefill_fallbacks_total,
//                                               kv_transfer_fallbacks_total
//   prefix_query_blocks_total, prefix_hit_blocks_total   full prompt blocks routed / of them
//                                               cached on the chosen endpoint (hit rate = ratio)
//   prefix_source_info{source, tokenizer}       1: index|history, tokenizer loaded|failed|none
//   inflight_requests, queued_requests          now
//   auth_rejected_total{reason}                 401s for want of an API key: missing|invalid
//   auth_key_reloads_total{outcome}             API key file re-read after a change: loaded|failed
//   kv_events_batches_total, kv_events_total{type}, kv_events_gaps_total, kv_events_replays_total,
//   kv_events_restarts_total, kv_events_decode_errors_total, kv_events_replay_malformed_total,
//   kv_events_replay_holes_total,
//   kv_index_entries, kv_index_evictions_total
//   endpoint_healthy / endpoint_inflight / endpoint_running / endpoint_waiting /
//   endpoint_kv_usage{endpoint, pool, role}, endpoint_ejections_total{...}
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace disagg::router {

/// Why a request failed (label `cause`).
enum class ErrorCause : std::uint8_t {
  bad_request,       ///< 400: malformed JSON, missing or mistyped fields
  unknown_model,     ///< 404
  not_found,         ///< 404/405: no such route or method
  queue_full,        ///< 429: admission queue full or wait timed out
  no_endpoint,       ///< 503: no healthy endpoint of the needed role
  upstream_connect,  ///< connect refused / timed out (retried when possible)
  upstream_5xx,      ///< the worker answered 5xx before any byte (retried when possible)
  upstream_timeout,  ///< first byte or idle timeout
  upstream_broken,   ///< the worker's response broke after it started (never retried)
  upstream_4xx,      ///< the worker refused the request (passed through)
  client_gone,       ///< the client disconnected; the upstream request was cancelled
  request_timeout,   ///< the per-request deadline passed
  prefill_failed,    ///< P/D prefill leg failed; the request fell back to decode-only
  draining,          ///< refused while shutting down
  count_
};
inline constexpr int kErrorCauseCount = static_cast<int>(ErrorCause::count_);
std::string_view to_string(ErrorCause cause);

/// Metric shards: each thread that records takes one, round robin, on its first use. Counting
/// from the router's HTTP threads into one shared cache line per counter made every request pass
/// a dozen lines between cores (with the histograms switched off, the router's user time at
/// concurrency 32 on two threads fell by about a fifth); with shards each thread mostly writes its
/// own. Reads sum the shards.
inline constexpr std::size_t kMetricShards = 8;
/// This thread's shard, in [0, kMetricShards).
std::size_t metric_shard();

/// A monotonic counter, sharded per thread. The names follow std::atomic so that call sites read
/// the same; fetch_add() returns nothing.
class Counter {
 public:
  void fetch_add(std::uint64_t n, std::memory_order = std::memory_order_relaxed) {
    shards_[metric_shard()].value.fetch_add(n, std::memory_order_relaxed);
  }
  std::uint64_t load(std::memory_order = std::memory_order_relaxed) const {
    std::uint64_t total = 0;
    for (const Shard& s : shards_) total += s.value.load(std::memory_order_relaxed);
    return total;
  }

 private:
  struct alignas(64) Shard {
    std::atomic<std::uint64_t> value{0};
  };
  std::array<Shard, kMetricShards> shards_{};
};

/// Fixed-bucket histogram, sharded per thread; observe() is lock-free.
class Histogram {
 public:
  explicit Histogram(std::span<const double> bounds);
  void observe(double v);
  void write(std::string& out, std::string_view name, std::string_view help) const;
  /// Appends the _bucket, _sum and _count lines of one series with `labels` (e.g. `phase="queue"`,
  /// empty for none), without HELP and TYPE: for a histogram with several label sets.
  void write_series(std::string& out, std::string_view name, std::string_view labels) const;
  std::uint64_t count() const;

 private:
  struct alignas(64) Shard {
    std::array<std::atomic<std::uint64_t>, 32> counts{};
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> sum_micro{0};  // sum in microseconds: atomic without a CAS loop
  };
  std::span<const double> bounds_;
  std::array<Shard, kMetricShards> shards_{};
};

struct RouterMetrics {
  RouterMetrics();

  Histogram decision_seconds;
  Histogram overhead_seconds;
  Histogram queue_seconds;
  Histogram ttft_seconds;
  Histogram tpot_seconds;
  Histogram e2e_seconds;

  /// [route 0 completions / 1 chat][outcome 0 ok / 1 error / 2 client_gone]
  std::array<std::array<Counter, 3>, 2> requests{};
  std::array<Counter, kErrorCauseCount> errors{};
  Counter retries;
  /// Attempts answered 503 by a draining endpoint and sent elsewhere (not counted in `retries`).
  Counter drained_retries;
  /// Requests held now for lack of a ready decode (or aggregated) endpoint, and requests served
  /// decode-only now because no prefill endpoint was ready: the pools' queued_requests signals.
  std::atomic<std::int64_t> waiting_for_endpoint{0};
  std::atomic<std::int64_t> waiting_for_prefill{0};
  /// Indexed by disagg::PdReason.
  std::array<Counter, 4> pd_decisions{};
  Counter prefill_fallbacks;
  /// Decode legs with the prefill's kv_transfer_params that failed before answering (a failed KV
  /// pull under vLLM's kv_load_failure_policy 'fail'); their retry went decode-only.
  Counter kv_transfer_fallbacks;
  Counter prefix_query_blocks;
  Counter prefix_hit_blocks;
  /// Requests refused 401 for want of an API key (api_keys.h): [0] missing, [1] invalid.
  std::array<Counter, 2> auth_rejected{};
  /// Re-reads of the API key file after it changed: [0] loaded, [1] failed (the old keys stayed).
  std::array<std::atomic<std::uint64_t>, 2> auth_key_reloads{};

  std::atomic<std::uint64_t> kv_batches{0};
  /// Indexed by KvEventType.
  std::array<std::atomic<std::uint64_t>, 3> kv_events{};
  std::atomic<std::uint64_t> kv_gaps{0};
  std::atomic<std::uint64_t> kv_replays{0};
  std::atomic<std::uint64_t> kv_restarts{0};
  std::atomic<std::uint64_t> kv_decode_errors{0};
  /// Replay answers of neither framing (kv_event_wire.h parse_replay_reply), skipped.
  std::atomic<std::uint64_t> kv_replay_malformed{0};
  /// Replay answers with holes (batches asked for and missing): the endpoint was cleared, then the
  /// batches present applied.
  std::atomic<std::uint64_t> kv_replay_holes{0};
  /// Warm start (kv_event_subscriber.h): replays asked when a subscription starts, the blocks
  /// their BlockStored events carried, and the blocks loaded from a peer router's snapshot.
  std::atomic<std::uint64_t> kv_warm_replays{0};
  std::atomic<std::uint64_t> kv_warm_replay_blocks{0};
  std::atomic<std::uint64_t> kv_warm_peer_blocks{0};

  /// Where prefix scorers read prefixes ("index" or "history") and the tokenizer's state ("loaded",
  /// "failed", "none"): set once before the router serves, exported as disagg_router_prefix_source_info.
  std::string_view prefix_source = "history";
  std::string_view tokenizer_state = "none";

  void error(ErrorCause cause) { errors[static_cast<int>(cause)].fetch_add(1, std::memory_order_relaxed); }

  /// Appends the router-wide metrics (not the per-endpoint ones) in Prometheus text format.
  void write(std::string& out) const;
};

/// Appends "# HELP/# TYPE" and one sample line.
void write_metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
                  std::string_view labels, double value);
/// Appends one sample line (no HELP/TYPE).
void write_sample(std::string& out, std::string_view name, std::string_view labels, double value);

/// What the router reads from a worker's /metrics.
struct ScrapedLoad {
  double running = 0;   ///< sum of vllm:num_requests_running samples
  double waiting = 0;   ///< sum of vllm:num_requests_waiting samples
  double kv_usage = 0;  ///< max of vllm:kv_cache_usage_perc (or gpu_cache_usage_perc) samples
  /// disagg:sim_worker_pending_kv_transfers: prefilled requests whose KV a decode worker has yet to
  /// pull (the sim-worker's; vLLM has no such gauge). Not part of `found`.
  double pending_transfers = 0;
  bool found = false;  ///< any of them was present
  /// Sums of vllm:prefix_cache_hits_total and vllm:prefix_cache_queries_total (tokens; also the
  /// older vllm:gpu_prefix_cache_* names), when prefix_found.
  double prefix_hits = 0;
  double prefix_queries = 0;
  bool prefix_found = false;
  /// vllm:cache_config_info's num_gpu_blocks and block_size labels (the worker's KV capacity in its
  /// blocks of block_size tokens); 0 when absent.
  double num_gpu_blocks = 0;
  double gpu_block_size = 0;
};

/// Parses Prometheus text exposition; ignores everything else. Never throws.
ScrapedLoad parse_vllm_load(std::string_view text);

}  // namespace disagg::router
