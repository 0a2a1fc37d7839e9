// Simulator with lower KV tiers: a host tier rescues a chat workload whose GPU KV is too small,
// a slow tier makes loads worse than recompute, runs are deterministic, the remote store is shared
// across workers, and bad tier configurations are refused naming the field.
#include <gtest/gtest.h>

#include <string>

#include "disagg/json_value.h"
#include "disagg/metrics.h"
#include "disagg/simulation_config.h"
#include "disagg/simulator.h"
#include "../core/test_fixtures.h"

namespace disagg {
namespace {

PoolSpec pool(int replicas, int blocks) {
  return test::sim_pool(WorkerRole::aggregated, replicas, blocks);
}

KvTierSpec tier(KvTier t, double capacity, double bandwidth, double latency) {
  KvTierSpec s;
  s.tier = t;
  s.capacity_bytes = capacity;
  s.read_bytes_per_second = bandwidth;
  s.write_bytes_per_second = bandwidth;
  s.latency_seconds = latency;
  return s;
}

// Multi-turn chat: 4 turns 5 s apart whose prompts grow by the answer and 128 new tokens.
WorkloadSpec chat(std::uint64_t seed, int requests, double rate) {
  WorkloadSpec w;
  w.kind = WorkloadKind::chat;
  w.seed = seed;
  w.max_requests = requests;
  w.arrival.rate_per_second = rate;
  w.input = {LengthDist::Kind::lognormal, 1500, 500, 16, 4000};
  w.output = {LengthDist::Kind::uniform, 0, 0, 20, 200};
  w.tenants = 4;
  w.system_prompt_tokens = 256;
  return w;
}

double total_hit(const MetricsSummary& m) {
  return m.prefix_hit_rate[0] + m.prefix_hit_rate[1] + m.prefix_hit_rate[2] + m.prefix_hit_rate[3];
}

// 2 workers of 600 blocks (9,600 tokens): about four sessions' contexts, far fewer than are live.
SimulationConfig small_gpu(const char* policy) {
  SimulationConfig c;
  c.pools.push_back(pool(2, 600));
  c.router.policy = policy;
  c.check_invariants = true;
  return c;
}

TEST(SimulatorTiers, HostTierServesChatHistoryTheGpuEvicted) {
  for (const char* policy : {"round-robin", "llm-d"}) {
    // GIVEN a chat workload on workers whose GPU KV is far too small for the live sessions
    const WorkloadSpec w = chat(3, 400, 6);
    const SimulationResult none = test::run(small_gpu(policy), w);
    // WHEN each worker gets 32 GiB of host memory over PCIe Gen5 x16 (~50 GB/s in practice)
    SimulationConfig c = small_gpu(policy);
    c.pools[0].kv_tiers.push_back(tier(KvTier::cpu, 32.0 * (1ull << 30), 5e10, 1e-5));
    const SimulationResult host = test::run(c, w);
    // THEN turns hit the host tier, the GPU alone hits less than all tiers together, TTFT p90
    // improves, and every request still finishes with no block leaked
    SCOPED_TRACE(policy);
    EXPECT_GT(host.summary.prefix_hit_rate[1], 0);
    EXPECT_LT(host.summary.prefix_hit_rate[0], total_hit(host.summary));
    EXPECT_GT(total_hit(host.summary), total_hit(none.summary));
    EXPECT_LT(host.summary.ttft.p90, none.summary.ttft.p90);
    EXPECT_GT(host.summary.tier_bytes_loaded[1], 0);
    EXPECT_GT(host.summary.tier_bytes_offloaded[1], 0);
    EXPECT_EQ(host.summary.completed, 400);
    EXPECT_EQ(host.blocks_in_use_at_end, 0);
    EXPECT_EQ(none.summary.prefix_hit_rate[1], 0);
    EXPECT_EQ(to_json(none.summary).find("kvTiers"), std::string::npos);
    EXPECT_NE(to_json(host.summary).find("\"kvTiers\":{\"host\":{\"bytesLoaded\":"), std::string::npos);
  }
}

TEST(SimulatorTiers, ATierSlowerThanRecomputeRaisesTtft) {
  // GIVEN the same workload, once with a fast host tier and once with a 20 MB/s one
  const WorkloadSpec w = chat(4, 300, 6);
  SimulationConfig fast = small_gpu("round-robin");
  fast.pools[0].kv_tiers.push_back(tier(KvTier::cpu, 32.0 * (1ull << 30), 5e10, 1e-5));
  SimulationConfig slow = small_gpu("round-robin");
  slow.pools[0].kv_tiers.push_back(tier(KvTier::cpu, 32.0 * (1ull << 30), 2e7, 1e-5));
  // WHEN both run, and the GPU-only deployment
  const SimulationResult f = test::run(fast, w), s = test::run(slow, w), none = test::run(small_gpu("round-robin"), w);
  // THEN loading at 20 MB/s (0.1 s per 2 MiB block) is slower than recomputing: TTFT rises above
  // both the fast tier's and no tier at all, and offloads back up until they are skipped
  EXPECT_GT(s.summary.ttft.p90, f.summary.ttft.p90);
  EXPECT_GT(s.summary.ttft.p90, none.summary.ttft.p90);
  EXPECT_GT(s.summary.tier_offloads_skipped[1], 0);
  EXPECT_EQ(f.summary.tier_offloads_skipped[1], 0);
  EXPECT_EQ(s.summary.completed, 300);
}

TEST(SimulatorTiers, SameSeedSameSummaryWithEveryTier) {
  SimulationConfig c = small_gpu("disagg");
  c.check_invariants = false;
  c.pools[0].kv_tiers = {tier(KvTier::cpu, 4.0 * (1ull << 30), 5e10, 1e-5),
                         tier(KvTier::disk, 16.0 * (1ull << 30), 6e9, 1e-4),
                         tier(KvTier::remote, 64.0 * (1ull << 30), 1.2e10, 5e-4)};
  const std::string a = to_json(test::run(c, chat(9, 300, 6)).summary);
  const std::string b = to_json(test::run(c, chat(9, 300, 6)).summary);
  const std::string other = to_json(test::run(c, chat(10, 300, 6)).summary);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
}

TEST(SimulatorTiers, RemoteStoreIsSharedAcrossWorkers) {
  // GIVEN two workers behind round robin that share only a remote store, and requests that all
  // start with one 1,024-token system prompt, arriving 1 s apart
  SimulationConfig c;
  c.pools.push_back(pool(2, 4000));
  c.pools[0].kv_tiers.push_back(tier(KvTier::remote, 8.0 * (1ull << 30), 1.2e10, 5e-4));
  c.router.policy = "round-robin";
  c.check_invariants = true;
  WorkloadSpec w;
  w.seed = 2;
  w.max_requests = 6;
  w.arrival.rate_per_second = 1;
  w.input = {LengthDist::Kind::fixed, 64, 0, 1, 1000};
  w.output = {LengthDist::Kind::fixed, 8, 0, 1, 1000};
  w.tenants = 1;
  w.system_prompt_tokens = 1024;
  // WHEN they run
  const SimulationResult r = test::run(c, w);
  // THEN the second worker's first request loads the prefix the first worker computed (64 of the
  // 6 x 1,088 prompt tokens) from the store, and later ones hit their own GPU
  EXPECT_GT(r.summary.prefix_hit_rate[3], 0);
  EXPECT_GT(r.summary.prefix_hit_rate[0], r.summary.prefix_hit_rate[3]);
  EXPECT_GT(r.summary.tier_bytes_loaded[3], 0);
  EXPECT_EQ(r.summary.completed, 6);
}

std::string tier_doc(const std::string& pools) {
  return R"({
    "model": {"weightBytesPerRank": 16e9, "kvBytesPerToken": 131072, "activeParameters": 8e9, "layers": 32, "hiddenSize": 4096},
    "hardware": {"peakFlopsPerSecond": 9.89e14, "hbmBytesPerSecond": 3.35e12, "fabricBytesPerSecond": 4e10},
    "workload": {"kind": "single", "requests": 10},
    "pools": )" +
         pools + "}";
}

std::string error_of(const std::string& pools) {
  auto doc = parse_json(tier_doc(pools));
  EXPECT_TRUE(doc) << doc.error();
  auto setup = read_simulation(*doc);
  if (!setup) return setup.error();
  auto sim = Simulator::create(setup->config);
  return sim ? std::string() : sim.error().message;
}

TEST(SimulatorTiers, RefusesBadTiersNamingTheFieldTheValueAndTheFix) {
  const std::string host =
      R"({"tier": "host", "capacityBytes": 1e10, "readBytesPerSecond": 5e10, "writeBytesPerSecond": 5e10})";
  const std::string disk =
      R"({"tier": "disk", "capacityBytes": 1e11, "readBytesPerSecond": 6e9, "writeBytesPerSecond": 3e9})";
  auto pool_with = [](const std::string& tiers, const char* role = "both") {
    return std::string(R"({"name": "p", "role": ")") + role +
           R"(", "replicas": 2, "kvTokensPerReplica": 100000, "kvTiers": [)" + tiers + "]}";
  };
  // GIVEN valid tiers THEN no error, and the JSON shape round-trips into the struct
  {
    auto doc = parse_json(tier_doc("[" + pool_with(host + ", " + disk) + "]"));
    auto setup = read_simulation(*doc);
    ASSERT_TRUE(setup) << setup.error();
    ASSERT_EQ(setup->config.pools[0].kv_tiers.size(), 2u);
    EXPECT_EQ(setup->config.pools[0].kv_tiers[1].tier, KvTier::disk);
    EXPECT_EQ(setup->config.pools[0].kv_tiers[1].write_bytes_per_second, 3e9);
    EXPECT_EQ(setup->config.pools[0].kv_tiers[0].max_write_backlog_seconds, kDefaultMaxWriteBacklogSeconds);
    EXPECT_TRUE(Simulator::create(setup->config).has_value());
  }
  // WHEN a tier is unknown, out of order, too small, missing a bandwidth, or has an unknown key
  EXPECT_EQ(
      error_of(
          "[" +
          pool_with(R"({"tier": "ssd", "capacityBytes": 1e10, "readBytesPerSecond": 1, "writeBytesPerSecond": 1})") +
          "]"),
      "'pools[0].kvTiers[0].tier' (\"ssd\") must be host, disk or remote");
  EXPECT_EQ(error_of("[" + pool_with(disk + ", " + host) + "]"),
            "'pools[0].kvTiers' lists host after disk; list host, disk, remote in that order, each at most once");
  EXPECT_EQ(error_of("[" + pool_with(host + ", " + host) + "]"),
            "'pools[0].kvTiers' lists host after host; list host, disk, remote in that order, each at most once");
  EXPECT_EQ(
      error_of(
          "[" +
          pool_with(
              R"({"tier": "host", "capacityBytes": 1000, "readBytesPerSecond": 5e10, "writeBytesPerSecond": 5e10})") +
          "]"),
      "'pools[0].kvTiers[0].capacityBytes' (1000) must hold at least one KV block of 2097152 bytes "
      "(16 tokens x 131072 bytes per token)");
  EXPECT_EQ(error_of("[" + pool_with(R"({"tier": "disk", "capacityBytes": 1e11, "writeBytesPerSecond": 3e9})") + "]"),
            "'pools[0].kvTiers[0].readBytesPerSecond' is required for the disk tier (bytes/s)");
  EXPECT_EQ(
      error_of("[" +
               pool_with(
                   R"({"tier": "host", "capacityBytes": 1e10, "readBytesPerSecond": 0, "writeBytesPerSecond": 5e10})") +
               "]"),
      "'pools[0].kvTiers[0].readBytesPerSecond' (0) must be > 0");
  EXPECT_NE(error_of("[" + pool_with(R"({"tier": "host", "capacity": 1e10})") + "]")
                .find("'pools[0].kvTiers[0].capacity' is not a known key"),
            std::string::npos);
  EXPECT_EQ(
      error_of(
          "[" +
          pool_with(
              R"({"tier": "host", "capacityBytes": 1e16, "readBytesPerSecond": 5e10, "writeBytesPerSecond": 5e10})") +
          "]"),
      "'pools[0].kvTiers[0].capacityBytes' (1e+16) is 4768371582 KV blocks; the simulator holds at most "
      "268435456 per tier; give less (a tier larger than the workload's working set behaves the same)");
  // AND two pools that give the shared remote store different capacities
  const std::string remote_a =
      R"({"tier": "remote", "capacityBytes": 1e11, "readBytesPerSecond": 1e10, "writeBytesPerSecond": 1e10})";
  const std::string remote_b =
      R"({"tier": "remote", "capacityBytes": 2e11, "readBytesPerSecond": 1e10, "writeBytesPerSecond": 1e10})";
  EXPECT_EQ(error_of("[" + pool_with(remote_a, "prefill") + ", " + pool_with(remote_b, "decode") + "]"),
            "'pools[1].kvTiers[0].capacityBytes' (2e+11) differs from the remote store's capacity in pools[0] "
            "(1e+11); the store is shared: give every pool the same capacityBytes");
}

}  // namespace
}  // namespace disagg
