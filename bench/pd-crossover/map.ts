// Where a prefill/decode split pays, as a map over TTFT SLO x prompt/output lengths (issue 36): the
// planner's best aggregated deployment against its best split at each cell (src/engine/pd-crossover.ts,
// what `disagg plan --simulate` prints under its ranking), for the default deployment's model and for
// DistServe's OPT-13B case, the latter beside what DistServe published for it. Run by
// bench/pd-crossover.sh; prints markdown, writes bench/out/pd-crossover.json.
import * as fs from 'fs';
import * as path from 'path';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src/catalog';
import { DEFAULT_DEPLOYMENT } from '../../src/cli/defaults';
import { CrossoverArms, CrossoverResult, EngineProfile, pdCrossover, plannerConfig, SimulationConfig, SIZING_SIMULATED_REQUESTS } from '../../src/engine';
import { DEFAULT_STEP_OVERHEAD_SECONDS } from '../../src/cli/engine-flags';

interface Lengths { readonly label: string; readonly input: [number, number]; readonly output: [number, number] }

interface Case {
  readonly title: string;
  readonly model: string;
  readonly instance: string;
  readonly weights: Precision;
  readonly kv: Precision;
  readonly context: number;
  readonly maxAccelerators: number;
  /** TPOT SLOs, one line of the map per length mix and TPOT. */
  readonly tpotSlos: number[];
  readonly ttftSlos: number[];
  readonly lengths: Lengths[];
  /** The engine (and fabric) of each arm; one line of the map per variant. */
  readonly variants: Array<{ readonly label: string; readonly arms: (c: SimulationConfig) => SimulationConfig | CrossoverArms }>;
  /** What the source measured at some of these SLOs (winner per TTFT SLO), for the DistServe case. */
  readonly published?: { readonly lengths: string; readonly source: string; readonly winners: Record<string, string> };
}

const v1 = (c: SimulationConfig) => EngineProfile.VLLM_V1.applyTo(c);
const v0 = (c: SimulationConfig) => EngineProfile.VLLM_V0.applyTo(c);

/**
 * DistServe's own setup: aggregated vLLM V0 replicas of one GPU each (its baseline's placement for
 * OPT-13B, evaluation/2-benchmark-serving/2-start-api-server.py) against its prototype's context and
 * decode instances inside one node, the KV copied GPU to GPU over NVLink (each prefill GPU sends its
 * shard over its own link; 50 us per copy), as its OPT-13B evaluation ran (bench/validation-pd/points.ts).
 */
function distserveAsPublished(instance: AcceleratedInstanceType, scale?: { aggregated: number; disaggregated: number }): (c: SimulationConfig) => CrossoverArms {
  return c => {
    const pd = EngineProfile.DISTSERVE.applyTo(c);
    const agg = v0(c);
    const budget = (mode: 'aggregated' | 'disaggregated') => (scale ? { maxAccelerators: scale[mode] } : {});
    return {
      aggregated: {
        ...agg,
        planner: { ...agg.planner!, ...budget('aggregated'), tensorParallelOptions: agg.planner!.tensorParallelOptions.filter(o => o.tensorParallel === 1) },
      },
      disaggregated: {
        ...pd,
        planner: {
          ...pd.planner!,
          ...budget('disaggregated'),
          tensorParallelOptions: pd.planner!.tensorParallelOptions.map(o => ({
            ...o,
            hardware: {
              ...(o.hardware ?? pd.hardware!),
              fabricBytesPerSecond: instance.accelerator.interconnectGBps * 1e9 * (o.tensorParallel ?? 1),
              kvTransferLatencySeconds: 50e-6,
            },
          })),
        },
      },
    };
  };
}

const CASES: Case[] = [
  {
    title: `${DEFAULT_DEPLOYMENT.model} (FP8 weights and KV) on ${DEFAULT_DEPLOYMENT.instance}, at most 8 accelerators, vLLM V1`,
    model: DEFAULT_DEPLOYMENT.model,
    instance: DEFAULT_DEPLOYMENT.instance,
    weights: Precision.FP8,
    kv: Precision.FP8,
    context: DEFAULT_DEPLOYMENT.context,
    maxAccelerators: 8,
    tpotSlos: [0.1, 0.03],
    ttftSlos: [0.25, 0.5, 1, 2, 4],
    lengths: [
      { label: 'chat: prompt 1,000±500, output 300±200', input: [1000, 500], output: [300, 200] },
      { label: 'long prompt: 4,000±1,500, output 200±100', input: [4000, 1500], output: [200, 100] },
      { label: 'long output: prompt 300±200, output 1,000±500', input: [300, 200], output: [1000, 500] },
    ],
    variants: [{ label: 'on EFA', arms: v1 }],
  },
  {
    title: 'opt-13b (FP16) on p4de.24xlarge (A100 80 GB), at most 4 accelerators: DistServe\'s OPT-13B case',
    model: 'opt-13b',
    instance: 'p4de.24xlarge',
    weights: Precision.FP16,
    kv: Precision.FP16,
    context: 2048,
    maxAccelerators: 4,
    tpotSlos: [0.1],
    ttftSlos: [0.25, 0.4, 1, 2, 4],
    // DistServe's ShareGPT streams: prompts 754±533, outputs 188±226 (bench/validation-pd/traces)
    lengths: [{ label: 'ShareGPT: prompt 750±530, output 190±230', input: [750, 530], output: [190, 230] }],
    variants: [
      { label: 'vLLM V1 both arms, KV over EFA', arms: v1 },
      { label: 'vLLM V0 both arms, KV over EFA', arms: v0 },
      { label: 'as DistServe ran it: vLLM V0 TP1 replicas against its prototype, KV over NVLink in one node', arms: distserveAsPublished(AcceleratedInstanceType.fromName('p4de.24xlarge')) },
      {
        label: 'as DistServe ran it, at its scale: one vLLM V0 GPU against its prototype on 3 GPUs (no router pooling replicas)',
        arms: distserveAsPublished(AcceleratedInstanceType.fromName('p4de.24xlarge'), { aggregated: 1, disaggregated: 3 }),
      },
    ],
    published: {
      lengths: 'ShareGPT: prompt 750±530, output 190±230',
      source: 'DistServe (OSDI\'24) artifact, OPT-13B ShareGPT goodput per GPU against the SLO (pd-published-calibration.json: distserve-ae-opt13b-sharegpt-goodput-vs-slo)',
      winners: { 0.25: 'P/D 1.76x', 0.4: 'P/D 1.11x', 1: 'aggregated (P/D 0.80x)' },
    },
  },
];

function fmt(t: number): string {
  return t < 1 ? `${Math.round(t * 1000)} ms` : `${t} s`;
}

function cell(r: CrossoverResult['rows'][number]): string {
  switch (r.winner) {
    case 'neither': return 'neither meets it';
    case 'tie': return `tie (${r.ratio!.toFixed(2)}x)`;
    case 'disaggregated': return r.ratio === null ? 'P/D (only)' : `**P/D ${r.ratio.toFixed(2)}x**`;
    default: return r.ratio === null ? 'aggregated (only)' : `aggregated (${r.ratio.toFixed(2)}x)`;
  }
}

async function main(): Promise<void> {
  const started = Date.now();
  const out: unknown[] = [];
  // `bench/pd-crossover.sh opt-13b`: only the cases whose model is named.
  const only = process.argv.slice(2);
  for (const c of CASES.filter(x => only.length === 0 || only.includes(x.model))) {
    const model = ModelArchitecture.fromName(c.model);
    const instanceType = AcceleratedInstanceType.fromName(c.instance);
    console.log(`\n### ${c.title}\n`);
    console.log('cells: the winner per accelerator-hour and the P/D : aggregated ratio of the best of each mode (within 5%: tie)\n');
    console.log(`| lengths | TPOT | arms | ${c.ttftSlos.map(t => `TTFT ${fmt(t)}`).join(' | ')} | verdict |`);
    console.log(`|---|---|---|${c.ttftSlos.map(() => '---').join('|')}|---|`);
    for (const [l, tpotSeconds] of c.lengths.flatMap(x => c.tpotSlos.map(t => [x, t] as const))) {
      const base = plannerConfig({
        model,
        instanceType,
        weightPrecision: c.weights,
        kvCachePrecision: c.kv,
        maxContext: c.context,
        workload: {
          kind: 'single',
          requests: SIZING_SIMULATED_REQUESTS,
          arrival: { process: 'poisson', ratePerSecond: 1 },
          inputTokens: { distribution: 'lognormal', mean: l.input[0], stddev: l.input[1] },
          outputTokens: { distribution: 'lognormal', mean: l.output[0], stddev: l.output[1] },
        },
        slo: { ttftSeconds: c.ttftSlos[0], tpotSeconds },
        efficiency: { stepOverheadSeconds: DEFAULT_STEP_OVERHEAD_SECONDS },
        planner: { maxAccelerators: c.maxAccelerators, targetShare: 0.9 },
      });
      for (const v of c.variants) {
        const t0 = Date.now();
        const r = await pdCrossover(v.arms(base), c.ttftSlos);
        console.log(`| ${l.label} | ${fmt(tpotSeconds)} | ${v.label} | ${r.rows.map(cell).join(' | ')} | ${r.verdict} |`);
        process.stderr.write(`pd-crossover: ${c.model} ${l.label} ${v.label}: ${r.simulations} simulations in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
        out.push({ case: c.title, lengths: l.label, tpotSeconds, arms: v.label, ...r });
      }
    }
    if (c.published) {
      const p = c.published;
      console.log(`| ${p.lengths} | ${fmt(c.tpotSlos[0])} | published | ${c.ttftSlos.map(t => p.winners[String(t)] ?? '-').join(' | ')} | ${p.source} |`);
    }
  }
  fs.mkdirSync(path.join(__dirname, '..', 'out'), { recursive: true });
  fs.writeFileSync(path.join(__dirname, '..', 'out', 'pd-crossover.json'), JSON.stringify(out, undefined, 2));
  console.log(`\n(${((Date.now() - started) / 1000).toFixed(0)} s; bench/out/pd-crossover.json has every row's layouts and scores)`);
}

main().catch(e => {
  console.error(`pd-crossover: ${(e as Error).stack ?? e}`);
  process.exit(1);
});
