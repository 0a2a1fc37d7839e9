#include "disagg/kv_tier_cache.h"

#include <span>
#include <utility>

namespace disagg {

Expected<KvTierCache, PoolErrc> KvTierCache::create(std::int64_t capacity_blocks) {
  if (capacity_blocks < 1 || capacity_blocks > kMaxBlocks) return unexpected(PoolErrc::invalid_capacity);
  // Block size 1: the pool counts blocks here, never tokens.
  auto pool = KvBlockPool::create(static_cast<std::int32_t>(capacity_blocks), 1);
  if (!pool) return unexpected(pool.error());
  return KvTierCache(std::move(*pool));
}

KvTierCache::KvTierCache(KvBlockPool pool)
    : pool_(std::move(pool)), ready_at_(static_cast<std::size_t>(pool_.total_blocks()), 0.0) {}

bool KvTierCache::touch(BlockHash hash) {
  // Every block of a tier is free (ref 0), so a hit revives one block and releasing it puts it
  // at the most recently used end of the pool's LRU list.
  const PoolPlan p = pool_.plan(std::span<const BlockHash>(&hash, 1), 1);
  if (p.cached_blocks != 1) return false;
  BlockId id = -1;
  auto done = pool_.commit(p, std::span<const BlockHash>(&hash, 1), std::span<BlockId>(&id, 1));
  if (!done) return false;
  auto released = pool_.release(std::span<const BlockId>(&id, 1));
  (void)released;  // cannot fail: the commit just took the only reference
  return true;
}

bool KvTierCache::insert(BlockHash hash, double ready_at, bool announce) {
  if (touch(hash)) return false;
  // One new block: an empty one while any is left, else the least recently used is evicted.
  const PoolPlan p = pool_.plan({}, 1);
  BlockId id = -1;
  auto done = pool_.commit(p, {}, std::span<BlockId>(&id, 1));
  if (!done) return false;  // cannot happen: every block of a tier is free
  auto published = pool_.publish(id, hash, announce);
  (void)published;  // cannot fail or collide: the block is in use and the hash was not held
  // A private hash must still be findable (its own sequence reloads it after a preemption).
  if (!announce) pool_.index_private(std::span<const BlockId>(&id, 1));
  ready_at_[static_cast<std::size_t>(id)] = ready_at;
  auto released = pool_.release(std::span<const BlockId>(&id, 1));
  (void)released;
  return true;
}

Expected<void, std::string> KvTierCache::check_invariants() const {
  if (auto ok = pool_.check_invariants(); !ok) return ok;
  if (pool_.used_blocks() != 0) {
    return unexpected("tier holds " + std::to_string(pool_.used_blocks()) + " blocks in use; every block must be free");
  }
  if (pool_.cached_blocks() != pool_.free_cached_blocks()) return unexpected(std::string("tier cached count drifted"));
  return {};
}

}  // namespace disagg
