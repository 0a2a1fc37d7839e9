// Simulator: conservation (every request finishes once, no block leaks, token counts add up),
// determinism, and the P/D path (transfers happen and TTFT is measured at the decode worker).
#include "disagg/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "disagg/metrics.h"
#include "../core/test_fixtures.h"

namespace disagg {
namespace {

WorkloadSpec chat(std::uint64_t seed, int requests, double rate) {
  WorkloadSpec w;
  w.kind = WorkloadKind::chat;
  w.seed = seed;
  w.max_requests = requests;
  w.arrival.rate_per_second = rate;
  w.input = {LengthDist::Kind::lognormal, 600, 300, 16, 4000};
  w.output = {LengthDist::Kind::uniform, 0, 0, 1, 200};
  w.tenants = 4;
  w.system_prompt_tokens = 256;
  return w;
}

TEST(Simulator, AggregatedRunConservesRequestsBlocksAndTokens) {
  // GIVEN 3 aggregated workers with a KV pool small enough to preempt, and checked invariants
  SimulationConfig c;
  c.pools.push_back(test::sim_pool(WorkerRole::aggregated, 3, 600));
  c.router.policy = "llm-d";
  c.check_invariants = true;
  // WHEN 400 chat requests run
  const SimulationResult r = test::run(c, chat(5, 400, 20));
  // THEN each finished once, nothing leaked, and every sampled token belongs to a finished request
  EXPECT_EQ(r.summary.completed, 400);
  EXPECT_EQ(r.summary.submitted, 400);
  EXPECT_EQ(r.unfinished, 0);
  EXPECT_EQ(r.blocks_in_use_at_end, 0);
  auto sim = Simulator::create(c);
  std::int64_t tokens = 0;
  // The summary's output rate x duration is the output token count.
  tokens = static_cast<std::int64_t>(std::llround(r.summary.output_token_throughput * r.summary.duration_seconds));
  EXPECT_EQ(r.tokens_sampled, tokens);
  EXPECT_GT(r.summary.prefix_hit_rate[0], 0.2);  // system prompts and chat history hit
  EXPECT_GT(r.summary.ttft.p50, 0);
  EXPECT_LE(r.summary.ttft.p50, r.summary.ttft.p99);
}

TEST(Simulator, SameSeedSameSummaryOtherSeedOther) {
  SimulationConfig c;
  c.pools.push_back(test::sim_pool(WorkerRole::aggregated, 2, 4000));
  c.router.policy = "sglang";
  const std::string a = to_json(test::run(c, chat(11, 300, 10)).summary);
  const std::string b = to_json(test::run(c, chat(11, 300, 10)).summary);
  const std::string d = to_json(test::run(c, chat(12, 300, 10)).summary);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, d);
}

TEST(Simulator, DisaggregatedRunTransfersKvAndFinishesEverything) {
  // GIVEN 2 prefill + 2 decode workers and a threshold of 800 uncached tokens
  SimulationConfig c;
  c.pools.push_back(test::sim_pool(WorkerRole::prefill, 2, 2000));
  c.pools.push_back(test::sim_pool(WorkerRole::decode, 2, 1500));
  c.router.policy = "round-robin";
  c.router.decider.min_uncached_tokens = 800;
  c.check_invariants = true;
  // WHEN 300 requests run
  const SimulationResult r = test::run(c, chat(3, 300, 15));
  // THEN long prompts went through prefill, KV moved, and nothing leaked on either side
  EXPECT_EQ(r.summary.completed, 300);
  EXPECT_GT(r.summary.disaggregated, 0);
  EXPECT_LT(r.summary.disaggregated, 300);  // shorter prompts stay whole
  EXPECT_GT(r.summary.kv_transfer_bytes, 0);
  EXPECT_EQ(r.blocks_in_use_at_end, 0);
  EXPECT_EQ(r.summary.worker_utilization.size(), 4u);
  EXPECT_GT(r.summary.worker_utilization[0], 0);
}

TEST(Simulator, HorizonStopsTheClockAndCountsUnfinished) {
  SimulationConfig c;
  c.pools.push_back(test::sim_pool(WorkerRole::aggregated, 1, 4000));
  c.max_seconds = 5;
  const SimulationResult r = test::run(c, chat(1, 400, 50));
  EXPECT_GT(r.unfinished, 0);
  EXPECT_EQ(r.summary.submitted, r.summary.completed + r.unfinished);
  EXPECT_LE(r.end_seconds, 5);
}

WorkloadSpec one_shot(std::uint64_t seed, int requests, double rate) {
  WorkloadSpec w;
  w.seed = seed;
  w.max_requests = requests;
  w.arrival.rate_per_second = rate;
  w.input = {LengthDist::Kind::lognormal, 500, 200, 16, 3000};
  w.output = {LengthDist::Kind::uniform, 0, 0, 1, 300};
  w.tenants = 5;
  w.system_prompt_tokens = 200;
  return w;
}

TEST(Simulator, UniqueBlocksKeptOutOfTheIndexChangeNoResult) {
  // GIVEN an llm-d router over 4 small workers (so blocks get evicted and requests preempted)
  for (const char* policy : {"llm-d", "disagg", "dynamo"}) {
    SimulationConfig c;
    c.pools.push_back(test::sim_pool(WorkerRole::aggregated, 4, 600));
    c.router.policy = policy;
    // WHEN the same one-shot traffic runs with and without announcing request-unique blocks
    const SimulationResult quiet = test::run(c, one_shot(9, 400, 20));
    c.router.announce_unique_blocks = true;
    const SimulationResult loud = test::run(c, one_shot(9, 400, 20));
    // THEN every number of the summary is the same (only index work differs)
    EXPECT_EQ(to_json(quiet.summary), to_json(loud.summary)) << policy;
    EXPECT_GT(quiet.summary.prefix_hit_rate[0], 0) << policy;
  }
}

TEST(Simulator, ClosedLoopKeepsConcurrencyRequestsInFlight) {
  // GIVEN a closed loop of 8 clients and 200 requests on one worker
  SimulationConfig c;
  c.pools.push_back(test::sim_pool(WorkerRole::aggregated, 1, 4000));
  c.check_invariants = true;
  WorkloadSpec w = one_shot(4, 200, 1);
  w.concurrency = 8;
  // WHEN it runs
  const SimulationResult r = test::run(c, w);
  // THEN every request finished, and the mean number in flight (Little's law: throughput x mean
  // E2E) is the concurrency: a client sends its next request the moment the previous one ends
  EXPECT_EQ(r.summary.completed, 200);
  EXPECT_EQ(r.blocks_in_use_at_end, 0);
  const double in_flight = r.summary.request_throughput * r.summary.e2e.mean;
  EXPECT_NEAR(in_flight, 8.0, 0.6);
}

// Bursts of 8 requests every second, 1-16k prompt tokens, all starting with one shared 512-token
// block (as Mooncake's conversation trace does), in Mooncake's JSONL trace format.
std::string bursty_trace() {
  std::string out;
  std::uint64_t x = 12345;
  std::int64_t next_id = 1;
  for (int burst = 0; burst < 40; ++burst) {
    for (int k = 0; k < 8; ++k) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      const std::int64_t input = 1024 + static_cast<std::int64_t>((x >> 33) % 15360);
      out += "{\"timestamp\": " + std::to_string(burst * 1000) + ", \"input_length\": " + std::to_string(input) +
             ", \"output_length\": 64, \"hash_ids\": [0";
      for (std::int64_t b = 1; b < (input + 511) / 512; ++b) out += ", " + std::to_string(next_id++);
      out += "]}\n";
    }
  }
  return out;
}

TEST(Simulator, EveryPolicyKeepsEveryPrefillAndDecodeReplicaBusyUnderPd) {
  // Found replaying a Mooncake conversation trace on 4 prefill + 2 decode replicas: round robin
  // sent every request to one prefill replica (one rotation for both roles), and sglang busied one
  // prefill replica 0.68 against 0.32 (its "smallest tree" read the event-fed index, which grows
  // only once a prefill ran, so a burst went to one replica; SGLang grows its tree when it routes).
  for (const std::string_view policy : routing_policy_names()) {
    SCOPED_TRACE(std::string(policy));
    // GIVEN 4 prefill and 2 decode replicas
    SimulationConfig c;
    c.pools.push_back(test::sim_pool(WorkerRole::prefill, 4, 20'000));
    c.pools.push_back(test::sim_pool(WorkerRole::decode, 2, 20'000));
    for (PoolSpec& p : c.pools) p.scheduler.max_num_batched_tokens = 8192;
    c.router.policy = std::string(policy);
    c.router.decider.min_uncached_tokens = 256;
    // WHEN the bursts arrive
    auto sim = Simulator::create(c);
    ASSERT_TRUE(sim.has_value()) << sim.error().message;
    auto w = Workload::from_trace(bursty_trace(), TraceSpec{});
    ASSERT_TRUE(w.has_value()) << w.error().message;
    auto r = sim->run(*w);
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->summary.completed, 320);
    // THEN no replica of a role is busy less than half as much as the busiest of its role
    const std::vector<double>& u = r->summary.worker_utilization;
    ASSERT_EQ(u.size(), 6u);
    const double prefill_max = *std::max_element(u.begin(), u.begin() + 4);
    const double prefill_min = *std::min_element(u.begin(), u.begin() + 4);
    EXPECT_GE(prefill_min, 0.5 * prefill_max) << "prefill " << u[0] << " " << u[1] << " " << u[2] << " " << u[3];
    EXPECT_GE(std::min(u[4], u[5]), 0.5 * std::max(u[4], u[5])) << "decode " << u[4] << " " << u[5];
  }
}

TEST(Simulator, RefusesMixedOrIncompleteDeployments) {
  SimulationConfig c;
  c.pools.push_back(test::sim_pool(WorkerRole::aggregated, 1, 100));
  c.pools.push_back(test::sim_pool(WorkerRole::decode, 1, 100));
  auto a = Simulator::create(c);
  ASSERT_FALSE(a.has_value());
  EXPECT_NE(a.error().message.find("mixes"), std::string::npos);
  c.pools.erase(c.pools.begin());
  EXPECT_FALSE(Simulator::create(c).has_value());
  c.pools[0] = test::sim_pool(WorkerRole::aggregated, 1, 100);
  c.router.policy = "nope";
  EXPECT_FALSE(Simulator::create(c).has_value());
}

}  // namespace
}  // namespace disagg

namespace disagg {
namespace {

// The API server's time per request (efficiency.requestOverheadSeconds): an idle deployment answers
// each request exactly that much later; under P/D the request passes two API servers.
TEST(SimulatorRequestOverhead, EveryLatencyGrowsByTheApiServersTime) {
  for (const bool pd : {false, true}) {
    auto config = [pd](double api) {
      SimulationConfig c;
      if (pd) {
        c.pools.push_back(test::sim_pool(WorkerRole::prefill, 1, 4000));
        c.pools.push_back(test::sim_pool(WorkerRole::decode, 1, 4000));
        c.router.decider.min_uncached_tokens = 0;  // every request disaggregated
      } else {
        c.pools.push_back(test::sim_pool(WorkerRole::aggregated, 1, 4000));
      }
      c.router.policy = "round-robin";
      for (PoolSpec& p : c.pools) p.cost.request_overhead_seconds = api;
      return c;
    };
    // GIVEN requests 10 s apart (nothing queues) WHEN run without and with 25 ms per API server
    WorkloadSpec w = one_shot(4, 20, 0.1);
    w.arrival.kind = ArrivalProcess::Kind::constant;
    const SimulationResult base = test::run(config(0), w);
    const SimulationResult slow = test::run(config(0.025), w);
    // THEN TTFT and E2E grow by 25 ms per API server on the way, the decode steps not at all
    const double hops = pd ? 2 : 1;
    ASSERT_EQ(slow.summary.completed, 20);
    EXPECT_NEAR(slow.summary.ttft.mean - base.summary.ttft.mean, 0.025 * hops, 1e-9) << (pd ? "P/D" : "aggregated");
    EXPECT_NEAR(slow.summary.e2e.mean - base.summary.e2e.mean, 0.025 * hops, 1e-9) << (pd ? "P/D" : "aggregated");
    EXPECT_NEAR(slow.summary.itl.mean, base.summary.itl.mean, 1e-12);
  }
}

}  // namespace
}  // namespace disagg

namespace disagg {
namespace {

TEST(SimulatorFreshText, SinglePromptsSimulateAlikeWithoutTheirFreshText) {
  // GIVEN one-shot prompts behind system prompts, on a router that indexes every block
  for (const char* policy : {"llm-d", "round-robin"}) {
    SimulationConfig c;
    c.pools.push_back(test::sim_pool(WorkerRole::aggregated, 2, 3000));
    c.router.policy = policy;
    WorkloadSpec w = one_shot(9, 300, 20);
    // WHEN simulated with the fresh text drawn and left 0 (what the planner and simulate do)
    const std::string drawn = to_json(test::run(c, w).summary);
    w.fresh_text = false;
    const std::string lean = to_json(test::run(c, w).summary);
    // THEN the summaries are the same to the digit
    EXPECT_EQ(drawn, lean) << policy;
  }
}

}  // namespace
}  // namespace disagg

namespace disagg {
namespace {

// The router's admission bound: max_inflight routed, max_queue waiting for queue_timeout, the rest 429.
TEST(SimulatorAdmission, ABurstBeyondTheRoutersBoundIsQueuedThenRefused) {
  struct Case {
    std::int64_t max_queue;
    double timeout;
    std::int64_t completed;
  };
  // 5 routed at once; 3 more wait. Long enough a wait lets them run; a short one refuses them.
  for (const Case k : {Case{3, 1000, 8}, Case{3, 0.01, 5}, Case{0, 1000, 5}}) {
    SimulationConfig c;
    c.pools.push_back(test::sim_pool(WorkerRole::aggregated, 1, 4000));
    c.router.max_inflight = 5;
    c.router.max_queue = k.max_queue;
    c.router.queue_timeout_seconds = k.timeout;
    // GIVEN 20 requests arriving within 20 ms, each decoding 50 tokens (far longer than that)
    WorkloadSpec w = one_shot(2, 20, 1000);
    w.arrival.kind = ArrivalProcess::Kind::constant;
    w.output = {LengthDist::Kind::fixed, 50, 0, 1, 100};
    // WHEN simulated
    const SimulationResult r = test::run(c, w);
    // THEN the router's bound decides who is served; every other request is refused, none is lost
    EXPECT_EQ(r.summary.submitted, 20);
    EXPECT_EQ(r.summary.completed, k.completed) << k.max_queue << " queued, timeout " << k.timeout;
    EXPECT_EQ(r.summary.rejected, 20 - k.completed);
    EXPECT_EQ(r.unfinished, 0);
  }
}

TEST(SimulatorAdmission, AQueuedRequestsLatencyCountsFromItsArrival) {
  // GIVEN one routed slot and two requests arriving together
  SimulationConfig c;
  c.pools.push_back(test::sim_pool(WorkerRole::aggregated, 1, 4000));
  c.router.max_inflight = 1;
  WorkloadSpec w = one_shot(3, 2, 1e6);
  w.arrival.kind = ArrivalProcess::Kind::constant;
  w.output = {LengthDist::Kind::fixed, 20, 0, 1, 100};
  const SimulationResult bounded = test::run(c, w);
  c.router.max_inflight = 4096;
  const SimulationResult free = test::run(c, w);
  // WHEN the second waits for the first to end THEN its TTFT includes that wait
  ASSERT_EQ(bounded.summary.completed, 2);
  EXPECT_GT(bounded.summary.ttft.max, free.summary.ttft.max + 0.5 * free.summary.e2e.max);
}

}  // namespace
}  // namespace disagg
