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
  EngineCostConfig, EngineEfficiencyConfig, PlannerOptionConfig, PlannerSectionConfig, SimulationConfig,
  SimulationPolicyConfig, SimulationPoolConfig, SloConfig, WorkloadConfig,
} from './index';

/**
 * vLLM's default `--max-num-seqs` for the OpenAI server (vllm/engine/arg_utils.py), the scheduler's
 * sequence limit per step; KV capacity limits further on its own.
 */
export const VLLM_DEFAULT_MAX_NUM_SEQS = 256;

/** What every pool of a deployment shares: the model, its precisions and the context length. */
export interface EngineModelInputs {
  readonly model: ModelArchitecture;
  /** @default - the checkpoint's own precision */
  readonly weightPrecision?: Precision;
  /** @default Precision.BF16 */
  readonly kvPrecision?: Precision;
  /** Longest sequence (vLLM --max-model-len). */
  readonly maxContext: number;
  /** @default 0.9 */
  readonly gpuMemoryUtilization?: number;
  /** @default 16 */
  readonly kvBlockSize?: number;
}

/** The ServingPlan of one pool at one tensor-parallel size; throws with the sizing problems when it does not fit. */
export function planFor(inputs: EngineModelInputs, instanceType: AcceleratedInstanceType, tensorParallel: number): ServingPlan {
  return ServingPlan.assertFits({
    model: inputs.model,
    instanceType,
    maxContext: inputs.maxContext,
    weightPrecision: inputs.weightPrecision,
    kvPrecision: inputs.kvPrecision,
    tensorParallel,
    gpuMemoryUtilization: inputs.gpuMemoryUtilization,
    kvBlockSize: inputs.kvBlockSize,
  });
}

/**
 * The cost-model sections (`model`, `hardware`, `parallel`) of one replica as `plan` resolved it.
 * @param weightPrecision the weights' precision, which picks the accelerator's peak FLOP/s
 */
export function costSections(plan: ServingPlan, weightPrecision?: Precision): Required<Pick<EngineCostConfig, 'model' | 'hardware' | 'parallel'>> {
  const p = plan.parallelism;
  const type = plan.instanceType;
  const model = plan.model;
  const layout = ParallelismRules.layout(p, type);
  // A pod's share of the node's network (EFA, or TCP without it): accelerators per pod / per node.
  const nodeShare = layout.acceleratorsPerPod / type.acceleratorCount;
  return {
    model: {
      weightBytesPerRank: Math.round(plan.weightBytesPerRank),
      kvBytesPerToken: plan.kvCache.bytesPerToken,
      kvBytesPerTokenPerRank: plan.kvCache.bytesPerToken * plan.kvCache.rankShare(p.tensorParallel, p.pipelineParallel),
      activeParameters: model.parametersActive,
      layers: model.layers,
      hiddenSize: model.hiddenSize,
      attentionWidth: model.attentionHeads * model.headDim,
    },
    hardware: {
      peakFlopsPerSecond: type.accelerator.peakTflops(weightPrecision ?? plan.weights.densePrecision) * 1e12,
      hbmBytesPerSecond: type.accelerator.hbmBandwidthGBps * 1e9,
      interconnectBytesPerSecond: type.accelerator.interconnectGBps * 1e9,
      // Gbit/s -> bytes/s.
      fabricBytesPerSecond: (type.networkBandwidthGbps * nodeShare * 1e9) / 8,
    },
    parallel: { tensorParallel: p.tensorParallel },
  };
}

/** A pool template (no name, role or replicas): the cost model and KV capacity of one replica. */
export function poolTemplate(plan: ServingPlan, weightPrecision?: Precision, efficiency?: EngineEfficiencyConfig): PlannerOptionConfig {
  const sections = costSections(plan, weightPrecision);
  return {
    label: `${plan.instanceType.name} tp${plan.parallelism.tensorParallel}`,
    tensorParallel: plan.parallelism.tensorParallel,
    acceleratorsPerReplica: plan.parallelism.acceleratorsPerReplica,
    weightBytesPerRank: sections.model.weightBytesPerRank,
    model: sections.model,
    hardware: sections.hardware,
    parallel: sections.parallel,
    ...(efficiency ? { efficiency } : {}),
    kvTokensPerReplica: plan.kvTokens,
    maxConcurrencyPerReplica: VLLM_DEFAULT_MAX_NUM_SEQS,
  };
}

/** Replicas and tensor-parallel size of one pool. */
export interface PoolShape {
  readonly replicas: number;
  readonly tensorParallel: number;
  /** @default - the deployment's instance type */
  readonly instanceType?: AcceleratedInstanceType;
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
  /** @default 1 */
  readonly seed?: number;
}

/** A complete `disagg-engine simulate` configuration. Throws when a pool does not fit its hardware. */
export function simulationConfig(inputs: SimulationInputs): SimulationConfig {
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
  const pools: SimulationPoolConfig[] = [];
  let top: ReturnType<typeof costSections> | undefined;
  for (const [name, role, shape] of shapes) {
    const plan = planFor(inputs, shape.instanceType ?? inputs.instanceType, shape.tensorParallel);
    const full = poolTemplate(plan, inputs.weightPrecision, inputs.efficiency);
    const { label: _label, acceleratorsPerReplica: _acc, role: _role, pricePerAcceleratorHour: _price, ...template } = full;
    top = top ?? costSections(plan, inputs.weightPrecision);
    pools.push({ name, role, replicas: shape.replicas, ...template });
  }
  return {
    ...top!,
    ...(inputs.efficiency ? { efficiency: inputs.efficiency } : {}),
    router: { servedModelName: inputs.model.name, kvBlockSize: inputs.kvBlockSize ?? ServingPlan.DEFAULT_KV_BLOCK_SIZE },
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
  /** @default 1 */
  readonly seed?: number;
}

/**
 * A complete `disagg-engine plan` configuration: one planner option per (instance type,
 * tensor-parallel size) that fits. Throws when no size fits.
 */
export function plannerConfig(inputs: PlannerInputs): SimulationConfig {
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
    for (const tp of sizes) {
      let plan: ServingPlan;
      try {
        plan = planFor(inputs, type, tp);
      } catch (e) {
        problems.push(`tp${tp} on ${type.name}: ${(e as Error).message.split('\n').slice(1).join(' ')}`);
        continue;
      }
      top = top ?? costSections(plan, inputs.weightPrecision);
      options.push({
        ...poolTemplate(plan, inputs.weightPrecision, inputs.efficiency),
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
    router: { servedModelName: inputs.model.name, kvBlockSize: inputs.kvBlockSize ?? ServingPlan.DEFAULT_KV_BLOCK_SIZE },
    policy: inputs.policy ?? { name: 'kv-aware' },
    workload: inputs.workload,
    slo: inputs.slo,
    seed: inputs.seed ?? 1,
    planner: { ...inputs.planner, tensorParallelOptions: options },
  };
}
