import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src/catalog';
import { costModel, EngineCostConfig } from '../../src/engine';
import { costSections, planFor, poolTemplate } from '../../src/engine/engine-config-builder';

// Requires the addon (`npx projen engine`, or DISAGG_ENGINE_ADDON). The engine's cost model
// (engine/include/disagg/cost_model.h) and the roofline (src/sizing/roofline.ts) state the same
// expert-parallel all-to-all; these tests hold them to the same numbers.

const DEEPSEEK = {
  model: ModelArchitecture.DEEPSEEK_V3,
  weightPrecision: Precision.FP8,
  kvCachePrecision: Precision.FP8,
  maxContext: 8192,
};

async function engineAndRoofline(type: AcceleratedInstanceType, ep: number, perRank: number, context: number) {
  const plan = planFor(DEEPSEEK, type, 1, ep);
  const sections = costSections(plan, Precision.FP8);
  const config: EngineCostConfig = { ...sections };
  const report = await costModel(config, { decodeBatches: [perRank * ep], contextTokensPerSequence: context, prefillTokens: [128] });
  return { plan, sections, engine: report.decode[0], roofline: plan.roofline.decodeStep(perRank * ep, context) };
}

describe('expert-parallel cost: engine and roofline agree', () => {
  test.each([
    ['p5en.48xlarge', 8],
    ['p5en.48xlarge', 16],
    ['p5en.48xlarge', 32],
    ['p6-b200.48xlarge', 16],
  ])('DeepSeek-V3 FP8 decode on %s at EP %d: the same all-to-all seconds', async (name, ep) => {
    const type = AcceleratedInstanceType.fromName(name);
    // GIVEN the cost sections of one EP group (TP 1, one attention rank per accelerator)
    const { sections, engine, roofline } = await engineAndRoofline(type, ep, 64, 1536);
    expect(sections.parallel).toEqual({ tensorParallel: 1, dataParallel: ep, expertParallel: ep, redundantExperts: 0 });
    expect(sections.hardware.scaleUpDomain).toBe(8);
    expect(sections.hardware.scaleOutBytesPerSecond).toBe((type.networkBandwidthGbps * 1e9) / 8 / 8);
    expect(sections.model.moeLayers).toBe(58);
    expect(sections.efficiency).toEqual({ allToAll: 0.5, expertImbalance: 1.4, allToAllOverlap: 0 });
    // WHEN the engine and the roofline time 64 sequences per rank
    // THEN both charge the same all-to-all, to rounding, and it is part of the engine's communication
    expect(roofline.allToAllSeconds).toBeGreaterThan(0);
    expect(Math.abs(engine.allToAllSeconds - roofline.allToAllSeconds) / roofline.allToAllSeconds).toBeLessThan(1e-9);
    expect(engine.communicationSeconds).toBeCloseTo(engine.allToAllSeconds, 12);
    // AND memory is within 5%. (Compute is not compared: the engine charges MLA attention in its dense
    //     form, 4 x layers x heads x head dim per pair, the roofline in the absorbed form on the latent,
    //     so the engine's decode compute is ~30% higher here; decode is bound by memory and the all-to-all.)
    expect(Math.abs(engine.memorySeconds - roofline.memorySeconds) / roofline.memorySeconds).toBeLessThan(0.05);
    expect(engine.totalSeconds).toBeGreaterThan(engine.allToAllSeconds);
  });

  test('the engine charges no all-to-all without expert parallelism', async () => {
    const plan = planFor(DEEPSEEK, AcceleratedInstanceType.P5EN_48XLARGE, 8);
    const report = await costModel(costSections(plan, Precision.FP8), { decodeBatches: [64] });
    expect(report.decode[0].allToAllSeconds).toBe(0);
    expect(plan.roofline.decodeStep(64, 4096).allToAllSeconds).toBe(0);
  });

  test('an EP pool template holds one group: accelerators, sequences and step budget of all its ranks', () => {
    const plan = planFor(DEEPSEEK, AcceleratedInstanceType.P5EN_48XLARGE, 1, 16);
    const t = poolTemplate(plan, Precision.FP8, undefined, { maxNumSeqs: 128, maxNumBatchedTokens: 4096 });
    expect(t.label).toBe('p5en.48xlarge ep16');
    expect(t.acceleratorsPerReplica).toBe(16);
    expect(t.maxConcurrencyPerReplica).toBe(128 * 16);
    expect(t.maxBatchedTokens).toBe(4096 * 16);
    expect(t.efficiency).toMatchObject({ allToAll: 0.5, expertImbalance: 1.4 });
    expect(() => planFor(DEEPSEEK, AcceleratedInstanceType.P5EN_48XLARGE, 2, 15)).toThrow(/'expertParallel' \(15\) must be a multiple of the tensor-parallel size 2/);
  });

  test('the engine refuses an EP size that splits experts, naming the field and the fix', async () => {
    const plan = planFor(DEEPSEEK, AcceleratedInstanceType.P5EN_48XLARGE, 1, 16);
    const sections = costSections(plan, Precision.FP8);
    const bad = { ...sections, parallel: { tensorParallel: 1, dataParallel: 24, expertParallel: 24 } };
    await expect(costModel(bad)).rejects.toThrow(/'parallel.expertParallel' \(24\) is out of range; pass a divisor of model.experts \+ parallel.redundantExperts \(256\): each rank must hold a whole number of experts/);
    const noEfa = { ...sections, hardware: { ...sections.hardware, scaleOutBytesPerSecond: 0 } };
    await expect(costModel(noEfa)).rejects.toThrow(/'hardware.scaleOutBytesPerSecond' \(0\).*spans scale-up domains of 8/);
  });
});
