import { defaultProps, find, synthInference } from './util';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src';
import { plan, plannerConfig } from '../../src/engine';

// Requires the engine addon (`npx projen engine`): `sizeFor` runs the planner at synth time.

const SIZING = {
  slo: { ttftSeconds: 2, tpotSeconds: 0.05 },
  workload: { inputTokens: 1024, outputTokens: 128, simulatedRequests: 100 },
  maxAccelerators: 4,
};

describe('DisaggregatedInference sizeFor', () => {
  test('sets both pools from the planner\'s best split', async () => {
    // GIVEN pools with an instance type only, and an SLO and workload to size for
    const p5en = AcceleratedInstanceType.P5EN_48XLARGE;
    const props = defaultProps({ prefill: { instanceType: p5en }, decode: { instanceType: p5en }, sizeFor: SIZING });
    // WHEN the construct is synthesized
    const { inference, manifests } = synthInference(props);
    // THEN its pools are the best disaggregated candidate of the same search run through the async API
    const expected = await plan(plannerConfig({
      model: ModelArchitecture.LLAMA_3_3_70B,
      weightPrecision: Precision.FP8,
      kvPrecision: Precision.FP8,
      maxContext: 32768,
      instanceType: p5en,
      decodeInstanceType: p5en,
      workload: { kind: 'single', requests: 100, arrival: { process: 'poisson', ratePerSecond: 1 }, inputTokens: { mean: 1024 }, outputTokens: { mean: 128 } },
      slo: SIZING.slo,
      efficiency: { stepOverheadSeconds: 0.003 },
      seed: 1,
      planner: { maxAccelerators: 4, modes: ['disaggregated'], targetShare: 0.9, requiredRatePerSecond: 0 },
    }));
    const best = expected.candidates[0];
    const pool = (role: string) => best.pools.find((x) => x.role === role)!;
    expect(inference.prefillTensorParallel).toBe(pool('prefill').tensorParallel);
    expect(inference.decodeTensorParallel).toBe(pool('decode').tensorParallel);
    expect(inference.sizedGoodputPerSecond).toBe(best.goodputRatePerSecond);
    expect(find(manifests, 'Deployment', '-prefill').spec.replicas).toBe(pool('prefill').replicas);
    expect(find(manifests, 'Deployment', '-decode').spec.replicas).toBe(pool('decode').replicas);
    expect(pool('prefill').replicas * pool('prefill').tensorParallel + pool('decode').replicas * pool('decode').tensorParallel).toBeLessThanOrEqual(4);
  });

  test('refuses pool sizes set by hand together with sizeFor', () => {
    // GIVEN the default props, whose pools set replicas and tensorParallel
    expect(() => synthInference(defaultProps({ sizeFor: SIZING })))
      .toThrow(/'prefill.replicas' \(2\) is chosen by 'sizeFor'; remove it, or remove 'sizeFor'/);
  });

  test('says so when no split meets the SLO', () => {
    const p5en = AcceleratedInstanceType.P5EN_48XLARGE;
    const props = defaultProps({
      prefill: { instanceType: p5en },
      decode: { instanceType: p5en },
      sizeFor: { ...SIZING, slo: { ttftSeconds: 2, tpotSeconds: 0.0001 } },
    });
    expect(() => synthInference(props)).toThrow(/'sizeFor': no split of at most 4 accelerators meets the SLO/);
  });
});
