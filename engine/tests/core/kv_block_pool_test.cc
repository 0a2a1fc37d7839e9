// KvBlockPool: crafted cases for each operation, error path and the eviction order.
#include "disagg/kv_block_pool.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace disagg {
namespace {

KvBlockPool make_pool(std::int32_t blocks, std::int32_t block_size = 16) {
  auto pool = KvBlockPool::create(blocks, block_size);
  EXPECT_TRUE(pool.has_value());
  return std::move(*pool);
}

// Plans and commits; returns the block ids (empty when the plan does not fit).
std::vector<BlockId> allocate(KvBlockPool& pool, const std::vector<BlockHash>& hashes, std::int32_t blocks) {
  const PoolPlan plan = pool.plan(hashes, blocks);
  if (!plan.fits) return {};
  std::vector<BlockId> ids(static_cast<std::size_t>(plan.total_blocks()));
  auto n = pool.commit(plan, hashes, ids);
  EXPECT_TRUE(n.has_value());
  return ids;
}

void publish_all(KvBlockPool& pool, const std::vector<BlockId>& ids, const std::vector<BlockHash>& hashes) {
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    auto r = pool.publish(ids[i], hashes[i]);
    ASSERT_TRUE(r.has_value());
  }
}

void expect_sound(const KvBlockPool& pool) {
  auto ok = pool.check_invariants();
  EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error());
}

TEST(KvBlockPool, CreateRefusesBadSizes) {
  EXPECT_EQ(KvBlockPool::create(0, 16).error(), PoolErrc::invalid_capacity);
  EXPECT_EQ(KvBlockPool::create(KvBlockPool::kMaxBlocks + 1, 16).error(), PoolErrc::invalid_capacity);
  EXPECT_EQ(KvBlockPool::create(8, 0).error(), PoolErrc::invalid_block_size);
  EXPECT_EQ(to_string(PoolErrc::stale_plan), "stale_plan");
}

TEST(KvBlockPool, StartsEmptyAndAllocatesInIdOrder) {
  // GIVEN a fresh pool of 8 blocks
  KvBlockPool pool = make_pool(8);
  EXPECT_EQ(pool.free_blocks(), 8);
  EXPECT_EQ(pool.blocks_for_tokens(33), 3);
  // WHEN a request for 3 uncached blocks is planned and committed
  const PoolPlan plan = pool.plan({}, 3);
  EXPECT_TRUE(plan.fits);
  EXPECT_EQ(plan.cached_blocks, 0);
  EXPECT_EQ(plan.new_blocks, 3);
  EXPECT_EQ(plan.evictions, 0);
  std::array<BlockId, 3> ids{};
  ASSERT_EQ(pool.commit(plan, {}, ids).value(), 3);
  // THEN blocks 0..2 are in use once each
  EXPECT_EQ(ids, (std::array<BlockId, 3>{0, 1, 2}));
  EXPECT_EQ(pool.used_blocks(), 3);
  EXPECT_EQ(pool.ref_count(1), 1);
  expect_sound(pool);
}

TEST(KvBlockPool, PlanDoesNotChangeThePool) {
  KvBlockPool pool = make_pool(4);
  const auto before = pool.generation();
  (void)pool.plan({}, 4);
  (void)pool.plan({}, 9);
  EXPECT_EQ(pool.generation(), before);
  EXPECT_EQ(pool.free_blocks(), 4);
}

TEST(KvBlockPool, PublishedPrefixIsReusedAfterRelease) {
  // GIVEN request A with three full blocks published and then released
  KvBlockPool pool = make_pool(8);
  const std::vector<BlockHash> a{11, 12, 13};
  auto ids = allocate(pool, a, 4);  // 3 full blocks + a partial one
  publish_all(pool, ids, a);
  ASSERT_TRUE(pool.release(ids));
  EXPECT_EQ(pool.used_blocks(), 0);
  EXPECT_EQ(pool.free_cached_blocks(), 3);
  // WHEN request B shares the first two blocks
  const std::vector<BlockHash> b{11, 12, 99};
  const PoolPlan plan = pool.plan(b, 5);
  // THEN the two are hits that come back to life, in order, with the same ids
  EXPECT_EQ(plan.cached_blocks, 2);
  EXPECT_EQ(plan.revived_blocks, 2);
  EXPECT_EQ(plan.new_blocks, 3);
  std::vector<BlockId> got(5);
  ASSERT_TRUE(pool.commit(plan, b, got));
  EXPECT_EQ(got[0], ids[0]);
  EXPECT_EQ(got[1], ids[1]);
  EXPECT_EQ(pool.free_cached_blocks(), 1);
  expect_sound(pool);
}

TEST(KvBlockPool, SharedBlocksCountReferences) {
  // GIVEN request A in use with two published blocks
  KvBlockPool pool = make_pool(8);
  const std::vector<BlockHash> h{1, 2};
  auto a = allocate(pool, h, 2);
  publish_all(pool, a, h);
  // WHEN request B hits both while A still runs
  auto b = allocate(pool, h, 3);
  // THEN the shared blocks hold two references, and survive A's release
  EXPECT_EQ(pool.ref_count(a[0]), 2);
  EXPECT_EQ(pool.used_blocks(), 3);
  ASSERT_TRUE(pool.release(a));
  EXPECT_EQ(pool.ref_count(a[0]), 1);
  EXPECT_EQ(pool.free_cached_blocks(), 0);
  ASSERT_TRUE(pool.release(b));
  EXPECT_EQ(pool.used_blocks(), 0);
  EXPECT_EQ(pool.free_cached_blocks(), 2);
  expect_sound(pool);
}

TEST(KvBlockPool, EvictsLeastRecentlyReleasedDeepestBlocksFirst) {
  // GIVEN a full pool of 4: A = {1,2} released first, then B = {3,4}; all cached and free
  KvBlockPool pool = make_pool(4);
  const std::vector<BlockHash> a{1, 2}, b{3, 4};
  auto ia = allocate(pool, a, 2);
  auto ib = allocate(pool, b, 2);
  publish_all(pool, ia, a);
  publish_all(pool, ib, b);
  ASSERT_TRUE(pool.release(ia));
  ASSERT_TRUE(pool.release(ib));
  // WHEN one new block is needed
  const PoolPlan plan = pool.plan({}, 1);
  EXPECT_EQ(plan.evictions, 1);
  auto c = allocate(pool, {}, 1);
  // THEN A's deepest block (hash 2) goes first, and A's root stays
  EXPECT_EQ(c[0], ia[1]);
  EXPECT_FALSE(pool.contains(2));
  EXPECT_TRUE(pool.contains(1));
  // AND a second allocation takes A's root before anything of B
  auto d = allocate(pool, {}, 1);
  EXPECT_EQ(d[0], ia[0]);
  EXPECT_TRUE(pool.contains(3));
  expect_sound(pool);
}

TEST(KvBlockPool, HitsAreNeverEvictedToMakeRoomForTheirOwnRequest) {
  // GIVEN a pool of 4 whose blocks are all free and cached
  KvBlockPool pool = make_pool(4);
  const std::vector<BlockHash> h{1, 2, 3, 4};
  auto ids = allocate(pool, h, 4);
  publish_all(pool, ids, h);
  ASSERT_TRUE(pool.release(ids));
  // WHEN a request hits blocks 1 and 2 and needs 2 new ones
  const std::vector<BlockHash> req{1, 2, 7};
  const PoolPlan plan = pool.plan(req, 4);
  // THEN it fits by evicting exactly the other two
  ASSERT_TRUE(plan.fits);
  EXPECT_EQ(plan.evictions, 2);
  std::vector<BlockId> got(4);
  ASSERT_TRUE(pool.commit(plan, req, got));
  EXPECT_TRUE(pool.contains(1));
  EXPECT_TRUE(pool.contains(2));
  EXPECT_FALSE(pool.contains(3));
  EXPECT_FALSE(pool.contains(4));
  EXPECT_EQ(pool.free_blocks(), 0);
  expect_sound(pool);
}

TEST(KvBlockPool, RefusesWhatDoesNotFitAndStaysUnchanged) {
  // GIVEN 3 of 4 blocks in use
  KvBlockPool pool = make_pool(4);
  auto held = allocate(pool, {}, 3);
  // WHEN 2 more are asked for
  const PoolPlan plan = pool.plan({}, 2);
  // THEN the plan does not fit and commit refuses it
  EXPECT_FALSE(plan.fits);
  std::array<BlockId, 2> out{};
  EXPECT_EQ(pool.commit(plan, {}, out).error(), PoolErrc::out_of_blocks);
  EXPECT_EQ(pool.used_blocks(), 3);
  expect_sound(pool);
}

TEST(KvBlockPool, StalePlansAndShortOutputsAreRefused) {
  KvBlockPool pool = make_pool(4);
  const PoolPlan plan = pool.plan({}, 2);
  std::array<BlockId, 1> small{};
  EXPECT_EQ(pool.commit(plan, {}, small).error(), PoolErrc::output_too_small);
  auto other = allocate(pool, {}, 1);  // any mutation makes the first plan stale
  std::array<BlockId, 2> out{};
  EXPECT_EQ(pool.commit(plan, {}, out).error(), PoolErrc::stale_plan);
  EXPECT_EQ(pool.used_blocks(), 1);
  expect_sound(pool);
}

TEST(KvBlockPool, ReleaseErrorsLeaveThePoolUnchanged) {
  // GIVEN two blocks in use once each
  KvBlockPool pool = make_pool(4);
  auto ids = allocate(pool, {}, 2);
  // WHEN a release names a bad id, or names a block more often than it is referenced
  const std::array<BlockId, 2> bad_id{ids[0], 17};
  const std::array<BlockId, 3> twice{ids[0], ids[1], ids[0]};
  EXPECT_EQ(pool.release(bad_id).error(), PoolErrc::invalid_block);
  EXPECT_EQ(pool.release(twice).error(), PoolErrc::not_in_use);
  // THEN both blocks are still in use once
  EXPECT_EQ(pool.ref_count(ids[0]), 1);
  EXPECT_EQ(pool.ref_count(ids[1]), 1);
  expect_sound(pool);
  // AND a block listed as often as it is referenced is freed exactly once
  ASSERT_TRUE(pool.retain(std::span(ids).first(1)));
  const std::array<BlockId, 3> ok{ids[0], ids[1], ids[0]};
  ASSERT_TRUE(pool.release(ok));
  EXPECT_EQ(pool.free_blocks(), 4);
  EXPECT_EQ(pool.release(ok).error(), PoolErrc::not_in_use);
  expect_sound(pool);
}

TEST(KvBlockPool, PublishRules) {
  KvBlockPool pool = make_pool(4);
  auto ids = allocate(pool, {}, 3);
  EXPECT_EQ(pool.publish(9, 1).error(), PoolErrc::invalid_block);
  EXPECT_EQ(pool.publish(3, 1).error(), PoolErrc::not_in_use);
  EXPECT_TRUE(pool.publish(ids[0], 1).value());
  EXPECT_EQ(pool.publish(ids[0], 2).error(), PoolErrc::already_published);
  // A second block with the same contents is not indexed, and frees as empty.
  EXPECT_FALSE(pool.publish(ids[1], 1).value());
  EXPECT_FALSE(pool.has_hash(ids[1]));
  EXPECT_EQ(pool.find(1), ids[0]);
  ASSERT_TRUE(pool.release(ids));
  EXPECT_EQ(pool.free_cached_blocks(), 1);
  expect_sound(pool);
}

TEST(KvBlockPool, RetainRefusesFreeBlocks) {
  KvBlockPool pool = make_pool(4);
  const std::array<BlockId, 1> free_block{0};
  EXPECT_EQ(pool.retain(free_block).error(), PoolErrc::not_in_use);
  const std::array<BlockId, 1> bad{-1};
  EXPECT_EQ(pool.retain(bad).error(), PoolErrc::invalid_block);
}

class RecordingListener final : public KvPoolListener {
 public:
  std::vector<BlockHash> stored, removed;
  void on_block_stored(BlockHash h) override { stored.push_back(h); }
  void on_block_removed(BlockHash h) override { removed.push_back(h); }
};

TEST(KvBlockPool, ListenerSeesStoresAndRemovals) {
  // GIVEN a listener on a pool of 2
  KvBlockPool pool = make_pool(2);
  RecordingListener events;
  pool.set_listener(&events);
  const std::vector<BlockHash> h{5, 6};
  auto ids = allocate(pool, h, 2);
  publish_all(pool, ids, h);
  ASSERT_TRUE(pool.release(ids));
  // WHEN one block is evicted by allocation and the rest by evict_all_free
  allocate(pool, {}, 1);
  EXPECT_EQ(pool.evict_all_free(), 1);
  // THEN every stored hash was removed once, deepest first
  EXPECT_EQ(events.stored, (std::vector<BlockHash>{5, 6}));
  EXPECT_EQ(events.removed, (std::vector<BlockHash>{6, 5}));
  EXPECT_EQ(pool.cached_blocks(), 0);
  expect_sound(pool);
}

TEST(KvBlockPool, PrivateBlocksAreCachedAndEvictedButNeitherIndexedNorAnnounced) {
  // GIVEN a listener on a pool of 3; a request publishes one shared and two private blocks
  KvBlockPool pool = make_pool(3);
  RecordingListener events;
  pool.set_listener(&events);
  const std::vector<BlockHash> h{5, 6, 7};
  auto ids = allocate(pool, h, 3);
  ASSERT_TRUE(pool.publish(ids[0], h[0]).value());
  ASSERT_TRUE(pool.publish(ids[1], h[1], /*shared=*/false).value());
  ASSERT_TRUE(pool.publish(ids[2], h[2], /*shared=*/false).value());
  // THEN only the shared one is findable and announced, yet all three count as cached
  EXPECT_TRUE(pool.contains(5));
  EXPECT_FALSE(pool.contains(6));
  EXPECT_EQ(pool.cached_blocks(), 3);
  EXPECT_EQ(events.stored, (std::vector<BlockHash>{5}));
  expect_sound(pool);
  // WHEN released, the private blocks wait in the LRU list like cached ones (deepest first) ...
  ASSERT_TRUE(pool.release(ids));
  EXPECT_EQ(pool.free_cached_blocks(), 3);
  const PoolPlan p = pool.plan({}, 2);
  EXPECT_EQ(p.evictions, 2);
  std::vector<BlockId> out(2);
  ASSERT_TRUE(pool.commit(p, {}, out).has_value());
  // THEN ... and are evicted first and silently; the shared block survives
  EXPECT_EQ(out, (std::vector<BlockId>{ids[2], ids[1]}));
  EXPECT_TRUE(pool.contains(5));
  EXPECT_TRUE(events.removed.empty());
  expect_sound(pool);
}

TEST(KvBlockPool, IndexPrivateMakesBlocksFindableWithoutEvents) {
  // GIVEN two private blocks of a request about to be preempted
  KvBlockPool pool = make_pool(4);
  RecordingListener events;
  pool.set_listener(&events);
  const std::vector<BlockHash> h{11, 12};
  auto ids = allocate(pool, h, 2);
  ASSERT_TRUE(pool.publish(ids[0], h[0], false).value());
  ASSERT_TRUE(pool.publish(ids[1], h[1], false).value());
  // WHEN they are indexed and released
  pool.index_private(ids);
  ASSERT_TRUE(pool.release(ids));
  // THEN the request finds both again; evicting them still raises no event
  EXPECT_EQ(pool.match_prefix(h), 2);
  EXPECT_EQ(pool.evict_all_free(), 2);
  EXPECT_FALSE(pool.contains(11));
  EXPECT_TRUE(events.stored.empty());
  EXPECT_TRUE(events.removed.empty());
  expect_sound(pool);
}

TEST(KvBlockPool, IndexSurvivesHeavyChurnOnCollidingSlots) {
  // GIVEN a small pool whose index must probe and shift on every erase
  KvBlockPool pool = make_pool(16, 1);
  BlockHash next = 1;
  for (int round = 0; round < 500; ++round) {
    std::vector<BlockHash> h;
    for (int i = 0; i < 16; ++i) h.push_back(next++);
    auto ids = allocate(pool, h, 16);
    ASSERT_EQ(ids.size(), 16u);
    publish_all(pool, ids, h);
    ASSERT_TRUE(pool.release(ids));
    // THEN after every round the latest 16 hashes (and only they) are found
    for (BlockHash x : h) { ASSERT_TRUE(pool.contains(x)); }
    if (round > 0) { ASSERT_FALSE(pool.contains(h[0] - 1)); }
    expect_sound(pool);
  }
}

}  // namespace
}  // namespace disagg
