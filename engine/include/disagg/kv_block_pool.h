// disagg/kv_block_pool.h — paged KV-cache block pool with a prefix cache.
//
// A fixed number of blocks, each holding `block_size` tokens of KV cache, is sized once by create().
// A block is either
//   in use   (ref_count > 0; shared by every sequence that references it), or
//   free     (ref_count == 0), and then either
//              empty  (no hash: its contents are worthless), or
//              cached (holds a published hash: a later request with the same prefix can reuse it).
// New blocks come from the empty blocks first; when none are left, the least recently released
// cached block is evicted (its hash leaves the index). Reusing a cached free block revives it.
//
// Plan, then apply: plan() is const and says how many leading blocks of a request are cached, how
// many must be allocated and whether they fit; commit() applies a plan made against the current
// state (any mutation in between makes it stale). Nothing here allocates after create(), and no
// method throws. Storage is structure-of-arrays: hash, ref count and free-list links per block,
// plus an open-addressing index from hash to block (load factor <= 0.5) whose 8-byte slots hold the
// block id and a 32-bit fingerprint of the hash: a probe compares fingerprints in the slot array and
// reads the block's hash only on a fingerprint match, and deletion finds home slots without
// touching the blocks (one cache miss per lookup instead of two or more).
//
// Complexity (k = blocks named in the call): plan O(k), commit O(k), release O(k), retain O(k),
// publish O(1), find/contains O(1) expected, evict_all_free O(free cached blocks),
// check_invariants O(total blocks). Memory: 21 bytes per block plus 16 to 32 bytes of index.
// Private blocks (publish(..., shared = false)) skip the index, so they cost no hash-table work.
//
// Not thread-safe: one owner (a worker's scheduler) drives each pool.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/block_hash.h"
#include "disagg/expected.h"

namespace disagg {

/// Index of a block in its pool: 0 <= id < total_blocks().
using BlockId = std::int32_t;

/// Why a pool call was refused. A refused call leaves the pool unchanged.
enum class PoolErrc {
  invalid_capacity,    ///< create(): num_blocks outside [1, KvBlockPool::kMaxBlocks]
  invalid_block_size,  ///< create(): block_size < 1
  out_of_blocks,       ///< commit(): the plan does not fit (plan.fits is false)
  stale_plan,          ///< commit(): the pool changed after the plan was made
  output_too_small,    ///< commit(): `out` is shorter than plan.total_blocks()
  invalid_block,       ///< a block id outside [0, total_blocks())
  not_in_use,          ///< release/retain/publish of a block whose ref count is 0
  already_published,   ///< publish(): the block already holds a hash
};

/// Stable lower-case name of an error code, e.g. "out_of_blocks".
std::string_view to_string(PoolErrc code);

/// Receives prefix-cache changes, e.g. to publish KV events to a router. Called synchronously
/// from the mutating call; must not call back into the pool.
class KvPoolListener {
 public:
  virtual ~KvPoolListener() = default;
  /// A block with `hash` entered the prefix cache (publish()).
  virtual void on_block_stored(BlockHash hash) = 0;
  /// The block with `hash` left the prefix cache (eviction or evict_all_free()).
  virtual void on_block_removed(BlockHash hash) = 0;
};

/// Result of plan(): what commit() would do.
struct PoolPlan {
  std::int32_t cached_blocks = 0;   ///< leading blocks found in the cache (prefix hits)
  std::int32_t new_blocks = 0;      ///< blocks to allocate after the hits
  std::int32_t revived_blocks = 0;  ///< hits that are free now and become in use
  std::int32_t evictions = 0;       ///< cached free blocks evicted to supply new blocks
  bool fits = false;                ///< whether enough free blocks exist
  std::uint64_t generation = 0;     ///< pool state the plan describes

  std::int32_t total_blocks() const { return cached_blocks + new_blocks; }
};

class KvBlockPool {
 public:
  /// Largest pool: keeps every index (including the hash table's) within int32.
  static constexpr std::int32_t kMaxBlocks = 1 << 28;

  /// A pool of `num_blocks` empty blocks of `block_size` tokens. Allocates all storage now.
  /// Failure modes: invalid_capacity, invalid_block_size.
  static Expected<KvBlockPool, PoolErrc> create(std::int32_t num_blocks, std::int32_t block_size);

  std::int32_t block_size() const { return block_size_; }
  std::int32_t total_blocks() const { return num_blocks_; }
  /// Blocks with ref count > 0.
  std::int32_t used_blocks() const { return num_blocks_ - free_empty_ - free_cached_; }
  /// Blocks with ref count 0 (empty or cached); used_blocks() + free_blocks() == total_blocks().
  std::int32_t free_blocks() const { return free_empty_ + free_cached_; }
  /// Free blocks that hold a hash (reusable by a prefix hit, or evictable).
  std::int32_t free_cached_blocks() const { return free_cached_; }
  /// Blocks that hold a hash, in use or free.
  std::int32_t cached_blocks() const { return cached_; }
  /// Bumped by every successful mutation; a plan is valid only for the generation it carries.
  std::uint64_t generation() const { return generation_; }

  /// Blocks needed for `tokens` tokens: ceil(tokens / block_size). Precondition: tokens >= 0.
  std::int32_t blocks_for_tokens(std::int64_t tokens) const {
    return static_cast<std::int32_t>((tokens + block_size_ - 1) / block_size_);
  }

  /// Number of leading hashes of `hashes` held by the cache (the reusable prefix).
  std::int32_t match_prefix(std::span<const BlockHash> hashes) const;

  /// Plans a request that needs `blocks_total` blocks, whose leading full blocks have `hashes`
  /// (hashes beyond blocks_total are ignored). The hits are the longest cached prefix of hashes.
  /// Preconditions: blocks_total >= 0; hashes are distinct (chained hashes are; with repeats the
  /// plan stays safe but `fits` may be pessimistic). Never fails; read `fits`.
  PoolPlan plan(std::span<const BlockHash> hashes, std::int32_t blocks_total) const;

  /// Applies `p`: takes a reference on each hit and allocates p.new_blocks blocks (empty ones
  /// first, then by evicting the least recently released cached blocks). Writes the hits, then the
  /// new blocks, into out[0, p.total_blocks()) and returns p.total_blocks(). New blocks hold no
  /// hash until publish(). `hashes` must be the span the plan was made with.
  /// Failure modes (pool unchanged): stale_plan, out_of_blocks, output_too_small.
  Expected<std::int32_t, PoolErrc> commit(const PoolPlan& p, std::span<const BlockHash> hashes, std::span<BlockId> out);

  /// Records that in-use block `id` now holds the full block with `hash`, making it reusable.
  /// Returns true when indexed; false when another block already holds `hash` (this one then
  /// stays unhashed and is freed as empty). Failure modes: invalid_block, not_in_use,
  /// already_published.
  ///
  /// `shared` false declares the hash private: no sequence but the one holding the block can ever
  /// present it (the caller made it unique, e.g. fresh text or output of a one-shot request). The
  /// block is cached, released and evicted exactly as a shared one, but it is not indexed (find()
  /// and plan() do not see it) and the listener hears of neither its storing nor its eviction,
  /// until index_private() makes it findable. No duplicate check is made; returns true.
  Expected<bool, PoolErrc> publish(BlockId id, BlockHash hash, bool shared = true);

  /// Makes the private blocks among `blocks` findable by their hashes (still not announced), e.g.
  /// before their sequence is preempted, so that it finds them again when readmitted. Other
  /// blocks are skipped. Ids must be valid (precondition).
  void index_private(std::span<const BlockId> blocks);

  /// Takes one more reference on each block (a forked sequence sharing them).
  /// Failure modes (pool unchanged): invalid_block, not_in_use.
  Expected<void, PoolErrc> retain(std::span<const BlockId> blocks);

  /// Drops one reference on each block, last block first, so that when a sequence ends its deepest
  /// blocks become the first to be evicted and shared prefixes stay longest. A block listed k times
  /// loses k references. Failure modes (pool unchanged): invalid_block, not_in_use (including a
  /// block listed more times than it has references).
  Expected<void, PoolErrc> release(std::span<const BlockId> blocks);

  /// Evicts every free cached block (their hashes leave the index); returns how many.
  std::int32_t evict_all_free();

  /// The block holding `hash`, or -1.
  BlockId find(BlockHash hash) const;
  bool contains(BlockHash hash) const { return find(hash) >= 0; }
  /// Precondition: 0 <= id < total_blocks().
  std::int32_t ref_count(BlockId id) const { return ref_[static_cast<std::size_t>(id)]; }
  /// Precondition: 0 <= id < total_blocks().
  bool has_hash(BlockId id) const { return cached_flag_[static_cast<std::size_t>(id)] != 0; }
  /// The block's hash. Precondition: has_hash(id).
  BlockHash hash_of(BlockId id) const { return hash_[static_cast<std::size_t>(id)]; }

  /// Sets the listener of cache changes (nullptr for none). The pool does not own it.
  void set_listener(KvPoolListener* listener) { listener_ = listener; }

  /// Checks every structural invariant (counts, free lists, index, ref counts); returns a
  /// description of the first violation. For tests: O(total blocks).
  Expected<void, std::string> check_invariants() const;

 private:
  KvBlockPool() = default;

  // Free lists are circular, doubly linked through prev_/next_, with sentinel nodes after the
  // blocks: kEmptyList holds free unhashed blocks, kLruList free cached blocks (head = oldest).
  std::int32_t empty_head() const { return num_blocks_; }
  std::int32_t lru_head() const { return num_blocks_ + 1; }
  void list_push_back(std::int32_t head, std::int32_t id);
  void list_unlink(std::int32_t id);

  // One index slot: the block id (kNoSlot when empty) and the upper half of the mixed hash, whose
  // low bits are also the home slot.
  struct Slot {
    std::uint32_t fingerprint;
    BlockId id;
  };
  static std::uint32_t fingerprint_of(BlockHash hash);
  void index_erase(BlockId id);
  /// Slot where `hash` is or would be inserted; *found = the block holding it, or kNoSlot.
  std::size_t probe(BlockHash hash, BlockId* found) const;
  void evict(BlockId id);
  bool check_ids(std::span<const BlockId> blocks) const;

  std::int32_t num_blocks_ = 0;
  std::int32_t block_size_ = 0;
  std::int32_t free_empty_ = 0;
  std::int32_t free_cached_ = 0;
  std::int32_t cached_ = 0;
  std::uint64_t generation_ = 0;
  KvPoolListener* listener_ = nullptr;

  // Per block (structure of arrays).
  std::vector<BlockHash> hash_;
  std::vector<std::int32_t> ref_;
  // 0 no hash; kShared indexed and announced; kIndexedPrivate indexed, not announced; kPrivate
  // neither.
  std::vector<std::uint8_t> cached_flag_;
  static constexpr std::uint8_t kShared = 1, kIndexedPrivate = 2, kPrivate = 3;
  std::int32_t unindexed_ = 0;  // blocks in state kPrivate
  // Per block plus the two sentinels.
  std::vector<std::int32_t> prev_;
  std::vector<std::int32_t> next_;
  // Open-addressing index: linear probing with backward-shift deletion.
  std::vector<Slot> slots_;
  std::size_t slot_mask_ = 0;
};

}  // namespace disagg
