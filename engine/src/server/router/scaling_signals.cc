// scaling_signals.cc — the per-pool scaling signals (scaling_signals.h).
#include "scaling_signals.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <nlohmann/json.hpp>

#include "disagg/autoscaler.h"
#include "router_metrics.h"

namespace disagg::router {

namespace {

// KV utilization at which a decode pool counts as full (pressure 1): vLLM preempts near 100 %; the
// rule's default target (0.95) holds 86 % and asks for a replica above 94 % (HPA's 10% tolerance).
constexpr double kKvFull = 0.9;

double finite_or_zero(double v) { return std::isfinite(v) ? v : 0; }

// No ready endpoint: requests waiting for the pool force it up from zero (KEDA's activation);
// nothing waiting leaves it at zero.
double pressure_without_endpoints(const PoolObservation& o) {
  return o.queued_requests > 0 ? 1 + o.queued_requests : 0;
}

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

PoolSignals prefill_pool_signals(const PoolObservation& o, double mean_prompt_tokens, double prompt_tokens_per_second,
                                 const AutoscalingSignalsConfig& c, double prompt_cv2) {
  PoolSignals s = common(o);
  s.prompt_tokens_per_second = std::max(0.0, finite_or_zero(prompt_tokens_per_second));
  if (o.ready_endpoints <= 0) {
    s.pressure = pressure_without_endpoints(o);
    return s;
  }
  const double capacity = c.prefill_tokens_per_second * o.ready_endpoints;
  s.predicted_ttft_seconds =
      finite_or_zero((s.waiting_prompt_tokens + std::max(0.0, mean_prompt_tokens)) / capacity + c.prefill_fixed_seconds);
  // The utilization against what these endpoints sustain within the TTFT SLO's tail (one replica
  // 0.87 of its rate, four 0.97, for 2,000-token prompts at 22k tokens/s and a 2 s SLO): a pressure
  // of 1 is the SLO at any pool size, as the simulator measures it.
  s.sustainable_utilization = prefill_sustainable_utilization(
      o.ready_endpoints, std::max(0.0, mean_prompt_tokens) / c.prefill_tokens_per_second,
      std::isfinite(prompt_cv2) ? std::max(0.0, prompt_cv2) : 1.0, c.prefill_fixed_seconds, c.ttft_slo_seconds);
  s.pressure = finite_or_zero(std::max(s.predicted_ttft_seconds / c.ttft_slo_seconds,
                                       s.prompt_tokens_per_second / capacity / s.sustainable_utilization));
  return s;
}

PoolSignals decode_pool_signals(const PoolObservation& o, const AutoscalingSignalsConfig& c) {
  PoolSignals s = common(o);
  if (o.ready_endpoints <= 0) {
    s.pressure = pressure_without_endpoints(o);
    return s;
  }
  const double per_endpoint = s.running_sequences / o.ready_endpoints;
  s.predicted_tpot_seconds =
      finite_or_zero(c.decode_step_seconds_base + c.decode_step_seconds_per_sequence * (per_endpoint + 1));
  // The slot term as a rate (Little's law): the sequences stepping at the batch an endpoint runs now
  // produce running / step(batch) tokens per second, the pool's capacity is ready x maxSequences /
  // step(maxSequences). A count of sequences alone is not proportional to the load (one endpoint
  // steps slower than two, so the same requests stay longer there), and a pool shrinking from 2 to 1
  // would measure itself full at 1 and grow again (the simulator's day flapped 22 times). Waiting
  // sequences are a backlog, not a rate, and stay out: a full pool reads >= 1 / 0.9 from its slots or
  // its KV already, and counting the queue sent decode to its maximum while a prefill pool flushed a
  // long-prompt surge's backlog into it (bench/notes/autoscaling.md).
  double slots = 0;
  if (c.decode_max_sequences > 0) {
    const double full = c.decode_max_sequences;
    const double batch = std::clamp(per_endpoint, 1.0, full);
    const double step_now = c.decode_step_seconds_base + c.decode_step_seconds_per_sequence * batch;
    const double step_full = c.decode_step_seconds_base + c.decode_step_seconds_per_sequence * full;
    const double ratio = step_now > 0 && step_full > 0 ? step_full / step_now : 1;
    slots = s.running_sequences / (full * o.ready_endpoints) * ratio;
  }
  s.pressure = finite_or_zero(
      std::max({s.predicted_tpot_seconds / c.tpot_slo_seconds, s.kv_utilization / kKvFull, slots / kKvFull}));
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
