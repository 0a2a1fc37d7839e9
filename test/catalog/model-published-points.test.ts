import * as fs from 'fs';
import * as path from 'path';
import { AttentionKind, ModelArchitecture, Precision } from '../../src';

// The models of the published prefill/decode measurements in ../shared/validation/pd-published-calibration.json
// (issue 36), with the numbers of their config.json (the OPT paper's Table 1 for OPT-175B, which has none
// on the Hub), written out here independently of the catalog, and their published parameter counts. Each
// architecture's parameters are counted below the way its checkpoint stores them, by code that shares
// nothing with the catalog's helpers.

/** An OPT config.json (facebook/opt-*). */
interface OptConfig {
  readonly num_hidden_layers: number;
  readonly hidden_size: number;
  readonly ffn_dim: number;
  readonly num_attention_heads: number;
  readonly vocab_size: number;
  readonly max_position_embeddings: number;
}

/** OPT: biased q/k/v/out and fc1/fc2 (ReLU, two matrices), two LayerNorms a layer, tied embeddings, positions + 2. */
function countOpt(c: OptConfig): number {
  const h = c.hidden_size;
  const perLayer = (4 * h * h + 4 * h) + (h * c.ffn_dim + c.ffn_dim) + (c.ffn_dim * h + h) + 2 * (h + h);
  return c.num_hidden_layers * perLayer + c.vocab_size * h + (c.max_position_embeddings + 2) * h + (h + h);
}

/** A Qwen2 / Qwen3 config.json. */
interface QwenConfig {
  readonly num_hidden_layers: number;
  readonly hidden_size: number;
  readonly intermediate_size: number;
  readonly num_attention_heads: number;
  readonly num_key_value_heads: number;
  readonly head_dim: number;
  readonly vocab_size: number;
  readonly max_position_embeddings: number;
  readonly tie_word_embeddings: boolean;
  /** Qwen2: biases on q, k and v. */
  readonly qkv_bias: boolean;
  /** Qwen3: q_norm and k_norm of head_dim each. */
  readonly qk_norm: boolean;
}

function countQwen(c: QwenConfig): number {
  const q = c.num_attention_heads * c.head_dim;
  const kv = c.num_key_value_heads * c.head_dim;
  const attention = c.hidden_size * (q + 2 * kv) + q * c.hidden_size + (c.qkv_bias ? q + 2 * kv : 0) + (c.qk_norm ? 2 * c.head_dim : 0);
  const perLayer = attention + 3 * c.hidden_size * c.intermediate_size + 2 * c.hidden_size;
  return c.num_hidden_layers * perLayer + c.vocab_size * c.hidden_size * (c.tie_word_embeddings ? 1 : 2) + c.hidden_size;
}

/** DeepSeek-V2-Lite's config.json. */
const DEEPSEEK_V2_LITE_CONFIG = {
  num_hidden_layers: 27,
  first_k_dense_replace: 1,
  hidden_size: 2048,
  intermediate_size: 10944,
  moe_intermediate_size: 1408,
  n_routed_experts: 64,
  num_experts_per_tok: 6,
  n_shared_experts: 2,
  num_attention_heads: 16,
  q_lora_rank: null,
  kv_lora_rank: 512,
  qk_nope_head_dim: 128,
  qk_rope_head_dim: 64,
  v_head_dim: 128,
  vocab_size: 102400,
  max_position_embeddings: 163840,
  tie_word_embeddings: false,
} as const;

/** Total, active and routed-expert parameters of DeepSeek-V2-Lite, module by module (modeling_deepseek.py). */
function countDeepseekV2Lite(): { total: number; active: number; inputEmbedding: number; routed: number } {
  const c = DEEPSEEK_V2_LITE_CONFIG;
  const h = c.hidden_size;
  const heads = c.num_attention_heads;
  const qProj = h * heads * (c.qk_nope_head_dim + c.qk_rope_head_dim); // no q_lora: one q_proj
  const kvAProj = h * (c.kv_lora_rank + c.qk_rope_head_dim);
  const kvANorm = c.kv_lora_rank;
  const kvBProj = c.kv_lora_rank * heads * (c.qk_nope_head_dim + c.v_head_dim);
  const oProj = heads * c.v_head_dim * h;
  const layerNorms = 2 * h;
  const attentionLayer = qProj + kvAProj + kvANorm + kvBProj + oProj + layerNorms;
  const denseMlp = 3 * h * c.intermediate_size;
  const expert = 3 * h * c.moe_intermediate_size;
  const moeLayers = c.num_hidden_layers - c.first_k_dense_replace;
  const routed = moeLayers * c.n_routed_experts * expert;
  const shared = moeLayers * c.n_shared_experts * expert;
  const gate = moeLayers * c.n_routed_experts * h;
  const inputEmbedding = c.vocab_size * h;
  const total = c.num_hidden_layers * attentionLayer + c.first_k_dense_replace * denseMlp + routed + shared + gate
    + 2 * inputEmbedding + h;
  const active = total - routed + moeLayers * c.num_experts_per_tok * expert;
  return { total, active, inputEmbedding, routed };
}

const OPT: Array<[ModelArchitecture, string, OptConfig, number, number]> = [
  // model, Hugging Face id, config, exact count, published total
  [ModelArchitecture.OPT_13B, 'facebook/opt-13b', {
    num_hidden_layers: 40, hidden_size: 5120, ffn_dim: 20480, num_attention_heads: 40, vocab_size: 50272, max_position_embeddings: 2048,
  }, 12_853_473_280, 12.85e9],
  [ModelArchitecture.OPT_66B, 'facebook/opt-66b', {
    num_hidden_layers: 64, hidden_size: 9216, ffn_dim: 36864, num_attention_heads: 72, vocab_size: 50272, max_position_embeddings: 2048,
  }, 65_719_701_504, 65.7e9],
  // OPT paper (arXiv 2205.01068) Table 1: 96 layers, 96 heads, d_model 12288 (ffn 4 x d_model)
  [ModelArchitecture.OPT_175B, 'facebook/opt-175b', {
    num_hidden_layers: 96, hidden_size: 12288, ffn_dim: 49152, num_attention_heads: 96, vocab_size: 50272, max_position_embeddings: 2048,
  }, 174_604_468_224, 175e9],
];

const QWEN: Array<[ModelArchitecture, string, QwenConfig, number, number]> = [
  [ModelArchitecture.QWEN2_5_7B, 'Qwen/Qwen2.5-7B-Instruct', {
    num_hidden_layers: 28,
    hidden_size: 3584,
    intermediate_size: 18944,
    num_attention_heads: 28,
    num_key_value_heads: 4,
    head_dim: 128,
    vocab_size: 152064,
    max_position_embeddings: 32768,
    tie_word_embeddings: false,
    qkv_bias: true,
    qk_norm: false,
  }, 7_615_616_512, 7.61e9], // model card: 7.61B (6.53B non-embedding)
  [ModelArchitecture.QWEN3_8B, 'Qwen/Qwen3-8B', {
    num_hidden_layers: 36,
    hidden_size: 4096,
    intermediate_size: 12288,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    head_dim: 128,
    vocab_size: 151936,
    max_position_embeddings: 40960,
    tie_word_embeddings: false,
    qkv_bias: false,
    qk_norm: true,
  }, 8_190_735_360, 8.19e9], // model card: 8.2B (6.95B non-embedding)
];

const within = (value: number, published: number, fraction: number) =>
  expect(Math.abs(value - published) / published).toBeLessThan(fraction);

describe('OPT presets (DistServe\'s models)', () => {
  test.each(OPT.map(([m, id, c, exact, published]) => [id, m, c, exact, published] as const))(
    '%s: config numbers, multi-head attention, FP16', (_, model, c) => {
      expect([model.layers, model.hiddenSize, model.attentionHeads, model.vocabSize, model.maxContext])
        .toEqual([c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.vocab_size, c.max_position_embeddings]);
      expect(model.attentionKind).toBe(AttentionKind.MHA);
      expect(model.kvHeads).toBe(c.num_attention_heads);
      expect(model.headDim).toBe(c.hidden_size / c.num_attention_heads);
      expect(model.isMoe).toBe(false);
      expect(model.nativePrecision).toBe(Precision.FP16);
    });

  test.each(OPT.map(([m, id, c, exact, published]) => [id, m, c, exact, published] as const))(
    '%s: parameters counted with a two-matrix FFN match the published total within 2%%', (_, model, c, exact, published) => {
      // GIVEN the checkpoint's parameters counted from config.json
      // THEN the catalog carries that exact count, within 2% of the published total
      expect(countOpt(c)).toBe(exact);
      expect(model.parametersTotal).toBe(exact);
      expect(model.parametersActive).toBe(exact);
      within(model.parametersTotal, published, 0.02);
    });

  test('a gated three-matrix MLP would overcount OPT by a third', () => {
    // The sizing multiplies parametersTotal by the bytes per weight and parametersActive by 2 FLOPs per
    // token: a SwiGLU-style count (3 x hidden x ffn_dim) would put 25% more weight bytes and FLOPs on OPT-13B.
    const [, , c] = OPT[0];
    const threeMatrix = countOpt(c) + c.num_hidden_layers * c.hidden_size * c.ffn_dim;
    expect(threeMatrix / ModelArchitecture.OPT_13B.parametersTotal).toBeGreaterThan(1.3);
    // AND the name-sized totals hold: 13B, 66B
    within(ModelArchitecture.OPT_13B.parametersTotal, 13e9, 0.02);
    within(ModelArchitecture.OPT_66B.parametersTotal, 66e9, 0.02);
  });
});

describe('Qwen presets (Mooncake\'s models)', () => {
  test.each(QWEN.map(([m, id, c, exact, published]) => [id, m, c, exact, published] as const))(
    '%s: config numbers and the exact parameter count', (_, model, c, exact, published) => {
      expect([model.layers, model.hiddenSize, model.attentionHeads, model.kvHeads, model.headDim, model.vocabSize, model.maxContext])
        .toEqual([c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.vocab_size,
          c.max_position_embeddings]);
      expect(model.attentionKind).toBe(AttentionKind.GQA);
      expect(countQwen(c)).toBe(exact);
      expect(model.parametersTotal).toBe(exact);
      within(model.parametersTotal, published, 0.02);
      // the model cards' non-embedding counts: 6.53B and 6.95B
      within(model.parametersTotal - 2 * c.vocab_size * c.hidden_size, model === ModelArchitecture.QWEN2_5_7B ? 6.53e9 : 6.95e9, 0.01);
    });
});

describe('DeepSeek-V2-Lite preset', () => {
  test('config numbers: MLA without a query latent, 64 routed experts (6 active) plus 2 shared, 1 dense layer', () => {
    const m = ModelArchitecture.DEEPSEEK_V2_LITE;
    const c = DEEPSEEK_V2_LITE_CONFIG;
    expect(m.attentionKind).toBe(AttentionKind.MLA);
    expect([m.layers, m.hiddenSize, m.attentionHeads, m.kvHeads]).toEqual([27, 2048, 16, 16]);
    expect([m.kvLoraRank, m.qkRopeHeadDim, m.headDim]).toEqual([c.kv_lora_rank, c.qk_rope_head_dim, c.qk_nope_head_dim + c.qk_rope_head_dim]);
    expect([m.expertsTotal, m.expertsActive, m.expertsShared, m.moeLayers]).toEqual([64, 6, 2, 26]);
    expect(m.expertParameters).toBe(26 * 64 * 3 * 2048 * 1408);
    expect([m.vocabSize, m.maxContext]).toEqual([c.vocab_size, c.max_position_embeddings]);
    expect(m.nativePrecision).toBe(Precision.BF16);
  });

  test('15.7B total and 2.4B active, as published', () => {
    const counted = countDeepseekV2Lite();
    const m = ModelArchitecture.DEEPSEEK_V2_LITE;
    // GIVEN the parameters counted module by module
    expect(counted.total).toBe(15_706_484_224);
    // THEN the catalog's total is that count, within 2% of the card's 15.7B
    expect(m.parametersTotal).toBe(counted.total);
    within(m.parametersTotal, 15.7e9, 0.02);
    expect(m.expertParameters).toBe(counted.routed);
    // AND the active count is the card's 2.4B: the counted 2.66B less the 0.21B input embedding (a lookup, no FLOPs)
    within(m.parametersActive, 2.4e9, 0.02);
    within(counted.active - counted.inputEmbedding, 2.4e9, 0.03);
  });
});

describe('ModelArchitecture.fromName for the published measurements', () => {
  const all: Array<[ModelArchitecture, string]> = [
    ...OPT.map(([m, id]): [ModelArchitecture, string] => [m, id]),
    ...QWEN.map(([m, id]): [ModelArchitecture, string] => [m, id]),
    [ModelArchitecture.DEEPSEEK_V2_LITE, 'deepseek-ai/DeepSeek-V2-Lite'],
  ];

  test.each(all.map(([m, id]) => [m.name, id, m] as const))('%s resolves by name and as %s', (name, id, model) => {
    expect(ModelArchitecture.fromName(name)).toBe(model);
    expect(ModelArchitecture.fromName(id)).toBe(model);
    expect(ModelArchitecture.fromName(id.toUpperCase())).toBe(model);
    expect(model.huggingFaceId).toBe(id);
  });

  const pointsFile = path.resolve(__dirname, '..', '..', '..', 'shared', 'validation', 'pd-published-calibration.json');
  test('every point that names a catalogued model by its Hugging Face id resolves to it', () => {
    if (!fs.existsSync(pointsFile)) {
      console.warn(`SKIPPED the published points' model check: ${pointsFile} is absent (a fresh clone has no ../shared; CI has it)`);
      return;
    }
    const points = JSON.parse(fs.readFileSync(pointsFile, 'utf8')) as Array<{ id: string; model: string }>;
    const resolved = new Set<string>();
    for (const { model } of points) {
      const found = ModelArchitecture.all().find(m => m.huggingFaceId.toLowerCase() === model.toLowerCase());
      if (found) {
        expect(ModelArchitecture.fromName(model)).toBe(found);
        resolved.add(found.name);
      }
    }
    // THEN the DistServe, Mooncake and SGLang points all find their model
    expect([...resolved].sort()).toEqual(['deepseek-r1', 'deepseek-v3', 'opt-13b', 'opt-175b', 'opt-66b', 'qwen3-8b']);
    // AND the Mooncake A10 point's GPTQ checkpoint is the Qwen2.5-7B preset with INT4 weights (not an
    // alias: a preset serves its own huggingFaceId)
    expect(points.map(p => p.model)).toContain('Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4');
    expect(ModelArchitecture.fromName('Qwen/Qwen2.5-7B-Instruct')).toBe(ModelArchitecture.QWEN2_5_7B);
    expect(Precision.of('gptq')).toBe(Precision.INT4);
  });
});
