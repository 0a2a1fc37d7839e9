// routing_llmd.cc — llm-d-style weighted scorers (REFERENCE.md section 6): queue, KV utilization
// and prefix, each in [0, 1], summed with weights 2, 2, 3 by default; the highest total wins.
#include <algorithm>

#include "disagg/routing.h"
#include "routing_internal.h"

namespace disagg::routing_detail {

namespace {

class LlmdWeighted final : public PrefixAwarePolicy {
 public:
  using PrefixAwarePolicy::PrefixAwarePolicy;
  std::string_view name() const noexcept override { return "llm-d"; }

 protected:
  void costs(const RouteRequest& request, std::span<const EndpointState> endpoints, const OverlapArray& overlaps,
             std::span<double> out) const noexcept override {
    // Queue scorer: min-max normalized waiting requests over the eligible endpoints.
    std::int32_t min_waiting = INT32_MAX;
    std::int32_t max_waiting = 0;
    for (const EndpointState& e : endpoints) {
      if (!eligible(e, request)) continue;
      min_waiting = std::min(min_waiting, e.waiting_requests);
      max_waiting = std::max(max_waiting, e.waiting_requests);
    }
    const auto blocks = static_cast<double>(request.block_hashes.size());
    const PolicyOptions& o = options();
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      const EndpointState& e = endpoints[i];
      if (!eligible(e, request)) {
        out[i] = kIneligible;
        continue;
      }
      const double queue = max_waiting > min_waiting ? static_cast<double>(max_waiting - e.waiting_requests) /
                                                           static_cast<double>(max_waiting - min_waiting)
                                                     : 1.0;
      const double kv = 1.0 - std::clamp(e.kv_usage, 0.0, 1.0);
      // Precise mode weighs blocks in lower tiers by their credit; the history holds GPU only.
      const double prefix = blocks > 0 ? weighted_cached_blocks(overlap_of(overlaps, e), o) / blocks : 0.0;
      out[i] = -(o.queue_weight * queue + o.kv_utilization_weight * kv + o.prefix_weight * prefix);
    }
  }
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_llmd(const PolicyOptions& options) {
  return std::make_unique<LlmdWeighted>(options);
}

}  // namespace disagg::routing_detail
