import { AcceleratedInstanceType, Accelerator, AttentionKind, ModelArchitecture, Precision } from '../catalog';
import { KvCacheFootprint } from './kv-cache-footprint';
import { MemoryBudget } from './memory-budget';
import { Parallelism } from './parallelism';
import { ParallelismRules, ReplicaLayout } from './parallelism-rules';
import { defaultKvBlockSize } from './private/kv-block-size';
import { formatGbAndGib, formatGib, formatGibAndGb, formatInt, joinOr, requirePositive, withArticle } from './private/units';
import { DecodeEstimate, PrefillEstimate, Roofline, RooflineEfficiency } from './roofline';
import { SizingProblem } from './sizing-problem';
import { WeightFootprint } from './weight-footprint';

/**
 * Inputs of {@link ServingPlan.create}: one model served by vLLM on one instance type.
 */
export interface ServingPlanProps extends RooflineEfficiency {
  /** The model. */
  readonly model: ModelArchitecture;
  /** The instance type of the nodes. */
  readonly instanceType: AcceleratedInstanceType;
  /** Longest sequence (prompt plus output) to serve, tokens (vLLM `--max-model-len`). */
  readonly maxContext: number;
  /**
   * Weight precision (of the routed experts, for an MoE model; see `WeightFootprint`).
   * @default - the model's native checkpoint precision
   */
  readonly weightPrecision?: Precision;
  /**
   * Precision of an MoE model's non-expert weights.
   * @default - BF16 when weightPrecision is narrower than 8 bits, else weightPrecision
   */
  readonly denseWeightPrecision?: Precision;
  /**
   * KV cache precision (vLLM `--kv-cache-dtype`), as the constructs name it.
   * @default Precision.BF16
   */
  readonly kvCachePrecision?: Precision;
  /**
   * The same as `kvCachePrecision`, under the name this prop had first.
   * @default - kvCachePrecision
   * @deprecated use `kvCachePrecision`, the name every construct uses
   */
  readonly kvPrecision?: Precision;
  /**
   * Tensor-parallel size.
   * @default - the smallest valid size that holds the weights and one `maxContext` sequence
   */
  readonly tensorParallel?: number;
  /**
   * Pipeline-parallel size.
   * @default 1
   */
  readonly pipelineParallel?: number;
  /**
   * Data-parallel attention ranks per replica.
   * @default 1
   */
  readonly dataParallel?: number;
  /**
   * Shard routed experts with expert parallelism over `tensorParallel x dataParallel` ranks.
   * @default false
   */
  readonly expertParallel?: boolean;
  /**
   * Redundant experts (EPLB).
   * @default 0
   */
  readonly redundantExperts?: number;
  /**
   * Fraction of device memory vLLM may use (`--gpu-memory-utilization`).
   * @default 0.9
   */
  readonly gpuMemoryUtilization?: number;
  /**
   * Runtime reserve per device, GiB (CUDA context, collective workspaces, CUDA graphs).
   * @default 1.5
   */
  readonly runtimeReserveGib?: number;
  /**
   * Activation peak per device, GiB.
   * @default - estimated by `MemoryBudget.estimateActivationGib`
   */
  readonly activationReserveGib?: number;
  /**
   * Token budget per forward pass (`--max-num-batched-tokens`).
   * @default - vLLM's API-server default for the device: 8192 with >= 70 GiB (except A100), else 2048
   */
  readonly maxNumBatchedTokens?: number;
  /**
   * Sequences per forward pass (`--max-num-seqs`); sizes the logits in the activation estimate.
   * @default - vLLM's API-server default for the device: 1024 with >= 70 GiB (except A100), else 256
   */
  readonly maxNumSeqs?: number;
  /**
   * Paged KV block size in tokens (`--block-size`): sequences take whole blocks.
   * @default - what vLLM runs: 64 for MLA models (DeepSeek-V3/R1, Kimi-K2) on H100, H200, B200 and GB200,
   * whose MLA attention backend forces it; else 16
   */
  readonly kvBlockSize?: number;
  /**
   * Batch sizes to estimate decode for.
   * @default [1, 8, 32, 128]
   */
  readonly batchSizes?: number[];
  /**
   * Prompt lengths to estimate time to first token for.
   * @default - 1024, 4096 and maxContext, those not above maxContext
   */
  readonly promptLengths?: number[];
  /**
   * Context each decoding sequence attends to in the decode estimates, tokens.
   * @default - maxContext (every sequence at full length: the slowest case)
   */
  readonly decodeContextTokens?: number;
  /**
   * Price of one instance (node) per hour, any currency; enables cost estimates. A replica pays for the
   * share of nodes it occupies.
   * @default - no cost estimates
   */
  readonly pricePerHour?: number;
}

/**
 * Memory and capacity of one tensor-parallel size (the other settings unchanged).
 */
export interface TensorParallelOption {
  /** The tensor-parallel size. */
  readonly tensorParallel: number;
  /** Weight bytes per device. */
  readonly weightBytesPerRank: number;
  /** Bytes per device left for the KV cache (0 when the weights do not fit). */
  readonly kvCacheBytesPerRank: number;
  /** KV tokens one replica holds at maxContext. */
  readonly kvTokens: number;
  /** Sequences of maxContext tokens one replica holds at once. */
  readonly maxConcurrency: number;
  /** Whole replicas per node (0 when one spans nodes). */
  readonly replicasPerNode: number;
  /** EFA interfaces per pod. */
  readonly efaInterfacesPerPod: number;
  /** Whether this size runs: valid layout, weights and one maxContext sequence fit. */
  readonly fits: boolean;
  /**
   * Why it does not run.
   * @default - undefined when it fits
   */
  readonly problem?: string;
}

/**
 * A decode estimate at one batch size, with capacity and cost.
 */
export interface BatchEstimate extends DecodeEstimate {
  /** Whether the KV cache holds this many sequences at the decode context. */
  readonly withinKvCapacity: boolean;
  /**
   * Cost of a million output tokens at this batch size (decode only; prefill time not charged).
   * @default - undefined without pricePerHour
   */
  readonly costPerMillionOutputTokens?: number;
}

/** Fully resolved inputs (internal). */
interface Resolved {
  readonly model: ModelArchitecture;
  readonly instanceType: AcceleratedInstanceType;
  readonly maxContext: number;
  readonly weights: WeightFootprint;
  readonly kvCache: KvCacheFootprint;
  readonly gpuMemoryUtilization: number;
  readonly runtimeReserveGib: number;
  readonly activationReserveGib?: number;
  readonly maxNumBatchedTokens?: number;
  readonly maxNumSeqs?: number;
  readonly kvBlockSize: number;
}

/** Memory outcome of one layout (internal). */
interface MemoryFit {
  readonly memory: MemoryBudget;
  readonly weightBytesPerRank: number;
  readonly kvCacheBytesPerRank: number;
  readonly kvTokens: number;
  readonly maxConcurrency: number;
  readonly weightsFit: boolean;
  readonly sequenceFits: boolean;
}

/**
 * Whether a model fits an instance type, how to split it, and what it will do: weights and KV cache per
 * device, KV tokens and concurrent sequences per replica, valid tensor-parallel sizes, EFA per pod, and
 * roofline estimates of time to first token, time per output token and cost.
 *
 * `create` never throws for a configuration that does not fit: it returns `fits: false` with the
 * problems. It throws only for malformed inputs (a negative size, a utilization above 1, a KV precision
 * vLLM cannot store). `validate` returns the problems; `assertFits` throws them.
 *
 * @example
 * const plan = ServingPlan.create({
 *   model: ModelArchitecture.LLAMA_3_3_70B,
 *   instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
 *   weightPrecision: Precision.FP8,
 *   kvCachePrecision: Precision.FP8,
 *   maxContext: 8192,
 * });
 */
export class ServingPlan {
  /** Default decode batch sizes. */
  public static readonly DEFAULT_BATCH_SIZES = [1, 8, 32, 128];
  /** Default KV block size, tokens (vLLM's CUDA default; MLA models on Hopper and Blackwell run 64). */
  public static readonly DEFAULT_KV_BLOCK_SIZE = 16;

  /**
   * Plans a deployment. Check `fits` and `problems`.
   *
   * @throws when an input is malformed (see the class doc)
   */
  public static create(props: ServingPlanProps): ServingPlan {
    return new ServingPlan(props);
  }

  /**
   * The reasons a configuration cannot run; empty when it fits. Malformed inputs come back as problems
   * too, so this never throws.
   */
  public static validate(props: ServingPlanProps): SizingProblem[] {
    try {
      return ServingPlan.create(props).problems;
    } catch (e) {
      const message = (e as Error).message;
      const m = /^'([^']+)' \(([^)]*)\)/.exec(message);
      return [{ field: m?.[1] ?? '', value: m?.[2] ?? '', message }];
    }
  }

  /**
   * Plans a deployment and throws unless it fits.
   *
   * @throws an Error whose message lists every problem, one per line
   */
  public static assertFits(props: ServingPlanProps): ServingPlan {
    const plan = ServingPlan.create(props);
    if (!plan.fits) {
      throw new Error(`${plan.model.name} does not fit ${plan.instanceType.name}:\n` + plan.reasons.map(r => `- ${r}`).join('\n'));
    }
    return plan;
  }

  /** The model. */
  public readonly model: ModelArchitecture;
  /** The instance type. */
  public readonly instanceType: AcceleratedInstanceType;
  /** Longest sequence served, tokens. */
  public readonly maxContext: number;
  /** The weights. */
  public readonly weights: WeightFootprint;
  /** The KV cache. */
  public readonly kvCache: KvCacheFootprint;
  /** The parallel layout (with the chosen tensor-parallel size). */
  public readonly parallelism: Parallelism;
  /** Whether the tensor-parallel size was chosen by the plan (not given). */
  public readonly tensorParallelChosen: boolean;
  /** The memory budget of one device at the chosen layout. */
  public readonly memory: MemoryBudget;
  /** Where replicas land on nodes. */
  public readonly layout: ReplicaLayout;
  /** The estimator behind the latency numbers. */
  public readonly roofline: Roofline;
  /** Weight bytes per device. */
  public readonly weightBytesPerRank: number;
  /** Bytes per device left for the KV cache (0 when the weights do not fit). */
  public readonly kvCacheBytesPerRank: number;
  /** KV cache bytes one maxContext sequence takes on one device (in whole blocks). */
  public readonly kvBytesPerSequencePerRank: number;
  /** KV tokens one replica holds at maxContext (sliding-window layers amortised over the context). */
  public readonly kvTokens: number;
  /** Sequences of maxContext tokens one replica holds at once (KV-limited). */
  public readonly maxConcurrency: number;
  /** Whether the configuration runs. */
  public readonly fits: boolean;
  /** Why it does not run (empty when it fits). */
  public readonly problems: SizingProblem[];
  /** The problem messages. */
  public readonly reasons: string[];
  /** Facts worth knowing that do not stop it from running (KV head replication, weight-only math, ...). */
  public readonly notes: string[];
  /** Tensor-parallel sizes the model's heads and the node allow. */
  public readonly validTensorParallelSizes: number[];
  /** Memory and capacity at each valid tensor-parallel size. */
  public readonly tensorParallelOptions: TensorParallelOption[];
  /** Time-to-first-token estimates per prompt length. */
  public readonly prefillEstimates: PrefillEstimate[];
  /** Decode estimates per batch size. */
  public readonly decodeEstimates: BatchEstimate[];
  /** Context per sequence in the decode estimates, tokens. */
  public readonly decodeContextTokens: number;
  /** KV block size, tokens (vLLM `--block-size`): the given one, or what vLLM runs for the model on this GPU. */
  public readonly kvBlockSize: number;
  /**
   * Price per node-hour used for the cost estimates.
   * @default - undefined: no cost estimates
   */
  public readonly pricePerHour?: number;

  private constructor(props: ServingPlanProps) {
    const model = props.model;
    const instanceType = props.instanceType;
    requirePositive('maxContext', props.maxContext, true, `use at most the ${formatInt(model.maxContext)} tokens of ${model.name}`);
    // Unset: what vLLM runs (64 for MLA models on Hopper and Blackwell, else 16; private/kv-block-size.ts).
    const kvBlockSize = props.kvBlockSize ?? defaultKvBlockSize(model, [instanceType]);
    requirePositive('kvBlockSize', kvBlockSize, true, "vLLM's default is 16");
    if (props.pricePerHour !== undefined) {
      requirePositive('pricePerHour', props.pricePerHour, false, 'pass the on-demand or reserved price of one instance per hour');
    }
    if (props.maxNumBatchedTokens !== undefined) {
      requirePositive('maxNumBatchedTokens', props.maxNumBatchedTokens, true, "omit it for vLLM's default");
    }
    if (props.maxNumSeqs !== undefined) {
      requirePositive('maxNumSeqs', props.maxNumSeqs, true, "omit it for vLLM's default");
    }
    const resolved: Resolved = {
      model,
      instanceType,
      maxContext: props.maxContext,
      weights: WeightFootprint.of({ model, weightPrecision: props.weightPrecision, denseWeightPrecision: props.denseWeightPrecision }),
      kvCache: KvCacheFootprint.of({ model, precision: kvCachePrecisionOf(props) }),
      gpuMemoryUtilization: props.gpuMemoryUtilization ?? MemoryBudget.DEFAULT_GPU_MEMORY_UTILIZATION,
      runtimeReserveGib: props.runtimeReserveGib ?? MemoryBudget.DEFAULT_RUNTIME_RESERVE_GIB,
      activationReserveGib: props.activationReserveGib,
      maxNumBatchedTokens: props.maxNumBatchedTokens,
      maxNumSeqs: props.maxNumSeqs,
      kvBlockSize,
    };
    const layoutOf = (tensorParallel: number) => Parallelism.of({
      tensorParallel,
      pipelineParallel: props.pipelineParallel,
      dataParallel: props.dataParallel,
      expertParallel: props.expertParallel,
      redundantExperts: props.redundantExperts,
    });

    const maxTp = ParallelismRules.maxTensorParallel(instanceType);
    this.validTensorParallelSizes = ParallelismRules.validTensorParallelSizes(model, maxTp);
    this.tensorParallelChosen = props.tensorParallel === undefined;
    // Validate the explicitly given sizes (throws for malformed ones) before choosing TP.
    const parallelism = props.tensorParallel !== undefined
      ? layoutOf(props.tensorParallel)
      : chooseTensorParallel(resolved, this.validTensorParallelSizes, layoutOf);

    this.model = model;
    this.instanceType = instanceType;
    this.maxContext = props.maxContext;
    this.weights = resolved.weights;
    this.kvCache = resolved.kvCache;
    this.parallelism = parallelism;
    this.layout = ParallelismRules.layout(parallelism, instanceType);

    const fit = memoryFit(resolved, parallelism, instanceType.accelerator);
    this.memory = fit.memory;
    this.weightBytesPerRank = fit.weightBytesPerRank;
    this.kvCacheBytesPerRank = fit.kvCacheBytesPerRank;
    this.kvTokens = fit.kvTokens;
    this.maxConcurrency = fit.maxConcurrency;
    this.kvBytesPerSequencePerRank = sequenceBytesPerRank(resolved, parallelism, props.maxContext);

    this.problems = findProblems(resolved, parallelism, fit, maxTp, this.validTensorParallelSizes, layoutOf);
    this.reasons = this.problems.map(p => p.message);
    this.fits = this.problems.length === 0;
    this.notes = collectNotes(resolved, parallelism);

    this.tensorParallelOptions = this.validTensorParallelSizes.map(tp => {
      const candidate = layoutOf(tp);
      const candidateFit = memoryFit(resolved, candidate, instanceType.accelerator);
      const candidateLayout = ParallelismRules.layout(candidate, instanceType);
      const first = findProblems(resolved, candidate, candidateFit, maxTp, this.validTensorParallelSizes, layoutOf, false)[0];
      return {
        tensorParallel: tp,
        weightBytesPerRank: candidateFit.weightBytesPerRank,
        kvCacheBytesPerRank: candidateFit.kvCacheBytesPerRank,
        kvTokens: candidateFit.kvTokens,
        maxConcurrency: candidateFit.maxConcurrency,
        replicasPerNode: candidateLayout.replicasPerNode,
        efaInterfacesPerPod: candidateLayout.efaInterfacesPerPod,
        fits: first === undefined,
        problem: first?.message,
      };
    });

    // Estimates.
    this.roofline = Roofline.of({
      instanceType,
      weights: resolved.weights,
      kvCache: resolved.kvCache,
      parallelism,
      maxNumBatchedTokens: batchLimits(resolved, instanceType.accelerator).maxNumBatchedTokens,
      computeEfficiency: props.computeEfficiency,
      memoryBandwidthEfficiency: props.memoryBandwidthEfficiency,
      interconnectEfficiency: props.interconnectEfficiency,
      collectiveLatencyUs: props.collectiveLatencyUs,
      networkLatencyUs: props.networkLatencyUs,
    });
    const promptLengths = props.promptLengths
      ?? [...new Set([1024, 4096, props.maxContext].filter(n => n <= props.maxContext))].sort((a, b) => a - b);
    this.prefillEstimates = promptLengths.map(n => this.roofline.prefill(n));
    this.decodeContextTokens = props.decodeContextTokens ?? props.maxContext;
    this.kvBlockSize = kvBlockSize;
    requirePositive('decodeContextTokens', this.decodeContextTokens, true, 'omit it to use maxContext');
    this.pricePerHour = props.pricePerHour;
    const replicaShareOfNodes = parallelism.acceleratorsPerReplica / instanceType.acceleratorCount;
    const perSequence = sequenceBytesPerRank(resolved, parallelism, this.decodeContextTokens);
    const concurrencyAtDecodeContext = perSequence > 0
      ? Math.floor(fit.kvCacheBytesPerRank / perSequence) * parallelism.dataParallel
      : 0;
    this.decodeEstimates = (props.batchSizes ?? ServingPlan.DEFAULT_BATCH_SIZES).map(batch => {
      const step = this.roofline.decodeStep(batch, this.decodeContextTokens);
      return {
        ...step,
        withinKvCapacity: batch <= concurrencyAtDecodeContext,
        costPerMillionOutputTokens: props.pricePerHour === undefined
          ? undefined
          : Roofline.costPerMillionTokens(props.pricePerHour * replicaShareOfNodes, step.tokensPerSecond),
      };
    });
  }
}

/** vLLM's batch limits for the device, unless given (internal). */
function batchLimits(r: Resolved, accelerator: Accelerator): { maxNumBatchedTokens: number; maxNumSeqs: number } {
  const defaults = MemoryBudget.defaultBatchLimits(accelerator);
  return {
    maxNumBatchedTokens: r.maxNumBatchedTokens ?? defaults.maxNumBatchedTokens!,
    maxNumSeqs: r.maxNumSeqs ?? defaults.maxNumSeqs!,
  };
}

/** KV bytes of one `tokens`-long sequence on one device, in whole blocks. */
function sequenceBytesPerRank(r: Resolved, p: Parallelism, tokens: number): number {
  return r.kvCache.bytesPerSequence(tokens, r.kvBlockSize) * r.kvCache.rankShare(p.tensorParallel, p.pipelineParallel);
}

/** Weights, reserve and KV capacity of one layout on one device type. */
function memoryFit(
  r: Resolved, p: Parallelism, accelerator: Accelerator, weights?: WeightFootprint, kvCache?: KvCacheFootprint, utilization?: number,
): MemoryFit {
  const w = weights ?? r.weights;
  const kv = kvCache ?? r.kvCache;
  const memory = MemoryBudget.of({
    accelerator,
    gpuMemoryUtilization: utilization ?? r.gpuMemoryUtilization,
    runtimeReserveGib: r.runtimeReserveGib,
    activationReserveGib: r.activationReserveGib ?? MemoryBudget.estimateActivationGib(r.model, p.tensorParallel, batchLimits(r, accelerator)),
  });
  const weightBytesPerRank = w.bytesPerRank(p);
  const left = memory.kvCacheBytes(weightBytesPerRank);
  const kvCacheBytesPerRank = Math.max(0, left);
  const share = kv.rankShare(p.tensorParallel, p.pipelineParallel);
  const perTokenAmortised = (kv.bytesPerSequence(r.maxContext) / r.maxContext) * share;
  const perSequence = kv.bytesPerSequence(r.maxContext, r.kvBlockSize) * share;
  const kvTokens = Math.floor(kvCacheBytesPerRank / perTokenAmortised) * p.dataParallel;
  const maxConcurrency = Math.floor(kvCacheBytesPerRank / perSequence) * p.dataParallel;
  return {
    memory,
    weightBytesPerRank,
    kvCacheBytesPerRank,
    kvTokens,
    maxConcurrency,
    weightsFit: left > 0,
    sequenceFits: maxConcurrency >= 1,
  };
}

function runs(fit: MemoryFit): boolean {
  return fit.weightsFit && fit.sequenceFits;
}

/** The smallest valid TP whose layout is valid and whose memory fits; else the largest valid one. */
function chooseTensorParallel(r: Resolved, valid: number[], layoutOf: (tp: number) => Parallelism): Parallelism {
  const candidates = valid.map(layoutOf).filter(p =>
    ParallelismRules.expertParallelProblem(r.model, p) === undefined && ParallelismRules.layoutProblem(p, r.instanceType) === undefined);
  const fitting = candidates.find(p => runs(memoryFit(r, p, r.instanceType.accelerator)));
  if (fitting) {
    return fitting;
  }
  if (candidates.length > 0) {
    return candidates[candidates.length - 1];
  }
  return layoutOf(valid.length > 0 ? valid[valid.length - 1] : 1);
}

/** 'fp8 weights', or 'weights (routed experts fp4, other weights bf16)'. */
function weightsText(w: WeightFootprint): string {
  return w.expertPrecision === w.densePrecision ? `${w.expertPrecision.name} weights` : `weights (${w.description})`;
}

function layoutText(p: Parallelism): string {
  const parts = [`tensorParallel ${p.tensorParallel}`];
  if (p.pipelineParallel > 1) parts.push(`pipelineParallel ${p.pipelineParallel}`);
  if (p.dataParallel > 1) parts.push(`dataParallel ${p.dataParallel}`);
  return parts.join(' x ') + (p.expertParallel ? ` with expert parallelism over ${p.expertParallelSize} ranks` : '');
}

/** Every reason the layout cannot run, with fixes. */
function findProblems(
  r: Resolved,
  p: Parallelism,
  fit: MemoryFit,
  maxTp: number,
  validTp: number[],
  layoutOf: (tp: number) => Parallelism,
  withFixes = true,
): SizingProblem[] {
  const problems: SizingProblem[] = [];
  const model = r.model;
  if (r.maxContext > model.maxContext) {
    problems.push({
      field: 'maxContext',
      value: String(r.maxContext),
      message: `'maxContext' (${r.maxContext}) exceeds the ${formatInt(model.maxContext)}-token context of ${model.name}; use at most ${model.maxContext}`,
    });
  }
  const structural = [
    ParallelismRules.tensorParallelProblem(model, p.tensorParallel, r.instanceType),
    ParallelismRules.expertParallelProblem(model, p),
    ParallelismRules.layoutProblem(p, r.instanceType),
  ].filter((x): x is SizingProblem => x !== undefined);
  problems.push(...structural);

  const accelerator = r.instanceType.accelerator;
  if (!fit.weightsFit) {
    const fixes = withFixes ? weightFixes(r, p, maxTp, validTp, layoutOf) : [];
    problems.push({
      field: 'tensorParallel',
      value: String(p.tensorParallel),
      message:
        `'tensorParallel' (${p.tensorParallel}) leaves too little memory for the weights: ${model.name} needs ` +
        `${formatGbAndGib(r.weights.totalBytes)} of ${weightsText(r.weights)}, ${formatGib(fit.weightBytesPerRank)} per accelerator at ${layoutText(p)}; ` +
        `one ${accelerator.name} offers ${formatGibAndGb(fit.memory.usableBytes)} at gpuMemoryUtilization ${fit.memory.gpuMemoryUtilization}, ` +
        `${formatGib(fit.memory.availableBytes)} after a ${formatGib(fit.memory.reserveBytes)} activation and runtime reserve` +
        (fixes.length > 0 ? `; use ${joinOr(fixes)}` : ''),
    });
  } else if (!fit.sequenceFits) {
    const needed = sequenceBytesPerRank(r, p, r.maxContext);
    const fixes = withFixes ? contextFixes(r, p, fit, maxTp, validTp, layoutOf) : [];
    problems.push({
      field: 'maxContext',
      value: String(r.maxContext),
      message:
        `'maxContext' (${r.maxContext}) needs ${formatGib(needed)} of ${r.kvCache.precision.name} KV cache per accelerator for one sequence, ` +
        `but one ${accelerator.name} has ${formatGib(fit.kvCacheBytesPerRank)} left after ${formatGib(fit.weightBytesPerRank)} of weights ` +
        `and a ${formatGib(fit.memory.reserveBytes)} reserve at gpuMemoryUtilization ${fit.memory.gpuMemoryUtilization}` +
        (fixes.length > 0 ? `; use ${joinOr(fixes)}` : ''),
    });
  }
  return problems;
}

/** Larger valid TP sizes that run, smallest first. */
function largerTensorParallel(r: Resolved, p: Parallelism, validTp: number[], layoutOf: (tp: number) => Parallelism): number | undefined {
  return validTp.filter(tp => tp > p.tensorParallel).find(tp => {
    const candidate = layoutOf(tp);
    return ParallelismRules.layoutProblem(candidate, r.instanceType) === undefined
      && ParallelismRules.expertParallelProblem(r.model, candidate) === undefined
      && runs(memoryFit(r, candidate, r.instanceType.accelerator));
  });
}

function weightFixes(r: Resolved, p: Parallelism, maxTp: number, validTp: number[], layoutOf: (tp: number) => Parallelism): string[] {
  const fixes: string[] = [];
  const accelerator = r.instanceType.accelerator;
  const tp = largerTensorParallel(r, p, validTp, layoutOf);
  if (tp !== undefined) {
    fixes.push(`tensorParallel >= ${tp}`);
  } else if (p.tensorParallel <= maxTp) {
    // Beyond one node: pipeline stages across nodes at the largest TP.
    const top = validTp[validTp.length - 1] ?? 1;
    for (let pp = p.pipelineParallel + 1; pp <= 16; pp++) {
      const candidate = Parallelism.of({ ...parallelismProps(p), tensorParallel: top, pipelineParallel: pp });
      if (ParallelismRules.layoutProblem(candidate, r.instanceType) === undefined && runs(memoryFit(r, candidate, accelerator))) {
        fixes.push(`tensorParallel ${top} with pipelineParallel ${pp} (${candidate.acceleratorsPerReplica / r.instanceType.acceleratorCount} nodes per replica)`);
        break;
      }
    }
  }
  const narrower = [Precision.FP8, Precision.FP4].find(precision =>
    precision.bytesPerElement < r.weights.expertPrecision.bytesPerElement
    && runs(memoryFit(r, p, accelerator, WeightFootprint.of({ model: r.model, weightPrecision: precision }))));
  if (narrower) {
    fixes.push(`${narrower.name} weights`);
  }
  const bigger = largerAccelerator(r, p);
  if (bigger) {
    fixes.push(bigger);
  }
  return fixes;
}

function contextFixes(
  r: Resolved, p: Parallelism, fit: MemoryFit, maxTp: number, validTp: number[], layoutOf: (tp: number) => Parallelism,
): string[] {
  const fixes: string[] = [];
  const accelerator = r.instanceType.accelerator;
  // The longest context whose sequence fits what is left, in whole blocks.
  let lo = 0;
  let hi = r.maxContext;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (sequenceBytesPerRank(r, p, mid) <= fit.kvCacheBytesPerRank) lo = mid; else hi = mid - 1;
  }
  const longest = Math.floor(lo / r.kvBlockSize) * r.kvBlockSize;
  if (longest > 0) {
    fixes.push(`maxContext <= ${longest}`);
  }
  if (r.kvCache.precision.bytesPerElement > Precision.FP8.bytesPerElement) {
    const fp8 = KvCacheFootprint.of({ model: r.model, precision: Precision.FP8 });
    if (runs(memoryFit({ ...r, kvCache: fp8 }, p, accelerator))) {
      fixes.push('fp8 KV cache');
    }
  }
  const tp = largerTensorParallel(r, p, validTp, layoutOf);
  if (tp !== undefined && tp <= maxTp) {
    fixes.push(`tensorParallel >= ${tp}`);
  }
  if (r.gpuMemoryUtilization < 0.95 && runs(memoryFit(r, p, accelerator, undefined, undefined, 0.95))) {
    fixes.push('gpuMemoryUtilization 0.95');
  }
  const bigger = largerAccelerator(r, p);
  if (bigger) {
    fixes.push(bigger);
  }
  return fixes;
}

/** 'a B200 (p6-b200.48xlarge)': the smallest catalogued device with more memory that runs the layout. */
function largerAccelerator(r: Resolved, p: Parallelism): string | undefined {
  const current = r.instanceType.accelerator;
  const bigger = Accelerator.all()
    .filter(a => a.memoryGib > current.memoryGib && a.vendor === current.vendor)
    .sort((a, b) => a.memoryGib - b.memoryGib)
    .find(a => runs(memoryFit(r, p, a)));
  if (!bigger) {
    return undefined;
  }
  const types = AcceleratedInstanceType.all()
    .filter(t => t.accelerator === bigger && t.acceleratorCount >= p.acceleratorsPerReplica)
    .map(t => t.name);
  return `${withArticle(bigger.name)}${types.length > 0 ? ` (${joinOr(types)})` : ''}`;
}

function parallelismProps(p: Parallelism) {
  return {
    tensorParallel: p.tensorParallel,
    pipelineParallel: p.pipelineParallel,
    dataParallel: p.dataParallel,
    expertParallel: p.expertParallel,
    redundantExperts: p.redundantExperts,
  };
}

function collectNotes(r: Resolved, p: Parallelism): string[] {
  const notes: string[] = [];
  const model = r.model;
  const accelerator = r.instanceType.accelerator;
  if (model.attentionKind !== AttentionKind.MLA && p.tensorParallel > model.kvHeads) {
    notes.push(`tensorParallel ${p.tensorParallel} exceeds the ${model.kvHeads} KV heads of ${model.name}: each KV head is stored on ${p.tensorParallel / model.kvHeads} ranks`);
  }
  if (model.attentionKind === AttentionKind.MLA && p.tensorParallel > 1) {
    notes.push(`MLA keeps its latent KV cache whole on each of the ${p.tensorParallel} tensor-parallel ranks (not split); data-parallel attention with expertParallel avoids the copies`);
  }
  for (const precision of new Set([r.weights.expertPrecision, r.weights.densePrecision])) {
    if (!accelerator.supportsNativePrecision(precision)) {
      notes.push(`${accelerator.name} has no native ${precision.name} math: ${precision.name} weights are widened and multiplied at bf16 (weight-only kernels); memory is still ${precision.name}`);
    }
  }
  if (r.weights.expertPrecision.bytesPerElement > model.nativePrecision.bytesPerElement) {
    notes.push(`${r.weights.expertPrecision.name} weights are wider than the ${model.nativePrecision.name} checkpoint of ${model.name}: they are the dequantized checkpoint, no more accurate`);
  }
  if (model.isMoe && !p.expertParallel && p.tensorParallel > 1) {
    notes.push(`each of the ${model.expertsTotal} experts is split ${p.tensorParallel} ways by tensor parallelism; expertParallel places whole experts on ranks instead`);
  }
  if (r.kvCache.slidingWindow !== undefined) {
    notes.push(`${model.slidingWindowLayers} of ${model.layers} layers keep only a ${r.kvCache.slidingWindow}-token window of KV cache per sequence`);
  }
  return notes;
}

/** The KV cache precision of `props`, under either name; both given and different is an error. */
function kvCachePrecisionOf(props: ServingPlanProps): Precision {
  if (props.kvCachePrecision !== undefined && props.kvPrecision !== undefined && props.kvCachePrecision !== props.kvPrecision) {
    throw new Error(`'kvPrecision' (${props.kvPrecision.name}) and 'kvCachePrecision' (${props.kvCachePrecision.name}) name the same setting and disagree; `
      + "pass only 'kvCachePrecision'");
  }
  return props.kvCachePrecision ?? props.kvPrecision ?? Precision.BF16;
}
