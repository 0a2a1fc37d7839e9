import { AcceleratedInstanceType } from '../catalog';

/**
 * One pool of vLLM servers (the prefill pool or the decode pool).
 */
export interface InferencePoolOptions {
  /** The instance type of the nodes the pool runs on. */
  readonly instanceType: AcceleratedInstanceType;
  /**
   * Model replicas (vLLM servers) in the pool.
   * @default 1
   */
  readonly replicas?: number;
  /**
   * Tensor-parallel size of each replica (vLLM `--tensor-parallel-size`); must divide the model's
   * attention heads and the accelerators of one node.
   * @default - the smallest size that holds the weights and one `maxContext` sequence
   */
  readonly tensorParallel?: number;
  /**
   * Pipeline-parallel size (vLLM `--pipeline-parallel-size`). A replica of `tensorParallel x
   * pipelineParallel` accelerators larger than one node becomes a LeaderWorkerSet group over whole nodes.
   * @default 1
   */
  readonly pipelineParallel?: number;
  /**
   * Fraction of accelerator memory vLLM may use (`--gpu-memory-utilization`).
   * @default 0.9
   */
  readonly gpuMemoryUtilization?: number;
  /**
   * EFA interfaces each pod requests (`vpc.amazonaws.com/efa`).
   * @default - the pod's share of the node's interfaces (`ParallelismRules.efaInterfacesPerPod`)
   */
  readonly efaInterfaces?: number;
  /**
   * Value of the `disagg.dev/pool-role` node label the pods select (the `poolRole` of an
   * `AcceleratedNodeGroup`).
   * @default - no pool-role selector: any node of the instance type
   */
  readonly nodePoolRole?: string;
  /**
   * Extra vLLM arguments, appended after the generated ones.
   * @default - none
   */
  readonly extraArgs?: string[];
}
