// disagg/kv_tier_cache.h — one lower KV tier's contents: a bounded LRU set of block hashes.
//
// A lower tier (a worker's host memory or local disk, or a store shared by several workers) holds
// copies of full KV blocks by their chained hash. Only which hashes it holds matters to the
// simulator (the bytes are never materialized), so a tier is a set of hashes with LRU eviction:
// inserting into a full tier drops the least recently used hash, and a hit (touch) refreshes it.
//
// Each held hash carries the time its write completes (`ready_at`): holds(hash, now) is true only
// from then on, so a block offloaded a moment ago is not readable before its bytes could have
// landed (the write-then-read order of vLLM's OffloadingConnector and LMCache stores).
//
// Built on KvBlockPool (an LRU of free cached blocks is exactly an LRU hash set): insert is
// commit + publish + release of one block, touch is commit of the hit + release, so every slot
// and the hash index are sized once by create() and no call allocates afterwards. Evictions are
// reported to the listener (e.g. the router's index), as are stores of announced hashes.
//
// Complexity: holds / touch / insert O(1) expected; check_invariants O(capacity).
// Memory: about 45 to 61 bytes per block of capacity (the pool's 37 to 53, plus 8 for ready_at).
// Not thread-safe: one owner (the simulator) drives each tier.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "disagg/expected.h"
#include "disagg/kv_block_pool.h"

namespace disagg {

class KvTierCache {
 public:
  /// Largest tier, in blocks (the pool's bound).
  static constexpr std::int64_t kMaxBlocks = KvBlockPool::kMaxBlocks;

  /// An empty tier of `capacity_blocks` blocks, all storage allocated now.
  /// Failure: invalid_capacity (capacity outside [1, kMaxBlocks]).
  static Expected<KvTierCache, PoolErrc> create(std::int64_t capacity_blocks);

  std::int32_t capacity_blocks() const { return pool_.total_blocks(); }
  /// Hashes held (readable or still being written).
  std::int32_t size() const { return pool_.cached_blocks(); }

  /// Whether `hash` is held and its write completed at or before `now`. Const: no LRU refresh.
  bool holds(BlockHash hash, double now) const {
    const BlockId id = pool_.find(hash);
    return id >= 0 && ready_at_[static_cast<std::size_t>(id)] <= now;
  }
  /// Whether `hash` is held at all (written or being written).
  bool contains(BlockHash hash) const { return pool_.contains(hash); }

  /// Makes `hash` the most recently used. Returns false (and changes nothing) when not held.
  bool touch(BlockHash hash);

  /// Adds `hash`, readable from `ready_at`, as the most recently used, evicting the least recently
  /// used hash when the tier is full. A hash already held is only touched (its ready time is kept:
  /// the first write wins). `announce` false keeps it from the listener (a hash only its own
  /// sequence can present); it is still findable. Returns true when the hash was added.
  bool insert(BlockHash hash, double ready_at, bool announce);

  /// Receives stores (of announced hashes) and evictions; nullptr for none. Not owned.
  void set_listener(KvPoolListener* listener) { pool_.set_listener(listener); }

  /// Structural checks (every slot free, the pool's invariants). For tests: O(capacity).
  Expected<void, std::string> check_invariants() const;

 private:
  explicit KvTierCache(KvBlockPool pool);

  KvBlockPool pool_;
  std::vector<double> ready_at_;  // per block id of pool_
};

}  // namespace disagg
