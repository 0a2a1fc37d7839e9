#include "disagg/metrics.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>

namespace disagg {

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p * static_cast<double>(sorted.size()));
  std::size_t idx = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  if (idx >= sorted.size()) idx = sorted.size() - 1;
  return sorted[idx];
}

namespace {

std::size_t bucket_count() {
  return static_cast<std::size_t>(std::ceil(std::log(LatencyHistogram::kMax / LatencyHistogram::kMin) /
                                            std::log(LatencyHistogram::kGrowth))) +
         1;
}

double bucket_upper(std::size_t i) {
  return LatencyHistogram::kMin * std::pow(LatencyHistogram::kGrowth, static_cast<double>(i));
}

LatencyStats exact_stats(std::vector<double>& v) {
  LatencyStats s;
  s.count = static_cast<std::int64_t>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.p50 = percentile_sorted(v, 0.50);
  s.p90 = percentile_sorted(v, 0.90);
  s.p99 = percentile_sorted(v, 0.99);
  s.max = v.back();
  return s;
}

}  // namespace

std::uint64_t LatencyHistogram::lut_key(double v) {
  return std::bit_cast<std::uint64_t>(v) >> (52 - kLutMantissaBits);
}

LatencyHistogram::LatencyHistogram() : buckets_(bucket_count(), 0), edges_(bucket_count()) {
  for (std::size_t i = 0; i < edges_.size(); ++i) edges_[i] = bucket_upper(i);
  // Ranges of 2^(1/256) (0.27 %) are narrower than buckets (1 %), so lut_[k] (the first bucket
  // whose edge reaches the range's lower end) is at most one bucket below a value's true bucket.
  lut_base_ = lut_key(kMin);
  const std::uint64_t last = lut_key(edges_.back());
  lut_.resize(static_cast<std::size_t>(last - lut_base_ + 1));
  std::size_t i = 0;
  for (std::size_t k = 0; k < lut_.size(); ++k) {
    const double lo = std::bit_cast<double>((lut_base_ + k) << (52 - kLutMantissaBits));
    while (i + 1 < edges_.size() && edges_[i] < lo) ++i;
    lut_[k] = static_cast<std::uint16_t>(i);
  }
}

void LatencyHistogram::add(double seconds) {
  // Bucket i holds (upper(i-1), upper(i)]; bucket 0 everything <= kMin; the last bucket everything
  // above its lower edge. The result is the first bucket whose edge reaches the value.
  std::size_t i = 0;
  if (seconds > kMin) {
    const std::uint64_t k = lut_key(seconds) - lut_base_;
    if (k >= lut_.size()) {
      i = buckets_.size() - 1;
    } else {
      i = lut_[static_cast<std::size_t>(k)];
      while (edges_[i] < seconds && i + 1 < buckets_.size()) ++i;
    }
  }
  ++buckets_[i];
  ++count_;
  sum_ += seconds;
  max_ = std::max(max_, seconds);
}

double LatencyHistogram::percentile(double p) const {
  if (count_ == 0) return 0;
  std::int64_t rank = static_cast<std::int64_t>(std::ceil(p * static_cast<double>(count_)));
  rank = std::clamp<std::int64_t>(rank, 1, count_);
  std::int64_t seen = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::min(edges_[i], max_);
  }
  return max_;
}

LatencyStats LatencyHistogram::stats() const {
  LatencyStats s;
  s.count = count_;
  if (count_ == 0) return s;
  s.mean = sum_ / static_cast<double>(count_);
  s.p50 = percentile(0.50);
  s.p90 = percentile(0.90);
  s.p99 = percentile(0.99);
  s.max = max_;
  return s;
}

MetricsSummary MetricsCollector::summarize(const Slo& slo, double first_arrival,
                                           const std::vector<double>& busy_seconds) const {
  MetricsSummary m;
  m.completed = static_cast<std::int64_t>(records_.size());
  m.rejected = rejected_;
  m.submitted = m.completed + rejected_ + unfinished_;
  std::vector<double> ttft, tpot, e2e;
  ttft.reserve(records_.size());
  tpot.reserve(records_.size());
  e2e.reserve(records_.size());
  double last_finish = first_arrival;
  std::int64_t out_tokens = 0, in_tokens = 0;
  std::array<std::int64_t, kCacheTiers> hit{};
  for (const RequestRecord& r : records_) {
    const double t = r.first_token - r.arrival;
    ttft.push_back(t);
    e2e.push_back(r.finish - r.arrival);
    bool tpot_ok = true;
    if (r.output_tokens >= 2) {
      const double per = (r.finish - r.first_token) / (r.output_tokens - 1);
      tpot.push_back(per);
      tpot_ok = per <= slo.tpot_seconds;
    }
    if (t <= slo.ttft_seconds && tpot_ok) ++m.good;
    last_finish = std::max(last_finish, r.finish);
    out_tokens += r.output_tokens;
    in_tokens += r.prompt_tokens;
    for (std::size_t k = 0; k < kCacheTiers; ++k) hit[k] += r.cached_tokens[k];
    m.preemptions += r.preemptions;
    m.disaggregated += r.disaggregated ? 1 : 0;
    m.kv_transfer_bytes += r.kv_transfer_bytes;
  }
  m.ttft = exact_stats(ttft);
  m.tpot = exact_stats(tpot);
  m.e2e = exact_stats(e2e);
  m.itl = itl_.stats();
  m.duration_seconds = last_finish - first_arrival;
  const double d = m.duration_seconds > 0 ? m.duration_seconds : 0;
  m.goodput_share = m.submitted > 0 ? static_cast<double>(m.good) / static_cast<double>(m.submitted) : 0;
  if (d > 0) {
    m.goodput_rate = static_cast<double>(m.good) / d;
    m.request_throughput = static_cast<double>(m.completed) / d;
    m.output_token_throughput = static_cast<double>(out_tokens) / d;
    m.input_token_throughput = static_cast<double>(in_tokens) / d;
  }
  for (std::size_t k = 0; k < kCacheTiers; ++k) {
    m.prefix_hit_rate[k] = in_tokens > 0 ? static_cast<double>(hit[k]) / static_cast<double>(in_tokens) : 0;
  }
  double sum_util = 0;
  for (double b : busy_seconds) {
    const double u = d > 0 ? b / d : 0;
    m.worker_utilization.push_back(u);
    sum_util += u;
  }
  m.mean_utilization = busy_seconds.empty() ? 0 : sum_util / static_cast<double>(busy_seconds.size());
  return m;
}

namespace {

void put_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

void put_int(std::string& out, std::int64_t v) {
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

void put_stats(std::string& out, const char* key, const LatencyStats& s) {
  out += '"';
  out += key;
  out += "\":{\"count\":";
  put_int(out, s.count);
  out += ",\"mean\":";
  put_number(out, s.mean);
  out += ",\"p50\":";
  put_number(out, s.p50);
  out += ",\"p90\":";
  put_number(out, s.p90);
  out += ",\"p99\":";
  put_number(out, s.p99);
  out += ",\"max\":";
  put_number(out, s.max);
  out += "},";
}

}  // namespace

std::string to_json(const MetricsSummary& m) {
  std::string o = "{\"submitted\":";
  put_int(o, m.submitted);
  o += ",\"completed\":";
  put_int(o, m.completed);
  o += ",\"rejected\":";
  put_int(o, m.rejected);
  o += ",\"durationSeconds\":";
  put_number(o, m.duration_seconds);
  o += ',';
  put_stats(o, "ttftSeconds", m.ttft);
  put_stats(o, "tpotSeconds", m.tpot);
  put_stats(o, "itlSeconds", m.itl);
  put_stats(o, "e2eSeconds", m.e2e);
  o += "\"goodRequests\":";
  put_int(o, m.good);
  o += ",\"goodputShare\":";
  put_number(o, m.goodput_share);
  o += ",\"goodputRequestsPerSecond\":";
  put_number(o, m.goodput_rate);
  o += ",\"requestsPerSecond\":";
  put_number(o, m.request_throughput);
  o += ",\"outputTokensPerSecond\":";
  put_number(o, m.output_token_throughput);
  o += ",\"inputTokensPerSecond\":";
  put_number(o, m.input_token_throughput);
  o += ",\"prefixHitRate\":{\"gpu\":";
  put_number(o, m.prefix_hit_rate[0]);
  o += ",\"host\":";
  put_number(o, m.prefix_hit_rate[1]);
  o += ",\"disk\":";
  put_number(o, m.prefix_hit_rate[2]);
  o += ",\"remote\":";
  put_number(o, m.prefix_hit_rate[3]);
  o += "},\"preemptions\":";
  put_int(o, m.preemptions);
  o += ",\"disaggregatedRequests\":";
  put_int(o, m.disaggregated);
  o += ",\"kvTransferBytes\":";
  put_number(o, m.kv_transfer_bytes);
  o += ",\"meanUtilization\":";
  put_number(o, m.mean_utilization);
  o += ",\"workerUtilization\":[";
  for (std::size_t i = 0; i < m.worker_utilization.size(); ++i) {
    if (i) o += ',';
    put_number(o, m.worker_utilization[i]);
  }
  o += ']';
  if (m.has_tiers) {
    o += ",\"kvTiers\":{";
    static constexpr const char* kNames[kCacheTiers] = {"gpu", "host", "disk", "remote"};
    for (std::size_t k = 1; k < kCacheTiers; ++k) {
      if (k > 1) o += ',';
      o += '"';
      o += kNames[k];
      o += "\":{\"bytesLoaded\":";
      put_number(o, m.tier_bytes_loaded[k]);
      o += ",\"bytesOffloaded\":";
      put_number(o, m.tier_bytes_offloaded[k]);
      o += ",\"offloadsSkipped\":";
      put_int(o, m.tier_offloads_skipped[k]);
      o += '}';
    }
    o += '}';
  }
  o += '}';
  return o;
}

}  // namespace disagg
