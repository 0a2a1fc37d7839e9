// kv_block_index.cc — see disagg/kv_block_index.h for the contract and the storage layout.
#include "disagg/kv_block_index.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace disagg {

namespace {

constexpr std::int64_t kMaxIndexEntries = std::int64_t{1} << 28;

bool valid_tier(KvTier tier) {
  return static_cast<int>(tier) < kKvTierCount;
}

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
  if (config.max_endpoints < 1 || config.max_endpoints > kMaxRoutingEndpoints || config.max_entries < 1 ||
      config.max_entries > kMaxIndexEntries || config.max_entries_per_endpoint < 0 ||
      config.max_entries_per_endpoint > config.max_entries) {
    return unexpected(IndexErrc::invalid_config);
  }
  KvBlockIndex index;
  index.config_ = config;
  index.per_endpoint_cap_ = config.max_entries_per_endpoint == 0 ? config.max_entries : config.max_entries_per_endpoint;
  const auto n = static_cast<std::size_t>(config.max_entries);
  const auto lists = n + static_cast<std::size_t>(config.max_endpoints);

  index.nodes_.assign(n, Node{});
  index.node_cpu_mask_.assign(n, 0);
  index.node_disk_mask_.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) index.nodes_[i].head = static_cast<std::int32_t>(i + 1);
  index.nodes_[n - 1].head = -1;
  index.free_node_ = 0;

  index.entries_.assign(lists, Entry{});
  for (std::size_t i = 0; i < n; ++i) index.entries_[i].next = static_cast<std::int32_t>(i + 1);
  index.entries_[n - 1].next = -1;
  index.free_entry_ = 0;
  for (std::size_t s = n; s < lists; ++s) {  // empty circular lists: sentinels point at themselves
    index.entries_[s].lru_prev = static_cast<std::int32_t>(s);
    index.entries_[s].lru_next = static_cast<std::int32_t>(s);
  }

  // Load factor <= 0.5: at least 2 slots per possible node, rounded up to a power of two
  // (at most 2^29, so home slots fit in the 32-bit fingerprint).
  const std::size_t slots = std::bit_ceil(2 * n);
  index.slots_.assign(slots, Slot{0, -1});
  index.slot_mask_ = slots - 1;
  return index;
}

std::uint32_t KvBlockIndex::fingerprint_of(BlockHash hash) noexcept {
  // vLLM's hashes are uniform, but our own test hashes need not be: mix (splitmix64 finalizer).
  hash ^= hash >> 30;
  hash *= 0xbf58476d1ce4e5b9ULL;
  hash ^= hash >> 27;
  hash *= 0x94d049bb133111ebULL;
  hash ^= hash >> 31;
  return static_cast<std::uint32_t>(hash >> 32);
}

std::int32_t KvBlockIndex::probe(BlockHash hash, std::size_t* slot) const noexcept {
  const std::uint32_t fp = fingerprint_of(hash);
  for (std::size_t s = fp & slot_mask_;; s = (s + 1) & slot_mask_) {
    const Slot x = slots_[s];
    if (x.node < 0 || (x.fingerprint == fp && nodes_[static_cast<std::size_t>(x.node)].hash == hash)) {
      *slot = s;
      return x.node;
    }
  }
}

void KvBlockIndex::prefetch_ahead(std::span<const BlockHash> hashes, std::size_t i) const noexcept {
  // A batch's blocks sit at independent addresses, each probe a cache miss or two (slot, then
  // node): ask for the slot kAhead blocks ahead and the node of the one kAhead / 2 ahead (its slot
  // requested earlier), so several misses are in flight, as longest_prefix() does.
  constexpr std::size_t kAhead = 8;
  if (i == 0) {
    for (std::size_t j = 0; j < kAhead && j < hashes.size(); ++j)
      __builtin_prefetch(&slots_[fingerprint_of(hashes[j]) & slot_mask_]);
  }
  if (i + kAhead < hashes.size()) __builtin_prefetch(&slots_[fingerprint_of(hashes[i + kAhead]) & slot_mask_]);
  if (i + kAhead / 2 < hashes.size()) {
    const std::int32_t node = slots_[fingerprint_of(hashes[i + kAhead / 2]) & slot_mask_].node;
    if (node >= 0) __builtin_prefetch(&nodes_[static_cast<std::size_t>(node)]);
  }
}

std::int32_t KvBlockIndex::find_node(BlockHash hash) const noexcept {
  std::size_t slot = 0;
  return probe(hash, &slot);
}

std::int32_t KvBlockIndex::find_entry(std::int32_t node, EndpointId endpoint, KvTier tier) const noexcept {
  for (std::int32_t e = nodes_[static_cast<std::size_t>(node)].head; e >= 0;
       e = entries_[static_cast<std::size_t>(e)].next) {
    const Entry& x = entries_[static_cast<std::size_t>(e)];
    if (x.endpoint == endpoint && x.tier == static_cast<std::uint8_t>(tier)) return e;
  }
  return -1;
}

std::int32_t KvBlockIndex::new_node(BlockHash hash, std::size_t slot) {
  // Caller guarantees a free node: live nodes <= live entries < max_entries. A free node has
  // zero masks (its CPU and disk masks too: they are subsets of `lower`, zeroed when it was freed).
  const std::int32_t node = free_node_;
  const auto i = static_cast<std::size_t>(node);
  free_node_ = nodes_[i].head;
  nodes_[i].hash = hash;
  nodes_[i].head = -1;
  slots_[slot] = Slot{fingerprint_of(hash), node};
  ++used_nodes_;
  return node;
}

void KvBlockIndex::table_erase(std::int32_t node) {
  std::size_t hole = fingerprint_of(nodes_[static_cast<std::size_t>(node)].hash) & slot_mask_;
  while (slots_[hole].node != node) hole = (hole + 1) & slot_mask_;
  // Backward-shift deletion keeps every probe sequence unbroken without tombstones; homes come
  // from the fingerprints, so no node is read.
  for (std::size_t s = (hole + 1) & slot_mask_;; s = (s + 1) & slot_mask_) {
    const Slot other = slots_[s];
    if (other.node < 0) break;
    const std::size_t home = other.fingerprint & slot_mask_;
    // Move `other` into the hole unless its home lies cyclically in (hole, s].
    const bool stays = hole <= s ? (hole < home && home <= s) : (hole < home || home <= s);
    if (!stays) {
      slots_[hole] = other;
      hole = s;
    }
  }
  slots_[hole] = Slot{0, -1};
}

void KvBlockIndex::lru_unlink(std::int32_t entry) {
  const Entry& x = entries_[static_cast<std::size_t>(entry)];
  entries_[static_cast<std::size_t>(x.lru_prev)].lru_next = x.lru_next;
  entries_[static_cast<std::size_t>(x.lru_next)].lru_prev = x.lru_prev;
}

void KvBlockIndex::lru_push_back(EndpointId endpoint, std::int32_t entry) {
  const auto head = static_cast<std::int32_t>(config_.max_entries) + endpoint;
  Entry& h = entries_[static_cast<std::size_t>(head)];
  const std::int32_t last = h.lru_prev;
  Entry& x = entries_[static_cast<std::size_t>(entry)];
  x.lru_prev = last;
  x.lru_next = head;
  entries_[static_cast<std::size_t>(last)].lru_next = entry;
  h.lru_prev = entry;
}

void KvBlockIndex::refresh_node_masks(std::int32_t node) {
  std::array<std::uint64_t, kKvTierCount> masks{};
  const auto n = static_cast<std::size_t>(node);
  for (std::int32_t e = nodes_[n].head; e >= 0; e = entries_[static_cast<std::size_t>(e)].next) {
    const Entry& x = entries_[static_cast<std::size_t>(e)];
    masks[x.tier] |= std::uint64_t{1} << x.endpoint;
  }
  const std::uint64_t lower = masks[1] | masks[2] | masks[3];
  // The cold CPU and disk masks are subsets of `lower`: untouched while it stays 0 (GPU only).
  if ((nodes_[n].lower | lower) != 0) {
    node_cpu_mask_[n] = masks[1];
    node_disk_mask_[n] = masks[2];
  }
  nodes_[n].gpu = masks[0];
  nodes_[n].lower = lower;
}

void KvBlockIndex::erase_entry(std::int32_t entry) {
  const auto i = static_cast<std::size_t>(entry);
  Entry& x = entries_[i];
  const std::int32_t node = x.node;
  const auto n = static_cast<std::size_t>(node);
  // Unlink from the node's chain.
  if (nodes_[n].head == entry) {
    nodes_[n].head = x.next;
  } else {
    std::int32_t p = nodes_[n].head;
    while (entries_[static_cast<std::size_t>(p)].next != entry) p = entries_[static_cast<std::size_t>(p)].next;
    entries_[static_cast<std::size_t>(p)].next = x.next;
  }
  lru_unlink(entry);
  --endpoint_entries_[x.endpoint];
  --used_entries_;
  x.node = -1;
  x.next = free_entry_;
  free_entry_ = entry;

  if (nodes_[n].head < 0) {
    table_erase(node);
    if (nodes_[n].lower != 0) {
      node_cpu_mask_[n] = 0;
      node_disk_mask_[n] = 0;
    }
    nodes_[n].gpu = 0;
    nodes_[n].lower = 0;
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
  erase_entry(entries_[head].lru_next);  // the least recently stored entry of `victim`
  ++evictions_;
  prefetch_victims(victim);
}

void KvBlockIndex::prefetch_victims(EndpointId endpoint) const noexcept {
  // A full history evicts on every insert, and each eviction is a chain of dependent misses at
  // random addresses: the entry, its node, the node's hash-table slot. The next victims are known
  // now (the LRU order), so start their misses one stage per eviction ahead: the next victim's
  // slot (its entry is cached: erase_entry's unlink wrote it; its node was prefetched by the last
  // eviction), the one after's node (its entry was prefetched then), and the third's entry.
  const auto sentinel = static_cast<std::int32_t>(config_.max_entries);  // heads are >= it
  const std::int32_t v1 = entries_[static_cast<std::size_t>(sentinel + endpoint)].lru_next;
  if (v1 >= sentinel) return;
  const Entry& e1 = entries_[static_cast<std::size_t>(v1)];
  __builtin_prefetch(&slots_[fingerprint_of(nodes_[static_cast<std::size_t>(e1.node)].hash) & slot_mask_]);
  if (e1.lru_next >= sentinel) return;
  const Entry& e2 = entries_[static_cast<std::size_t>(e1.lru_next)];
  __builtin_prefetch(&nodes_[static_cast<std::size_t>(e2.node)]);
  if (e2.lru_next < sentinel) __builtin_prefetch(&entries_[static_cast<std::size_t>(e2.lru_next)]);
}

void KvBlockIndex::insert_entry(EndpointId endpoint, KvTier tier, BlockHash hash) {
  std::size_t slot = 0;
  std::int32_t node = probe(hash, &slot);
  if (node >= 0) {
    const std::int32_t existing = find_entry(node, endpoint, tier);
    if (existing >= 0) {
      lru_unlink(existing);
      lru_push_back(endpoint, existing);
      return;
    }
  }
  if (endpoint_entries_[endpoint] >= per_endpoint_cap_ || used_entries_ >= config_.max_entries) {
    evict_one(endpoint);  // may free `node` or shift slots: probe again
    node = probe(hash, &slot);
  }
  if (node < 0) node = new_node(hash, slot);
  const std::int32_t entry = free_entry_;
  const auto n = static_cast<std::size_t>(node);
  Entry& x = entries_[static_cast<std::size_t>(entry)];
  free_entry_ = x.next;
  x.node = node;
  x.endpoint = static_cast<std::uint8_t>(endpoint);
  x.tier = static_cast<std::uint8_t>(tier);
  x.next = nodes_[n].head;
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
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    prefetch_ahead(hashes, i);
    insert_entry(endpoint, tier, hashes[i]);
  }
  return {};
}

Expected<void, IndexErrc> KvBlockIndex::apply_removed(EndpointId endpoint, KvTier tier,
                                                      std::span<const BlockHash> hashes) {
  if (endpoint >= config_.max_endpoints) return unexpected(IndexErrc::invalid_endpoint);
  if (!valid_tier(tier)) return unexpected(IndexErrc::invalid_tier);
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    prefetch_ahead(hashes, i);
    const std::int32_t node = find_node(hashes[i]);
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
  while (entries_[static_cast<std::size_t>(head)].lru_next != head) {
    erase_entry(entries_[static_cast<std::size_t>(head)].lru_next);
  }
  return before;
}

std::int64_t KvBlockIndex::clear(EndpointId endpoint, KvTier tier) {
  if (endpoint >= config_.max_endpoints || !valid_tier(tier)) return 0;
  std::int64_t dropped = 0;
  const auto head = static_cast<std::int32_t>(config_.max_entries) + endpoint;
  for (std::int32_t e = entries_[static_cast<std::size_t>(head)].lru_next; e != head;) {
    const std::int32_t next = entries_[static_cast<std::size_t>(e)].lru_next;
    if (entries_[static_cast<std::size_t>(e)].tier == static_cast<std::uint8_t>(tier)) {
      erase_entry(e);
      ++dropped;
    }
    e = next;
  }
  return dropped;
}

std::int32_t KvBlockIndex::longest_prefix(std::span<const BlockHash> hashes,
                                          std::span<PrefixOverlap> out) const noexcept {
  const auto reported =
      static_cast<int>(std::min<std::size_t>(out.size(), static_cast<std::size_t>(config_.max_endpoints)));
  for (int e = 0; e < reported; ++e) out[static_cast<std::size_t>(e)] = PrefixOverlap{};
  if (reported == 0) return 0;
  // `alive`: endpoints that hold every block so far. An endpoint's prefix ends where it drops out.
  std::uint64_t alive = reported == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << reported) - 1;
  const std::size_t k = hashes.size();
  // The walk is a chain of cache misses (slot, then node) at independent addresses: prefetch the
  // slot kAhead blocks ahead and the node kAhead / 2 ahead, so several misses are in flight
  // (16 measured best of 8 / 16 / 32 on 4M entries with 512-block prompts).
  constexpr std::size_t kAhead = 16;
  std::array<std::uint32_t, kAhead> ring{};  // fingerprints of blocks depth .. depth + kAhead - 1
  for (std::size_t j = 0; j < kAhead && j < k; ++j) {
    ring[j] = fingerprint_of(hashes[j]);
    __builtin_prefetch(&slots_[ring[j] & slot_mask_]);
  }
  std::size_t depth = 0;
  for (; depth < k; ++depth) {
    if (depth + kAhead / 2 < k) {
      const std::int32_t ahead = slots_[ring[(depth + kAhead / 2) % kAhead] & slot_mask_].node;
      if (ahead >= 0) __builtin_prefetch(&nodes_[static_cast<std::size_t>(ahead)]);
    }
    // Probe for block `depth` from its home slot (linear probing).
    const BlockHash hash = hashes[depth];
    const std::uint32_t fp = ring[depth % kAhead];
    std::int32_t node = -1;
    for (std::size_t s = fp & slot_mask_;; s = (s + 1) & slot_mask_) {
      const Slot x = slots_[s];
      if (x.node < 0 || (x.fingerprint == fp && nodes_[static_cast<std::size_t>(x.node)].hash == hash)) {
        node = x.node;
        break;
      }
    }
    if (depth + kAhead < k) {
      ring[depth % kAhead] = fingerprint_of(hashes[depth + kAhead]);
      __builtin_prefetch(&slots_[ring[depth % kAhead] & slot_mask_]);
    }
    if (node < 0) break;
    const Node& nd = nodes_[static_cast<std::size_t>(node)];
    const std::uint64_t any = nd.gpu | nd.lower;
    for_each_bit(alive & ~any,
                 [&](int e) { out[static_cast<std::size_t>(e)].blocks = static_cast<std::int32_t>(depth); });
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
         node_disk_mask_.capacity() * sizeof(std::uint64_t) + entries_.capacity() * sizeof(Entry) +
         slots_.capacity() * sizeof(Slot);
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
    for (std::int32_t e = entries_[static_cast<std::size_t>(head)].lru_next; e != head;
         e = entries_[static_cast<std::size_t>(e)].lru_next) {
      const auto i = static_cast<std::size_t>(e);
      if (e < 0 || static_cast<std::size_t>(e) >= n) return fail("lru link out of range");
      if (entries_[i].lru_prev != prev) return fail("lru back link broken at entry " + std::to_string(e));
      if (entries_[i].endpoint != ep) return fail("entry in another endpoint's lru list");
      if (entries_[i].node < 0) return fail("free entry in an lru list");
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
    const std::int32_t node = slots_[s].node;
    if (node < 0) continue;
    ++nodes;
    const auto ni = static_cast<std::size_t>(node);
    if (slots_[s].fingerprint != fingerprint_of(nodes_[ni].hash)) return fail("stale slot fingerprint");
    if (find_node(nodes_[ni].hash) != node) return fail("node unreachable by probing");
    if (nodes_[ni].head < 0) return fail("empty node in the table");
    std::array<std::uint64_t, kKvTierCount> masks{};
    for (std::int32_t e = nodes_[ni].head; e >= 0; e = entries_[static_cast<std::size_t>(e)].next) {
      const auto i = static_cast<std::size_t>(e);
      if (entries_[i].node != node) return fail("entry chained under another node");
      masks[entries_[i].tier] |= std::uint64_t{1} << entries_[i].endpoint;
      if (++chained > used_entries_) return fail("node chain cycle");
      for (std::int32_t f = entries_[i].next; f >= 0; f = entries_[static_cast<std::size_t>(f)].next) {
        const auto fi = static_cast<std::size_t>(f);
        if (entries_[fi].endpoint == entries_[i].endpoint && entries_[fi].tier == entries_[i].tier) {
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
    const auto fi = static_cast<std::size_t>(f);
    if ((nodes_[fi].gpu | nodes_[fi].lower | node_cpu_mask_[fi] | node_disk_mask_[fi]) != 0) {
      return fail("free node " + std::to_string(f) + " has a non-zero mask");
    }
  }
  std::int64_t free_entries = 0;
  for (std::int32_t f = free_entry_; f >= 0; f = entries_[static_cast<std::size_t>(f)].next) {
    if (entries_[static_cast<std::size_t>(f)].node >= 0) return fail("live entry on the free list");
    if (++free_entries > config_.max_entries) return fail("free entry cycle");
  }
  if (free_nodes + used_nodes_ != config_.max_entries) return fail("nodes leaked");
  if (free_entries + used_entries_ != config_.max_entries) return fail("entries leaked");
  return {};
}

}  // namespace disagg
