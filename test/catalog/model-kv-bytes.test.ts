import { AttentionKind, ModelArchitecture } from '../../src';

/** KV bytes per token from the catalog's fields alone (no sizing code): K and V per KV head, or one MLA latent. */
function kvBytesPerToken(m: ModelArchitecture, bytesPerElement: number): number {
  if (m.attentionKind === AttentionKind.MLA) {
    return m.layers * (m.kvLoraRank! + m.qkRopeHeadDim!) * bytesPerElement;
  }
  return 2 * m.layers * m.kvHeads * m.headDim * bytesPerElement;
}

describe('KV cache bytes per token from catalog fields (published worked values)', () => {
  test('Mistral-7B BF16: 131,072 B/token', () => {
    expect(kvBytesPerToken(ModelArchitecture.MISTRAL_7B, 2)).toBe(131_072);
  });

  test('Llama-3-70B architecture (Llama-3.3-70B) BF16: 327,680 B/token', () => {
    expect(kvBytesPerToken(ModelArchitecture.LLAMA_3_3_70B, 2)).toBe(327_680);
  });

  test('DeepSeek-V3 MLA (61 layers, 512 + 64) at 2 bytes: 70,272 B/token', () => {
    expect(kvBytesPerToken(ModelArchitecture.DEEPSEEK_V3, 2)).toBe(70_272);
    expect(kvBytesPerToken(ModelArchitecture.DEEPSEEK_R1, 2)).toBe(70_272);
    expect(kvBytesPerToken(ModelArchitecture.KIMI_K2, 2)).toBe(70_272);
  });

  test('Llama-3.1-8B shares Mistral-7B\'s KV shape; 405B is 126/32 of it', () => {
    expect(kvBytesPerToken(ModelArchitecture.LLAMA_3_1_8B, 2)).toBe(131_072);
    expect(kvBytesPerToken(ModelArchitecture.LLAMA_3_1_405B, 2)).toBe(131_072 * 126 / 32);
  });

  test('the models of the real vLLM runs (issue 21): 2 x layers x 8 KV heads x 128 x 2 bytes', () => {
    // Llama-2-70B has Llama-3-70B's attention shape (80 layers, 8 KV heads x 128): the published 327,680
    expect(kvBytesPerToken(ModelArchitecture.LLAMA_2_70B, 2)).toBe(327_680);
    expect(kvBytesPerToken(ModelArchitecture.CODELLAMA_34B, 2)).toBe(2 * 48 * 8 * 128 * 2); // 196,608
    expect(kvBytesPerToken(ModelArchitecture.QWEN3_14B, 2)).toBe(2 * 40 * 8 * 128 * 2); // 163,840
    expect(kvBytesPerToken(ModelArchitecture.MIXTRAL_8X22B, 2)).toBe(2 * 56 * 8 * 128 * 2); // 229,376
    // Mixtral-8x7B has Mistral-7B's attention: 131,072
    expect(kvBytesPerToken(ModelArchitecture.MIXTRAL_8X7B, 2)).toBe(131_072);
  });

  test('the models of the published P/D measurements (issue 36), by hand', () => {
    // OPT-13B, multi-head: K and V of 40 heads x 128 = 5120 per layer, 40 layers, FP16
    expect(kvBytesPerToken(ModelArchitecture.OPT_13B, 2)).toBe(2 * 40 * 5120 * 2); // 819,200
    expect(kvBytesPerToken(ModelArchitecture.OPT_66B, 2)).toBe(2 * 64 * 9216 * 2); // 2,359,296
    expect(kvBytesPerToken(ModelArchitecture.OPT_175B, 2)).toBe(2 * 96 * 12288 * 2); // 4,718,592
    // Qwen2.5-7B: 28 layers x 4 KV heads x 128; Qwen3-8B: 36 layers x 8 KV heads x 128
    expect(kvBytesPerToken(ModelArchitecture.QWEN2_5_7B, 2)).toBe(2 * 28 * 4 * 128 * 2); // 57,344
    expect(kvBytesPerToken(ModelArchitecture.QWEN3_8B, 2)).toBe(2 * 36 * 8 * 128 * 2); // 147,456
    // DeepSeek-V2-Lite MLA: one 512-wide latent plus a 64-wide rope key per layer, 27 layers
    expect(kvBytesPerToken(ModelArchitecture.DEEPSEEK_V2_LITE, 2)).toBe(27 * (512 + 64) * 2); // 31,104
  });

  test('Mooncake\'s H800 transfer sizes match Qwen3-8B\'s KV at BF16', () => {
    // kvxfer-mooncake-vllm-h800-qwen3-8b: 32,768 prompt tokens moved 4.50 GB; 147,456 B/token gives 4.83e9 B = 4.50 GiB
    const bytes = 32_768 * kvBytesPerToken(ModelArchitecture.QWEN3_8B, 2);
    expect(bytes / 1024 ** 3).toBeCloseTo(4.5, 2);
  });

  test('MLA stores far less than the same model would with one K/V per head', () => {
    const m = ModelArchitecture.DEEPSEEK_V3;
    const perHead = 2 * m.layers * m.kvHeads * m.headDim * 2;
    expect(kvBytesPerToken(m, 2) * 50).toBeLessThan(perHead);
  });
});
