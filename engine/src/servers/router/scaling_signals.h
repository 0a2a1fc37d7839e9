// scaling_signals.h — the router's per-pool scaling signals (issue 24): what each pool's endpoints
// hold now, the latency the next request would see, and the SLO pressure an autoscaler scales on.
//
// Two pools: "prefill" (prefill endpoints) and "decode" (decode endpoints, or the aggregated ones
// of a deployment without P/D). The pressure is the engine's one rule, stated in
// disagg/pool_pressure.h and applied by the simulator too; the router's load is what it observes:
//   prefill: the waiting prompt tokens of its own leg accounting, the mean prompt and the prompts'
//            spread between reads, the prompt tokens arriving per second (routed to the pool,
//            smoothed over about a minute), and prefill.tokensPerSecond x ready endpoints with
//            prefill.fixedSeconds as the pool's rate and fixed latency;
//   decode:  running sequences and KV utilization from the scraped vLLM gauges, decode.maxSequences
//            per endpoint, and a linear step, stepSecondsBase + stepSecondsPerSequence x batch.
// The scaling rule (desired = ceil(current x pressure / target), HPA tolerance and windows) is the
// autoscaler's: KEDA reads GET /scaling (metrics-api scaler), an HPA the Prometheus gauges.
//
// Computed when /metrics or /scaling is read, never on the request path: the inputs are the
// endpoint table's live state (scraped vLLM gauges, the router's own leg accounting) and two gauges
// the request path keeps anyway.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "router_config.h"

namespace disagg::router {

/// What the router sees of one pool at one moment (EndpointTable::observe_pools fills it).
struct PoolObservation {
  /// Present endpoints that receive requests (health check passed, not ejected, not draining).
  std::int32_t ready_endpoints = 0;
  /// Present endpoints that said they are draining (a 503 answer or health check) and get no new work.
  std::int32_t draining_endpoints = 0;
  /// Prompt tokens of the legs in flight on the ready endpoints that have not had their first byte
  /// (the router's own count: waiting for, or in, prefill).
  double waiting_prompt_tokens = 0;
  /// Sum over the ready endpoints of vllm:num_requests_running, vllm:num_requests_waiting and
  /// vllm:kv_cache_usage_perc.
  double running_sequences = 0;
  double waiting_sequences = 0;
  double kv_utilization_sum = 0;
  /// Requests held for lack of a ready endpoint of the pool (decode: waiting in the router; prefill:
  /// served decode-only because no prefill endpoint was ready).
  double queued_requests = 0;
  /// Prompt tokens and requests ever routed to the pool's present endpoints (monotonic while the
  /// endpoints stay): the mean prompt is taken over what was routed between two reads.
  double routed_prompt_tokens_total = 0;
  double routed_requests_total = 0;
  /// The sum of those prompts' squares (their spread: the prefill pool's queueing bound needs it).
  double routed_prompt_squares_total = 0;
};

/// One pool's signals, as exported.
struct PoolSignals {
  double pressure = 0;
  std::int32_t ready_endpoints = 0;
  std::int32_t draining_endpoints = 0;
  double waiting_prompt_tokens = 0;
  double predicted_ttft_seconds = 0;  ///< prefill pool only; 0 with no ready endpoint
  double running_sequences = 0;
  double kv_utilization = 0;          ///< mean over the ready endpoints, 0..1
  double predicted_tpot_seconds = 0;  ///< decode pool only; 0 with no ready endpoint
  double queued_requests = 0;
  double prompt_tokens_per_second = 0;  ///< prompt tokens routed to the pool per second (smoothed)
  double waiting_sequences = 0;         ///< vllm:num_requests_waiting over the ready endpoints
  /// Prefill pool only: the utilization its ready endpoints sustain within the TTFT SLO for 99% of
  /// requests (disagg/autoscaler.h, prefill_sustainable_utilization); 0 with no ready endpoint.
  double sustainable_utilization = 0;
};

/// The prefill pool's signals; `mean_prompt_tokens` is the mean prompt of its recent requests,
/// `prompt_tokens_per_second` the rate of prompt tokens routed to it, `prompt_cv2` the squared
/// coefficient of variation of their lengths (1, the exponential's, when unknown).
PoolSignals prefill_pool_signals(const PoolObservation& o, double mean_prompt_tokens, double prompt_tokens_per_second,
                                 const AutoscalingSignalsConfig& c, double prompt_cv2 = 1);
/// The decode pool's signals.
PoolSignals decode_pool_signals(const PoolObservation& o, const AutoscalingSignalsConfig& c);

/// The disagg_router_pool_* gauges of both pools (Prometheus text, HELP and TYPE once per family).
void write_pool_signals(std::string& out, const PoolSignals& prefill, const PoolSignals& decode);
/// GET /scaling's body: {"pools":{"prefill":{"pressure":...,...},"decode":{...}}}.
std::string pool_signals_json(const PoolSignals& prefill, const PoolSignals& decode);

/// The mean prompt of the requests routed between two reads, from monotonic totals. The first read
/// takes everything since the start; a read with no new request keeps the last mean; totals that
/// went back (an endpoint left) restart the count. Thread-safe (a mutex: never the request path).
///
/// It also keeps the rate of prompt tokens, smoothed exponentially with a time constant of
/// kRateSeconds over the reads (each read weighs in by the time since the previous one, so the
/// result does not depend on how often /metrics and /scaling are read).
class MeanPromptTracker {
 public:
  static constexpr double kRateSeconds = 60;

  struct Reading {
    double mean_prompt_tokens = 0;
    double prompt_tokens_per_second = 0;
    /// The squared coefficient of variation of the prompts between the reads (variance / mean²),
    /// from `squares_total`; 1 (the exponential's) until known.
    double prompt_cv2 = 1;
  };
  /// `now_seconds`: a steady clock. `squares_total`: the routed prompts' squares summed (< 0: not
  /// counted, cv² stays 1).
  Reading update(double tokens_total, double requests_total, double now_seconds, double squares_total = -1);

 private:
  std::mutex mu_;
  double tokens_ = 0;
  double requests_ = 0;
  double squares_ = 0;
  double mean_ = 0;
  double cv2_ = 1;
  double rate_tokens_ = 0;  // the totals at the last rate update
  double rate_time_ = -1;   // < 0: no read yet
  double rate_ = 0;
};

}  // namespace disagg::router
