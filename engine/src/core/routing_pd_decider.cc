// routing_pd_decider.cc — whether to split a request into remote prefill + decode.
#include "disagg/routing.h"

namespace disagg {

std::string_view to_string(PdReason reason) {
  switch (reason) {
    case PdReason::disaggregate: return "disaggregate";
    case PdReason::below_threshold: return "below_threshold";
    case PdReason::prefill_saturated: return "prefill_saturated";
    case PdReason::no_prefill_endpoint: return "no_prefill_endpoint";
  }
  return "unknown";
}

PdReason PdDecider::decide(std::int64_t prompt_tokens, std::int64_t cached_tokens,
                           std::span<const EndpointState> endpoints) const noexcept {
  const std::int64_t uncached = prompt_tokens - (cached_tokens < prompt_tokens ? cached_tokens : prompt_tokens);
  if (uncached < config_.min_uncached_tokens) return PdReason::below_threshold;
  bool any_prefill = false;
  for (const EndpointState& e : endpoints) {
    if (!e.healthy || e.role != EndpointRole::prefill) continue;
    any_prefill = true;
    const bool saturated =
        (config_.saturation_prefill_tokens > 0 && e.inflight_prefill_tokens >= config_.saturation_prefill_tokens) ||
        (config_.saturation_waiting_requests > 0 && e.waiting_requests >= config_.saturation_waiting_requests);
    if (!saturated) return PdReason::disaggregate;
  }
  return any_prefill ? PdReason::prefill_saturated : PdReason::no_prefill_endpoint;
}

}  // namespace disagg
