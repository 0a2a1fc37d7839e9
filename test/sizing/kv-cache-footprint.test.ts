import { denseModel } from './fixtures';
import { AttentionKind, ModelArchitecture, Precision } from '../../src/catalog';
import { KvCacheFootprint } from '../../src/sizing';

describe('KvCacheFootprint', () => {
  test.each([
    // Published worked values (REFERENCE.md section 5): 2 x layers x kvHeads x headDim x bytes; MLA (512 + 64) x layers x bytes.
    ['mistral-7b', ModelArchitecture.MISTRAL_7B, 131_072],
    ['llama-3.3-70b (Llama-3-70B architecture)', ModelArchitecture.LLAMA_3_3_70B, 327_680],
    ['deepseek-v3 (MLA)', ModelArchitecture.DEEPSEEK_V3, 70_272],
  ])('BF16 bytes per token of %s match the published value', (_name, model, published) => {
    // GIVEN a BF16 KV cache
    // WHEN it is sized
    const kv = KvCacheFootprint.of({ model, precision: Precision.BF16 });
    // THEN bytes per token equal the published figure
    expect(kv.bytesPerToken).toBe(published);
  });

  test('MHA stores K and V for every head, MQA for one', () => {
    // GIVEN the same model shape as MHA (32 KV heads) and as MQA (1 KV head)
    const mha = denseModel({ attentionKind: AttentionKind.MHA, kvHeads: 32 });
    const mqa = denseModel({ attentionKind: AttentionKind.MQA, kvHeads: 1 });
    // WHEN sized in FP16
    const a = KvCacheFootprint.of({ model: mha, precision: Precision.FP16 });
    const b = KvCacheFootprint.of({ model: mqa, precision: Precision.FP16 });
    // THEN MHA is 2 x 8 layers x 32 x 128 x 2 bytes and MQA is 32 times smaller
    expect(a.bytesPerToken).toBe(2 * 8 * 32 * 128 * 2);
    expect(b.bytesPerToken * 32).toBe(a.bytesPerToken);
  });

  test('FP8 halves the bytes of BF16', () => {
    for (const model of ModelArchitecture.all()) {
      const bf16 = KvCacheFootprint.of({ model, precision: Precision.BF16 });
      const fp8 = KvCacheFootprint.of({ model, precision: Precision.FP8 });
      expect(fp8.bytesPerToken * 2).toBe(bf16.bytesPerToken);
    }
  });

  test('sliding-window layers of gpt-oss stop growing past the window', () => {
    // GIVEN gpt-oss-120b: 18 of 36 layers keep a 128-token window
    const kv = KvCacheFootprint.of({ model: ModelArchitecture.GPT_OSS_120B, precision: Precision.BF16 });
    const perLayer = 2 * 8 * 64 * 2;
    // THEN short sequences pay every layer, long ones only the full-attention layers beyond the window
    expect(kv.bytesPerSequence(100)).toBe(100 * 36 * perLayer);
    expect(kv.bytesPerSequence(10_000)).toBe(10_000 * 18 * perLayer + 128 * 18 * perLayer);
    expect(kv.bytesPerSequence(10_000)).toBeLessThan(10_000 * kv.bytesPerToken);
    // AND with 16-token blocks the window holds one extra block
    expect(kv.bytesPerSequence(10_000, 16)).toBe(10_000 * 18 * perLayer + (128 + 16) * 18 * perLayer);
  });

  test('whole blocks: a 17-token sequence takes two 16-token blocks', () => {
    const kv = KvCacheFootprint.of({ model: ModelArchitecture.LLAMA_3_1_8B, precision: Precision.BF16 });
    expect(kv.bytesPerSequence(17, 16)).toBe(32 * kv.bytesPerToken);
  });

  test('tensor parallelism splits KV heads, then replicates them; MLA is replicated', () => {
    // GIVEN Llama-3.3-70B with 8 KV heads and DeepSeek-V3 with MLA
    const gqa = KvCacheFootprint.of({ model: ModelArchitecture.LLAMA_3_3_70B, precision: Precision.BF16 });
    const mla = KvCacheFootprint.of({ model: ModelArchitecture.DEEPSEEK_V3, precision: Precision.BF16 });
    // THEN a rank holds 1/TP up to TP 8, then one head (1/8), and pipeline stages divide by PP
    expect(gqa.rankShare(4)).toBeCloseTo(1 / 4);
    expect(gqa.rankShare(16)).toBeCloseTo(1 / 8);
    expect(gqa.replicationFactor(16)).toBe(2);
    expect(gqa.replicationFactor(4)).toBe(1);
    expect(gqa.rankShare(8, 2)).toBeCloseTo(1 / 16);
    // AND MLA keeps the whole latent on every TP rank
    expect(mla.rankShare(8)).toBe(1);
    expect(mla.replicationFactor(8)).toBe(8);
  });

  test.each([Precision.INT4, Precision.INT8, Precision.FP4])('a KV cache in %s is rejected with the usable precisions', precision => {
    expect(() => KvCacheFootprint.of({ model: ModelArchitecture.MISTRAL_7B, precision }))
      .toThrow(new RegExp(`'kvCachePrecision' \\(${precision.name}\\) cannot hold a KV cache in vLLM; use one of bf16, fp16, fp8`));
  });
});
