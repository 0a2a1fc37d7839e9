#include "disagg/cost_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

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
    case CostModelErrc::not_positive: rule = quoted + " (" + format_number(value) + ") must be > 0"; break;
    case CostModelErrc::negative: rule = quoted + " (" + format_number(value) + ") must be >= 0"; break;
    case CostModelErrc::not_a_fraction: rule = quoted + " (" + format_number(value) + ") must be in (0, 1]"; break;
    case CostModelErrc::not_an_integer:
      rule = quoted + " (" + format_number(value) + ") must be a whole number >= 1";
      break;
    case CostModelErrc::not_a_whole_number:
      rule = quoted + " (" + format_number(value) + ") must be a whole number >= 0";
      break;
    case CostModelErrc::interconnect_required:
      rule = quoted + " (" + format_number(value) + ") must be > 0 when parallel.tensorParallel > 1";
      break;
    case CostModelErrc::out_of_range: rule = quoted + " (" + format_number(value) + ") is out of range"; break;
  }
  return hint.empty() ? rule : rule + "; " + std::string(hint);
}

namespace {

// True when `v` breaks `c`; *code then names the broken rule.
bool violates(FieldConstraint c, double v, CostModelErrc* code) {
  // NaN and infinities fail every rule: !(v > 0) is true for NaN.
  const bool finite = std::isfinite(v);
  switch (c) {
    case FieldConstraint::positive: *code = CostModelErrc::not_positive; return !finite || !(v > 0);
    case FieldConstraint::non_negative: *code = CostModelErrc::negative; return !finite || !(v >= 0);
    case FieldConstraint::fraction: *code = CostModelErrc::not_a_fraction; return !finite || !(v > 0 && v <= 1);
    case FieldConstraint::positive_integer:
      *code = CostModelErrc::not_an_integer;
      return !finite || !(v >= 1) || v != std::floor(v) || v > 1 << 20;
    case FieldConstraint::whole_number:
      *code = CostModelErrc::not_a_whole_number;
      return !finite || !(v >= 0) || v != std::floor(v) || v > 1 << 20;
  }
  return false;
}

// The expert-parallel rules (disagg/cost_model.h, CostModelParams::expert_parallel and neighbours).
std::optional<CostModelError> check_expert_parallel(const CostModelParams& p) {
  using E = CostModelError;
  const auto err = [](const char* field, double v, std::string hint) {
    return E{CostModelErrc::out_of_range, field, v, std::move(hint)};
  };
  if (p.moe_layers > p.layers) {
    return err("model.moeLayers", p.moe_layers,
               "pass at most model.layers (" + format_number(p.layers) + "), or 0 for every layer");
  }
  if (p.routed_active_parameters > p.active_parameters) {
    return err("model.routedActiveParameters", p.routed_active_parameters,
               "pass the routed experts' part of model.activeParameters (" + format_number(p.active_parameters) +
                   "), not more");
  }
  if (p.expert_imbalance != 0 && !(p.expert_imbalance >= 1)) {
    return err("efficiency.expertImbalance", p.expert_imbalance,
               "pass the busiest rank's expert load over the mean, which is >= 1 (e.g. 1.4), or 0 for the default");
  }
  if (!(p.all_to_all_overlap <= 1)) {
    return err("efficiency.allToAllOverlap", p.all_to_all_overlap,
               "pass a share between 0 (not overlapped) and 1 (fully hidden behind compute)");
  }
  const int ep = p.expert_parallel;
  const long group = static_cast<long>(p.tensor_parallel) * p.data_parallel;
  if (ep > 1 && ep != group) {
    return err("parallel.expertParallel", ep,
               "pass tensorParallel x dataParallel (" + std::to_string(group) +
                   "): every rank of the replica holds a share of the experts");
  }
  if (p.data_parallel > 1 && ep != group) {
    return err("parallel.dataParallel", p.data_parallel,
               "pass 1 (one replica per rank), or set parallel.expertParallel to tensorParallel x dataParallel (" +
                   std::to_string(group) + "): data-parallel ranks form one replica only with expert parallelism");
  }
  if (p.redundant_experts > 0 && ep == 1) {
    return err("parallel.redundantExperts", p.redundant_experts,
               "pass 0: redundant experts need parallel.expertParallel > 1");
  }
  if (ep > 1) {
    if (!(p.experts >= 1)) {
      return err("parallel.expertParallel", ep,
                 "pass 1 for a dense model, or set model.experts: expert parallelism needs routed experts");
    }
    const double physical = p.experts + p.redundant_experts;
    if (std::fmod(physical, ep) != 0) {
      return err("parallel.expertParallel", ep,
                 "pass a divisor of model.experts + parallel.redundantExperts (" + format_number(physical) +
                     "): each rank must hold a whole number of experts");
    }
    if (!(p.interconnect_bytes_per_second > 0)) {
      return E{CostModelErrc::interconnect_required, "hardware.interconnectBytesPerSecond",
               p.interconnect_bytes_per_second,
               "pass the per-accelerator NVLink/NeuronLink bandwidth in bytes/s; the all-to-all uses it inside a node"};
    }
    if (ep > p.scale_up_domain && !(p.scale_out_bytes_per_second > 0)) {
      return err(
          "hardware.scaleOutBytesPerSecond", p.scale_out_bytes_per_second,
          "pass one accelerator's share of the node's EFA in bytes/s (p5en: 5e10): an expert-parallel group of " +
              std::to_string(ep) + " spans scale-up domains of " + std::to_string(p.scale_up_domain));
    }
  }
  return std::nullopt;
}

// The pipeline-parallel rules (disagg/cost_model.h, CostModelParams::pipeline_parallel).
std::optional<CostModelError> check_pipeline_parallel(const CostModelParams& p) {
  const int pp = p.pipeline_parallel;
  if (pp == 1) return std::nullopt;
  const auto err = [pp](std::string hint) {
    return CostModelError{CostModelErrc::out_of_range, "parallel.pipelineParallel", static_cast<double>(pp),
                          std::move(hint)};
  };
  if (pp > p.layers) {
    return err("pass at most model.layers (" + format_number(p.layers) + ") stages: each stage holds whole layers");
  }
  if (p.expert_parallel > 1 || p.data_parallel > 1) {
    return err(
        "pass 1 with expertParallel or dataParallel > 1: pipeline stages of an expert-parallel group are not modelled");
  }
  const long ranks = static_cast<long>(p.tensor_parallel) * pp;
  if (ranks <= p.scale_up_domain && !(p.interconnect_bytes_per_second > 0)) {
    return CostModelError{
        CostModelErrc::interconnect_required, "hardware.interconnectBytesPerSecond", p.interconnect_bytes_per_second,
        "pass the per-accelerator NVLink/NeuronLink bandwidth in bytes/s; pipeline stages send activations over it"};
  }
  if (ranks > p.scale_up_domain && !(p.scale_out_bytes_per_second > 0)) {
    return CostModelError{CostModelErrc::out_of_range, "hardware.scaleOutBytesPerSecond", p.scale_out_bytes_per_second,
                          "pass one accelerator's share of the node's EFA in bytes/s (p5en: 5e10): a replica of " +
                              std::to_string(ranks) + " ranks spans scale-up domains of " +
                              std::to_string(p.scale_up_domain) + ", so its stages send activations over it"};
  }
  return std::nullopt;
}

// The largest micro-batch's part of a step's work when its sequences are spread over `pp`
// micro-batches (disagg/cost_model.h, "Pipeline parallelism"): ceil(sequences / pp) of the
// sequences, and at least one mean prefill chunk, which is never split. 1 at pp = 1.
double micro_batch_share(const StepBatch& b, int pp) {
  const std::int64_t sequences = b.sequences();
  if (pp <= 1 || sequences <= 1) return 1.0;
  const double by_sequences = static_cast<double>((sequences + pp - 1) / pp) / static_cast<double>(sequences);
  const double chunk = b.prefill_sequences > 0
                           ? static_cast<double>(b.prefill_tokens) / static_cast<double>(b.prefill_sequences) /
                                 static_cast<double>(b.tokens())
                           : 0.0;
  return std::min(1.0, std::max(by_sequences, chunk));
}

}  // namespace

Expected<CostModel, CostModelError> CostModel::create(const CostModelParams& params) {
  for (const CostModelField& f : cost_model_fields()) {
    const double v = f.get(params);
    CostModelErrc code{};
    if (violates(f.constraint, v, &code)) {
      return unexpected(
          CostModelError{code, std::string(f.section) + "." + std::string(f.key), v, std::string(f.hint)});
    }
  }
  if (params.tensor_parallel > 1 && !(params.interconnect_bytes_per_second > 0)) {
    return unexpected(
        CostModelError{CostModelErrc::interconnect_required, "hardware.interconnectBytesPerSecond",
                       params.interconnect_bytes_per_second,
                       "pass the per-accelerator NVLink/NeuronLink bandwidth in bytes/s, or use tensorParallel 1"});
  }
  if (params.experts > 0 || params.experts_per_token > 0 || params.expert_weight_bytes_per_rank > 0) {
    if (!(params.experts >= 1)) {
      return unexpected(
          CostModelError{CostModelErrc::out_of_range, "model.experts", params.experts,
                         "pass the routed experts per MoE layer (e.g. 8), or 0 with the other expert fields 0"});
    }
    if (!(params.experts_per_token >= 1 && params.experts_per_token <= params.experts)) {
      return unexpected(CostModelError{CostModelErrc::out_of_range, "model.expertsPerToken", params.experts_per_token,
                                       "pass the experts each token selects, between 1 and model.experts"});
    }
    if (!(params.expert_weight_bytes_per_rank > 0 &&
          params.expert_weight_bytes_per_rank <= params.weight_bytes_per_rank)) {
      return unexpected(CostModelError{
          CostModelErrc::out_of_range, "model.expertWeightBytesPerRank", params.expert_weight_bytes_per_rank,
          "pass the routed experts' bytes per rank, > 0 and at most model.weightBytesPerRank"});
    }
  }
  if (auto e = check_expert_parallel(params)) return unexpected(std::move(*e));
  if (auto e = check_pipeline_parallel(params)) return unexpected(std::move(*e));
  CostModelParams resolved = params;
  if (resolved.experts > 0 && resolved.moe_layers == 0) resolved.moe_layers = resolved.layers;
  if (resolved.expert_imbalance == 0) {
    resolved.expert_imbalance = resolved.redundant_experts > 0 ? kDefaultExpertImbalanceEplb : kDefaultExpertImbalance;
  }
  if (resolved.attention_width == 0) resolved.attention_width = resolved.hidden_size;
  if (resolved.attention_flops_per_second == 0) resolved.attention_flops_per_second = resolved.peak_flops_per_second;
  if (resolved.kv_transfer_latency_seconds == 0) {
    resolved.kv_transfer_latency_seconds = resolved.fabric_latency_seconds;
  }
  if (resolved.kv_bytes_per_token_per_rank == 0) {
    // Every rank of every stage holds its share: a replica's KV capacity is the sum over stages.
    resolved.kv_bytes_per_token_per_rank =
        resolved.kv_bytes_per_token / (static_cast<double>(resolved.tensor_parallel) * resolved.pipeline_parallel);
  }
  return CostModel(resolved);
}

StepTime CostModel::step_time(const StepBatch& b) const {
  StepTime t;
  const std::int64_t tokens = b.tokens();
  if (tokens <= 0) return t;  // no step runs
  const CostModelParams& p = params_;
  const double tp = p.tensor_parallel;
  const double dp = p.data_parallel;
  const double stages = p.pipeline_parallel;
  // Pipeline parallelism: the terms below are those of the largest micro-batch (1 without it).
  const double share = micro_batch_share(b, p.pipeline_parallel);
  const double n = static_cast<double>(tokens) * share;
  const bool ep = p.expert_parallel > 1;

  // Decode tokens attend to their context plus themselves. Attention and the dense weights work on
  // one data-parallel rank's share of the tokens; the routed experts on the whole group's, split
  // over the expert-parallel ranks and waiting for the busiest (imbalance).
  const double attended = (static_cast<double>(b.prefill_attended_pairs) +
                           static_cast<double>(b.decode_context_tokens + b.decode_sequences)) *
                          share;
  const double routed = ep ? p.routed_active_parameters : 0.0;
  const double dense_flops = 2.0 * (p.active_parameters - routed) * n / dp;
  const double attention_flops = 4.0 * p.layers * p.attention_width * attended / dp;
  const double expert_flops = ep ? 2.0 * routed * n * p.expert_imbalance / p.expert_parallel : 0.0;
  // Attention runs at its own rate (BF16, or FP8 for an FP8 KV cache under FlashAttention 3).
  t.compute_seconds = (dense_flops / tp + expert_flops) / (p.peak_flops_per_second * p.compute_efficiency) +
                      attention_flops / tp / (p.attention_flops_per_second * p.compute_efficiency);

  // Weights are streamed once per step; KV is read for prior context and written for new tokens.
  const double kv_tokens =
      (static_cast<double>(b.prefill_prior_tokens + b.decode_context_tokens) + static_cast<double>(tokens)) * share;
  double weights = p.weight_bytes_per_rank;
  if (p.experts > 0) {
    // Expected share of the experts that `tokens` independent top-k selections touch.
    const double miss = std::pow(1.0 - p.experts_per_token / p.experts, n);
    weights -= p.expert_weight_bytes_per_rank * miss;
  }
  const double bytes = weights + p.kv_bytes_per_token_per_rank * kv_tokens / dp;
  // Each stage reads its own weights and KV (per-rank numbers are one stage's), one after another.
  t.memory_seconds = stages * bytes / (p.hbm_bytes_per_second * p.memory_efficiency);

  if (p.tensor_parallel > 1) {
    // Two all-reduces per layer (attention output and MLP output); a ring all-reduce sends and
    // receives 2 (tp - 1) / tp of the payload per rank.
    const double all_reduces = 2.0 * p.layers;
    const double payload = n / dp * p.hidden_size * p.activation_bytes;
    const double wire = 2.0 * (tp - 1.0) / tp * payload;
    t.communication_seconds = all_reduces * (wire / (p.interconnect_bytes_per_second * p.interconnect_efficiency) +
                                             p.interconnect_latency_seconds);
  }
  if (ep) {
    // Dispatch and combine per MoE layer: each rank sends its tokens' top-k activations to the
    // experts' ranks, the off-node share over EFA and the on-node share over NVLink in parallel.
    const double size = p.expert_parallel;
    const double local = std::min(size, static_cast<double>(p.scale_up_domain));
    const double off_node = (size - local) / size;
    const double on_node = (local - 1.0) / size;
    const double elements = n / size * p.experts_per_token * p.hidden_size * p.expert_imbalance;
    const double latency = size > local ? p.fabric_latency_seconds : p.interconnect_latency_seconds;
    const double nvlink = p.interconnect_bytes_per_second * p.interconnect_efficiency;
    const double efa = p.scale_out_bytes_per_second * p.all_to_all_efficiency;
    const auto direction = [&](double bytes_per_element) {
      const double sent = elements * bytes_per_element;
      const double over_efa = off_node > 0 ? sent * off_node / efa : 0.0;
      return std::max(over_efa, sent * on_node / nvlink) + latency;
    };
    const double all_to_all =
        p.moe_layers * (direction(p.dispatch_bytes_per_element) + direction(p.combine_bytes_per_element));
    const double hidden = std::min(p.all_to_all_overlap * all_to_all, std::max(t.compute_seconds, t.memory_seconds));
    t.all_to_all_seconds = all_to_all - hidden;
    t.communication_seconds += t.all_to_all_seconds;
  }
  if (p.pipeline_parallel > 1) {
    // The micro-batch's activations cross pp - 1 stage boundaries, each rank sending its copy.
    const bool in_domain = static_cast<long>(p.tensor_parallel) * p.pipeline_parallel <= p.scale_up_domain;
    const double link = in_domain ? p.interconnect_bytes_per_second * p.interconnect_efficiency
                                  : p.scale_out_bytes_per_second * p.fabric_efficiency;
    const double latency = in_domain ? p.interconnect_latency_seconds : p.fabric_latency_seconds;
    const double payload = n * p.hidden_size * p.activation_bytes;
    t.communication_seconds += (stages - 1.0) * (latency + payload / link);
  }
  t.overhead_seconds = p.step_overhead_seconds + p.layers * p.layer_overhead_seconds +
                       static_cast<double>(b.sequences()) * p.sequence_overhead_seconds;
  t.total_seconds = std::max(t.compute_seconds, t.memory_seconds) + t.communication_seconds + t.overhead_seconds;
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
  return params_.kv_transfer_latency_seconds + bytes / (params_.fabric_bytes_per_second * params_.fabric_efficiency);
}

double kv_replica_bytes_per_token(const CostModelParams& p) {
  if (!(p.kv_bytes_per_token_per_rank > 0)) return p.kv_bytes_per_token;
  return p.kv_bytes_per_token_per_rank * static_cast<double>(p.tensor_parallel) *
         static_cast<double>(p.pipeline_parallel);
}

double CostModel::kv_transfer_bytes(std::int64_t tokens) const {
  return static_cast<double>(tokens) * kv_replica_bytes_per_token(params_);
}

}  // namespace disagg
