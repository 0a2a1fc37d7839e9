import * as fs from 'fs';
import * as path from 'path';
import { AttentionKind, ModelArchitecture } from '../../src';

// The six models of the real vLLM 0.15.1 runs in ../shared/validation (issue 21), each with the numbers of
// its Hugging Face config.json, written out here independently of the catalog, and its published parameter
// count. Each config number was read from two public copies of the config.json (see the catalog's comments
// and the commit message); each published count was found as the checkpoint's exact safetensors total.

/** A Llama-style decoder's config.json numbers. */
interface Config {
  readonly num_hidden_layers: number;
  readonly hidden_size: number;
  readonly intermediate_size: number;
  readonly num_attention_heads: number;
  readonly num_key_value_heads: number;
  readonly head_dim: number;
  readonly vocab_size: number;
  readonly max_position_embeddings: number;
  readonly tie_word_embeddings: boolean;
  /** Qwen3's per-head RMSNorm on queries and keys. */
  readonly qk_norm?: boolean;
  readonly num_local_experts?: number;
  readonly num_experts_per_tok?: number;
}

interface Case {
  readonly model: ModelArchitecture;
  readonly config: Config;
  /** Published total parameters. */
  readonly total: number;
  /** Published active parameters (MoE). */
  readonly active?: number;
}

const CASES: Array<[string, Case]> = [
  ['meta-llama/Llama-3.1-8B-Instruct', {
    model: ModelArchitecture.LLAMA_3_1_8B,
    config: {
      num_hidden_layers: 32,
      hidden_size: 4096,
      intermediate_size: 14336,
      num_attention_heads: 32,
      num_key_value_heads: 8,
      head_dim: 128,
      vocab_size: 128256,
      max_position_embeddings: 131072,
      tie_word_embeddings: false,
    },
    total: 8.03e9, // model card: 8.03B (8,030,261,248)
  }],
  ['Qwen/Qwen3-14B', {
    model: ModelArchitecture.QWEN3_14B,
    config: {
      num_hidden_layers: 40,
      hidden_size: 5120,
      intermediate_size: 17408,
      num_attention_heads: 40,
      num_key_value_heads: 8,
      head_dim: 128,
      vocab_size: 151936,
      max_position_embeddings: 40960,
      tie_word_embeddings: false,
      qk_norm: true,
    },
    total: 14.8e9, // model card: 14.8B (14,768,307,200)
  }],
  ['codellama/CodeLlama-34b-Instruct-hf', {
    model: ModelArchitecture.CODELLAMA_34B,
    config: {
      num_hidden_layers: 48,
      hidden_size: 8192,
      intermediate_size: 22016,
      num_attention_heads: 64,
      num_key_value_heads: 8,
      head_dim: 128,
      vocab_size: 32000,
      max_position_embeddings: 16384,
      tie_word_embeddings: false,
    },
    total: 33.7e9, // 33,743,970,304
  }],
  ['meta-llama/Llama-2-70b-hf', {
    model: ModelArchitecture.LLAMA_2_70B,
    config: {
      num_hidden_layers: 80,
      hidden_size: 8192,
      intermediate_size: 28672,
      num_attention_heads: 64,
      num_key_value_heads: 8,
      head_dim: 128,
      vocab_size: 32000,
      max_position_embeddings: 4096,
      tie_word_embeddings: false,
    },
    total: 69e9, // 68,976,648,192 (named "70B")
  }],
  ['mistralai/Mixtral-8x7B-Instruct-v0.1', {
    model: ModelArchitecture.MIXTRAL_8X7B,
    config: {
      num_hidden_layers: 32,
      hidden_size: 4096,
      intermediate_size: 14336,
      num_attention_heads: 32,
      num_key_value_heads: 8,
      head_dim: 128,
      vocab_size: 32000,
      max_position_embeddings: 32768,
      tie_word_embeddings: false,
      num_local_experts: 8,
      num_experts_per_tok: 2,
    },
    total: 46.7e9, // model card: 46.7B (46,702,792,704)
    active: 12.9e9, // Mistral: 12.9B per token
  }],
  ['mistralai/Mixtral-8x22B-Instruct-v0.1', {
    model: ModelArchitecture.MIXTRAL_8X22B,
    config: {
      num_hidden_layers: 56,
      hidden_size: 6144,
      intermediate_size: 16384,
      num_attention_heads: 48,
      num_key_value_heads: 8,
      head_dim: 128,
      vocab_size: 32768,
      max_position_embeddings: 65536,
      tie_word_embeddings: false,
      num_local_experts: 8,
      num_experts_per_tok: 2,
    },
    total: 141e9, // Mistral: 141B (140,630,071,296)
    active: 39e9, // Mistral: 39B active
  }],
];

/** Parameters of a Llama-style decoder, counted from its config.json: total and active. */
function count(c: Config): { total: number; active: number } {
  const perLayerAttention = c.hidden_size * c.head_dim * (2 * c.num_attention_heads + 2 * c.num_key_value_heads);
  const mlp = 3 * c.hidden_size * c.intermediate_size;
  const experts = c.num_local_experts ?? 1;
  const router = c.num_local_experts ? c.hidden_size * experts : 0;
  const perLayerNorms = 2 * c.hidden_size + (c.qk_norm ? 2 * c.head_dim : 0);
  const perLayer = perLayerAttention + experts * mlp + router + perLayerNorms;
  const embeddings = c.vocab_size * c.hidden_size * (c.tie_word_embeddings ? 1 : 2);
  const total = c.num_hidden_layers * perLayer + embeddings + c.hidden_size;
  const idle = c.num_local_experts ? c.num_hidden_layers * (experts - c.num_experts_per_tok!) * mlp : 0;
  return { total, active: total - idle };
}

describe('the models of the real vLLM runs (../shared/validation)', () => {
  test.each(CASES)('%s: the catalog carries its config.json numbers', (_, { model, config }) => {
    expect(model.layers).toBe(config.num_hidden_layers);
    expect(model.hiddenSize).toBe(config.hidden_size);
    expect(model.attentionHeads).toBe(config.num_attention_heads);
    expect(model.kvHeads).toBe(config.num_key_value_heads);
    expect(model.headDim).toBe(config.head_dim);
    expect(model.vocabSize).toBe(config.vocab_size);
    expect(model.maxContext).toBe(config.max_position_embeddings);
    expect(model.attentionKind).toBe(AttentionKind.GQA);
    expect(model.expertsTotal).toBe(config.num_local_experts ?? 0);
    expect(model.expertsActive).toBe(config.num_experts_per_tok ?? 0);
    if (config.num_local_experts) {
      // every Mixtral layer is an MoE layer; the experts are gate, up and down projections
      expect(model.moeLayers).toBe(config.num_hidden_layers);
      expect(model.expertParameters).toBe(config.num_hidden_layers * config.num_local_experts * 3 * config.hidden_size * config.intermediate_size);
    }
  });

  test.each(CASES)('%s: the parameters counted from config.json are within 1%% of the published total', (_, { model, config, total, active }) => {
    // GIVEN the parameters counted from config.json
    const counted = count(config);
    // THEN they match the published total, and so does the catalog's
    expect(Math.abs(counted.total - total) / total).toBeLessThan(0.01);
    expect(Math.abs(model.parametersTotal - total) / total).toBeLessThan(0.01);
    expect(Math.abs(model.parametersTotal - counted.total) / counted.total).toBeLessThan(0.001);
    // AND the active parameters of MoE models match the published active count
    const published = active ?? total;
    expect(Math.abs(counted.active - published) / published).toBeLessThan(0.01);
    expect(Math.abs(model.parametersActive - published) / published).toBeLessThan(0.01);
  });

  test('the new presets count exactly the checkpoints\' safetensors totals', () => {
    expect(ModelArchitecture.QWEN3_14B.parametersTotal).toBe(14_768_307_200);
    expect(ModelArchitecture.CODELLAMA_34B.parametersTotal).toBe(33_743_970_304);
    expect(ModelArchitecture.LLAMA_2_70B.parametersTotal).toBe(68_976_648_192);
    expect(ModelArchitecture.MIXTRAL_8X22B.parametersTotal).toBe(140_630_071_296);
  });

  const runsFile = path.resolve(__dirname, '..', '..', '..', 'shared', 'validation', 'vllm-runs-calibration.json');
  test('every run names a model the catalog resolves', () => {
    if (!fs.existsSync(runsFile)) {
      console.warn(`SKIPPED the runs' model check: ${runsFile} is absent (a fresh clone has no ../shared; CI has it)`);
      return;
    }
    const runs = JSON.parse(fs.readFileSync(runsFile, 'utf8')) as Array<{ model: string }>;
    const expected = new Map(CASES.map(([id, c]) => [id.toLowerCase(), c.model]));
    expected.set('mistralai/mixtral-8x7b-v0.1', ModelArchitecture.MIXTRAL_8X7B);
    expected.set('mistralai/mixtral-8x22b-v0.1', ModelArchitecture.MIXTRAL_8X22B);
    expect(runs.length).toBeGreaterThan(0);
    for (const run of runs) {
      expect(ModelArchitecture.fromName(run.model)).toBe(expected.get(run.model.toLowerCase()));
    }
  });
});
