import { ModelArchitecture, Precision } from '../catalog';
import { Parallelism } from './parallelism';

/**
 * Inputs of {@link WeightFootprint.of}.
 */
export interface WeightFootprintProps {
  /** The model. */
  readonly model: ModelArchitecture;
  /**
   * Precision of the quantized weights: every weight of a dense model, the routed experts of an MoE model.
   * @default - the model's native checkpoint precision (`model.nativePrecision`)
   */
  readonly weightPrecision?: Precision;
  /**
   * Precision of an MoE model's non-expert weights (attention, embeddings, router, dense layers and
   * shared experts). Ignored for dense models.
   * @default - BF16 when `weightPrecision` is narrower than 8 bits (4-bit MoE checkpoints such as
   * gpt-oss MXFP4 quantize only the routed experts, and vLLM's MXFP4 path keeps the rest in BF16);
   * otherwise `weightPrecision`
   */
  readonly denseWeightPrecision?: Precision;
}

/**
 * The bytes a model's weights occupy at a chosen precision, split into routed-expert and other weights.
 *
 * What is quantized, explicitly:
 * - Dense models: every parameter at `weightPrecision` (embeddings and lm_head, often left in BF16 by
 *   FP8/INT4 checkpoints, are ~3% of a 70B model; this sizing ignores the difference).
 * - MoE models: routed experts at `weightPrecision`; everything else at `denseWeightPrecision`
 *   (see its default). DeepSeek-V3's FP8 checkpoint stores nearly every linear layer in FP8, so FP8
 *   applies to all its weights.
 *
 * 4-bit precisions include their block-scale overhead (`Precision.bytesPerElement`).
 */
export class WeightFootprint {
  /**
   * Sizes the weights of `props.model`.
   */
  public static of(props: WeightFootprintProps): WeightFootprint {
    return new WeightFootprint(props);
  }

  /** The model. */
  public readonly model: ModelArchitecture;
  /** Precision of the routed experts (of every weight, for a dense model). */
  public readonly expertPrecision: Precision;
  /** Precision of the non-expert weights (every weight, for a dense model). */
  public readonly densePrecision: Precision;
  /** Bytes of the non-expert weights (all weights, for a dense model). */
  public readonly denseBytes: number;
  /** Bytes of all routed experts together (0 for a dense model). */
  public readonly expertBytes: number;
  /** Bytes of one routed expert across all MoE layers (0 for a dense model). */
  public readonly bytesPerExpert: number;
  /** Bytes of all weights of one model copy. */
  public readonly totalBytes: number;
  /** What is stored at which precision: 'all weights fp8', or 'routed experts fp4, other weights bf16'. */
  public readonly description: string;

  private constructor(props: WeightFootprintProps) {
    const model = props.model;
    const weights = props.weightPrecision ?? model.nativePrecision;
    const dense = model.isMoe
      ? props.denseWeightPrecision ?? (weights.bits < 8 ? Precision.BF16 : weights)
      : weights;
    this.model = model;
    this.expertPrecision = weights;
    this.densePrecision = dense;
    this.denseBytes = model.denseParameters * dense.bytesPerElement;
    this.expertBytes = model.expertParameters * weights.bytesPerElement;
    this.bytesPerExpert = model.isMoe ? this.expertBytes / model.expertsTotal : 0;
    this.totalBytes = this.denseBytes + this.expertBytes;
    this.description = !model.isMoe || dense === weights
      ? `all weights ${weights.name}`
      : `routed experts ${weights.name}, other weights ${dense.name}`;
  }

  /**
   * Weight bytes one device holds under `parallelism`: its tensor-parallel shard of the non-expert
   * weights, plus either its tensor-parallel shard of every expert or, with expert parallelism,
   * `(routed + redundant experts) / (TP x DP)` whole experts; divided by the pipeline stages
   * (layers split evenly; the embedding and lm_head stages' extra is ignored).
   */
  public bytesPerRank(parallelism: Parallelism): number {
    const dense = this.denseBytes / parallelism.tensorParallel / parallelism.pipelineParallel;
    return dense + this.expertBytesPerRank(parallelism);
  }

  /**
   * The routed experts' part of `bytesPerRank(parallelism)` (0 for a dense model): what a decode
   * step of a small batch reads only in part, the experts its tokens select.
   */
  public expertBytesPerRank(parallelism: Parallelism): number {
    const experts = parallelism.expertParallel && this.model.isMoe
      ? this.bytesPerExpert * ((this.model.expertsTotal + parallelism.redundantExperts) / parallelism.expertParallelSize)
      : this.expertBytes / parallelism.tensorParallel;
    return experts / parallelism.pipelineParallel;
  }
}
