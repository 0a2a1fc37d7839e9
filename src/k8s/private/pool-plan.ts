import { AcceleratedInstanceType, Precision, ModelArchitecture } from '../../catalog';
import { Parallelism, ParallelismRules, ReplicaLayout, ServingPlan } from '../../sizing';
import { InferencePoolOptions } from '../inference-pool-options';
import { NEURON_DEVICES_PER_POD, neuronPrecisionProblems, resolveLnc, vllmTensorParallel } from './neuron';

/** A pool's options resolved and checked against the hardware (internal). */
export interface PoolPlan {
  readonly role: PoolRoleName;
  readonly options: InferencePoolOptions;
  readonly replicas: number;
  readonly plan: ServingPlan;
  readonly parallelism: Parallelism;
  readonly layout: ReplicaLayout;
  readonly gpuMemoryUtilization: number;
  readonly efaInterfacesPerPod: number;
  /** Pods of one replica sit on several nodes (a LeaderWorkerSet group). */
  readonly multiNode: boolean;
  /** Fraction of a node one pod takes: accelerators per pod / accelerators per node. */
  readonly nodeShare: number;
  /** Trainium pools: the Logical NeuronCore configuration (`NEURON_LOGICAL_NC_CONFIG`); undefined for GPUs. */
  readonly logicalNeuronCoreConfig?: number;
  /** vLLM's `--tensor-parallel-size`: GPUs per replica, or logical NeuronCores per replica on Trainium. */
  readonly vllmTensorParallel: number;
}

/** What a pool does: prefill or decode behind the router, or whole requests ('serve'). */
export type PoolRoleName = 'prefill' | 'decode' | 'serve';

/** Expert-parallel layout of a pool (internal). */
export interface ExpertParallelPlanInputs {
  /** Data-parallel ranks of one replica (all nodes of a group). */
  readonly dataParallel: number;
  /** Redundant experts (EPLB). */
  readonly redundantExperts: number;
}

/** Inputs shared by both pools (internal). */
export interface PoolPlanInputs {
  readonly where: string;
  readonly model: ModelArchitecture;
  readonly maxContext: number;
  readonly weightPrecision: Precision;
  readonly kvCachePrecision: Precision;
  readonly kvBlockSize: number;
  /** The checkpoint is stored at `weightPrecision` (Neuron runs FP8 weights only from such a checkpoint). */
  readonly prequantizedCheckpoint?: boolean;
}

// Pool props whose names the sizing messages use; they are renamed 'prefill.<field>' in errors.
const POOL_FIELDS = ['tensorParallel', 'pipelineParallel', 'dataParallel', 'gpuMemoryUtilization', 'replicas', 'efaInterfaces', 'redundantExperts',
  'logicalNeuronCoreConfig'];

/**
 * Resolves a pool through src/sizing and throws with every problem, each naming the prop, the value
 * and a fix.
 */
export function planPool(
  role: PoolRoleName, options: InferencePoolOptions, inputs: PoolPlanInputs, ep?: ExpertParallelPlanInputs, fieldPrefix: string = role,
): PoolPlan {
  const type = options.instanceType;
  const fail = (messages: string[]): never => {
    const renamed = messages.map(m => m.replace(/^'([A-Za-z]+)'/, (all, field: string) =>
      (POOL_FIELDS.includes(field) && fieldPrefix !== '' ? `'${fieldPrefix}.${field}'` : all)));
    throw new Error(`${inputs.where}: the ${role} pool cannot run ${inputs.model.name} on ${type.name}:\n` + renamed.map(m => `- ${m}`).join('\n'));
  };
  const replicas = options.replicas ?? 1;
  if (!(Number.isInteger(replicas) && replicas >= 1)) {
    fail([`'replicas' (${replicas}) must be a positive integer; use 1 or more`]);
  }
  if (options.pipelineParallel !== undefined && !(Number.isInteger(options.pipelineParallel) && options.pipelineParallel >= 1)) {
    fail([`'pipelineParallel' (${options.pipelineParallel}) must be a positive integer; use 1 unless a replica spans nodes`]);
  }
  if (options.tensorParallel !== undefined && !(Number.isInteger(options.tensorParallel) && options.tensorParallel >= 1)) {
    fail([`'tensorParallel' (${options.tensorParallel}) must be a positive integer; use ${ParallelismRules.validTensorParallelSizes(inputs.model, type.acceleratorCount).join(', ')}`]);
  }
  const lnc = resolveLnc(type, options.logicalNeuronCoreConfig, 'logicalNeuronCoreConfig');
  const neuronProblems = [
    ...(lnc.problem ? [lnc.problem] : []),
    ...neuronPrecisionProblems(type, inputs.weightPrecision, inputs.model.nativePrecision, inputs.prequantizedCheckpoint ?? false),
  ];
  if (neuronProblems.length > 0) {
    fail(neuronProblems);
  }
  const create = (tensorParallel: number | undefined) => ServingPlan.create({
    model: inputs.model,
    instanceType: type,
    maxContext: inputs.maxContext,
    weightPrecision: inputs.weightPrecision,
    kvCachePrecision: inputs.kvCachePrecision,
    tensorParallel,
    pipelineParallel: options.pipelineParallel,
    gpuMemoryUtilization: options.gpuMemoryUtilization,
    kvBlockSize: inputs.kvBlockSize,
    dataParallel: ep?.dataParallel,
    expertParallel: ep !== undefined ? true : undefined,
    redundantExperts: ep?.redundantExperts,
  });
  let plan: ServingPlan;
  try {
    plan = create(options.tensorParallel);
    // Trainium pods take a connected set of 1, 4, 8 or 16 devices: round a chosen default up to one.
    const chosen = plan.parallelism.tensorParallel;
    if (type.isNeuron && options.tensorParallel === undefined && !NEURON_DEVICES_PER_POD.includes(chosen)) {
      const valid = ParallelismRules.validTensorParallelSizes(inputs.model, type.acceleratorCount);
      const next = NEURON_DEVICES_PER_POD.find(n => n > chosen && valid.includes(n));
      if (next !== undefined) {
        plan = create(next);
      }
    }
  } catch (e) {
    return fail([(e as Error).message]);
  }
  const problems = plan.problems.map(p => p.message);
  const parallelism = plan.parallelism;
  const perNode = type.acceleratorCount;
  const perReplica = parallelism.acceleratorsPerReplica;
  // A pod smaller than a node must tile it, or the remainder of every node idles.
  if (perReplica < perNode && perNode % perReplica !== 0) {
    const tiling = ParallelismRules.validTensorParallelSizes(inputs.model, perNode).filter(tp => perNode % tp === 0);
    problems.push(`'tensorParallel' (${parallelism.tensorParallel}) gives pods of ${perReplica} accelerators, which do not divide the ${perNode} of one ${type.name}; use ${tiling.join(', ')}`);
  }
  if (type.isNeuron) {
    problems.push(...neuronLayoutProblems(type, parallelism.tensorParallel, parallelism.pipelineParallel, perReplica));
  }
  const layout = ParallelismRules.layout(parallelism, type);
  const podsPerNode = Math.max(1, Math.floor(perNode / layout.acceleratorsPerPod));
  const efaTotal = type.supportsEfa ? type.efaInterfacesFor(perNode) : 0;
  const efa = options.efaInterfaces ?? layout.efaInterfacesPerPod;
  if (!(Number.isInteger(efa) && efa >= 0)) {
    problems.push(`'efaInterfaces' (${efa}) must be an integer >= 0; omit it for the pod's share of the node's interfaces`);
  } else if (efa * podsPerNode > efaTotal) {
    const share = efaTotal === 0 ? 0 : Math.floor(efaTotal / podsPerNode);
    problems.push(`'efaInterfaces' (${efa}) x ${podsPerNode} pods per node exceeds the ${efaTotal} EFA interfaces of one ${type.name}; ` +
      (efaTotal === 0 ? `${type.name} has no EFA: remove efaInterfaces` : `use at most ${share}, or omit it`));
  } else if (options.efaInterfaces !== undefined && efa > 0) {
    // An uneven count leaves some of the pod's devices without an interface of their own (issue 23).
    const devices = Math.min(layout.acceleratorsPerPod, perNode);
    const choices = type.efaInterfaceChoices(devices);
    if (!choices.includes(efa)) {
      problems.push(`'efaInterfaces' (${efa}) does not split evenly over the ${devices} accelerators of each pod on ${type.name}; ` +
        `use ${choices.join(', ')} (or 0 for none), or omit it for ${layout.efaInterfacesPerPod}`);
    }
  }
  const utilization = options.gpuMemoryUtilization ?? 0.9;
  if (problems.length > 0) {
    fail(problems);
  }
  return {
    role,
    options,
    replicas,
    plan,
    parallelism,
    layout,
    gpuMemoryUtilization: utilization,
    efaInterfacesPerPod: efa,
    multiNode: layout.podsPerReplica > 1,
    nodeShare: layout.acceleratorsPerPod / perNode,
    logicalNeuronCoreConfig: lnc.lnc,
    vllmTensorParallel: vllmTensorParallel(type, parallelism.tensorParallel, lnc.lnc),
  };
}

/**
 * What a Trainium pool's parallelism cannot do: vLLM Neuron serves a replica from one instance
 * (pipeline parallelism is not supported: Llama 3 recipe,
 * https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/model-recipes/llama-3.html),
 * and a pod takes a connected set of 1, 4, 8 or 16 devices
 * (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/deploy/infrastructure/scheduler.html).
 */
function neuronLayoutProblems(type: AcceleratedInstanceType, tensorParallel: number, pipelineParallel: number, perReplica: number): string[] {
  const problems: string[] = [];
  if (pipelineParallel > 1) {
    problems.push(`'pipelineParallel' (${pipelineParallel}): vLLM Neuron does not support pipeline parallelism; remove it and ` +
      `fit a replica in the ${type.acceleratorCount} devices of one ${type.name} (lower precision or context, or more tensorParallel)`);
  } else if (perReplica > type.acceleratorCount) {
    problems.push(`a replica of ${perReplica} devices spans nodes, and vLLM Neuron serves a replica from one ${type.name}; use tensorParallel ${type.acceleratorCount} or less`);
  }
  if (!NEURON_DEVICES_PER_POD.includes(tensorParallel) && perReplica <= type.acceleratorCount) {
    problems.push(`'tensorParallel' (${tensorParallel}) Trainium devices per pod: Neuron allocates connected sets of ${NEURON_DEVICES_PER_POD.join(', ')} devices; ` +
      `use ${NEURON_DEVICES_PER_POD.filter(n => n <= type.acceleratorCount).join(', ')}`);
  }
  return problems;
}
