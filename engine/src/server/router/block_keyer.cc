// block_keyer.cc — see block_keyer.h.
#include "block_keyer.h"

namespace disagg::router {

std::string_view to_string(BlockKeyer::Skip skip) {
  switch (skip) {
    case BlockKeyer::Skip::none: return "none";
    case BlockKeyer::Skip::no_tokens: return "no_tokens";
    case BlockKeyer::Skip::unknown_parent: return "unknown_parent";
    case BlockKeyer::Skip::block_size: return "block_size";
    case BlockKeyer::Skip::beyond_tokens: return "lora_or_extra_keys";
    case BlockKeyer::Skip::other_group: return "other_group";
  }
  return "unknown";
}

BlockKeyer::BlockKeyer(std::int32_t router_block_size, std::size_t capacity)
    : router_block_size_(router_block_size), capacity_(capacity == 0 ? 1 : capacity) {
  map_.reserve(capacity_);
  order_.assign(capacity_, 0);
}

bool BlockKeyer::routing_group(const KvEventRecord& e) {
  if (e.kind == KvCacheKind::other) return false;
  const std::int32_t g = e.group < 0 ? 0 : e.group;
  if (group_ < 0) group_ = g;
  return g == group_;
}

void BlockKeyer::remember(BlockHash publisher_hash, const Entry& entry) {
  auto [it, inserted] = map_.try_emplace(publisher_hash, entry);
  if (!inserted) {
    it->second = entry;
    return;
  }
  // A full ring forgets its oldest hash first (it may have been removed already).
  if (map_.size() > capacity_) map_.erase(order_[next_]);
  order_[next_] = publisher_hash;
  next_ = (next_ + 1) % capacity_;
}

BlockKeyer::Skip BlockKeyer::stored(const KvEventRecord& e, std::span<const BlockHash> hashes,
                                    std::span<const TokenId> tokens, std::vector<BlockHash>& keys) {
  if (tokens.empty() || hashes.empty()) return Skip::no_tokens;
  if (!routing_group(e)) return Skip::other_group;
  if (e.keyed_beyond_tokens) return Skip::beyond_tokens;
  const std::size_t per_block = tokens.size() / hashes.size();
  const auto b_r = static_cast<std::size_t>(router_block_size_);
  if ((e.block_size > 0 && per_block != static_cast<std::size_t>(e.block_size)) || per_block * hashes.size() != tokens.size() ||
      per_block % b_r != 0 || per_block / b_r > static_cast<std::size_t>(kMaxKeysPerBlock)) {
    return Skip::block_size;
  }
  BlockHash parent = kRootBlockHash;
  if (e.has_parent) {
    const auto it = map_.find(e.parent);
    if (it == map_.end() || it->second.count == 0) return Skip::unknown_parent;
    parent = it->second.keys[it->second.count - 1U];
  }
  const std::size_t first = keys.size();
  keys.resize(first + hashes.size() * (per_block / b_r));
  const std::span<BlockHash> out(keys.data() + first, keys.size() - first);
  hash_blocks(tokens, b_r, parent, out);
  for (std::size_t j = 0; j < hashes.size(); ++j) {
    Entry entry;
    entry.count = static_cast<std::uint8_t>(per_block / b_r);
    for (std::size_t k = 0; k < entry.count; ++k) entry.keys[k] = out[j * entry.count + k];
    remember(hashes[j], entry);
  }
  return Skip::none;
}

void BlockKeyer::removed(std::span<const BlockHash> hashes, std::int32_t group, std::vector<BlockHash>& keys) {
  if (group_ >= 0 && (group < 0 ? 0 : group) != group_) return;
  for (const BlockHash h : hashes) {
    const auto it = map_.find(h);
    if (it == map_.end()) continue;
    keys.insert(keys.end(), it->second.keys.begin(), it->second.keys.begin() + it->second.count);
    // The ring slot stays; erasing a hash the ring later names is a no-op.
    map_.erase(it);
  }
}

void BlockKeyer::clear() {
  map_.clear();
  std::fill(order_.begin(), order_.end(), BlockHash{0});
  next_ = 0;
  group_ = -1;
}

}  // namespace disagg::router
