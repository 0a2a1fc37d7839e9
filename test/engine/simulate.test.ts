import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import Ajv2020 from 'ajv/dist/2020';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src/catalog';
import {
  EngineProgress, plan, plannerConfig, planSync, sharedPrefixWorkload, simulate, SimulationConfig, simulationConfig, simulateSweep,
} from '../../src/engine';

// Requires `npx projen engine` (engine/build/disagg-engine and engine/build-addon/.../disagg_engine.node).
const ROOT = path.resolve(__dirname, '..', '..');
const BINARY = path.join(ROOT, 'engine', 'build', 'disagg-engine');
const EXAMPLE = path.join(ROOT, 'engine', 'examples', 'simulate-pd-llama-3.3-70b.json');
const SCHEMA = path.join(ROOT, 'engine', 'schema', 'engine-config.schema.json');

function example(requests: number): SimulationConfig {
  const config = JSON.parse(fs.readFileSync(EXAMPLE, 'utf8'));
  config.workload.requests = requests;
  return config as SimulationConfig;
}

function runBinary(role: string, config: unknown): unknown {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-sim-'));
  const file = path.join(dir, 'config.json');
  fs.writeFileSync(file, JSON.stringify(config));
  return JSON.parse(execFileSync(BINARY, [role, '--config', file], { encoding: 'utf8' }));
}

// A crafted planner case: one model, two single-accelerator options at the same price, the second
// with twice the HBM bandwidth (decode is memory bound, so it must win).
function craftedPlan(): SimulationConfig {
  const option = (label: string, hbm: number) => ({
    label,
    tensorParallel: 1,
    weightBytesPerRank: 16e9,
    hardware: { hbmBytesPerSecond: hbm },
    kvTokensPerReplica: 200000,
    maxConcurrencyPerReplica: 128,
  });
  return {
    model: { weightBytesPerRank: 16e9, kvBytesPerToken: 131072, activeParameters: 8e9, layers: 32, hiddenSize: 4096 },
    hardware: { peakFlopsPerSecond: 9.89e14, hbmBytesPerSecond: 3.35e12, interconnectBytesPerSecond: 4.5e11, fabricBytesPerSecond: 4e10 },
    efficiency: { stepOverheadSeconds: 0.002 },
    policy: { name: 'least-loaded' },
    workload: { kind: 'single', requests: 150, inputTokens: { mean: 1024 }, outputTokens: { mean: 64 } },
    slo: { ttftSeconds: 1, tpotSeconds: 0.03 },
    seed: 3,
    planner: { maxAccelerators: 2, modes: ['aggregated'], rateResolution: 0.1, probeSeconds: 10, tensorParallelOptions: [option('slow', 3.35e12), option('fast', 6.7e12)] },
  };
}

describe('engine addon simulate', () => {
  test('matches `disagg-engine simulate` on the same configuration, number for number', async () => {
    // GIVEN the P/D example with fewer requests
    const config = example(300);
    // WHEN the addon and the binary simulate it
    const fromAddon = await simulate(config);
    const fromBinary = runBinary('simulate', config);
    // THEN the summaries are identical, and the run did work
    expect(fromAddon).toEqual(fromBinary);
    expect(fromAddon.completed).toBe(300);
    expect(fromAddon.disaggregatedRequests).toBeGreaterThan(0);
    expect(fromAddon.ttftSeconds.p99).toBeGreaterThanOrEqual(fromAddon.ttftSeconds.p50);
  });

  test('a sweep runs each rate, reports progress per rate, and a higher rate raises throughput', async () => {
    const seen: EngineProgress[] = [];
    const points = await simulateSweep(example(200), [1, 8], (p) => seen.push(p));
    expect(points.map((p) => p.ratePerSecond)).toEqual([1, 8]);
    expect(points[1].summary.requestsPerSecond).toBeGreaterThan(points[0].summary.requestsPerSecond);
    expect(seen.map((p) => [p.done, p.total])).toEqual([[1, 2], [2, 2]]);
    // AND the point at the example's own rate equals a plain simulation
    const [same] = await simulateSweep(example(200), [8]);
    expect(same.summary).toEqual(await simulate(example(200)));
  });

  test('rejects bad input with messages naming the field, the value and the fix', async () => {
    const config = example(100);
    await expect(simulate({ ...config, workload: { ...config.workload, arrival: { ratePerSecond: -1 } } }))
      .rejects.toThrow("simulate: 'workload.arrival.ratePerSecond' (-1) must be > 0");
    await expect(simulate({ ...config, pools: [] })).rejects.toThrow(/'pools' must be a non-empty array/);
    await expect(simulate({ ...config, pools: [{ ...config.pools![0], role: 'middle' as any }] }))
      .rejects.toThrow(/'pools\[0\].role' \("middle"\) must be both, prefill or decode/);
    await expect(simulate({ ...config, hardware: { ...config.hardware, peakFlopsPerSecond: 0 } }))
      .rejects.toThrow(/'hardware.peakFlopsPerSecond' \(0\) must be > 0/);
    await expect(simulate(config, 'not a function' as any)).rejects.toThrow(/'onProgress' must be a function/);
    await expect(simulateSweep(config, [])).rejects.toThrow(/'rates' must be an array of 1 to 64/);
    await expect(simulateSweep(config, [2, 0])).rejects.toThrow(/'rates\[1\]' \(0\) must be a positive number/);
    await expect(plan(config)).rejects.toThrow(/'planner' is required/);
    // AND a throwing progress callback rejects the promise instead of crashing
    await expect(simulate(config, () => { throw new Error('callback exploded'); })).rejects.toThrow('callback exploded');
  });
});

describe('engine addon plan', () => {
  test('finds the known-best candidate and reports progress for every candidate', async () => {
    // GIVEN the crafted case WHEN the planner runs
    const seen: EngineProgress[] = [];
    const result = await plan(craftedPlan(), (p) => seen.push(p));
    // THEN the best deployment runs on the faster option and meets the target share there
    const best = result.candidates[0];
    expect(best.rank).toBe(1);
    expect(best.pools.every((p) => p.option === 'fast')).toBe(true);
    expect(best.goodputRatePerSecond).toBeGreaterThan(0);
    expect(best.summary!.goodputShare).toBeGreaterThanOrEqual(result.targetShare);
    // AND every candidate (1 or 2 replicas of each option) reported progress, in order
    expect(result.total).toBe(4);
    expect(seen.map((p) => p.done)).toEqual([1, 2, 3, 4]);
    expect(seen.every((p) => p.total === 4)).toBe(true);
    // AND the synchronous variant and the binary give the same answer (deterministic for a seed)
    expect(planSync(craftedPlan())).toEqual(result);
    expect(runBinary('plan', craftedPlan())).toEqual(result);
  });
});

describe('engine configuration builder', () => {
  const model = ModelArchitecture.fromName('llama-3.3-70b');
  const instanceType = AcceleratedInstanceType.P5EN_48XLARGE;

  test('builds schema-valid simulate and plan configurations from catalog objects', () => {
    const ajv = new Ajv2020({ allErrors: true, strict: true });
    const validate = ajv.compile(JSON.parse(fs.readFileSync(SCHEMA, 'utf8')));
    const common = { model, weightPrecision: Precision.FP8, kvCachePrecision: Precision.FP8, maxContext: 8192, workload: { requests: 10 } };
    const pools = { prefill: { replicas: 2, tensorParallel: 2 }, decode: { replicas: 1, tensorParallel: 4 } };
    const sim = simulationConfig({ ...common, instanceType, ...pools });
    expect(validate(sim)).toBe(true);
    expect(validate.errors ?? []).toEqual([]);
    // THEN per-pool numbers follow the TP size: weights per rank halve from TP2 to TP4
    const [prefill, decode] = sim.pools!;
    expect(prefill.weightBytesPerRank! / decode.weightBytesPerRank!).toBeCloseTo(2, 2);
    expect(decode.kvTokensPerReplica!).toBeGreaterThan(prefill.kvTokensPerReplica!);
    const slo = { ttftSeconds: 2, tpotSeconds: 0.05 };
    const planned = plannerConfig({ ...common, instanceType, slo, planner: { maxAccelerators: 8 }, pricePerInstanceHour: 80 });
    expect(validate(planned)).toBe(true);
    expect(validate.errors ?? []).toEqual([]);
    expect(planned.planner!.tensorParallelOptions.map((o) => o.tensorParallel)).toEqual([1, 2, 4, 8]);
    expect(planned.planner!.tensorParallelOptions[0].pricePerAcceleratorHour).toBe(10);
  });

  test('reproduces a vLLM run: engine arguments, shared-prefix stages; schema-valid, addon = binary', async () => {
    // GIVEN one TP1 replica of Llama-3.1-8B on an H100 with vLLM's arguments of a validation run
    // and inference-perf's shared_prefix traffic in two constant-rate stages
    const workload = sharedPrefixWorkload({
      systemPrompts: 9,
      usersPerSystemPrompt: 5,
      systemPromptTokens: 100,
      questionTokens: 447,
      outputTokens: 248,
      stages: [{ ratePerSecond: 8, durationSeconds: 10 }, { ratePerSecond: 20, durationSeconds: 10 }],
    });
    const inputs = {
      model: ModelArchitecture.fromName('llama-3.1-8b'),
      instanceType: AcceleratedInstanceType.P5_48XLARGE,
      weightPrecision: Precision.BF16,
      kvCachePrecision: Precision.BF16,
      maxContext: 4096,
      aggregated: { replicas: 1, tensorParallel: 1 },
      workload,
    };
    const config = simulationConfig({
      ...inputs, maxNumSeqs: 128, maxNumBatchedTokens: 2048, gpuMemoryUtilization: 0.95, kvBlockSize: 32, kvTiers: { hostGib: 8 },
    });
    // THEN the configuration holds every setting where the engine reads it, and the schema accepts it
    const validate = new Ajv2020({ allErrors: true, strict: true }).compile(JSON.parse(fs.readFileSync(SCHEMA, 'utf8')));
    expect(validate(config)).toBe(true);
    expect(validate.errors ?? []).toEqual([]);
    expect(config.workload).toEqual({
      kind: 'single',
      api: 'completions',
      arrival: { process: 'constant', stages: [{ ratePerSecond: 8, durationSeconds: 10 }, { ratePerSecond: 20, durationSeconds: 10 }] },
      inputTokens: { distribution: 'fixed', mean: 447 },
      outputTokens: { distribution: 'fixed', mean: 248 },
      tenants: { count: 9, systemPromptTokens: 100, popularity: 'equal', usersPerTenant: 5 },
    });
    expect(config.pools![0]).toMatchObject({ maxConcurrencyPerReplica: 128, maxBatchedTokens: 2048 });
    expect(config.pools![0].kvTiers![0]).toMatchObject({ tier: 'host', capacityBytes: 8 * 1024 ** 3 });
    expect(config.router!.kvBlockSize).toBe(32);
    // AND the utilization sets the KV capacity (the sizing's memory budget), unchanged when not given
    const at90 = simulationConfig(inputs).pools![0];
    expect(config.pools![0].kvTokensPerReplica!).toBeGreaterThan(at90.kvTokensPerReplica!);
    expect(at90.maxConcurrencyPerReplica).toBe(256);
    expect(at90.maxBatchedTokens).toBeUndefined();
    // AND the addon and the binary agree on it, every stage's requests simulated
    const fromAddon = await simulate(config);
    expect(fromAddon).toEqual(runBinary('simulate', config));
    expect(fromAddon.submitted).toBe(80 + 200);
    // AND stages fix their rates: a sweep is refused, saying what to call instead
    await expect(simulateSweep(config, [1, 2])).rejects.toThrow("'workload.arrival.stages' fix their own arrival rates and cannot be swept; use simulate()");
  });

  test('refuses a pool that does not fit, naming the problem', () => {
    expect(() => simulationConfig({
      model,
      instanceType: AcceleratedInstanceType.P5_48XLARGE,
      weightPrecision: Precision.BF16,
      maxContext: 8192,
      aggregated: { replicas: 1, tensorParallel: 1 },
      workload: {},
    })).toThrow(/the deployment cannot run llama-3.3-70b on p5.48xlarge:\n- 'tensorParallel' \(1\) leaves too little memory/);
  });
});
