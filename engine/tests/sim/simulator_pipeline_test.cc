// Simulator with pipeline parallelism (pools[].pipelineParallel): a TP1 PP2 replica (DistServe's
// OPT-13B decode instance: two GPUs, half the layers each) serves one request at TP1's per-token
// latency, not half of it, and at saturation about twice the tokens of one stage pair running one
// micro-batch at a time; the configuration reads the stages, rescales the weights and sums the KV.
#include <gtest/gtest.h>

#include <string>

#include "disagg/planner.h"
#include "disagg/simulation_config.h"
#include "disagg/simulator.h"
#include "../core/test_fixtures.h"

namespace disagg {
namespace {

// One aggregated replica of the shared model: TP1 (16 GB of weights on one GPU), or TP1 PP2 (8 GB
// on each of two GPUs over NVLink), running at most `seqs` sequences.
PoolSpec replica(int stages, int seqs) {
  PoolSpec p = test::sim_pool(WorkerRole::aggregated, 1, 40'000);
  p.cost.pipeline_parallel = stages;
  p.cost.weight_bytes_per_rank = 16e9 / stages;
  p.cost.interconnect_bytes_per_second = 4.5e11;
  p.scheduler.max_num_seqs = seqs;
  return p;
}

SimulationResult run_closed_loop(const PoolSpec& pool, int clients, int requests) {
  SimulationConfig c;
  c.pools.push_back(pool);
  c.check_invariants = clients == 1;
  WorkloadSpec w;
  w.max_requests = requests;
  w.concurrency = clients;
  w.input = {LengthDist::Kind::fixed, 200, 0, 1, 1 << 20};
  w.output = {LengthDist::Kind::fixed, 200, 0, 1, 1 << 20};
  return test::run(c, w);
}

TEST(SimulatorPipeline, OneRequestSeesTp1sPerTokenLatencyNotHalf) {
  // GIVEN TP1 and TP1 PP2 replicas
  // WHEN one client at a time sends requests
  const SimulationResult tp1 = run_closed_loop(replica(1, 32), 1, 10);
  const SimulationResult pp2 = run_closed_loop(replica(2, 32), 1, 10);
  // THEN each token passes both stages one after the other: PP2's TPOT is TP1's (plus the sends)
  ASSERT_EQ(pp2.summary.completed, 10);
  const double ratio = pp2.summary.tpot.mean / tp1.summary.tpot.mean;
  EXPECT_GE(ratio, 1.0);
  EXPECT_LT(ratio, 1.02);
  EXPECT_EQ(pp2.blocks_in_use_at_end, 0);
}

TEST(SimulatorPipeline, SaturatedThroughputIsAboutTwiceOneMicroBatchAtATime) {
  // GIVEN a TP1 replica stepping at most 32 sequences, which is one stage pair running one
  //       micro-batch of 32 at a time, and a TP1 PP2 replica keeping two such micro-batches in flight
  // WHEN 256 clients keep both saturated
  const SimulationResult tp1 = run_closed_loop(replica(1, 32), 256, 1000);
  const SimulationResult pp2 = run_closed_loop(replica(2, 64), 256, 1000);
  ASSERT_EQ(tp1.summary.completed, 1000);
  ASSERT_EQ(pp2.summary.completed, 1000);
  // THEN PP2 moves about twice the output tokens per second, at about the same per-token latency
  const double throughput = pp2.summary.output_token_throughput / tp1.summary.output_token_throughput;
  EXPECT_GT(throughput, 1.8) << throughput;
  EXPECT_LT(throughput, 2.05) << throughput;
  const double tpot = pp2.summary.tpot.mean / tp1.summary.tpot.mean;
  EXPECT_GT(tpot, 0.95) << tpot;
  EXPECT_LT(tpot, 1.15) << tpot;
}

std::string doc_with(const std::string& pool, const std::string& parallel = "") {
  return R"({
    "model": {"weightBytesPerRank": 16e9, "kvBytesPerToken": 131072, "activeParameters": 8e9, "layers": 32, "hiddenSize": 4096},
    "hardware": {"peakFlopsPerSecond": 9.89e14, "hbmBytesPerSecond": 3.35e12, "fabricBytesPerSecond": 4e10,
                 "interconnectBytesPerSecond": 3e11},)" +
         parallel + R"(
    "pools": [{"name": "w", "role": "both", "replicas": 1)" +
         pool + R"(}],
    "workload": {"requests": 1}})";
}

Expected<SimulationSetup, std::string> read(const std::string& pool, const std::string& parallel = "") {
  auto doc = parse_json(doc_with(pool, parallel));
  EXPECT_TRUE(doc) << doc.error();
  return read_simulation(*doc);
}

TEST(SimulatorPipeline, ConfigurationReadsStagesRescalesWeightsAndSumsKvOverStages) {
  // GIVEN the top level's whole-model weights on one rank, and a pool of 2 stages with 40 GB of KV
  //       per rank
  auto one = read(R"(, "kvCacheBytesPerRank": 4e10)");
  auto two = read(R"(, "pipelineParallel": 2, "kvCacheBytesPerRank": 4e10)");
  ASSERT_TRUE(one) << one.error();
  ASSERT_TRUE(two) << two.error();
  const PoolSpec& a = one->config.pools[0];
  const PoolSpec& b = two->config.pools[0];
  // THEN the pool has 2 stages, each rank holding half the weights and half of each token's KV
  EXPECT_EQ(a.cost.pipeline_parallel, 1);
  EXPECT_EQ(b.cost.pipeline_parallel, 2);
  EXPECT_EQ(b.cost.weight_bytes_per_rank, 8e9);
  EXPECT_EQ(b.cost.kv_bytes_per_token_per_rank, 65536);
  // AND the replica's KV capacity is the sum over its stages: twice one stage's
  EXPECT_EQ(b.scheduler.num_blocks, 2 * a.scheduler.num_blocks);
  // AND parallel.pipelineParallel at the top level is read too (the pool's key wins over it)
  auto top = read(R"(, "kvTokensPerReplica": 100000)", R"("parallel": {"pipelineParallel": 4},)");
  ASSERT_TRUE(top) << top.error();
  EXPECT_EQ(top->config.pools[0].cost.pipeline_parallel, 4);
  auto both =
      read(R"(, "pipelineParallel": 2, "kvTokensPerReplica": 100000)", R"("parallel": {"pipelineParallel": 4},)");
  ASSERT_TRUE(both) << both.error();
  EXPECT_EQ(both->config.pools[0].cost.pipeline_parallel, 2);
  // the top level's 16 GB per rank are those of 4 stages: the pool's 2 stages hold twice as much
  EXPECT_EQ(both->config.pools[0].cost.weight_bytes_per_rank, 32e9);
  // AND a layout the cost model cannot price is refused with the cost model's message
  auto bad = read(R"(, "pipelineParallel": 33, "kvTokensPerReplica": 100000)");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("'parallel.pipelineParallel' (33) is out of range"), std::string::npos) << bad.error();
}

TEST(SimulatorPipeline, PlannerAndScalingReportCountEveryStagesAccelerators) {
  // GIVEN a planner option of TP2 PP2
  auto doc = parse_json(R"({
    "model": {"weightBytesPerRank": 4e9, "kvBytesPerToken": 131072, "activeParameters": 8e9, "layers": 32, "hiddenSize": 4096},
    "hardware": {"peakFlopsPerSecond": 9.89e14, "hbmBytesPerSecond": 3.35e12, "fabricBytesPerSecond": 4e10,
                 "interconnectBytesPerSecond": 3e11},
    "planner": {"maxAccelerators": 8, "tensorParallelOptions": [
      {"tensorParallel": 2, "pipelineParallel": 2, "weightBytesPerRank": 4e9, "kvTokensPerReplica": 100000}]},
    "workload": {"requests": 1}})");
  ASSERT_TRUE(doc) << doc.error();
  auto spec = read_planner(*doc);
  ASSERT_TRUE(spec) << spec.error();
  // THEN a replica takes 4 accelerators
  EXPECT_EQ(spec->options[0].accelerators_per_replica, 4);
  EXPECT_EQ(spec->options[0].pool.cost.pipeline_parallel, 2);
  // AND a scaling report bills 2 GPUs per TP1 PP2 replica
  SimulationConfig c;
  c.pools.push_back(replica(2, 32));
  c.autoscale.report = true;
  WorkloadSpec w;
  w.max_requests = 5;
  w.input = {LengthDist::Kind::fixed, 100, 0, 1, 1 << 20};
  w.output = {LengthDist::Kind::fixed, 10, 0, 1, 1 << 20};
  auto sim = Simulator::create(c);
  ASSERT_TRUE(sim) << sim.error().message;
  auto wl = Workload::create(w);
  ASSERT_TRUE(wl);
  auto r = sim->run(*wl);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->scaling.pools.size(), 1u);
  EXPECT_EQ(r->scaling.pools[0].gpus_per_replica, 2);
}

}  // namespace
}  // namespace disagg
