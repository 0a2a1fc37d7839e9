// routing_disagg.cc — our policy ("disagg"): the endpoint with the least expected time to first
// token, behind a load-balance guard. See engine/README.md ("Routing policies") for the rationale.
//
//   rate      = the endpoint's prefill tokens/s, or prefillTokensPerSecond when it reports none
//   reused    = tokens of the prompt cached there, lower tiers weighted by their credit (a block in
//               CPU memory must still be loaded, so it saves less than a block already in HBM)
//   queue     = inflight_prefill_tokens / rate + requestQueueSeconds x (running + waiting)
//   prefill   = (prompt_tokens - reused) / rate
//   pressure  = kvPressureSeconds x ((kv_usage - knee) / (1 - knee))^2 above the knee,
//               + kvPressureSeconds when the new blocks do not fit in the free blocks (preemption)
//   cost      = queue + prefill + pressure   [+ kGuardPenalty when guarded]
// Guard: an endpoint whose load exceeds guardRatio x min load + guardSlack loses to every
// unguarded one, so stale or optimistic prefix information can never pile requests onto one
// endpoint (the failure mode of pure prefix affinity under a hot shared prefix).
#include <algorithm>

#include "disagg/routing.h"
#include "routing_internal.h"

namespace disagg::routing_detail {

namespace {

constexpr double kGuardPenalty = 1e9;  // seconds: larger than any real TTFT estimate

class ExpectedTtft final : public PrefixAwarePolicy {
 public:
  using PrefixAwarePolicy::PrefixAwarePolicy;
  std::string_view name() const noexcept override { return "disagg"; }

 protected:
  void costs(const RouteRequest& request, std::span<const EndpointState> endpoints,
             const OverlapArray& overlaps, std::span<double> out) const noexcept override {
    std::int64_t min_load = INT64_MAX;
    for (const EndpointState& e : endpoints) {
      if (eligible(e, request)) min_load = std::min(min_load, e.load());
    }
    const PolicyOptions& o = options();
    const double block_size = request.block_size > 0 ? request.block_size : 1;
    const auto prompt = static_cast<double>(request.prompt_tokens);
    const auto request_blocks = static_cast<double>(prompt_blocks(request));
    const double guard_limit = o.guard_ratio * static_cast<double>(min_load) + o.guard_slack;
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      const EndpointState& e = endpoints[i];
      if (!eligible(e, request)) {
        out[i] = kIneligible;
        continue;
      }
      const PrefixOverlap& ov = overlap_of(overlaps, e);
      const double rate = e.prefill_tokens_per_second > 0 ? e.prefill_tokens_per_second
                                                          : o.prefill_tokens_per_second;
      const double reused = std::min(prompt, block_size * weighted_cached_blocks(ov, o));
      const double queue = static_cast<double>(e.inflight_prefill_tokens) / rate +
                           o.request_queue_seconds * static_cast<double>(e.load());
      const double prefill = (prompt - reused) / rate;
      double pressure = 0;
      const double usage = std::clamp(e.kv_usage, 0.0, 1.0);
      if (usage > o.kv_pressure_knee) {
        const double x = (usage - o.kv_pressure_knee) / (1.0 - o.kv_pressure_knee);
        pressure += o.kv_pressure_seconds * x * x;
      }
      if (e.total_kv_blocks > 0) {
        const double new_blocks = request_blocks - ov.by_tier[0];
        if (static_cast<double>(e.free_kv_blocks) < new_blocks) pressure += o.kv_pressure_seconds;
      }
      double cost = queue + prefill + pressure;
      if (static_cast<double>(e.load()) > guard_limit) cost += kGuardPenalty;
      out[i] = cost;
    }
  }
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_disagg(const PolicyOptions& options) {
  return std::make_unique<ExpectedTtft>(options);
}

}  // namespace disagg::routing_detail
