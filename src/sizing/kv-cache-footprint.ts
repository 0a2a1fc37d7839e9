import { AttentionKind, ModelArchitecture, Precision } from '../catalog';

/**
 * Inputs of {@link KvCacheFootprint.of}.
 */
export interface KvCacheFootprintProps {
  /** The model. */
  readonly model: ModelArchitecture;
  /** Precision the KV cache is stored in (vLLM `--kv-cache-dtype`). */
  readonly precision: Precision;
}

/**
 * The bytes the KV cache takes per token and per sequence.
 *
 * - MHA / GQA / MQA: K and V per layer: `2 x kvHeads x headDim x bytes`.
 * - MLA: one compressed latent plus the decoupled rope key per layer:
 *   `(kvLoraRank + qkRopeHeadDim) x bytes` (vLLM's FP8 MLA cache adds per-tile scales, < 3%, ignored).
 * - Sliding-window layers (gpt-oss: every other layer, 128 tokens) keep at most the window per
 *   sequence, so a sequence's bytes grow with the full-attention layers only once it passes the window.
 *
 * Under tensor parallelism, K/V heads are split across ranks while the TP size does not exceed the K/V
 * head count; beyond it each rank keeps one head, replicated `TP / kvHeads` times (vLLM requires TP to
 * be a multiple of kvHeads then). The MLA latent is not split by heads: every TP rank stores all of it.
 *
 * @see https://docs.vllm.ai/en/latest/configuration/conserving_memory.html
 */
export class KvCacheFootprint {
  /**
   * Sizes the KV cache of `props.model` in `props.precision`.
   *
   * @throws when vLLM cannot store a KV cache in `props.precision`
   */
  public static of(props: KvCacheFootprintProps): KvCacheFootprint {
    return new KvCacheFootprint(props);
  }

  /** The model. */
  public readonly model: ModelArchitecture;
  /** Storage precision. */
  public readonly precision: Precision;
  /** Bytes per token in one layer. */
  public readonly bytesPerTokenPerLayer: number;
  /**
   * Bytes per token over all layers, counting sliding-window layers as full ones: the published
   * `2 x layers x kvHeads x headDim x bytes` figure (and what a sequence shorter than the window takes).
   */
  public readonly bytesPerToken: number;
  /** Bytes per token in the layers that attend to the whole context. */
  public readonly fullAttentionBytesPerToken: number;
  /** Bytes per token in the sliding-window layers (0 when the model has none). */
  public readonly slidingWindowBytesPerToken: number;
  /**
   * Tokens a sliding-window layer keeps per sequence.
   * @default - undefined: no sliding-window layers
   */
  public readonly slidingWindow?: number;

  private constructor(props: KvCacheFootprintProps) {
    const { model, precision } = props;
    if (!precision.supportedForKvCache) {
      const usable = Precision.all().filter(p => p.supportedForKvCache).map(p => p.name).join(', ');
      throw new Error(`'kvCachePrecision' (${precision.name}) cannot hold a KV cache in vLLM; use one of ${usable}`);
    }
    this.model = model;
    this.precision = precision;
    this.bytesPerTokenPerLayer = model.attentionKind === AttentionKind.MLA
      ? (model.kvLoraRank! + model.qkRopeHeadDim!) * precision.bytesPerElement
      : 2 * model.kvHeads * model.headDim * precision.bytesPerElement;
    this.bytesPerToken = model.layers * this.bytesPerTokenPerLayer;
    this.slidingWindow = model.slidingWindowLayers > 0 ? model.slidingWindow : undefined;
    this.slidingWindowBytesPerToken = model.slidingWindowLayers * this.bytesPerTokenPerLayer;
    this.fullAttentionBytesPerToken = (model.layers - model.slidingWindowLayers) * this.bytesPerTokenPerLayer;
  }

  /**
   * Bytes of one sequence of `tokens` tokens over all layers.
   *
   * @param tokens tokens in the sequence (prompt plus generated)
   * @param blockSize paged-attention block size: memory is taken in whole blocks (vLLM's default is 16)
   */
  public bytesPerSequence(tokens: number, blockSize?: number): number {
    const block = blockSize ?? 1;
    const held = Math.ceil(tokens / block) * block;
    const windowHeld = this.slidingWindow === undefined
      ? 0
      // The window plus the block being filled; blocks that slide out of the window are freed.
      : Math.min(held, Math.ceil(this.slidingWindow / block) * block + (block > 1 ? block : 0));
    return held * this.fullAttentionBytesPerToken + windowHeld * this.slidingWindowBytesPerToken;
  }

  /**
   * The share of the KV cache that one rank stores: `1 / (min(TP, kvHeads) x PP)` for MHA/GQA/MQA
   * (heads split, then replicated), `1 / PP` for MLA (the latent is replicated on every TP rank).
   *
   * @param tensorParallel tensor-parallel size
   * @param pipelineParallel pipeline-parallel size (layers split evenly across stages)
   */
  public rankShare(tensorParallel: number, pipelineParallel?: number): number {
    const pp = pipelineParallel ?? 1;
    const headShards = this.model.attentionKind === AttentionKind.MLA ? 1 : Math.min(tensorParallel, this.model.kvHeads);
    return 1 / (headShards * pp);
  }

  /**
   * How many copies of each K/V head the ranks of a TP group hold together:
   * `TP / kvHeads` when TP exceeds the K/V heads (1 otherwise), TP for MLA.
   */
  public replicationFactor(tensorParallel: number): number {
    if (this.model.attentionKind === AttentionKind.MLA) {
      return tensorParallel;
    }
    return Math.max(1, tensorParallel / this.model.kvHeads);
  }
}
