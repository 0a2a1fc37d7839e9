// The benchmark's deployment as `disagg simulate` builds it (engine config JSON on stdout):
// Llama 3.3 70B (the 3.1 70B architecture) on p5.48xlarge, FP8 weights and KV, TP4 prefill and
// decode pools, lognormal prompts ~2,000 tokens and outputs ~300, SLO TTFT 2 s / TPOT 50 ms.
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src/catalog';
import { simulationConfig } from '../../src/engine';

// The replicas' tensor parallelism: argv[2], 4 by default (2 fits Llama 70B FP8 on an H100 too).
const tp = Number(process.argv[2] ?? 4);
const config = simulationConfig({
  model: ModelArchitecture.fromName('llama-3.3-70b'),
  instanceType: AcceleratedInstanceType.fromName('p5.48xlarge'),
  weightPrecision: Precision.of('fp8'),
  kvCachePrecision: Precision.of('fp8'),
  maxContext: 16384,
  prefill: { replicas: 4, tensorParallel: tp },
  decode: { replicas: 2, tensorParallel: tp },
  workload: {
    kind: 'single', requests: 1000, arrival: { process: 'poisson', ratePerSecond: 10 },
    inputTokens: { distribution: 'lognormal', mean: 2000, stddev: 1000, min: 64, max: 12000 },
    outputTokens: { distribution: 'lognormal', mean: 300, stddev: 200, min: 8, max: 2000 },
  },
  slo: { ttftSeconds: 2, tpotSeconds: 0.05 },
  policy: { name: 'kv-aware' },
  seed: 7,
});
process.stdout.write(JSON.stringify(config, undefined, 1) + '\n');
