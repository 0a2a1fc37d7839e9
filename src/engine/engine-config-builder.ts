/**
 * Builds the engine's JSON configuration (engine/schema/engine-config.schema.json) from catalog and
 * sizing objects: the one place where a ModelArchitecture, an AcceleratedInstanceType, precisions
 * and a ServingPlan become the resolved numbers the C++ engine reads. The CLI (`disagg simulate`,
 * `disagg plan --simulate`), the router's ConfigMap and `DisaggregatedInference`'s `sizeFor` all go
 * through here, so the engine never keeps a hardware table of its own.
 *
 * Internal: not exported from src/index.ts.
 */
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../catalog';
import { ParallelismRules, ServingPlan } from '../sizing';
import type {
  EngineCostConfig, EngineEfficiencyConfig, KvTierConfig, PlannerOptionConfig, PlannerSectionConfig, SimulationConfig,
  SimulationPolicyConfig, SimulationPoolConfig, SloConfig, WorkloadConfig,
} from './engine-config';
import { vllmEfficiency } from './vllm-step-model';
import { resolveKvBlockSize } from '../sizing/private/kv-block-size';

/**
 * vLLM's default `--max-num-seqs` for the OpenAI server (vllm/engine/arg_utils.py), the scheduler's
 * sequence limit per step; KV capacity limits further on its own.
 */
export const VLLM_DEFAULT_MAX_NUM_SEQS = 256;

/**
 * Requests a sizing search simulates per probe at least (more when the probe's window of arrivals
 * holds more): `sizeFor`'s `simulatedRequests` default and `disagg plan --simulate`'s `--requests`
 * default, so that the construct and the CLI size alike.
 */
export const SIZING_SIMULATED_REQUESTS = 400;

/** The engine's step token budget when none is given (`maxBatchedTokens`, engine-config.schema.json). */
const ENGINE_DEFAULT_MAX_BATCHED_TOKENS = 8192;

/**
 * What every pool of a deployment shares: the model, its precisions, the context length, and the
 * vLLM engine arguments that size and schedule each replica.
 */
export interface EngineModelInputs {
  readonly model: ModelArchitecture;
  /** @default - the checkpoint's own precision */
  readonly weightPrecision?: Precision;
  /** @default Precision.BF16 */
  readonly kvCachePrecision?: Precision;
  /** Longest sequence (vLLM --max-model-len). */
  readonly maxContext: number;
  /**
   * Fraction of accelerator memory vLLM may use (vLLM --gpu-memory-utilization): the KV capacity of
   * each replica is what is left of it after weights and reserves (src/sizing/memory-budget.ts).
   * @default 0.9
   */
  readonly gpuMemoryUtilization?: number;
  /**
   * Tokens per KV block (vLLM --block-size): the simulator's block size and prefix-cache granularity
   * (`router.kvBlockSize`), and the rounding of each sequence's KV in the sizing. A size vLLM would
   * not run (16 for an MLA model on Hopper or Blackwell) is refused.
   * @default - what vLLM runs: 64 for MLA models on H100/H200/B200/GB200 (src/sizing/private/kv-block-size.ts), else 16
   */
  readonly kvBlockSize?: number;
  /**
   * Sequences one step of a replica may hold (vLLM --max-num-seqs): each pool's
   * `maxConcurrencyPerReplica`. When given, the sizing's activation estimate uses it too (vLLM
   * profiles its sampler at this many sequences), which moves the KV capacity a little.
   * @default - 256 (VLLM_DEFAULT_MAX_NUM_SEQS) in the simulator; the device's vLLM default in the sizing
   */
  readonly maxNumSeqs?: number;
  /**
   * Token budget of one step (vLLM --max-num-batched-tokens): each pool's `maxBatchedTokens` (the
   * chunked-prefill chunk). When given, the sizing's activation estimate uses it too (vLLM profiles a
   * forward pass of this many tokens).
   * @default - 8192 in the simulator; the device's vLLM default in the sizing
   */
  readonly maxNumBatchedTokens?: number;
  /**
   * vLLM plans step k+1 while step k runs (vLLM --async-scheduling, on by default since 0.14): each
   * pool's `asyncScheduling`.
   * @default true
   */
  readonly asyncScheduling?: boolean;
}

/**
 * The ServingPlan of one pool at one tensor-parallel size; throws with the sizing problems when it does not fit.
 * With `expertParallel` (> 1, a multiple of `tensorParallel`), the replica is one expert-parallel group of
 * `expertParallel / tensorParallel` data-parallel attention ranks (vLLM --enable-expert-parallel).
 * With `pipelineParallel` (> 1), a replica is that many stages of `tensorParallel` ranks.
 */
export function planFor(inputs: EngineModelInputs, instanceType: AcceleratedInstanceType, tensorParallel: number,
  expertParallel?: number, pipelineParallel?: number): ServingPlan {
  const { plan, problems } = poolPlanOf(inputs, instanceType, tensorParallel, expertParallel, pipelineParallel);
  if (problems.length > 0) {
    throw new Error(`${inputs.model.name} does not fit ${instanceType.name}:\n` + problems.map(r => `- ${r}`).join('\n'));
  }
  return plan!;
}

/**
 * planFor() without the throw: the plan (undefined when the layout itself is malformed) and every
 * problem, each message starting with the quoted prop it is about ('tensorParallel', 'expertParallel').
 */
function poolPlanOf(inputs: EngineModelInputs, instanceType: AcceleratedInstanceType, tensorParallel: number,
  expertParallel?: number, pipelineParallel?: number): { plan?: ServingPlan; problems: string[] } {
  const ep = expertParallel !== undefined && expertParallel > 1;
  if (ep && expertParallel % tensorParallel !== 0) {
    return { problems: [`'expertParallel' (${expertParallel}) must be a multiple of the tensor-parallel size ${tensorParallel}: the expert-parallel group is tensorParallel x dataParallel ranks`] };
  }
  if (ep && (pipelineParallel ?? 1) > 1) {
    return { problems: [`'pipelineParallel' (${pipelineParallel}) does not combine with expert parallelism: vLLM's wide-EP replica is one stage of tensorParallel x dataParallel ranks; use pipelineParallel 1`] };
  }
  const plan = ServingPlan.create({
    ...(ep ? { expertParallel: true, dataParallel: expertParallel / tensorParallel } : {}),
    model: inputs.model,
    instanceType,
    maxContext: inputs.maxContext,
    weightPrecision: inputs.weightPrecision,
    kvCachePrecision: inputs.kvCachePrecision,
    tensorParallel,
    ...(pipelineParallel !== undefined && pipelineParallel > 1 ? { pipelineParallel } : {}),
    gpuMemoryUtilization: inputs.gpuMemoryUtilization,
    kvBlockSize: inputs.kvBlockSize,
    maxNumSeqs: inputs.maxNumSeqs,
    maxNumBatchedTokens: inputs.maxNumBatchedTokens,
  });
  // The shape names an expert-parallel size, not data-parallel ranks: say the problem in its terms.
  const problems = !ep ? plan.reasons : plan.reasons.map(m => m
    .replace(/^'dataParallel' \((\d+)\)/, `'expertParallel' (${expertParallel})`)
    .replace(/use tensorParallel x dataParallel of/, 'use an expert-parallel size of'));
  return { plan, problems };
}

/**
 * The cost-model sections (`model`, `hardware`, `parallel`) of one replica as `plan` resolved it.
 * @param weightPrecision the weights' precision, which picks the accelerator's peak FLOP/s
 */
export function costSections(plan: ServingPlan, weightPrecision?: Precision): Required<Pick<EngineCostConfig, 'model' | 'hardware' | 'parallel'>> & Pick<EngineCostConfig, 'efficiency'> {
  const p = plan.parallelism;
  const type = plan.instanceType;
  const model = plan.model;
  const layout = ParallelismRules.layout(p, type);
  // A pod's share of the node's network (EFA, or TCP without it): accelerators per pod / per node.
  const nodeShare = layout.acceleratorsPerPod / type.acceleratorCount;
  // Expert parallelism: the replica is the whole EP group (disagg/cost_model.h); the engine charges the
  // dispatch and combine with the defaults src/sizing/roofline.ts states.
  const ep = p.expertParallel && p.expertParallelSize > 1;
  const spansNodes = p.tensorParallel * p.pipelineParallel > ParallelismRules.maxTensorParallel(type);
  const r = plan.roofline;
  return {
    model: {
      weightBytesPerRank: Math.round(plan.weightBytesPerRank),
      kvBytesPerToken: plan.kvCache.bytesPerToken,
      kvBytesPerTokenPerRank: plan.kvCache.bytesPerToken * plan.kvCache.rankShare(p.tensorParallel, p.pipelineParallel),
      activeParameters: model.parametersActive,
      layers: model.layers,
      hiddenSize: model.hiddenSize,
      attentionWidth: model.attentionHeads * model.headDim,
      // MoE: a step reads only the experts its tokens select (disagg/cost_model.h).
      ...(model.isMoe ? {
        expertWeightBytesPerRank: Math.min(Math.round(plan.weights.expertBytesPerRank(p)), Math.round(plan.weightBytesPerRank)),
        experts: model.expertsTotal,
        expertsPerToken: model.expertsActive,
        moeLayers: model.moeLayers,
        routedActiveParameters: Math.max(0, model.parametersActive - model.denseParameters),
      } : {}),
    },
    hardware: {
      peakFlopsPerSecond: type.accelerator.peakTflops(weightPrecision ?? plan.weights.densePrecision) * 1e12,
      // Attention runs at its own rate (FP8 only for an FP8 KV cache under FlashAttention 3): the roofline's rule.
      attentionFlopsPerSecond: type.accelerator.peakTflops(plan.roofline.attentionComputePrecision) * 1e12,
      hbmBytesPerSecond: type.accelerator.hbmBandwidthGBps * 1e9,
      interconnectBytesPerSecond: type.accelerator.interconnectGBps * 1e9,
      // Gbit/s -> bytes/s.
      fabricBytesPerSecond: (type.networkBandwidthGbps * nodeShare * 1e9) / 8,
      // Expert parallelism's all-to-all and pipeline stages on other nodes cross the scale-out network.
      ...(ep || spansNodes ? {
        scaleUpDomain: ParallelismRules.maxTensorParallel(type),
        // One accelerator's share of the node's EFA (Gbit/s -> bytes/s).
        scaleOutBytesPerSecond: (type.networkBandwidthGbps * 1e9) / 8 / type.acceleratorCount,
      } : {}),
    },
    parallel: {
      tensorParallel: p.tensorParallel,
      ...(p.pipelineParallel > 1 ? { pipelineParallel: p.pipelineParallel } : {}),
      ...(ep ? { dataParallel: p.dataParallel, expertParallel: p.expertParallelSize, redundantExperts: p.redundantExperts } : {}),
    },
    ...(ep ? {
      efficiency: {
        allToAll: r.allToAllEfficiency,
        expertImbalance: r.expertImbalance,
        allToAllOverlap: r.allToAllOverlap,
      },
    } : {}),
  };
}

/** vLLM's scheduler limits of one replica, as poolTemplate() writes them. */
export type SchedulerLimits = Pick<EngineModelInputs, 'maxNumSeqs' | 'maxNumBatchedTokens' | 'asyncScheduling'>;

/**
 * A pool template (no name, role or replicas): the cost model, KV capacity and scheduler limits of
 * one replica. `limits` default to vLLM's (256 sequences; the engine's 8192-token step budget).
 */
export function poolTemplate(plan: ServingPlan, weightPrecision?: Precision, efficiency?: EngineEfficiencyConfig,
  limits?: SchedulerLimits): PlannerOptionConfig {
  const sections = costSections(plan, weightPrecision);
  const p = plan.parallelism;
  // vLLM's --max-num-seqs and --max-num-batched-tokens hold per data-parallel rank (each runs its own
  // scheduler); an expert-parallel replica has dataParallel of them.
  const dp = p.expertParallel ? p.dataParallel : 1;
  const batched = limits?.maxNumBatchedTokens ?? (dp > 1 ? ENGINE_DEFAULT_MAX_BATCHED_TOKENS : undefined);
  return {
    label: `${plan.instanceType.name} ${p.expertParallel && p.expertParallelSize > 1 ? `ep${p.expertParallelSize}` : `tp${p.tensorParallel}`}${p.pipelineParallel > 1 ? `pp${p.pipelineParallel}` : ''}`,
    tensorParallel: plan.parallelism.tensorParallel,
    acceleratorsPerReplica: plan.parallelism.acceleratorsPerReplica,
    weightBytesPerRank: sections.model.weightBytesPerRank,
    model: sections.model,
    hardware: sections.hardware,
    parallel: sections.parallel,
    efficiency: { ...vllmEfficiency(plan.instanceType.accelerator, efficiency), ...sections.efficiency },
    kvTokensPerReplica: plan.kvTokens,
    maxConcurrencyPerReplica: (limits?.maxNumSeqs ?? VLLM_DEFAULT_MAX_NUM_SEQS) * dp,
    ...(batched !== undefined ? { maxBatchedTokens: batched * dp } : {}),
    ...(limits?.asyncScheduling === false ? { asyncScheduling: false } : {}),
  };
}

/** Replicas and tensor-parallel size of one pool. */
export interface PoolShape {
  readonly replicas: number;
  readonly tensorParallel: number;
  /**
   * Expert-parallel ranks of one replica (a multiple of tensorParallel; the rest are data-parallel
   * attention ranks). MoE models only.
   * @default - no expert parallelism
   */
  readonly expertParallel?: number;
  /**
   * Pipeline stages of one replica, each of tensorParallel ranks (vLLM --pipeline-parallel-size); stages
   * beyond one node talk over the scale-out network. Dense layouts only.
   * @default 1
   */
  readonly pipelineParallel?: number;
  /** @default - the deployment's instance type */
  readonly instanceType?: AcceleratedInstanceType;
}

/**
 * Sizes of the KV tiers below HBM, in GiB (host and disk per replica, remote in all), with optional
 * bandwidths in GB/s (10^9 bytes/s) that override the assumed defaults of kvTierConfigs().
 */
export interface KvTierSizes {
  /**
   * CPU memory per replica, GiB. vLLM's OffloadingConnector with `cpu_bytes_to_use` B is this tier
   * with hostGib = B / 2^30: its pool is per replica, all tensor-parallel ranks together (vLLM
   * divides it by the KV bytes of a block over the whole world size).
   * @default - no host tier
   */
  readonly hostGib?: number;
  readonly hostGBps?: number;
  readonly diskGib?: number;
  readonly diskGBps?: number;
  readonly remoteGib?: number;
  readonly remoteGBps?: number;
}

/**
 * Assumed link speeds of the lower tiers when the caller gives none. The catalog has no measured
 * host-link or instance-store throughput per instance type, so these are stated assumptions.
 * Host: each accelerator's own PCIe Gen5 x16 link, 63 GB/s per direction nominal (32 GT/s x 16 lanes,
 * 128b/130b encoding), of which ~80% is reachable by DMA copies.
 */
export const KV_TIER_ASSUMPTIONS = {
  hostBytesPerSecondPerAccelerator: 50e9,
  hostLatencySeconds: 10e-6,
  /** One instance-store NVMe drive: ~2 GB/s read, ~1 GB/s write sustained (assumed). */
  diskReadBytesPerSecondPerDrive: 2e9,
  diskWriteBytesPerSecondPerDrive: 1e9,
  diskLatencySeconds: 100e-6,
  /** A replica's connection to the shared store (kvstore or Redis over TCP): 100 Gbit/s (assumed). */
  remoteBytesPerSecond: 12.5e9,
  remoteLatencySeconds: 500e-6,
} as const;

const GIB = 1024 ** 3;

/**
 * The `kvTiers` of one pool of `plan`'s shape. Host and disk links scale with the replica's share of
 * the instance (its accelerators' PCIe links, its share of the instance-store drives); the remote
 * link is capped by the replica's share of the instance's network.
 * @throws when a size or bandwidth is not positive, or a disk tier is asked of an instance without NVMe
 */
export function kvTierConfigs(plan: ServingPlan, sizes: KvTierSizes): KvTierConfig[] {
  const a = KV_TIER_ASSUMPTIONS;
  const type = plan.instanceType;
  const accelerators = ParallelismRules.layout(plan.parallelism, type).acceleratorsPerPod;
  const check = (field: string, v: number | undefined): void => {
    if (v !== undefined && !(Number.isFinite(v) && v > 0)) throw new Error(`'${field}' (${v}) must be a positive number`);
  };
  for (const [field, v] of Object.entries(sizes)) check(field, v as number | undefined);
  const tiers: KvTierConfig[] = [];
  if (sizes.hostGib !== undefined) {
    const bw = sizes.hostGBps !== undefined ? sizes.hostGBps * 1e9 : a.hostBytesPerSecondPerAccelerator * accelerators;
    tiers.push({ tier: 'host', capacityBytes: Math.round(sizes.hostGib * GIB), readBytesPerSecond: bw, writeBytesPerSecond: bw, latencySeconds: a.hostLatencySeconds });
  }
  if (sizes.diskGib !== undefined) {
    if (type.localNvmeCount === 0) {
      throw new Error(`'diskGib' (${sizes.diskGib}): ${type.name} has no instance-store NVMe for a disk tier; use an instance type with local NVMe or drop the disk tier`);
    }
    const drives = Math.max(1, Math.floor((type.localNvmeCount * accelerators) / type.acceleratorCount));
    const capacityGib = (drives * type.localNvmeGbEach * 1e9) / GIB;
    if (sizes.diskGib > capacityGib) {
      throw new Error(`'diskGib' (${sizes.diskGib}) exceeds the ${capacityGib.toFixed(0)} GiB of instance-store NVMe a replica of ${type.name} gets (${drives} drive(s)); use at most that`);
    }
    const read = sizes.diskGBps !== undefined ? sizes.diskGBps * 1e9 : a.diskReadBytesPerSecondPerDrive * drives;
    const write = sizes.diskGBps !== undefined ? sizes.diskGBps * 1e9 / 2 : a.diskWriteBytesPerSecondPerDrive * drives;
    tiers.push({ tier: 'disk', capacityBytes: Math.round(sizes.diskGib * GIB), readBytesPerSecond: read, writeBytesPerSecond: write, latencySeconds: a.diskLatencySeconds });
  }
  if (sizes.remoteGib !== undefined) {
    const share = (type.networkBandwidthGbps * 1e9 / 8) * accelerators / type.acceleratorCount;
    const bw = sizes.remoteGBps !== undefined ? sizes.remoteGBps * 1e9 : Math.min(a.remoteBytesPerSecond, share);
    tiers.push({ tier: 'remote', capacityBytes: Math.round(sizes.remoteGib * GIB), readBytesPerSecond: bw, writeBytesPerSecond: bw, latencySeconds: a.remoteLatencySeconds });
  }
  return tiers;
}

/** One stage of load: `ratePerSecond` for `durationSeconds`. */
export interface LoadStage {
  readonly ratePerSecond: number;
  readonly durationSeconds: number;
}

/**
 * The traffic of inference-perf's `shared_prefix` data generator at constant-rate stages (what the
 * runs in ../shared/validation measured): `systemPrompts` groups, each with a system prompt of
 * `systemPromptTokens` and `usersPerSystemPrompt` users whose fixed question of `questionTokens` is
 * sent after it, all users taken in turn (inference-perf cycles its shuffled prompts), evenly spaced
 * arrivals, fixed output length (`ignore_eos`).
 */
export interface SharedPrefixWorkloadInputs {
  /** inference-perf `num_groups` (the runs' `num_unique_system_prompts`). */
  readonly systemPrompts: number;
  /**
   * inference-perf `num_prompts_per_group` (the runs' `num_users_per_system_prompt`): users per
   * system prompt, each repeating one question. 0: every request's question is fresh text.
   */
  readonly usersPerSystemPrompt: number;
  /** inference-perf `system_prompt_len`. */
  readonly systemPromptTokens: number;
  /** inference-perf `question_len`. */
  readonly questionTokens: number;
  /** inference-perf `output_len` (sent with `ignore_eos`, so every answer has this length). */
  readonly outputTokens: number;
  /** The load stages, run back to back (inference-perf `load.stages`). */
  readonly stages: readonly LoadStage[];
  /**
   * How prompts reach the server: `completions` sends exactly these tokens (inference-perf's
   * /v1/completions); `chat` adds the chat template's role headers.
   * @default 'completions'
   */
  readonly api?: 'completions' | 'chat';
  /** A request limit (the stages alone bound the run without it). @default - every stage's requests */
  readonly requests?: number;
}

/** The workload section of inference-perf's `shared_prefix` traffic; see SharedPrefixWorkloadInputs. */
export function sharedPrefixWorkload(inputs: SharedPrefixWorkloadInputs): WorkloadConfig {
  return {
    kind: 'single',
    ...(inputs.requests !== undefined ? { requests: inputs.requests } : {}),
    arrival: { process: 'constant', stages: inputs.stages.map(s => ({ ratePerSecond: s.ratePerSecond, durationSeconds: s.durationSeconds })) },
    inputTokens: { distribution: 'fixed', mean: inputs.questionTokens },
    outputTokens: { distribution: 'fixed', mean: inputs.outputTokens },
    tenants: {
      count: inputs.systemPrompts,
      systemPromptTokens: inputs.systemPromptTokens,
      popularity: 'equal',
      ...(inputs.usersPerSystemPrompt > 0 ? { usersPerTenant: inputs.usersPerSystemPrompt } : {}),
    },
    api: inputs.api ?? 'completions',
  };
}

/** Inputs of simulationConfig(). Exactly one of `aggregated` and `prefill` + `decode`. */
export interface SimulationInputs extends EngineModelInputs {
  readonly instanceType: AcceleratedInstanceType;
  readonly aggregated?: PoolShape;
  readonly prefill?: PoolShape;
  readonly decode?: PoolShape;
  readonly workload: WorkloadConfig;
  readonly slo?: SloConfig;
  readonly policy?: SimulationPolicyConfig;
  readonly efficiency?: EngineEfficiencyConfig;
  /** KV tiers below HBM on every replica that prefills (aggregated and prefill pools). @default - none */
  readonly kvTiers?: KvTierSizes;
  /** @default 1 */
  readonly seed?: number;
}

/**
 * `inputs` with the block size every pool and the router use: the given one, or what vLLM runs on
 * those instance types (the constructs' rule, src/sizing/private/kv-block-size.ts); a given size vLLM
 * would replace for an MLA model is refused, naming `--block-size` and the fix.
 */
function withKvBlockSize<T extends EngineModelInputs>(inputs: T, instanceTypes: AcceleratedInstanceType[]): T & { readonly kvBlockSize: number } {
  return { ...inputs, kvBlockSize: resolveKvBlockSize('', inputs.model, inputs.kvBlockSize, instanceTypes, '--block-size') };
}

function roleText(role: 'both' | 'prefill' | 'decode'): string {
  return role === 'both' ? 'the deployment' : `the ${role} pool`;
}

/** A complete `disagg-engine simulate` configuration. Throws when a pool does not fit its hardware. */
export function simulationConfig(given: SimulationInputs): SimulationConfig {
  const inputs = withKvBlockSize(given, [given.instanceType,
    ...[given.aggregated, given.prefill, given.decode].flatMap(s => (s?.instanceType ? [s.instanceType] : []))]);
  const shapes: Array<[string, 'both' | 'prefill' | 'decode', PoolShape]> = [];
  if (inputs.aggregated) {
    if (inputs.prefill || inputs.decode) {
      throw new Error("set either 'aggregated' or 'prefill' and 'decode', not both");
    }
    shapes.push(['workers', 'both', inputs.aggregated]);
  } else {
    if (!inputs.prefill || !inputs.decode) {
      throw new Error("a disaggregated deployment needs both 'prefill' and 'decode' pools; or set 'aggregated'");
    }
    shapes.push(['prefill', 'prefill', inputs.prefill], ['decode', 'decode', inputs.decode]);
  }
  // Every pool's problems at once, each naming its pool's prop ('prefill.tensorParallel'), as the
  // constructs do: a user who fixes one pool should not meet the other's problem on the next run.
  const planned = shapes.map(([name, role, shape]) => {
    const type = shape.instanceType ?? inputs.instanceType;
    const { plan, problems } = poolPlanOf(inputs, type, shape.tensorParallel, shape.expertParallel, shape.pipelineParallel);
    const prefix = role === 'both' ? '' : `${name}.`;
    return { name, role, shape, plan, type, problems: problems.map(m => m.replace(/^'([A-Za-z]+)'/, `'${prefix}$1'`)) };
  });
  const failing = planned.filter(p => p.problems.length > 0);
  if (failing.length > 0) {
    throw new Error(failing.map(p => `${roleText(p.role)} cannot run ${inputs.model.name} on ${p.type.name}:\n`
      + p.problems.map(m => `- ${m}`).join('\n')).join('\n'));
  }
  const pools: SimulationPoolConfig[] = [];
  let top: ReturnType<typeof costSections> | undefined;
  for (const { name, role, shape, plan: fitted } of planned) {
    const plan = fitted!;
    const full = poolTemplate(plan, inputs.weightPrecision, inputs.efficiency, inputs);
    const { label: _label, acceleratorsPerReplica: _acc, role: _role, pricePerAcceleratorHour: _price, ...template } = full;
    top = top ?? costSections(plan, inputs.weightPrecision);
    // Decode replicas never load prompt KV from the tiers (it arrives from a prefill replica).
    const tiers = inputs.kvTiers && role !== 'decode' ? kvTierConfigs(plan, inputs.kvTiers) : [];
    pools.push({ name, role, replicas: shape.replicas, ...template, ...(tiers.length > 0 ? { kvTiers: tiers } : {}) });
  }
  return {
    ...top!,
    efficiency: vllmEfficiency(inputs.instanceType.accelerator, inputs.efficiency),
    router: { servedModelName: inputs.model.name, kvBlockSize: inputs.kvBlockSize },
    policy: inputs.policy ?? { name: 'kv-aware' },
    pools,
    workload: inputs.workload,
    ...(inputs.slo ? { slo: inputs.slo } : {}),
    seed: inputs.seed ?? 1,
  };
}

/** Inputs of plannerConfig(). */
export interface PlannerInputs extends EngineModelInputs {
  /** Instance type of prefill replicas (and aggregated ones). */
  readonly instanceType: AcceleratedInstanceType;
  /** @default - instanceType */
  readonly decodeInstanceType?: AcceleratedInstanceType;
  /** Tensor-parallel sizes to consider. @default - every valid size that fits one node */
  readonly tensorParallelSizes?: number[];
  /**
   * Expert-parallel group sizes to consider as well (MoE models; TP 1 with one data-parallel attention
   * rank per accelerator; `disagg plan --simulate` passes ParallelismRules.wideExpertParallelSizes).
   * @default - none: tensor-parallel options only (what DisaggregatedInference.sizeFor deploys)
   */
  readonly expertParallelSizes?: number[];
  readonly workload: WorkloadConfig;
  readonly slo: SloConfig;
  readonly policy?: SimulationPolicyConfig;
  readonly efficiency?: EngineEfficiencyConfig;
  /** The `planner` section without its options (filled from the sizes that fit). */
  readonly planner: Omit<PlannerSectionConfig, 'tensorParallelOptions'>;
  /** Price of one instance-hour of each type; per accelerator = price / accelerators. @default - 1 per accelerator-hour */
  readonly pricePerInstanceHour?: number;
  /** @default - pricePerInstanceHour */
  readonly decodePricePerInstanceHour?: number;
  /** KV tiers below HBM on every option (decode replicas never load from them). @default - none */
  readonly kvTiers?: KvTierSizes;
  /** @default 1 */
  readonly seed?: number;
}

/**
 * A complete `disagg-engine plan` configuration: one planner option per (instance type,
 * tensor-parallel size) that fits. Throws when no size fits.
 */
export function plannerConfig(given: PlannerInputs): SimulationConfig {
  const inputs = withKvBlockSize(given, [given.instanceType, ...(given.decodeInstanceType ? [given.decodeInstanceType] : [])]);
  const sides: Array<[AcceleratedInstanceType, 'any' | 'prefill' | 'decode', number | undefined]> = [];
  const decodeType = inputs.decodeInstanceType ?? inputs.instanceType;
  const samePrice = (inputs.decodePricePerInstanceHour ?? inputs.pricePerInstanceHour) === inputs.pricePerInstanceHour;
  if (decodeType === inputs.instanceType && samePrice) {
    sides.push([inputs.instanceType, 'any', inputs.pricePerInstanceHour]);
  } else {
    sides.push([inputs.instanceType, 'prefill', inputs.pricePerInstanceHour]);
    sides.push([decodeType, 'decode', inputs.decodePricePerInstanceHour ?? inputs.pricePerInstanceHour]);
  }
  const options: PlannerOptionConfig[] = [];
  const problems: string[] = [];
  let top: ReturnType<typeof costSections> | undefined;
  for (const [type, role, price] of sides) {
    const sizes = inputs.tensorParallelSizes ?? ParallelismRules.validTensorParallelSizes(inputs.model, type.acceleratorCount);
    const epSizes = inputs.expertParallelSizes ?? [];
    const layouts: Array<[number, number | undefined]> = [...sizes.map((tp): [number, undefined] => [tp, undefined]),
      ...epSizes.map((ep): [number, number] => [1, ep])];
    for (const [tp, ep] of layouts) {
      let plan: ServingPlan;
      try {
        plan = planFor(inputs, type, tp, ep);
      } catch (e) {
        problems.push(`${ep !== undefined ? `ep${ep}` : `tp${tp}`} on ${type.name}: ${(e as Error).message.split('\n').slice(1).join(' ')}`);
        continue;
      }
      top = top ?? costSections(plan, inputs.weightPrecision);
      const tiers = inputs.kvTiers ? kvTierConfigs(plan, inputs.kvTiers) : [];
      options.push({
        ...poolTemplate(plan, inputs.weightPrecision, inputs.efficiency, inputs),
        ...(tiers.length > 0 ? { kvTiers: tiers } : {}),
        role,
        ...(price !== undefined ? { pricePerAcceleratorHour: price / type.acceleratorCount } : {}),
      });
    }
  }
  if (options.length === 0 || !top) {
    throw new Error(`no tensor-parallel size of ${inputs.model.name} fits: ${problems.join('; ')}`);
  }
  return {
    ...top,
    ...(inputs.efficiency ? { efficiency: inputs.efficiency } : {}),
    router: { servedModelName: inputs.model.name, kvBlockSize: inputs.kvBlockSize },
    policy: inputs.policy ?? { name: 'kv-aware' },
    workload: inputs.workload,
    slo: inputs.slo,
    seed: inputs.seed ?? 1,
    planner: { ...inputs.planner, tensorParallelOptions: options },
  };
}
