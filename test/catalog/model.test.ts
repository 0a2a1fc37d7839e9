import { AttentionKind, ModelArchitecture, ModelArchitectureProps, Precision } from '../../src';

describe('ModelArchitecture presets', () => {
  test('include every model the issue names, each once', () => {
    const names = ModelArchitecture.all().map(m => m.name);
    expect(new Set(names).size).toBe(names.length);
    for (const name of ['mistral-7b', 'llama-3.1-8b', 'llama-3.3-70b', 'llama-3.1-405b', 'mixtral-8x7b', 'qwen3-32b',
      'qwen3-235b-a22b', 'deepseek-v3', 'deepseek-r1', 'gpt-oss-120b', 'gpt-oss-20b', 'kimi-k2',
      // issue 21: the models of the real vLLM runs in ../shared/validation
      'qwen3-14b', 'codellama-34b', 'llama-2-70b', 'mixtral-8x22b',
      // issue 36: the models of the published prefill/decode measurements in ../shared/validation
      'opt-13b', 'opt-66b', 'opt-175b', 'qwen2.5-7b', 'qwen3-8b', 'deepseek-v2-lite']) {
      expect(names).toContain(name);
    }
  });

  test.each(ModelArchitecture.all().map(m => [m.name, m]))('%s passes the validation of custom() with its own numbers', (_, m) => {
    // GIVEN a preset's resolved fields
    // WHEN they are fed back through the public factory
    const copy = ModelArchitecture.custom({ ...m } as ModelArchitectureProps);
    // THEN the copy resolves to the same numbers
    expect({ ...copy }).toEqual({ ...m });
  });

  test.each(ModelArchitecture.all().map(m => [m.name, m]))('%s is internally consistent', (_, m) => {
    expect(m.attentionHeads % m.kvHeads).toBe(0);
    expect(m.parametersActive).toBeLessThanOrEqual(m.parametersTotal);
    expect(m.denseParameters).toBe(m.parametersTotal - m.expertParameters);
    expect(m.denseParameters).toBeGreaterThan(0);
    expect(m.isMoe).toBe(m.expertsTotal > 0);
    if (m.attentionKind === AttentionKind.MLA) {
      expect(m.kvLoraRank).toBeGreaterThan(0);
      expect(m.qkRopeHeadDim).toBeGreaterThan(0);
    }
    if (!m.isMoe) {
      expect(m.parametersActive).toBe(m.parametersTotal);
      expect(m.expertParameters).toBe(0);
    }
  });

  test.each(ModelArchitecture.all().filter(m => m.isMoe).map(m => [m.name, m]))(
    '%s: the model card\'s active count matches dense + a routed share of the experts', (_, m) => {
      // Active = everything outside the routed experts + expertsActive/expertsTotal of them. Model cards differ
      // on whether the input embedding counts as active (gpt-oss leaves it out), hence the 20% band.
      const estimate = m.denseParameters + m.expertParameters * m.expertsActive / m.expertsTotal;
      expect(Math.abs(estimate - m.parametersActive) / m.parametersActive).toBeLessThan(0.2);
    });

  test('DeepSeek-R1 and Kimi-K2 share the DeepSeek-V3 attention', () => {
    for (const m of [ModelArchitecture.DEEPSEEK_R1, ModelArchitecture.KIMI_K2]) {
      expect(m.attentionKind).toBe(AttentionKind.MLA);
      expect(m.layers).toBe(ModelArchitecture.DEEPSEEK_V3.layers);
      expect(m.kvLoraRank).toBe(ModelArchitecture.DEEPSEEK_V3.kvLoraRank);
      expect(m.qkRopeHeadDim).toBe(ModelArchitecture.DEEPSEEK_V3.qkRopeHeadDim);
    }
    // Kimi-K2: 384 experts, 64 heads, 1 dense layer
    expect(ModelArchitecture.KIMI_K2.expertsTotal).toBe(384);
    expect(ModelArchitecture.KIMI_K2.attentionHeads).toBe(64);
    expect(ModelArchitecture.KIMI_K2.layers - ModelArchitecture.KIMI_K2.moeLayers).toBe(1);
    // DeepSeek-V3: 58 of 61 layers carry experts
    expect(ModelArchitecture.DEEPSEEK_V3.moeLayers).toBe(58);
  });

  test('gpt-oss uses a 128-token window on half its layers and MXFP4 experts', () => {
    for (const m of [ModelArchitecture.GPT_OSS_120B, ModelArchitecture.GPT_OSS_20B]) {
      expect(m.slidingWindow).toBe(128);
      expect(m.slidingWindowLayers * 2).toBe(m.layers);
      expect(m.kvHeads).toBe(8);
      expect(m.headDim).toBe(64);
      expect(m.nativePrecision).toBe(Precision.FP4);
    }
  });

  test('checkpoint precisions', () => {
    expect(ModelArchitecture.LLAMA_3_3_70B.nativePrecision).toBe(Precision.BF16);
    // OPT was released in FP16 (torch_dtype float16); DeepSeek-V2-Lite in BF16
    for (const m of [ModelArchitecture.OPT_13B, ModelArchitecture.OPT_66B, ModelArchitecture.OPT_175B]) {
      expect(m.nativePrecision).toBe(Precision.FP16);
    }
    expect(ModelArchitecture.DEEPSEEK_V2_LITE.nativePrecision).toBe(Precision.BF16);
    expect(ModelArchitecture.DEEPSEEK_V3.nativePrecision).toBe(Precision.FP8);
    expect(ModelArchitecture.KIMI_K2.nativePrecision).toBe(Precision.FP8);
  });
});

describe('ModelArchitecture.fromName', () => {
  test('accepts the short name and the Hugging Face id, case-insensitively', () => {
    for (const m of ModelArchitecture.all()) {
      expect(ModelArchitecture.fromName(m.name)).toBe(m);
      expect(ModelArchitecture.fromName(m.name.toUpperCase())).toBe(m);
      expect(ModelArchitecture.fromName(m.huggingFaceId)).toBe(m);
      expect(ModelArchitecture.fromName(m.huggingFaceId.toLowerCase())).toBe(m);
      for (const other of m.otherHuggingFaceIds) {
        expect(ModelArchitecture.fromName(other)).toBe(m);
        expect(ModelArchitecture.fromName(other.toUpperCase())).toBe(m);
      }
    }
  });

  test('base checkpoints resolve to the instruct preset of the same architecture', () => {
    expect(ModelArchitecture.fromName('mistralai/Mixtral-8x7B-v0.1')).toBe(ModelArchitecture.MIXTRAL_8X7B);
    expect(ModelArchitecture.fromName('mistralai/Mixtral-8x22B-v0.1')).toBe(ModelArchitecture.MIXTRAL_8X22B);
    expect(ModelArchitecture.fromName('mistralai/Mixtral-8x22B-Instruct-v0.1')).toBe(ModelArchitecture.MIXTRAL_8X22B);
  });

  test('no Hugging Face id names two presets', () => {
    const ids = ModelArchitecture.all().flatMap(m => [m.huggingFaceId, ...m.otherHuggingFaceIds].map(id => id.toLowerCase()));
    expect(new Set(ids).size).toBe(ids.length);
  });

  test('an unknown name lists the known ones', () => {
    expect(() => ModelArchitecture.fromName('llama-4-maverick')).toThrow(
      /Unknown model 'llama-4-maverick'; known: mistral-7b, llama-3\.1-8b, .*kimi-k2, .*deepseek-v2-lite \(or their Hugging Face ids\), or use ModelArchitecture\.custom/,
    );
  });
});
