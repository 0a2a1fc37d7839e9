// Scores the simulator's P/D-vs-aggregated predictions against published measurements (points.ts says
// how a point becomes simulations). Per point: both arms' headline measure, the predicted P/D-vs-aggregated
// ratio beside the published one, and whether the direction (P/D wins, loses, ties) is right. A goodput
// sweep over several SLOs is one judgment per SLO. The last line of the report is one JSON object:
// {"points", "expressed", "direction_right", "direction_scored", "ratio_error_median_pct", "unexpressed"}.
// Run: bash bench/validation-pd.sh   Env: PD_POINTS (a points file of the same format), DISAGG_ENGINE_ADDON.
import { costModel, simulate } from '../../src/engine/addon';
import { SimulationResult } from '../../src/engine/results';
import { ArmRun, ExpressedPoint, ExpressedTransfer, PdPoint, UnexpressedPoint, expressPoint, expressTransfer, isExpressed, loadPoints, sloOfKey } from './points';

export type Direction = 'pd_wins' | 'pd_loses' | 'tie';

/** One judgment: a point, or one SLO of a point's goodput sweep. */
export interface Judgment {
  readonly point: PdPoint;
  /** What is compared, e.g. 'SLO attainment 250/100 ms' or 'goodput/GPU at ttft250_tpot100'. */
  readonly measure: string;
  readonly predicted: { readonly aggregated?: number; readonly disaggregated?: number; readonly ratio?: number; readonly direction?: Direction };
  readonly published: { readonly aggregated?: number; readonly disaggregated?: number; readonly ratio?: number; readonly direction?: Direction };
  /** |predicted ratio / published ratio - 1| in percent, where both exist. */
  readonly ratioErrorPct?: number;
  readonly directionRight?: boolean;
}

/** A KV-transfer timing point: the cost model's transfer time against the measured one, per prompt length. */
export interface TransferJudgment {
  readonly point: PdPoint;
  readonly tokens: number[];
  readonly predictedMs: number[];
  readonly measuredMs: number[];
  /** Median absolute percentage error over the rows. */
  readonly medianErrorPct: number;
  /**
   * Median absolute percentage error of the bytes moved against the source's KV sizes, where it
   * prints them: the model's KV layout and its copies under TP, apart from any timing constant.
   */
  readonly bytesErrorPct?: number;
}

export interface PdScore {
  readonly points: number;
  readonly expressed: ExpressedPoint[];
  readonly transfers: TransferJudgment[];
  readonly unexpressed: UnexpressedPoint[];
  readonly judgments: Judgment[];
  readonly directionRight: number;
  readonly directionScored: number;
  readonly ratioErrorMedianPct: number;
}

function isTransfer(t: ExpressedTransfer | UnexpressedPoint): t is ExpressedTransfer {
  return (t as ExpressedTransfer).config !== undefined;
}

/** Ratios within this band of 1 are a tie (a published 'tie' means about equal). */
export const TIE_BAND = 0.05;

const median = (xs: number[]) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** Direction of a P/D-vs-aggregated ratio of a measure where higher is better (lower: pass higherBetter false). */
export function directionOf(ratio: number, higherBetter = true): Direction {
  if (Math.abs(ratio - 1) <= TIE_BAND) return 'tie';
  return (ratio > 1) === higherBetter ? 'pd_wins' : 'pd_loses';
}

/** A published number: 1.833, or an upper bound '<1.0 (...)' as undefined. */
function publishedNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && /^\s*~?\d+(\.\d+)?\s*$/.test(v)) return Number(v.replace('~', ''));
  return undefined;
}

/** An upper bound '<1.0 ...' as 1.0. */
function upperBound(v: unknown): number | undefined {
  const m = typeof v === 'string' ? /^\s*<\s*(\d+(?:\.\d+)?)/.exec(v) : null;
  return m ? Number(m[1]) : undefined;
}

/**
 * Goodput per GPU as DistServe computes it: the highest per-GPU rate at which at least `target` of the
 * requests meet the SLO, linearly interpolated between the measured rates; below the lowest rate,
 * undefined (the sweep cannot say).
 */
export function goodputPerGpu(points: Array<{ rate: number; attainment: number }>, target = 0.9): number | undefined {
  const s = [...points].sort((a, b) => a.rate - b.rate);
  if (s.length === 0 || s[0].attainment < target) return undefined;
  for (let i = 1; i < s.length; i++) {
    if (s[i].attainment < target) {
      const a = s[i - 1];
      const b = s[i];
      return a.rate + ((a.attainment - target) / (a.attainment - b.attainment)) * (b.rate - a.rate);
    }
  }
  return s[s.length - 1].rate;
}

function publishedDirection(point: PdPoint): Direction | undefined {
  const d = point.headline?.direction;
  return d === 'pd_wins' || d === 'pd_loses' || d === 'tie' ? d : undefined;
}

function judge(point: PdPoint, measure: string, predicted: Judgment['predicted'], published: Judgment['published']): Judgment {
  const ratioErrorPct = predicted.ratio !== undefined && published.ratio !== undefined
    ? Math.abs(predicted.ratio / published.ratio - 1) * 100 : undefined;
  const directionRight = predicted.direction !== undefined && published.direction !== undefined ? predicted.direction === published.direction : undefined;
  return { point, measure, predicted, published, ratioErrorPct, directionRight };
}

/** The judgments of one expressed point from its simulations' results (same order as x.runs). */
export function judgePoint(x: ExpressedPoint, results: SimulationResult[]): Judgment[] {
  const p = x.point;
  const byArm = (arm: ArmRun['arm']) => results[x.runs.findIndex(r => r.arm === arm)];
  const gpus = (arm: ArmRun['arm']) => x.runs.find(r => r.arm === arm)!.gpus;
  const h = p.headline ?? {};
  const pubRatio = (higherBetter: boolean) => {
    const a = publishedNumber(h.aggregated);
    const d = publishedNumber(h.disaggregated);
    const ratio = h.ratio ?? (a !== undefined && d !== undefined && a > 0 ? d / a : undefined);
    return { aggregated: a, disaggregated: d, ratio, direction: publishedDirection(p) ?? (ratio !== undefined && p.headline?.direction !== 'mixed' ? directionOf(ratio, higherBetter) : undefined) };
  };
  switch (x.metric.kind) {
    case 'attainment': {
      const a = byArm('aggregated').goodputShare * 100;
      const d = byArm('disaggregated').goodputShare * 100;
      const ratio = a > 0 ? d / a : Infinity;
      return [judge(p, `SLO attainment % (TTFT ${x.metric.ttftSeconds * 1000} ms, TPOT ${x.metric.tpotSeconds * 1000} ms)`,
        { aggregated: a, disaggregated: d, ratio, direction: directionOf(ratio) }, pubRatio(true))];
    }
    case 'tokens-per-gpu': {
      const a = byArm('aggregated').outputTokensPerSecond / gpus('aggregated');
      const d = byArm('disaggregated').outputTokensPerSecond / gpus('disaggregated');
      const pub = pubRatio(true);
      return [judge(p, 'output tok/s per GPU', { aggregated: a, disaggregated: d, ratio: d / a, direction: directionOf(d / a) }, {
        ...pub,
        aggregated: publishedNumber(p.measured?.aggregated?.output_tok_s_per_gpu),
        disaggregated: publishedNumber(p.measured?.disaggregated?.output_tok_s_per_gpu),
      })];
    }
    case 'itl-mean':
    case 'ttft-mean': {
      const key = x.metric.kind === 'itl-mean' ? 'itl' : 'ttft';
      const of = (r: SimulationResult) => (key === 'itl' ? r.itlSeconds.mean : r.ttftSeconds.mean) * 1000;
      const a = of(byArm('aggregated'));
      const d = of(byArm('disaggregated'));
      const pub = pubRatio(false);
      return [judge(p, `${key.toUpperCase()} mean, ms`, { aggregated: a, disaggregated: d, ratio: d / a, direction: directionOf(d / a, false) }, {
        ...pub,
        aggregated: publishedNumber(p.measured?.aggregated?.[`${key}_ms_mean`]),
        disaggregated: publishedNumber(p.measured?.disaggregated?.[`${key}_ms_mean`]),
      })];
    }
    case 'goodput-per-gpu': {
      const table: Record<string, Record<string, unknown>> = p.measured?.goodput_req_s_per_gpu ?? {};
      const out: Judgment[] = [];
      for (const key of Object.keys(table).filter(k => sloOfKey(k))) {
        const labels = Object.keys(table[key]);
        const predictedOf = (label: string) => goodputPerGpu(x.runs.flatMap((r, i) => (r.label === label && r.sloKey === key
          ? [{ rate: r.ratePerGpu!, attainment: results[i].goodputShare }] : [])));
        const aggLabel = labels.find(l => !/^pd_/.test(l))!;
        const pdLabels = labels.filter(l => /^pd_/.test(l));
        const best = (vals: Array<number | undefined>) => Math.max(...vals.map(v => v ?? 0));
        const pa = predictedOf(aggLabel);
        const pd = best(pdLabels.map(predictedOf));
        // Below the lowest rate swept the goodput is under it: say so with the lowest rate as a bound.
        const pubA = publishedNumber(table[key][aggLabel]) ?? upperBound(table[key][aggLabel]);
        const pubD = best(pdLabels.map(l => publishedNumber(table[key][l])));
        const pubRatioKnown = publishedNumber(table[key][aggLabel]) !== undefined;
        const predRatio = pa !== undefined && pa > 0 ? pd / pa : (pd > 0 ? Infinity : undefined);
        const pubRatioValue = pubA !== undefined && pubA > 0 ? pubD / pubA : undefined;
        out.push(judge(p, `goodput req/s per GPU at ${key} (best of ${pdLabels.join(', ')})`,
          { aggregated: pa, disaggregated: pd, ratio: predRatio, direction: predRatio === undefined ? undefined : directionOf(predRatio) },
          { aggregated: pubA, disaggregated: pubD, ratio: pubRatioKnown ? pubRatioValue : undefined, direction: pubRatioValue === undefined ? undefined : directionOf(pubRatioValue) }));
      }
      return out;
    }
  }
}

/** Expresses, simulates and judges every point (one simulation at a time). */
export async function scorePoints(points: PdPoint[], onPoint?: (x: ExpressedPoint, seconds: number) => void): Promise<PdScore> {
  const expressed: ExpressedPoint[] = [];
  const unexpressed: UnexpressedPoint[] = [];
  const judgments: Judgment[] = [];
  const transfers: TransferJudgment[] = [];
  for (const point of points) {
    if (point.kind === 'kv_transfer') {
      const t = expressTransfer(point);
      if (!isTransfer(t)) {
        unexpressed.push(t);
        continue;
      }
      const times = await costModel(t.config, { transferTokens: t.tokens });
      const predictedMs = times.kvTransfer.map(k => k.seconds * 1000);
      const pctOff = (p: number, m: number) => (Math.abs(p - m) / m) * 100;
      transfers.push({
        point, tokens: t.tokens, predictedMs, measuredMs: t.measuredMs,
        medianErrorPct: median(predictedMs.map((p, i) => pctOff(p, t.measuredMs[i]))),
        ...(t.measuredBytes ? { bytesErrorPct: median(times.kvTransfer.map((k, i) => pctOff(k.bytes, t.measuredBytes![i]))) } : {}),
      });
      continue;
    }
    const x = expressPoint(point);
    if (!isExpressed(x)) {
      unexpressed.push(x);
      continue;
    }
    const t0 = Date.now();
    const results: SimulationResult[] = [];
    for (const run of x.runs) {
      const r = await simulate(run.config);
      results.push(r);
      if (process.env.PD_DEBUG) {
        const ms = (v: number) => (v * 1000).toFixed(1);
        process.stderr.write(`  ${run.label}${run.ratePerGpu !== undefined ? ` @${run.ratePerGpu.toFixed(2)}/GPU` : ''}${run.sloKey ? ` ${run.sloKey}` : ''}: ` +
          `TTFT mean ${ms(r.ttftSeconds.mean)} p90 ${ms(r.ttftSeconds.p90)} ms, TPOT mean ${ms(r.tpotSeconds.mean)} p90 ${ms(r.tpotSeconds.p90)} ms, ` +
          `good ${(r.goodputShare * 100).toFixed(1)}%, out ${r.outputTokensPerSecond.toFixed(0)} tok/s, preempt ${r.preemptions}\n`);
      }
    }
    expressed.push(x);
    judgments.push(...judgePoint(x, results));
    onPoint?.(x, (Date.now() - t0) / 1000);
  }
  const scored = judgments.filter(j => j.directionRight !== undefined);
  return {
    points: points.length,
    expressed,
    transfers,
    unexpressed,
    judgments,
    directionRight: scored.filter(j => j.directionRight).length,
    directionScored: scored.length,
    ratioErrorMedianPct: median(judgments.flatMap(j => (j.ratioErrorPct !== undefined && Number.isFinite(j.ratioErrorPct) ? [j.ratioErrorPct] : []))),
  };
}

const f = (v: number | undefined, d = 2) => (v === undefined || !Number.isFinite(v) ? '-' : v.toFixed(d));

/** The report: a row per judgment, the unexpressed points, then the JSON line. */
export function formatPdScore(score: PdScore): string {
  const out: string[] = [];
  out.push('| point | measure | aggregated (sim / published) | P/D (sim / published) | P/D : agg (sim / published) | direction (sim / published) |');
  out.push('|---|---|---|---|---|---|');
  for (const j of score.judgments) {
    const mark = j.directionRight === undefined ? '' : j.directionRight ? ' ok' : ' WRONG';
    out.push(`| ${j.point.id} | ${j.measure} | ${f(j.predicted.aggregated)} / ${f(j.published.aggregated)} | ${f(j.predicted.disaggregated)} / ${f(j.published.disaggregated)} | ` +
      `${f(j.predicted.ratio)} / ${f(j.published.ratio)}${j.ratioErrorPct !== undefined ? ` (${f(j.ratioErrorPct, 0)}%)` : ''} | ` +
      `${j.predicted.direction ?? '-'} / ${j.published.direction ?? '-'}${mark} |`);
  }
  if (score.transfers.length > 0) {
    out.push('');
    out.push('| KV-transfer point | prompt tokens | transfer ms (sim / published) | median error | KV bytes: median error |');
    out.push('|---|---|---|---:|---:|');
    for (const t of score.transfers) {
      const rows = t.tokens.map((n, i) => `${n}: ${f(t.predictedMs[i])} / ${f(t.measuredMs[i])}`);
      const bytes = t.bytesErrorPct === undefined ? '-' : `${f(t.bytesErrorPct, 1)}%`;
      out.push(`| ${t.point.id} | ${t.tokens[0]}-${t.tokens[t.tokens.length - 1]} | ${rows.join('; ')} | ${f(t.medianErrorPct, 0)}% | ${bytes} |`);
    }
  }
  if (score.unexpressed.length > 0) {
    out.push('');
    out.push(`Not expressed (${score.unexpressed.length}):`);
    for (const u of score.unexpressed) out.push(`- ${u.point.id} (${u.point.completeness}): ${u.reasons.join('; ')}`);
  }
  out.push('');
  out.push(JSON.stringify({
    points: score.points,
    expressed: score.expressed.length + score.transfers.length,
    direction_right: score.directionRight,
    direction_scored: score.directionScored,
    ratio_error_median_pct: Number.isFinite(score.ratioErrorMedianPct) ? Number(score.ratioErrorMedianPct.toFixed(1)) : null,
    unexpressed: score.unexpressed.map(u => u.point.id),
  }));
  return out.join('\n');
}

async function main(): Promise<void> {
  const score = await scorePoints(loadPoints(), (x, s) => process.stderr.write(`${x.point.id}: ${x.runs.length} simulation(s), ${s.toFixed(1)} s\n`));
  process.stdout.write(formatPdScore(score) + '\n');
}

if (require.main === module) {
  main().catch((e: Error) => {
    process.stderr.write(`${e.stack ?? e.message}\n`);
    process.exit(1);
  });
}
