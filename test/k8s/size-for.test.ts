import { Size } from 'cdk8s';
import { defaultProps, find, synthInference } from './util';
import { AcceleratedInstanceType, KvStoreEndpoint, KvTier, ModelArchitecture, Precision } from '../../src';
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
      kvCachePrecision: Precision.FP8,
      maxContext: 32768,
      instanceType: p5en,
      decodeInstanceType: p5en,
      workload: { kind: 'single', requests: 100, arrival: { process: 'poisson', ratePerSecond: 1 }, inputTokens: { mean: 1024 }, outputTokens: { mean: 128 } },
      slo: SIZING.slo,
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

  test('kvCacheTiers: the planner simulates the prefill replicas with those tiers', async () => {
    // GIVEN a chat workload and a host-memory + NVMe tier, as the prefill pool's TieredKvCache has
    const p5en = AcceleratedInstanceType.P5EN_48XLARGE;
    const workload = { ...SIZING.workload, conversationTurns: 4 };
    const tiers = [KvTier.hostMemory(Size.gibibytes(256)), KvTier.localNvme(Size.gibibytes(2000))];
    const props = defaultProps({
      prefill: { instanceType: p5en },
      decode: { instanceType: p5en },
      sizeFor: { ...SIZING, workload, kvCacheTiers: tiers },
    });
    // WHEN synthesized
    const { inference } = synthInference(props);
    // THEN the choice is the async search's over options that carry the tiers
    const config = plannerConfig({
      model: ModelArchitecture.LLAMA_3_3_70B,
      weightPrecision: Precision.FP8,
      kvCachePrecision: Precision.FP8,
      maxContext: 32768,
      instanceType: p5en,
      decodeInstanceType: p5en,
      kvTiers: { hostGib: 256, diskGib: 2000 },
      workload: {
        kind: 'chat',
        requests: 100,
        arrival: { process: 'poisson', ratePerSecond: 1 },
        inputTokens: { mean: 1024 },
        outputTokens: { mean: 128 },
        chat: { turns: { mean: 4 } },
      },
      slo: SIZING.slo,
      seed: 1,
      planner: { maxAccelerators: 4, modes: ['disaggregated'], targetShare: 0.9, requiredRatePerSecond: 0 },
    });
    const tp1 = config.planner!.tensorParallelOptions.find((o) => o.tensorParallel === 1)!;
    expect(tp1.kvTiers!.map((t) => [t.tier, t.capacityBytes, t.readBytesPerSecond])).toEqual([
      ['host', 256 * 1024 ** 3, 50e9], ['disk', 2000 * 1024 ** 3, 2e9],
    ]);
    const best = (await plan(config)).candidates[0];
    expect(inference.sizedGoodputPerSecond).toBe(best.goodputRatePerSecond);
    expect(inference.prefillTensorParallel).toBe(best.pools.find((x) => x.role === 'prefill')!.tensorParallel);
  });

  test('kvCacheTiers that cannot be simulated are refused with the fix', () => {
    const p5en = AcceleratedInstanceType.P5EN_48XLARGE;
    const sized = (kvCacheTiers: KvTier[]) =>
      defaultProps({ prefill: { instanceType: p5en }, decode: { instanceType: p5en }, sizeFor: { ...SIZING, kvCacheTiers } });
    // An existing Redis server has no known size
    expect(() => synthInference(sized([KvTier.remote(KvStoreEndpoint.redis('redis://cache:6379'))])))
      .toThrow(/'sizeFor.kvCacheTiers' has a remote tier of unknown size.*KvStoreEndpoint.engineKvStore/);
    // More NVMe than a TP1 replica's share of the instance store (1 of 8 drives)
    expect(() => synthInference(sized([KvTier.localNvme(Size.gibibytes(9000))])))
      .toThrow(/'sizeFor': 'diskGib' \(9000\) exceeds the 3539 GiB of instance-store NVMe a replica of p5en.48xlarge gets \(1 drive\(s\)\)/);
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
