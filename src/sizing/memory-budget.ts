import { Accelerator, ModelArchitecture } from '../catalog';
import { GIB, requireFraction, requirePositive } from './private/units';

/**
 * Inputs of {@link MemoryBudget.of}.
 */
export interface MemoryBudgetProps {
  /** The device. */
  readonly accelerator: Accelerator;
  /**
   * Fraction of device memory the serving engine may use for weights, activations and KV cache
   * (vLLM `--gpu-memory-utilization`).
   * @default 0.9
   * @see https://docs.vllm.ai/en/latest/configuration/conserving_memory.html
   */
  readonly gpuMemoryUtilization?: number;
  /**
   * Memory held outside weights, activations and KV cache, GiB: the CUDA context, cuBLAS and NCCL /
   * custom all-reduce workspaces, captured CUDA graphs and allocator slack.
   * @default 1.5
   */
  readonly runtimeReserveGib?: number;
  /**
   * Peak activation memory of the largest forward pass, GiB (what vLLM measures in its profiling run).
   * @default 0 - pass `MemoryBudget.estimateActivationGib(...)`
   */
  readonly activationReserveGib?: number;
}

/**
 * Options of {@link MemoryBudget.estimateActivationGib}.
 */
export interface ActivationEstimateOptions {
  /**
   * Token budget of one forward pass (vLLM `--max-num-batched-tokens`).
   * @default 8192 (vLLM's API-server default on devices with >= 70 GiB; 2048 below)
   */
  readonly maxNumBatchedTokens?: number;
  /**
   * Sequences per forward pass (vLLM `--max-num-seqs`); sizes the sampler's logits.
   * @default 1024 (vLLM's API-server default on devices with >= 70 GiB; 256 below)
   */
  readonly maxNumSeqs?: number;
}

/**
 * The memory of one accelerator as the serving engine divides it:
 * `memory x gpuMemoryUtilization = weights + activation peak + runtime reserve + KV cache`.
 *
 * vLLM loads the weights, runs a profiling forward pass at the largest batch to find the activation
 * peak, and turns what remains of the utilization budget into KV cache blocks.
 */
export class MemoryBudget {
  /** vLLM's default `--gpu-memory-utilization`. */
  public static readonly DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;
  /** Default runtime reserve, GiB (see `MemoryBudgetProps.runtimeReserveGib`). */
  public static readonly DEFAULT_RUNTIME_RESERVE_GIB = 1.5;

  /**
   * The budget of one device.
   *
   * @throws when gpuMemoryUtilization is outside (0, 1] or a reserve is negative
   */
  public static of(props: MemoryBudgetProps): MemoryBudget {
    return new MemoryBudget(props);
  }

  /**
   * vLLM's default `--max-num-batched-tokens` / `--max-num-seqs` for its API server on a device:
   * 8192 / 1024 on devices with at least 70 GiB (except A100), 2048 / 256 otherwise.
   * Source: vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults.
   */
  public static defaultBatchLimits(accelerator: Accelerator): ActivationEstimateOptions {
    const large = accelerator.memoryGib >= 70 && !accelerator.name.toLowerCase().includes('a100');
    return large ? { maxNumBatchedTokens: 8192, maxNumSeqs: 1024 } : { maxNumBatchedTokens: 2048, maxNumSeqs: 256 };
  }

  /**
   * Estimates the activation peak per rank, GiB, for a forward pass of `maxNumBatchedTokens` tokens.
   *
   * Per token, the live BF16 tensors at the MLP peak: the residual and normalized input (2 x hidden) plus
   * the gate/up projection and its activation (3 x an MLP width of 3.5 x hidden, the Llama / Qwen ratio,
   * split across TP ranks). Plus FP32 logits for `maxNumSeqs` sequences. An approximation of vLLM's
   * profiled peak; pass a measured `activationReserveGib` when you have one.
   *
   * @param model the model
   * @param tensorParallel TP size (the MLP width is split across TP ranks)
   * @param options token and sequence budgets
   */
  public static estimateActivationGib(model: ModelArchitecture, tensorParallel: number, options?: ActivationEstimateOptions): number {
    const tokens = options?.maxNumBatchedTokens ?? 8192;
    const seqs = options?.maxNumSeqs ?? 1024;
    requirePositive('maxNumBatchedTokens', tokens, true, "vLLM's default is 8192");
    requirePositive('maxNumSeqs', seqs, true, "vLLM's default is 1024");
    requirePositive('tensorParallel', tensorParallel, true, 'use 1 for a single device');
    const bf16 = 2;
    const mlpWidth = 3.5 * model.hiddenSize;
    const perToken = bf16 * (2 * model.hiddenSize + (3 * mlpWidth) / tensorParallel);
    const logits = seqs * model.vocabSize * 4;
    return (tokens * perToken + logits) / GIB;
  }

  /** The device. */
  public readonly accelerator: Accelerator;
  /** The utilization fraction. */
  public readonly gpuMemoryUtilization: number;
  /** Device memory, bytes. */
  public readonly deviceBytes: number;
  /** `deviceBytes x gpuMemoryUtilization`: what the engine may use, bytes. */
  public readonly usableBytes: number;
  /** Runtime reserve, bytes. */
  public readonly runtimeReserveBytes: number;
  /** Activation reserve, bytes. */
  public readonly activationReserveBytes: number;
  /** Runtime plus activation reserve, bytes. */
  public readonly reserveBytes: number;
  /** `usableBytes - reserveBytes`: what weights and KV cache share, bytes. */
  public readonly availableBytes: number;

  private constructor(props: MemoryBudgetProps) {
    const utilization = props.gpuMemoryUtilization ?? MemoryBudget.DEFAULT_GPU_MEMORY_UTILIZATION;
    requireFraction('gpuMemoryUtilization', utilization, "vLLM's default is 0.9");
    const runtime = props.runtimeReserveGib ?? MemoryBudget.DEFAULT_RUNTIME_RESERVE_GIB;
    const activation = props.activationReserveGib ?? 0;
    for (const [field, value] of [['runtimeReserveGib', runtime], ['activationReserveGib', activation]] as Array<[string, number]>) {
      if (!(Number.isFinite(value) && value >= 0)) {
        throw new Error(`'${field}' (${value}) must be a number >= 0 (GiB); omit it for the default`);
      }
    }
    this.accelerator = props.accelerator;
    this.gpuMemoryUtilization = utilization;
    this.deviceBytes = props.accelerator.memoryGib * GIB;
    this.usableBytes = this.deviceBytes * utilization;
    this.runtimeReserveBytes = runtime * GIB;
    this.activationReserveBytes = activation * GIB;
    this.reserveBytes = this.runtimeReserveBytes + this.activationReserveBytes;
    this.availableBytes = this.usableBytes - this.reserveBytes;
  }

  /**
   * Bytes left for the KV cache once `weightBytes` of weights are loaded (negative when they do not fit).
   */
  public kvCacheBytes(weightBytes: number): number {
    return this.availableBytes - weightBytes;
  }
}
