// pool_pressure.cc — the prefill half of a pool's SLO pressure (disagg/pool_pressure.h).
#include "disagg/pool_pressure.h"

#include "disagg/autoscaler.h"

namespace disagg {

double decode_step_seconds(const CostModel& model, double batch, double context_tokens) {
  const auto whole = [&model, context_tokens](std::int64_t b) {
    return model.decode_batch_time(b, static_cast<std::int64_t>(static_cast<double>(b) * context_tokens)).total_seconds;
  };
  const auto lo = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(batch)));
  const double frac = batch - static_cast<double>(lo);
  const double at_lo = whole(lo);
  return frac > 0 ? at_lo + frac * (whole(lo + 1) - at_lo) : at_lo;
}

PrefillPressure prefill_pressure(const PrefillLoad& load) {
  PrefillPressure r;
  if (load.ready_replicas <= 0) {
    r.pressure = pressure_without_replicas(load.queued_requests);
    return r;
  }
  const double capacity = load.capacity_tokens_per_second;
  const double mean = std::max(0.0, finite_or_zero(load.mean_prompt_tokens));
  const double fixed = std::max(0.0, finite_or_zero(load.fixed_seconds));
  r.predicted_ttft_seconds = finite_or_zero((std::max(0.0, load.pending_prompt_tokens) + mean) / capacity + fixed);
  // One replica's service time for the mean prompt: the ready replicas share the capacity evenly.
  const double service = mean / (capacity / load.ready_replicas);
  const double cv2 = std::isfinite(load.prompt_cv2) ? std::max(0.0, load.prompt_cv2) : 1.0;
  r.sustainable_utilization =
      prefill_sustainable_utilization(load.ready_replicas, finite_or_zero(service), cv2, fixed, load.ttft_slo_seconds);
  const double arriving = std::max(0.0, finite_or_zero(load.prompt_tokens_per_second));
  r.pressure = finite_or_zero(
      std::max(r.predicted_ttft_seconds / load.ttft_slo_seconds, arriving / capacity / r.sustainable_utilization));
  return r;
}

}  // namespace disagg
