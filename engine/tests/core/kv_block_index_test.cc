// KvBlockIndex: unit cases, boundedness, and a seeded differential test against a reference model
// built from std::map / std::list.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <list>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "disagg/kv_block_index.h"

namespace disagg {
namespace {

KvBlockIndex make_index(std::int64_t max_entries, int max_endpoints = 8, std::int64_t per_endpoint = 0) {
  KvIndexConfig c;
  c.max_entries = max_entries;
  c.max_endpoints = max_endpoints;
  c.max_entries_per_endpoint = per_endpoint;
  auto index = KvBlockIndex::create(c);
  EXPECT_TRUE(index.has_value());
  return std::move(index).value();
}

std::vector<BlockHash> chain(BlockHash first, int n) {
  std::vector<BlockHash> v;
  for (int i = 0; i < n; ++i) v.push_back(first + static_cast<BlockHash>(i));
  return v;
}

TEST(KvBlockIndex, RefusesInvalidConfig) {
  // GIVEN bounds outside their ranges WHEN creating THEN invalid_config
  for (const KvIndexConfig c : {KvIndexConfig{0, 16, 0}, KvIndexConfig{65, 16, 0}, KvIndexConfig{4, 0, 0},
                                KvIndexConfig{4, 16, 17}, KvIndexConfig{4, 16, -1}}) {
    auto r = KvBlockIndex::create(c);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error(), IndexErrc::invalid_config);
  }
  EXPECT_EQ(to_string(IndexErrc::invalid_endpoint), "invalid_endpoint");
  EXPECT_EQ(to_string(KvTier::disk), "disk");
}

TEST(KvBlockIndex, RefusesBadEndpointAndTierWithoutChange) {
  // GIVEN an index for 4 endpoints
  KvBlockIndex index = make_index(16, 4);
  const auto h = chain(1, 3);
  // WHEN storing for endpoint 4 or an invalid tier THEN refused and nothing stored
  auto a = index.apply_stored(4, KvTier::gpu, h);
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error(), IndexErrc::invalid_endpoint);
  auto b = index.apply_stored(0, static_cast<KvTier>(7), h);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error(), IndexErrc::invalid_tier);
  EXPECT_EQ(index.size(), 0);
  EXPECT_EQ(index.clear(9), 0);
}

TEST(KvBlockIndex, LongestPrefixPerEndpointAndTier) {
  // GIVEN endpoint 0 holding blocks 0..3 on GPU, endpoint 1 holding 0..1 on GPU and 2 on CPU,
  // endpoint 2 holding only block 1 (no leading block)
  KvBlockIndex index = make_index(64, 4);
  const auto h = chain(100, 6);
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, std::span(h).first(4)).has_value());
  ASSERT_TRUE(index.apply_stored(1, KvTier::gpu, std::span(h).first(2)).has_value());
  ASSERT_TRUE(index.apply_stored(1, KvTier::cpu, std::span(h).subspan(2, 1)).has_value());
  ASSERT_TRUE(index.apply_stored(2, KvTier::gpu, std::span(h).subspan(1, 1)).has_value());
  // WHEN asking for the prefix of the 6 blocks
  std::array<PrefixOverlap, 4> out{};
  const auto longest = index.longest_prefix(h, out);
  // THEN each endpoint's run and its split by tier
  EXPECT_EQ(longest, 4);
  EXPECT_EQ(out[0].blocks, 4);
  EXPECT_EQ(out[0].by_tier[0], 4);
  EXPECT_EQ(out[1].blocks, 3);
  EXPECT_EQ(out[1].by_tier[0], 2);
  EXPECT_EQ(out[1].by_tier[1], 1);
  EXPECT_EQ(out[2].blocks, 0);
  EXPECT_EQ(out[3].blocks, 0);
  EXPECT_TRUE(index.check_invariants().has_value());
}

TEST(KvBlockIndex, FastestTierCountsWhenHeldInSeveral) {
  // GIVEN a block held by one endpoint in disk and GPU
  KvBlockIndex index = make_index(16, 2);
  const BlockHash h[] = {7};
  ASSERT_TRUE(index.apply_stored(0, KvTier::disk, h).has_value());
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, h).has_value());
  std::array<PrefixOverlap, 2> out{};
  (void)index.longest_prefix(h, out);
  EXPECT_EQ(out[0].by_tier[0], 1);
  EXPECT_EQ(out[0].by_tier[2], 0);
  // WHEN the GPU copy is removed THEN the disk copy still counts, in the disk tier
  ASSERT_TRUE(index.apply_removed(0, KvTier::gpu, h).has_value());
  (void)index.longest_prefix(h, out);
  EXPECT_EQ(out[0].blocks, 1);
  EXPECT_EQ(out[0].by_tier[2], 1);
  EXPECT_EQ(index.size(), 1);
  EXPECT_TRUE(index.check_invariants().has_value());
}

TEST(KvBlockIndex, ClearDropsOneEndpointOrOneTier) {
  KvBlockIndex index = make_index(64, 3);
  const auto h = chain(1, 5);
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, h).has_value());
  ASSERT_TRUE(index.apply_stored(0, KvTier::cpu, h).has_value());
  ASSERT_TRUE(index.apply_stored(1, KvTier::gpu, h).has_value());
  // WHEN clearing endpoint 0's CPU tier, then all of endpoint 1
  EXPECT_EQ(index.clear(0, KvTier::cpu), 5);
  EXPECT_EQ(index.clear(1), 5);
  // THEN only endpoint 0's GPU entries remain
  EXPECT_EQ(index.size(), 5);
  EXPECT_EQ(index.size(0), 5);
  EXPECT_EQ(index.distinct_blocks(), 5);
  EXPECT_TRUE(index.contains(0, KvTier::gpu, 3));
  EXPECT_FALSE(index.contains(0, KvTier::cpu, 3));
  EXPECT_FALSE(index.contains(1, KvTier::gpu, 3));
  EXPECT_TRUE(index.check_invariants().has_value());
}

TEST(KvBlockIndex, PerEndpointCapEvictsThatEndpointsLeastRecentlyStored) {
  // GIVEN a cap of 3 entries per endpoint
  KvBlockIndex index = make_index(100, 2, 3);
  const BlockHash a[] = {1, 2, 3};
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, a).has_value());
  ASSERT_TRUE(index.apply_stored(1, KvTier::gpu, a).has_value());
  // WHEN endpoint 0 re-stores 1 (refresh) and stores 4
  const BlockHash refresh[] = {1};
  const BlockHash more[] = {4};
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, refresh).has_value());
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, more).has_value());
  // THEN block 2 (its least recently stored) is gone from endpoint 0 only
  EXPECT_FALSE(index.contains(0, KvTier::gpu, 2));
  EXPECT_TRUE(index.contains(0, KvTier::gpu, 1));
  EXPECT_TRUE(index.contains(0, KvTier::gpu, 4));
  EXPECT_TRUE(index.contains(1, KvTier::gpu, 2));
  EXPECT_EQ(index.size(0), 3);
  EXPECT_EQ(index.evictions(), 1u);
  EXPECT_TRUE(index.check_invariants().has_value());
}

TEST(KvBlockIndex, GlobalBoundEvictsFromTheLargestEndpoint) {
  // GIVEN a full index of 6 entries: endpoint 0 holds 4, endpoint 1 holds 2
  KvBlockIndex index = make_index(6, 2);
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, chain(10, 4)).has_value());
  ASSERT_TRUE(index.apply_stored(1, KvTier::gpu, chain(20, 2)).has_value());
  // WHEN endpoint 1 stores one more
  const BlockHash h[] = {30};
  ASSERT_TRUE(index.apply_stored(1, KvTier::gpu, h).has_value());
  // THEN endpoint 0 lost its oldest entry, endpoint 1 kept all of its own
  EXPECT_EQ(index.size(), 6);
  EXPECT_EQ(index.size(0), 3);
  EXPECT_FALSE(index.contains(0, KvTier::gpu, 10));
  EXPECT_EQ(index.size(1), 3);
  EXPECT_TRUE(index.check_invariants().has_value());
}

TEST(KvBlockIndex, MemoryIsAllocatedOnceAndStated) {
  // GIVEN an index of 1,000 entries THEN its footprint is within the per-entry bound documented
  // in kv_block_index.h (48 node + 20 entry + 16..32 table bytes per entry, plus a 20-byte
  // sentinel per endpoint)
  KvBlockIndex index = make_index(1000, 64);
  const std::size_t before = index.memory_bytes();
  EXPECT_LE(before, 1000u * (48 + 20 + 32) + 64u * 20);
  ASSERT_TRUE(index.apply_stored(3, KvTier::gpu, chain(1, 5000)).has_value());
  EXPECT_EQ(index.memory_bytes(), before);
  EXPECT_EQ(index.size(), 1000);
}

// ---- differential test against a reference model -------------------------------------------------

// Reference: per-endpoint recency lists of (hash, tier) and a map from (endpoint, hash, tier) to the
// list position. Same eviction rule as the index: the inserting endpoint's LRU entry when it is at
// its cap, otherwise (global pool full) the LRU entry of the endpoint holding the most entries, the
// inserting endpoint on ties, else the lowest id.
class ReferenceIndex {
 public:
  ReferenceIndex(int endpoints, std::int64_t max_entries, std::int64_t cap)
      : lru_(static_cast<std::size_t>(endpoints)), max_(max_entries), cap_(cap == 0 ? max_entries : cap) {}

  void store(int ep, int tier, BlockHash h) {
    const auto key = std::make_tuple(ep, h, tier);
    auto& list = lru_[static_cast<std::size_t>(ep)];
    if (auto it = where_.find(key); it != where_.end()) {
      list.erase(it->second);
      list.emplace_back(h, tier);
      it->second = std::prev(list.end());
      return;
    }
    if (static_cast<std::int64_t>(list.size()) >= cap_ || total_ >= max_) {
      int victim = ep;
      if (static_cast<std::int64_t>(list.size()) < cap_) {
        for (int e = 0; e < static_cast<int>(lru_.size()); ++e) {
          if (lru_[static_cast<std::size_t>(e)].size() > lru_[static_cast<std::size_t>(victim)].size()) victim = e;
        }
      }
      auto& vl = lru_[static_cast<std::size_t>(victim)];
      where_.erase(std::make_tuple(victim, vl.front().first, vl.front().second));
      vl.pop_front();
      --total_;
    }
    list.emplace_back(h, tier);
    where_[key] = std::prev(list.end());
    ++total_;
  }

  void remove(int ep, int tier, BlockHash h) {
    auto it = where_.find(std::make_tuple(ep, h, tier));
    if (it == where_.end()) return;
    lru_[static_cast<std::size_t>(ep)].erase(it->second);
    where_.erase(it);
    --total_;
  }

  void clear(int ep, int tier) {  // tier -1: all tiers
    auto& list = lru_[static_cast<std::size_t>(ep)];
    for (auto it = list.begin(); it != list.end();) {
      if (tier < 0 || it->second == tier) {
        where_.erase(std::make_tuple(ep, it->first, it->second));
        it = list.erase(it);
        --total_;
      } else {
        ++it;
      }
    }
  }

  PrefixOverlap prefix(int ep, const std::vector<BlockHash>& hashes) const {
    PrefixOverlap o;
    for (const BlockHash h : hashes) {
      int best = -1;
      for (int t = 0; t < kKvTierCount && best < 0; ++t) {
        if (where_.count(std::make_tuple(ep, h, t)) != 0) best = t;
      }
      if (best < 0) break;
      ++o.blocks;
      ++o.by_tier[static_cast<std::size_t>(best)];
    }
    return o;
  }

  std::int64_t total() const { return total_; }
  std::int64_t size(int ep) const { return static_cast<std::int64_t>(lru_[static_cast<std::size_t>(ep)].size()); }

 private:
  using Lru = std::list<std::pair<BlockHash, int>>;
  std::vector<Lru> lru_;
  std::map<std::tuple<int, BlockHash, int>, Lru::iterator> where_;
  std::int64_t max_;
  std::int64_t cap_;
  std::int64_t total_ = 0;
};

struct Shape {
  int endpoints;
  std::int64_t max_entries;
  std::int64_t per_endpoint;
};

class KvBlockIndexDifferential : public ::testing::TestWithParam<std::tuple<unsigned, Shape>> {};

TEST_P(KvBlockIndexDifferential, MatchesReferenceModel) {
  const auto [seed, shape] = GetParam();
  std::mt19937_64 rng(seed);
  KvBlockIndex index = make_index(shape.max_entries, shape.endpoints, shape.per_endpoint);
  ReferenceIndex ref(shape.endpoints, shape.max_entries, shape.per_endpoint);

  // Requests are prefixes of a few "documents" (shared system prompts) of chained hashes, so
  // endpoints share leading blocks and runs diverge at random depths.
  constexpr int kDocs = 12;
  constexpr int kDocBlocks = 24;
  auto doc_prefix = [&](int doc, int n) {
    std::vector<BlockHash> v;
    for (int i = 0; i < n; ++i) v.push_back(static_cast<BlockHash>(doc) * 1000 + static_cast<BlockHash>(i));
    return v;
  };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto pick_tier = [&] {
    const int r = pick(0, 9);  // GPU-heavy, like real event streams
    return r < 6 ? 0 : r < 8 ? 1 : r < 9 ? 2 : 3;
  };

  std::vector<PrefixOverlap> out(static_cast<std::size_t>(shape.endpoints));
  for (int step = 0; step < 4000; ++step) {
    const int op = pick(0, 99);
    const int ep = pick(0, shape.endpoints - 1);
    const int doc = pick(0, kDocs - 1);
    if (op < 45) {  // store a prefix (possibly skipping its first blocks: a partial event)
      const int tier = pick_tier();
      auto hashes = doc_prefix(doc, pick(1, kDocBlocks));
      const int skip = pick(0, 3) == 0 ? pick(0, static_cast<int>(hashes.size()) - 1) : 0;
      std::vector<BlockHash> part(hashes.begin() + skip, hashes.end());
      ASSERT_TRUE(index.apply_stored(static_cast<EndpointId>(ep), static_cast<KvTier>(tier), part).has_value());
      for (const BlockHash h : part) ref.store(ep, tier, h);
    } else if (op < 70) {  // remove a random tail of a document
      const int tier = pick_tier();
      auto hashes = doc_prefix(doc, kDocBlocks);
      std::vector<BlockHash> part(hashes.begin() + pick(0, kDocBlocks - 1), hashes.end());
      ASSERT_TRUE(index.apply_removed(static_cast<EndpointId>(ep), static_cast<KvTier>(tier), part).has_value());
      for (const BlockHash h : part) ref.remove(ep, tier, h);
    } else if (op < 72) {  // AllBlocksCleared / endpoint gone
      EXPECT_EQ(index.clear(static_cast<EndpointId>(ep)), ref.size(ep));
      ref.clear(ep, -1);
    } else if (op < 74) {
      const int tier = pick_tier();
      (void)index.clear(static_cast<EndpointId>(ep), static_cast<KvTier>(tier));
      ref.clear(ep, tier);
    } else {  // query
      auto hashes = doc_prefix(doc, pick(0, kDocBlocks));
      const auto longest = index.longest_prefix(hashes, out);
      std::int32_t ref_longest = 0;
      for (int e = 0; e < shape.endpoints; ++e) {
        const PrefixOverlap want = ref.prefix(e, hashes);
        ASSERT_EQ(out[static_cast<std::size_t>(e)].blocks, want.blocks)
            << "seed " << seed << " step " << step << " ep " << e;
        ASSERT_EQ(out[static_cast<std::size_t>(e)].by_tier, want.by_tier)
            << "seed " << seed << " step " << step << " ep " << e;
        ref_longest = std::max(ref_longest, want.blocks);
      }
      ASSERT_EQ(longest, ref_longest);
    }
    ASSERT_EQ(index.size(), ref.total()) << "seed " << seed << " step " << step;
    ASSERT_LE(index.size(), shape.max_entries);  // bounded, always
    for (int e = 0; e < shape.endpoints; ++e) ASSERT_EQ(index.size(static_cast<EndpointId>(e)), ref.size(e));
    if (step % 97 == 0) {
      auto ok = index.check_invariants();
      ASSERT_TRUE(ok.has_value()) << ok.error();
    }
  }
  auto ok = index.check_invariants();
  ASSERT_TRUE(ok.has_value()) << ok.error();
  EXPECT_GT(index.evictions(), 0u) << "the shapes are small enough that the bounds must bite";
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvBlockIndexDifferential,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u),
                                            ::testing::Values(Shape{4, 40, 0}, Shape{8, 64, 12}, Shape{64, 200, 8},
                                                              Shape{3, 500, 90})));

}  // namespace
}  // namespace disagg
