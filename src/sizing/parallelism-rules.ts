import { AcceleratedInstanceType, AttentionKind, ModelArchitecture } from '../catalog';
import { Parallelism } from './parallelism';
import { joinOr } from './private/units';
import { SizingProblem } from './sizing-problem';

/**
 * Where the replicas of a parallel layout land on nodes of one instance type.
 */
export interface ReplicaLayout {
  /** Devices per replica: `TP x PP x DP`. */
  readonly acceleratorsPerReplica: number;
  /** Pods per replica: 1 when it fits one node, else one pod per node (a LeaderWorkerSet group). */
  readonly podsPerReplica: number;
  /** Devices each pod requests. */
  readonly acceleratorsPerPod: number;
  /** Nodes one replica spans (1 when several replicas share a node). */
  readonly nodesPerReplica: number;
  /** Whole replicas per node (0 when a replica spans several nodes). */
  readonly replicasPerNode: number;
  /** EFA interfaces each pod requests (`vpc.amazonaws.com/efa`): its share of the node's, 0 without EFA. */
  readonly efaInterfacesPerPod: number;
}

/**
 * The rules a parallel layout must follow, each check returning a {@link SizingProblem} or undefined.
 *
 * - Tensor parallelism splits attention heads, so TP must divide the attention heads; it splits K/V heads
 *   while TP <= kvHeads (TP must divide them) and replicates them beyond (kvHeads must divide TP).
 *   This is vLLM's rule.
 * - TP needs the all-to-all NVLink / NeuronLink bandwidth of one node: TP <= devices per node, or per
 *   NVLink domain on UltraServer types (p6e-gb200). Span nodes with pipeline or data parallelism.
 * - Expert parallelism gives each rank an equal whole number of experts: `TP x DP` must divide the
 *   routed experts plus redundant ones.
 */
export class ParallelismRules {
  /**
   * The largest TP one scale-up domain allows: devices per node, times the instances per UltraServer
   * where the NVLink domain spans instances.
   */
  public static maxTensorParallel(instanceType: AcceleratedInstanceType): number {
    return instanceType.acceleratorCount * (instanceType.ultraServerSize ?? 1);
  }

  /**
   * Every TP size from 1 to `maxTensorParallel` that the model's heads allow.
   */
  public static validTensorParallelSizes(model: ModelArchitecture, maxTensorParallel: number): number[] {
    const sizes: number[] = [];
    for (let tp = 1; tp <= maxTensorParallel; tp++) {
      if (headProblem(model, tp) === undefined) {
        sizes.push(tp);
      }
    }
    return sizes;
  }

  /**
   * Checks a TP size against the model's heads and the instance type's scale-up domain.
   *
   * @returns the problem, or undefined when `tensorParallel` is valid
   */
  public static tensorParallelProblem(
    model: ModelArchitecture, tensorParallel: number, instanceType: AcceleratedInstanceType,
  ): SizingProblem | undefined {
    const max = ParallelismRules.maxTensorParallel(instanceType);
    const valid = ParallelismRules.validTensorParallelSizes(model, max).map(String);
    const heads = headProblem(model, tensorParallel);
    if (heads !== undefined) {
      return problem('tensorParallel', tensorParallel, `${heads}; use ${joinOr(valid)}`);
    }
    if (tensorParallel > max) {
      const domain = instanceType.ultraServerSize
        ? `the ${max} accelerators of one ${instanceType.name} NVLink domain (${instanceType.ultraServerSize} instances)`
        : `the ${max} accelerators of one ${instanceType.name}`;
      const pp = Math.ceil(tensorParallel / max);
      return problem('tensorParallel', tensorParallel,
        `exceeds ${domain}; tensor parallelism needs the scale-up interconnect (${instanceType.accelerator.interconnect}). ` +
        `Use tensorParallel ${joinOr(valid.slice(-2))} and span nodes with pipelineParallel ${pp}`);
    }
    return undefined;
  }

  /**
   * Every expert-parallel size from 2 to `routed + redundant experts` that gives each rank a whole
   * number of experts (empty for a dense model).
   */
  public static validExpertParallelSizes(model: ModelArchitecture, redundantExperts?: number): number[] {
    if (!model.isMoe) {
      return [];
    }
    const experts = model.expertsTotal + (redundantExperts ?? 0);
    const sizes: number[] = [];
    for (let ep = 2; ep <= experts; ep++) {
      if (experts % ep === 0) {
        sizes.push(ep);
      }
    }
    return sizes;
  }

  /**
   * Expert-parallel sizes worth planning on `instanceType`: those of `validExpertParallelSizes` (each rank
   * a whole number of experts) that fill whole nodes,
   * at most `maxAccelerators`. Wide EP runs one rank per accelerator with data-parallel attention
   * (vLLM `--data-parallel-size N --enable-expert-parallel`); a size that leaves part of a node idle
   * wastes the node. Empty for a dense model.
   *
   * @param maxAccelerators the largest group to consider
   * @param redundantExperts EPLB's extra expert replicas (count towards the experts per rank)
   */
  public static wideExpertParallelSizes(model: ModelArchitecture, instanceType: AcceleratedInstanceType,
    maxAccelerators: number, redundantExperts?: number): number[] {
    const perNode = instanceType.acceleratorCount;
    return ParallelismRules.validExpertParallelSizes(model, redundantExperts)
      .filter(ep => ep <= maxAccelerators && ep % perNode === 0);
  }

  /**
   * Checks expert parallelism: the model must have routed experts, redundant experts need expert
   * parallelism, and `TP x DP` must divide the experts (routed plus redundant).
   *
   * @returns the problem, or undefined when the layout is valid
   */
  public static expertParallelProblem(model: ModelArchitecture, parallelism: Parallelism): SizingProblem | undefined {
    if (parallelism.expertParallel && !model.isMoe) {
      return problem('expertParallel', true, `needs routed experts, but ${model.name} is a dense model; remove expertParallel`);
    }
    if (parallelism.redundantExperts > 0 && !parallelism.expertParallel) {
      return problem('redundantExperts', parallelism.redundantExperts,
        'only applies with expert parallelism; set expertParallel: true or remove redundantExperts');
    }
    if (!parallelism.expertParallel) {
      return undefined;
    }
    const experts = model.expertsTotal + parallelism.redundantExperts;
    const ep = parallelism.expertParallelSize;
    if (experts % ep !== 0) {
      const valid = ParallelismRules.validExpertParallelSizes(model, parallelism.redundantExperts).map(String);
      return problem('dataParallel', parallelism.dataParallel,
        `gives an expert-parallel size of tensorParallel ${parallelism.tensorParallel} x dataParallel ${parallelism.dataParallel} = ${ep}, ` +
        `which does not divide the ${model.expertsTotal} routed experts of ${model.name}` +
        `${parallelism.redundantExperts > 0 ? ` plus ${parallelism.redundantExperts} redundant` : ''} ` +
        `(${(experts / ep).toFixed(2)} per rank); use tensorParallel x dataParallel of ${joinOr(valid)}`);
    }
    return undefined;
  }

  /**
   * Places one replica on nodes: within one node, or across whole nodes.
   */
  public static layout(parallelism: Parallelism, instanceType: AcceleratedInstanceType): ReplicaLayout {
    const perNode = instanceType.acceleratorCount;
    const perReplica = parallelism.acceleratorsPerReplica;
    const nodesPerReplica = Math.ceil(perReplica / perNode);
    const acceleratorsPerPod = Math.min(perReplica, perNode);
    return {
      acceleratorsPerReplica: perReplica,
      podsPerReplica: nodesPerReplica,
      acceleratorsPerPod,
      nodesPerReplica,
      replicasPerNode: Math.floor(perNode / perReplica),
      efaInterfacesPerPod: ParallelismRules.efaInterfacesPerPod(instanceType, acceleratorsPerPod),
    };
  }

  /**
   * Checks that a replica fits one node or fills whole nodes.
   *
   * @returns the problem, or undefined when the layout maps onto nodes
   */
  public static layoutProblem(parallelism: Parallelism, instanceType: AcceleratedInstanceType): SizingProblem | undefined {
    const perNode = instanceType.acceleratorCount;
    const perReplica = parallelism.acceleratorsPerReplica;
    if (perReplica <= perNode || perReplica % perNode === 0) {
      return undefined;
    }
    const field = parallelism.pipelineParallel > 1 ? 'pipelineParallel' : 'dataParallel';
    const value = parallelism.pipelineParallel > 1 ? parallelism.pipelineParallel : parallelism.dataParallel;
    return problem(field, value,
      `makes a replica of ${parallelism.toString()} = ${perReplica} accelerators, more than one ${instanceType.name} (${perNode}) ` +
      `but not whole nodes; use a layout of at most ${perNode} or a multiple of ${perNode} accelerators`);
  }

  /**
   * EFA interfaces a pod with `acceleratorsPerPod` devices requests: the instance type's proportional
   * share (see `AcceleratedInstanceType.efaInterfacesFor`), all of them for a whole node, 0 without EFA;
   * and 0 where the pods packed on one node cannot each have that share (four TP1 pods on a g6e.12xlarge
   * with one interface, eight on a p4d with four): the device plugin hands out whole interfaces, so
   * such pods move their KV over the node's ENA (TCP) instead, and the pool's validation accepts it.
   */
  public static efaInterfacesPerPod(instanceType: AcceleratedInstanceType, acceleratorsPerPod: number): number {
    const perPod = Math.min(acceleratorsPerPod, instanceType.acceleratorCount);
    const share = instanceType.efaInterfacesFor(perPod);
    const podsPerNode = Math.max(1, Math.floor(instanceType.acceleratorCount / perPod));
    const total = instanceType.efaInterfacesFor(instanceType.acceleratorCount);
    return share * podsPerNode <= total ? share : Math.floor(total / podsPerNode);
  }
}

/** The heads rule for one TP size, as the reason text, or undefined when it holds. */
function headProblem(model: ModelArchitecture, tp: number): string | undefined {
  if (model.attentionHeads % tp !== 0) {
    return `must divide the ${model.attentionHeads} attention heads of ${model.name}`;
  }
  // MLA's latent is replicated on every rank, so only the query heads constrain TP.
  if (model.attentionKind !== AttentionKind.MLA && model.kvHeads % tp !== 0 && tp % model.kvHeads !== 0) {
    return `must divide the ${model.kvHeads} KV heads of ${model.name}, or be a multiple of them (each rank then holds one replicated KV head)`;
  }
  return undefined;
}

function problem(field: string, value: number | boolean, reason: string): SizingProblem {
  return { field, value: String(value), message: `'${field}' (${value}) ${reason}` };
}
