import { ModelArchitecture, Precision } from '../../src/catalog';
import { Parallelism, WeightFootprint } from '../../src/sizing';

describe('WeightFootprint', () => {
  test('BF16 Llama-3.3-70B takes 2 bytes per parameter: 141.2 GB', () => {
    // GIVEN the 70.6B-parameter model card figure
    const w = WeightFootprint.of({ model: ModelArchitecture.LLAMA_3_3_70B, weightPrecision: Precision.BF16 });
    // THEN every weight is BF16
    expect(w.totalBytes).toBeCloseTo(141.2e9, -8);
    expect(w.description).toBe('all weights bf16');
    expect(w.expertBytes).toBe(0);
  });

  test('defaults to the native checkpoint precision', () => {
    const w = WeightFootprint.of({ model: ModelArchitecture.DEEPSEEK_V3 });
    expect(w.expertPrecision).toBe(Precision.FP8);
    expect(w.densePrecision).toBe(Precision.FP8);
    expect(w.totalBytes).toBeCloseTo(ModelArchitecture.DEEPSEEK_V3.parametersTotal, -6);
  });

  test('gpt-oss-120b MXFP4: routed experts 4.25-bit, other weights BF16, about the 65 GB checkpoint', () => {
    // GIVEN gpt-oss-120b at its native MXFP4
    const model = ModelArchitecture.GPT_OSS_120B;
    const w = WeightFootprint.of({ model });
    // THEN only the experts are 4-bit
    expect(w.expertPrecision).toBe(Precision.FP4);
    expect(w.densePrecision).toBe(Precision.BF16);
    expect(w.description).toBe('routed experts fp4, other weights bf16');
    expect(w.expertBytes).toBeCloseTo(model.expertParameters * 4.25 / 8, -3);
    expect(w.denseBytes).toBeCloseTo(model.denseParameters * 2, -3);
    // AND the total is near the published ~65 GB (60.8 GiB) checkpoint
    expect(w.totalBytes / 1e9).toBeGreaterThan(60);
    expect(w.totalBytes / 1e9).toBeLessThan(70);
  });

  test('denseWeightPrecision overrides the MoE default and is ignored for dense models', () => {
    const moe = WeightFootprint.of({ model: ModelArchitecture.GPT_OSS_120B, weightPrecision: Precision.FP4, denseWeightPrecision: Precision.FP8 });
    expect(moe.densePrecision).toBe(Precision.FP8);
    const dense = WeightFootprint.of({ model: ModelArchitecture.QWEN3_32B, weightPrecision: Precision.FP4, denseWeightPrecision: Precision.BF16 });
    expect(dense.densePrecision).toBe(Precision.FP4);
  });

  test('expert parallelism places whole experts, counting redundant ones', () => {
    // GIVEN DeepSeek-V3 FP8 with 256 routed experts over TP 1 x DP 8 = EP 8 and 32 redundant experts
    const w = WeightFootprint.of({ model: ModelArchitecture.DEEPSEEK_V3 });
    const ep = Parallelism.of({ tensorParallel: 1, dataParallel: 8, expertParallel: true, redundantExperts: 32 });
    // THEN each rank holds all dense weights plus (256 + 32) / 8 = 36 experts
    expect(w.bytesPerRank(ep)).toBeCloseTo(w.denseBytes + 36 * w.bytesPerExpert, -3);
    // AND without redundancy, 32 experts
    const plain = Parallelism.of({ tensorParallel: 1, dataParallel: 8, expertParallel: true });
    expect(w.bytesPerRank(ep)).toBeGreaterThan(w.bytesPerRank(plain));
  });

  test('property: higher TP or PP never raises per-rank weights', () => {
    for (const model of ModelArchitecture.all()) {
      const w = WeightFootprint.of({ model });
      let previous = Infinity;
      for (const tp of [1, 2, 4, 8, 16, 32, 64]) {
        for (const pp of [1, 2, 4]) {
          const bytes = w.bytesPerRank(Parallelism.of({ tensorParallel: tp, pipelineParallel: pp }));
          expect(bytes).toBeLessThanOrEqual(w.bytesPerRank(Parallelism.of({ tensorParallel: tp })));
        }
        const bytes = w.bytesPerRank(Parallelism.of({ tensorParallel: tp }));
        expect(bytes).toBeLessThanOrEqual(previous);
        previous = bytes;
      }
    }
  });
});
