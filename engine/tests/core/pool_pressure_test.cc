// A pool's SLO pressure (disagg/pool_pressure.h), the one rule the router and the simulator apply:
// each term by hand, a pool with no ready replica, the simulator's step model, and garbage in.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "disagg/autoscaler.h"
#include "disagg/pool_pressure.h"
#include "test_fixtures.h"

namespace disagg {
namespace {

// Two replicas of 20,000 prompt tokens/s each, 20 ms fixed, a 2 s TTFT SLO.
PrefillLoad prefill_example() {
  PrefillLoad l;
  l.ready_replicas = 2;
  l.pending_prompt_tokens = 38000;
  l.mean_prompt_tokens = 2000;
  l.prompt_cv2 = 0.25;
  l.capacity_tokens_per_second = 40000;
  l.fixed_seconds = 0.02;
  l.ttft_slo_seconds = 2;
  return l;
}

// The router's linear step: 12 ms + 0.2 ms per sequence.
double linear_step(double batch) {
  return 0.012 + 0.0002 * batch;
}

TEST(PoolPressure, PrefillIsTheWorseOfPredictedTtftAndUtilizationOverWhatThePoolSustains) {
  PrefillLoad l = prefill_example();
  // (38000 + 2000) / 40000 + 0.02 = 1.02 s against 2 s, nothing arriving
  PrefillPressure p = prefill_pressure(l);
  EXPECT_DOUBLE_EQ(p.predicted_ttft_seconds, 1.02);
  EXPECT_DOUBLE_EQ(p.pressure, 0.51);
  // 30,000 tokens/s arriving: 0.75 of the rate, over what two replicas sustain at a 0.1 s service
  const double bound = prefill_sustainable_utilization(2, 0.1, 0.25, 0.02, 2);
  EXPECT_DOUBLE_EQ(p.sustainable_utilization, bound);
  l.prompt_tokens_per_second = 30000;
  p = prefill_pressure(l);
  EXPECT_DOUBLE_EQ(p.pressure, std::max(0.51, 0.75 / bound));
  EXPECT_GT(p.pressure, 0.75);
}

TEST(PoolPressure, DecodeIsTheWorstOfTpotKvAndSlotsAsARate) {
  DecodeLoad l;
  l.ready_replicas = 2;
  l.running_sequences = 198;  // 99 per replica: the next one steps at 100, 0.032 s
  l.kv_utilization = 0.45;
  l.tpot_slo_seconds = 0.05;
  DecodePressure p = decode_pressure(l, linear_step);
  EXPECT_NEAR(p.predicted_tpot_seconds, 0.032, 1e-15);
  EXPECT_NEAR(p.pressure, 0.64, 1e-12);  // 0.032 / 0.05 above 0.45 / 0.9
  // 128 slots a replica: 198 / 256 of them, at the full batch's step over today's
  // (0.0376 / 0.0318), against 0.9
  l.max_sequences = 128;
  p = decode_pressure(l, linear_step);
  EXPECT_NEAR(p.pressure, 198.0 / 256 * (0.0376 / 0.0318) / 0.9, 1e-12);
  // KV nearly full dominates
  l.max_sequences = 0;
  l.kv_utilization = 0.99;
  EXPECT_NEAR(decode_pressure(l, linear_step).pressure, 1.1, 1e-12);
}

TEST(PoolPressure, NoReadyReplicaIsOnePlusWhatWaitsOrNothing) {
  PrefillLoad pl = prefill_example();
  pl.ready_replicas = 0;
  EXPECT_EQ(prefill_pressure(pl).pressure, 0);
  pl.queued_requests = 3;
  EXPECT_EQ(prefill_pressure(pl).pressure, 4);
  DecodeLoad dl;
  dl.queued_requests = 2;
  EXPECT_EQ(decode_pressure(dl, linear_step).pressure, 3);
  EXPECT_EQ(decode_pressure(dl, linear_step).predicted_tpot_seconds, 0);
}

TEST(PoolPressure, TheSimulatorsStepIsTheCostModelsBetweenWholeBatches) {
  const CostModel cm = test::cost_model();
  const auto at = [&cm](std::int64_t b) { return cm.decode_batch_time(b, b * 1000).total_seconds; };
  EXPECT_EQ(decode_step_seconds(cm, 8, 1000), at(8));
  EXPECT_NEAR(decode_step_seconds(cm, 8.25, 1000), at(8) + 0.25 * (at(9) - at(8)), 1e-15);
  // below one sequence: the one-sequence step
  EXPECT_EQ(decode_step_seconds(cm, 1, 1000), at(1));
}

TEST(PoolPressure, GarbageInGivesAFiniteNonNegativePressure) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  PrefillLoad pl = prefill_example();
  pl.capacity_tokens_per_second = 0;
  pl.mean_prompt_tokens = nan;
  pl.prompt_cv2 = inf;
  pl.prompt_tokens_per_second = -5;
  const PrefillPressure pp = prefill_pressure(pl);
  EXPECT_TRUE(std::isfinite(pp.pressure));
  EXPECT_GE(pp.pressure, 0);
  DecodeLoad dl;
  dl.ready_replicas = 1;
  dl.running_sequences = nan;
  dl.kv_utilization = inf;
  dl.max_sequences = 4;
  const DecodePressure dp = decode_pressure(dl, [](double) { return std::numeric_limits<double>::quiet_NaN(); });
  EXPECT_TRUE(std::isfinite(dp.pressure));
  EXPECT_GE(dp.pressure, 0);
}

}  // namespace
}  // namespace disagg
