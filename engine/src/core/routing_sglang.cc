// routing_sglang.cc — SGLang-style cache-aware routing (REFERENCE.md section 6).
//
// While loads are imbalanced (max - min > balanceAbsThreshold and max > balanceRelThreshold x min)
// the shortest queue wins. Otherwise, when the best prefix match ratio exceeds cacheThreshold, the
// best-matching endpoint wins (ties: lower load); else the endpoint whose cache ("tree") is smallest
// wins, since it has the most room (ties: lower load). SGLang keeps a radix tree over request text
// per worker, which its router grows when it routes a request there; we keep the equivalent at
// block granularity: an LRU history of the block hashes routed to each endpoint, always, even when
// a KV-event index is offered. With the index as the tree, "smallest tree" read cache contents
// that grow only when a prefill runs, so every request of a burst went to the same endpoint (4
// prefill + 2 decode replaying a Mooncake conversation trace: prefill busy 0.32-0.68, TTFT p90
// 22 s). Under P/D each role's endpoints have trees and loads of their own, as SGLang's PD router
// keeps one policy per role.
// The costs encode that order lexicographically in one double (exact below 2^20 requests).
#include <algorithm>

#include "disagg/routing.h"
#include "routing_internal.h"

namespace disagg::routing_detail {

namespace {

constexpr double kMajor = 1048576.0;  // 2^20: one step of the primary key outweighs any load

class SglangCacheAware final : public PrefixAwarePolicy {
 public:
  using PrefixAwarePolicy::PrefixAwarePolicy;
  std::string_view name() const noexcept override { return "sglang"; }

 protected:
  void costs(const RouteRequest& request, std::span<const EndpointState> endpoints, const OverlapArray& overlaps,
             std::span<double> out) const noexcept override {
    std::int64_t min_load = INT64_MAX;
    std::int64_t max_load = 0;
    const auto blocks = static_cast<std::int64_t>(request.block_hashes.size());
    std::int32_t best_match = 0;
    for (const EndpointState& e : endpoints) {
      if (!eligible(e, request)) continue;
      min_load = std::min(min_load, e.load());
      max_load = std::max(max_load, e.load());
      best_match = std::max(best_match, overlap_of(overlaps, e).blocks);
    }
    const PolicyOptions& o = options();
    const bool imbalanced = static_cast<double>(max_load - min_load) > o.balance_abs_threshold &&
                            static_cast<double>(max_load) > o.balance_rel_threshold * static_cast<double>(min_load);
    const bool cache_hit =
        blocks > 0 && static_cast<double>(best_match) / static_cast<double>(blocks) > o.cache_threshold;
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      const EndpointState& e = endpoints[i];
      if (!eligible(e, request)) {
        out[i] = kIneligible;
        continue;
      }
      const auto load = static_cast<double>(e.load());
      if (imbalanced) {
        out[i] = load;
      } else if (cache_hit) {
        // Unmatched blocks first (fewer is better), then load.
        out[i] = static_cast<double>(blocks - overlap_of(overlaps, e).blocks) * kMajor + load;
      } else {
        out[i] = static_cast<double>(source().size_of(e.id)) * kMajor + load;
      }
    }
  }
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_sglang(const PolicyOptions& options) {
  PolicyOptions own = options;
  own.index = nullptr;  // its own tree of routed blocks (see the file comment)
  return std::make_unique<SglangCacheAware>(own);
}

}  // namespace disagg::routing_detail
