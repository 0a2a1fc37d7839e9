// disagg/pool_pressure.h — a pool's SLO pressure, the one signal the scaling rule (disagg/autoscaler.h)
// reads. Written once: the router computes it from what it observes of its endpoints
// (servers/router/scaling_signals.cc), the simulator from its replicas' state (sim/simulator_autoscale.cc); each
// caller fills a load below and both get the same number for the same load.
//
// Prefill pools: the larger of
//   predicted TTFT / SLO   the prompt tokens pending on the ready replicas plus one mean prompt, over
//                          their prefill rate, plus the fixed latency;
//   utilization / bound    the prompt tokens arriving per second over that rate, against what a pool
//                          of this size sustains within the TTFT SLO's tail
//                          (prefill_sustainable_utilization). The predicted TTFT alone is flat until a
//                          queue builds (a replica at 10% and one at 90% predict about the same), so the
//                          HPA formula would shrink a busy pool to one replica and flap.
// Decode (and aggregated) pools: the largest of
//   predicted TPOT / SLO   one replica's decode step at (running per replica + 1) sequences;
//   KV in use / 0.9        the mean KV-cache utilization of the ready replicas (vLLM preempts near
//                          100%; the rule's default target, 0.95, holds 86%);
//   slots in use / 0.9     the running sequences as a rate (Little's law): they step at the batch the
//                          replicas run now, the pool's capacity is ready x maxSequences at the full
//                          batch's step. A count of sequences alone is not proportional to the load:
//                          one replica steps slower than two, so the same requests stay longer there,
//                          and a pool shrinking from 2 to 1 measured itself full at 1 and grew again
//                          (the simulator's day flapped 22 times; bench/notes/autoscaling.md).
//   Waiting sequences stay out: a queue is a backlog, not a rate, and counting it sent decode to its
//   maximum while a prefill pool flushed a long-prompt surge's backlog into it.
// No ready replica: 1 + the requests held for the pool (KEDA's activation scales it from zero), 0
// when nothing waits.
//
// Every function is pure, allocation-free and returns a finite value >= 0 for any input.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "disagg/cost_model.h"

namespace disagg {

/// KV (and slot) utilization at which a decode pool counts as full: pressure 1.
inline constexpr double kPoolKvFull = 0.9;

/// How the rule reads an observation that is missing or broken (NaN, an infinity from a zero
/// divisor): as 0, so a pool with no data asks for nothing rather than everything.
inline double finite_or_zero(double v) {
  return std::isfinite(v) ? v : 0;
}

/// A prefill pool's load, as its caller measures it.
struct PrefillLoad {
  std::int32_t ready_replicas = 0;        ///< replicas serving (> 0 for a pressure of this rule)
  double queued_requests = 0;             ///< requests held for lack of a ready replica
  double pending_prompt_tokens = 0;       ///< prompt tokens waiting for, or in, prefill on the ready replicas
  double mean_prompt_tokens = 0;          ///< recent mean prompt
  double prompt_cv2 = 1;                  ///< squared coefficient of variation of the prompts
  double prompt_tokens_per_second = 0;    ///< arriving
  double capacity_tokens_per_second = 0;  ///< prefill rate of the ready replicas together
  double fixed_seconds = 0;               ///< latency besides the prefill (API server, first step)
  double ttft_slo_seconds = 1;
};

struct PrefillPressure {
  double pressure = 0;
  double predicted_ttft_seconds = 0;
  double sustainable_utilization = 0;  ///< the bound the utilization is divided by
};

/// A decode (or aggregated) pool's load.
struct DecodeLoad {
  std::int32_t ready_replicas = 0;
  double queued_requests = 0;
  double running_sequences = 0;  ///< over all ready replicas
  double kv_utilization = 0;     ///< the mean over the ready replicas, 0 to 1
  double max_sequences = 0;      ///< per replica (vLLM --max-num-seqs); 0 leaves the slot term out
  double tpot_slo_seconds = 1;
};

struct DecodePressure {
  double pressure = 0;
  double predicted_tpot_seconds = 0;
};

/// One replica's decode step by a cost model (the simulator's step model): `batch` sequences (>= 1)
/// of `context_tokens` each, a fractional batch linear between the whole batches on either side, as
/// the router's linear step reads it.
double decode_step_seconds(const CostModel& model, double batch, double context_tokens);

/// The pressure of a pool with no ready replica.
inline double pressure_without_replicas(double queued_requests) {
  return queued_requests > 0 ? 1 + queued_requests : 0;
}

PrefillPressure prefill_pressure(const PrefillLoad& load);

/// `step(batch)`: one replica's decode step in seconds at `batch` (>= 1, fractional) sequences, by the
/// caller's step model (the router's linear one, the simulator's cost model).
template <class StepSeconds>
DecodePressure decode_pressure(const DecodeLoad& load, StepSeconds&& step) {
  DecodePressure r;
  if (load.ready_replicas <= 0) {
    r.pressure = pressure_without_replicas(load.queued_requests);
    return r;
  }
  const auto finite = [](double v) { return std::isfinite(v) && v > 0 ? v : 0.0; };
  const double ready = static_cast<double>(load.ready_replicas);
  const double running = finite(load.running_sequences);
  const double per_replica = running / ready;
  r.predicted_tpot_seconds = finite(step(per_replica + 1));
  double slots = 0;
  if (load.max_sequences > 0) {
    const double full = load.max_sequences;
    const double now = finite(step(std::clamp(per_replica, 1.0, full)));
    const double at_full = finite(step(full));
    slots = running / (full * ready) * (now > 0 && at_full > 0 ? at_full / now : 1.0);
  }
  const double kv = std::clamp(finite(load.kv_utilization), 0.0, 1.0);
  r.pressure =
      finite(std::max({r.predicted_tpot_seconds / load.tpot_slo_seconds, kv / kPoolKvFull, slots / kPoolKvFull}));
  return r;
}

}  // namespace disagg
