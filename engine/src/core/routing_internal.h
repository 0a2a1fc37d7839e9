// routing_internal.h — shared pieces of the routing policies (not a public header).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

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
inline std::size_t role_slot(EndpointRole role) { return static_cast<std::size_t>(role) % 3; }

/// Seed of the tie rotation: the session key, or the request id.
inline std::uint64_t tie_seed(const RouteRequest& r) {
  return r.session_key != 0 ? r.session_key : r.request_id;
}

/// Prompt blocks: ceil(prompt_tokens / block_size), at least the number of hashes.
std::int64_t prompt_blocks(const RouteRequest& r) noexcept;

/// Where prefix-aware policies read cached prefixes: a KvBlockIndex fed by KV events (precise), or
/// their own LRU history of routed block hashes (approximate, learned in on_routed()).
class PrefixSource {
 public:
  /// Precise when options.index is set; otherwise allocates the history now.
  /// Precondition: options validated.
  explicit PrefixSource(const PolicyOptions& options);

  /// Fills out[id] for every endpoint id below `id_limit` (at most kMaxRoutingEndpoints: one more
  /// than the largest id the caller will read, so a small pool does not pay for 64 ids); returns
  /// the longest of those overlaps.
  std::int32_t overlaps(const RouteRequest& r, OverlapArray& out,
                        std::size_t id_limit) const noexcept;

  /// Entries the source attributes to `id` (the size of its "tree" for "sglang").
  std::int64_t size_of(EndpointId id) const;

  /// Approximate mode: remember that `id` now caches the request's blocks. Precise: no-op.
  void learn(const RouteRequest& r, EndpointId id);

  bool precise() const { return !history_.has_value(); }

 private:
  const KvBlockIndex* index_ = nullptr;
  std::optional<KvBlockIndex> history_;
};

/// One more than the largest endpoint id in `endpoints` (0 when empty), at most
/// kMaxRoutingEndpoints: the `id_limit` of PrefixSource::overlaps() for them.
inline std::size_t id_limit(std::span<const EndpointState> endpoints) noexcept {
  std::size_t limit = 0;
  for (const EndpointState& e : endpoints) {
    limit = std::max<std::size_t>(limit, std::size_t{e.id} + 1);
  }
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
  RouteDecision choose(const RouteRequest& request,
                       std::span<const EndpointState> endpoints) const noexcept override;
  void on_routed(const RouteRequest& request, const EndpointState& chosen) override {
    source_.learn(request, chosen.id);
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
