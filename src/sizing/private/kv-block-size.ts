import { Accelerator, AcceleratedInstanceType, AttentionKind, ModelArchitecture } from '../../catalog';

// The KV block size rule lives in the sizing (not in src/k8s) so that the constructs, ServingPlan and
// the engine configuration builder behind `disagg plan` / `disagg simulate` share it without a cycle.

/** vLLM's default `--block-size` for attention that forces none. */
export const DEFAULT_KV_BLOCK_SIZE = 16;

const HOPPER = [Accelerator.H100, Accelerator.H200, Accelerator.H800, Accelerator.H20];
const BLACKWELL = [Accelerator.B200, Accelerator.GB200];

/**
 * The KV block size, tokens, that vLLM's default MLA attention backend insists on for `accelerator`, or
 * undefined where it takes any (the Triton MLA backend on A100 and L40S; Trainium runs vLLM Neuron).
 *
 * vLLM picks the MLA decode kernel by GPU generation and sizes the paged KV cache for it
 * (vllm-project/vllm vllm/platforms/cuda.py@002db4951e0c, `check_and_update_config`):
 * - Hopper (H100, H200, H800, H20): FlashMLA, whose kernel takes 64-token pages only
 *   (vllm/v1/attention/backends/mla/flashmla.py@e75aca0ca6db, `get_supported_kernel_block_sizes`);
 *   a `--block-size` that is not a multiple of 64 is replaced by 64.
 * - Blackwell (B200, GB200): FlashInfer MLA when qk_nope_head_dim is 128 (DeepSeek-V3/R1, Kimi-K2)
 *   and decode context parallelism is off; it takes 32 or 64
 *   (vllm/v1/attention/backends/mla/flashinfer_mla.py@bb13e932ccef), and anything else becomes 64.
 *   CUTLASS MLA (Blackwell with decode context parallelism, or qk_nope_head_dim other than 128) forces
 *   128, a multiple of 64; 64 still divides it.
 * - DeepSeek-V3.2's sparse MLA (FlashMLA-sparse) forces 64 on both.
 * Newer vLLM moved the choice into the attention backend (`Platform.update_block_size_for_backend`
 * takes the backend's preferred size when `--block-size` is absent) and, when it is given, splits each
 * block into kernel blocks only where a supported kernel size divides it: there a `--block-size 16`
 * with FlashMLA fails at start instead of being replaced. Either way 64 is what runs.
 */
export function mlaForcedBlockSize(accelerator: Accelerator): number | undefined {
  return HOPPER.includes(accelerator) || BLACKWELL.includes(accelerator) ? 64 : undefined;
}

/** Whether vLLM keeps `size` for MLA on `accelerator` (FlashInfer MLA on Blackwell also takes 32). */
function mlaKeeps(accelerator: Accelerator, size: number): boolean {
  const forced = mlaForcedBlockSize(accelerator);
  return forced === undefined || size % forced === 0 || (BLACKWELL.includes(accelerator) && size === 32);
}

/**
 * The block size vLLM runs when `--block-size` is not given: the MLA backend's forced size on the
 * first of `instanceTypes` that forces one, else vLLM's 16. Used by the sizing (ServingPlan), the
 * engine configuration builder (`disagg plan`, `disagg simulate`) and the constructs alike.
 */
export function defaultKvBlockSize(model: ModelArchitecture, instanceTypes: AcceleratedInstanceType[]): number {
  return resolveKvBlockSize('', model, undefined, instanceTypes);
}

/**
 * The deployment's `--block-size` (one for every pool: prefill and decode move KV blocks as they are,
 * and the router indexes prefixes at it): `requested`, or for an MLA model the block size its attention
 * backend forces on the pools' accelerators (64 on Hopper and Blackwell), else vLLM's 16.
 *
 * The router takes the same size. Its BlockKeyer would accept publisher blocks that are a multiple of
 * its own (64-token events give four 16-token keys; engine/src/lib/kv_events/block_keyer.h), but vLLM
 * reuses a prefix only in whole 64-token blocks, so a 16-token router index would credit up to 48
 * uncacheable tokens per match and hold four times the entries.
 *
 * Throws, naming the model, the accelerator and the fix, when an MLA model is asked for a block size
 * vLLM would not run on a pool's accelerator.
 */
export function resolveKvBlockSize(where: string, model: ModelArchitecture, requested: number | undefined,
  instanceTypes: AcceleratedInstanceType[], field = "'kvBlockSize'"): number {
  const prefix = where ? `${where}: ` : '';
  if (requested !== undefined && ![1, 8, 16, 32, 64, 128].includes(requested)) {
    throw new Error(`${prefix}${field} (${requested}) must be one of vLLM's block sizes 8, 16, 32, 64 or 128; use ${DEFAULT_KV_BLOCK_SIZE}`);
  }
  if (model.attentionKind !== AttentionKind.MLA) {
    return requested ?? DEFAULT_KV_BLOCK_SIZE;
  }
  const forced = instanceTypes.find(t => mlaForcedBlockSize(t.accelerator) !== undefined);
  if (forced === undefined) {
    return requested ?? DEFAULT_KV_BLOCK_SIZE;
  }
  const size = mlaForcedBlockSize(forced.accelerator)!;
  const refused = requested === undefined ? undefined : instanceTypes.find(t => !mlaKeeps(t.accelerator, requested));
  if (refused !== undefined) {
    throw new Error(`${prefix}${field} (${requested}) is not what vLLM runs ${model.name} with on ${refused.name} ` +
      `(${refused.accelerator.name}): its MLA attention backend takes ${size}-token blocks and replaces ${requested} ` +
      `(or, in newer vLLM, refuses to start), leaving the router's prefix index at the wrong size; use ${size} or leave ${field} unset`);
  }
  return requested ?? size;
}
