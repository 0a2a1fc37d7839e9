// disagg/cost_model.h — roofline step time of one model replica (one tensor-parallel group).
//
// The engine keeps no hardware or model table: the constructs resolve every number (weights per rank,
// KV bytes per token, peak FLOP/s, ...) and pass them in the engine configuration (see
// engine/schema/engine-config.schema.json and disagg/cost_model_config.h for the JSON names).
//
// Model of one forward step, evaluated per tensor-parallel rank (all ranks work in parallel):
//   compute       = (2 * activeParameters * tokens + 4 * layers * attentionWidth * attendedPairs)
//                   / tensorParallel / (peakFlopsPerSecond * efficiency.compute)
//   memory        = (weights read + kvBytesPerTokenPerRank * (kvRead + kvWritten))
//                   / (hbmBytesPerSecond * efficiency.memory)
//   weights read  = weightBytesPerRank, except that of the routed experts (MoE) a step reads the
//                   share its tokens select: expertWeightBytesPerRank * (1 - (1 - k/E)^tokens) for
//                   k = expertsPerToken of E = experts, tokens routed independently (a batch of 1
//                   reads 2 of Mixtral's 8 experts; one of 40 reads them all)
//   communication = 2 all-reduces per layer of tokens * hiddenSize * activationBytes, ring algorithm
//                   (2 (tp-1)/tp of the payload per rank), plus interconnectLatencySeconds each; 0 at tp 1;
//                   plus the charged expert-parallel all-to-all (below)
//   fixed         = efficiency.stepOverheadSeconds + layers * efficiency.layerOverheadSeconds
//                   + sequences * efficiency.sequenceOverheadSeconds
//   total         = max(compute, memory) + communication + fixed
// where attendedPairs counts (query token, key token) pairs under the causal mask, and sequences
// counts the step's prefill chunks and decoding sequences (StepBatch::sequences()): the engine's CPU
// time per running sequence in every step (vLLM's V0 engine scheduled, sampled and detokenized in
// the same Python process, so its steps grew with the batch: vLLM blog, 2024-09-05, "vLLM v0.6.0:
// 2.7x Throughput Improvement and 5x Latency Reduction"). 0 by default (vLLM V1).
//
// Pipeline parallelism (parallel.pipelineParallel = pp > 1): a replica is pp stages, one after the
// other, each of tensorParallel ranks holding layers / pp of the layers; weightBytesPerRank and
// kvBytesPerTokenPerRank are one rank's of one stage (kvBytesPerTokenPerRank defaults to
// kvBytesPerToken / (tensorParallel x pp)), so the replica's KV capacity is the sum over its stages.
// The engine keeps pp micro-batches in flight (vLLM V0's virtual engines, DistServe's decode
// instances), so that every stage works on one while the others work on theirs. A step is then the
// scheduler's whole batch, spread over the pp micro-batches, and its time is the latency of the
// largest micro-batch through every stage, which in the steady state is also the time between two
// steps of the same sequences (each stage serves pp micro-batches of that size per cycle):
//   share         = the largest micro-batch's part of the step: ceil(sequences / pp) / sequences, at
//                   least one mean prefill chunk (a sequence is never split over micro-batches)
//   compute       = as above for share x the step's tokens, through all the layers
//   memory        = pp x (weights read + kvBytesPerTokenPerRank x share x (kvRead + kvWritten))
//                   / (hbmBytesPerSecond * efficiency.memory): each stage reads its weights once per
//                   micro-batch
//   communication = the all-reduces of all the layers for share x tokens, plus (pp - 1) activation
//                   sends of share x tokens x hiddenSize x activationBytes between stages, over the
//                   interconnect (interconnectLatencySeconds each) when tensorParallel x pp <=
//                   scaleUpDomain, else over scaleOutBytesPerSecond * efficiency.fabric
//                   (fabricLatencySeconds each)
//   fixed         = as above (the step's scheduling and per-sequence time are the engine's, once)
// So one sequence alone steps in about the whole model's time (not 1 / pp of it), and a full batch
// of pp micro-batches moves pp times the tokens of one micro-batch in that time. An approximation of
// the steady state: micro-batches finish together (a real pipeline staggers them by a stage), and
// the scheduler's limits (maxConcurrencyPerReplica, maxBatchedTokens) bound all micro-batches
// together (vLLM V0's --max-num-seqs holds per virtual engine: pass it x pp). Not with
// expertParallel or dataParallel > 1.
//
// Expert parallelism (parallel.expertParallel = ep > 1, ep = tensorParallel x dataParallel): a replica
// is the whole expert-parallel group (vLLM --data-parallel-size with --enable-expert-parallel); the
// step's tokens are spread evenly over its dataParallel attention ranks, and the routed experts
// (experts + redundantExperts physical ones, a whole number per rank) over its ep ranks. Per rank:
//   compute       = (2 (activeParameters - routedActiveParameters) tokens / dp
//                    + 4 layers attentionWidth attendedPairs / dp) / tp
//                   + 2 routedActiveParameters tokens imbalance / ep, over the effective FLOP/s
//   memory        = weights read (tokens = the whole group's) + KV of the rank's tokens (1/dp of them)
//   all-to-all    = moeLayers x (dispatch + combine); each direction moves, from each rank,
//                   bytes = tokens / ep * expertsPerToken * hiddenSize * bytesPerElement * imbalance
//                   (dispatchBytesPerElement, 1 = FP8 as DeepEP's kernels send; combineBytesPerElement,
//                   2 = BF16), destinations uniform over the ep ranks: the share (ep - s) / ep off the
//                   node goes over scaleOutBytesPerSecond * efficiency.allToAll (EFA), the share
//                   (s - 1) / ep over interconnectBytesPerSecond * efficiency.interconnect (NVLink), at
//                   the same time, for s = min(ep, scaleUpDomain); plus fabricLatencySeconds per
//                   direction when the group spans nodes, else interconnectLatencySeconds
//   charged       = all-to-all - min(efficiency.allToAllOverlap * all-to-all, max(compute, memory))
//   imbalance     = the busiest rank's routed-expert work over the mean (efficiency.expertImbalance;
//                   0 = kDefaultExpertImbalance without redundant experts, kDefaultExpertImbalanceEplb
//                   with them); every rank waits for the busiest at each MoE layer.
// The all-to-all defaults to NOT overlapped with compute (allToAllOverlap 0): vLLM overlaps it only
// with dual-batch overlap (--enable-dbo, DeepSeek's two-micro-batch scheme that DeepEP's receive
// hooks enable), which is opt-in; set allToAllOverlap (e.g. 0.8) to model it.
// A KV transfer over the fabric takes kvTransferLatencySeconds + bytes / (fabricBytesPerSecond *
// efficiency.fabric); kvTransferLatencySeconds 0 (the default) = fabricLatencySeconds, the latency of
// one expert-parallel message, which the all-to-all and the pipeline's sends keep using either way.
// Defaults of the efficiency factors and latencies match src/sizing/roofline.ts (the closed-form
// estimate of the construct library), so both sides start from the same stated assumptions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "disagg/expected.h"

namespace disagg {

/// Resolved numbers the cost model reads. Field names in the JSON configuration are given in
/// brackets; units are in the names. Fields documented "0 = ..." take a derived default when 0.
struct CostModelParams {
  // --- model ---
  /// [model.weightBytesPerRank] Weight bytes one tensor-parallel rank holds and reads every step.
  double weight_bytes_per_rank = 0;
  /// [model.kvBytesPerToken] KV-cache bytes of one token for the whole model (all layers, all KV
  /// heads), counted once.
  double kv_bytes_per_token = 0;
  /// [model.kvBytesPerTokenPerRank] KV bytes of one token held by one rank. 0 = kvBytesPerToken /
  /// (tensorParallel x pipelineParallel); set it when KV is replicated over the ranks (GQA with more
  /// ranks than KV heads, MLA's latent under TP): a transfer then moves every rank's copy.
  double kv_bytes_per_token_per_rank = 0;
  /// [model.activeParameters] Parameters that one token passes through (MoE: the active ones).
  double active_parameters = 0;
  /// [model.layers] Transformer layers.
  double layers = 0;
  /// [model.hiddenSize] Hidden size (width of the all-reduced activations).
  double hidden_size = 0;
  /// [model.attentionWidth] Query heads x head dim. 0 = hiddenSize.
  double attention_width = 0;
  /// [model.activationBytes] Bytes per activation element exchanged in all-reduces.
  double activation_bytes = 2;
  /// [model.expertWeightBytesPerRank] The routed experts' part of weight_bytes_per_rank (MoE); 0 for
  /// a dense model. A step reads only the experts its tokens select (see `memory` above).
  double expert_weight_bytes_per_rank = 0;
  /// [model.experts] Routed experts per MoE layer; 0 for a dense model.
  double experts = 0;
  /// [model.expertsPerToken] Routed experts each token selects (top-k); in [1, experts] when experts > 0.
  double experts_per_token = 0;
  /// [model.moeLayers] Layers with routed experts (DeepSeek-V3: 58 of 61). 0 = every layer when
  /// experts > 0. At most model.layers.
  double moe_layers = 0;
  /// [model.routedActiveParameters] The routed experts' part of activeParameters (expertsPerToken
  /// experts of every MoE layer); this part is split over the expert-parallel ranks. 0 = none (all
  /// active parameters are split like the dense ones). At most activeParameters.
  double routed_active_parameters = 0;
  /// [model.dispatchBytesPerElement] Bytes of one activation element in the all-to-all dispatch
  /// (1: DeepEP and vLLM's DeepEP backends quantize dispatch to FP8 with block scales).
  double dispatch_bytes_per_element = 1;
  /// [model.combineBytesPerElement] Bytes of one activation element in the all-to-all combine (2: BF16).
  double combine_bytes_per_element = 2;

  // --- hardware (one accelerator) ---
  /// [hardware.peakFlopsPerSecond] Dense peak FLOP/s at the compute precision.
  double peak_flops_per_second = 0;
  /// [hardware.attentionFlopsPerSecond] Dense peak FLOP/s attention's QK^T and AV run at: the
  /// activations' BF16 rate, or FP8's where FlashAttention 3 keeps an FP8 KV cache in FP8 (the rule
  /// lives in src/sizing, Roofline.attentionPrecisionFor). 0 = peakFlopsPerSecond.
  double attention_flops_per_second = 0;
  /// [hardware.hbmBytesPerSecond] HBM bandwidth.
  double hbm_bytes_per_second = 0;
  /// [hardware.interconnectBytesPerSecond] Per-accelerator bandwidth of the intra-node link
  /// (NVLink / NeuronLink) used by tensor-parallel all-reduces. Required when tensorParallel > 1.
  double interconnect_bytes_per_second = 0;
  /// [hardware.interconnectLatencySeconds] Fixed latency of one all-reduce (launch and sync).
  double interconnect_latency_seconds = 8e-6;
  /// [hardware.fabricBytesPerSecond] Bandwidth one pod gets for a KV transfer (EFA, all interfaces).
  double fabric_bytes_per_second = 0;
  /// [hardware.fabricLatencySeconds] Fixed latency of one message over EFA: an expert-parallel
  /// dispatch or combine across nodes, a pipeline stage's send beyond the scale-up domain, and a KV
  /// transfer unless kvTransferLatencySeconds is set.
  double fabric_latency_seconds = 3e-5;
  /// [hardware.kvTransferLatencySeconds] Fixed cost of one prefill-to-decode KV transfer besides its
  /// bytes: the connector's handshake and completion notification and the first RDMA round trips.
  /// 0 = fabricLatencySeconds. Published connectors pay far more than one EP message: Mooncake's vLLM
  /// connector (H800, 8x CX-7 RoCE, Qwen3-8B TP8) moves 20 MB in 0.54 ms and 4.5 GB in 31.65 ms,
  /// about 0.4 ms fixed plus 72% of 200 GB/s; SGLang with Mooncake on H20, about 1.8 ms plus 84%.
  /// Used only by transfer_seconds.
  double kv_transfer_latency_seconds = 0;
  /// [hardware.scaleUpDomain] Accelerators joined by the intra-node link (NVLink / NeuronLink): 8 on
  /// p5en / p6-b200, 72 on a GB200 NVL72 UltraServer. Expert-parallel traffic between two of them
  /// uses interconnectBytesPerSecond, otherwise scaleOutBytesPerSecond.
  int scale_up_domain = 8;
  /// [hardware.scaleOutBytesPerSecond] One accelerator's share of the node's scale-out network (EFA
  /// total / accelerators per node; p5en: 3200 Gbit/s / 8 = 5e10 B/s). Required when
  /// parallel.expertParallel > hardware.scaleUpDomain.
  double scale_out_bytes_per_second = 0;

  // --- parallel ---
  /// [parallel.tensorParallel] Ranks that split every layer.
  int tensor_parallel = 1;
  /// [parallel.pipelineParallel] Stages that split the layers (vLLM --pipeline-parallel-size), each
  /// of tensorParallel ranks; pp micro-batches in flight (see the file comment). > 1 needs the
  /// stage-to-stage link (interconnectBytesPerSecond, or scaleOutBytesPerSecond beyond the
  /// scale-up domain), at most model.layers stages, and expertParallel = dataParallel = 1.
  int pipeline_parallel = 1;
  /// [parallel.dataParallel] Data-parallel attention ranks of one replica (vLLM --data-parallel-size
  /// inside one expert-parallel group); > 1 only with expertParallel = tensorParallel x dataParallel.
  int data_parallel = 1;
  /// [parallel.expertParallel] Ranks that share the routed experts (vLLM --enable-expert-parallel):
  /// 1 (experts split by tensor parallelism) or tensorParallel x dataParallel; > 1 needs model.experts
  /// and (experts + redundantExperts) a multiple of it, so that each rank holds whole experts.
  int expert_parallel = 1;
  /// [parallel.redundantExperts] Extra physical expert replicas placed by EPLB (vLLM
  /// --num-redundant-experts); needs expertParallel > 1.
  double redundant_experts = 0;

  // --- efficiency (fractions of peak that a real step reaches) ---
  /// [efficiency.compute] Fraction of peak FLOP/s reached (model FLOPs utilization).
  double compute_efficiency = 0.5;
  /// [efficiency.memory] Fraction of HBM bandwidth reached.
  double memory_efficiency = 0.7;
  /// [efficiency.interconnect] Fraction of interconnect bandwidth reached by all-reduces.
  double interconnect_efficiency = 0.7;
  /// [efficiency.fabric] Fraction of fabric bandwidth reached by KV transfers.
  double fabric_efficiency = 0.7;
  /// [efficiency.allToAll] Fraction of scaleOutBytesPerSecond the expert-parallel dispatch and combine
  /// reach. An assumption: DeepEP's low-latency kernels reach 39-48 GB/s of a 50 GB/s CX7 InfiniBand
  /// NIC at EP 32-256 (0.8-0.95, DeepEP docs/legacy.md), but they need GPU-initiated RDMA, which EFA
  /// lacks; the backends that run on EFA (pplx-kernels over NVSHMEM/libfabric, NCCL all-gather /
  /// reduce-scatter) proxy through the host, so 0.5 is assumed.
  double all_to_all_efficiency = 0.5;
  /// [efficiency.expertImbalance] The busiest expert-parallel rank's routed-expert tokens over the
  /// mean, >= 1; 0 = kDefaultExpertImbalance, or kDefaultExpertImbalanceEplb with redundant experts.
  double expert_imbalance = 0;
  /// [efficiency.allToAllOverlap] Fraction of the all-to-all hidden behind compute (dual-batch
  /// overlap), in [0, 1]; 0 = not overlapped (vLLM's default without --enable-dbo).
  double all_to_all_overlap = 0;
  /// [efficiency.stepOverheadSeconds] Fixed cost of every non-empty step (scheduling, launches).
  double step_overhead_seconds = 0;
  /// [efficiency.layerOverheadSeconds] Fixed cost of one layer of every non-empty step: the small
  /// kernels (norms, rotary, activation, sampling share) and each kernel's launch and ramp, which
  /// neither the FLOPs nor the bytes of a small batch account for.
  double layer_overhead_seconds = 0;
  /// [efficiency.sequenceOverheadSeconds] Cost of one sequence of every step, prefill chunk or
  /// decode alike: the engine's CPU time per running sequence (scheduling, sampling bookkeeping,
  /// detokenization in the engine's process, as vLLM's V0 engine did). 0: none (vLLM V1).
  double sequence_overhead_seconds = 0;
  /// [efficiency.requestOverheadSeconds] Time of one request outside the engine's steps: the API
  /// server's HTTP handling and tokenization, the hand-off to the engine and the streamed answer.
  /// Not part of a step: a simulator delays each request by it before the engine sees it.
  double request_overhead_seconds = 0;
};

/// Work in one forward step of a replica: prefill chunks and decode tokens, in aggregate, so that
/// a scheduler can describe any mixed batch without allocating. All counts are >= 0.
struct StepBatch {
  /// New prompt tokens computed in this step, summed over every prefill chunk.
  std::int64_t prefill_tokens = 0;
  /// Tokens already in the KV cache before the chunks (read by attention), summed over chunks.
  std::int64_t prefill_prior_tokens = 0;
  /// Causal (query, key) pairs of the chunks: sum of n*p + n(n+1)/2 for a chunk of n after p.
  std::int64_t prefill_attended_pairs = 0;
  /// Prefill chunks (one per sequence) with at least one new token.
  std::int64_t prefill_sequences = 0;
  /// Sequences that each generate one token in this step.
  std::int64_t decode_sequences = 0;
  /// Tokens already in the KV cache of those sequences, summed.
  std::int64_t decode_context_tokens = 0;

  /// Adds a chunk of `new_tokens` prompt tokens of one sequence after `prior_tokens` cached ones.
  /// Preconditions: new_tokens >= 0, prior_tokens >= 0.
  constexpr StepBatch& add_prefill_chunk(std::int64_t new_tokens, std::int64_t prior_tokens) {
    if (new_tokens > 0) ++prefill_sequences;
    prefill_tokens += new_tokens;
    prefill_prior_tokens += prior_tokens;
    prefill_attended_pairs += new_tokens * prior_tokens + new_tokens * (new_tokens + 1) / 2;
    return *this;
  }
  /// Adds `sequences` decoding sequences whose contexts hold `context_tokens` tokens in total.
  /// Preconditions: sequences >= 0, context_tokens >= 0.
  constexpr StepBatch& add_decodes(std::int64_t sequences, std::int64_t context_tokens) {
    decode_sequences += sequences;
    decode_context_tokens += context_tokens;
    return *this;
  }
  /// Tokens that pass through the layers in this step.
  constexpr std::int64_t tokens() const { return prefill_tokens + decode_sequences; }
  /// Sequences in this step: prefill chunks and decoding sequences.
  constexpr std::int64_t sequences() const { return prefill_sequences + decode_sequences; }
};

/// Time of one step, split by roofline term. total = max(compute, memory) + communication + overhead,
/// where overhead = stepOverheadSeconds + layers * layerOverheadSeconds + sequences *
/// sequenceOverheadSeconds. With pipeline parallelism, the terms are those of the largest
/// micro-batch through every stage (see the file comment).
struct StepTime {
  double compute_seconds = 0;
  double memory_seconds = 0;
  /// All-reduces plus the charged expert-parallel all-to-all plus the pipeline's activation sends.
  double communication_seconds = 0;
  /// The charged all-to-all alone (part of communication_seconds); 0 without expert parallelism.
  double all_to_all_seconds = 0;
  double overhead_seconds = 0;
  double total_seconds = 0;
};

/// Why a CostModelParams was refused.
enum class CostModelErrc {
  missing_field,          ///< a required field is absent from the configuration
  wrong_type,             ///< a field or section has the wrong JSON type
  not_positive,           ///< must be > 0
  negative,               ///< must be >= 0
  not_a_fraction,         ///< must be in (0, 1]
  not_an_integer,         ///< must be a whole number
  not_a_whole_number,     ///< must be a whole number >= 0
  interconnect_required,  ///< tensorParallel > 1 needs hardware.interconnectBytesPerSecond > 0
  out_of_range,           ///< outside the range another field sets (e.g. expertsPerToken > experts)
};

/// Stable lower-case name of an error code, e.g. "not_positive".
std::string_view to_string(CostModelErrc code);

/// A refused field: the code, the JSON path of the field and the value received.
struct CostModelError {
  CostModelErrc code = CostModelErrc::missing_field;
  std::string field;  ///< e.g. "hardware.peakFlopsPerSecond"
  double value = 0;   ///< the value received (0 when missing or of the wrong type)
  std::string hint;   ///< how to fix it

  /// One sentence naming the field, the value and the fix, e.g.
  /// "'hardware.peakFlopsPerSecond' (0) must be > 0; pass the dense peak FLOP/s ...".
  std::string message() const;
};

/// Busiest-rank over mean routed-expert load assumed without redundant experts. An assumption, not a
/// measurement: vLLM's EPLB exists because "some EP ranks could stay idle, while others process large
/// batches of tokens" (vLLM blog, 2025-12-17); DeepSeek places 32 redundant experts for prefill for the
/// same reason (DeepSeek-V3 report, section 3.4).
inline constexpr double kDefaultExpertImbalance = 1.4;
/// The same with EPLB's redundant experts (parallel.redundantExperts > 0). An assumption.
inline constexpr double kDefaultExpertImbalanceEplb = 1.1;

/// KV bytes one token occupies on all a replica's ranks together: kvBytesPerTokenPerRank x
/// tensorParallel x pipelineParallel where the per-rank figure is set (replicated KV counts every
/// copy), else kvBytesPerToken. The one rule for what a transfer, a tier load and a tier block hold.
double kv_replica_bytes_per_token(const CostModelParams& params);

/// Step-time calculator for one replica. Immutable and cheap to copy; every method is const,
/// allocation-free and safe to call from several threads.
class CostModel {
 public:
  /// Validates `params` (every field of disagg/cost_model_config.h against its constraint,
  /// interconnectBytesPerSecond > 0 when tensorParallel > 1 or expertParallel > 1, and the
  /// expert-parallel and pipeline-parallel rules stated on the fields) and resolves derived defaults
  /// (attention width, KV per rank, moeLayers, expertImbalance, kvTransferLatencySeconds).
  /// Fails with the first refused field.
  static Expected<CostModel, CostModelError> create(const CostModelParams& params);

  /// The validated parameters, with derived defaults (attention width, KV per rank, KV transfer
  /// latency, ...) filled in.
  const CostModelParams& params() const { return params_; }

  /// Time of a step doing `batch`. A batch with no tokens takes 0 s (no step runs).
  /// Precondition: every count in `batch` is >= 0.
  StepTime step_time(const StepBatch& batch) const;

  /// Time to prefill `new_tokens` prompt tokens of one sequence after `prior_tokens` cached ones.
  StepTime prefill_chunk_time(std::int64_t new_tokens, std::int64_t prior_tokens) const;

  /// Time of one decode step of `sequences` sequences holding `context_tokens` tokens in total.
  StepTime decode_batch_time(std::int64_t sequences, std::int64_t context_tokens) const;

  /// Seconds to move `bytes` of KV cache over the fabric: kvTransferLatencySeconds (resolved: the
  /// fabric latency when not set) + bytes / (fabricBytesPerSecond x efficiency.fabric); 0 for 0 bytes.
  double transfer_seconds(double bytes) const;

  /// Bytes of KV cache that `tokens` tokens occupy on all the replica's ranks together, copies
  /// included (kv_replica_bytes_per_token): what a P/D transfer or a tier load moves, since every
  /// rank moves its own cache (vLLM's NIXL and Mooncake connectors pair ranks; a decode rank reads
  /// a whole replicated copy; Mooncake's SGLang table moves 49 MB for 128 tokens of Qwen3-235B at TP8,
  /// twice the model's 25 MB, its 4 KV heads held twice).
  double kv_transfer_bytes(std::int64_t tokens) const;

  /// Seconds to move the KV cache of `tokens` tokens from a prefill to a decode replica.
  double kv_transfer_seconds(std::int64_t tokens) const { return transfer_seconds(kv_transfer_bytes(tokens)); }

 private:
  explicit CostModel(const CostModelParams& params) : params_(params) {}
  CostModelParams params_;
};

}  // namespace disagg
