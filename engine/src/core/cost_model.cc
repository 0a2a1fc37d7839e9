#include "disagg/cost_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "disagg/cost_model_config.h"

namespace disagg {

std::string_view to_string(CostModelErrc code) {
  switch (code) {
    case CostModelErrc::missing_field: return "missing_field";
    case CostModelErrc::wrong_type: return "wrong_type";
    case CostModelErrc::not_positive: return "not_positive";
    case CostModelErrc::negative: return "negative";
    case CostModelErrc::not_a_fraction: return "not_a_fraction";
    case CostModelErrc::not_an_integer: return "not_an_integer";
    case CostModelErrc::not_a_whole_number: return "not_a_whole_number";
    case CostModelErrc::interconnect_required: return "interconnect_required";
    case CostModelErrc::out_of_range: return "out_of_range";
  }
  return "unknown";
}

namespace {

std::string format_number(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

}  // namespace

std::string CostModelError::message() const {
  std::string quoted = "'" + field + "'";
  std::string rule;
  switch (code) {
    case CostModelErrc::missing_field: rule = quoted + " is required"; break;
    case CostModelErrc::wrong_type: rule = quoted + " has the wrong type"; break;
    case CostModelErrc::not_positive:
      rule = quoted + " (" + format_number(value) + ") must be > 0";
      break;
    case CostModelErrc::negative:
      rule = quoted + " (" + format_number(value) + ") must be >= 0";
      break;
    case CostModelErrc::not_a_fraction:
      rule = quoted + " (" + format_number(value) + ") must be in (0, 1]";
      break;
    case CostModelErrc::not_an_integer:
      rule = quoted + " (" + format_number(value) + ") must be a whole number >= 1";
      break;
    case CostModelErrc::not_a_whole_number:
      rule = quoted + " (" + format_number(value) + ") must be a whole number >= 0";
      break;
    case CostModelErrc::interconnect_required:
      rule = quoted + " (" + format_number(value) + ") must be > 0 when parallel.tensorParallel > 1";
      break;
    case CostModelErrc::out_of_range:
      rule = quoted + " (" + format_number(value) + ") is out of range";
      break;
  }
  return hint.empty() ? rule : rule + "; " + std::string(hint);
}

namespace {

// True when `v` breaks `c`; *code then names the broken rule.
bool violates(FieldConstraint c, double v, CostModelErrc* code) {
  // NaN and infinities fail every rule: !(v > 0) is true for NaN.
  const bool finite = std::isfinite(v);
  switch (c) {
    case FieldConstraint::positive:
      *code = CostModelErrc::not_positive;
      return !finite || !(v > 0);
    case FieldConstraint::non_negative:
      *code = CostModelErrc::negative;
      return !finite || !(v >= 0);
    case FieldConstraint::fraction:
      *code = CostModelErrc::not_a_fraction;
      return !finite || !(v > 0 && v <= 1);
    case FieldConstraint::positive_integer:
      *code = CostModelErrc::not_an_integer;
      return !finite || !(v >= 1) || v != std::floor(v) || v > 1 << 20;
    case FieldConstraint::whole_number:
      *code = CostModelErrc::not_a_whole_number;
      return !finite || !(v >= 0) || v != std::floor(v) || v > 1 << 20;
  }
  return false;
}

}  // namespace

Expected<CostModel, CostModelError> CostModel::create(const CostModelParams& params) {
  for (const CostModelField& f : cost_model_fields()) {
    const double v = f.get(params);
    CostModelErrc code{};
    if (violates(f.constraint, v, &code)) {
      return unexpected(CostModelError{code, std::string(f.section) + "." + std::string(f.key), v,
                                       std::string(f.hint)});
    }
  }
  if (params.tensor_parallel > 1 && !(params.interconnect_bytes_per_second > 0)) {
    return unexpected(CostModelError{
        CostModelErrc::interconnect_required, "hardware.interconnectBytesPerSecond",
        params.interconnect_bytes_per_second,
        "pass the per-accelerator NVLink/NeuronLink bandwidth in bytes/s, or use tensorParallel 1"});
  }
  if (params.experts > 0 || params.experts_per_token > 0 || params.expert_weight_bytes_per_rank > 0) {
    if (!(params.experts >= 1)) {
      return unexpected(CostModelError{CostModelErrc::out_of_range, "model.experts", params.experts,
                                       "pass the routed experts per MoE layer (e.g. 8), or 0 with the other expert fields 0"});
    }
    if (!(params.experts_per_token >= 1 && params.experts_per_token <= params.experts)) {
      return unexpected(CostModelError{CostModelErrc::out_of_range, "model.expertsPerToken", params.experts_per_token,
                                       "pass the experts each token selects, between 1 and model.experts"});
    }
    if (!(params.expert_weight_bytes_per_rank > 0 && params.expert_weight_bytes_per_rank <= params.weight_bytes_per_rank)) {
      return unexpected(CostModelError{CostModelErrc::out_of_range, "model.expertWeightBytesPerRank",
                                       params.expert_weight_bytes_per_rank,
                                       "pass the routed experts' bytes per rank, > 0 and at most model.weightBytesPerRank"});
    }
  }
  CostModelParams resolved = params;
  if (resolved.attention_width == 0) resolved.attention_width = resolved.hidden_size;
  if (resolved.kv_bytes_per_token_per_rank == 0) {
    resolved.kv_bytes_per_token_per_rank = resolved.kv_bytes_per_token / resolved.tensor_parallel;
  }
  return CostModel(resolved);
}

StepTime CostModel::step_time(const StepBatch& b) const {
  StepTime t;
  const std::int64_t tokens = b.tokens();
  if (tokens <= 0) return t;  // no step runs
  const CostModelParams& p = params_;
  const double tp = p.tensor_parallel;

  // Decode tokens attend to their context plus themselves.
  const double attended = static_cast<double>(b.prefill_attended_pairs) +
                          static_cast<double>(b.decode_context_tokens + b.decode_sequences);
  const double flops = 2.0 * p.active_parameters * static_cast<double>(tokens) +
                       4.0 * p.layers * p.attention_width * attended;
  t.compute_seconds = flops / tp / (p.peak_flops_per_second * p.compute_efficiency);

  // Weights are streamed once per step; KV is read for prior context and written for new tokens.
  const double kv_tokens = static_cast<double>(b.prefill_prior_tokens + b.decode_context_tokens) +
                           static_cast<double>(tokens);
  double weights = p.weight_bytes_per_rank;
  if (p.experts > 0) {
    // Expected share of the experts that `tokens` independent top-k selections touch.
    const double miss = std::pow(1.0 - p.experts_per_token / p.experts, static_cast<double>(tokens));
    weights -= p.expert_weight_bytes_per_rank * miss;
  }
  const double bytes = weights + p.kv_bytes_per_token_per_rank * kv_tokens;
  t.memory_seconds = bytes / (p.hbm_bytes_per_second * p.memory_efficiency);

  if (p.tensor_parallel > 1) {
    // Two all-reduces per layer (attention output and MLP output); a ring all-reduce sends and
    // receives 2 (tp - 1) / tp of the payload per rank.
    const double all_reduces = 2.0 * p.layers;
    const double payload = static_cast<double>(tokens) * p.hidden_size * p.activation_bytes;
    const double wire = 2.0 * (tp - 1.0) / tp * payload;
    t.communication_seconds =
        all_reduces * (wire / (p.interconnect_bytes_per_second * p.interconnect_efficiency) +
                       p.interconnect_latency_seconds);
  }
  t.overhead_seconds = p.step_overhead_seconds + p.layers * p.layer_overhead_seconds;
  t.total_seconds = std::max(t.compute_seconds, t.memory_seconds) + t.communication_seconds +
                    t.overhead_seconds;
  return t;
}

StepTime CostModel::prefill_chunk_time(std::int64_t new_tokens, std::int64_t prior_tokens) const {
  return step_time(StepBatch{}.add_prefill_chunk(new_tokens, prior_tokens));
}

StepTime CostModel::decode_batch_time(std::int64_t sequences, std::int64_t context_tokens) const {
  return step_time(StepBatch{}.add_decodes(sequences, context_tokens));
}

double CostModel::transfer_seconds(double bytes) const {
  if (!(bytes > 0)) return 0;
  return params_.fabric_latency_seconds +
         bytes / (params_.fabric_bytes_per_second * params_.fabric_efficiency);
}

double CostModel::kv_transfer_bytes(std::int64_t tokens) const {
  return static_cast<double>(tokens) * params_.kv_bytes_per_token;
}

}  // namespace disagg
