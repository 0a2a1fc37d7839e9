// Server-side counters and the Prometheus text rendering of /metrics.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tiered_store.h"

namespace disagg::kvstore {

/// Fixed-bucket latency histogram (seconds), Prometheus-style cumulative on output.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 14> kBounds = {1e-6, 5e-6,   1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
                                                     1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 0.1,    1.0};
  void observe(double seconds) {
    std::size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    ++counts_[i];
    sum_ += seconds;
    ++count_;
  }
  /// Appends the series of metric `name` with label set `labels` (e.g. `command="get"`).
  void render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  std::array<std::uint64_t, kBounds.size() + 1> counts_{};
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

struct ServerCounters {
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_rejected = 0;  ///< over --max-clients
  std::uint64_t connections_current = 0;
  std::uint64_t commands = 0;
  std::uint64_t errors = 0;             ///< error replies (unknown commands, limits, syntax)
  std::uint64_t protocol_errors = 0;    ///< connections closed for a malformed stream
  std::uint64_t rejected_requests = 0;  ///< refused at a header: values in flight would pass --memory-bytes
  std::uint64_t pipeline_stalls = 0;    ///< times reading paused at --max-pipeline
  std::uint64_t bytes_in = 0, bytes_out = 0;
  LatencyHistogram latency_get, latency_set, latency_other;
};

/// Renders everything as Prometheus text exposition format (version 0.0.4).
std::string render_metrics(const TieredStore& store, const ServerCounters& counters);

}  // namespace disagg::kvstore
