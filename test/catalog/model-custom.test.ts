import { AttentionKind, ModelArchitecture, ModelArchitectureProps, Precision } from '../../src';

const dense: ModelArchitectureProps = {
  name: 'tiny-1b',
  huggingFaceId: 'acme/Tiny-1B',
  parametersTotal: 1.2e9,
  layers: 16,
  hiddenSize: 2048,
  attentionHeads: 32,
  kvHeads: 8,
  headDim: 64,
  attentionKind: AttentionKind.GQA,
  vocabSize: 32000,
  maxContext: 8192,
};

const moe: ModelArchitectureProps = {
  ...dense,
  name: 'tiny-moe',
  parametersTotal: 8e9,
  parametersActive: 2e9,
  expertsTotal: 16,
  expertsActive: 2,
  expertParameters: 7e9,
};

describe('ModelArchitecture.custom', () => {
  test('resolves the defaults of a dense model', () => {
    const m = ModelArchitecture.custom(dense);
    expect(m.parametersActive).toBe(1.2e9);
    expect(m.isMoe).toBe(false);
    expect(m.denseParameters).toBe(1.2e9);
    expect(m.expertsTotal).toBe(0);
    expect(m.slidingWindowLayers).toBe(0);
    expect(m.nativePrecision).toBe(Precision.BF16);
    expect(m.otherHuggingFaceIds).toEqual([]);
  });

  test('resolves the defaults of an MoE model', () => {
    const m = ModelArchitecture.custom(moe);
    expect(m.isMoe).toBe(true);
    expect(m.moeLayers).toBe(16);
    expect(m.denseParameters).toBe(1e9);
    expect(m.expertsShared).toBe(0);
  });

  test('a sliding window defaults to every layer', () => {
    expect(ModelArchitecture.custom({ ...dense, slidingWindow: 4096 }).slidingWindowLayers).toBe(16);
  });

  test.each([
    ['name', { name: 'Tiny 1B' }, /'name' \('Tiny 1B'\) must be a lower-case kebab-case model name/],
    ['huggingFaceId', { huggingFaceId: 'tiny' }, /'huggingFaceId' \('tiny'\) must be 'owner\/repo'/],
    ['otherHuggingFaceIds entry', { otherHuggingFaceIds: ['tiny base'] }, /'otherHuggingFaceIds' entry 'tiny base' must be 'owner\/repo'/],
    ['otherHuggingFaceIds repeating the id', { otherHuggingFaceIds: ['ACME/tiny-1b'] }, /'otherHuggingFaceIds' \(ACME\/tiny-1b\) repeats an id or 'huggingFaceId'/],
    ['layers', { layers: 0 }, /'layers' \(0\) must be a positive integer/],
    ['headDim', { headDim: 64.5 }, /'headDim' \(64\.5\) must be a positive integer/],
    ['parametersTotal', { parametersTotal: -1 }, /'parametersTotal' \(-1\) must be a positive number/],
    ['parametersActive', { parametersActive: 2e9 }, /'parametersActive' \(2000000000\) must be positive and at most 'parametersTotal'/],
    ['kvHeads divisor', { kvHeads: 6 }, /'kvHeads' \(6\) must divide 'attentionHeads' \(32\)/],
    ['GQA with all heads', { kvHeads: 32 }, /GQA needs 1 < 'kvHeads' \(32\) < 'attentionHeads' \(32\); use MHA/],
    ['GQA with one head', { kvHeads: 1 }, /GQA needs 1 < 'kvHeads' \(1\) .*; use MQA/],
    ['MHA', { attentionKind: AttentionKind.MHA }, /'kvHeads' \(8\) must equal 'attentionHeads' \(32\) for MHA/],
    ['MQA', { attentionKind: AttentionKind.MQA }, /'kvHeads' \(8\) must be 1 for MQA/],
    ['MLA without latent', { attentionKind: AttentionKind.MLA, kvHeads: 32 }, /'kvLoraRank \(required for MLA\)' \(undefined\) must be a positive integer/],
    ['MLA without rope dim', { attentionKind: AttentionKind.MLA, kvHeads: 32, kvLoraRank: 512 }, /'qkRopeHeadDim \(required for MLA\)'/],
    ['latent on GQA', { kvLoraRank: 512 }, /'kvLoraRank' \/ 'qkRopeHeadDim' only apply to MLA, not GQA/],
    ['slidingWindowLayers', { slidingWindow: 128, slidingWindowLayers: 17 }, /'slidingWindowLayers' \(17\) must be an integer from 1 to 'layers' \(16\)/],
    ['window layers without window', { slidingWindowLayers: 4 }, /'slidingWindowLayers' \(4\) needs 'slidingWindow'/],
    ['expertsActive without experts', { expertsActive: 2 }, /'expertsActive' \(2\) needs 'expertsTotal' > 0/],
    ['shared experts on a dense model', { expertsShared: 1 }, /'expertsShared' \(1\) needs 'expertsTotal'/],
    ['negative experts', { expertsTotal: -8 }, /'expertsTotal' \(-8\) must be a non-negative integer/],
  ])('rejects a dense model with a bad %s', (_, patch, message) => {
    expect(() => ModelArchitecture.custom({ ...dense, ...patch } as ModelArchitectureProps)).toThrow(message);
  });

  test.each([
    ['expertsActive missing', { expertsActive: undefined }, /'expertsActive' \(undefined\) must be a positive integer/],
    ['expertsActive above total', { expertsActive: 17 }, /'expertsActive' \(17\) must not exceed 'expertsTotal' \(16\)/],
    ['moeLayers', { moeLayers: 20 }, /'moeLayers' \(20\) must be an integer from 1 to 'layers' \(16\)/],
    ['expertParameters missing', { expertParameters: undefined }, /'expertParameters' \(undefined\) must be positive and below 'parametersTotal'/],
    ['expertParameters too big', { expertParameters: 9e9 }, /'expertParameters' \(9000000000\) must be positive and below/],
    ['parametersActive missing', { parametersActive: undefined }, /'parametersActive' is required for an MoE model/],
  ])('rejects an MoE model with a bad %s', (_, patch, message) => {
    expect(() => ModelArchitecture.custom({ ...moe, ...patch } as ModelArchitectureProps)).toThrow(message);
  });
});
