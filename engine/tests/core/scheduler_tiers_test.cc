// Scheduler with lower KV tiers (KvTierHook): the load path (events, waiting state, computed
// count after tier_load_ready, blocks published), write-through offload, and the conservation
// checks in a seeded randomized run with tiers on.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "disagg/scheduler.h"
#include "test_fixtures.h"

namespace disagg {
namespace {

// A hook over plain maps: hash -> tier it is held in; records every offload.
struct FakeTiers final : KvTierHook {
  std::map<BlockHash, KvTier> held;
  std::vector<BlockHash> offloaded;
  std::vector<std::int32_t> offload_shared;
  int lookups = 0;

  std::int32_t lookup(std::span<const BlockHash> hashes, std::span<KvTier> tiers) override {
    ++lookups;
    std::int32_t n = 0;
    for (const BlockHash h : hashes) {
      auto it = held.find(h);
      if (it == held.end()) break;
      tiers[static_cast<std::size_t>(n++)] = it->second;
    }
    return n;
  }
  void offload(std::span<const BlockHash> hashes, std::int32_t shared) override {
    offloaded.insert(offloaded.end(), hashes.begin(), hashes.end());
    offload_shared.push_back(shared);
    for (const BlockHash h : hashes) held.emplace(h, KvTier::cpu);
  }
};

TEST(SchedulerTiers, LoadWaitsThenRunsWithTheLoadedTokensComputed) {
  // GIVEN a 14-token prompt (3 full blocks of 4) whose block 0 is in host memory and block 1 on disk
  auto s = *Scheduler::create(test::small_config(16, 4, 64), test::cost_model());
  FakeTiers tiers;
  s.set_tier_hook(&tiers);
  const std::vector<BlockHash> h{101, 102, 103};
  tiers.held = {{101, KvTier::cpu}, {102, KvTier::disk}};
  const SeqHandle seq = *s.submit({7, RequestKind::full, 14, 2, h});
  // WHEN planned
  const StepPlan* p = *s.next_step();
  // THEN it is admitted with no GPU hit and loads 4 tokens from each tier, computing nothing yet
  ASSERT_EQ(p->events.size(), 3u);
  EXPECT_EQ(p->events[0].kind, SchedEventKind::admitted);
  EXPECT_EQ(p->events[0].value, 0);
  EXPECT_EQ(p->events[1].kind, SchedEventKind::tier_load);
  EXPECT_EQ(p->events[1].tier, KvTier::cpu);
  EXPECT_EQ(p->events[1].value, 4);
  EXPECT_EQ(p->events[2].kind, SchedEventKind::tier_load);
  EXPECT_EQ(p->events[2].tier, KvTier::disk);
  EXPECT_EQ(p->events[2].value, 4);
  EXPECT_TRUE(p->empty());
  (void)s.complete_step();
  EXPECT_EQ(s.pool().used_blocks(), 2);  // the loaded blocks only
  EXPECT_EQ(s.num_running(), 1);
  EXPECT_FALSE(s.has_work());
  EXPECT_FALSE(s.pool().contains(101));  // not GPU-cached before the load lands
  ASSERT_TRUE(s.check_invariants().has_value()) << s.check_invariants().error();
  // WHEN the load lands
  ASSERT_TRUE(s.tier_load_ready(seq).has_value());
  EXPECT_EQ(s.tier_load_ready(seq).error(), SchedErrc::not_found);
  // THEN the loaded blocks are GPU-cached again and only the remaining 6 tokens are prefilled
  EXPECT_TRUE(s.pool().contains(101));
  EXPECT_TRUE(s.pool().contains(102));
  const StepPlan* p2 = *s.next_step();
  EXPECT_EQ(p2->batch.prefill_tokens, 6);
  (void)s.complete_step();
  // AND only the block it computed (not the loaded ones) was offered back to the tiers
  EXPECT_EQ(tiers.offloaded, (std::vector<BlockHash>{103}));
  EXPECT_EQ(s.stats().prompt_tokens_loaded, 8);
  EXPECT_EQ(s.stats().prompt_tokens_hit, 0);
  // Drain: it finishes and frees its blocks
  for (int i = 0; i < 10 && s.num_unfinished() > 0; ++i) {
    (void)s.next_step();
    (void)s.complete_step();
  }
  EXPECT_EQ(s.num_unfinished(), 0);
  EXPECT_EQ(s.pool().used_blocks(), 0);
}

TEST(SchedulerTiers, GpuHitsFirstThenTiersAndTheLastTokenIsAlwaysComputed) {
  // GIVEN a 12-token prompt (3 full blocks) with block 0 GPU-cached and blocks 1 and 2 in a tier
  auto s = *Scheduler::create(test::small_config(16, 4, 64), test::cost_model());
  FakeTiers tiers;
  s.set_tier_hook(&tiers);
  const std::vector<BlockHash> h{201, 202, 203};
  const std::vector<BlockHash> first{201};
  (void)s.submit({1, RequestKind::full, 5, 1, first});  // computes and caches block 201
  for (int i = 0; i < 5; ++i) {
    (void)s.next_step();
    (void)s.complete_step();
  }
  ASSERT_TRUE(s.pool().contains(201));
  tiers.held = {{202, KvTier::remote}, {203, KvTier::remote}};
  // WHEN it is admitted
  (void)s.submit({2, RequestKind::full, 12, 1, h});
  const StepPlan* p = *s.next_step();
  // THEN 4 tokens hit the GPU and only block 202 is loaded: block 203 holds the last prompt token
  ASSERT_EQ(p->events.size(), 2u);
  EXPECT_EQ(p->events[0].value, 4);
  EXPECT_EQ(p->events[1].kind, SchedEventKind::tier_load);
  EXPECT_EQ(p->events[1].tier, KvTier::remote);
  EXPECT_EQ(p->events[1].value, 4);
  (void)s.complete_step();
}

TEST(SchedulerTiers, RemoteKvNeverLoadsAndOffloadKeepsPrivateBlocksApart) {
  // GIVEN a decode worker whose tiers hold the whole prompt
  auto c = test::small_config(16, 4, 64);
  c.role = WorkerRole::decode;
  auto s = *Scheduler::create(c, test::cost_model());
  FakeTiers tiers;
  s.set_tier_hook(&tiers);
  const std::vector<BlockHash> h{301, 302, 303};
  tiers.held = {{301, KvTier::cpu}, {302, KvTier::cpu}};
  // WHEN a remote_kv request is admitted THEN it pulls, never asking the tiers
  (void)s.submit({1, RequestKind::remote_kv, 10, 1, h});
  const StepPlan* p = *s.next_step();
  ASSERT_EQ(p->events.size(), 2u);
  EXPECT_EQ(p->events[1].kind, SchedEventKind::kv_pull);
  EXPECT_EQ(tiers.lookups, 0);
  (void)s.complete_step();
  // WHEN a full request with 1 shared and 2 private blocks computes them
  SchedRequest r{2, RequestKind::full, 13, 1, std::span<const BlockHash>(h), 1};
  tiers.held.clear();
  (void)s.submit(r);
  (void)s.next_step();
  (void)s.complete_step();
  // THEN they are offered in one write whose leading block alone is shared
  EXPECT_EQ(tiers.offloaded, (std::vector<BlockHash>{301, 302, 303}));
  EXPECT_EQ(tiers.offload_shared, (std::vector<std::int32_t>{1}));
}

class SchedulerTiersRandom : public ::testing::TestWithParam<int> {};

TEST_P(SchedulerTiersRandom, ConservesRequestsAndBlocksWithLoadsInFlight) {
  // GIVEN a small pool (preemptions happen), tiers that keep what is offloaded but forget at
  // random, and loads that land after random delays
  const int seed = GetParam();
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
  // Prefixes of 10 blocks against a pool of 30 to 50: the GPU keeps evicting what the tiers hold.
  const int bs = 4, blocks = 30 + seed % 3 * 10;
  auto s = *Scheduler::create(test::small_config(blocks, 3 + seed % 4, 8 + seed % 3 * 12), test::cost_model());
  FakeTiers tiers;
  s.set_tier_hook(&tiers);
  std::vector<std::vector<TokenId>> prefixes(3);
  for (auto& p : prefixes) {
    for (int i = 0; i < 40; ++i) p.push_back(static_cast<TokenId>(rng() % 1000));
  }
  std::deque<std::vector<BlockHash>> hash_store;
  std::map<std::uint64_t, int> finished;
  std::map<SeqHandle, int> loading;  // handle -> steps until its load lands
  std::int64_t loads = 0;
  std::uint64_t next_id = 1;
  int submitted = 0;
  for (int step = 0; step < 3000; ++step) {
    // WHEN requests arrive at random, tiers forget at random, and loads land at random
    if (next_id <= 150 && rng() % 3 == 0) {
      std::vector<TokenId> tokens = prefixes[rng() % 3];
      const int extra = 1 + static_cast<int>(rng() % 30);
      for (int i = 0; i < extra; ++i) tokens.push_back(static_cast<TokenId>(rng() % 1000));
      std::vector<BlockHash> h(tokens.size() / bs);
      hash_blocks(tokens, bs, kRootBlockHash, h);
      hash_store.push_back(h);
      if (s.submit({next_id, RequestKind::full, static_cast<int>(tokens.size()), 1 + static_cast<int>(rng() % 25),
                    hash_store.back()})
              .has_value()) {
        ++submitted;
      }
      ++next_id;
    }
    if (!tiers.held.empty() && rng() % 10 == 0) tiers.held.erase(tiers.held.begin());
    for (auto it = loading.begin(); it != loading.end();) {
      if (--it->second <= 0) {
        ASSERT_TRUE(s.tier_load_ready(it->first).has_value());
        it = loading.erase(it);
      } else {
        ++it;
      }
    }
    const StepPlan* p = *s.next_step();
    for (const SchedEvent& e : p->events) {
      if (e.kind == SchedEventKind::tier_load) {
        ASSERT_NE(e.tier, KvTier::gpu);
        ASSERT_GT(e.value, 0);
        loading[e.handle] = 1 + static_cast<int>(rng() % 5);
        ++loads;
      }
    }
    auto done = *s.complete_step();
    for (const SchedEvent& e : done) {
      if (e.kind == SchedEventKind::finished) ++finished[e.id];
    }
    // THEN the block accounting holds after every step
    ASSERT_TRUE(s.check_invariants().has_value())
        << "seed " << seed << " step " << step << ": " << s.check_invariants().error();
    ASSERT_LE(s.pool().used_blocks(), blocks);
  }
  for (auto& [h, n] : loading) ASSERT_TRUE(s.tier_load_ready(h).has_value());
  for (int i = 0; i < 100000 && s.num_unfinished() > 0; ++i) {
    (void)s.next_step();
    (void)s.complete_step();
  }
  // AND every request finished exactly once, nothing leaked, and loads did happen
  EXPECT_EQ(s.num_unfinished(), 0);
  EXPECT_EQ(static_cast<int>(finished.size()), submitted);
  for (auto [id, n] : finished) EXPECT_EQ(n, 1) << "request " << id;
  EXPECT_EQ(s.pool().used_blocks(), 0);
  EXPECT_GT(loads, 0);
  EXPECT_GT(s.stats().prompt_tokens_loaded, 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SchedulerTiersRandom, ::testing::Range(1, 9));

}  // namespace
}  // namespace disagg
