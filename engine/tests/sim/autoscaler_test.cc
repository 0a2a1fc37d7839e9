// The scaling rule (disagg/autoscaler.h): tolerance, bounds, stabilization windows, scale to zero;
// and the simulator applying it: provisioning time, and scale-down that loses no request.
#include "disagg/autoscaler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "disagg/json_value.h"
#include "disagg/simulation_config.h"
#include "disagg/simulator.h"
#include "../core/test_fixtures.h"

namespace disagg {
namespace {

constexpr double kNever = -1e300;

PoolAutoscaler scaler(const AutoscalePolicy& p, double interval = 15) {
  auto s = PoolAutoscaler::create(p, interval, "pools[0].autoscaling");
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error());
  return *s;
}

// The rule's arithmetic at target 0.8 (the default is 0.95; these numbers read easier at 0.8).
AutoscalePolicy policy(int min, int max, double down_window = 0) {
  AutoscalePolicy p;
  p.target = 0.8;
  p.min_replicas = min;
  p.max_replicas = max;
  p.scale_down_stabilization_seconds = down_window;
  return p;
}

TEST(Autoscaler, WithinToleranceKeepsTheCountOutsideScalesByReadyTimesRatio) {
  PoolAutoscaler s = scaler(policy(1, 20));
  // pressure / target = 1.05: inside HPA's 10% tolerance, no change (even with 2 provisioning)
  EXPECT_EQ(s.evaluate(0, 4, 6, 0.8 * 1.05, 0), 6);
  // 1.2: ceil(4 ready x 1.2) = 5, below the 6 requested: scale down to 5 (no down window)
  EXPECT_EQ(s.evaluate(15, 4, 6, 0.8 * 1.2, 0), 5);
  // 2.0: ceil(4 x 2) = 8; the ready count is the base, not the 6 requested
  EXPECT_EQ(s.evaluate(30, 4, 6, 1.6, 0), 8);
}

TEST(Autoscaler, ClampsToMinAndMax) {
  PoolAutoscaler s = scaler(policy(2, 5));
  EXPECT_EQ(s.evaluate(0, 3, 3, 100, 0), 5);
  EXPECT_EQ(s.evaluate(15, 3, 3, 0.01, 0), 2);
  // minReplicas 0 without scale to zero still keeps one replica
  PoolAutoscaler z = scaler(policy(0, 5));
  EXPECT_EQ(z.evaluate(0, 1, 1, 0, kNever), 1);
}

TEST(Autoscaler, ScaleDownWaitsForTheWindowScaleUpDoesNot) {
  PoolAutoscaler s = scaler(policy(1, 10, 300));
  // t=0: a burst asks for 8
  EXPECT_EQ(s.evaluate(0, 2, 2, 3.2, 0), 8);
  // the load falls at once: the recommendation is 1, but the window's highest (8) holds
  for (double t = 15; t <= 300; t += 15) EXPECT_EQ(s.evaluate(t, 8, 8, 0.05, t), 8) << "t=" << t;
  // past 300 s the burst left the window: down to the window's highest recent recommendation (1)
  EXPECT_EQ(s.evaluate(315, 8, 8, 0.05, 315), 1);
  // and up again at once (scale-up window 0)
  EXPECT_EQ(s.evaluate(330, 1, 1, 2.4, 330), 3);
}

TEST(Autoscaler, ScaleUpWindowTakesTheLowestRecentRecommendation) {
  AutoscalePolicy p = policy(1, 10);
  p.scale_up_stabilization_seconds = 30;
  PoolAutoscaler s = scaler(p);
  EXPECT_EQ(s.evaluate(0, 2, 2, 0.8, 0), 2);    // recommendation 2 (in tolerance)
  EXPECT_EQ(s.evaluate(15, 2, 2, 3.2, 15), 2);  // 8 now, but 2 is in the 30 s window
  EXPECT_EQ(s.evaluate(30, 2, 2, 3.2, 30), 2);
  EXPECT_EQ(s.evaluate(45, 2, 2, 3.2, 45), 8);  // the 2 left the window
}

TEST(Autoscaler, ScalesToZeroAfterTheIdleCooldownAndBackOnPressure) {
  AutoscalePolicy p = policy(0, 4);
  p.scale_to_zero = true;
  p.idle_seconds_before_zero = 600;
  PoolAutoscaler s = scaler(p);
  // the last request at t=100: nothing to do, but not idle long enough
  EXPECT_EQ(s.evaluate(600, 1, 1, 0, 100), 1);
  EXPECT_EQ(s.evaluate(700, 1, 1, 0, 100), 0);
  // scaled to zero, 3 requests held: pressure 1 + 3 = 4, ceil(4 / 0.8) = 5, clamped to 4
  EXPECT_EQ(s.evaluate(715, 0, 0, 4, 715), 4);
  // one held request: ceil(2 / 0.8) = 3
  PoolAutoscaler t = scaler(p);
  EXPECT_EQ(t.evaluate(0, 0, 0, 2, 0), 3);
  // without scaleToZero, idleness never removes the last replica
  PoolAutoscaler u = scaler(policy(0, 4));
  EXPECT_EQ(u.evaluate(10000, 1, 1, 0, kNever), 1);
}

TEST(Autoscaler, RefusesBadPoliciesNamingTheField) {
  AutoscalePolicy p = policy(3, 2);
  auto a = PoolAutoscaler::create(p, 15, "pools[1].autoscaling");
  ASSERT_FALSE(a.has_value());
  EXPECT_NE(a.error().find("'pools[1].autoscaling.maxReplicas' (2)"), std::string::npos) << a.error();
  p = policy(1, 2);
  p.target = 0;
  auto b = PoolAutoscaler::create(p, 15, "pools[0].autoscaling");
  ASSERT_FALSE(b.has_value());
  EXPECT_NE(b.error().find("target"), std::string::npos);
  auto c = PoolAutoscaler::create(policy(1, 2), 0, "x");
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().find("evaluationIntervalSeconds"), std::string::npos);
}

TEST(Autoscaler, SustainableUtilizationIsWhereTheTtftTailMeetsTheSlo) {
  // GIVEN M/M/2 (cv² 1) at utilization 0.5: an arrival waits with probability Erlang C = 1/3, and
  // longer than t with 1/3 x exp(-(2 - 1) t / service); with a 1 s service that is 1% at t = ln(100/3)
  const double t = std::log(100.0 / 3);
  // WHEN the SLO leaves exactly that wait (SLO = wait + service + fixed)
  // THEN 0.5 is the highest utilization that keeps 99% within it
  EXPECT_NEAR(prefill_sustainable_utilization(2, 1.0, 1.0, 0.25, t + 1.25), 0.5, 1e-6);
  // AND one replica: waits with probability rho, tail rate (1 - rho) / service
  const double one = prefill_sustainable_utilization(1, 0.09, 0.25, 0.008, 2);
  EXPECT_NEAR(one * std::exp(-(1 - one) * (2 - 0.098) / (0.09 * 0.625)), 0.01, 1e-6);
  // AND more replicas sustain more of their capacity, prompts of steadier length more, and a loose
  // SLO more than a tight one
  double last = 0;
  for (int c : {1, 2, 4, 8, 16}) {
    const double u = prefill_sustainable_utilization(c, 0.09, 0.25, 0.008, 2);
    EXPECT_GT(u, last) << c;
    EXPECT_LT(u, 1) << c;
    last = u;
  }
  EXPECT_NEAR(one, 0.87, 0.01);
  EXPECT_GT(one, prefill_sustainable_utilization(1, 0.09, 1.0, 0.008, 2));
  EXPECT_GT(one, prefill_sustainable_utilization(1, 0.09, 0.25, 0.008, 1));
  // AND an SLO that even an idle pool misses gives the floor, not 0 (the pressure stays finite)
  EXPECT_DOUBLE_EQ(prefill_sustainable_utilization(4, 1.0, 0.25, 0.5, 1.2), 0.05);
}

// --- the simulator applying the rule ---

PoolSpec scaled_pool(WorkerRole role, int replicas, int min, int max) {
  PoolSpec p = test::sim_pool(role, replicas, 3000);
  p.name = role == WorkerRole::prefill ? "prefill" : role == WorkerRole::decode ? "decode" : "workers";
  p.autoscaling.enabled = true;
  p.autoscaling.policy.target = 0.8;  // as the rule's own tests (the default is 0.95)
  p.autoscaling.policy.min_replicas = min;
  p.autoscaling.policy.max_replicas = max;
  return p;
}

TEST(SimulatorAutoscaling, ProvisioningTakesNodeImageAndWeightLoadTime) {
  // GIVEN a pool scaled to zero whose replicas take 100 s (node) + 20 s (image)
  //   + 40 GB / 4 GB/s (download) + 40 GB / 8 GB/s (NVMe) + 30 s (engine) = 165 s to provision
  SimulationConfig c;
  PoolSpec p = scaled_pool(WorkerRole::aggregated, 0, 0, 4);
  p.autoscaling.policy.scale_to_zero = true;
  ProvisioningSpec& v = p.autoscaling.provisioning;
  v.node_start_seconds = 100;
  v.image_pull_seconds = 20;
  v.checkpoint_bytes = 40e9;
  v.network_bytes_per_second = 4e9;
  v.nvme_bytes_per_second = 8e9;
  v.engine_start_seconds = 30;
  c.pools.push_back(p);
  c.autoscale.report = true;
  WorkloadSpec w;
  w.max_requests = 1;
  w.input = {LengthDist::Kind::fixed, 500, 0, 1, 1 << 20};
  w.output = {LengthDist::Kind::fixed, 10, 0, 1, 1 << 20};
  // WHEN one request arrives at t=0 (the rule first runs after one 15 s interval)
  const SimulationResult r = test::run(c, w);
  // THEN it waited for a replica: its TTFT is the first evaluation plus the provisioning time plus its own prefill
  ASSERT_TRUE(r.has_scaling);
  const PoolScaleReport& pr = r.scaling.pools.at(0);
  EXPECT_DOUBLE_EQ(pr.provision_seconds, 165);
  EXPECT_EQ(r.summary.completed, 1);
  EXPECT_GE(r.summary.ttft.max, 15 + 165);
  EXPECT_LT(r.summary.ttft.max, 15 + 166);
  // pressure 1 + 1 held request over target 0.8: ceil(2.5) = 3 replicas, billed from the decision
  EXPECT_EQ(pr.scale_ups, 3);
  EXPECT_GE(pr.gpu_seconds, 3 * 165 * pr.gpus_per_replica);
  EXPECT_EQ(r.scaling.held_for_capacity, 1);
}

TEST(SimulatorAutoscaling, ScaleDownDrainsAndLosesNoRequest) {
  // GIVEN 4 prefill + 4 decode replicas that scale down after 30 s of lower recommendations
  SimulationConfig c;
  for (WorkerRole role : {WorkerRole::prefill, WorkerRole::decode}) {
    PoolSpec p = scaled_pool(role, 4, 1, 4);
    p.autoscaling.policy.scale_down_stabilization_seconds = 30;
    c.pools.push_back(p);
  }
  c.router.policy = "round-robin";
  c.router.decider.min_uncached_tokens = 0;
  c.autoscale.report = true;
  c.autoscale.evaluation_interval_seconds = 5;
  c.autoscale.window_seconds = 30;
  c.check_invariants = true;
  WorkloadSpec w;
  w.max_requests = 0;
  w.arrival.kind = ArrivalProcess::Kind::poisson;
  w.arrival.stages = {{30, 60}, {2, 120}};  // a busy minute, then two quiet ones
  w.input = {LengthDist::Kind::uniform, 0, 0, 200, 3000};
  w.output = {LengthDist::Kind::uniform, 0, 0, 20, 400};
  // WHEN the load falls while requests are in flight
  const SimulationResult r = test::run(c, w);
  // THEN replicas were removed, every request finished, nothing leaked or was lost
  ASSERT_TRUE(r.has_scaling);
  std::int64_t downs = 0, lost = 0;
  for (const PoolScaleReport& p : r.scaling.pools) {
    downs += p.scale_downs;
    lost += p.lost_on_scale_down;
  }
  EXPECT_GT(downs, 0);
  EXPECT_EQ(lost, 0);
  EXPECT_GT(r.summary.submitted, 1000);
  EXPECT_EQ(r.summary.completed, r.summary.submitted);
  EXPECT_EQ(r.summary.rejected, 0);
  EXPECT_EQ(r.unfinished, 0);
  EXPECT_EQ(r.blocks_in_use_at_end, 0);
  // and the quiet windows ran on fewer replicas than the busy ones (4 + 4)
  const std::size_t pools = r.scaling.pools.size();
  ASSERT_GE(r.scaling.windows.size(), 6u);
  const double quiet = r.scaling.window_replicas[5 * pools] + r.scaling.window_replicas[5 * pools + 1];
  EXPECT_LT(quiet, 8);
}

TEST(SimulatorAutoscaling, GpuHoursOfAStaticDeploymentAreReplicasTimesGpusTimesHorizon) {
  SimulationConfig c;
  PoolSpec p = test::sim_pool(WorkerRole::aggregated, 3, 3000);
  p.cost.tensor_parallel = 2;
  p.cost.interconnect_bytes_per_second = 4.5e11;
  c.pools.push_back(p);
  c.autoscale.report = true;
  c.autoscale.horizon_seconds = 1000;
  WorkloadSpec w;
  w.max_requests = 50;
  w.arrival.rate_per_second = 5;
  const SimulationResult r = test::run(c, w);
  ASSERT_TRUE(r.has_scaling);
  EXPECT_DOUBLE_EQ(r.scaling.pools.at(0).gpu_seconds, 3 * 2 * 1000.0);
  EXPECT_EQ(r.scaling.pools.at(0).scale_ups, 0);
}

// bench/autoscaling's deployment: Llama 70B FP8 on TP4 H100 replicas, kv-aware routing, SLO TTFT 2 s
// and TPOT 50 ms, with the given pools, workload and autoscaling blocks.
std::string llama70b_tp4(const std::string& pools, const std::string& workload, const std::string& autoscaling) {
  return R"({
    "model": {"weightBytesPerRank": 17650000000, "kvBytesPerToken": 163840, "activeParameters": 70600000000,
              "layers": 80, "hiddenSize": 8192, "attentionWidth": 8192},
    "hardware": {"peakFlopsPerSecond": 1979000000000000, "hbmBytesPerSecond": 3350000000000,
                 "interconnectBytesPerSecond": 450000000000, "fabricBytesPerSecond": 200000000000},
    "parallel": {"tensorParallel": 4},
    "efficiency": {"compute": 0.6, "memory": 0.85, "layerOverheadSeconds": 4e-05, "stepOverheadSeconds": 0.0005,
                   "requestOverheadSeconds": 0.008},
    "policy": {"name": "kv-aware"},
    "pools": )" +
         pools + R"(,
    "workload": )" +
         workload + R"(,
    "slo": {"ttftSeconds": 2, "tpotSeconds": 0.05},
    "autoscaling": )" +
         autoscaling + R"(,
    "seed": 7
  })";
}

// One TP4 pool of that deployment (KV for 1.39 M tokens, 256 sequences a replica).
std::string tp4_pool(const std::string& role, int replicas, const std::string& autoscaling = "") {
  return R"({"name": ")" + role + R"(", "role": ")" + role + R"(", "replicas": )" + std::to_string(replicas) +
         R"(, "tensorParallel": 4, "weightBytesPerRank": 17650000000, "kvTokensPerReplica": 1389226, "maxConcurrencyPerReplica": 256)" +
         (autoscaling.empty() ? "" : R"(, "autoscaling": )" + autoscaling) + "}";
}

TEST(SimulatorAutoscaling, ADecodePoolAtASteadyLoadDoesNotFlapBetweenOneAndTwoReplicas) {
  // GIVEN Llama 70B FP8 on TP4 H100 replicas (bench/autoscaling's deployment): 4 prefill, and decode
  // autoscaled from 2 (1..4, target 0.8, scale-down window 300 s), at a steady 32 requests/s of
  // ~2,000-token prompts and ~300-token answers: 2 decode replicas serve it at under half their
  // output tokens per second, 1 would be beyond the target (one replica's 256 sequences at 22 ms a
  // step make ~11,500 tokens/s; 32 x 300 = 9,600 is 0.84 of that, 0.93 against 0.9)
  auto doc = parse_json(llama70b_tp4(
      "[" + tp4_pool("prefill", 4) + ", " +
          tp4_pool("decode", 2, R"({"minReplicas": 1, "maxReplicas": 4, "target": 0.8})") + "]",
      R"({"kind": "single", "arrival": {"process": "poisson", "stages": [{"ratePerSecond": 32, "durationSeconds": 1200}]},
          "inputTokens": {"distribution": "lognormal", "mean": 2000, "stddev": 1000, "min": 64, "max": 12000},
          "outputTokens": {"distribution": "lognormal", "mean": 300, "stddev": 200, "min": 8, "max": 2000}})",
      R"({"horizonSeconds": 1200, "windowSeconds": 600, "evaluationIntervalSeconds": 15})"));
  ASSERT_TRUE(doc.has_value());
  auto setup = read_simulation(*doc);
  ASSERT_TRUE(setup.has_value()) << (setup ? "" : setup.error());
  // WHEN it runs for 20 minutes
  const SimulationResult r = test::run(setup->config, setup->workload);
  // THEN decode keeps its 2 replicas: the slot term measures the load as tokens per second, the same
  // on 1 replica as on 2 (a count of sequences shrank the pool to 1, found it fuller there, as its
  // batch steps slower and holds each request longer, and grew back: round trips every few minutes)
  ASSERT_TRUE(r.has_scaling);
  const PoolScaleReport& decode = r.scaling.pools.at(1);
  EXPECT_EQ(decode.scale_downs, 0);
  EXPECT_EQ(decode.scale_ups, 0);
  EXPECT_GT(r.summary.submitted, 30000);
  EXPECT_GT(r.summary.good, r.summary.completed * 99 / 100);
}

TEST(SimulatorAutoscaling, ALongPromptSurgeGrowsPrefillAndLeavesDecodeAtItsKvNeed) {
  // GIVEN the 70B deployment autoscaled from 3 prefill + 1 decode replicas (1..16 each, 7.3 minutes
  // to provision), at 20 requests/s whose prompts go from ~2,000 to ~8,000 tokens at 10 minutes: 4x
  // the prefill work (160 k tokens/s, 7.2 replicas' worth), the same answers (~300 tokens), and 4x
  // the KV per decode sequence (about 2 decode replicas' KV)
  std::string trace;
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> gap(20);
  const double sigma_in = std::sqrt(std::log(1.25)), sigma_out = std::sqrt(std::log(1.44));
  for (double t = gap(rng); t < 2400; t += gap(rng)) {
    const double mean = t < 600 ? 2000 : 8000;
    std::lognormal_distribution<double> in(std::log(mean) - sigma_in * sigma_in / 2, sigma_in);
    std::lognormal_distribution<double> answer(std::log(300.0) - sigma_out * sigma_out / 2, sigma_out);
    trace += R"({"timestamp_ms": )" + std::to_string(std::llround(t * 1000)) + R"(, "input_length": )" +
             std::to_string(std::clamp<long long>(std::llround(in(rng)), 64, 16000)) + R"(, "output_length": )" +
             std::to_string(std::clamp<long long>(std::llround(answer(rng)), 8, 2000)) + "}\n";
  }
  const std::string scaled = R"({"minReplicas": 1, "maxReplicas": 16, "provisioning": {"checkpointBytes": 70600000000,
      "networkBytesPerSecond": 6250000000, "nvmeBytesPerSecond": 16000000000}})";
  auto doc =
      parse_json(llama70b_tp4("[" + tp4_pool("prefill", 3, scaled) + ", " + tp4_pool("decode", 1, scaled) + "]",
                              R"({"kind": "trace", "trace": {"path": "surge.jsonl", "maxRecords": 100000}})",
                              R"({"horizonSeconds": 2400, "windowSeconds": 300, "evaluationIntervalSeconds": 15})"));
  ASSERT_TRUE(doc.has_value());
  auto setup = read_simulation(*doc);
  ASSERT_TRUE(setup.has_value()) << (setup ? "" : setup.error());
  // WHEN it runs; while prefill provisions, a backlog of long prompts builds, which the new replicas
  // then flush into decode faster than the load arrives
  auto sim = Simulator::create(setup->config);
  ASSERT_TRUE(sim.has_value()) << (sim ? "" : sim.error().message);
  auto workload = Workload::from_trace(trace, setup->trace);
  ASSERT_TRUE(workload.has_value()) << (workload ? "" : workload.error().message);
  auto run = sim->run(*workload);
  ASSERT_TRUE(run.has_value()) << (run ? "" : run.error().message);
  const SimulationResult& r = *run;
  // THEN prefill grows past the 8 replicas the surge needs at the target, and decode grows only to
  // the KV its 4x longer contexts need: the sequences waiting on it during the flush are a backlog,
  // not a rate, and do not count (counting them took decode to 16, its maximum)
  ASSERT_TRUE(r.has_scaling);
  const PoolScaleReport& prefill = r.scaling.pools.at(0);
  const PoolScaleReport& decode = r.scaling.pools.at(1);
  EXPECT_GE(prefill.peak_replicas, 8);
  EXPECT_LE(decode.peak_replicas, 3);
  EXPECT_EQ(decode.lost_on_scale_down, 0);
  EXPECT_GT(r.summary.submitted, 45000);
}

}  // namespace
}  // namespace disagg
