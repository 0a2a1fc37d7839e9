// kv_block_index.cc — see disagg/kv_block_index.h for the contract and the storage layout.
#include "disagg/kv_block_index.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace disagg {

namespace {

constexpr std::int64_t kMaxIndexEntries = std::int64_t{1} << 28;

bool valid_tier(KvTier tier) { return static_cast<int>(tier) < kKvTierCount; }

// Calls f(bit) for every set bit of `mask`, lowest first.
template <class F>
void for_each_bit(std::uint64_t mask, F&& f) {
  while (mask != 0) {
    f(std::countr_zero(mask));
    mask &= mask - 1;
  }
}

}  // namespace

std::string_view to_string(KvTier tier) {
  switch (tier) {
    case KvTier::gpu: return "gpu";
    case KvTier::cpu: return "cpu";
    case KvTier::disk: return "disk";
    case KvTier::remote: return "remote";
  }
  return "unknown";
}

std::string_view to_string(IndexErrc code) {
  switch (code) {
    case IndexErrc::invalid_config: return "invalid_config";
    case IndexErrc::invalid_endpoint: return "invalid_endpoint";
    case IndexErrc::invalid_tier: return "invalid_tier";
  }
  return "unknown";
}

Expected<KvBlockIndex, IndexErrc> KvBlockIndex::create(const KvIndexConfig& config) {
  if (config.max_endpoints < 1 || config.max_endpoints > kMaxRoutingEndpoints ||
      config.max_entries < 1 || config.max_entries > kMaxIndexEntries ||
      config.max_entries_per_endpoint < 0 ||
      config.max_entries_per_endpoint > config.max_entries) {
    return unexpected(IndexErrc::invalid_config);
  }
  KvBlockIndex index;
  index.config_ = config;
  index.per_endpoint_cap_ =
      config.max_entries_per_endpoint == 0 ? config.max_entries : config.max_entries_per_endpoint;
  const auto n = static_cast<std::size_t>(config.max_entries);
  const auto lists = n + static_cast<std::size_t>(config.max_endpoints);

  index.nodes_.assign(n, Node{});
  index.node_cpu_mask_.assign(n, 0);
  index.node_disk_mask_.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) index.nodes_[i].head = static_cast<std::int32_t>(i + 1);
  index.nodes_[n - 1].head = -1;
  index.free_node_ = 0;

  index.entry_node_.assign(n, -1);
  index.entry_endpoint_.assign(n, 0);
  index.entry_tier_.assign(n, 0);
  index.entry_next_.resize(n);
  for (std::size_t i = 0; i < n; ++i) index.entry_next_[i] = static_cast<std::int32_t>(i + 1);
  index.entry_next_[n - 1] = -1;
  index.free_entry_ = 0;
  index.lru_prev_.assign(lists, -1);
  index.lru_next_.assign(lists, -1);
  for (std::size_t s = n; s < lists; ++s) {  // empty circular lists: sentinels point at themselves
    index.lru_prev_[s] = static_cast<std::int32_t>(s);
    index.lru_next_[s] = static_cast<std::int32_t>(s);
  }

  // Load factor <= 0.5: at least 2 slots per possible node, rounded up to a power of two.
  const std::size_t slots = std::bit_ceil(2 * n);
  index.slots_.assign(slots, -1);
  index.slot_mask_ = slots - 1;
  return index;
}

std::size_t KvBlockIndex::slot_of(BlockHash hash) const noexcept {
  // vLLM's hashes are uniform, but our own test hashes need not be: mix (splitmix64 finalizer).
  hash ^= hash >> 30;
  hash *= 0xbf58476d1ce4e5b9ULL;
  hash ^= hash >> 27;
  hash *= 0x94d049bb133111ebULL;
  hash ^= hash >> 31;
  return static_cast<std::size_t>(hash) & slot_mask_;
}

std::int32_t KvBlockIndex::find_node(BlockHash hash) const noexcept {
  for (std::size_t s = slot_of(hash);; s = (s + 1) & slot_mask_) {
    const std::int32_t node = slots_[s];
    if (node < 0) return -1;
    if (nodes_[static_cast<std::size_t>(node)].hash == hash) return node;
  }
}

std::int32_t KvBlockIndex::find_entry(std::int32_t node, EndpointId endpoint,
                                      KvTier tier) const noexcept {
  for (std::int32_t e = nodes_[static_cast<std::size_t>(node)].head; e >= 0;
       e = entry_next_[static_cast<std::size_t>(e)]) {
    const auto i = static_cast<std::size_t>(e);
    if (entry_endpoint_[i] == endpoint && entry_tier_[i] == static_cast<std::uint8_t>(tier)) return e;
  }
  return -1;
}

std::int32_t KvBlockIndex::node_for_insert(BlockHash hash) {
  std::size_t s = slot_of(hash);
  for (;; s = (s + 1) & slot_mask_) {
    const std::int32_t node = slots_[s];
    if (node < 0) break;
    if (nodes_[static_cast<std::size_t>(node)].hash == hash) return node;
  }
  // Caller guarantees a free node: live nodes <= live entries < max_entries.
  const std::int32_t node = free_node_;
  const auto i = static_cast<std::size_t>(node);
  free_node_ = nodes_[i].head;
  nodes_[i].hash = hash;
  nodes_[i].gpu = 0;
  nodes_[i].lower = 0;
  nodes_[i].head = -1;
  node_cpu_mask_[i] = 0;
  node_disk_mask_[i] = 0;
  slots_[s] = node;
  ++used_nodes_;
  return node;
}

void KvBlockIndex::table_erase(std::int32_t node) {
  std::size_t hole = slot_of(nodes_[static_cast<std::size_t>(node)].hash);
  while (slots_[hole] != node) hole = (hole + 1) & slot_mask_;
  // Backward-shift deletion keeps every probe sequence unbroken without tombstones.
  for (std::size_t s = (hole + 1) & slot_mask_;; s = (s + 1) & slot_mask_) {
    const std::int32_t other = slots_[s];
    if (other < 0) break;
    const std::size_t home = slot_of(nodes_[static_cast<std::size_t>(other)].hash);
    // Move `other` into the hole unless its home lies cyclically in (hole, s].
    const bool stays = hole <= s ? (hole < home && home <= s) : (hole < home || home <= s);
    if (!stays) {
      slots_[hole] = other;
      hole = s;
    }
  }
  slots_[hole] = -1;
}

void KvBlockIndex::lru_unlink(std::int32_t entry) {
  const auto i = static_cast<std::size_t>(entry);
  lru_next_[static_cast<std::size_t>(lru_prev_[i])] = lru_next_[i];
  lru_prev_[static_cast<std::size_t>(lru_next_[i])] = lru_prev_[i];
}

void KvBlockIndex::lru_push_back(EndpointId endpoint, std::int32_t entry) {
  const auto head = static_cast<std::int32_t>(config_.max_entries) + endpoint;
  const auto h = static_cast<std::size_t>(head);
  const std::int32_t last = lru_prev_[h];
  const auto i = static_cast<std::size_t>(entry);
  lru_prev_[i] = last;
  lru_next_[i] = head;
  lru_next_[static_cast<std::size_t>(last)] = entry;
  lru_prev_[h] = entry;
}

void KvBlockIndex::refresh_node_masks(std::int32_t node) {
  std::array<std::uint64_t, kKvTierCount> masks{};
  const auto n = static_cast<std::size_t>(node);
  for (std::int32_t e = nodes_[n].head; e >= 0; e = entry_next_[static_cast<std::size_t>(e)]) {
    const auto i = static_cast<std::size_t>(e);
    masks[entry_tier_[i]] |= std::uint64_t{1} << entry_endpoint_[i];
  }
  nodes_[n].gpu = masks[0];
  nodes_[n].lower = masks[1] | masks[2] | masks[3];
  node_cpu_mask_[n] = masks[1];
  node_disk_mask_[n] = masks[2];
}

void KvBlockIndex::erase_entry(std::int32_t entry) {
  const auto i = static_cast<std::size_t>(entry);
  const std::int32_t node = entry_node_[i];
  const auto n = static_cast<std::size_t>(node);
  // Unlink from the node's chain.
  if (nodes_[n].head == entry) {
    nodes_[n].head = entry_next_[i];
  } else {
    std::int32_t p = nodes_[n].head;
    while (entry_next_[static_cast<std::size_t>(p)] != entry) p = entry_next_[static_cast<std::size_t>(p)];
    entry_next_[static_cast<std::size_t>(p)] = entry_next_[i];
  }
  lru_unlink(entry);
  --endpoint_entries_[entry_endpoint_[i]];
  --used_entries_;
  entry_node_[i] = -1;
  entry_next_[i] = free_entry_;
  free_entry_ = entry;

  if (nodes_[n].head < 0) {
    table_erase(node);
    nodes_[n].gpu = 0;
    nodes_[n].lower = 0;
    node_cpu_mask_[n] = 0;
    node_disk_mask_[n] = 0;
    nodes_[n].head = free_node_;
    free_node_ = node;
    --used_nodes_;
  } else {
    refresh_node_masks(node);
  }
}

void KvBlockIndex::evict_one(EndpointId preferred) {
  EndpointId victim = preferred;
  if (endpoint_entries_[preferred] < per_endpoint_cap_) {
    // The global pool is full: take from the endpoint holding the most entries.
    for (int e = 0; e < config_.max_endpoints; ++e) {
      if (endpoint_entries_[static_cast<std::size_t>(e)] > endpoint_entries_[victim]) {
        victim = static_cast<EndpointId>(e);
      }
    }
  }
  const auto head = static_cast<std::size_t>(config_.max_entries) + victim;
  erase_entry(lru_next_[head]);  // the least recently stored entry of `victim`
  ++evictions_;
}

void KvBlockIndex::insert_entry(EndpointId endpoint, KvTier tier, BlockHash hash) {
  std::int32_t node = find_node(hash);
  if (node >= 0) {
    const std::int32_t existing = find_entry(node, endpoint, tier);
    if (existing >= 0) {
      lru_unlink(existing);
      lru_push_back(endpoint, existing);
      return;
    }
  }
  if (endpoint_entries_[endpoint] >= per_endpoint_cap_ || used_entries_ >= config_.max_entries) {
    evict_one(endpoint);  // may free `node`: look it up again below
  }
  node = node_for_insert(hash);
  const std::int32_t entry = free_entry_;
  const auto i = static_cast<std::size_t>(entry);
  const auto n = static_cast<std::size_t>(node);
  free_entry_ = entry_next_[i];
  entry_node_[i] = node;
  entry_endpoint_[i] = static_cast<std::uint8_t>(endpoint);
  entry_tier_[i] = static_cast<std::uint8_t>(tier);
  entry_next_[i] = nodes_[n].head;
  nodes_[n].head = entry;
  const std::uint64_t bit = std::uint64_t{1} << endpoint;
  if (tier == KvTier::gpu) {
    nodes_[n].gpu |= bit;
  } else {
    nodes_[n].lower |= bit;
    if (tier == KvTier::cpu) node_cpu_mask_[n] |= bit;
    if (tier == KvTier::disk) node_disk_mask_[n] |= bit;
  }
  lru_push_back(endpoint, entry);
  ++endpoint_entries_[endpoint];
  ++used_entries_;
}

Expected<void, IndexErrc> KvBlockIndex::apply_stored(EndpointId endpoint, KvTier tier,
                                                     std::span<const BlockHash> hashes) {
  if (endpoint >= config_.max_endpoints) return unexpected(IndexErrc::invalid_endpoint);
  if (!valid_tier(tier)) return unexpected(IndexErrc::invalid_tier);
  for (const BlockHash h : hashes) insert_entry(endpoint, tier, h);
  return {};
}

Expected<void, IndexErrc> KvBlockIndex::apply_removed(EndpointId endpoint, KvTier tier,
                                                      std::span<const BlockHash> hashes) {
  if (endpoint >= config_.max_endpoints) return unexpected(IndexErrc::invalid_endpoint);
  if (!valid_tier(tier)) return unexpected(IndexErrc::invalid_tier);
  for (const BlockHash h : hashes) {
    const std::int32_t node = find_node(h);
    if (node < 0) continue;
    const std::int32_t entry = find_entry(node, endpoint, tier);
    if (entry >= 0) erase_entry(entry);
  }
  return {};
}

std::int64_t KvBlockIndex::clear(EndpointId endpoint) {
  if (endpoint >= config_.max_endpoints) return 0;
  const std::int64_t before = endpoint_entries_[endpoint];
  const auto head = static_cast<std::int32_t>(config_.max_entries) + endpoint;
  while (lru_next_[static_cast<std::size_t>(head)] != head) {
    erase_entry(lru_next_[static_cast<std::size_t>(head)]);
  }
  return before;
}

std::int64_t KvBlockIndex::clear(EndpointId endpoint, KvTier tier) {
  if (endpoint >= config_.max_endpoints || !valid_tier(tier)) return 0;
  std::int64_t dropped = 0;
  const auto head = static_cast<std::int32_t>(config_.max_entries) + endpoint;
  for (std::int32_t e = lru_next_[static_cast<std::size_t>(head)]; e != head;) {
    const std::int32_t next = lru_next_[static_cast<std::size_t>(e)];
    if (entry_tier_[static_cast<std::size_t>(e)] == static_cast<std::uint8_t>(tier)) {
      erase_entry(e);
      ++dropped;
    }
    e = next;
  }
  return dropped;
}

std::int32_t KvBlockIndex::longest_prefix(std::span<const BlockHash> hashes,
                                          std::span<PrefixOverlap> out) const noexcept {
  const auto reported = static_cast<int>(
      std::min<std::size_t>(out.size(), static_cast<std::size_t>(config_.max_endpoints)));
  for (int e = 0; e < reported; ++e) out[static_cast<std::size_t>(e)] = PrefixOverlap{};
  if (reported == 0) return 0;
  // `alive`: endpoints that hold every block so far. An endpoint's prefix ends where it drops out.
  std::uint64_t alive = reported == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << reported) - 1;
  const std::size_t k = hashes.size();
  // The walk is a chain of cache misses (slot, then node) at independent addresses: prefetch the
  // slot kAhead blocks ahead and the node kAhead / 2 ahead, so several misses are in flight
  // (16 measured best of 8 / 16 / 32 on 4M entries with 512-block prompts).
  constexpr std::size_t kAhead = 16;
  std::array<std::size_t, kAhead> ring{};  // home slots of blocks depth .. depth + kAhead - 1
  for (std::size_t j = 0; j < kAhead && j < k; ++j) {
    ring[j] = slot_of(hashes[j]);
    __builtin_prefetch(&slots_[ring[j]]);
  }
  std::size_t depth = 0;
  for (; depth < k; ++depth) {
    if (depth + kAhead / 2 < k) {
      const std::int32_t ahead = slots_[ring[(depth + kAhead / 2) % kAhead]];
      if (ahead >= 0) __builtin_prefetch(&nodes_[static_cast<std::size_t>(ahead)]);
    }
    // Probe for block `depth` from its home slot (linear probing).
    const BlockHash hash = hashes[depth];
    std::int32_t node = -1;
    for (std::size_t s = ring[depth % kAhead];; s = (s + 1) & slot_mask_) {
      const std::int32_t x = slots_[s];
      if (x < 0 || nodes_[static_cast<std::size_t>(x)].hash == hash) {
        node = x;
        break;
      }
    }
    if (depth + kAhead < k) {
      ring[depth % kAhead] = slot_of(hashes[depth + kAhead]);
      __builtin_prefetch(&slots_[ring[depth % kAhead]]);
    }
    if (node < 0) break;
    const Node& nd = nodes_[static_cast<std::size_t>(node)];
    const std::uint64_t any = nd.gpu | nd.lower;
    for_each_bit(alive & ~any, [&](int e) {
      out[static_cast<std::size_t>(e)].blocks = static_cast<std::int32_t>(depth);
    });
    alive &= any;
    if (alive == 0) break;
    // Blocks held only in lower tiers count in the fastest of them (cold masks, rarely read).
    const std::uint64_t lower_only = alive & ~nd.gpu;
    if (lower_only != 0) {
      const std::uint64_t cpu = node_cpu_mask_[static_cast<std::size_t>(node)];
      const std::uint64_t disk = node_disk_mask_[static_cast<std::size_t>(node)];
      for_each_bit(lower_only, [&](int e) {
        const std::uint64_t bit = std::uint64_t{1} << e;
        const std::size_t tier = (cpu & bit) != 0 ? 1 : (disk & bit) != 0 ? 2 : 3;
        ++out[static_cast<std::size_t>(e)].by_tier[tier];
      });
    }
  }
  // Endpoints still alive hold the whole run matched so far.
  for_each_bit(alive, [&](int e) { out[static_cast<std::size_t>(e)].blocks = static_cast<std::int32_t>(depth); });
  std::int32_t longest = 0;
  for (int e = 0; e < reported; ++e) {
    PrefixOverlap& o = out[static_cast<std::size_t>(e)];
    o.by_tier[0] = o.blocks - o.by_tier[1] - o.by_tier[2] - o.by_tier[3];
    if (o.blocks > longest) longest = o.blocks;
  }
  return longest;
}

bool KvBlockIndex::contains(EndpointId endpoint, KvTier tier, BlockHash hash) const noexcept {
  if (endpoint >= config_.max_endpoints || !valid_tier(tier)) return false;
  const std::int32_t node = find_node(hash);
  return node >= 0 && find_entry(node, endpoint, tier) >= 0;
}

std::int64_t KvBlockIndex::size(EndpointId endpoint) const {
  return endpoint < config_.max_endpoints ? endpoint_entries_[endpoint] : 0;
}

std::size_t KvBlockIndex::memory_bytes() const {
  return nodes_.capacity() * sizeof(Node) + node_cpu_mask_.capacity() * sizeof(std::uint64_t) +
         node_disk_mask_.capacity() * sizeof(std::uint64_t) +
         entry_node_.capacity() * sizeof(std::int32_t) + entry_endpoint_.capacity() +
         entry_tier_.capacity() + entry_next_.capacity() * sizeof(std::int32_t) +
         lru_prev_.capacity() * sizeof(std::int32_t) + lru_next_.capacity() * sizeof(std::int32_t) +
         slots_.capacity() * sizeof(std::int32_t);
}

Expected<void, std::string> KvBlockIndex::check_invariants() const {
  const auto n = static_cast<std::size_t>(config_.max_entries);
  auto fail = [](std::string what) { return unexpected(std::move(what)); };
  // Per-endpoint LRU lists: lengths, back links, ownership.
  std::int64_t listed = 0;
  for (int ep = 0; ep < config_.max_endpoints; ++ep) {
    const auto head = static_cast<std::int32_t>(n) + ep;
    std::int64_t count = 0;
    std::int32_t prev = head;
    for (std::int32_t e = lru_next_[static_cast<std::size_t>(head)]; e != head;
         e = lru_next_[static_cast<std::size_t>(e)]) {
      const auto i = static_cast<std::size_t>(e);
      if (e < 0 || static_cast<std::size_t>(e) >= n) return fail("lru link out of range");
      if (lru_prev_[i] != prev) return fail("lru back link broken at entry " + std::to_string(e));
      if (entry_endpoint_[i] != ep) return fail("entry in another endpoint's lru list");
      if (entry_node_[i] < 0) return fail("free entry in an lru list");
      prev = e;
      if (++count > config_.max_entries) return fail("lru list cycle");
    }
    if (count != endpoint_entries_[static_cast<std::size_t>(ep)]) {
      return fail("endpoint " + std::to_string(ep) + " count " +
                  std::to_string(endpoint_entries_[static_cast<std::size_t>(ep)]) + " but lists " +
                  std::to_string(count));
    }
    if (count > per_endpoint_cap_) return fail("endpoint over its cap");
    listed += count;
  }
  if (listed != used_entries_) return fail("used_entries mismatch");
  if (used_entries_ > config_.max_entries) return fail("over max_entries");
  // Nodes in the table: reachable, chains consistent, masks exact, no empty node.
  std::int64_t nodes = 0;
  std::int64_t chained = 0;
  for (std::size_t s = 0; s < slots_.size(); ++s) {
    const std::int32_t node = slots_[s];
    if (node < 0) continue;
    ++nodes;
    const auto ni = static_cast<std::size_t>(node);
    if (find_node(nodes_[ni].hash) != node) return fail("node unreachable by probing");
    if (nodes_[ni].head < 0) return fail("empty node in the table");
    std::array<std::uint64_t, kKvTierCount> masks{};
    for (std::int32_t e = nodes_[ni].head; e >= 0; e = entry_next_[static_cast<std::size_t>(e)]) {
      const auto i = static_cast<std::size_t>(e);
      if (entry_node_[i] != node) return fail("entry chained under another node");
      masks[entry_tier_[i]] |= std::uint64_t{1} << entry_endpoint_[i];
      if (++chained > used_entries_) return fail("node chain cycle");
      for (std::int32_t f = entry_next_[i]; f >= 0; f = entry_next_[static_cast<std::size_t>(f)]) {
        const auto fi = static_cast<std::size_t>(f);
        if (entry_endpoint_[fi] == entry_endpoint_[i] && entry_tier_[fi] == entry_tier_[i]) {
          return fail("duplicate (endpoint, tier) entry");
        }
      }
    }
    if (masks[0] != nodes_[ni].gpu || (masks[1] | masks[2] | masks[3]) != nodes_[ni].lower ||
        masks[1] != node_cpu_mask_[ni] || masks[2] != node_disk_mask_[ni]) {
      return fail("stale node mask");
    }
  }
  if (nodes != used_nodes_) return fail("used_nodes mismatch");
  if (chained != used_entries_) return fail("chained entries mismatch");
  // Free lists hold exactly the rest.
  std::int64_t free_nodes = 0;
  for (std::int32_t f = free_node_; f >= 0; f = nodes_[static_cast<std::size_t>(f)].head) {
    if (++free_nodes > config_.max_entries) return fail("free node cycle");
  }
  std::int64_t free_entries = 0;
  for (std::int32_t f = free_entry_; f >= 0; f = entry_next_[static_cast<std::size_t>(f)]) {
    if (entry_node_[static_cast<std::size_t>(f)] >= 0) return fail("live entry on the free list");
    if (++free_entries > config_.max_entries) return fail("free entry cycle");
  }
  if (free_nodes + used_nodes_ != config_.max_entries) return fail("nodes leaked");
  if (free_entries + used_entries_ != config_.max_entries) return fail("entries leaked");
  return {};
}

}  // namespace disagg
