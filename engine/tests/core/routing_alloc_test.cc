// choose(), score(), on_routed() and KvBlockIndex::longest_prefix() must not allocate: the router
// calls them on every request. Counted by counting_new.h (per thread, read only inside the
// measured window).
#include <gtest/gtest.h>

#include <vector>

#include "disagg/routing.h"

#include "counting_new.h"

namespace disagg {
namespace {

TEST(RoutingAllocation, ChooseScoreAndLongestPrefixNeverAllocate) {
  // GIVEN every policy, precise and approximate, over 64 endpoints with cached prefixes
  KvIndexConfig config;
  config.max_entries = 1 << 14;
  KvBlockIndex index = std::move(KvBlockIndex::create(config)).value();
  std::vector<BlockHash> hashes(128);
  for (std::size_t i = 0; i < hashes.size(); ++i) hashes[i] = 77 + i;
  std::vector<EndpointState> eps(64);
  for (std::size_t i = 0; i < eps.size(); ++i) {
    eps[i].id = static_cast<EndpointId>(i);
    eps[i].running_requests = static_cast<std::int32_t>(i % 7);
    eps[i].kv_usage = 0.1 * static_cast<double>(i % 10);
    eps[i].total_kv_blocks = 1000;
    eps[i].free_kv_blocks = 500;
    const std::size_t depth = (i * 13) % hashes.size();
    ASSERT_TRUE(index.apply_stored(eps[i].id, static_cast<KvTier>(i % 4), std::span(hashes).first(depth)).has_value());
  }
  RouteRequest r;
  r.block_hashes = hashes;
  r.prompt_tokens = 128 * 16;
  std::vector<double> scores(eps.size());
  std::vector<PrefixOverlap> overlaps(64);

  for (const bool precise : {false, true}) {
    for (const auto name : routing_policy_names()) {
      PolicyOptions o;
      o.index = precise ? &index : nullptr;
      o.max_endpoints = 64;
      o.history_blocks_per_endpoint = 256;
      auto policy = std::move(make_routing_policy(name, o)).value();
      policy->on_routed(r, eps[5]);  // approximate histories now hold a prefix
      // WHEN deciding many times
      const long before = test::allocations();
      std::int64_t sink = 0;
      for (std::uint64_t id = 0; id < 200; ++id) {
        r.request_id = id;
        const RouteDecision d = policy->choose(r, eps);
        policy->score(r, eps, scores);
        sink += d.index + d.cached_blocks;
      }
      sink += index.longest_prefix(hashes, overlaps);
      const long during = test::allocations() - before;
      // THEN nothing was allocated
      EXPECT_EQ(during, 0) << name << (precise ? " (precise)" : " (approximate)");
      EXPECT_GE(sink, 0);
    }
  }
  // The counter itself works (the test can fail).
  const long before = test::allocations();
  auto* probe = new std::vector<int>(3);
  delete probe;
  EXPECT_GE(test::allocations() - before, 2);
}

TEST(RoutingAllocation, LearningRoutesNeverAllocatesAfterCreation) {
  // GIVEN every policy, precise (with pending routes) and approximate, over 64 endpoints
  KvIndexConfig config;
  config.max_entries = 1 << 14;
  KvBlockIndex index = std::move(KvBlockIndex::create(config)).value();
  std::vector<std::vector<BlockHash>> prompts(8, std::vector<BlockHash>(96));
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    for (std::size_t i = 0; i < prompts[p].size(); ++i) prompts[p][i] = 1000 * (p % 3) + 7 * i + (i > 40 ? p : 0);
  }
  std::vector<EndpointState> eps(64);
  for (std::size_t i = 0; i < eps.size(); ++i) eps[i].id = static_cast<EndpointId>(i);
  for (const bool precise : {false, true}) {
    for (const auto name : routing_policy_names()) {
      PolicyOptions o;
      o.index = precise ? &index : nullptr;
      o.max_endpoints = 64;
      o.history_blocks_per_endpoint = 256;
      auto policy = std::move(make_routing_policy(name, o)).value();
      // WHEN routing and learning thousands of requests over a moving clock (routes expire, the
      // rings wrap)
      const long before = test::allocations();
      std::int64_t sink = 0;
      for (std::uint64_t id = 0; id < 3000; ++id) {
        RouteRequest r;
        r.request_id = id;
        r.block_hashes = prompts[id % prompts.size()];
        r.prompt_tokens = 96 * 16;
        r.now_ms = static_cast<std::int64_t>(id * 3);
        const RouteDecision d = policy->choose(r, eps);
        policy->on_routed(r, eps[static_cast<std::size_t>(d.index)]);
        sink += d.index + d.cached_blocks;
      }
      const long during = test::allocations() - before;
      // THEN nothing was allocated
      EXPECT_EQ(during, 0) << name << (precise ? " (precise)" : " (approximate)");
      EXPECT_GE(sink, 0);
    }
  }
}

}  // namespace
}  // namespace disagg
