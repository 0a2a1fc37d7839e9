// scaling_signals.cc — the per-pool scaling signals (scaling_signals.h).
#include "scaling_signals.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <nlohmann/json.hpp>

#include "disagg/pool_pressure.h"
#include "router_metrics.h"

namespace disagg::router {

namespace {

PoolSignals common(const PoolObservation& o) {
  PoolSignals s;
  s.ready_endpoints = o.ready_endpoints;
  s.draining_endpoints = o.draining_endpoints;
  s.waiting_prompt_tokens = std::max(0.0, o.waiting_prompt_tokens);
  s.running_sequences = std::max(0.0, o.running_sequences);
  s.kv_utilization = o.ready_endpoints > 0 ? std::clamp(o.kv_utilization_sum / o.ready_endpoints, 0.0, 1.0) : 0;
  s.queued_requests = std::max(0.0, o.queued_requests);
  s.waiting_sequences = std::max(0.0, o.waiting_sequences);
  return s;
}

}  // namespace

// The pressure itself is the engine's one rule (disagg/pool_pressure.h); here, what the router
// observes becomes its load: the endpoints' configured prefill rate and linear decode step.
PoolSignals prefill_pool_signals(const PoolObservation& o, double mean_prompt_tokens, double prompt_tokens_per_second,
                                 const AutoscalingSignalsConfig& c, double prompt_cv2) {
  PoolSignals s = common(o);
  s.prompt_tokens_per_second = std::max(0.0, finite_or_zero(prompt_tokens_per_second));
  PrefillLoad load;
  load.ready_replicas = o.ready_endpoints;
  load.queued_requests = s.queued_requests;
  load.pending_prompt_tokens = s.waiting_prompt_tokens;
  load.mean_prompt_tokens = mean_prompt_tokens;
  load.prompt_cv2 = prompt_cv2;
  load.prompt_tokens_per_second = s.prompt_tokens_per_second;
  load.capacity_tokens_per_second = c.prefill_tokens_per_second * std::max(o.ready_endpoints, 0);
  load.fixed_seconds = c.prefill_fixed_seconds;
  load.ttft_slo_seconds = c.ttft_slo_seconds;
  const PrefillPressure p = prefill_pressure(load);
  s.predicted_ttft_seconds = p.predicted_ttft_seconds;
  s.sustainable_utilization = p.sustainable_utilization;
  s.pressure = p.pressure;
  return s;
}

PoolSignals decode_pool_signals(const PoolObservation& o, const AutoscalingSignalsConfig& c) {
  PoolSignals s = common(o);
  DecodeLoad load;
  load.ready_replicas = o.ready_endpoints;
  load.queued_requests = s.queued_requests;
  load.running_sequences = s.running_sequences;
  load.kv_utilization = s.kv_utilization;
  load.max_sequences = c.decode_max_sequences;
  load.tpot_slo_seconds = c.tpot_slo_seconds;
  const DecodePressure p = decode_pressure(
      load, [&c](double batch) { return c.decode_step_seconds_base + c.decode_step_seconds_per_sequence * batch; });
  s.predicted_tpot_seconds = p.predicted_tpot_seconds;
  s.pressure = p.pressure;
  return s;
}

void write_pool_signals(std::string& out, const PoolSignals& prefill, const PoolSignals& decode) {
  struct Family {
    const char* name;
    const char* help;
    double (*value)(const PoolSignals&);
  };
  static constexpr std::array<Family, 12> families = {{
      {"disagg_router_pool_slo_pressure",
       "Scaling signal: predicted latency of the next request / its SLO, or the capacity in use (prefill: max of "
       "TTFT / SLO and arriving prompt tokens / throughput / sustainable utilization; decode: max of TPOT / SLO, "
       "KV utilization / 0.9 and running sequences / (maxSequences x 0.9) as a rate: x step(maxSequences) / "
       "step(running per endpoint)); 1 + queued requests with no ready endpoint.",
       [](const PoolSignals& s) { return s.pressure; }},
      {"disagg_router_pool_ready_endpoints", "Endpoints of the pool that receive requests.",
       [](const PoolSignals& s) { return static_cast<double>(s.ready_endpoints); }},
      {"disagg_router_pool_draining_endpoints", "Endpoints of the pool that are draining (no new requests).",
       [](const PoolSignals& s) { return static_cast<double>(s.draining_endpoints); }},
      {"disagg_router_pool_waiting_prompt_tokens",
       "Prompt tokens routed to the pool's ready endpoints and not yet prefilled (no first byte).",
       [](const PoolSignals& s) { return s.waiting_prompt_tokens; }},
      {"disagg_router_pool_predicted_ttft_seconds",
       "Predicted TTFT of the next request on the prefill pool (0 with no ready endpoint).",
       [](const PoolSignals& s) { return s.predicted_ttft_seconds; }},
      {"disagg_router_pool_running_sequences", "vllm:num_requests_running summed over the pool's ready endpoints.",
       [](const PoolSignals& s) { return s.running_sequences; }},
      {"disagg_router_pool_kv_utilization", "vllm:kv_cache_usage_perc averaged over the pool's ready endpoints (0..1).",
       [](const PoolSignals& s) { return s.kv_utilization; }},
      {"disagg_router_pool_predicted_tpot_seconds",
       "Predicted TPOT of the next request on the decode pool (0 with no ready endpoint).",
       [](const PoolSignals& s) { return s.predicted_tpot_seconds; }},
      {"disagg_router_pool_queued_requests", "Requests held for lack of a ready endpoint of the pool.",
       [](const PoolSignals& s) { return s.queued_requests; }},
      {"disagg_router_pool_prompt_tokens_per_second",
       "Prompt tokens routed to the pool per second, smoothed over about a minute.",
       [](const PoolSignals& s) { return s.prompt_tokens_per_second; }},
      {"disagg_router_pool_waiting_sequences", "vllm:num_requests_waiting summed over the pool's ready endpoints.",
       [](const PoolSignals& s) { return s.waiting_sequences; }},
      {"disagg_router_pool_sustainable_utilization",
       "Prefill: the share of its ready endpoints' throughput the pool sustains within the TTFT SLO for 99% of "
       "requests (M/G/c at the recent prompts' mean and spread); its utilization is divided by it.",
       [](const PoolSignals& s) { return s.sustainable_utilization; }},
  }};
  for (const Family& f : families) {
    out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n");
    out.append("# TYPE ").append(f.name).append(" gauge\n");
    write_sample(out, f.name, "pool=\"prefill\"", f.value(prefill));
    write_sample(out, f.name, "pool=\"decode\"", f.value(decode));
  }
}

std::string pool_signals_json(const PoolSignals& prefill, const PoolSignals& decode) {
  auto one = [](const PoolSignals& s) {
    return nlohmann::json{{"pressure", s.pressure},
                          {"readyEndpoints", s.ready_endpoints},
                          {"drainingEndpoints", s.draining_endpoints},
                          {"waitingPromptTokens", s.waiting_prompt_tokens},
                          {"predictedTtftSeconds", s.predicted_ttft_seconds},
                          {"runningSequences", s.running_sequences},
                          {"kvUtilization", s.kv_utilization},
                          {"predictedTpotSeconds", s.predicted_tpot_seconds},
                          {"queuedRequests", s.queued_requests},
                          {"promptTokensPerSecond", s.prompt_tokens_per_second},
                          {"waitingSequences", s.waiting_sequences},
                          {"sustainableUtilization", s.sustainable_utilization}};
  };
  return nlohmann::json{{"pools", {{"prefill", one(prefill)}, {"decode", one(decode)}}}}.dump();
}

MeanPromptTracker::Reading MeanPromptTracker::update(double tokens_total, double requests_total, double now_seconds,
                                                     double squares_total) {
  std::lock_guard lock(mu_);
  // The rate: tokens since the last read over the time since, weighed in by that time.
  if (rate_time_ < 0 || tokens_total < rate_tokens_) {  // first read, or an endpoint left with its counts
    rate_time_ = now_seconds;
    rate_tokens_ = tokens_total;
  } else if (const double elapsed = now_seconds - rate_time_; elapsed > 0) {
    const double weight = 1 - std::exp(-elapsed / kRateSeconds);
    rate_ += weight * ((tokens_total - rate_tokens_) / elapsed - rate_);
    rate_time_ = now_seconds;
    rate_tokens_ = tokens_total;
  }
  const double dt = tokens_total - tokens_;
  const double dr = requests_total - requests_;
  const double dsq = squares_total - squares_;
  if (dt < 0 || dr < 0 || (squares_total >= 0 && dsq < 0)) {  // an endpoint left with its counts: start over from here
    tokens_ = tokens_total;
    requests_ = requests_total;
    squares_ = std::max(0.0, squares_total);
    return {mean_, rate_, cv2_};
  }
  if (dr > 0) {
    mean_ = dt / dr;
    // Two requests at least for a spread; the squares are counted in 16ths, so clamp at 0.
    if (squares_total >= 0 && dr >= 2 && mean_ > 0) cv2_ = std::max(0.0, dsq / dr / (mean_ * mean_) - 1);
    tokens_ = tokens_total;
    requests_ = requests_total;
    squares_ = std::max(0.0, squares_total);
  }
  return {mean_, rate_, cv2_};
}

}  // namespace disagg::router
