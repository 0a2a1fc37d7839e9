import { ServingPlan, ServingPlanProps } from '../sizing';
/**
 * The default deployment: what `disagg plan` with no flags plans, and what every missing plan flag
 * falls back to. One place, so the README, tests and later commands (synth) agree.
 */
export const DEFAULT_DEPLOYMENT = {
  /** Llama-3.3-70B-Instruct (catalog name). */
  model: 'llama-3.3-70b',
  /** 8 x H200 141 GiB, 16 EFA interfaces. */
  instance: 'p5en.48xlarge',
  /** FP8 weights (vLLM `--quantization fp8`). */
  weights: 'fp8',
  /** FP8 KV cache (vLLM `--kv-cache-dtype fp8`). */
  kv: 'fp8',
  /** Longest sequence, tokens (vLLM `--max-model-len`); a model of a shorter context gets its own (defaultContext). */
  context: 8192,
  /**
   * Tensor-parallel size of prefill and decode pods in `disagg synth` (`disagg plan` lists every valid
   * size and picks the smallest that fits). TP4 halves decode latency against TP1 at this size and
   * leaves ~100 GiB of KV cache per H200.
   */
  tensorParallel: 4,
  /** Prefill replicas in `disagg synth`: two TP4 replicas fill one node. */
  prefillReplicas: 2,
  /** Decode replicas in `disagg synth`: two TP4 replicas fill one node. */
  decodeReplicas: 2,
} as const;

/**
 * The KV cache precision when `--kv-cache-precision` is absent: the default deployment's FP8 while the weights are
 * the default too; once `--weight-precision` describes other weights, what vLLM does without
 * `--kv-cache-dtype` ('auto': the activation dtype, BF16 for every catalog model).
 */
export function defaultKvPrecision(weightsFlag: string | undefined): string {
  return weightsFlag === undefined ? DEFAULT_DEPLOYMENT.kv : 'bf16';
}

/**
 * The `--weight-precision` the commands act on: the flag as given, else on Trainium (vLLM Neuron quantizes
 * nothing at load: FP8 runs only from a static-FP8 checkpoint, which a flag cannot name) the checkpoint's
 * own precision, else undefined for the default deployment's. plan, simulate and synth all read it, so
 * they size the same weights (and defaultKvPrecision of it, the same KV cache).
 */
export function effectiveWeightsFlag(weightsFlag: string | undefined, instanceType: { readonly isNeuron: boolean },
  model: { readonly nativePrecision: { readonly name: string } }): string | undefined {
  return weightsFlag ?? (instanceType.isNeuron ? model.nativePrecision.name : undefined);
}

/**
 * The context when `--max-context` is absent: the default deployment's, or the model's own when it is
 * shorter (OPT's 2,048 tokens), as vLLM's `--max-model-len` defaults to the model's.
 */
export function defaultContext(model: { readonly maxContext: number }): number {
  return Math.min(DEFAULT_DEPLOYMENT.context, model.maxContext);
}

/**
 * The flags that name a model on an instance type, shared by `plan`, `synth` and `simulate` (each
 * documents and defaults them from DEFAULT_DEPLOYMENT).
 */
export const MODEL_FLAG_OPTIONS = {
  'model': { type: 'string' },
  'instance': { type: 'string' },
  'weight-precision': { type: 'string' },
  'kv-cache-precision': { type: 'string' },
  'max-context': { type: 'string' },
} as const;

/**
 * The tensor-parallel size every command deploys, plans and simulates when `--tp` is absent: the
 * default deployment's (TP4, for decode latency and KV room) where it is valid and fits, else the
 * smallest valid size that fits, else the default deployment's (so the error names it). One rule, so
 * that `plan` describes the pods `synth` writes and `simulate` runs.
 */
export function defaultTensorParallel(props: Omit<ServingPlanProps, 'tensorParallel'>): number {
  return defaultTensorParallelChoice(props).tensorParallel;
}

/**
 * defaultTensorParallel() and, where it differs, the smallest valid size that fits (what `plan`
 * mentions beside the default), from one pass over the plans.
 */
export function defaultTensorParallelChoice(props: Omit<ServingPlanProps, 'tensorParallel'>): { tensorParallel: number; smallestFitting?: number } {
  const preferred = DEFAULT_DEPLOYMENT.tensorParallel;
  try {
    const chosen = ServingPlan.create(props);
    const smallest = chosen.fits ? chosen.parallelism.tensorParallel : undefined;
    const tensorParallel = ServingPlan.create({ ...props, tensorParallel: preferred }).fits ? preferred : smallest ?? preferred;
    return { tensorParallel, ...(smallest !== undefined && smallest !== tensorParallel ? { smallestFitting: smallest } : {}) };
  } catch {
    // Malformed values: the command's own check reports them against the flag.
    return { tensorParallel: preferred };
  }
}
