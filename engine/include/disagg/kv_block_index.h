// disagg/kv_block_index.h — which endpoint holds which KV block, in which tier (the router's index).
//
// Fed by KV events (vLLM BlockStored / BlockRemoved / AllBlocksCleared, tagged by medium) or, for the
// approximate scorers, by the router's own routing history. An entry is one (block hash, endpoint,
// tier) triple; an endpoint may hold the same block in several tiers (e.g. GPU and its CPU copy).
//
// Bounded: every array is sized by create() from `max_entries`; nothing allocates afterwards. Each
// endpoint keeps its entries in LRU order of their last store. Inserting beyond
// `max_entries_per_endpoint` evicts that endpoint's least recently stored entry; inserting when all
// `max_entries` are used evicts the least recently stored entry of the endpoint holding the most
// entries (so one busy endpoint cannot push every other endpoint's blocks out). Evictions only
// guard memory (e.g. after lost removal events); they are counted in evictions().
//
// Lookups (longest_prefix, contains) are const and do not refresh recency: readers never write.
//
// Storage, sized for max_entries nodes and entries (a node per distinct hash, never more nodes
// than entries):
//   block node: hash, GPU endpoint mask, lower-tier endpoint mask, head of its entry chain, in one
//     32-byte record (the hot path reads one cache line), plus CPU and disk masks 16 B (touched
//     only for blocks held in a lower tier)                                               = 48 B
//   entry (hash x endpoint x tier), one 20-byte record: node, next entry of the same node, LRU
//     links, endpoint, tier (a removal touches the entry and its two LRU neighbours)       = 20 B
//   hash table: 8 B slots (node id and a 32-bit fingerprint of the hash, so probes and
//     deletions stay in the slot array) at load factor <= 0.5                              = 16 to 32 B
// so 84 to 100 B per entry of max_entries, all allocated by create(): 1M entries ~ 100 MB. The
// arrays ask for transparent huge pages (huge_pages.h): lookups touch them at random.
//
// Complexity (k = hashes in the call, E = endpoints, r = entries of one block, at most 4 E):
//   apply_stored / apply_removed   O(k r) expected (r is 1 or 2 in practice)
//   clear(endpoint)                O(entries of that endpoint) (plus O(r) per entry)
//   longest_prefix                 O(k + E) expected (+ O(1) per endpoint and block held only in a
//                                  lower tier); prefetches 16 blocks ahead
//   contains                       O(r) expected
//   eviction when the global pool is full: O(E) to find the largest endpoint
//
// Thread-safety: not thread-safe. One writer; const methods may run concurrently with each other
// but not with a mutation (the router serializes both on its event loop).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/block_hash.h"
#include "disagg/expected.h"
#include "disagg/huge_pages.h"

namespace disagg {

/// Where a block's KV lives, fastest first. Matches vLLM's event `medium` ("GPU", "CPU", ...).
enum class KvTier : std::uint8_t { gpu = 0, cpu = 1, disk = 2, remote = 3 };

/// Number of KvTier values.
inline constexpr int kKvTierCount = 4;

/// Stable lower-case name of a tier, e.g. "gpu".
std::string_view to_string(KvTier tier);

/// Dense id of an endpoint in an index and in policy state: 0 <= id < kMaxRoutingEndpoints.
/// The router assigns ids to endpoints and reuses an id only after clear(id).
using EndpointId = std::uint16_t;

/// Most endpoints one index (and one policy) tracks: endpoint sets are 64-bit masks.
inline constexpr int kMaxRoutingEndpoints = 64;

/// Why an index call was refused. A refused call leaves the index unchanged.
enum class IndexErrc {
  invalid_config,    ///< create(): a bound outside its range (see KvIndexConfig)
  invalid_endpoint,  ///< an endpoint id >= config.max_endpoints
  invalid_tier,      ///< a tier value outside KvTier
};

/// Stable lower-case name of an error code, e.g. "invalid_endpoint".
std::string_view to_string(IndexErrc code);

/// Bounds of a KvBlockIndex.
struct KvIndexConfig {
  /// Endpoint ids accepted: [0, max_endpoints). Range [1, kMaxRoutingEndpoints].
  int max_endpoints = kMaxRoutingEndpoints;
  /// Entries (hash x endpoint x tier) held in all; all storage is sized from it. Range [1, 2^28].
  std::int64_t max_entries = 1 << 20;
  /// Entries one endpoint may hold; 0 = max_entries. Range [0, max_entries].
  std::int64_t max_entries_per_endpoint = 0;
};

/// One endpoint's cached prefix of a request.
struct PrefixOverlap {
  /// Leading blocks of the request the endpoint holds in some tier.
  std::int32_t blocks = 0;
  /// Of those, how many by the fastest tier holding each (by_tier[0] = GPU). Sums to `blocks`.
  std::array<std::int32_t, kKvTierCount> by_tier{};
};

class KvBlockIndex {
 public:
  /// An empty index with all storage allocated. Failure modes: invalid_config.
  static Expected<KvBlockIndex, IndexErrc> create(const KvIndexConfig& config);

  /// Records that `endpoint` holds each of `hashes` in `tier`. A known entry moves to the most
  /// recently stored position; a new one may evict (see the file comment). Duplicate hashes in one
  /// call are fine. Failure modes (index unchanged): invalid_endpoint, invalid_tier.
  Expected<void, IndexErrc> apply_stored(EndpointId endpoint, KvTier tier, std::span<const BlockHash> hashes);

  /// Records that `endpoint` no longer holds `hashes` in `tier`; unknown entries are ignored.
  /// Failure modes (index unchanged): invalid_endpoint, invalid_tier.
  Expected<void, IndexErrc> apply_removed(EndpointId endpoint, KvTier tier, std::span<const BlockHash> hashes);

  /// Drops every entry of `endpoint` in every tier (AllBlocksCleared, endpoint gone, or an event
  /// gap). Returns how many entries were dropped; 0 for an out-of-range id.
  std::int64_t clear(EndpointId endpoint);

  /// Drops every entry of `endpoint` in `tier` only. Returns how many were dropped.
  std::int64_t clear(EndpointId endpoint, KvTier tier);

  /// For every endpoint id e < min(out.size(), max_endpoints), writes to out[e] the longest prefix
  /// of `hashes` that e holds (each block in any tier) and its split by fastest tier; ids beyond
  /// that are not reported. Returns the longest overlap over all endpoints. Never allocates.
  std::int32_t longest_prefix(std::span<const BlockHash> hashes, std::span<PrefixOverlap> out) const noexcept;

  /// Whether `endpoint` holds `hash` in `tier`. False for out-of-range arguments.
  bool contains(EndpointId endpoint, KvTier tier, BlockHash hash) const noexcept;

  /// Entries held in all.
  std::int64_t size() const { return used_entries_; }
  /// Entries `endpoint` holds (0 for an out-of-range id).
  std::int64_t size(EndpointId endpoint) const;
  /// Distinct block hashes held by any endpoint.
  std::int64_t distinct_blocks() const { return used_nodes_; }
  /// Entries evicted by the bounds since create().
  std::uint64_t evictions() const { return evictions_; }
  const KvIndexConfig& config() const { return config_; }
  /// Bytes of storage allocated by create() (the index's whole footprint).
  std::size_t memory_bytes() const;

  /// Checks every structural invariant; returns the first violation. For tests: O(max_entries).
  Expected<void, std::string> check_invariants() const;

 private:
  KvBlockIndex() = default;

  // One hash-table slot: the node (-1 when empty) and the upper half of the mixed hash, whose low
  // bits are also the home slot.
  struct Slot {
    std::uint32_t fingerprint;
    std::int32_t node;
  };
  static std::uint32_t fingerprint_of(BlockHash hash) noexcept;
  /// The node of `hash` or -1; *slot = its slot, or the empty slot ending the probe.
  std::int32_t probe(BlockHash hash, std::size_t* slot) const noexcept;
  std::int32_t find_node(BlockHash hash) const noexcept;
  // Prefetches the index lines that block hashes[i + a few] will probe (apply_stored, apply_removed).
  void prefetch_ahead(std::span<const BlockHash> hashes, std::size_t i) const noexcept;
  std::int32_t find_entry(std::int32_t node, EndpointId endpoint, KvTier tier) const noexcept;
  std::int32_t new_node(BlockHash hash, std::size_t slot);
  void insert_entry(EndpointId endpoint, KvTier tier, BlockHash hash);
  void erase_entry(std::int32_t entry);
  void prefetch_victims(EndpointId endpoint) const noexcept;
  void refresh_node_masks(std::int32_t node);
  void lru_unlink(std::int32_t entry);
  void lru_push_back(EndpointId endpoint, std::int32_t entry);
  void evict_one(EndpointId preferred);
  void table_erase(std::int32_t node);

  KvIndexConfig config_{};
  std::int64_t per_endpoint_cap_ = 0;
  std::int64_t used_entries_ = 0;
  std::int64_t used_nodes_ = 0;
  std::uint64_t evictions_ = 0;

  // Block nodes. The fields every lookup reads share one 32-byte record (one cache miss per block
  // walked); the per-tier detail of lower tiers is kept apart and read only for blocks held in
  // lower tiers alone. Free nodes are chained through `head`.
  struct alignas(32) Node {
    BlockHash hash = 0;
    std::uint64_t gpu = 0;    // endpoints holding the block in GPU
    std::uint64_t lower = 0;  // endpoints holding it in CPU, disk or remote
    std::int32_t head = -1;   // first entry, or next free node when unused
  };
  std::vector<Node, HugePageAllocator<Node>> nodes_;
  // Endpoints holding the block in CPU, and on disk.
  std::vector<std::uint64_t, HugePageAllocator<std::uint64_t>> node_cpu_mask_;
  std::vector<std::uint64_t, HugePageAllocator<std::uint64_t>> node_disk_mask_;
  std::int32_t free_node_ = -1;

  // Entries, one record each (a removal reads all of its fields); free entries are chained
  // through `next`. Per-endpoint LRU lists are circular with a sentinel record per endpoint after
  // the entries (index max_entries + endpoint; only its LRU links are used).
  struct Entry {
    std::int32_t node = -1;  // -1 when free
    std::int32_t next = -1;  // next entry of the same node, or next free entry
    std::int32_t lru_prev = -1;
    std::int32_t lru_next = -1;
    std::uint8_t endpoint = 0;
    std::uint8_t tier = 0;
  };
  std::vector<Entry, HugePageAllocator<Entry>> entries_;
  std::int32_t free_entry_ = -1;
  std::array<std::int64_t, kMaxRoutingEndpoints> endpoint_entries_{};

  // Open addressing: linear probing, backward-shift deletion.
  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  std::size_t slot_mask_ = 0;
};

}  // namespace disagg
