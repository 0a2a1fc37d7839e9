// Metrics: exact percentiles against brute force, histogram error bound, goodput definitions.
#include "disagg/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace disagg {
namespace {

// Brute force nearest rank: the smallest sample x with at least p*n samples <= x.
double brute_percentile(const std::vector<double>& v, double p) {
  for (double x : v) {
    const auto at_most = std::count_if(v.begin(), v.end(), [&](double y) { return y <= x; });
    bool smallest = true;
    for (double y : v) {
      if (y < x && static_cast<double>(std::count_if(
                       v.begin(), v.end(), [&](double z) { return z <= y; })) >= p * v.size())
        smallest = false;
    }
    if (static_cast<double>(at_most) >= p * static_cast<double>(v.size()) && smallest) return x;
  }
  return 0;
}

TEST(Metrics, PercentilesMatchBruteForce) {
  std::mt19937_64 rng(7);
  for (int n : {1, 2, 3, 10, 99, 100, 101, 257}) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) v.push_back(static_cast<double>(rng() % 50) / 7.0);
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    for (double p : {0.01, 0.5, 0.9, 0.99, 1.0}) {
      EXPECT_EQ(percentile_sorted(sorted, p), brute_percentile(v, p)) << "n " << n << " p " << p;
    }
  }
  EXPECT_EQ(percentile_sorted({}, 0.5), 0);
}

TEST(Metrics, HistogramPercentileIsWithinOnePercentAbove) {
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> d(std::log(0.02), 0.8);
  LatencyHistogram h;
  std::vector<double> v;
  for (int i = 0; i < 20000; ++i) {
    const double x = d(rng);
    v.push_back(x);
    h.add(x);
  }
  std::sort(v.begin(), v.end());
  for (double p : {0.5, 0.9, 0.99}) {
    const double exact = percentile_sorted(v, p);
    const double approx = h.percentile(p);
    EXPECT_GE(approx, exact);
    EXPECT_LE(approx, exact * (1 + LatencyHistogram::kItlRelativeError) + 1e-12);
  }
  EXPECT_EQ(h.count(), 20000);
}

TEST(Metrics, HistogramPutsEveryValueInTheFirstBucketReachingIt) {
  // GIVEN values spread log-uniformly over the resolved range and beyond
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> exponent(-7.5, 4.5);
  for (int i = 0; i < 20000; ++i) {
    const double v = std::pow(10.0, exponent(rng));
    // WHEN it is added next to a far larger sample, p50 reports its bucket's upper edge
    LatencyHistogram h;
    h.add(v);
    h.add(1e9);
    const double edge = h.percentile(0.5);
    // THEN the edge reaches the value and the bucket below does not (1 % buckets)
    if (v <= LatencyHistogram::kMin) {
      ASSERT_EQ(edge, LatencyHistogram::kMin) << v;
    } else if (v < LatencyHistogram::kMax) {
      ASSERT_GE(edge, v) << v;
      ASSERT_LT(edge, v * LatencyHistogram::kGrowth * (1 + 1e-9)) << v;
    } else {
      ASSERT_GE(edge, LatencyHistogram::kMax * (1 - 1e-9)) << v;
    }
  }
}

TEST(Metrics, GoodputCountsBothSlosAndRejections) {
  // GIVEN three completed requests (one too slow to start, one too slow per token) and one rejected
  MetricsCollector c;
  c.add_request({0.0, 0.5, 1.5, 100, 11, {50, 0, 0, 0}, 0, false, 0});   // TTFT 0.5, TPOT 0.1: good
  c.add_request({1.0, 4.0, 5.0, 100, 11, {0, 0, 0, 0}, 0, false, 0});    // TTFT 3: bad
  c.add_request({2.0, 2.1, 12.1, 100, 11, {0, 0, 0, 0}, 1, true, 1e6});  // TPOT 1: bad
  c.add_rejected();
  // WHEN summarized with TTFT <= 2 s and TPOT <= 0.2 s
  const MetricsSummary m = c.summarize({2.0, 0.2}, 0.0, {6.05, 3.025});
  // THEN
  EXPECT_EQ(m.submitted, 4);
  EXPECT_EQ(m.good, 1);
  EXPECT_DOUBLE_EQ(m.goodput_share, 0.25);
  EXPECT_DOUBLE_EQ(m.duration_seconds, 12.1);
  EXPECT_DOUBLE_EQ(m.goodput_rate, 1 / 12.1);
  EXPECT_DOUBLE_EQ(m.output_token_throughput, 33 / 12.1);
  EXPECT_DOUBLE_EQ(m.prefix_hit_rate[0], 50.0 / 300.0);
  EXPECT_DOUBLE_EQ(m.kv_transfer_bytes, 1e6);
  EXPECT_EQ(m.preemptions, 1);
  EXPECT_DOUBLE_EQ(m.worker_utilization[0], 0.5);
  EXPECT_DOUBLE_EQ(m.ttft.p50, 0.5);
  EXPECT_DOUBLE_EQ(m.ttft.max, 3.0);
  EXPECT_NE(to_json(m).find("\"goodputShare\":0.25"), std::string::npos);
}

}  // namespace
}  // namespace disagg
