// KvTierCache: LRU order, capacity, write-completion times, listener events, and a seeded
// differential run against a std::list reference.
#include "disagg/kv_tier_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <random>
#include <vector>

namespace disagg {
namespace {

struct Recorder final : KvPoolListener {
  std::vector<BlockHash> stored, removed;
  void on_block_stored(BlockHash h) override { stored.push_back(h); }
  void on_block_removed(BlockHash h) override { removed.push_back(h); }
};

TEST(KvTierCache, EvictsTheLeastRecentlyUsedAndHitsRefresh) {
  // GIVEN a tier of 3 blocks holding 1, 2, 3 (inserted in that order)
  auto t = *KvTierCache::create(3);
  Recorder rec;
  t.set_listener(&rec);
  for (BlockHash h : {1, 2, 3}) EXPECT_TRUE(t.insert(h, 0, true));
  // WHEN 1 is hit, then 4 is inserted
  EXPECT_TRUE(t.touch(1));
  EXPECT_TRUE(t.insert(4, 0, true));
  // THEN 2 (least recently used) was evicted, the rest are held, and capacity is respected
  EXPECT_FALSE(t.contains(2));
  for (BlockHash h : {1, 3, 4}) EXPECT_TRUE(t.contains(h));
  EXPECT_EQ(t.size(), 3);
  EXPECT_EQ(rec.stored, (std::vector<BlockHash>{1, 2, 3, 4}));
  EXPECT_EQ(rec.removed, (std::vector<BlockHash>{2}));
  EXPECT_FALSE(t.touch(2));
  ASSERT_TRUE(t.check_invariants().has_value()) << t.check_invariants().error();
}

TEST(KvTierCache, ReadableOnlyAfterTheWriteCompletes) {
  // GIVEN a hash whose write completes at t = 2
  auto t = *KvTierCache::create(4);
  EXPECT_TRUE(t.insert(9, 2.0, true));
  // THEN it is held but not readable before 2, readable from 2 on
  EXPECT_TRUE(t.contains(9));
  EXPECT_FALSE(t.holds(9, 1.999));
  EXPECT_TRUE(t.holds(9, 2.0));
  // AND a second insert of it is a touch that keeps the first write's time
  EXPECT_FALSE(t.insert(9, 5.0, true));
  EXPECT_TRUE(t.holds(9, 3.0));
}

TEST(KvTierCache, PrivateHashesAreFindableButNotAnnounced) {
  auto t = *KvTierCache::create(1);
  Recorder rec;
  t.set_listener(&rec);
  EXPECT_TRUE(t.insert(5, 0, false));
  EXPECT_TRUE(t.holds(5, 0));
  EXPECT_TRUE(t.insert(6, 0, true));  // evicts 5 silently
  EXPECT_FALSE(t.contains(5));
  EXPECT_EQ(rec.stored, (std::vector<BlockHash>{6}));
  EXPECT_TRUE(rec.removed.empty());
  ASSERT_TRUE(t.check_invariants().has_value()) << t.check_invariants().error();
}

TEST(KvTierCache, RefusesBadCapacities) {
  EXPECT_EQ(KvTierCache::create(0).error(), PoolErrc::invalid_capacity);
  EXPECT_EQ(KvTierCache::create(KvTierCache::kMaxBlocks + 1).error(), PoolErrc::invalid_capacity);
}

TEST(KvTierCache, MatchesAnLruReferenceOnRandomOperations) {
  for (int seed = 1; seed <= 8; ++seed) {
    // GIVEN a tier and a std::list LRU reference (front = least recently used)
    std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
    const std::int64_t cap = 1 + static_cast<std::int64_t>(rng() % 40);
    auto t = *KvTierCache::create(cap);
    std::list<BlockHash> ref;
    for (int op = 0; op < 4000; ++op) {
      // WHEN random hashes from a space 3x the capacity are inserted or touched
      const BlockHash h = 1 + rng() % static_cast<std::uint64_t>(3 * cap);
      const auto it = std::find(ref.begin(), ref.end(), h);
      if (rng() % 2 == 0) {
        const bool added = t.insert(h, 0, rng() % 4 != 0);
        ASSERT_EQ(added, it == ref.end());
        if (it != ref.end()) ref.erase(it);
        else if (static_cast<std::int64_t>(ref.size()) == cap) ref.pop_front();
        ref.push_back(h);
      } else {
        ASSERT_EQ(t.touch(h), it != ref.end());
        if (it != ref.end()) ref.splice(ref.end(), ref, it);
      }
      // THEN the held set equals the reference's
      ASSERT_EQ(t.size(), static_cast<std::int32_t>(ref.size()));
      for (BlockHash r : ref) ASSERT_TRUE(t.contains(r)) << "seed " << seed << " op " << op;
    }
    ASSERT_TRUE(t.check_invariants().has_value()) << t.check_invariants().error();
  }
}

}  // namespace
}  // namespace disagg
