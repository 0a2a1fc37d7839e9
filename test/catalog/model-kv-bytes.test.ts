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

  test('MLA stores far less than the same model would with one K/V per head', () => {
    const m = ModelArchitecture.DEEPSEEK_V3;
    const perHead = 2 * m.layers * m.kvHeads * m.headDim * 2;
    expect(kvBytesPerToken(m, 2) * 50).toBeLessThan(perHead);
  });
});
