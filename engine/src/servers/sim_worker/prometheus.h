// prometheus.h — the few Prometheus text-format pieces the sim-worker exposes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::sim_worker {

/// Cumulative-bucket histogram (Prometheus semantics: a sample v lands in every bucket with
/// v <= le). Fixed size; not thread-safe.
class PromHistogram {
 public:
  explicit PromHistogram(std::span<const double> bounds)
      : bounds_(bounds.begin(), bounds.end()), counts_(bounds.size() + 1, 0) {}
  void observe(double v);
  /// Appends `# HELP`, `# TYPE` and the _bucket/_sum/_count lines with `labels` (e.g.
  /// `model_name="m"`).
  void write(std::string& out, std::string_view name, std::string_view help, std::string_view labels) const;
  std::uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, not cumulative; last = +Inf
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

/// Appends one sample of a counter or gauge with HELP and TYPE lines.
void write_prom_metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
                       std::string_view labels, double value);

/// A double in Prometheus text form (shortest round trip; +Inf/-Inf/NaN spelled out).
std::string prom_number(double v);

}  // namespace disagg::sim_worker
