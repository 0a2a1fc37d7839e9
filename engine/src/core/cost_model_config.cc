#include "disagg/cost_model_config.h"

#include <array>
#include <string>

namespace disagg {

namespace {

// X(section, key, member, required, default, constraint, hint). Defaults of optional fields are
// the CostModelParams initializers; engine-config.schema.json states the same defaults.
#define DISAGG_COST_FIELDS(X)                                                                          \
  X("model", "weightBytesPerRank", weight_bytes_per_rank, true, 0, positive,                           \
    "pass the weight bytes one tensor-parallel rank holds (total weight bytes / tensorParallel)")      \
  X("model", "kvBytesPerToken", kv_bytes_per_token, true, 0, positive,                                 \
    "pass 2 x layers x KV heads x head dim x KV bytes per element (MLA: latent + rope dims)")          \
  X("model", "kvBytesPerTokenPerRank", kv_bytes_per_token_per_rank, false, 0, non_negative,            \
    "pass the KV bytes of one token on one rank, or 0 for kvBytesPerToken / tensorParallel")           \
  X("model", "activeParameters", active_parameters, true, 0, positive,                                 \
    "pass the parameters one token passes through (for MoE models, the active ones)")                  \
  X("model", "layers", layers, true, 0, positive_integer, "pass the model's transformer layers")       \
  X("model", "hiddenSize", hidden_size, true, 0, positive_integer, "pass the model's hidden size")     \
  X("model", "attentionWidth", attention_width, false, 0, non_negative,                                \
    "pass query heads x head dim, or 0 for hiddenSize")                                                \
  X("model", "activationBytes", activation_bytes, false, 2, positive,                                  \
    "pass the bytes of one activation element (2 for BF16)")                                           \
  X("model", "expertWeightBytesPerRank", expert_weight_bytes_per_rank, false, 0, non_negative,         \
    "pass the routed experts' share of weightBytesPerRank, or 0 for a dense model")                    \
  X("model", "experts", experts, false, 0, whole_number,                                               \
    "pass the routed experts per MoE layer (e.g. 8 for Mixtral), or 0 for a dense model")              \
  X("model", "expertsPerToken", experts_per_token, false, 0, whole_number,                             \
    "pass the routed experts each token selects (e.g. 2 for Mixtral), or 0 for a dense model")         \
  X("model", "moeLayers", moe_layers, false, 0, whole_number,                                          \
    "pass the layers that have routed experts (DeepSeek-V3: 58), or 0 for every layer")                \
  X("model", "routedActiveParameters", routed_active_parameters, false, 0, non_negative,               \
    "pass the routed experts' part of activeParameters (top-k experts of every MoE layer), or 0")      \
  X("model", "dispatchBytesPerElement", dispatch_bytes_per_element, false, 1, positive,                \
    "pass the bytes of one element the all-to-all dispatch sends (1 for FP8, 2 for BF16)")             \
  X("model", "combineBytesPerElement", combine_bytes_per_element, false, 2, positive,                  \
    "pass the bytes of one element the all-to-all combine sends (2 for BF16)")                         \
  X("hardware", "peakFlopsPerSecond", peak_flops_per_second, true, 0, positive,                        \
    "pass the accelerator's dense peak FLOP/s at the compute precision")                               \
  X("hardware", "attentionFlopsPerSecond", attention_flops_per_second, false, 0, non_negative,         \
    "pass the dense peak FLOP/s attention runs at (BF16's; FP8's for an FP8 KV cache under "           \
    "FlashAttention 3), or 0 for peakFlopsPerSecond")                                                  \
  X("hardware", "hbmBytesPerSecond", hbm_bytes_per_second, true, 0, positive,                          \
    "pass the accelerator's HBM bandwidth in bytes/s")                                                 \
  X("hardware", "interconnectBytesPerSecond", interconnect_bytes_per_second, false, 0, non_negative,   \
    "pass the per-accelerator NVLink/NeuronLink bandwidth in bytes/s")                                 \
  X("hardware", "interconnectLatencySeconds", interconnect_latency_seconds, false, 8e-6, non_negative, \
    "pass the latency of one all-reduce in seconds (e.g. 8e-6)")                                       \
  X("hardware", "fabricBytesPerSecond", fabric_bytes_per_second, true, 0, positive,                    \
    "pass the EFA bandwidth one pod gets in bytes/s (e.g. 3200 Gb/s = 4e11)")                          \
  X("hardware", "fabricLatencySeconds", fabric_latency_seconds, false, 3e-5, non_negative,             \
    "pass the fixed latency of one expert-parallel message over the fabric in seconds (e.g. 3e-5)")    \
  X("hardware", "kvTransferLatencySeconds", kv_transfer_latency_seconds, false, 0, non_negative,       \
    "pass the fixed cost of one KV transfer in seconds (e.g. 4e-4), or 0 for fabricLatencySeconds")    \
  X("hardware", "scaleUpDomain", scale_up_domain, false, 8, positive_integer,                          \
    "pass the accelerators one NVLink/NeuronLink domain joins (8 for p5en, 72 for GB200 NVL72)")       \
  X("hardware", "scaleOutBytesPerSecond", scale_out_bytes_per_second, false, 0, non_negative,          \
    "pass one accelerator's share of the node's EFA in bytes/s (p5en: 3200 Gb/s / 8 = 5e10)")          \
  X("parallel", "tensorParallel", tensor_parallel, false, 1, positive_integer,                         \
    "pass the number of ranks that split every layer (1, 2, 4, 8, ...)")                               \
  X("parallel", "pipelineParallel", pipeline_parallel, false, 1, positive_integer,                     \
    "pass the pipeline stages of one replica (vLLM --pipeline-parallel-size), or 1")                   \
  X("parallel", "dataParallel", data_parallel, false, 1, positive_integer,                             \
    "pass the data-parallel attention ranks of one expert-parallel replica, or 1")                     \
  X("parallel", "expertParallel", expert_parallel, false, 1, positive_integer,                         \
    "pass the ranks that share the routed experts (tensorParallel x dataParallel), or 1")              \
  X("parallel", "redundantExperts", redundant_experts, false, 0, whole_number,                         \
    "pass the extra expert replicas EPLB places (vLLM --num-redundant-experts), or 0")                 \
  X("efficiency", "compute", compute_efficiency, false, 0.5, fraction,                                 \
    "pass the fraction of peak FLOP/s a step reaches, e.g. 0.5")                                       \
  X("efficiency", "memory", memory_efficiency, false, 0.7, fraction,                                   \
    "pass the fraction of HBM bandwidth a step reaches, e.g. 0.7")                                     \
  X("efficiency", "interconnect", interconnect_efficiency, false, 0.7, fraction,                       \
    "pass the fraction of interconnect bandwidth an all-reduce reaches, e.g. 0.7")                     \
  X("efficiency", "fabric", fabric_efficiency, false, 0.7, fraction,                                   \
    "pass the fraction of fabric bandwidth a KV transfer reaches, e.g. 0.7")                           \
  X("efficiency", "allToAll", all_to_all_efficiency, false, 0.5, fraction,                             \
    "pass the fraction of scale-out bandwidth the expert all-to-all reaches, e.g. 0.5")                \
  X("efficiency", "expertImbalance", expert_imbalance, false, 0, non_negative,                         \
    "pass the busiest expert rank's load over the mean (>= 1, e.g. 1.4), or 0 for the default")        \
  X("efficiency", "allToAllOverlap", all_to_all_overlap, false, 0, non_negative,                       \
    "pass the share of the all-to-all hidden behind compute, 0 to 1 (e.g. 0.8 with --enable-dbo)")     \
  X("efficiency", "stepOverheadSeconds", step_overhead_seconds, false, 0, non_negative,                \
    "pass the fixed cost of one step in seconds, or 0")                                                \
  X("efficiency", "layerOverheadSeconds", layer_overhead_seconds, false, 0, non_negative,              \
    "pass the fixed cost of one layer of a step in seconds (e.g. 3e-5), or 0")                         \
  X("efficiency", "sequenceOverheadSeconds", sequence_overhead_seconds, false, 0, non_negative,        \
    "pass the engine's time per sequence of a step in seconds (e.g. 1e-4 for vLLM V0), or 0")          \
  X("efficiency", "requestOverheadSeconds", request_overhead_seconds, false, 0, non_negative,          \
    "pass the API server's time per request in seconds (e.g. 0.008), or 0")

#define DISAGG_FIELD_ENTRY(section, key, member, required, dflt, constraint, hint)                    \
  CostModelField{section,                                                                             \
                 key,                                                                                 \
                 required,                                                                            \
                 dflt,                                                                                \
                 FieldConstraint::constraint,                                                         \
                 [](const CostModelParams& p) { return static_cast<double>(p.member); },              \
                 [](CostModelParams& p, double v) { p.member = static_cast<decltype(p.member)>(v); }, \
                 hint},

const auto kFields = std::to_array<CostModelField>({DISAGG_COST_FIELDS(DISAGG_FIELD_ENTRY)});

#undef DISAGG_FIELD_ENTRY
#undef DISAGG_COST_FIELDS

constexpr std::array<std::string_view, 4> kSections{"model", "hardware", "parallel", "efficiency"};

}  // namespace

std::span<const CostModelField> cost_model_fields() {
  return kFields;
}

std::span<const std::string_view> cost_model_sections() {
  return kSections;
}

Expected<CostModel, CostModelError> read_cost_model(const ConfigSource& source) {
  CostModelParams params;
  for (std::string_view section : kSections) {
    const Lookup s = source.section(section);
    if (s == Lookup::wrong_type) {
      return unexpected(CostModelError{CostModelErrc::wrong_type, std::string(section), 0, "pass an object"});
    }
    for (const CostModelField& f : kFields) {
      if (f.section != section) continue;
      std::string path = std::string(f.section) + "." + std::string(f.key);
      double v = 0;
      const Lookup found = s == Lookup::found ? source.number(f.section, f.key, &v) : Lookup::missing;
      if (found == Lookup::wrong_type) {
        return unexpected(CostModelError{CostModelErrc::wrong_type, std::move(path), 0, "pass a number"});
      }
      if (found == Lookup::missing) {
        if (f.required) {
          return unexpected(CostModelError{CostModelErrc::missing_field, std::move(path), 0, std::string(f.hint)});
        }
        v = f.default_value;
      } else if (f.constraint == FieldConstraint::positive_integer &&
                 !(v >= 1 && v <= (1 << 20) && v == static_cast<double>(static_cast<long>(v)))) {
        // Refuse before the narrowing store into an int field can change the value.
        return unexpected(CostModelError{CostModelErrc::not_an_integer, std::move(path), v, std::string(f.hint)});
      }
      f.set(params, v);
    }
  }
  return CostModel::create(params);
}

}  // namespace disagg
