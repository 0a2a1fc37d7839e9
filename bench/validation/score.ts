// Scores the simulator against the real vLLM runs of ../shared/validation, as its README defines the
// score: per run the absolute percentage error of the summary E2E mean, TTFT mean and ITL mean
// (ITL = (E2E mean - TTFT mean) / (output tokens - 1)), then the mean over runs; beside it the
// errors the published simulators made on the same runs (the file's errors_signed_pct).
// Run: npx ts-node --transpile-only bench/validation/score.ts   (bench/validation.sh)
// Env: VALIDATION_RUNS (the runs file), DISAGG_ENGINE_ADDON (the addon).
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { simulate } from '../../src/engine/addon';
import { SimulationResult } from '../../src/engine/results';
import { ExpressedRun, HELD_OUT_RUNS, UnexpressedRun, ValidationRun, expressRun, isExpressed, loadRuns } from './runs';

/** The three measures of the score, in milliseconds. */
export interface Latencies {
  readonly e2e: number;
  readonly ttft: number;
  readonly itl: number;
}

export interface ScoredRun {
  readonly run: ValidationRun;
  readonly predicted: Latencies;
  readonly measured: Latencies;
  /** Absolute percentage errors. */
  readonly error: Latencies;
  /** Seconds of wall time the simulation took. */
  readonly seconds: number;
  readonly completed: number;
  readonly requests: number;
}

export interface Score {
  readonly scored: ScoredRun[];
  readonly unexpressed: UnexpressedRun[];
  /** Mean absolute percentage errors over the scored runs. */
  readonly mean: Latencies;
  /** The same over the runs the step model was fitted on, and over the held-out ones (HELD_OUT_RUNS). */
  readonly fitted: Latencies & { readonly runs: number };
  readonly heldOut: Latencies & { readonly runs: number };
  /** Published simulators' mean absolute errors over the same runs (those with all three numbers). */
  readonly peers: { readonly [simulator: string]: Latencies & { readonly runs: number } };
}

/** The simulators of the README's comparison this report shows beside ours. */
export const PEERS = ['blis_evolved_iter27', 'aiconfigurator'];

const ape = (predicted: number, measured: number) => (Math.abs(predicted - measured) / measured) * 100;
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

export function predictedLatencies(summary: SimulationResult, outputTokens: number): Latencies {
  const e2e = summary.e2eSeconds.mean * 1000;
  const ttft = summary.ttftSeconds.mean * 1000;
  return { e2e, ttft, itl: (e2e - ttft) / (outputTokens - 1) };
}

export async function scoreRun(x: ExpressedRun): Promise<ScoredRun> {
  const t0 = process.hrtime.bigint();
  const summary = await simulate(x.config);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const m = x.run.measured.summary;
  const measured = { e2e: m.e2e_mean, ttft: m.ttft_mean, itl: m.itl_mean };
  const predicted = predictedLatencies(summary, x.outputTokens);
  return {
    run: x.run,
    predicted,
    measured,
    error: { e2e: ape(predicted.e2e, measured.e2e), ttft: ape(predicted.ttft, measured.ttft), itl: ape(predicted.itl, measured.itl) },
    seconds,
    completed: summary.completed,
    requests: x.requests,
  };
}

/** Expresses and simulates every run (one at a time: each uses one core). */
export async function scoreRuns(runs: ValidationRun[], onRun?: (s: ScoredRun) => void): Promise<Score> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-validation-'));
  try {
    const scored: ScoredRun[] = [];
    const unexpressed: UnexpressedRun[] = [];
    for (const run of runs) {
      const x = expressRun(run, dir);
      if (!isExpressed(x)) {
        unexpressed.push(x);
        continue;
      }
      const s = await scoreRun(x);
      scored.push(s);
      onRun?.(s);
    }
    const peers: Record<string, Latencies & { runs: number }> = {};
    for (const name of PEERS) {
      const rows = scored
        .map(s => s.run.errors_signed_pct[name])
        .filter(e => e && e.e2e_mean !== undefined && e.ttft_mean !== undefined && e.itl_mean !== undefined);
      peers[name] = {
        e2e: mean(rows.map(e => Math.abs(e!.e2e_mean!))),
        ttft: mean(rows.map(e => Math.abs(e!.ttft_mean!))),
        itl: mean(rows.map(e => Math.abs(e!.itl_mean!))),
        runs: rows.length,
      };
    }
    const means = (rows: ScoredRun[]) => ({
      e2e: mean(rows.map(s => s.error.e2e)), ttft: mean(rows.map(s => s.error.ttft)), itl: mean(rows.map(s => s.error.itl)), runs: rows.length,
    });
    const { runs: _all, ...all } = means(scored);
    return {
      scored,
      unexpressed,
      mean: all,
      fitted: means(scored.filter(s => !HELD_OUT_RUNS.has(s.run.id))),
      heldOut: means(scored.filter(s => HELD_OUT_RUNS.has(s.run.id))),
      peers,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const f1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : '-');
const f0 = (v: number) => (Number.isFinite(v) ? v.toFixed(0) : '-');
const signed = (p: number, m: number) => `${p >= m ? '+' : '-'}${ape(p, m).toFixed(1)}%`;

/** The report: one row per run, the means, the peers, and the runs that could not be expressed. */
export function formatScore(score: Score): string {
  const out: string[] = [];
  out.push('| run | model | GPU x TP | E2E ms (sim / real) | TTFT ms (sim / real) | ITL ms (sim / real) | sim s |');
  out.push('|---|---|---|---|---|---|---:|');
  for (const s of score.scored) {
    const r = s.run;
    out.push(`| ${r.id}${HELD_OUT_RUNS.has(r.id) ? ' (held out)' : ''} ${r.workload.preset} | ${r.model.split('/').pop()} | ${r.gpu} x ${r.tp} | ` +
      `${f0(s.predicted.e2e)} / ${f0(s.measured.e2e)} (${signed(s.predicted.e2e, s.measured.e2e)}) | ` +
      `${f1(s.predicted.ttft)} / ${f1(s.measured.ttft)} (${signed(s.predicted.ttft, s.measured.ttft)}) | ` +
      `${f1(s.predicted.itl)} / ${f1(s.measured.itl)} (${signed(s.predicted.itl, s.measured.itl)}) | ${s.seconds.toFixed(2)} |`);
  }
  out.push('');
  out.push('| simulator | runs | mean abs. error E2E | TTFT | ITL |');
  out.push('|---|---:|---:|---:|---:|');
  out.push(`| disagg (this build), all runs | ${score.scored.length} | ${f1(score.mean.e2e)}% | ${f1(score.mean.ttft)}% | ${f1(score.mean.itl)}% |`);
  for (const [label, m] of [['runs fitted on', score.fitted], ['runs held out', score.heldOut]] as const) {
    out.push(`| disagg (this build), ${label} | ${m.runs} | ${f1(m.e2e)}% | ${f1(m.ttft)}% | ${f1(m.itl)}% |`);
  }
  for (const [name, p] of Object.entries(score.peers)) {
    out.push(`| ${name} (same runs) | ${p.runs} | ${f1(p.e2e)}% | ${f1(p.ttft)}% | ${f1(p.itl)}% |`);
  }
  if (score.unexpressed.length > 0) {
    out.push('');
    out.push(`Not expressed (${score.unexpressed.length}):`);
    for (const u of score.unexpressed) out.push(`- run ${u.run.id} (${u.run.model}, ${u.run.gpu}): ${u.reasons.join('; ')}`);
  }
  return out.join('\n');
}

async function main(): Promise<void> {
  const runs = loadRuns();
  const score = await scoreRuns(runs, s => process.stderr.write(`run ${s.run.id}: ${s.seconds.toFixed(2)} s\n`));
  process.stdout.write(formatScore(score) + '\n');
}

if (require.main === module) {
  main().catch((e: Error) => {
    process.stderr.write(`${e.stack ?? e.message}\n`);
    process.exit(1);
  });
}
