// disagg/metrics.h — per-request latency records and the summary of a run.
//
// Definitions (times in seconds):
//   TTFT = first token - arrival; E2E = finish - arrival;
//   TPOT = (finish - first token) / (output tokens - 1), for requests with >= 2 output tokens;
//   ITL  = gap between consecutive tokens of one request (every gap, pooled over requests).
// Percentiles of TTFT, TPOT and E2E are exact: nearest rank on the sorted samples,
// p-quantile = sorted[ceil(p * n) - 1]. ITL samples are one per token (too many to keep), so they
// go into a log-bucketed histogram: a reported ITL percentile is the upper edge of its bucket, at
// most kItlRelativeError above the true sample (and exact for the bucket boundaries).
// Goodput: a request is good when it completed, TTFT <= slo.ttft and TPOT <= slo.tpot (a request
// with one output token has no TPOT and meets that half). goodput_share = good / submitted
// (rejected and unfinished requests count as not good); goodput_rate = good / duration.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace disagg {

/// Where a prefix-cache hit was found: the GPU pool, or a lower tier it was loaded from.
enum class CacheTier : std::uint8_t { gpu = 0, host = 1, disk = 2, remote = 3 };
inline constexpr std::size_t kCacheTiers = 4;

/// One finished request.
struct RequestRecord {
  double arrival = 0;
  double first_token = 0;
  double finish = 0;
  std::int32_t prompt_tokens = 0;
  std::int32_t output_tokens = 0;
  /// Prompt tokens found in the prefix cache of the worker that prefilled it, per tier (at its
  /// first admission: GPU hits, then tokens loaded from host, disk or the remote store).
  std::array<std::int32_t, kCacheTiers> cached_tokens{};
  std::int32_t preemptions = 0;
  bool disaggregated = false;
  /// KV bytes moved from a prefill to a decode worker for this request.
  double kv_transfer_bytes = 0;
};

/// Latency targets of a goodput.
struct Slo {
  double ttft_seconds = 2.0;
  double tpot_seconds = 0.1;
};

/// Distribution of one latency.
struct LatencyStats {
  std::int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

/// Summary of a run.
struct MetricsSummary {
  std::int64_t submitted = 0;   ///< requests that arrived
  std::int64_t completed = 0;   ///< requests that finished
  std::int64_t rejected = 0;    ///< refused at a full queue or as too long
  double duration_seconds = 0;  ///< first arrival to last finish
  LatencyStats ttft, tpot, itl, e2e;
  std::int64_t good = 0;          ///< completed requests meeting both SLOs
  double goodput_share = 0;       ///< good / submitted
  double goodput_rate = 0;        ///< good / duration (requests/s)
  double request_throughput = 0;  ///< completed / duration
  double output_token_throughput = 0;
  double input_token_throughput = 0;
  /// Per tier: prompt tokens hit / prompt tokens of completed requests.
  std::array<double, kCacheTiers> prefix_hit_rate{};
  std::int64_t preemptions = 0;
  std::int64_t disaggregated = 0;  ///< requests that went through a prefill worker
  double kv_transfer_bytes = 0;
  /// Lower KV tiers, indexed by CacheTier (gpu unused), all workers: KV bytes read into GPU
  /// memory, bytes written (offloaded), and blocks whose offload was skipped because the tier's
  /// write link was too far behind. Filled by the simulator; reported only when has_tiers.
  std::array<double, kCacheTiers> tier_bytes_loaded{};
  std::array<double, kCacheTiers> tier_bytes_offloaded{};
  std::array<std::int64_t, kCacheTiers> tier_offloads_skipped{};
  /// Whether the deployment has lower tiers: to_json then adds "kvTiers" (so GPU-only summaries
  /// keep their exact text).
  bool has_tiers = false;
  /// Busy share of each worker (step time / duration), in deployment order.
  std::vector<double> worker_utilization;
  double mean_utilization = 0;
};

/// Exact nearest-rank percentile of `sorted` (ascending); 0 for an empty vector.
/// Precondition: 0 < p <= 1.
double percentile_sorted(const std::vector<double>& sorted, double p);

/// Log-bucketed histogram of positive durations, for per-token samples. Fixed size.
class LatencyHistogram {
 public:
  /// Buckets grow by this factor: a percentile is reported at most 1% above the sample.
  static constexpr double kGrowth = 1.01;
  static constexpr double kItlRelativeError = kGrowth - 1.0;
  /// Smallest and largest resolved values (seconds); values outside clamp to the end buckets.
  static constexpr double kMin = 1e-6, kMax = 1e4;

  LatencyHistogram();
  void add(double seconds);
  /// Upper edge of the bucket holding the nearest-rank p-quantile (0 when empty).
  double percentile(double p) const;
  LatencyStats stats() const;
  std::int64_t count() const { return count_; }

 private:
  std::vector<std::int64_t> buckets_;
  std::vector<double> edges_;  // upper edge of each bucket
  // Bucket lookup without a logarithm: the top bits of a double (exponent and kLutMantissaBits of
  // mantissa) split each octave into 2^kLutMantissaBits ranges, each narrower than a bucket, and
  // lut_ holds the first bucket a value of that range can fall in (at most one step short).
  static constexpr int kLutMantissaBits = 8;
  std::vector<std::uint16_t> lut_;
  std::uint64_t lut_base_ = 0;  // key of kMin
  /// Key of a positive double: exponent and top mantissa bits; monotone in the value.
  static std::uint64_t lut_key(double v);
  std::int64_t count_ = 0;
  double sum_ = 0, max_ = 0;
};

/// Gathers records and per-token gaps; summarize() sorts copies, so it may be called repeatedly.
class MetricsCollector {
 public:
  void reserve(std::size_t requests) { records_.reserve(requests); }
  void add_request(const RequestRecord& record) { records_.push_back(record); }
  void add_itl(double seconds) { itl_.add(seconds); }
  void add_rejected() { ++rejected_; }
  void add_unfinished() { ++unfinished_; }
  const std::vector<RequestRecord>& records() const { return records_; }

  /// `first_arrival` and `busy_seconds` (per worker) come from the driver.
  MetricsSummary summarize(const Slo& slo, double first_arrival, const std::vector<double>& busy_seconds) const;

 private:
  std::vector<RequestRecord> records_;
  LatencyHistogram itl_;
  std::int64_t rejected_ = 0;
  std::int64_t unfinished_ = 0;
};

/// The summary as a JSON object (camelCase keys; doubles shortest round-trip).
std::string to_json(const MetricsSummary& summary);

}  // namespace disagg
