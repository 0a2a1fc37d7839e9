/**
 * Properties of a {@link Precision}; internal, the catalog is closed (every precision vLLM can run).
 */
interface PrecisionSpec {
  readonly name: string;
  readonly bits: number;
  readonly bytesPerElement: number;
  readonly isFloat: boolean;
  readonly vllmKvCacheDtype?: string;
  readonly vllmQuantization?: string;
  readonly aliases: string[];
}

/**
 * A numeric format for model weights or for the KV cache.
 *
 * Weights and KV cache are sized separately: the same model may run FP8 weights with a BF16 KV cache.
 * `bytesPerElement` includes the per-block scale overhead of the block-scaled 4-bit formats, so
 * `parameters * bytesPerElement` is the checkpoint size.
 *
 * @see https://docs.vllm.ai/en/latest/features/quantization/
 */
export class Precision {
  /**
   * bfloat16: 16 bits, the native dtype of most checkpoints.
   * vLLM `--kv-cache-dtype auto` keeps KV in the model dtype.
   */
  public static readonly BF16 = new Precision({
    name: 'bf16',
    bits: 16,
    bytesPerElement: 2,
    isFloat: true,
    vllmKvCacheDtype: 'auto',
    aliases: ['bfloat16'],
  });

  /**
   * IEEE float16: 16 bits. Same size and rate as BF16 on every listed accelerator.
   */
  public static readonly FP16 = new Precision({
    name: 'fp16',
    bits: 16,
    bytesPerElement: 2,
    isFloat: true,
    vllmKvCacheDtype: 'auto',
    aliases: ['float16', 'half'],
  });

  /**
   * FP8 (E4M3 for weights and KV). Per-tensor / per-block scales are negligible (one float per
   * tensor or per 128x128 block, < 0.01%), so 1 byte per element.
   * vLLM: `--quantization fp8`, `--kv-cache-dtype fp8` (E4M3 on CUDA).
   */
  public static readonly FP8 = new Precision({
    name: 'fp8',
    bits: 8,
    bytesPerElement: 1,
    isFloat: true,
    vllmKvCacheDtype: 'fp8',
    vllmQuantization: 'fp8',
    aliases: ['fp8_e4m3', 'fp8-e4m3', 'e4m3', 'float8', 'w8a8-fp8'],
  });

  /**
   * INT8 weights (W8A8 / W8A16, e.g. compressed-tensors checkpoints; vLLM reads the scheme from the
   * checkpoint config, so the quantization flag is `compressed-tensors`). vLLM has no INT8 KV cache.
   */
  public static readonly INT8 = new Precision({
    name: 'int8',
    bits: 8,
    bytesPerElement: 1,
    isFloat: false,
    vllmQuantization: 'compressed-tensors',
    aliases: ['w8a8', 'w8a16', 'int8-w8a8'],
  });

  /**
   * 4-bit float with block scales (OCP MXFP4: E2M1 elements in 32-element blocks sharing one 8-bit
   * E8M0 scale, so 4 + 8/32 = 4.25 bits = 0.53125 bytes per element). NVFP4 (16-element blocks with an
   * FP8 scale, 4.5 bits) is sized with the same figure: the 0.03 B/element difference is below the
   * accuracy of the sizing model. gpt-oss ships its expert weights in MXFP4.
   * vLLM: `--quantization mxfp4`; vLLM cannot hold KV in 4 bits.
   */
  public static readonly FP4 = new Precision({
    name: 'fp4',
    bits: 4,
    bytesPerElement: 4.25 / 8,
    isFloat: true,
    vllmQuantization: 'mxfp4',
    aliases: ['mxfp4', 'nvfp4', 'fp4_e2m1', 'e2m1'],
  });

  /**
   * Alias of {@link Precision.FP4}: the same object, for readers who think in MXFP4.
   */
  public static readonly MXFP4 = Precision.FP4;

  /**
   * 4-bit integer weights with group scales (AWQ / GPTQ, group size 128, one FP16 scale and one
   * 4-bit zero point per group: 4 + 16/128 + 4/128 = 4.15625 bits = 0.51953125 bytes per element).
   * vLLM: `--quantization awq` (vLLM swaps in the Marlin kernel when the GPU allows); no INT4 KV cache.
   */
  public static readonly INT4 = new Precision({
    name: 'int4',
    bits: 4,
    bytesPerElement: (4 + 16 / 128 + 4 / 128) / 8,
    isFloat: false,
    vllmQuantization: 'awq',
    aliases: ['awq', 'gptq', 'w4a16', 'awq_marlin', 'gptq_marlin'],
  });

  /**
   * Every precision, widest first.
   */
  public static all(): Precision[] {
    return [Precision.BF16, Precision.FP16, Precision.FP8, Precision.INT8, Precision.FP4, Precision.INT4];
  }

  /**
   * Looks a precision up by name or alias, case-insensitively ('bf16', 'FP8_E4M3', 'mxfp4', 'nvfp4', 'awq', ...).
   *
   * @param name the name or an alias
   * @throws when the name is unknown; the message lists the known names
   */
  public static of(name: string): Precision {
    const key = name.trim().toLowerCase();
    for (const p of Precision.all()) {
      if (p.name === key || p.aliases.includes(key)) {
        return p;
      }
    }
    const known = Precision.all().map(p => [p.name, ...p.aliases].join('|')).join(', ');
    throw new Error(`Unknown precision '${name}'; known: ${known}`);
  }

  /** Lower-case canonical name: 'bf16', 'fp16', 'fp8', 'int8', 'fp4', 'int4'. */
  public readonly name: string;
  /** Bits per stored element, without scale overhead. */
  public readonly bits: number;
  /** Bytes per element including block-scale overhead for the 4-bit formats. */
  public readonly bytesPerElement: number;
  /** True for floating-point formats (BF16, FP16, FP8, FP4). */
  public readonly isFloat: boolean;
  /**
   * The value for vLLM `--kv-cache-dtype` when the KV cache uses this precision.
   * @default - undefined when vLLM cannot store the KV cache in this precision
   */
  public readonly vllmKvCacheDtype?: string;
  /**
   * The value for vLLM `--quantization` when the weights use this precision.
   * @default - undefined for unquantized BF16 / FP16 weights
   */
  public readonly vllmQuantization?: string;
  /** Whether vLLM can hold the KV cache in this precision. */
  public readonly supportedForKvCache: boolean;

  private readonly aliases: string[];

  private constructor(spec: PrecisionSpec) {
    this.name = spec.name;
    this.bits = spec.bits;
    this.bytesPerElement = spec.bytesPerElement;
    this.isFloat = spec.isFloat;
    this.vllmKvCacheDtype = spec.vllmKvCacheDtype;
    this.vllmQuantization = spec.vllmQuantization;
    this.supportedForKvCache = spec.vllmKvCacheDtype !== undefined;
    this.aliases = spec.aliases;
  }

  /** The canonical name. */
  public toString(): string {
    return this.name;
  }
}
