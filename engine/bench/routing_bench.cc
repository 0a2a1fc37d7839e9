// routing_bench.cc — `disagg-routing-bench`: latency of one routing decision (choose()) with 16 and
// 64 endpoints, 1M and 4M indexed blocks, prompts of 1k to 8k tokens (16-token blocks, vLLM's
// default, so 64 to 512 hashes per prompt). Prints markdown rows. Not a test.
//
//   disagg-routing-bench [--quick] [--endpoints N] [--blocks M] [--routed]
//   (--quick: 16 endpoints x 1M blocks only; --endpoints / --blocks: that one case; --routed: time
//   choose() + on_routed(), as the router does per request, at one instant, so the precise
//   policies' pending routes (PolicyOptions::pending_blocks_ms) never expire and each decision
//   reads all 1,024: their worst case. Without it nothing is routed and none is pending.)
//
// Index contents: "documents" of 512 chained blocks, each stored on two endpoints (as a shared
// system prompt or a conversation that moved), a quarter of the blocks in the CPU tier. Each run
// cycles through 1,024 queries, each a cached document prefix, so the walk visits every block (the
// costly case; a miss stops at the first block).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/routing.h"

namespace {

using namespace disagg;

constexpr int kDocBlocks = 512;
constexpr std::int32_t kBlockSize = 16;

BlockHash doc_hash(std::int64_t doc, int block) {
  return (static_cast<BlockHash>(doc) << 20) ^ (static_cast<BlockHash>(block) * 0x9e3779b97f4a7c15ULL);
}

struct Setup {
  KvBlockIndex index;
  std::int64_t docs;
};

Setup build(int endpoints, std::int64_t entries) {
  KvIndexConfig config;
  config.max_endpoints = endpoints;
  config.max_entries = entries;
  Setup s{std::move(KvBlockIndex::create(config)).value(), entries / (2 * kDocBlocks)};
  std::vector<BlockHash> hashes(kDocBlocks);
  for (std::int64_t d = 0; d < s.docs; ++d) {
    for (int b = 0; b < kDocBlocks; ++b) hashes[static_cast<std::size_t>(b)] = doc_hash(d, b);
    for (int copy = 0; copy < 2; ++copy) {
      const auto ep = static_cast<EndpointId>((d * 2 + copy) % endpoints);
      const KvTier tier = (d + copy) % 4 == 0 ? KvTier::cpu : KvTier::gpu;
      (void)s.index.apply_stored(ep, tier, hashes);
    }
  }
  return s;
}

double ns_per_decision(RoutingPolicy& policy, const Setup& s, int endpoints, int prompt_tokens, int decisions,
                       bool routed) {
  std::vector<EndpointState> eps(static_cast<std::size_t>(endpoints));
  std::mt19937_64 rng(7);
  for (int i = 0; i < endpoints; ++i) {
    EndpointState& e = eps[static_cast<std::size_t>(i)];
    e.id = static_cast<EndpointId>(i);
    e.running_requests = static_cast<std::int32_t>(rng() % 32);
    e.waiting_requests = static_cast<std::int32_t>(rng() % 8);
    e.kv_usage = static_cast<double>(rng() % 90) / 100.0;
    e.total_kv_blocks = 100'000;
    e.free_kv_blocks = static_cast<std::int64_t>(rng() % 100'000);
    e.inflight_prefill_tokens = static_cast<std::int64_t>(rng() % 16'384);
  }
  const int blocks = prompt_tokens / kBlockSize;
  // Pre-build the queries so that only choose() is timed.
  constexpr int kQueries = 1024;  // a working set well beyond the last-level cache
  std::vector<std::vector<BlockHash>> queries(kQueries, std::vector<BlockHash>(static_cast<std::size_t>(blocks)));
  for (auto& q : queries) {
    const auto doc = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(s.docs));
    for (int b = 0; b < blocks; ++b) q[static_cast<std::size_t>(b)] = doc_hash(doc, b);
  }
  RouteRequest r;
  r.block_size = kBlockSize;
  r.prompt_tokens = prompt_tokens;
  std::int64_t sink = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < decisions; ++i) {
    r.request_id = static_cast<std::uint64_t>(i);
    r.block_hashes = queries[static_cast<std::size_t>(i % kQueries)];
    const RouteDecision d = policy.choose(r, eps);
    if (routed && d.ok()) policy.on_routed(r, eps[static_cast<std::size_t>(d.index)]);
    sink += d.index + d.cached_blocks;
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  if (sink == -1) std::puts("");  // keep the loop
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()) / decisions;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  bool routed = false;
  int only_endpoints = 0;
  long long only_blocks = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--routed") == 0) routed = true;
    if (std::strcmp(argv[i], "--endpoints") == 0 && i + 1 < argc) only_endpoints = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--blocks") == 0 && i + 1 < argc) only_blocks = std::atoll(argv[++i]);
  }
  std::printf("| policy | endpoints | indexed blocks | prompt tokens | ns per decision |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  const int endpoint_cases[] = {16, 64};
  const std::int64_t entry_cases[] = {1 << 20, 4 << 20};
  const int prompt_cases[] = {1024, 4096, 8192};
  for (const int endpoints : endpoint_cases) {
    for (const std::int64_t entries : entry_cases) {
      if (quick && (endpoints != 16 || entries != (1 << 20))) continue;
      if (only_endpoints != 0 && endpoints != only_endpoints) continue;
      if (only_blocks != 0 && entries != only_blocks) continue;
      const Setup s = build(endpoints, entries);
      for (const auto name : routing_policy_names()) {
        PolicyOptions o;
        o.index = &s.index;  // precise prefix scoring on the event-fed index
        const auto policy = std::move(make_routing_policy(name, o)).value();
        for (const int prompt : prompt_cases) {
          // Median of 7 runs of 3,000 decisions: robust to other jobs on a shared machine.
          std::array<double, 7> runs{};
          (void)ns_per_decision(*policy, s, endpoints, prompt, 1'000, routed);  // warm up
          for (double& run : runs) run = ns_per_decision(*policy, s, endpoints, prompt, 3'000, routed);
          std::sort(runs.begin(), runs.end());
          const double ns = runs[runs.size() / 2];
          std::printf("| %s | %d | %lld | %d | %.0f |\n", std::string(name).c_str(), endpoints,
                      static_cast<long long>(s.index.size()), prompt, ns);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
