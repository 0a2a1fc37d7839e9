// Cost model, KV-transfer latency (hardware.kvTransferLatencySeconds): a transfer's fixed cost apart
// from fabricLatencySeconds, which the expert-parallel all-to-all and the pipeline's sends keep;
// absent, transfers take today's time to the digit. Read at the top level, per pool and per planner
// option, and charged by the simulator on the decode side's link. Published connector timings
// (Mooncake) are reproduced from the formula alone.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "disagg/cost_model.h"
#include "disagg/planner.h"
#include "disagg/simulation_config.h"
#include "disagg/simulator.h"
#include "test_fixtures.h"

namespace disagg {
namespace {

// The round-numbers model (test_fixtures.h): every expected value below can be checked by hand.
CostModelParams simple_params() {
  return test::round_params();
}

// An expert-parallel MoE over two scale-up domains of 8 (as cost_model_test.cc's
// ExpertParallelAllToAllByHand): its dispatch and combine cross nodes, so they pay fabricLatencySeconds.
CostModelParams expert_parallel_params() {
  CostModelParams p = simple_params();
  p.expert_weight_bytes_per_rank = 0.5e9;
  p.experts = 64;
  p.experts_per_token = 2;
  p.moe_layers = 10;
  p.routed_active_parameters = 0.5e9;
  p.data_parallel = 16;
  p.expert_parallel = 16;
  p.interconnect_bytes_per_second = 1e11;
  p.scale_out_bytes_per_second = 1e10;
  p.fabric_latency_seconds = 1e-5;
  p.interconnect_latency_seconds = 2e-6;
  p.expert_imbalance = 1;
  return p;
}

CostModel make(const CostModelParams& p) {
  auto m = CostModel::create(p);
  EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().message());
  return *m;
}

void expect_rel(double actual, double expected) {
  EXPECT_NEAR(actual, expected, std::abs(expected) * 1e-12) << "expected " << expected;
}

TEST(CostModelKvTransfer, WithoutTheFieldATransferPaysTheFabricLatencyAsBefore) {
  // GIVEN the simple model without kvTransferLatencySeconds (0, the default)
  const CostModel m = make(simple_params());
  // WHEN the KV of 1000 tokens (1e8 bytes) moves
  // THEN it takes fabricLatencySeconds + 1e8 / 5e9 = 1e-3 + 0.02 s, to the digit of the old formula
  EXPECT_EQ(m.transfer_seconds(1e8), 1e-3 + 1e8 / (1e10 * 0.5));
  expect_rel(m.kv_transfer_seconds(1000), 0.021);
  // AND the resolved parameter says which latency a transfer pays
  EXPECT_EQ(m.params().kv_transfer_latency_seconds, 1e-3);
  // AND nothing to move takes nothing
  EXPECT_EQ(m.transfer_seconds(0), 0);
}

TEST(CostModelKvTransfer, TheFieldReplacesTheFabricLatencyInATransfer) {
  // GIVEN a connector whose transfer costs 5 ms besides its bytes
  CostModelParams p = simple_params();
  p.kv_transfer_latency_seconds = 5e-3;
  const CostModel m = make(p);
  // WHEN the KV of 1000 tokens (1e8 bytes) moves
  // THEN it takes 5e-3 + 1e8 / 5e9 = 0.025 s: the fabric's 1 ms is not added on top
  expect_rel(m.kv_transfer_seconds(1000), 0.025);
  expect_rel(m.transfer_seconds(1e8) - make(simple_params()).transfer_seconds(1e8), 4e-3);
  // AND nothing to move still takes nothing
  EXPECT_EQ(m.kv_transfer_seconds(0), 0);
  // AND fabricLatencySeconds is kept as given
  EXPECT_EQ(m.params().fabric_latency_seconds, 1e-3);
}

TEST(CostModelKvTransfer, AllToAllAndPipelineSendsKeepTheFabricLatency) {
  // GIVEN EP 16 over two scale-up domains, with and without a 2 ms KV-transfer latency
  CostModelParams with = expert_parallel_params();
  with.kv_transfer_latency_seconds = 2e-3;
  const CostModel a = make(expert_parallel_params());
  const CostModel b = make(with);
  // WHEN 160 sequences decode
  const StepTime ta = a.decode_batch_time(160, 160 * 100);
  const StepTime tb = b.decode_batch_time(160, 160 * 100);
  // THEN the all-to-all pays fabricLatencySeconds (1e-5) per direction either way: 10 MoE layers x
  //      (1.2e-5 + 1.4e-5) = 2.6e-4 s (as in ExpertParallelAllToAllByHand), and the steps are equal
  expect_rel(ta.all_to_all_seconds, 2.6e-4);
  EXPECT_EQ(tb.all_to_all_seconds, ta.all_to_all_seconds);
  EXPECT_EQ(tb.communication_seconds, ta.communication_seconds);
  EXPECT_EQ(tb.total_seconds, ta.total_seconds);

  // GIVEN TP8 PP2 beyond a scale-up domain of 8 (the stages send over the fabric), with and without
  CostModelParams pp = simple_params();
  pp.tensor_parallel = 8;
  pp.pipeline_parallel = 2;
  pp.interconnect_bytes_per_second = 1e11;
  pp.scale_out_bytes_per_second = 1e10;
  CostModelParams pp_with = pp;
  pp_with.kv_transfer_latency_seconds = 2e-3;
  // WHEN a prefill chunk runs THEN its activation send is unchanged
  const StepTime pa = make(pp).prefill_chunk_time(512, 0);
  const StepTime pb = make(pp_with).prefill_chunk_time(512, 0);
  EXPECT_GT(pa.communication_seconds, 0);
  EXPECT_EQ(pb.communication_seconds, pa.communication_seconds);
  EXPECT_EQ(pb.total_seconds, pa.total_seconds);
}

// Published transfer times, connector end to end, and the parameters that describe the link:
// Mooncake's vLLM connector on H800 with 8x CX-7 RoCE (200 GB/s), Qwen3-8B TP8 (0.54 ms for 128
// tokens = 20 MB, 31.65 ms for 32K tokens = 4.5 GB: ~0.4 ms fixed, ~72% of line rate); SGLang with
// Mooncake on H20 (2.07 ms for 49 MB, 76.78 ms for 12.62 GB: ~1.8 ms fixed, ~84%).
struct PublishedTransfer {
  const char* name;
  double latency_seconds;
  double efficiency;
  double bytes;
  double measured_ms;
};

TEST(CostModelKvTransfer, ReproducesMooncakeConnectorTimingsWithinAQuarter) {
  const PublishedTransfer table[] = {
      {"Mooncake vLLM H800, 128 tokens", 0.4e-3, 0.72, 20e6, 0.54},
      {"Mooncake vLLM H800, 32K tokens", 0.4e-3, 0.72, 4.5e9, 31.65},
      {"SGLang Mooncake H20, small", 1.8e-3, 0.84, 49e6, 2.07},
      {"SGLang Mooncake H20, large", 1.8e-3, 0.84, 12.62e9, 76.78},
  };
  for (const PublishedTransfer& t : table) {
    // GIVEN a 200 GB/s fabric at the connector's efficiency and its fixed cost per transfer
    CostModelParams p = simple_params();
    p.fabric_bytes_per_second = 200e9;
    p.fabric_efficiency = t.efficiency;
    p.kv_transfer_latency_seconds = t.latency_seconds;
    const CostModel m = make(p);
    // WHEN the published payload moves
    const double predicted_ms = m.transfer_seconds(t.bytes) * 1e3;
    // THEN the prediction is within 25% of the measurement
    EXPECT_NEAR(predicted_ms, t.measured_ms, 0.25 * t.measured_ms) << t.name << ": " << predicted_ms << " ms";
  }
  // AND without the field (30 us, one EP message) the small transfer misses by more than a quarter:
  //     0.03 + 20e6 / 1.44e11 s = 0.169 ms against 0.54 ms, why the field exists
  CostModelParams p = simple_params();
  p.fabric_bytes_per_second = 200e9;
  p.fabric_efficiency = 0.72;
  p.fabric_latency_seconds = 3e-5;
  const double fabric_only_ms = make(p).transfer_seconds(20e6) * 1e3;
  EXPECT_GT(std::abs(fabric_only_ms - 0.54), 0.25 * 0.54) << fabric_only_ms << " ms";
}

TEST(CostModelKvTransfer, ANegativeLatencyIsRefusedByName) {
  // GIVEN kvTransferLatencySeconds -1 us
  CostModelParams p = simple_params();
  p.kv_transfer_latency_seconds = -1e-6;
  // WHEN the model is created THEN it is refused with the field's JSON path and the fix
  auto m = CostModel::create(p);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().code, CostModelErrc::negative);
  EXPECT_EQ(m.error().field, "hardware.kvTransferLatencySeconds");
  EXPECT_NE(m.error().message().find("; pass the fixed cost of one KV transfer"), std::string::npos)
      << m.error().message();
}

// A document with `top` as extra top-level hardware keys, a prefill pool, and a decode pool with
// `decode_hardware` as its own hardware object (empty: none).
std::string pd_doc(const std::string& top, const std::string& decode_hardware) {
  return R"({
    "model": {"weightBytesPerRank": 16e9, "kvBytesPerToken": 131072, "activeParameters": 8e9, "layers": 32, "hiddenSize": 4096},
    "hardware": {"peakFlopsPerSecond": 9.89e14, "hbmBytesPerSecond": 3.35e12, "fabricBytesPerSecond": 4e10,
                 "interconnectBytesPerSecond": 4.5e11)" +
         top + R"(},
    "pools": [{"name": "p", "role": "prefill", "replicas": 1, "kvTokensPerReplica": 200000},
              {"name": "d", "role": "decode", "replicas": 1, "kvTokensPerReplica": 200000)" +
         (decode_hardware.empty() ? "" : ", \"hardware\": " + decode_hardware) + R"(}],
    "workload": {"requests": 1},
    "planner": {"maxAccelerators": 4, "tensorParallelOptions": [
      {"tensorParallel": 1, "kvTokensPerReplica": 200000, "hardware": {"kvTransferLatencySeconds": 2e-3}},
      {"tensorParallel": 2, "kvTokensPerReplica": 400000}]}})";
}

SimulationSetup read_doc(const std::string& text) {
  auto doc = parse_json(text);
  EXPECT_TRUE(doc) << doc.error();
  auto setup = read_simulation(*doc);
  EXPECT_TRUE(setup) << setup.error();
  return *setup;
}

TEST(CostModelKvTransfer, ReadAtTheTopLevelPerPoolAndPerPlannerOption) {
  // GIVEN no kvTransferLatencySeconds anywhere
  const SimulationSetup none = read_doc(pd_doc("", ""));
  // THEN both pools pay the default fabricLatencySeconds (3e-5)
  EXPECT_EQ(none.config.pools[0].cost.kv_transfer_latency_seconds, 3e-5);
  EXPECT_EQ(none.config.pools[1].cost.kv_transfer_latency_seconds, 3e-5);

  // GIVEN 0.4 ms at the top level and 1.8 ms in the decode pool's own hardware object
  const std::string text = pd_doc(R"(, "kvTransferLatencySeconds": 4e-4)", R"({"kvTransferLatencySeconds": 1.8e-3})");
  const SimulationSetup setup = read_doc(text);
  // THEN the prefill pool inherits the top level's, the decode pool keeps its own, and neither
  //      changes fabricLatencySeconds
  EXPECT_EQ(setup.config.pools[0].cost.kv_transfer_latency_seconds, 4e-4);
  EXPECT_EQ(setup.config.pools[1].cost.kv_transfer_latency_seconds, 1.8e-3);
  EXPECT_EQ(setup.config.pools[1].cost.fabric_latency_seconds, 3e-5);

  // WHEN the planner's options are read
  auto doc = parse_json(text);
  ASSERT_TRUE(doc) << doc.error();
  auto spec = read_planner(*doc);
  ASSERT_TRUE(spec) << spec.error();
  // THEN an option's own hardware object sets it, and an option without one inherits the top level's
  ASSERT_EQ(spec->options.size(), 2u);
  EXPECT_EQ(spec->options[0].pool.cost.kv_transfer_latency_seconds, 2e-3);
  EXPECT_EQ(spec->options[1].pool.cost.kv_transfer_latency_seconds, 4e-4);

  // AND a negative value in a pool is refused, naming the pool and the field
  auto bad = parse_json(pd_doc("", R"({"kvTransferLatencySeconds": -1})"));
  ASSERT_TRUE(bad) << bad.error();
  auto refused = read_simulation(*bad);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("'pools[1]' (d): 'hardware.kvTransferLatencySeconds' (-1) must be >= 0"),
            std::string::npos)
      << refused.error();
}

// One prefill and one decode replica of the shared model; the first token is seen when the KV lands
// (DistServe, SGLang), so the time to it is prefill + transfer.
SimulationConfig pd(double prefill_kv_latency, double decode_kv_latency) {
  SimulationConfig c;
  c.pools.push_back(test::sim_pool(WorkerRole::prefill, 1, 4000));
  c.pools.push_back(test::sim_pool(WorkerRole::decode, 1, 4000));
  c.pools[0].cost.kv_transfer_latency_seconds = prefill_kv_latency;
  c.pools[1].cost.kv_transfer_latency_seconds = decode_kv_latency;
  c.pools[1].first_token_at = FirstTokenAt::transfer;
  c.router.policy = "round-robin";
  c.router.decider.min_uncached_tokens = 16;
  c.check_invariants = true;
  return c;
}

TEST(CostModelKvTransfer, TheSimulatorChargesTheDecodePoolsLatencyPerTransfer) {
  // GIVEN one request of 1000 fresh prompt tokens and 4 output tokens, disaggregated
  WorkloadSpec w;
  w.max_requests = 1;
  w.arrival.rate_per_second = 1;
  w.input = {LengthDist::Kind::fixed, 1000, 0, 1, 1 << 20};
  w.output = {LengthDist::Kind::fixed, 4, 0, 1, 1 << 20};
  const double fabric = test::sim_pool(WorkerRole::decode, 1, 1).cost.fabric_latency_seconds;
  // WHEN it runs with the fabric latency, with 2 ms on the decode pool, and with 2 ms on the prefill pool
  const SimulationResult base = test::run(pd(0, 0), w);
  const SimulationResult decode = test::run(pd(0, 2e-3), w);
  const SimulationResult prefill = test::run(pd(2e-3, 0), w);
  ASSERT_EQ(base.summary.disaggregated, 1);
  // THEN the decode pool's latency replaces the fabric's in the one transfer: TTFT and E2E move by
  //      2e-3 - fabricLatencySeconds, the bytes moved do not
  EXPECT_NEAR(decode.summary.ttft.mean - base.summary.ttft.mean, 2e-3 - fabric, 1e-9);
  EXPECT_NEAR(decode.summary.e2e.mean - base.summary.e2e.mean, 2e-3 - fabric, 1e-9);
  EXPECT_EQ(decode.summary.kv_transfer_bytes, base.summary.kv_transfer_bytes);
  // AND the prefill pool's own value is not what a pull into the decode side pays
  EXPECT_EQ(prefill.summary.ttft.mean, base.summary.ttft.mean);
}

TEST(CostModelKvTransfer, ReplicatedKvMovesEveryRanksCopy) {
  // GIVEN the simple model at TP4 whose ranks each hold half the model's KV (2 KV heads over 4 ranks:
  //       every head on two ranks), and the same model with its KV split evenly
  CostModelParams split = simple_params();
  split.tensor_parallel = 4;
  split.interconnect_bytes_per_second = 1e11;
  CostModelParams copies = split;
  copies.kv_bytes_per_token_per_rank = split.kv_bytes_per_token / 2;
  // WHEN 1000 tokens move
  // THEN the split cache moves the model's KV once, 1e8 bytes; the replicated one each rank's half,
  //      4 x 5e4 x 1000 = 2e8 bytes, and takes that much longer on the wire
  EXPECT_EQ(make(split).kv_transfer_bytes(1000), 1e8);
  EXPECT_EQ(make(copies).kv_transfer_bytes(1000), 2e8);
  expect_rel(make(copies).kv_transfer_seconds(1000) - make(split).kv_transfer_seconds(1000), 1e8 / (1e10 * 0.5));
  // AND the rule is the free function the simulator's tier sizing reads
  EXPECT_EQ(kv_replica_bytes_per_token(copies), 2e5);
  EXPECT_EQ(kv_replica_bytes_per_token(split), 1e5);
}

TEST(CostModelKvTransfer, TheSimulatorMovesTheDecodeRanksCopies) {
  // GIVEN one disaggregated request of 1000 prompt tokens, and the decode pool at TP2 holding the
  //       whole model's KV on each rank (one KV head, replicated)
  WorkloadSpec w;
  w.max_requests = 1;
  w.arrival.rate_per_second = 1;
  w.input = {LengthDist::Kind::fixed, 1000, 0, 1, 1 << 20};
  w.output = {LengthDist::Kind::fixed, 4, 0, 1, 1 << 20};
  SimulationConfig replicated = pd(0, 0);
  replicated.pools[1].cost.tensor_parallel = 2;
  replicated.pools[1].cost.interconnect_bytes_per_second = 1e11;
  replicated.pools[1].cost.kv_bytes_per_token_per_rank = replicated.pools[1].cost.kv_bytes_per_token;
  // WHEN it runs
  const SimulationResult base = test::run(pd(0, 0), w);
  const SimulationResult r = test::run(replicated, w);
  ASSERT_EQ(r.summary.disaggregated, 1);
  // THEN twice the bytes move (each decode rank reads a whole copy; the first token's KV is computed
  //      on the decode side under first_token_at transfer or not, the same in both runs)
  EXPECT_EQ(r.summary.kv_transfer_bytes, 2 * base.summary.kv_transfer_bytes);
}

}  // namespace
}  // namespace disagg
