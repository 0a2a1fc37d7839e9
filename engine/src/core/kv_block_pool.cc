#include "disagg/kv_block_pool.h"

#include <algorithm>

namespace disagg {

std::string_view to_string(PoolErrc code) {
  switch (code) {
    case PoolErrc::invalid_capacity: return "invalid_capacity";
    case PoolErrc::invalid_block_size: return "invalid_block_size";
    case PoolErrc::out_of_blocks: return "out_of_blocks";
    case PoolErrc::stale_plan: return "stale_plan";
    case PoolErrc::output_too_small: return "output_too_small";
    case PoolErrc::invalid_block: return "invalid_block";
    case PoolErrc::not_in_use: return "not_in_use";
    case PoolErrc::already_published: return "already_published";
  }
  return "unknown";
}

namespace {

constexpr BlockId kNoBlock = -1;

// Callers may pass weak hashes (sequential ids in tests, truncated digests): mix before masking.
// The upper 32 bits of the product are the fingerprint; its low bits pick the home slot (the
// table never exceeds 2^30 slots), the rest tell hashes apart without reading the block.
constexpr std::uint32_t spread32(std::uint64_t x) noexcept {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 29;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return static_cast<std::uint32_t>(x >> 32);
}

}  // namespace

Expected<KvBlockPool, PoolErrc> KvBlockPool::create(std::int32_t num_blocks, std::int32_t block_size) {
  if (num_blocks < 1 || num_blocks > kMaxBlocks) return unexpected(PoolErrc::invalid_capacity);
  if (block_size < 1) return unexpected(PoolErrc::invalid_block_size);
  KvBlockPool pool;
  const auto n = static_cast<std::size_t>(num_blocks);
  pool.num_blocks_ = num_blocks;
  pool.block_size_ = block_size;
  pool.hash_.assign(n, 0);
  pool.ref_.assign(n, 0);
  pool.cached_flag_.assign(n, 0);
  pool.prev_.assign(n + 2, 0);
  pool.next_.assign(n + 2, 0);
  for (std::int32_t head : {pool.empty_head(), pool.lru_head()}) {
    pool.prev_[static_cast<std::size_t>(head)] = head;
    pool.next_[static_cast<std::size_t>(head)] = head;
  }
  // Ids in ascending order, so that allocation order is predictable (and matches the reference
  // model in the tests).
  for (std::int32_t id = 0; id < num_blocks; ++id) pool.list_push_back(pool.empty_head(), id);
  pool.free_empty_ = num_blocks;
  std::size_t slots = 1;
  while (slots < 2 * n) slots <<= 1;
  pool.slots_.assign(slots, Slot{0, kNoBlock});
  pool.slot_mask_ = slots - 1;
  return pool;
}

void KvBlockPool::list_push_back(std::int32_t head, std::int32_t id) {
  const auto h = static_cast<std::size_t>(head);
  const auto i = static_cast<std::size_t>(id);
  const std::int32_t tail = prev_[h];
  prev_[i] = tail;
  next_[i] = head;
  next_[static_cast<std::size_t>(tail)] = id;
  prev_[h] = id;
}

void KvBlockPool::list_unlink(std::int32_t id) {
  const auto i = static_cast<std::size_t>(id);
  next_[static_cast<std::size_t>(prev_[i])] = next_[i];
  prev_[static_cast<std::size_t>(next_[i])] = prev_[i];
  prev_[i] = next_[i] = id;
}

std::uint32_t KvBlockPool::fingerprint_of(BlockHash hash) {
  return spread32(hash);
}

std::size_t KvBlockPool::probe(BlockHash hash, BlockId* found) const {
  const std::uint32_t fp = fingerprint_of(hash);
  for (std::size_t s = fp & slot_mask_;; s = (s + 1) & slot_mask_) {
    const Slot slot = slots_[s];
    if (slot.id == kNoBlock || (slot.fingerprint == fp && hash_[static_cast<std::size_t>(slot.id)] == hash)) {
      *found = slot.id;
      return s;
    }
  }
}

BlockId KvBlockPool::find(BlockHash hash) const {
  BlockId id = kNoBlock;
  probe(hash, &id);
  return id;
}

void KvBlockPool::index_erase(BlockId id) {
  std::size_t s = fingerprint_of(hash_[static_cast<std::size_t>(id)]) & slot_mask_;
  while (slots_[s].id != id) s = (s + 1) & slot_mask_;
  // Backward-shift deletion: move later entries of the probe run into the hole when their home
  // slot does not lie cyclically in (hole, current], so lookups never need tombstones. Homes come
  // from the fingerprints: no block is read.
  std::size_t hole = s;
  for (std::size_t j = (hole + 1) & slot_mask_;; j = (j + 1) & slot_mask_) {
    const Slot moved = slots_[j];
    if (moved.id == kNoBlock) break;
    const std::size_t home = moved.fingerprint & slot_mask_;
    const bool home_in_range = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!home_in_range) {
      slots_[hole] = moved;
      hole = j;
    }
  }
  slots_[hole] = Slot{0, kNoBlock};
}

void KvBlockPool::evict(BlockId id) {
  // Precondition: id is a free cached block.
  list_unlink(id);
  const std::uint8_t flag = cached_flag_[static_cast<std::size_t>(id)];
  if (flag == kPrivate) {
    --unindexed_;
  } else {
    index_erase(id);
  }
  const bool announced = flag == kShared;
  cached_flag_[static_cast<std::size_t>(id)] = 0;
  --free_cached_;
  --cached_;
  if (listener_ != nullptr && announced) listener_->on_block_removed(hash_[static_cast<std::size_t>(id)]);
}

std::int32_t KvBlockPool::match_prefix(std::span<const BlockHash> hashes) const {
  std::int32_t hits = 0;
  for (BlockHash h : hashes) {
    if (find(h) == kNoBlock) break;
    ++hits;
  }
  return hits;
}

PoolPlan KvBlockPool::plan(std::span<const BlockHash> hashes, std::int32_t blocks_total) const {
  PoolPlan p;
  p.generation = generation_;
  blocks_total = std::max(blocks_total, 0);
  const std::size_t considered = std::min(hashes.size(), static_cast<std::size_t>(blocks_total));
  for (std::size_t i = 0; i < considered; ++i) {
    const BlockId id = find(hashes[i]);
    if (id == kNoBlock) break;
    ++p.cached_blocks;
    if (ref_[static_cast<std::size_t>(id)] == 0) ++p.revived_blocks;
  }
  p.new_blocks = blocks_total - p.cached_blocks;
  const std::int64_t available = static_cast<std::int64_t>(free_empty_) + free_cached_ - p.revived_blocks;
  p.fits = p.new_blocks <= available;
  p.evictions = p.fits ? std::max(0, p.new_blocks - free_empty_) : 0;
  return p;
}

Expected<std::int32_t, PoolErrc> KvBlockPool::commit(const PoolPlan& p, std::span<const BlockHash> hashes,
                                                     std::span<BlockId> out) {
  if (p.generation != generation_) return unexpected(PoolErrc::stale_plan);
  if (!p.fits) return unexpected(PoolErrc::out_of_blocks);
  if (out.size() < static_cast<std::size_t>(p.total_blocks())) { return unexpected(PoolErrc::output_too_small); }
  if (hashes.size() < static_cast<std::size_t>(p.cached_blocks)) {
    // Not the span the plan was made with; refuse rather than guess.
    return unexpected(PoolErrc::stale_plan);
  }
  // Revive hits first, so that allocating the new blocks cannot evict them.
  for (std::int32_t i = 0; i < p.cached_blocks; ++i) {
    const BlockId id = find(hashes[static_cast<std::size_t>(i)]);
    const auto u = static_cast<std::size_t>(id);
    if (ref_[u]++ == 0) {
      list_unlink(id);
      --free_cached_;
    }
    out[static_cast<std::size_t>(i)] = id;
  }
  for (std::int32_t i = 0; i < p.new_blocks; ++i) {
    BlockId id;
    if (free_empty_ > 0) {
      id = next_[static_cast<std::size_t>(empty_head())];
      list_unlink(id);
      --free_empty_;
    } else {
      id = next_[static_cast<std::size_t>(lru_head())];
      evict(id);
    }
    ref_[static_cast<std::size_t>(id)] = 1;
    out[static_cast<std::size_t>(p.cached_blocks + i)] = id;
  }
  ++generation_;
  return p.total_blocks();
}

Expected<bool, PoolErrc> KvBlockPool::publish(BlockId id, BlockHash hash, bool shared) {
  if (id < 0 || id >= num_blocks_) return unexpected(PoolErrc::invalid_block);
  const auto u = static_cast<std::size_t>(id);
  if (ref_[u] == 0) return unexpected(PoolErrc::not_in_use);
  if (cached_flag_[u] != 0) return unexpected(PoolErrc::already_published);
  if (!shared) {
    // Nobody else can present this hash: no index, no duplicate check, no event.
    ++generation_;
    hash_[u] = hash;
    cached_flag_[u] = kPrivate;
    ++cached_;
    ++unindexed_;
    return true;
  }
  // One probe: a duplicate ends it; otherwise the empty slot ending it is where the hash goes.
  BlockId existing = kNoBlock;
  const std::size_t s = probe(hash, &existing);
  if (existing != kNoBlock) return false;
  ++generation_;
  hash_[u] = hash;
  cached_flag_[u] = kShared;
  slots_[s] = Slot{fingerprint_of(hash), id};
  ++cached_;
  if (listener_ != nullptr) listener_->on_block_stored(hash);
  return true;
}

void KvBlockPool::index_private(std::span<const BlockId> blocks) {
  for (const BlockId id : blocks) {
    const auto u = static_cast<std::size_t>(id);
    if (cached_flag_[u] != kPrivate) continue;
    BlockId existing = kNoBlock;
    const std::size_t s = probe(hash_[u], &existing);
    --unindexed_;
    if (existing != kNoBlock) {
      // Cannot happen for truly private hashes; stay consistent anyway: drop this block's hash
      // (a free one then moves from the cached list to the empty one).
      cached_flag_[u] = 0;
      --cached_;
      if (ref_[u] == 0) {
        list_unlink(id);
        --free_cached_;
        list_push_back(empty_head(), id);
        ++free_empty_;
      }
      continue;
    }
    cached_flag_[u] = kIndexedPrivate;
    slots_[s] = Slot{fingerprint_of(hash_[u]), id};
  }
  ++generation_;
}

bool KvBlockPool::check_ids(std::span<const BlockId> blocks) const {
  return std::all_of(blocks.begin(), blocks.end(), [this](BlockId id) { return id >= 0 && id < num_blocks_; });
}

Expected<void, PoolErrc> KvBlockPool::retain(std::span<const BlockId> blocks) {
  if (!check_ids(blocks)) return unexpected(PoolErrc::invalid_block);
  for (BlockId id : blocks) {
    if (ref_[static_cast<std::size_t>(id)] == 0) return unexpected(PoolErrc::not_in_use);
  }
  for (BlockId id : blocks) ++ref_[static_cast<std::size_t>(id)];
  ++generation_;
  return {};
}

Expected<void, PoolErrc> KvBlockPool::release(std::span<const BlockId> blocks) {
  if (!check_ids(blocks)) return unexpected(PoolErrc::invalid_block);
  // Pass 1: drop the references, undoing them all if a block runs out (listed too often), so
  // that a refused call leaves the pool unchanged without a scratch buffer.
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    std::int32_t& ref = ref_[static_cast<std::size_t>(blocks[i])];
    if (ref == 0) {
      for (std::size_t j = 0; j < i; ++j) ++ref_[static_cast<std::size_t>(blocks[j])];
      return unexpected(PoolErrc::not_in_use);
    }
    --ref;
  }
  // Pass 2, last block first: blocks that reached 0 join a free list. A block listed twice is
  // seen twice; the cached flag on its list links tells whether it was already moved.
  for (std::size_t i = blocks.size(); i-- > 0;) {
    const BlockId id = blocks[i];
    const auto u = static_cast<std::size_t>(id);
    if (ref_[u] != 0 || prev_[u] != id) continue;  // still in use, or already on a free list
    if (cached_flag_[u] != 0) {
      list_push_back(lru_head(), id);
      ++free_cached_;
    } else {
      list_push_back(empty_head(), id);
      ++free_empty_;
    }
  }
  ++generation_;
  return {};
}

std::int32_t KvBlockPool::evict_all_free() {
  std::int32_t n = 0;
  while (free_cached_ > 0) {
    const BlockId id = next_[static_cast<std::size_t>(lru_head())];
    evict(id);
    list_push_back(empty_head(), id);
    ++free_empty_;
    ++n;
  }
  if (n > 0) ++generation_;
  return n;
}

Expected<void, std::string> KvBlockPool::check_invariants() const {
  auto fail = [](std::string what) { return unexpected(std::move(what)); };
  std::int32_t used = 0, cached = 0, free_cached = 0, unindexed = 0;
  for (std::int32_t id = 0; id < num_blocks_; ++id) {
    const auto u = static_cast<std::size_t>(id);
    if (ref_[u] < 0) return fail("block " + std::to_string(id) + " has a negative ref count");
    if (ref_[u] > 0) {
      ++used;
      if (prev_[u] != id || next_[u] != id) {
        return fail("in-use block " + std::to_string(id) + " is on a free list");
      }
    }
    if (cached_flag_[u] != 0) {
      ++cached;
      if (cached_flag_[u] == kPrivate) {
        ++unindexed;
      } else if (find(hash_[u]) != id) {
        return fail("cached block " + std::to_string(id) + " is not found by its hash");
      }
      if (ref_[u] == 0) ++free_cached;
    }
  }
  // Walk both free lists and check their membership and lengths.
  auto walk = [&](std::int32_t head, bool want_cached, std::int32_t want_len) -> std::string {
    std::int32_t len = 0;
    std::int32_t prev = head;
    for (std::int32_t id = next_[static_cast<std::size_t>(head)]; id != head;
         id = next_[static_cast<std::size_t>(id)]) {
      if (id < 0 || id >= num_blocks_) return "free list holds bad id " + std::to_string(id);
      const auto u = static_cast<std::size_t>(id);
      if (prev_[u] != prev) return "free list link broken at " + std::to_string(id);
      if (ref_[u] != 0) return "in-use block " + std::to_string(id) + " on a free list";
      if ((cached_flag_[u] != 0) != want_cached) { return "block " + std::to_string(id) + " on the wrong free list"; }
      prev = id;
      if (++len > num_blocks_) return "free list cycles";
    }
    if (len != want_len) {
      return "free list length " + std::to_string(len) + " != counter " + std::to_string(want_len);
    }
    return {};
  };
  if (auto e = walk(empty_head(), false, free_empty_); !e.empty()) return fail(e);
  if (auto e = walk(lru_head(), true, free_cached_); !e.empty()) return fail(e);
  if (used + free_empty_ + free_cached_ != num_blocks_) return fail("used + free != total");
  if (used != used_blocks()) return fail("used counter drifted");
  if (cached != cached_) return fail("cached counter drifted");
  if (free_cached != free_cached_) return fail("free cached counter drifted");
  std::int32_t indexed = 0;
  for (const Slot& slot : slots_) {
    const BlockId id = slot.id;
    if (id == kNoBlock) continue;
    ++indexed;
    if (id < 0 || id >= num_blocks_ || cached_flag_[static_cast<std::size_t>(id)] == 0) {
      return fail("index holds a block without a hash");
    }
    if (slot.fingerprint != fingerprint_of(hash_[static_cast<std::size_t>(id)])) {
      return fail("index slot of block " + std::to_string(id) + " has a stale fingerprint");
    }
  }
  if (unindexed != unindexed_) return fail("private block counter drifted");
  if (indexed != cached_ - unindexed_) return fail("index size != cached blocks - private ones");
  return {};
}

}  // namespace disagg
