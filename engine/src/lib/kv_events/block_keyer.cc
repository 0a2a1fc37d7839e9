// block_keyer.cc — see block_keyer.h.
#include "block_keyer.h"

#include <algorithm>
#include <new>

namespace disagg::router {

std::string_view to_string(BlockKeyer::Skip skip) {
  switch (skip) {
    case BlockKeyer::Skip::none: return "none";
    case BlockKeyer::Skip::no_tokens: return "no_tokens";
    case BlockKeyer::Skip::unknown_parent: return "unknown_parent";
    case BlockKeyer::Skip::block_size: return "block_size";
    case BlockKeyer::Skip::beyond_tokens: return "extra_keys";
    case BlockKeyer::Skip::other_group: return "other_group";
  }
  return "unknown";
}

template <class T>
BlockKeyer::Zeroed<T> BlockKeyer::zeroed(std::size_t n) {
  void* p = std::calloc(n, sizeof(T));  // T is an implicit-lifetime aggregate, all zero is its initial state
  if (p == nullptr) throw std::bad_alloc();
  return Zeroed<T>(static_cast<T*>(p));
}

BlockKeyer::BlockKeyer(std::int32_t router_block_size, std::size_t capacity) : router_block_size_(router_block_size) {
  key_cap_ = block_cap_ = std::max<std::size_t>(capacity, kMaxKeysPerBlock);
  std::size_t slots = 2;
  while (slots < 2 * block_cap_) slots *= 2;  // at most half full: short probe runs
  keys_ = zeroed<BlockHash>(key_cap_);
  blocks_ = zeroed<Block>(block_cap_);
  table_ = zeroed<std::uint32_t>(slots);
  mask_ = slots - 1;
}

bool BlockKeyer::routing_group(const KvEventRecord& e) {
  if (e.kind == KvCacheKind::other) return false;
  const std::int32_t g = e.group < 0 ? 0 : e.group;
  if (group_ < 0) group_ = g;
  return g == group_;
}

std::size_t BlockKeyer::home(BlockHash publisher) const {
  // Publisher hashes need not be well mixed (small integers in tests, a builtin hash): mix them.
  std::uint64_t x = publisher;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<std::size_t>(x) & mask_;
}

std::size_t BlockKeyer::find(BlockHash publisher) const {
  for (std::size_t i = home(publisher);; i = (i + 1) & mask_) {
    const std::uint32_t b = table_[i];
    if (b == 0) return static_cast<std::size_t>(-1);
    if (blocks_[b - 1].publisher == publisher) return i;
  }
}

void BlockKeyer::unlink(std::size_t slot) {
  blocks_[table_[slot] - 1].live = false;
  --live_;
  // Backward shift: move later members of the probe run into the hole when their home allows.
  std::size_t hole = slot;
  for (std::size_t i = (slot + 1) & mask_;; i = (i + 1) & mask_) {
    const std::uint32_t b = table_[i];
    if (b == 0) break;
    const std::size_t h = home(blocks_[b - 1].publisher);
    // The member at i may move to the hole if its home is not in (hole, i], cyclically.
    const bool stays = hole <= i ? (h > hole && h <= i) : (h > hole || h <= i);
    if (stays) continue;
    table_[hole] = b;
    hole = i;
  }
  table_[hole] = 0;
}

BlockKeyer::Block& BlockKeyer::append(BlockHash publisher, std::size_t count) {
  // Forget the oldest blocks while either ring lacks room.
  while (block_head_ - block_tail_ == block_cap_ ||
         (block_head_ != block_tail_ && key_head_ + count - blocks_[block_tail_ % block_cap_].key_begin > key_cap_)) {
    const Block& oldest = blocks_[block_tail_ % block_cap_];
    if (oldest.live) unlink(find(oldest.publisher));
    ++block_tail_;
  }
  const auto index = static_cast<std::uint32_t>(block_head_ % block_cap_);
  ++block_head_;
  Block& b = blocks_[index];
  b = Block{publisher, key_head_, static_cast<std::uint8_t>(count), true};
  key_head_ += count;
  std::size_t i = home(publisher);
  while (table_[i] != 0) i = (i + 1) & mask_;
  table_[i] = index + 1;
  ++live_;
  return b;
}

BlockKeyer::Skip BlockKeyer::stored(const KvEventRecord& e, std::span<const BlockHash> hashes,
                                    std::span<const TokenId> tokens, std::vector<BlockHash>& keys,
                                    const BlockKeyer* fallback) {
  if (tokens.empty() || hashes.empty()) return Skip::no_tokens;
  if (!routing_group(e)) return Skip::other_group;
  if (e.keyed_beyond_tokens) return Skip::beyond_tokens;
  const std::size_t per_block = tokens.size() / hashes.size();
  const auto b_r = static_cast<std::size_t>(router_block_size_);
  if ((e.block_size > 0 && per_block != static_cast<std::size_t>(e.block_size)) ||
      per_block * hashes.size() != tokens.size() || per_block % b_r != 0 ||
      per_block / b_r > static_cast<std::size_t>(kMaxKeysPerBlock)) {
    return Skip::block_size;
  }
  BlockHash parent = chain_root(e.lora, e.cache_salt);
  if (e.has_parent) {
    const BlockKeyer* where = this;
    std::size_t slot = find(e.parent);
    if (slot == static_cast<std::size_t>(-1) && fallback != nullptr) {
      where = fallback;
      slot = fallback->find(e.parent);
    }
    if (slot == static_cast<std::size_t>(-1)) return Skip::unknown_parent;
    parent = where->last_key(slot);
  }
  const std::size_t first = keys.size();
  const std::size_t count = per_block / b_r;
  keys.resize(first + hashes.size() * count);
  const std::span<BlockHash> out(keys.data() + first, keys.size() - first);
  hash_blocks(tokens, b_r, parent, out);
  for (std::size_t j = 0; j < hashes.size(); ++j) {
    if (const std::size_t slot = find(hashes[j]); slot != static_cast<std::size_t>(-1)) unlink(slot);
    const Block& b = append(hashes[j], count);
    for (std::size_t k = 0; k < count; ++k) keys_[(b.key_begin + k) % key_cap_] = out[j * count + k];
  }
  return Skip::none;
}

void BlockKeyer::copy_from(const BlockKeyer& other, std::span<const BlockHash> hashes, std::vector<BlockHash>& keys,
                           std::vector<BlockHash>& unknown) {
  for (const BlockHash h : hashes) {
    const std::size_t theirs = other.find(h);
    if (theirs == static_cast<std::size_t>(-1)) {
      unknown.push_back(h);
      continue;
    }
    const Block& src = other.blocks_[other.table_[theirs] - 1];
    const std::size_t first = keys.size();
    for (std::size_t k = 0; k < src.count; ++k) keys.push_back(other.keys_[(src.key_begin + k) % other.key_cap_]);
    if (const std::size_t mine = find(h); mine != static_cast<std::size_t>(-1)) unlink(mine);
    const Block& b = append(h, src.count);
    for (std::size_t k = 0; k < src.count; ++k) keys_[(b.key_begin + k) % key_cap_] = keys[first + k];
  }
}

void BlockKeyer::removed(std::span<const BlockHash> hashes, std::int32_t group, std::vector<BlockHash>& keys) {
  if (group_ >= 0 && (group < 0 ? 0 : group) != group_) return;
  for (const BlockHash h : hashes) {
    const std::size_t slot = find(h);
    if (slot == static_cast<std::size_t>(-1)) continue;
    const Block& b = blocks_[table_[slot] - 1];
    for (std::size_t k = 0; k < b.count; ++k) keys.push_back(keys_[(b.key_begin + k) % key_cap_]);
    // Its ring space is reclaimed when the ring reaches it.
    unlink(slot);
  }
}

bool BlockKeyer::restore(BlockHash publisher, std::span<const BlockHash> keys, std::int32_t group) {
  if (keys.empty() || keys.size() > static_cast<std::size_t>(kMaxKeysPerBlock)) return false;
  if (group >= 0) {
    if (group_ < 0) group_ = group;
    if (group != group_) return false;
  }
  if (const std::size_t slot = find(publisher); slot != static_cast<std::size_t>(-1)) unlink(slot);
  const Block& b = append(publisher, keys.size());
  for (std::size_t k = 0; k < keys.size(); ++k) keys_[(b.key_begin + k) % key_cap_] = keys[k];
  return true;
}

void BlockKeyer::clear() {
  std::fill_n(table_.get(), mask_ + 1, 0U);
  for (std::uint64_t q = block_tail_; q != block_head_; ++q) blocks_[q % block_cap_].live = false;
  key_head_ = block_head_ = block_tail_ = 0;
  live_ = 0;
  group_ = -1;
}

}  // namespace disagg::router
