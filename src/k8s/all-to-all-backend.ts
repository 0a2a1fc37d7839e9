import { AcceleratedInstanceType } from '../catalog';

/**
 * How expert-parallel ranks exchange tokens in MoE layers (vLLM `--all2all-backend`).
 *
 * An enum-like class. On AWS the default is {@link AllToAllBackend.ALLGATHER_REDUCESCATTER}, built on
 * NCCL collectives, which NCCL carries over EFA through the aws-ofi-nccl libfabric plugin. DeepEP's
 * internode kernels post RDMA work requests from the GPU (NVSHMEM's IBGDA transport, InfiniBand or
 * RoCE NICs driven by GPU threads); EFA exposes no GPU-initiated RDMA, so they do not run on EFA.
 *
 * @see https://docs.vllm.ai/en/latest/serving/expert_parallel_deployment.html (backend selection guide)
 * @see https://github.com/deepseek-ai/DeepEP (requirements: RDMA with IBGDA for internode kernels)
 */
export class AllToAllBackend {
  /**
   * Dispatch by all-gather, combine by reduce-scatter over the data-parallel group (NCCL). vLLM's
   * default; works on any fabric NCCL works on, EFA included.
   */
  public static readonly ALLGATHER_REDUCESCATTER = new AllToAllBackend('allgather_reducescatter', false);

  /**
   * Broadcast-based exchange; a slow fallback for debugging.
   * @deprecated vLLM removed it (PR #33728): releases since early 2026 log that and run
   * `allgather_reducescatter` instead. Use ALLGATHER_REDUCESCATTER.
   */
  public static readonly NAIVE = new AllToAllBackend('naive', false);

  /** DeepEP's high-throughput kernels (prefill). Needs GPU-initiated RDMA (InfiniBand/RoCE with IBGDA) across nodes. */
  public static readonly DEEPEP_HIGH_THROUGHPUT = new AllToAllBackend('deepep_high_throughput', true);

  /** DeepEP's low-latency kernels (decode, CUDA graphs). Needs GPU-initiated RDMA across nodes. */
  public static readonly DEEPEP_LOW_LATENCY = new AllToAllBackend('deepep_low_latency', true);

  /**
   * Another backend by its vLLM name (escape hatch for backends added after this library).
   *
   * @param name the `--all2all-backend` value
   * @param needsGpuInitiatedRdma whether its internode path needs GPU-initiated RDMA (warned about on EFA)
   */
  public static of(name: string, needsGpuInitiatedRdma?: boolean): AllToAllBackend {
    if (!/^[a-z0-9_]+$/.test(name ?? '')) {
      throw new Error(`'allToAllBackend' ('${name}') must be a vLLM --all2all-backend name such as 'allgather_reducescatter'`);
    }
    return new AllToAllBackend(name, needsGpuInitiatedRdma ?? false);
  }

  /**
   * The backend for an instance type's fabric: NCCL-based all-gather/reduce-scatter for every
   * catalogued AWS type (EFA has no GPU-initiated RDMA; without EFA NCCL runs over TCP).
   */
  public static forInstanceType(_instanceType: AcceleratedInstanceType): AllToAllBackend {
    return AllToAllBackend.ALLGATHER_REDUCESCATTER;
  }

  /** The vLLM `--all2all-backend` value. */
  public readonly name: string;
  /** Whether the internode path needs GPU-initiated RDMA, which EFA lacks. */
  public readonly needsGpuInitiatedRdma: boolean;

  private constructor(name: string, needsGpuInitiatedRdma: boolean) {
    this.name = name;
    this.needsGpuInitiatedRdma = needsGpuInitiatedRdma;
  }
}
