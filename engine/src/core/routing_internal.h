// routing_internal.h — shared pieces of the routing policies (not a public header).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "disagg/kv_block_index.h"
#include "disagg/routing.h"

namespace disagg::routing_detail {

/// Per-endpoint scratch on the stack: choose() never allocates.
using CostArray = std::array<double, kMaxRoutingEndpoints>;
using OverlapArray = std::array<PrefixOverlap, kMaxRoutingEndpoints>;

/// Positions choose() and score() consider: min(endpoints, kMaxRoutingEndpoints).
inline std::size_t considered(std::span<const EndpointState> endpoints) {
  return endpoints.size() < kMaxRoutingEndpoints ? endpoints.size() : kMaxRoutingEndpoints;
}

/// Index of the least cost among finite costs[0, n); among k equal least costs, the
/// (seed mod k)-th in index order; -1 when every cost is infinite (or NaN).
std::int32_t argmin_rotated(std::span<const double> costs, std::uint64_t seed) noexcept;

/// Position of a role in per-role policy state.
inline std::size_t role_slot(EndpointRole role) {
  return static_cast<std::size_t>(role) % 3;
}

/// Seed of the tie rotation: the session key, or the request id.
inline std::uint64_t tie_seed(const RouteRequest& r) {
  return r.session_key != 0 ? r.session_key : r.request_id;
}

/// Prompt blocks: ceil(prompt_tokens / block_size), at least the number of hashes.
std::int64_t prompt_blocks(const RouteRequest& r) noexcept;

/// The prompts a precise source routed in the last `ttl_ms` (PolicyOptions::pending_blocks_ms),
/// so that it counts a prompt's blocks as cached on its endpoint from the decision on, not only
/// once the worker has computed them and its KV events have arrived: without it, requests that
/// share a prefix and arrive before the first one's events spread over the workers
/// (bench/notes/local-routing.md).
///
/// A ring of the last kRoutes routes, structure of arrays (first block hash, time, where the
/// route's hashes start, how many, endpoint), and a ring of the last kHashes hashes they hold, all
/// allocated by the constructor; a route whose hashes were overwritten is forgotten with every
/// older one. Routes are kept whole, not merged per endpoint: a block is pending on an endpoint
/// exactly while some route of it there is younger than the TTL, with no per-block time to refresh.
/// Memory: 2 MiB + 32 KiB.
///
/// overlay() cost: a binary search over the routes' times for the first one younger than the TTL,
/// then one comparison of the first block hash per younger route (a contiguous array, eight at a
/// time), one hash read for each route that starts with the request's first block and could
/// lengthen its endpoint's overlap, and a binary search (log2 of the route's blocks) for each that
/// does. Relies on RouteRequest's chained hashes: two prompts that agree on block k agree on every
/// block before it.
class PendingRoutes {
 public:
  static constexpr std::size_t kRoutes = 1024;     // power of two
  static constexpr std::size_t kHashes = 1 << 18;  // power of two

  /// Allocates both rings. Precondition: ttl_ms > 0.
  explicit PendingRoutes(double ttl_ms);

  /// Remembers that `hashes` were routed to `id` at `now_ms` (at most the first kHashes of them).
  /// A time below the previous route's (concurrent callers that read their clocks in another
  /// order) is recorded as that one's: the route lives that much longer. Never allocates.
  void add(EndpointId id, std::span<const BlockHash> hashes, std::int64_t now_ms) noexcept;

  /// Forgets the newest kept route of `hashes` (the same first kHashes of them) to `id`, if any:
  /// its prompt was never computed there (the leg failed). Older routes of the same prompt to `id`
  /// stay. Cost: one comparison per kept route, newest first, until it finds one. Never allocates.
  void forget(EndpointId id, std::span<const BlockHash> hashes) noexcept;

  /// For every endpoint id below out.size() with a route younger than ttl_ms at `now_ms` that
  /// shares more leading blocks with `hashes` than out[id] holds, sets out[id] to that many blocks,
  /// all GPU (the worker serving a prompt holds it in GPU memory). Returns the longest overlap it
  /// set (0 when it set none). Never allocates.
  std::int32_t overlay(std::span<const BlockHash> hashes, std::int64_t now_ms,
                       std::span<PrefixOverlap> out) const noexcept;

 private:
  struct Extent {
    std::uint64_t start = 0;   // position of its first hash in the hash ring, counted since creation
    std::uint32_t blocks = 0;  // hashes kept
    EndpointId endpoint = 0;
  };
  static constexpr std::size_t kRouteMask = kRoutes - 1;
  static constexpr std::size_t kHashMask = kHashes - 1;

  double ttl_ms_;
  // Route seq lives at [seq & kRouteMask]; the scan reads first_ alone for most routes.
  std::vector<BlockHash> first_;       // the route's first block hash
  std::vector<std::int64_t> time_ms_;  // its decision's now_ms, non-decreasing with seq
  std::vector<Extent> extent_;
  std::vector<BlockHash> hashes_;
  std::uint64_t routes_added_ = 0;  // the next route's seq
  std::uint64_t hashes_added_ = 0;  // the next hash goes to hashes_[hashes_added_ & kHashMask]
  std::uint64_t oldest_kept_ = 0;   // the oldest seq still in the ring with its hashes intact
};

/// Where prefix-aware policies read cached prefixes: a KvBlockIndex fed by KV events plus the
/// prompts routed within pendingBlocksMs (precise), or their own LRU history of routed block hashes
/// (approximate). Both learn in on_routed(): the history for good, the pending routes until they
/// expire.
class PrefixSource {
 public:
  /// Precise when options.index is set (with pending routes when options.pending_blocks_ms > 0);
  /// otherwise allocates the history now. Precondition: options validated.
  explicit PrefixSource(const PolicyOptions& options);

  /// Fills out[id] for every endpoint id below `id_limit` (at most kMaxRoutingEndpoints: one more
  /// than the largest id the caller will read, so a small pool does not pay for 64 ids); returns
  /// the longest of those overlaps. Precise: per endpoint, the longer of the index's overlap and
  /// the pending routes' at r.now_ms.
  std::int32_t overlaps(const RouteRequest& r, OverlapArray& out, std::size_t id_limit) const noexcept;

  /// Entries the source attributes to `id` (the size of its "tree" for "sglang"). Precise: the
  /// index's alone.
  std::int64_t size_of(EndpointId id) const;

  /// Remember that `id` now caches the request's blocks: in the history (approximate), or as a
  /// pending route at r.now_ms (precise with pendingBlocksMs > 0; otherwise a no-op). Never
  /// allocates.
  void learn(const RouteRequest& r, EndpointId id);

  /// Forget the pending route of the request to `id` (precise; see PendingRoutes::forget). The
  /// approximate history keeps it: see RoutingPolicy::on_failed. Never allocates.
  void unlearn(const RouteRequest& r, EndpointId id) noexcept {
    if (pending_) pending_->forget(id, r.block_hashes);
  }

  bool precise() const { return !history_.has_value(); }

 private:
  const KvBlockIndex* index_ = nullptr;
  std::optional<KvBlockIndex> history_;
  std::optional<PendingRoutes> pending_;
};

/// One more than the largest endpoint id in `endpoints` (0 when empty), at most
/// kMaxRoutingEndpoints: the `id_limit` of PrefixSource::overlaps() for them.
inline std::size_t id_limit(std::span<const EndpointState> endpoints) noexcept {
  std::size_t limit = 0;
  for (const EndpointState& e : endpoints) { limit = std::max<std::size_t>(limit, std::size_t{e.id} + 1); }
  return std::min<std::size_t>(limit, kMaxRoutingEndpoints);
}

/// Overlap of endpoint `e` from a filled OverlapArray (zero for ids the index does not cover).
inline const PrefixOverlap& overlap_of(const OverlapArray& all, const EndpointState& e) {
  static constexpr PrefixOverlap kNone{};
  return e.id < kMaxRoutingEndpoints ? all[e.id] : kNone;
}

/// Tier-weighted cached blocks: GPU counts 1, lower tiers their credit.
double weighted_cached_blocks(const PrefixOverlap& o, const PolicyOptions& options) noexcept;

/// Base of the prefix-aware policies: computes every endpoint's cached prefix once per decision,
/// then asks the subclass for costs. choose() reports the chosen endpoint's cached blocks.
class PrefixAwarePolicy : public RoutingPolicy {
 public:
  explicit PrefixAwarePolicy(const PolicyOptions& options) : options_(options), source_(options) {}

  void score(const RouteRequest& request, std::span<const EndpointState> endpoints,
             std::span<double> out) const noexcept override;
  RouteDecision choose(const RouteRequest& request, std::span<const EndpointState> endpoints) const noexcept override;
  void on_routed(const RouteRequest& request, const EndpointState& chosen) override {
    source_.learn(request, chosen.id);
  }
  void on_failed(const RouteRequest& request, EndpointId endpoint) noexcept override {
    source_.unlearn(request, endpoint);
  }
  std::int32_t cached_prefix(const RouteRequest& request, const EndpointState& endpoint) const noexcept override;

 protected:
  /// Writes costs[i] for i < costs.size() (== considered endpoints), kIneligible where not eligible.
  virtual void costs(const RouteRequest& request, std::span<const EndpointState> endpoints,
                     const OverlapArray& overlaps, std::span<double> costs) const noexcept = 0;

  const PolicyOptions& options() const { return options_; }
  const PrefixSource& source() const { return source_; }

 private:
  PolicyOptions options_;
  PrefixSource source_;
};

// Factories of the policies (one file each).
std::unique_ptr<RoutingPolicy> make_round_robin();
std::unique_ptr<RoutingPolicy> make_least_load();
std::unique_ptr<RoutingPolicy> make_llmd(const PolicyOptions& options);
std::unique_ptr<RoutingPolicy> make_sglang(const PolicyOptions& options);
std::unique_ptr<RoutingPolicy> make_dynamo(const PolicyOptions& options);
std::unique_ptr<RoutingPolicy> make_disagg(const PolicyOptions& options);

}  // namespace disagg::routing_detail
