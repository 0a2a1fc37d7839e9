// routing_dynamo.cc — Dynamo-style KV router cost (REFERENCE.md section 6), in blocks:
//   cost = prefill_blocks - overlapCredit x cached_blocks + decode_blocks, lowest wins, where
//   prefill_blocks = the request's prompt blocks + prompt tokens already queued for prefill there,
//   cached_blocks  = the endpoint's cached prefix, lower tiers weighted by their tier credit,
//   decode_blocks  = KV blocks in use there (total - free; 0 when the endpoint reports no total).
#include "disagg/routing.h"
#include "routing_internal.h"

namespace disagg::routing_detail {

namespace {

class DynamoCost final : public PrefixAwarePolicy {
 public:
  using PrefixAwarePolicy::PrefixAwarePolicy;
  std::string_view name() const noexcept override { return "dynamo"; }

 protected:
  void costs(const RouteRequest& request, std::span<const EndpointState> endpoints, const OverlapArray& overlaps,
             std::span<double> out) const noexcept override {
    const double block_size = request.block_size > 0 ? request.block_size : 1;
    const auto request_blocks = static_cast<double>(prompt_blocks(request));
    const PolicyOptions& o = options();
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      const EndpointState& e = endpoints[i];
      if (!eligible(e, request)) {
        out[i] = kIneligible;
        continue;
      }
      const double prefill = request_blocks + static_cast<double>(e.inflight_prefill_tokens) / block_size;
      const double cached = o.overlap_credit * weighted_cached_blocks(overlap_of(overlaps, e), o);
      const double decode = e.total_kv_blocks > 0 ? static_cast<double>(e.total_kv_blocks - e.free_kv_blocks) : 0.0;
      out[i] = prefill - cached + decode;
    }
  }
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_dynamo(const PolicyOptions& options) {
  return std::make_unique<DynamoCost>(options);
}

}  // namespace disagg::routing_detail
