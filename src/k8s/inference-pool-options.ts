import { AcceleratedInstanceType } from '../catalog';
import { PoolAutoscaling } from './pool-autoscaling';

/**
 * One pool of vLLM servers (the prefill pool or the decode pool).
 */
export interface InferencePoolOptions {
  /** The instance type of the nodes the pool runs on. */
  readonly instanceType: AcceleratedInstanceType;
  /**
   * Model replicas (vLLM servers) in the pool; leave it unset with `autoscaling`, which owns the count.
   * @default 1 (with `autoscaling`: `autoscaling.minReplicas` at first, then the autoscaler's)
   */
  readonly replicas?: number;
  /**
   * Tensor-parallel size of each replica, in accelerator devices (GPUs, or Trainium chips); must divide
   * the model's attention heads and the accelerators of one node. GPUs pass it to vLLM's
   * `--tensor-parallel-size` as it is. Neuron's vLLM counts logical NeuronCores instead, so a Trainium
   * pool requests `tensorParallel` whole devices (`aws.amazon.com/neuron`: 1, 4, 8 or 16, the connected
   * device sets) and passes `tensorParallel x` the device's logical cores at `logicalNeuronCoreConfig`
   * (trn2.48xlarge at LNC 2: 4 TP ranks per device).
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html
   * @default - the smallest size that holds the weights and one `maxContext` sequence (on Trainium, of 1, 4, 8 or 16)
   */
  readonly tensorParallel?: number;
  /**
   * Trainium only: the Logical NeuronCore configuration (physical NeuronCores grouped per logical core),
   * set in the container as `NEURON_LOGICAL_NC_CONFIG` and used to count vLLM's tensor-parallel ranks.
   * trn2 accepts 2 (its default, 64 logical cores per instance) or 1 (128); trn1 accepts 1.
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html
   * @default - the instance type's default (`logicalNeuronCoreConfigs[0]`); GPU pools must leave it unset
   */
  readonly logicalNeuronCoreConfig?: number;
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
  /**
   * Scale the pool between replica bounds on its SLO pressure, which the router computes against
   * `DisaggregatedInference.slo` (required then): a KEDA ScaledObject or an HPA, per `autoscaler`.
   * @default - no autoscaling: `replicas` pods
   */
  readonly autoscaling?: PoolAutoscaling;
}
