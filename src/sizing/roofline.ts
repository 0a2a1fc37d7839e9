import { AcceleratedInstanceType, Accelerator, AttentionKind, ModelArchitecture, Precision } from '../catalog';
import { KvCacheFootprint } from './kv-cache-footprint';
import { Parallelism } from './parallelism';
import { ParallelismRules } from './parallelism-rules';
import { requireFraction, requirePositive } from './private/units';
import { WeightFootprint } from './weight-footprint';

/**
 * Which roof limits a step.
 */
export enum RooflineBound {
  /** Matrix math takes longer than reading memory. */
  COMPUTE = 'compute',
  /** Reading weights and KV cache from memory takes longer than the math. */
  MEMORY = 'memory',
}

/**
 * The fractions of peak hardware rates the estimates assume. Peak rates come from the catalog
 * (dense FLOP/s, HBM and scale-up bandwidth); real kernels reach a fraction of them.
 */
export interface RooflineEfficiency {
  /**
   * Fraction of dense peak FLOP/s that matrix math reaches (model FLOPs utilization). Large prefill
   * GEMMs reach 50-70% on Hopper; small ones less.
   * @default 0.5
   */
  readonly computeEfficiency?: number;
  /**
   * Fraction of peak HBM bandwidth that weight and KV reads reach (model bandwidth utilization).
   * Tuned serving stacks (vLLM, TensorRT-LLM) typically reach 60-85% in decode.
   * @default 0.7
   */
  readonly memoryBandwidthEfficiency?: number;
  /**
   * Fraction of the catalog's one-direction scale-up (NVLink / NeuronLink) or per-device network
   * bandwidth that collectives reach.
   * @default 0.7
   */
  readonly interconnectEfficiency?: number;
  /**
   * Fixed cost of one collective inside a node (launch and synchronisation of a small all-reduce), microseconds.
   * @default 8
   */
  readonly collectiveLatencyUs?: number;
  /**
   * Fixed cost of one collective or transfer that crosses nodes over EFA, microseconds.
   * @default 30
   */
  readonly networkLatencyUs?: number;
  /**
   * Fraction of a device's share of the node's EFA bandwidth that the expert-parallel dispatch and
   * combine reach (the NVLink share uses `interconnectEfficiency`). An assumption: DeepEP's low-latency
   * kernels reach 0.8-0.95 of a CX7 InfiniBand NIC, but they need GPU-initiated RDMA, which EFA lacks.
   * @default 0.5
   */
  readonly allToAllEfficiency?: number;
  /**
   * The busiest expert-parallel rank's routed-expert load over the mean (>= 1): its expert FLOPs and
   * all-to-all bytes are the mean's times this, and every rank waits for it at each MoE layer.
   * @default - 1.4, or 1.1 with redundant experts (EPLB); assumptions
   */
  readonly expertImbalance?: number;
  /**
   * Share of the expert-parallel all-to-all hidden behind compute, 0 to 1 (vLLM `--enable-dbo`,
   * dual-batch overlap); it never hides more than the step's `max(compute, memory)`.
   * @default 0 - not overlapped, vLLM's default
   */
  readonly allToAllOverlap?: number;
}

/**
 * Inputs of {@link Roofline.of}.
 */
export interface RooflineProps extends RooflineEfficiency {
  /** The instance type (accelerator peaks, devices per node, network bandwidth). */
  readonly instanceType: AcceleratedInstanceType;
  /** The weights (model and precisions). */
  readonly weights: WeightFootprint;
  /** The KV cache (same model). */
  readonly kvCache: KvCacheFootprint;
  /**
   * How a replica is split.
   * @default - one device
   */
  readonly parallelism?: Parallelism;
  /**
   * Token budget of one forward pass (vLLM `--max-num-batched-tokens`): longer prompts are prefilled in
   * chunks, and each chunk reads the weights again.
   * @default 8192
   */
  readonly maxNumBatchedTokens?: number;
}

/**
 * A time-to-first-token estimate for one prompt on an idle replica.
 */
export interface PrefillEstimate {
  /** Prompt length, tokens. */
  readonly promptTokens: number;
  /** Estimated time to first token, seconds: `max(compute, memory) + communication`. */
  readonly seconds: number;
  /** Prompt tokens per second for this prompt: `promptTokens / seconds`. */
  readonly tokensPerSecond: number;
  /** Matrix-math time, seconds. */
  readonly computeSeconds: number;
  /** Memory-read time, seconds. */
  readonly memorySeconds: number;
  /** Collective and pipeline transfer time, seconds (not overlapped with the rest). */
  readonly communicationSeconds: number;
  /** The charged expert-parallel all-to-all, seconds (part of communicationSeconds; 0 without expert parallelism). */
  readonly allToAllSeconds: number;
  /** The limiting roof. */
  readonly bound: RooflineBound;
}

/**
 * A decode-step estimate for a batch of sequences at a given context length.
 */
export interface DecodeEstimate {
  /** Sequences decoding together in one replica. */
  readonly batchSize: number;
  /** Tokens of context each sequence attends to. */
  readonly contextTokens: number;
  /** One decode step, seconds: the time per output token (TPOT) each sequence sees. */
  readonly stepSeconds: number;
  /** Output tokens per second of the replica: `batchSize / stepSeconds`. */
  readonly tokensPerSecond: number;
  /** Matrix-math time, seconds. */
  readonly computeSeconds: number;
  /** Memory-read time (weights per rank plus KV cache), seconds. */
  readonly memorySeconds: number;
  /** Collective and pipeline transfer time, seconds (not overlapped with the rest). */
  readonly communicationSeconds: number;
  /** The charged expert-parallel all-to-all, seconds (part of communicationSeconds; 0 without expert parallelism). */
  readonly allToAllSeconds: number;
  /** The limiting roof. */
  readonly bound: RooflineBound;
}

/**
 * Roofline estimates of prefill and decode time for one replica.
 *
 * A forward pass over T tokens takes `max(compute, memory) + communication`, per tensor-parallel rank:
 * - compute: `2 x parameters` FLOPs per token for the dense weights and the active routed experts,
 *   plus attention (`4 x heads x headDim` FLOPs per attended token pair per layer; MLA decode in its
 *   absorbed form works on the latent), at the dense peak of the weights' precision where the device has
 *   it natively (FP8 on Hopper), else at BF16 (weight-only kernels such as Marlin), times `computeEfficiency`;
 * - memory: the weights of one rank (for MoE, only the experts the batch touches, assuming uniform
 *   routing: `1 - (1 - active/total)^T` of them) plus the KV cache read, over HBM bandwidth times
 *   `memoryBandwidthEfficiency`;
 * - communication: two all-reduces per layer under TP (ring: `2 (TP-1)/TP x T x hidden x 2 B`), and
 *   point-to-point sends between pipeline stages, each with a fixed latency; over NVLink inside the
 *   scale-up domain, else over the node's EFA share;
 * - expert parallelism (EP ranks): per MoE layer a dispatch (FP8, 1 B per element, as DeepEP sends it) and
 *   a combine (BF16) of `T / EP x top-k x hidden` elements per rank, times `expertImbalance`; destinations
 *   are uniform over the ranks, so `(EP - s) / EP` of the bytes cross EFA (the device's share, times
 *   `allToAllEfficiency`) while `(s - 1) / EP` use NVLink, at the same time (`s` = ranks in one scale-up
 *   domain), plus a latency per direction; `allToAllOverlap` of it hides behind compute. The routed
 *   experts' FLOPs are those of the busiest rank (mean times `expertImbalance`). The engine's cost model
 *   (engine/include/disagg/cost_model.h) charges the same formula with the same defaults.
 *
 * Not modelled: overlap of other communication with compute, scheduler and sampling overhead, speculative
 * decoding, prefix-cache hits, the throughput gain of overlapping pipeline micro-batches (pipeline stages
 * run in sequence for one token, so PP adds no latency benefit), and queueing. Treat the numbers as
 * lower bounds on latency and upper bounds on throughput.
 */
export class Roofline {
  /**
   * Default `computeEfficiency`. An assumption; on one H200, BF16 prefills of 1k-16k tokens of a
   * Llama-3.1-8B-shaped model reached 62% of peak (bench/RESULTS.md), so 0.5 leaves a margin.
   */
  public static readonly DEFAULT_COMPUTE_EFFICIENCY = 0.5;
  /**
   * Default `memoryBandwidthEfficiency`. An assumption; on the same H200, decode steps reached 64-80%
   * of HBM bandwidth with fused elementwise kernels (bench/RESULTS.md).
   */
  public static readonly DEFAULT_MEMORY_BANDWIDTH_EFFICIENCY = 0.7;
  /** Default `interconnectEfficiency`. */
  public static readonly DEFAULT_INTERCONNECT_EFFICIENCY = 0.7;
  /** Default `collectiveLatencyUs`. */
  public static readonly DEFAULT_COLLECTIVE_LATENCY_US = 8;
  /** Default `networkLatencyUs`. */
  public static readonly DEFAULT_NETWORK_LATENCY_US = 30;
  /** Default `allToAllEfficiency` (an assumption; see RooflineEfficiency). */
  public static readonly DEFAULT_ALL_TO_ALL_EFFICIENCY = 0.5;
  /**
   * Default `expertImbalance` without redundant experts. An assumption, not a measurement: vLLM's EPLB
   * exists because some EP ranks otherwise idle while others process large batches (vLLM blog, 2025-12-17).
   */
  public static readonly DEFAULT_EXPERT_IMBALANCE = 1.4;
  /** Default `expertImbalance` with redundant experts placed by EPLB. An assumption. */
  public static readonly DEFAULT_EXPERT_IMBALANCE_EPLB = 1.1;
  /** Bytes per element of the expert-parallel dispatch: FP8, as DeepEP's kernels send it. */
  public static readonly DISPATCH_BYTES_PER_ELEMENT = 1;
  /** Bytes per element of the expert-parallel combine: BF16. */
  public static readonly COMBINE_BYTES_PER_ELEMENT = 2;

  /**
   * Builds the estimator.
   *
   * @throws when an efficiency is outside (0, 1], a latency is negative, or the weights and KV cache
   * belong to different models
   */
  public static of(props: RooflineProps): Roofline {
    return new Roofline(props);
  }

  /**
   * Cost of a million tokens produced at `tokensPerSecond` by capacity that costs `pricePerHour`.
   *
   * @param pricePerHour price of the capacity, per hour, in any currency
   * @param tokensPerSecond tokens it produces per second
   */
  public static costPerMillionTokens(pricePerHour: number, tokensPerSecond: number): number {
    requirePositive('pricePerHour', pricePerHour, false, 'pass the hourly price of the capacity, e.g. 98.32');
    requirePositive('tokensPerSecond', tokensPerSecond, false, 'pass a positive throughput');
    return (pricePerHour / (tokensPerSecond * 3600)) * 1e6;
  }

  /**
   * The precision attention's matrix math (QK^T and AV) runs in under vLLM: FP8 where the KV cache is
   * FP8 and the device's attention kernels keep it in the quantized domain (`Accelerator.fp8Attention`:
   * FlashAttention 3 quantizes the queries too), else BF16, the activations'. The one home of this
   * rule: the roofline uses it, and src/engine passes its rate to the engine's cost model
   * (`hardware.attentionFlopsPerSecond`).
   */
  public static attentionPrecisionFor(kvCachePrecision: Precision, accelerator: Accelerator): Precision {
    return kvCachePrecision === Precision.FP8 && accelerator.fp8Attention ? Precision.FP8 : Precision.BF16;
  }

  /** The model. */
  public readonly model: ModelArchitecture;
  /** The instance type. */
  public readonly instanceType: AcceleratedInstanceType;
  /** The weights. */
  public readonly weights: WeightFootprint;
  /** The KV cache. */
  public readonly kvCache: KvCacheFootprint;
  /** The parallel layout. */
  public readonly parallelism: Parallelism;
  /** Token budget per forward pass. */
  public readonly maxNumBatchedTokens: number;
  /** Fraction of peak FLOP/s assumed. */
  public readonly computeEfficiency: number;
  /** Fraction of peak HBM bandwidth assumed. */
  public readonly memoryBandwidthEfficiency: number;
  /** Fraction of link bandwidth assumed. */
  public readonly interconnectEfficiency: number;
  /** Fixed cost per in-node collective, microseconds. */
  public readonly collectiveLatencyUs: number;
  /** Fixed cost per cross-node transfer, microseconds. */
  public readonly networkLatencyUs: number;
  /** Fraction of the EFA share the expert all-to-all reaches. */
  public readonly allToAllEfficiency: number;
  /** Busiest expert-parallel rank's load over the mean (1 without expert parallelism). */
  public readonly expertImbalance: number;
  /** Share of the all-to-all hidden behind compute. */
  public readonly allToAllOverlap: number;
  /** Precision the dense (non-expert) matrix math runs in. */
  public readonly denseComputePrecision: Precision;
  /** Precision the routed-expert matrix math runs in. */
  public readonly expertComputePrecision: Precision;
  /** Precision attention's QK^T and AV run in (attentionPrecisionFor()). */
  public readonly attentionComputePrecision: Precision;
  private readonly expertBytesPerRank: number;
  private readonly denseBytesPerRank: number;

  private constructor(props: RooflineProps) {
    if (props.weights.model !== props.kvCache.model) {
      throw new Error(`'kvCache' is for ${props.kvCache.model.name} but 'weights' are for ${props.weights.model.name}; size both for the same model`);
    }
    this.model = props.weights.model;
    this.instanceType = props.instanceType;
    this.weights = props.weights;
    this.kvCache = props.kvCache;
    this.parallelism = props.parallelism ?? Parallelism.of({});
    this.maxNumBatchedTokens = props.maxNumBatchedTokens ?? 8192;
    requirePositive('maxNumBatchedTokens', this.maxNumBatchedTokens, true, "vLLM's default is 8192");
    this.computeEfficiency = props.computeEfficiency ?? Roofline.DEFAULT_COMPUTE_EFFICIENCY;
    this.memoryBandwidthEfficiency = props.memoryBandwidthEfficiency ?? Roofline.DEFAULT_MEMORY_BANDWIDTH_EFFICIENCY;
    this.interconnectEfficiency = props.interconnectEfficiency ?? Roofline.DEFAULT_INTERCONNECT_EFFICIENCY;
    requireFraction('computeEfficiency', this.computeEfficiency, `the default is ${Roofline.DEFAULT_COMPUTE_EFFICIENCY}`);
    requireFraction('memoryBandwidthEfficiency', this.memoryBandwidthEfficiency, `the default is ${Roofline.DEFAULT_MEMORY_BANDWIDTH_EFFICIENCY}`);
    requireFraction('interconnectEfficiency', this.interconnectEfficiency, `the default is ${Roofline.DEFAULT_INTERCONNECT_EFFICIENCY}`);
    this.collectiveLatencyUs = props.collectiveLatencyUs ?? Roofline.DEFAULT_COLLECTIVE_LATENCY_US;
    this.networkLatencyUs = props.networkLatencyUs ?? Roofline.DEFAULT_NETWORK_LATENCY_US;
    for (const [field, value] of [['collectiveLatencyUs', this.collectiveLatencyUs], ['networkLatencyUs', this.networkLatencyUs]] as Array<[string, number]>) {
      if (!(Number.isFinite(value) && value >= 0)) {
        throw new Error(`'${field}' (${value}) must be a number >= 0 (microseconds); omit it for the default`);
      }
    }
    this.allToAllEfficiency = props.allToAllEfficiency ?? Roofline.DEFAULT_ALL_TO_ALL_EFFICIENCY;
    requireFraction('allToAllEfficiency', this.allToAllEfficiency, `the default is ${Roofline.DEFAULT_ALL_TO_ALL_EFFICIENCY}`);
    const ep = this.parallelism.expertParallel && this.parallelism.expertParallelSize > 1;
    const imbalanceDefault = this.parallelism.redundantExperts > 0 ? Roofline.DEFAULT_EXPERT_IMBALANCE_EPLB : Roofline.DEFAULT_EXPERT_IMBALANCE;
    this.expertImbalance = ep ? props.expertImbalance ?? imbalanceDefault : 1;
    if (!(Number.isFinite(this.expertImbalance) && this.expertImbalance >= 1)) {
      throw new Error(`'expertImbalance' (${props.expertImbalance}) must be >= 1 (the busiest expert rank's load over the mean); omit it for ${imbalanceDefault}`);
    }
    this.allToAllOverlap = props.allToAllOverlap ?? 0;
    if (!(Number.isFinite(this.allToAllOverlap) && this.allToAllOverlap >= 0 && this.allToAllOverlap <= 1)) {
      throw new Error(`'allToAllOverlap' (${this.allToAllOverlap}) must be between 0 (not overlapped) and 1 (hidden behind compute); omit it for 0`);
    }
    const accelerator = this.instanceType.accelerator;
    const native = (p: Precision) => (accelerator.supportsNativePrecision(p) ? p : Precision.BF16);
    this.denseComputePrecision = native(this.weights.densePrecision);
    this.expertComputePrecision = native(this.weights.expertPrecision);
    this.attentionComputePrecision = Roofline.attentionPrecisionFor(this.kvCache.precision, accelerator);

    const p = this.parallelism;
    this.denseBytesPerRank = this.weights.denseBytes / p.tensorParallel;
    // Per TP rank over all pipeline stages: a token passes the stages one after another.
    this.expertBytesPerRank = this.weights.bytesPerRank(p) * p.pipelineParallel - this.denseBytesPerRank;
  }

  /**
   * Estimates the time to first token of one prompt on an idle replica (prefill, then the first token).
   *
   * @param promptTokens prompt length, tokens
   */
  public prefill(promptTokens: number): PrefillEstimate {
    requirePositive('promptTokens', promptTokens, true, 'pass the prompt length in tokens');
    const chunks = Math.ceil(promptTokens / this.maxNumBatchedTokens);
    const chunkTokens = Math.min(promptTokens, this.maxNumBatchedTokens);
    const attentionFlops = this.prefillAttentionFlops(promptTokens);
    const kvBytes = this.kvCache.bytesPerSequence(promptTokens) * this.kvCache.rankShare(this.parallelism.tensorParallel);
    return this.prefillEstimate(promptTokens, promptTokens, {
      groupTokens: promptTokens,
      expertTokens: promptTokens,
      expertTokensPerPass: chunkTokens,
      passes: chunks,
      attentionFlops,
      kvBytesPerRank: kvBytes,
    });
  }

  /**
   * Estimates a prefill pool's throughput: `prompts` prompts of `promptTokens` tokens each, spread evenly
   * over the replica's data-parallel ranks (each prefilling its share in chunks of `maxNumBatchedTokens`),
   * all of them through the routed experts together. `tokensPerSecond` is the replica's prompt tokens per
   * second; with one data-parallel rank and one prompt it equals `prefill(promptTokens)`.
   *
   * @param promptTokens prompt length, tokens
   * @param prompts prompts prefilled together
   */
  public prefillBatch(promptTokens: number, prompts: number): PrefillEstimate {
    requirePositive('promptTokens', promptTokens, true, 'pass the prompt length in tokens');
    requirePositive('prompts', prompts, true, 'pass the number of prompts prefilled together');
    const p = this.parallelism;
    const perRank = Math.ceil(prompts / p.dataParallel);
    const groupTokens = perRank * promptTokens;
    const passes = Math.ceil(groupTokens / this.maxNumBatchedTokens);
    const expertTokens = p.expertParallel ? prompts * promptTokens : groupTokens;
    const kvBytes = perRank * this.kvCache.bytesPerSequence(promptTokens) * this.kvCache.rankShare(p.tensorParallel);
    return this.prefillEstimate(promptTokens, prompts * promptTokens, {
      groupTokens,
      expertTokens,
      expertTokensPerPass: expertTokens / passes,
      passes,
      attentionFlops: perRank * this.prefillAttentionFlops(promptTokens),
      kvBytesPerRank: kvBytes,
    });
  }

  /**
   * Estimates one decode step of `batchSize` sequences that each attend to `contextTokens` tokens.
   * With data-parallel attention the batch is spread evenly over the DP ranks.
   *
   * @param batchSize sequences in the replica's batch
   * @param contextTokens context per sequence, tokens
   */
  public decodeStep(batchSize: number, contextTokens: number): DecodeEstimate {
    requirePositive('batchSize', batchSize, true, 'pass the number of sequences decoding together');
    requirePositive('contextTokens', contextTokens, true, 'pass the context length per sequence');
    const p = this.parallelism;
    const groupTokens = Math.ceil(batchSize / p.dataParallel);
    const expertTokens = p.expertParallel ? batchSize : groupTokens;
    const cost = this.forward({
      groupTokens,
      expertTokens,
      expertTokensPerPass: expertTokens,
      passes: 1,
      attentionFlops: groupTokens * this.decodeAttentionFlopsPerToken(contextTokens),
      kvBytesPerRank: groupTokens * this.kvCache.bytesPerSequence(contextTokens) * this.kvCache.rankShare(p.tensorParallel),
    });
    return {
      batchSize,
      contextTokens,
      stepSeconds: cost.seconds,
      tokensPerSecond: batchSize / cost.seconds,
      ...breakdown(cost),
    };
  }

  /**
   * Time of one ring all-reduce of `bytes` across the TP group, seconds (0 at TP 1).
   */
  public allReduceSeconds(bytes: number): number {
    const tp = this.parallelism.tensorParallel;
    if (tp === 1) {
      return 0;
    }
    const bandwidth = this.instanceType.accelerator.interconnectGBps * 1e9 * this.interconnectEfficiency;
    return this.collectiveLatencyUs * 1e-6 + ((2 * (tp - 1)) / tp) * bytes / bandwidth;
  }

  /** One prefill forward pass of `work` as an estimate: `prefilledTokens` prompt tokens (all prompts) in its time. */
  private prefillEstimate(promptTokens: number, prefilledTokens: number, work: ForwardWork): PrefillEstimate {
    const cost = this.forward(work);
    return {
      promptTokens,
      seconds: cost.seconds,
      tokensPerSecond: prefilledTokens / cost.seconds,
      ...breakdown(cost),
    };
  }

  private forward(work: ForwardWork): ForwardCost {
    const model = this.model;
    const p = this.parallelism;
    const accelerator = this.instanceType.accelerator;
    const flopRate = (precision: Precision) => accelerator.peakTflops(precision) * 1e12 * this.computeEfficiency;

    // Compute, per TP rank, over all layers (pipeline stages run one after another for a token).
    const routedActive = Math.max(0, model.parametersActive - model.denseParameters);
    const expertShards = p.expertParallel ? p.expertParallelSize : p.tensorParallel;
    const compute =
      (2 * work.groupTokens * model.denseParameters) / p.tensorParallel / flopRate(this.denseComputePrecision) +
      (2 * work.expertTokens * routedActive * this.expertImbalance) / expertShards / flopRate(this.expertComputePrecision) +
      work.attentionFlops / p.tensorParallel / flopRate(this.attentionComputePrecision);

    // Memory: each pass reads the rank's dense weights and the experts its tokens touch.
    const touched = model.isMoe ? 1 - Math.pow(1 - model.expertsActive / model.expertsTotal, work.expertTokensPerPass) : 0;
    const bytes = work.passes * (this.denseBytesPerRank + this.expertBytesPerRank * touched) + work.kvBytesPerRank;
    const memory = bytes / (accelerator.hbmBandwidthGBps * 1e9 * this.memoryBandwidthEfficiency);

    const exchange = this.allToAllSeconds(work);
    const allToAll = exchange - Math.min(this.allToAllOverlap * exchange, Math.max(compute, memory));
    const communication = this.communicationSeconds(work) + allToAll;
    const seconds = Math.max(compute, memory) + communication;
    return { seconds, compute, memory, communication, allToAll, bound: compute > memory ? RooflineBound.COMPUTE : RooflineBound.MEMORY };
  }

  /**
   * Dispatch and combine per MoE layer under expert parallelism, before any overlap, seconds; 0 without it.
   * Each rank sends its tokens' top-k activations to the experts' ranks: the share on other nodes over
   * its EFA share, the share on its own node over NVLink, at the same time.
   */
  private allToAllSeconds(work: ForwardWork): number {
    const p = this.parallelism;
    if (!p.expertParallel || p.expertParallelSize <= 1) {
      return 0;
    }
    const model = this.model;
    const ep = p.expertParallelSize;
    const local = Math.min(ep, ParallelismRules.maxTensorParallel(this.instanceType));
    const offNode = (ep - local) / ep;
    const onNode = (local - 1) / ep;
    const nvlink = this.instanceType.accelerator.interconnectGBps * 1e9 * this.interconnectEfficiency;
    const efaShare = (this.instanceType.networkBandwidthGbps / 8 / this.instanceType.acceleratorCount) * 1e9;
    const efa = efaShare * this.allToAllEfficiency;
    const latency = (ep > local ? this.networkLatencyUs : this.collectiveLatencyUs) * 1e-6;
    const elements = (work.expertTokens / ep) * model.expertsActive * model.hiddenSize * this.expertImbalance;
    const direction = (bytesPerElement: number) => {
      const bytes = elements * bytesPerElement;
      return Math.max(offNode > 0 ? (bytes * offNode) / efa : 0, (bytes * onNode) / nvlink) + work.passes * latency;
    };
    return model.moeLayers * (direction(Roofline.DISPATCH_BYTES_PER_ELEMENT) + direction(Roofline.COMBINE_BYTES_PER_ELEMENT));
  }

  private communicationSeconds(work: ForwardWork): number {
    const model = this.model;
    const p = this.parallelism;
    const activationBytes = 2; // BF16 activations on the wire
    const nvlink = this.instanceType.accelerator.interconnectGBps * 1e9 * this.interconnectEfficiency;
    const efaPerDevice = (this.instanceType.networkBandwidthGbps / 8 / this.instanceType.acceleratorCount) * 1e9 * this.interconnectEfficiency;
    const domain = ParallelismRules.maxTensorParallel(this.instanceType);
    let seconds = 0;

    // Two all-reduces per layer (after attention and after the MLP), once per pass.
    if (p.tensorParallel > 1) {
      const perPassTokens = work.groupTokens / work.passes;
      seconds += 2 * model.layers * work.passes * this.allReduceSeconds(perPassTokens * model.hiddenSize * activationBytes);
    }

    // Activations handed from one pipeline stage to the next.
    if (p.pipelineParallel > 1) {
      const inDomain = p.acceleratorsPerReplica <= domain;
      const bandwidth = inDomain ? nvlink : efaPerDevice;
      const latency = (inDomain ? this.collectiveLatencyUs : this.networkLatencyUs) * 1e-6;
      const bytes = work.groupTokens * model.hiddenSize * activationBytes;
      seconds += (p.pipelineParallel - 1) * (work.passes * latency + bytes / bandwidth);
    }
    return seconds;
  }

  /** Attention FLOPs of a causal prefill of `tokens` tokens, all layers, whole replica. */
  private prefillAttentionFlops(tokens: number): number {
    const model = this.model;
    const perPair = 4 * model.attentionHeads * model.headDim; // QK^T and AV, 2 FLOPs per multiply-add each
    const fullPairs = (tokens * (tokens + 1)) / 2;
    const window = this.kvCache.slidingWindow;
    const windowPairs = window === undefined || tokens <= window
      ? fullPairs
      : (window * (window + 1)) / 2 + (tokens - window) * window;
    const fullLayers = model.layers - model.slidingWindowLayers;
    return perPair * (fullLayers * fullPairs + model.slidingWindowLayers * windowPairs);
  }

  /** Attention FLOPs of one decode token attending to `context` tokens, all layers. */
  private decodeAttentionFlopsPerToken(context: number): number {
    const model = this.model;
    if (model.attentionKind === AttentionKind.MLA) {
      // Absorbed MLA: scores against the latent plus rope key, values from the latent.
      const latent = model.kvLoraRank!;
      const rope = model.qkRopeHeadDim!;
      return model.layers * 2 * model.attentionHeads * context * (latent + rope + latent);
    }
    const perToken = 4 * model.attentionHeads * model.headDim;
    const window = this.kvCache.slidingWindow;
    const fullLayers = model.layers - model.slidingWindowLayers;
    const windowContext = window === undefined ? context : Math.min(context, window);
    return perToken * (fullLayers * context + model.slidingWindowLayers * windowContext);
  }
}

/** The time of one forward step by term (internal). */
interface ForwardCost {
  readonly seconds: number;
  readonly compute: number;
  readonly memory: number;
  readonly communication: number;
  readonly allToAll: number;
  readonly bound: RooflineBound;
}

/** The terms of a forward step as the estimates report them (internal). */
function breakdown(cost: ForwardCost): Pick<PrefillEstimate, 'computeSeconds' | 'memorySeconds' | 'communicationSeconds' | 'allToAllSeconds' | 'bound'> {
  return {
    computeSeconds: cost.compute,
    memorySeconds: cost.memory,
    communicationSeconds: cost.communication,
    allToAllSeconds: cost.allToAll,
    bound: cost.bound,
  };
}

/** The work of one forward step (internal). */
interface ForwardWork {
  /** Tokens one TP group processes (one DP rank). */
  readonly groupTokens: number;
  /** Tokens routed through the experts this rank holds a share of. */
  readonly expertTokens: number;
  /** Expert tokens per forward pass (decides how many experts a pass touches). */
  readonly expertTokensPerPass: number;
  /** Forward passes (chunks of a long prefill). */
  readonly passes: number;
  /** Attention FLOPs of the TP group. */
  readonly attentionFlops: number;
  /** KV cache bytes each rank reads or writes. */
  readonly kvBytesPerRank: number;
}
