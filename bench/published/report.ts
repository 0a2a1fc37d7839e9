// Prints the markdown table of bench/published.sh: for each published effect (REFERENCE.md
// section 7), the published baseline -> variant, the simulated one (summary JSON files written by
// `disagg-engine simulate`, or the planner's ranked candidates for *.plan rows), whether the direction matches, and the size ratio (simulated effect /
// published effect, effect = variant / baseline; 1.00 = same size).
// Run: npx ts-node --transpile-only bench/published/report.ts DIR
import * as fs from 'fs';
import * as path from 'path';

interface Row {
  readonly scenario: string;
  readonly metric: string;
  /** Published baseline and variant values (same unit as `read`). */
  readonly published: [number, number];
  readonly unit: string;
  readonly base: string;
  readonly variant: string;
  /** Reads the metric from a summary JSON, in `unit`. */
  readonly read: (s: any) => number;
}

/** An absolute published figure against one simulated deployment (ratio = simulated / published). */
interface AbsoluteRow {
  readonly scenario: string;
  readonly metric: string;
  readonly published: number;
  readonly run: string;
  readonly read: (s: any) => number;
}

// Output tokens per second of the one decode group of EP 16 (make-configs.ts wideEpConfigs): the
// closed loop keeps it the bottleneck, so the deployment's output rate is the decode group's.
const perDecodeGpu = (s: any) => s.outputTokensPerSecond / 16;

const absoluteRows: AbsoluteRow[] = [
  // vLLM blog 2025-12-17 / llm-d 0.3: ~2.2k output tok/s per H200, wide EP with P/D, CoreWeave H200 + CX7 InfiniBand.
  { scenario: 'llm-d wide EP (DeepSeek-V3 FP8, decode EP16, p5en EFA), model defaults', metric: 'output tok/s per decode GPU', published: 2200, run: 'wideep-p5en-aws', read: perDecodeGpu },
  { scenario: 'llm-d wide EP, with EPLB + DBO + DeepEP-on-IB knobs (p5en bandwidth)', metric: 'output tok/s per decode GPU', published: 2200, run: 'wideep-p5en-published-setup', read: perDecodeGpu },
  // The same blog: ~1.5k tok/s per GPU in earlier benchmarks, before dual-batch overlap (and kernel work).
  { scenario: 'llm-d wide EP before DBO, with EPLB + DeepEP-on-IB knobs, no overlap (p5en bandwidth)', metric: 'output tok/s per decode GPU', published: 1500, run: 'wideep-p5en-published-no-dbo', read: perDecodeGpu },
  { scenario: 'llm-d wide EP on p6-b200 (B200, EFA), model defaults; published figure is H200', metric: 'output tok/s per decode GPU', published: 2200, run: 'wideep-p6b200-aws', read: perDecodeGpu },
];

const rows: Row[] = [
  // llm-d "KV-cache wins you can see": output tok/s +130 %, TTFT p90 107 s -> 0.21 s.
  { scenario: 'llm-d prefix routing (Qwen3-32B, 8 x TP2 H100)', metric: 'output tok/s (RR -> llm-d)', published: [1, 2.3], unit: 'x', base: 'llmd-prefix-rr', variant: 'llmd-prefix-llmd', read: (s) => s.outputTokensPerSecond },
  { scenario: 'llm-d prefix routing (Qwen3-32B, 8 x TP2 H100)', metric: 'TTFT p90 s', published: [107, 0.21], unit: 's', base: 'llmd-prefix-rr', variant: 'llmd-prefix-llmd', read: (s) => s.ttftSeconds.p90 },
  // llm-d P/D, gpt-oss-120b on 16 H200: ITL 25 -> 8 ms, E2E 6.7 -> 3.5 s, TTFT 0.53 -> 1.4 s.
  { scenario: 'llm-d P/D (gpt-oss-120b, 16 H200)', metric: 'mean ITL ms', published: [25, 8], unit: 'ms', base: 'pd-gptoss-agg', variant: 'pd-gptoss-pd', read: (s) => s.itlSeconds.mean * 1e3 },
  { scenario: 'llm-d P/D (gpt-oss-120b, 16 H200)', metric: 'mean E2E s', published: [6.7, 3.5], unit: 's', base: 'pd-gptoss-agg', variant: 'pd-gptoss-pd', read: (s) => s.e2eSeconds.mean },
  { scenario: 'llm-d P/D (gpt-oss-120b, 16 H200)', metric: 'mean TTFT s', published: [0.53, 1.4], unit: 's', base: 'pd-gptoss-agg', variant: 'pd-gptoss-pd', read: (s) => s.ttftSeconds.mean },
  // AWS/llm-d blog, p6-b200: up to +70 % tokens/s at concurrency up to 128.
  { scenario: 'AWS P/D (p6-b200, 4P TP1 + 1D TP4 vs 1 x TP4, c=128)', metric: 'output tok/s', published: [1, 1.7], unit: 'x', base: 'aws-b200-agg', variant: 'aws-b200-pd', read: (s) => s.outputTokensPerSecond },
  // DistServe: up to 4.48x goodput (same GPUs).
  { scenario: 'DistServe direction (Llama-3.1-8B, 2 H100)', metric: 'goodput req/s', published: [1, 4.48], unit: 'x', base: 'distserve-agg', variant: 'distserve-pd', read: (s) => s.goodputRequestsPerSecond },
  // The same claim as DistServe states it: per-GPU goodput of the best placement of each kind (planner
  // output), first against its baseline (vLLM without chunked prefill), then against today's scheduling.
  {
    scenario: 'DistServe placement search vs vLLM V0 (Llama-3.1-8B, TP 1-2, <= 4 H100)',
    metric: 'goodput req/s per GPU, best of each kind',
    published: [1, 4.48],
    unit: 'x',
    base: 'distserve-plan-agg-v0.plan',
    variant: 'distserve-plan-pd.plan',
    read: (s) => s.candidates[0].goodputRatePerSecond / s.candidates[0].accelerators,
  },
  {
    scenario: 'DistServe placement search vs vLLM V1 (chunked prefill)',
    metric: 'goodput req/s per GPU, best of each kind',
    published: [1, 4.48],
    unit: 'x',
    base: 'distserve-plan-agg.plan',
    variant: 'distserve-plan-pd.plan',
    read: (s) => s.candidates[0].goodputRatePerSecond / s.candidates[0].accelerators,
  },
];

function fmt(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  const a = Math.abs(v);
  return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : v.toFixed(3);
}

function load(dir: string, name: string): any | undefined {
  const file = path.join(dir, `${name}.summary.json`);
  if (!fs.existsSync(file)) return undefined;
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

function main(): void {
  const dir = process.argv[2];
  if (!dir) throw new Error('usage: report.ts DIR (the directory of the *.summary.json files)');
  const out: string[] = [];
  out.push('| scenario | metric | published | simulated | direction match | ratio |');
  out.push('|---|---|---|---|---|---|');
  for (const r of rows) {
    const a = load(dir, r.base);
    const b = load(dir, r.variant);
    const pub = r.unit === 'x' ? `1 -> ${fmt(r.published[1])}x` : `${fmt(r.published[0])} -> ${fmt(r.published[1])}`;
    if (!a || !b) {
      out.push(`| ${r.scenario} | ${r.metric} | ${pub} | not run (see the error above) | n/a | n/a |`);
      continue;
    }
    const sa = r.read(a);
    const sb = r.read(b);
    const simEffect = sb / sa;
    const pubEffect = r.published[1] / r.published[0];
    const sim = r.unit === 'x' ? `${fmt(sa)} -> ${fmt(sb)} (${fmt(simEffect)}x)` : `${fmt(sa)} -> ${fmt(sb)}`;
    const same = Math.sign(Math.log(simEffect)) === Math.sign(Math.log(pubEffect)) && Math.abs(Math.log(simEffect)) > Math.log(1.02);
    out.push(`| ${r.scenario} | ${r.metric} | ${pub} | ${sim} | ${same ? 'yes' : 'no'} | ${fmt(Math.log(simEffect) / Math.log(pubEffect))} |`);
  }
  for (const r of absoluteRows) {
    const s = load(dir, r.run);
    if (!s) {
      out.push(`| ${r.scenario} | ${r.metric} | ${fmt(r.published)} | not run (see the error above) | n/a | n/a |`);
      continue;
    }
    const v = r.read(s);
    const decodeUtil = Array.isArray(s.workerUtilization) ? ` (decode utilization ${fmt(s.workerUtilization[s.workerUtilization.length - 1])})` : '';
    out.push(`| ${r.scenario} | ${r.metric} | ${fmt(r.published)} | ${fmt(v)}${decodeUtil} | n/a | ${fmt(v / r.published)} (simulated / published) |`);
  }
  out.push('');
  out.push('ratio = ln(simulated effect) / ln(published effect): 1 = same size, 0 = no effect, < 0 = opposite; a direction counts as matching only beyond 2 %.');
  process.stdout.write(out.join('\n') + '\n');
}

main();
