import { Precision } from './precision';

/**
 * How a model's attention stores keys and values; decides the KV cache size per token.
 */
export enum AttentionKind {
  /** Multi-head attention: one K/V head per query head. */
  MHA = 'MHA',
  /** Grouped-query attention: fewer K/V heads than query heads, each shared by a group. */
  GQA = 'GQA',
  /** Multi-query attention: one K/V head for all query heads. */
  MQA = 'MQA',
  /** Multi-head latent attention (DeepSeek-V2/V3): one compressed latent plus a rope key per token and layer. */
  MLA = 'MLA',
}

/**
 * The architecture numbers of a model that sizing needs, as found in its Hugging Face `config.json`.
 */
export interface ModelArchitectureProps {
  /** Kebab-case short name, used by the CLI, e.g. 'llama-3.3-70b'. */
  readonly name: string;
  /** Hugging Face repository id, e.g. 'meta-llama/Llama-3.3-70B-Instruct'. */
  readonly huggingFaceId: string;
  /**
   * Other Hugging Face repositories with this architecture (e.g. the base checkpoint of an instruct model);
   * `fromName` accepts them too.
   * @default []
   */
  readonly otherHuggingFaceIds?: string[];
  /** Total parameter count. */
  readonly parametersTotal: number;
  /**
   * Parameters used per token (MoE models activate a subset of experts).
   * @default - parametersTotal (dense model)
   */
  readonly parametersActive?: number;
  /** Transformer layers (`num_hidden_layers`). */
  readonly layers: number;
  /** Hidden size (`hidden_size`). */
  readonly hiddenSize: number;
  /** Query heads (`num_attention_heads`). */
  readonly attentionHeads: number;
  /** K/V heads (`num_key_value_heads`): attentionHeads for MHA, 1 for MQA; informational for MLA. */
  readonly kvHeads: number;
  /** Per-head dimension (`head_dim`, else hidden_size / heads). */
  readonly headDim: number;
  /** The attention kind. */
  readonly attentionKind: AttentionKind;
  /**
   * MLA latent dimension (`kv_lora_rank`).
   * @default - undefined; required for MLA
   */
  readonly kvLoraRank?: number;
  /**
   * MLA decoupled rope key dimension (`qk_rope_head_dim`).
   * @default - undefined; required for MLA
   */
  readonly qkRopeHeadDim?: number;
  /**
   * Window length in tokens of the layers that use sliding-window attention.
   * @default - undefined: every layer attends to the full context
   */
  readonly slidingWindow?: number;
  /**
   * How many layers use the sliding window.
   * @default - layers when slidingWindow is set, else 0
   */
  readonly slidingWindowLayers?: number;
  /**
   * Routed experts per MoE layer.
   * @default - undefined: dense model
   */
  readonly expertsTotal?: number;
  /**
   * Routed experts selected per token.
   * @default - undefined: dense model
   */
  readonly expertsActive?: number;
  /**
   * Shared (always active) experts per MoE layer.
   * @default 0
   */
  readonly expertsShared?: number;
  /**
   * Layers that carry experts.
   * @default - layers for MoE models, 0 for dense ones
   */
  readonly moeLayers?: number;
  /**
   * Parameters of all routed experts together (what expert parallelism shards).
   * @default - 0 for dense models; required for MoE models
   */
  readonly expertParameters?: number;
  /** Vocabulary size (`vocab_size`). */
  readonly vocabSize: number;
  /** Longest supported context in tokens (`max_position_embeddings`, or the documented extended context). */
  readonly maxContext: number;
  /**
   * The dtype of the published checkpoint's (largest) weights.
   * @default Precision.BF16
   */
  readonly nativePrecision?: Precision;
}

/**
 * A model architecture: the numbers weight and KV-cache sizing needs.
 *
 * Every preset cites the `config.json` it was read from. Parameter counts are the model cards'
 * published totals, or, where a preset's comment says "Counted", counted from its config.json numbers
 * (attention, MLP or experts and router, embeddings, norms); expert parameter counts are computed from the config as
 * `moeLayers * expertsTotal * 3 * hidden_size * moe_intermediate_size` (gate, up and down projections).
 */
export class ModelArchitecture {
  /**
   * Mistral-7B-Instruct-v0.3: 32 layers, hidden 4096, 32 heads, 8 KV heads x 128, vocab 32768, 32k context,
   * no sliding window (v0.1 used a 4096 window; v0.3 sets `sliding_window: null`).
   * @see https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.3/blob/main/config.json
   */
  public static readonly MISTRAL_7B = new ModelArchitecture({
    name: 'mistral-7b',
    huggingFaceId: 'mistralai/Mistral-7B-Instruct-v0.3',
    parametersTotal: 7.25e9, // model card: 7.25B (safetensors)
    layers: 32,
    hiddenSize: 4096,
    attentionHeads: 32,
    kvHeads: 8,
    headDim: 128,
    attentionKind: AttentionKind.GQA,
    vocabSize: 32768,
    maxContext: 32768,
  });

  /**
   * Llama-3.1-8B-Instruct: 32 layers, hidden 4096, intermediate 14336, 32 heads, 8 KV heads x 128, vocab
   * 128256, 128k context, untied embeddings (checked: these numbers count 8,030,261,248 parameters, the card's 8.03B).
   * @see https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json
   */
  public static readonly LLAMA_3_1_8B = new ModelArchitecture({
    name: 'llama-3.1-8b',
    huggingFaceId: 'meta-llama/Llama-3.1-8B-Instruct',
    parametersTotal: 8.03e9, // model card: 8.03B
    layers: 32,
    hiddenSize: 4096,
    attentionHeads: 32,
    kvHeads: 8,
    headDim: 128,
    attentionKind: AttentionKind.GQA,
    vocabSize: 128256,
    maxContext: 131072,
  });

  /**
   * Llama-3.3-70B-Instruct: 80 layers, hidden 8192, 64 heads, 8 KV heads x 128, vocab 128256, 128k context.
   * @see https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct/blob/main/config.json
   */
  public static readonly LLAMA_3_3_70B = new ModelArchitecture({
    name: 'llama-3.3-70b',
    huggingFaceId: 'meta-llama/Llama-3.3-70B-Instruct',
    // The same architecture and config.json numbers: Llama 3.1 70B, and DeepSeek's R1 distillation of Llama 3.3 70B.
    otherHuggingFaceIds: ['meta-llama/Llama-3.1-70B-Instruct', 'meta-llama/Meta-Llama-3.1-70B-Instruct', 'meta-llama/Llama-3.1-70B',
      'deepseek-ai/DeepSeek-R1-Distill-Llama-70B'],
    parametersTotal: 70.6e9, // model card: 70.6B
    layers: 80,
    hiddenSize: 8192,
    attentionHeads: 64,
    kvHeads: 8,
    headDim: 128,
    attentionKind: AttentionKind.GQA,
    vocabSize: 128256,
    maxContext: 131072,
  });

  /**
   * Llama-3.1-405B-Instruct: 126 layers, hidden 16384, 128 heads, 8 KV heads x 128, vocab 128256, 128k context.
   * @see https://huggingface.co/meta-llama/Llama-3.1-405B-Instruct/blob/main/config.json
   */
  public static readonly LLAMA_3_1_405B = new ModelArchitecture({
    name: 'llama-3.1-405b',
    huggingFaceId: 'meta-llama/Llama-3.1-405B-Instruct',
    parametersTotal: 405e9, // model card: 405B
    layers: 126,
    hiddenSize: 16384,
    attentionHeads: 128,
    kvHeads: 8,
    headDim: 128,
    attentionKind: AttentionKind.GQA,
    vocabSize: 128256,
    maxContext: 131072,
  });

  /**
   * Mixtral-8x7B-Instruct-v0.1 (and its base, Mixtral-8x7B-v0.1, whose config.json has the same numbers):
   * 32 layers, hidden 4096, 32 heads, 8 KV heads x 128, 8 experts (2 active, intermediate 14336), vocab
   * 32000, 32k context, untied embeddings (checked: these numbers count 46,702,792,704 parameters, 12.88B active,
   * the card's 46.7B and 12.9B).
   * @see https://huggingface.co/mistralai/Mixtral-8x7B-Instruct-v0.1/blob/main/config.json
   * @see https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
   */
  public static readonly MIXTRAL_8X7B = new ModelArchitecture({
    name: 'mixtral-8x7b',
    huggingFaceId: 'mistralai/Mixtral-8x7B-Instruct-v0.1',
    otherHuggingFaceIds: ['mistralai/Mixtral-8x7B-v0.1'],
    parametersTotal: 46.7e9, // model card: 46.7B total
    parametersActive: 12.9e9, // Mistral announcement: 12.9B used per token
    layers: 32,
    hiddenSize: 4096,
    attentionHeads: 32,
    kvHeads: 8,
    headDim: 128,
    attentionKind: AttentionKind.GQA,
    expertsTotal: 8,
    expertsActive: 2,
    moeLayers: 32,
    expertParameters: 32 * 8 * 3 * 4096 * 14336, // 45.1e9
    vocabSize: 32000,
    maxContext: 32768,
  });

  /**
   * Mixtral-8x22B-Instruct-v0.1 (and its base, Mixtral-8x22B-v0.1): 56 layers, hidden 6144, 48 heads,
   * 8 KV heads x 128, 8 experts (2 active, intermediate 16384), 64k context, untied embeddings. The
   * Instruct checkpoint has the v3 tokenizer's vocab of 32768, the base one 32000 (9.4M fewer embedding
   * parameters, 0.007%); the preset keeps 32768. Counted: 140,630,071,296 total (the Instruct checkpoint's
   * count; Mistral: 141B), 39.16B active (Mistral: 39B).
   * @see https://huggingface.co/mistralai/Mixtral-8x22B-Instruct-v0.1/blob/main/config.json
   * @see https://huggingface.co/mistralai/Mixtral-8x22B-v0.1/blob/main/config.json
   */
  public static readonly MIXTRAL_8X22B = new ModelArchitecture(llamaStyle({
    name: 'mixtral-8x22b',
    huggingFaceId: 'mistralai/Mixtral-8x22B-Instruct-v0.1',
    otherHuggingFaceIds: ['mistralai/Mixtral-8x22B-v0.1'],
  }, {
    layers: 56,
    hiddenSize: 6144,
    intermediateSize: 16384,
    attentionHeads: 48,
    kvHeads: 8,
    headDim: 128, // hidden_size / num_attention_heads
    vocabSize: 32768,
    maxContext: 65536,
    tieWordEmbeddings: false,
    experts: 8,
    expertsPerToken: 2,
  }));

  /**
   * Llama-2-70B: 80 layers, hidden 8192, intermediate 28672, 64 heads, 8 KV heads x 128, vocab 32000,
   * 4k context, untied embeddings. Counted: 68,976,648,192, the checkpoint's published count (named "70B").
   * @see https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json
   */
  public static readonly LLAMA_2_70B = new ModelArchitecture(llamaStyle({
    name: 'llama-2-70b',
    huggingFaceId: 'meta-llama/Llama-2-70b-hf',
  }, {
    layers: 80,
    hiddenSize: 8192,
    intermediateSize: 28672,
    attentionHeads: 64,
    kvHeads: 8,
    headDim: 128,
    vocabSize: 32000,
    maxContext: 4096,
    tieWordEmbeddings: false,
  }));

  /**
   * CodeLlama-34B-Instruct: 48 layers, hidden 8192, intermediate 22016, 64 heads, 8 KV heads x 128,
   * vocab 32000 (the 34B has no infilling tokens; the 7B / 13B have 32016), 16k context (rope_theta 1e6),
   * untied embeddings. Counted: 33,743,970,304, the published count (33.7B).
   * @see https://huggingface.co/codellama/CodeLlama-34b-Instruct-hf/blob/main/config.json
   */
  public static readonly CODELLAMA_34B = new ModelArchitecture(llamaStyle({
    name: 'codellama-34b',
    huggingFaceId: 'codellama/CodeLlama-34b-Instruct-hf',
  }, {
    layers: 48,
    hiddenSize: 8192,
    intermediateSize: 22016,
    attentionHeads: 64,
    kvHeads: 8,
    headDim: 128,
    vocabSize: 32000,
    maxContext: 16384,
    tieWordEmbeddings: false,
  }));

  /**
   * Qwen3-14B: 40 layers, hidden 5120, intermediate 17408, 40 heads, 8 KV heads x 128, vocab 151936,
   * 40960 native context (131072 with YaRN), untied embeddings, q/k norms. Counted: 14,768,307,200, the
   * published count (model card: 14.8B).
   * @see https://huggingface.co/Qwen/Qwen3-14B/blob/main/config.json
   */
  public static readonly QWEN3_14B = new ModelArchitecture(llamaStyle({
    name: 'qwen3-14b',
    huggingFaceId: 'Qwen/Qwen3-14B',
  }, {
    layers: 40,
    hiddenSize: 5120,
    intermediateSize: 17408,
    attentionHeads: 40,
    kvHeads: 8,
    headDim: 128,
    vocabSize: 151936,
    maxContext: 40960,
    tieWordEmbeddings: false,
    qkNorm: true,
  }));

  /**
   * Qwen3-32B: 64 layers, hidden 5120, 64 heads, 8 KV heads x 128, vocab 151936, 40960 native context
   * (131072 with YaRN).
   * @see https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json
   */
  public static readonly QWEN3_32B = new ModelArchitecture({
    name: 'qwen3-32b',
    huggingFaceId: 'Qwen/Qwen3-32B',
    parametersTotal: 32.8e9, // model card: 32.8B
    layers: 64,
    hiddenSize: 5120,
    attentionHeads: 64,
    kvHeads: 8,
    headDim: 128,
    attentionKind: AttentionKind.GQA,
    vocabSize: 151936,
    maxContext: 40960,
  });

  /**
   * Qwen3-235B-A22B: 94 layers, hidden 4096, 64 heads, 4 KV heads x 128, 128 experts (8 active,
   * moe_intermediate 1536, no shared expert), vocab 151936, 40960 native context.
   * @see https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json
   */
  public static readonly QWEN3_235B_A22B = new ModelArchitecture({
    name: 'qwen3-235b-a22b',
    huggingFaceId: 'Qwen/Qwen3-235B-A22B',
    parametersTotal: 235e9, // model card: 235B total
    parametersActive: 22e9, // model card: 22B activated
    layers: 94,
    hiddenSize: 4096,
    attentionHeads: 64,
    kvHeads: 4,
    headDim: 128,
    attentionKind: AttentionKind.GQA,
    expertsTotal: 128,
    expertsActive: 8,
    moeLayers: 94,
    expertParameters: 94 * 128 * 3 * 4096 * 1536, // 227.1e9
    vocabSize: 151936,
    maxContext: 40960,
  });

  /**
   * DeepSeek-V3: 61 layers (first 3 dense), hidden 7168, 128 heads, MLA with kv_lora_rank 512 and
   * qk_rope_head_dim 64 (qk_nope_head_dim 128, so a query/key head is 192 wide), 256 routed experts
   * (8 active, moe_intermediate 2048) plus 1 shared, vocab 129280, 163840 context, FP8 checkpoint.
   * @see https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json
   */
  public static readonly DEEPSEEK_V3 = new ModelArchitecture(deepseekV3Like({
    name: 'deepseek-v3',
    huggingFaceId: 'deepseek-ai/DeepSeek-V3',
  }));

  /**
   * DeepSeek-R1: the DeepSeek-V3 architecture (identical config.json numbers).
   * @see https://huggingface.co/deepseek-ai/DeepSeek-R1/blob/main/config.json
   */
  public static readonly DEEPSEEK_R1 = new ModelArchitecture(deepseekV3Like({
    name: 'deepseek-r1',
    huggingFaceId: 'deepseek-ai/DeepSeek-R1',
  }));

  /**
   * gpt-oss-120b: 36 layers, hidden 2880, 64 heads, 8 KV heads x 64, alternating sliding-window (128)
   * and full attention, 128 experts (4 active, intermediate 2880), vocab 201088, 131072 context,
   * MXFP4 expert weights.
   * @see https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json
   */
  public static readonly GPT_OSS_120B = new ModelArchitecture({
    name: 'gpt-oss-120b',
    huggingFaceId: 'openai/gpt-oss-120b',
    parametersTotal: 116.8e9, // OpenAI model card: 116.8B total
    parametersActive: 5.1e9, // 5.1B active per token
    layers: 36,
    hiddenSize: 2880,
    attentionHeads: 64,
    kvHeads: 8,
    headDim: 64,
    attentionKind: AttentionKind.GQA,
    slidingWindow: 128,
    slidingWindowLayers: 18, // layer_types alternates sliding_attention / full_attention
    expertsTotal: 128,
    expertsActive: 4,
    moeLayers: 36,
    expertParameters: 36 * 128 * 3 * 2880 * 2880, // 114.7e9
    vocabSize: 201088,
    maxContext: 131072,
    nativePrecision: Precision.FP4,
  });

  /**
   * gpt-oss-20b: 24 layers, hidden 2880, 64 heads, 8 KV heads x 64, alternating sliding-window (128)
   * and full attention, 32 experts (4 active, intermediate 2880), vocab 201088, 131072 context,
   * MXFP4 expert weights.
   * @see https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json
   */
  public static readonly GPT_OSS_20B = new ModelArchitecture({
    name: 'gpt-oss-20b',
    huggingFaceId: 'openai/gpt-oss-20b',
    parametersTotal: 20.9e9, // OpenAI model card: 20.9B total
    parametersActive: 3.6e9, // 3.6B active per token
    layers: 24,
    hiddenSize: 2880,
    attentionHeads: 64,
    kvHeads: 8,
    headDim: 64,
    attentionKind: AttentionKind.GQA,
    slidingWindow: 128,
    slidingWindowLayers: 12,
    expertsTotal: 32,
    expertsActive: 4,
    moeLayers: 24,
    expertParameters: 24 * 32 * 3 * 2880 * 2880, // 19.1e9
    vocabSize: 201088,
    maxContext: 131072,
    nativePrecision: Precision.FP4,
  });

  /**
   * Kimi-K2-Instruct: the DeepSeek-V3 architecture with 64 heads, 384 routed experts (8 active) plus
   * 1 shared, 1 dense layer (60 MoE layers), vocab 163840, 131072 context, FP8 checkpoint.
   * @see https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/main/config.json
   */
  public static readonly KIMI_K2 = new ModelArchitecture({
    name: 'kimi-k2',
    huggingFaceId: 'moonshotai/Kimi-K2-Instruct',
    // The model card rounds to "1T"; counted from config.json: routed experts 1.0147e12 plus attention
    // (6.2e9), embeddings (2.35e9), shared experts, the dense layer and routers (3.2e9).
    parametersTotal: 1.026e12,
    parametersActive: 32e9, // 32B activated
    layers: 61,
    hiddenSize: 7168,
    attentionHeads: 64,
    kvHeads: 64,
    headDim: 192,
    attentionKind: AttentionKind.MLA,
    kvLoraRank: 512,
    qkRopeHeadDim: 64,
    expertsTotal: 384,
    expertsActive: 8,
    expertsShared: 1,
    moeLayers: 60, // first_k_dense_replace: 1
    expertParameters: 60 * 384 * 3 * 7168 * 2048, // 1.015e12
    vocabSize: 163840,
    maxContext: 131072,
    nativePrecision: Precision.FP8,
  });

  /**
   * OPT-13B (DistServe's chatbot model): 40 layers, hidden 5120, 40 heads (multi-head attention, 128 each),
   * a ReLU MLP of two matrices with ffn_dim 20480, learned positional embeddings, vocab 50272, 2048
   * context, tied embeddings, FP16 checkpoint. Counted (optStyle): 12,853,473,280 (OPT paper: 13B).
   * @see https://huggingface.co/facebook/opt-13b/blob/main/config.json
   */
  public static readonly OPT_13B = new ModelArchitecture(optStyle({
    name: 'opt-13b',
    huggingFaceId: 'facebook/opt-13b',
  }, {
    layers: 40,
    hiddenSize: 5120,
    ffnDim: 20480,
    attentionHeads: 40,
    vocabSize: 50272,
    maxContext: 2048,
  }));

  /**
   * OPT-66B: 64 layers, hidden 9216, 72 heads (128 each), ffn_dim 36864, otherwise as OPT-13B.
   * Counted (optStyle): 65,719,701,504 (OPT paper: 66B).
   * @see https://huggingface.co/facebook/opt-66b/blob/main/config.json
   */
  public static readonly OPT_66B = new ModelArchitecture(optStyle({
    name: 'opt-66b',
    huggingFaceId: 'facebook/opt-66b',
  }, {
    layers: 64,
    hiddenSize: 9216,
    ffnDim: 36864,
    attentionHeads: 72,
    vocabSize: 50272,
    maxContext: 2048,
  }));

  /**
   * OPT-175B: 96 layers, hidden 12288, 96 heads (128 each), ffn_dim 49152 (4 x hidden, as every OPT),
   * otherwise as OPT-13B. Meta released its weights on request through metaseq, not on the Hugging Face Hub:
   * the numbers are the OPT paper's (Table 1), and 'facebook/opt-175b' is the name the published
   * measurements use, not a Hub repository (serving it needs the converted weights under that name).
   * Counted (optStyle): 174,604,468,224 (the paper's 175B).
   * @see https://arxiv.org/abs/2205.01068
   */
  public static readonly OPT_175B = new ModelArchitecture(optStyle({
    name: 'opt-175b',
    huggingFaceId: 'facebook/opt-175b',
  }, {
    layers: 96,
    hiddenSize: 12288,
    ffnDim: 49152,
    attentionHeads: 96,
    vocabSize: 50272,
    maxContext: 2048,
  }));

  /**
   * Qwen2.5-7B-Instruct: 28 layers, hidden 3584, intermediate 18944, 28 heads, 4 KV heads x 128 with
   * biases on q, k and v, vocab 152064, 32768 native context (131072 with YaRN), untied embeddings.
   * Counted: 7,615,616,512 (model card: 7.61B, 6.53B without embeddings). Its GPTQ-Int4 checkpoint
   * (Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4, the Mooncake A10 measurement) is this architecture with
   * `Precision.INT4` weights; it is not an alias here, since a preset serves its own `huggingFaceId`.
   * @see https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json
   */
  public static readonly QWEN2_5_7B = new ModelArchitecture(llamaStyle({
    name: 'qwen2.5-7b',
    huggingFaceId: 'Qwen/Qwen2.5-7B-Instruct',
  }, {
    layers: 28,
    hiddenSize: 3584,
    intermediateSize: 18944,
    attentionHeads: 28,
    kvHeads: 4,
    headDim: 128,
    vocabSize: 152064,
    maxContext: 32768,
    tieWordEmbeddings: false,
    qkvBias: true,
  }));

  /**
   * Qwen3-8B: 36 layers, hidden 4096, intermediate 12288, 32 heads, 8 KV heads x 128, vocab 151936,
   * 40960 native context (131072 with YaRN), untied embeddings, q/k norms. Counted: 8,190,735,360
   * (model card: 8.2B, 6.95B without embeddings).
   * @see https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
   */
  public static readonly QWEN3_8B = new ModelArchitecture(llamaStyle({
    name: 'qwen3-8b',
    huggingFaceId: 'Qwen/Qwen3-8B',
  }, {
    layers: 36,
    hiddenSize: 4096,
    intermediateSize: 12288,
    attentionHeads: 32,
    kvHeads: 8,
    headDim: 128,
    vocabSize: 151936,
    maxContext: 40960,
    tieWordEmbeddings: false,
    qkNorm: true,
  }));

  /**
   * DeepSeek-V2-Lite: 27 layers (the first dense, intermediate 10944), hidden 2048, 16 heads, MLA as
   * DeepSeek-V3's (kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128) but
   * without a query latent (q_lora_rank null), 64 routed experts (6 active, moe_intermediate 1408) plus
   * 2 shared, vocab 102400, untied embeddings, BF16 checkpoint. max_position_embeddings is 163840 (YaRN
   * x40 over 4096); the model card states 32k. Counted (deepseekMoeStyle): 15,706,484,224 (card: 15.7B);
   * active 2.4B is the card's, which leaves out the input embedding (counted: 2.66B with it, 2.45B without).
   * @see https://huggingface.co/deepseek-ai/DeepSeek-V2-Lite/blob/main/config.json
   */
  public static readonly DEEPSEEK_V2_LITE = new ModelArchitecture({
    ...deepseekMoeStyle({
      name: 'deepseek-v2-lite',
      huggingFaceId: 'deepseek-ai/DeepSeek-V2-Lite',
    }, {
      layers: 27,
      denseLayers: 1,
      hiddenSize: 2048,
      intermediateSize: 10944,
      moeIntermediateSize: 1408,
      routedExperts: 64,
      expertsPerToken: 6,
      sharedExperts: 2,
      attentionHeads: 16,
      kvLoraRank: 512,
      qkNopeHeadDim: 128,
      qkRopeHeadDim: 64,
      vHeadDim: 128,
      vocabSize: 102400,
      maxContext: 163840,
    }),
    parametersActive: 2.4e9, // model card: 2.4B activated
  });

  /**
   * Every preset.
   */
  public static all(): ModelArchitecture[] {
    return [
      ModelArchitecture.MISTRAL_7B,
      ModelArchitecture.LLAMA_3_1_8B,
      ModelArchitecture.LLAMA_3_3_70B,
      ModelArchitecture.LLAMA_3_1_405B,
      ModelArchitecture.MIXTRAL_8X7B,
      ModelArchitecture.MIXTRAL_8X22B,
      ModelArchitecture.LLAMA_2_70B,
      ModelArchitecture.CODELLAMA_34B,
      ModelArchitecture.QWEN3_14B,
      ModelArchitecture.QWEN3_32B,
      ModelArchitecture.QWEN3_235B_A22B,
      ModelArchitecture.DEEPSEEK_V3,
      ModelArchitecture.DEEPSEEK_R1,
      ModelArchitecture.GPT_OSS_120B,
      ModelArchitecture.GPT_OSS_20B,
      ModelArchitecture.KIMI_K2,
      // issue 36: the models of published prefill/decode measurements
      ModelArchitecture.OPT_13B,
      ModelArchitecture.OPT_66B,
      ModelArchitecture.OPT_175B,
      ModelArchitecture.QWEN2_5_7B,
      ModelArchitecture.QWEN3_8B,
      ModelArchitecture.DEEPSEEK_V2_LITE,
    ];
  }

  /**
   * A model the catalog does not list.
   *
   * @throws when a count is not a positive integer, kvHeads does not divide attentionHeads or contradicts
   * the attention kind, an MLA model lacks kvLoraRank / qkRopeHeadDim, or the expert numbers disagree
   */
  public static custom(props: ModelArchitectureProps): ModelArchitecture {
    return new ModelArchitecture(props);
  }

  /**
   * Looks a preset up by short name ('llama-3.3-70b') or Hugging Face id (its own or one of
   * `otherHuggingFaceIds`), case-insensitively.
   *
   * @throws when nothing matches; the message lists the known names
   */
  public static fromName(name: string): ModelArchitecture {
    const key = name.trim().toLowerCase();
    const found = ModelArchitecture.all().find(m => m.name === key
      || [m.huggingFaceId, ...m.otherHuggingFaceIds].some(id => id.toLowerCase() === key));
    if (!found) {
      const known = ModelArchitecture.all().map(m => m.name).join(', ');
      throw new Error(`Unknown model '${name}'; known: ${known} (or their Hugging Face ids), or use ModelArchitecture.custom({...})`);
    }
    return found;
  }

  /** Kebab-case short name. */
  public readonly name: string;
  /** Hugging Face repository id. */
  public readonly huggingFaceId: string;
  /** Other Hugging Face repositories with this architecture (empty when none). */
  public readonly otherHuggingFaceIds: string[];
  /** Total parameters. */
  public readonly parametersTotal: number;
  /** Parameters used per token. */
  public readonly parametersActive: number;
  /** Transformer layers. */
  public readonly layers: number;
  /** Hidden size. */
  public readonly hiddenSize: number;
  /** Query heads. */
  public readonly attentionHeads: number;
  /** K/V heads. */
  public readonly kvHeads: number;
  /** Per-head dimension. */
  public readonly headDim: number;
  /** Attention kind. */
  public readonly attentionKind: AttentionKind;
  /**
   * MLA latent dimension.
   * @default - undefined unless MLA
   */
  public readonly kvLoraRank?: number;
  /**
   * MLA rope key dimension.
   * @default - undefined unless MLA
   */
  public readonly qkRopeHeadDim?: number;
  /**
   * Sliding-window length.
   * @default - undefined: full attention everywhere
   */
  public readonly slidingWindow?: number;
  /** Layers that use the sliding window (0 when none). */
  public readonly slidingWindowLayers: number;
  /** Routed experts per MoE layer (0 for dense models). */
  public readonly expertsTotal: number;
  /** Routed experts per token (0 for dense models). */
  public readonly expertsActive: number;
  /** Shared experts per MoE layer. */
  public readonly expertsShared: number;
  /** Layers that carry experts (0 for dense models). */
  public readonly moeLayers: number;
  /** Parameters of all routed experts together (0 for dense models). */
  public readonly expertParameters: number;
  /** Vocabulary size. */
  public readonly vocabSize: number;
  /** Longest supported context, tokens. */
  public readonly maxContext: number;
  /** Dtype of the published checkpoint. */
  public readonly nativePrecision: Precision;
  /** Whether the model routes tokens to experts. */
  public readonly isMoe: boolean;
  /** Parameters outside the routed experts (attention, embeddings, dense and shared MLPs). */
  public readonly denseParameters: number;

  private constructor(props: ModelArchitectureProps) {
    const name = (props.name ?? '').trim();
    if (!/^[a-z0-9][a-z0-9.-]*$/.test(name)) {
      throw new Error(`'name' ('${props.name}') must be a lower-case kebab-case model name such as 'llama-3.3-70b'`);
    }
    const where = `model '${name}'`;
    if (!props.huggingFaceId || !/^[^\s/]+\/[^\s/]+$/.test(props.huggingFaceId)) {
      throw new Error(`${where}: 'huggingFaceId' ('${props.huggingFaceId}') must be 'owner/repo', e.g. 'meta-llama/Llama-3.3-70B-Instruct'`);
    }
    const otherHuggingFaceIds = [...(props.otherHuggingFaceIds ?? [])];
    for (const id of otherHuggingFaceIds) {
      if (!/^[^\s/]+\/[^\s/]+$/.test(id ?? '')) {
        throw new Error(`${where}: 'otherHuggingFaceIds' entry '${id}' must be 'owner/repo', e.g. 'mistralai/Mixtral-8x7B-v0.1'`);
      }
    }
    const ids = [props.huggingFaceId, ...otherHuggingFaceIds].map(id => id.toLowerCase());
    if (new Set(ids).size !== ids.length) {
      throw new Error(`${where}: 'otherHuggingFaceIds' (${otherHuggingFaceIds.join(', ')}) repeats an id or 'huggingFaceId'; list each repository once`);
    }
    const positiveInt = (field: string, value: number | undefined) => {
      if (!(value !== undefined && Number.isInteger(value) && value > 0)) {
        throw new Error(`${where}: '${field}' (${value}) must be a positive integer`);
      }
    };
    for (const [field, value] of [
      ['layers', props.layers], ['hiddenSize', props.hiddenSize], ['attentionHeads', props.attentionHeads],
      ['kvHeads', props.kvHeads], ['headDim', props.headDim], ['vocabSize', props.vocabSize], ['maxContext', props.maxContext],
    ] as Array<[string, number]>) {
      positiveInt(field, value);
    }
    if (!(Number.isFinite(props.parametersTotal) && props.parametersTotal > 0)) {
      throw new Error(`${where}: 'parametersTotal' (${props.parametersTotal}) must be a positive number`);
    }
    const parametersActive = props.parametersActive ?? props.parametersTotal;
    if (!(Number.isFinite(parametersActive) && parametersActive > 0 && parametersActive <= props.parametersTotal)) {
      throw new Error(`${where}: 'parametersActive' (${props.parametersActive}) must be positive and at most 'parametersTotal' (${props.parametersTotal})`);
    }

    // Attention.
    if (props.attentionHeads % props.kvHeads !== 0) {
      throw new Error(`${where}: 'kvHeads' (${props.kvHeads}) must divide 'attentionHeads' (${props.attentionHeads})`);
    }
    switch (props.attentionKind) {
      case AttentionKind.MHA:
      case AttentionKind.MLA:
        if (props.kvHeads !== props.attentionHeads) {
          throw new Error(`${where}: 'kvHeads' (${props.kvHeads}) must equal 'attentionHeads' (${props.attentionHeads}) for ${props.attentionKind}; use GQA for fewer K/V heads`);
        }
        break;
      case AttentionKind.MQA:
        if (props.kvHeads !== 1) {
          throw new Error(`${where}: 'kvHeads' (${props.kvHeads}) must be 1 for MQA; use GQA for ${props.kvHeads} K/V heads`);
        }
        break;
      case AttentionKind.GQA:
        if (props.kvHeads === props.attentionHeads || props.kvHeads === 1) {
          throw new Error(`${where}: GQA needs 1 < 'kvHeads' (${props.kvHeads}) < 'attentionHeads' (${props.attentionHeads}); use ${props.kvHeads === 1 ? 'MQA' : 'MHA'}`);
        }
        break;
      default:
        throw new Error(`${where}: unknown 'attentionKind' (${props.attentionKind}); use MHA, GQA, MQA or MLA`);
    }
    if (props.attentionKind === AttentionKind.MLA) {
      positiveInt('kvLoraRank (required for MLA)', props.kvLoraRank);
      positiveInt('qkRopeHeadDim (required for MLA)', props.qkRopeHeadDim);
    } else if (props.kvLoraRank !== undefined || props.qkRopeHeadDim !== undefined) {
      throw new Error(`${where}: 'kvLoraRank' / 'qkRopeHeadDim' only apply to MLA, not ${props.attentionKind}; remove them or set attentionKind MLA`);
    }

    // Sliding window.
    let slidingWindowLayers = 0;
    if (props.slidingWindow !== undefined) {
      positiveInt('slidingWindow', props.slidingWindow);
      slidingWindowLayers = props.slidingWindowLayers ?? props.layers;
      if (!(Number.isInteger(slidingWindowLayers) && slidingWindowLayers >= 1 && slidingWindowLayers <= props.layers)) {
        throw new Error(`${where}: 'slidingWindowLayers' (${props.slidingWindowLayers}) must be an integer from 1 to 'layers' (${props.layers})`);
      }
    } else if (props.slidingWindowLayers !== undefined && props.slidingWindowLayers !== 0) {
      throw new Error(`${where}: 'slidingWindowLayers' (${props.slidingWindowLayers}) needs 'slidingWindow'; set the window length in tokens`);
    }

    // Experts.
    if (props.expertsTotal !== undefined && !(Number.isInteger(props.expertsTotal) && props.expertsTotal >= 0)) {
      throw new Error(`${where}: 'expertsTotal' (${props.expertsTotal}) must be a non-negative integer; omit it (or use 0) for a dense model`);
    }
    // 0 routed experts reads as dense, so a resolved preset can be fed back into custom().
    const isMoe = (props.expertsTotal ?? 0) > 0;
    let moeLayers = 0;
    let expertParameters = 0;
    if (isMoe) {
      positiveInt('expertsActive', props.expertsActive);
      if (props.expertsActive! > props.expertsTotal!) {
        throw new Error(`${where}: 'expertsActive' (${props.expertsActive}) must not exceed 'expertsTotal' (${props.expertsTotal})`);
      }
      moeLayers = props.moeLayers ?? props.layers;
      if (!(Number.isInteger(moeLayers) && moeLayers >= 1 && moeLayers <= props.layers)) {
        throw new Error(`${where}: 'moeLayers' (${props.moeLayers}) must be an integer from 1 to 'layers' (${props.layers})`);
      }
      if (props.expertParameters === undefined || !(props.expertParameters > 0 && props.expertParameters < props.parametersTotal)) {
        throw new Error(`${where}: 'expertParameters' (${props.expertParameters}) must be positive and below 'parametersTotal' (${props.parametersTotal}); ` +
          'estimate it as moeLayers * expertsTotal * 3 * hiddenSize * moe_intermediate_size');
      }
      expertParameters = props.expertParameters;
      if (props.parametersActive === undefined) {
        throw new Error(`${where}: 'parametersActive' is required for an MoE model; take it from the model card`);
      }
    } else {
      for (const [field, value] of [
        ['expertsActive', props.expertsActive], ['moeLayers', props.moeLayers], ['expertParameters', props.expertParameters],
      ] as Array<[string, number | undefined]>) {
        if (value !== undefined && value !== 0) {
          throw new Error(`${where}: '${field}' (${value}) needs 'expertsTotal' > 0; set the routed expert count or remove '${field}'`);
        }
      }
    }
    const expertsShared = props.expertsShared ?? 0;
    if (!(Number.isInteger(expertsShared) && expertsShared >= 0)) {
      throw new Error(`${where}: 'expertsShared' (${props.expertsShared}) must be a non-negative integer`);
    }
    if (expertsShared > 0 && !isMoe) {
      throw new Error(`${where}: 'expertsShared' (${expertsShared}) needs 'expertsTotal'; a dense model has no shared experts`);
    }

    this.name = name;
    this.huggingFaceId = props.huggingFaceId;
    this.otherHuggingFaceIds = otherHuggingFaceIds;
    this.parametersTotal = props.parametersTotal;
    this.parametersActive = parametersActive;
    this.layers = props.layers;
    this.hiddenSize = props.hiddenSize;
    this.attentionHeads = props.attentionHeads;
    this.kvHeads = props.kvHeads;
    this.headDim = props.headDim;
    this.attentionKind = props.attentionKind;
    this.kvLoraRank = props.kvLoraRank;
    this.qkRopeHeadDim = props.qkRopeHeadDim;
    this.slidingWindow = props.slidingWindow;
    this.slidingWindowLayers = slidingWindowLayers;
    this.expertsTotal = props.expertsTotal ?? 0;
    this.expertsActive = props.expertsActive ?? 0;
    this.expertsShared = expertsShared;
    this.moeLayers = moeLayers;
    this.expertParameters = expertParameters;
    this.vocabSize = props.vocabSize;
    this.maxContext = props.maxContext;
    this.nativePrecision = props.nativePrecision ?? Precision.BF16;
    this.isMoe = isMoe;
    this.denseParameters = props.parametersTotal - expertParameters;
  }

  /** The short name. */
  public toString(): string {
    return this.name;
  }
}

/**
 * The DeepSeek-V3 / R1 config.json numbers (identical in both repositories).
 * Parameters: 671B total of the main model (the 685B on the Hub adds the 14B multi-token-prediction
 * module, which serving without speculative decoding does not load), 37B activated.
 */
function deepseekV3Like(id: { name: string; huggingFaceId: string }): ModelArchitectureProps {
  return {
    ...id,
    parametersTotal: 671e9,
    parametersActive: 37e9,
    layers: 61,
    hiddenSize: 7168,
    attentionHeads: 128,
    kvHeads: 128,
    headDim: 192, // qk_nope_head_dim 128 + qk_rope_head_dim 64 (v_head_dim 128)
    attentionKind: AttentionKind.MLA,
    kvLoraRank: 512,
    qkRopeHeadDim: 64,
    expertsTotal: 256,
    expertsActive: 8,
    expertsShared: 1,
    moeLayers: 58, // first_k_dense_replace: 3
    expertParameters: 58 * 256 * 3 * 7168 * 2048, // 653.9e9
    vocabSize: 129280,
    maxContext: 163840,
    nativePrecision: Precision.FP8,
  };
}

/**
 * The config.json numbers of a Llama-style decoder: RMSNorm, rotary attention (biases on q, k and v
 * only with `qkvBias`), and a SwiGLU MLP (gate, up, down) or, with `experts`, that many SwiGLU experts
 * per layer behind a router (Llama 2 / 3, Code Llama, Qwen2.5 and Qwen3 dense, Mistral, Mixtral).
 */
interface LlamaStyleConfig {
  /** `num_hidden_layers`. */
  readonly layers: number;
  /** `hidden_size`. */
  readonly hiddenSize: number;
  /** `intermediate_size` (of each expert for Mixtral). */
  readonly intermediateSize: number;
  /** `num_attention_heads`. */
  readonly attentionHeads: number;
  /** `num_key_value_heads`. */
  readonly kvHeads: number;
  /** `head_dim`, else hidden_size / num_attention_heads. */
  readonly headDim: number;
  /** `vocab_size`. */
  readonly vocabSize: number;
  /** `max_position_embeddings`. */
  readonly maxContext: number;
  /** `tie_word_embeddings`: one matrix for the input embedding and the LM head. */
  readonly tieWordEmbeddings: boolean;
  /** Qwen3: an RMSNorm over each query and key head (`q_norm`, `k_norm`, headDim weights each a layer). */
  readonly qkNorm?: boolean;
  /** Qwen2 / Qwen2.5: biases on the q, k and v projections (none on o or the MLP). */
  readonly qkvBias?: boolean;
  /** `num_local_experts`; absent for a dense model. */
  readonly experts?: number;
  /** `num_experts_per_tok`. */
  readonly expertsPerToken?: number;
}

/**
 * A preset's props from its config.json numbers, with the parameters counted from them: attention
 * (Q and O of heads x headDim, K and V of kvHeads x headDim, plus the Q, K and V biases with `qkvBias`),
 * the MLP or the experts and their router, the embeddings (twice when untied) and the RMSNorm weights.
 * For every preset built here the count equals the checkpoint's published safetensors total to the parameter.
 */
function llamaStyle(
  id: { name: string; huggingFaceId: string; otherHuggingFaceIds?: string[] },
  c: LlamaStyleConfig,
): ModelArchitectureProps {
  const attention = c.layers * c.hiddenSize * c.headDim * 2 * (c.attentionHeads + c.kvHeads)
    + (c.qkvBias ? c.layers * c.headDim * (c.attentionHeads + 2 * c.kvHeads) : 0);
  const mlp = 3 * c.hiddenSize * c.intermediateSize;
  const experts = c.experts ?? 0;
  const expertParameters = c.layers * experts * mlp;
  const router = c.layers * experts * c.hiddenSize;
  const denseMlp = experts > 0 ? 0 : c.layers * mlp;
  const embeddings = c.vocabSize * c.hiddenSize * (c.tieWordEmbeddings ? 1 : 2);
  const norms = (2 * c.layers + 1) * c.hiddenSize + (c.qkNorm ? 2 * c.layers * c.headDim : 0);
  const parametersTotal = attention + denseMlp + expertParameters + router + embeddings + norms;
  const moe = experts > 0
    ? {
      expertsTotal: experts,
      expertsActive: c.expertsPerToken,
      moeLayers: c.layers,
      expertParameters,
      parametersActive: parametersTotal - expertParameters * (1 - c.expertsPerToken! / experts),
    }
    : {};
  return {
    ...id,
    parametersTotal,
    layers: c.layers,
    hiddenSize: c.hiddenSize,
    attentionHeads: c.attentionHeads,
    kvHeads: c.kvHeads,
    headDim: c.headDim,
    attentionKind: c.kvHeads === c.attentionHeads ? AttentionKind.MHA : c.kvHeads === 1 ? AttentionKind.MQA : AttentionKind.GQA,
    vocabSize: c.vocabSize,
    maxContext: c.maxContext,
    ...moe,
  };
}

/**
 * The config.json numbers of an OPT decoder (facebook/opt-*; the 13B, 66B and 175B have
 * word_embed_proj_dim = hidden_size, so no input or output projection).
 */
interface OptConfig {
  /** `num_hidden_layers`. */
  readonly layers: number;
  /** `hidden_size`. */
  readonly hiddenSize: number;
  /** `ffn_dim`: the width of the MLP's one hidden layer. */
  readonly ffnDim: number;
  /** `num_attention_heads` (every head has its own K and V). */
  readonly attentionHeads: number;
  /** `vocab_size`. */
  readonly vocabSize: number;
  /** `max_position_embeddings`. */
  readonly maxContext: number;
}

/**
 * A preset's props from an OPT config, with the parameters counted the way the checkpoint stores them:
 * per layer the q, k, v and out projections with biases, a ReLU MLP of two matrices (fc1 hidden x
 * ffn_dim, fc2 back, with biases; not the three matrices of a SwiGLU MLP), and two LayerNorms (weight
 * and bias); then the token embedding (tied to the LM head, so counted once), the learned positional
 * embedding (max_position_embeddings + 2 rows: OPT offsets positions by 2) and the final LayerNorm.
 * The sizing reads only the total: weight bytes are parametersTotal x bytes per weight, and a step's
 * FLOPs are 2 x parametersActive per token, so the two-matrix MLP must be in this count.
 */
function optStyle(id: { name: string; huggingFaceId: string }, c: OptConfig): ModelArchitectureProps {
  const h = c.hiddenSize;
  const attention = 4 * (h * h + h);
  const mlp = 2 * h * c.ffnDim + c.ffnDim + h;
  const layerNorms = 2 * 2 * h;
  const embeddings = c.vocabSize * h + (c.maxContext + 2) * h;
  const parametersTotal = c.layers * (attention + mlp + layerNorms) + embeddings + 2 * h;
  return {
    ...id,
    parametersTotal,
    layers: c.layers,
    hiddenSize: h,
    attentionHeads: c.attentionHeads,
    kvHeads: c.attentionHeads,
    headDim: h / c.attentionHeads,
    attentionKind: AttentionKind.MHA,
    vocabSize: c.vocabSize,
    maxContext: c.maxContext,
    nativePrecision: Precision.FP16,
  };
}

/**
 * The config.json numbers of a DeepSeek-V2-style MoE decoder with multi-head latent attention.
 */
interface DeepseekMoeConfig {
  /** `num_hidden_layers`. */
  readonly layers: number;
  /** `first_k_dense_replace`: leading layers with a dense MLP instead of experts. */
  readonly denseLayers: number;
  /** `hidden_size`. */
  readonly hiddenSize: number;
  /** `intermediate_size` of the dense layers' MLP. */
  readonly intermediateSize: number;
  /** `moe_intermediate_size` of each routed and shared expert. */
  readonly moeIntermediateSize: number;
  /** `n_routed_experts`. */
  readonly routedExperts: number;
  /** `num_experts_per_tok`. */
  readonly expertsPerToken: number;
  /** `n_shared_experts`. */
  readonly sharedExperts: number;
  /** `num_attention_heads`. */
  readonly attentionHeads: number;
  /**
   * `q_lora_rank`: the query latent.
   * @default - none (q_lora_rank null): one q_proj of hidden x heads x (nope + rope)
   */
  readonly qLoraRank?: number;
  /** `kv_lora_rank`. */
  readonly kvLoraRank: number;
  /** `qk_nope_head_dim`. */
  readonly qkNopeHeadDim: number;
  /** `qk_rope_head_dim`. */
  readonly qkRopeHeadDim: number;
  /** `v_head_dim`. */
  readonly vHeadDim: number;
  /** `vocab_size` (untied embeddings). */
  readonly vocabSize: number;
  /** `max_position_embeddings`. */
  readonly maxContext: number;
}

/**
 * A preset's props from a DeepSeek-V2-style config, with the parameters counted from it: per layer MLA
 * (q_proj, or q_a / q_a_layernorm / q_b with a query latent; kv_a_proj_with_mqa of kv_lora + rope,
 * kv_a_layernorm, kv_b_proj to heads x (nope + v), o_proj; no biases) and two RMSNorms; the dense
 * layers' SwiGLU MLP; in every other layer the routed experts, the shared experts and the router; the
 * untied embeddings and the final norm. Active counts every parameter but the unselected routed experts.
 */
function deepseekMoeStyle(id: { name: string; huggingFaceId: string }, c: DeepseekMoeConfig): ModelArchitectureProps {
  const h = c.hiddenSize;
  const qk = c.qkNopeHeadDim + c.qkRopeHeadDim;
  const query = c.qLoraRank === undefined
    ? h * c.attentionHeads * qk
    : h * c.qLoraRank + c.qLoraRank + c.qLoraRank * c.attentionHeads * qk;
  const attention = query + h * (c.kvLoraRank + c.qkRopeHeadDim) + c.kvLoraRank
    + c.kvLoraRank * c.attentionHeads * (c.qkNopeHeadDim + c.vHeadDim) + c.attentionHeads * c.vHeadDim * h;
  const moeLayers = c.layers - c.denseLayers;
  const expert = 3 * h * c.moeIntermediateSize;
  const expertParameters = moeLayers * c.routedExperts * expert;
  const parametersTotal = c.layers * (attention + 2 * h)
    + c.denseLayers * 3 * h * c.intermediateSize
    + expertParameters + moeLayers * (c.sharedExperts * expert + c.routedExperts * h)
    + 2 * c.vocabSize * h + h;
  return {
    ...id,
    parametersTotal,
    parametersActive: parametersTotal - expertParameters * (1 - c.expertsPerToken / c.routedExperts),
    layers: c.layers,
    hiddenSize: h,
    attentionHeads: c.attentionHeads,
    kvHeads: c.attentionHeads,
    headDim: qk,
    attentionKind: AttentionKind.MLA,
    kvLoraRank: c.kvLoraRank,
    qkRopeHeadDim: c.qkRopeHeadDim,
    expertsTotal: c.routedExperts,
    expertsActive: c.expertsPerToken,
    expertsShared: c.sharedExperts,
    moeLayers,
    expertParameters,
    vocabSize: c.vocabSize,
    maxContext: c.maxContext,
  };
}
