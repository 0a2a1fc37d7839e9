#include "prometheus.h"

#include <charconv>
#include <cmath>

namespace disagg::sim_worker {

std::string prom_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

void PromHistogram::observe(double v) {
  std::size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  ++count_;
  sum_ += v;
}

void PromHistogram::write(std::string& out, std::string_view name, std::string_view help,
                          std::string_view labels) const {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" histogram\n");
  const std::string sep = labels.empty() ? "" : ",";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? prom_number(bounds_[i]) : "+Inf";
    out.append(name)
        .append("_bucket{")
        .append(labels)
        .append(sep)
        .append("le=\"")
        .append(le)
        .append("\"} ")
        .append(std::to_string(cumulative))
        .append("\n");
  }
  out.append(name).append("_sum{").append(labels).append("} ").append(prom_number(sum_)).append("\n");
  out.append(name).append("_count{").append(labels).append("} ").append(std::to_string(count_)).append("\n");
}

void write_prom_metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
                       std::string_view labels, double value) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  out.append(name).append("{").append(labels).append("} ").append(prom_number(value)).append("\n");
}

}  // namespace disagg::sim_worker
