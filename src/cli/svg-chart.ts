import type { SweepPoint } from '../engine';

/** What the sweep chart shows besides the points. */
export interface SweepChartOptions {
  readonly title: string;
  readonly ttftSloSeconds: number;
  readonly tpotSloSeconds: number;
  readonly targetShare: number;
  /** Rate to mark with a vertical line (e.g. the requested rate or the goodput). */
  readonly markRate?: number;
  readonly markLabel?: string;
}

interface Series {
  readonly id: string;
  readonly label: string;
  readonly color: string;
  readonly dashed?: boolean;
  readonly points: Array<[number, number]>;
}

interface Axis {
  readonly min: number;
  readonly max: number;
  readonly log: boolean;
  readonly ticks: number[];
}

const PANEL_W = 360;
const PANEL_H = 250;
const MARGIN = { left: 58, right: 16, top: 34, bottom: 44 };
// Colour-blind-safe palette (Okabe-Ito).
const COLORS = { p50: '#0072B2', p90: '#E69F00', p99: '#D55E00', good: '#009E73', offered: '#999999', slo: '#CC79A7' };

/**
 * Three panels against the arrival rate: TTFT percentiles, TPOT percentiles (with the SLO as a
 * dashed line) and good requests/s (the offered rate times the share meeting both SLOs, beside the
 * offered rate). Plain SVG 1.1,
 * no scripts or external references. Latency axes turn logarithmic when values span more than
 * 20x (overload makes them explode). Every series is a `<path data-series="...">`.
 */
export function renderSweepChart(points: SweepPoint[], options: SweepChartOptions): string {
  const sorted = [...points].sort((a, b) => a.ratePerSecond - b.ratePerSecond);
  const rates = sorted.map(p => p.ratePerSecond);
  const pct = (key: 'p50' | 'p90' | 'p99', metric: 'ttftSeconds' | 'tpotSeconds', factor: number): Array<[number, number]> =>
    sorted.map(p => [p.ratePerSecond, p.summary[metric][key] * factor]);
  const panels = [
    {
      title: 'TTFT (s)',
      series: (['p50', 'p90', 'p99'] as const).map(k => ({ id: `ttft-${k}`, label: k, color: COLORS[k], points: pct(k, 'ttftSeconds', 1) })),
      slo: options.ttftSloSeconds,
      allowLog: true,
    },
    {
      title: 'TPOT (ms)',
      series: (['p50', 'p90', 'p99'] as const).map(k => ({ id: `tpot-${k}`, label: k, color: COLORS[k], points: pct(k, 'tpotSeconds', 1000) })),
      slo: options.tpotSloSeconds * 1000,
      allowLog: true,
    },
    {
      title: `Good requests/s (target ${Math.round(options.targetShare * 100)}%)`,
      series: [
        // Good requests per second of offered load (rate x share meeting both SLOs); the goodput is
        // the highest rate at which that share still meets the target (the mark, when given).
        { id: 'good', label: 'good', color: COLORS.good, points: sorted.map(p => [p.ratePerSecond, p.ratePerSecond * p.summary.goodputShare] as [number, number]) },
        { id: 'offered', label: 'offered', color: COLORS.offered, dashed: true, points: sorted.map(p => [p.ratePerSecond, p.ratePerSecond] as [number, number]) },
      ] as Series[],
      slo: undefined,
      allowLog: false,
    },
  ];
  return renderChart(options.title, panels, rates, 'arrival rate (req/s)', options, panel => {
    const values = yValues(panel, false);
    const positive = values.filter(v => v > 0);
    const log = panel.allowLog && positive.length > 0 && Math.max(...positive) / Math.min(...positive) > 20;
    return axis(values.length > 0 ? values : [0, 1], log, false);
  });
}

/** One panel of a chart: its title, its series and an optional SLO line. */
interface Panel {
  readonly title: string;
  readonly series: Series[];
  readonly slo?: number;
}

/**
 * The SVG document of a chart: its title over the panels side by side, all on one x axis over
 * `xValues` (from 0), each with the y axis `yAxis` gives it.
 */
function renderChart<P extends Panel>(
  title: string, panels: P[], xValues: number[], xLabel: string,
  options: Pick<SweepChartOptions, 'markRate' | 'markLabel'>, yAxis: (panel: P) => Axis,
): string {
  const width = PANEL_W * panels.length;
  const height = PANEL_H + 30;
  const out: string[] = [];
  out.push('<?xml version="1.0" encoding="UTF-8"?>');
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="11">`);
  out.push(`<title>${esc(title)}</title>`);
  out.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="${width / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`);
  const xAxis = axis(xValues.length > 0 ? xValues : [0, 1], false, true);
  panels.forEach((panel, i) => {
    out.push(...renderPanel(i * PANEL_W, 30, panel.title, panel.series, xAxis, yAxis(panel), panel.slo, options, xLabel));
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

/** The values a panel's y axis spans: its series' points (the finite ones with `finiteOnly`) and its SLO. */
function yValues(panel: Panel, finiteOnly: boolean): number[] {
  const values = panel.series.flatMap(s => s.points.map(pt => pt[1]));
  return (finiteOnly ? values.filter(v => Number.isFinite(v)) : values).concat(panel.slo !== undefined ? [panel.slo] : []);
}

function renderPanel(
  x0: number, y0: number, title: string, series: Series[], xa: Axis, ya: Axis, slo: number | undefined,
  options: Pick<SweepChartOptions, 'markRate' | 'markLabel'>, xLabel: string,
): string[] {
  const out: string[] = [];
  const plotW = PANEL_W - MARGIN.left - MARGIN.right;
  const plotH = PANEL_H - MARGIN.top - MARGIN.bottom;
  const left = x0 + MARGIN.left;
  const top = y0 + MARGIN.top;
  const sx = (v: number) => left + scale(v, xa) * plotW;
  const sy = (v: number) => top + plotH - scale(v, ya) * plotH;
  out.push(`<g class="panel" data-title="${esc(title)}">`);
  out.push(`<text x="${x0 + PANEL_W / 2}" y="${y0 + 16}" text-anchor="middle" font-size="12" font-weight="bold">${esc(title)}</text>`);
  out.push(`<rect x="${left}" y="${top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333333" stroke-width="1"/>`);
  for (const t of xa.ticks) {
    const x = fmt(sx(t));
    out.push(`<line x1="${x}" y1="${top + plotH}" x2="${x}" y2="${top + plotH + 4}" stroke="#333333"/>`);
    out.push(`<text x="${x}" y="${top + plotH + 16}" text-anchor="middle">${esc(tickLabel(t))}</text>`);
  }
  for (const t of ya.ticks) {
    const y = fmt(sy(t));
    out.push(`<line x1="${left}" y1="${y}" x2="${left + plotW}" y2="${y}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${esc(tickLabel(t))}</text>`);
  }
  out.push(`<text x="${left + plotW / 2}" y="${top + plotH + 34}" text-anchor="middle">${esc(xLabel)}${ya.log ? ', log y' : ''}</text>`);
  if (slo !== undefined && slo >= ya.min && slo <= ya.max) {
    const y = fmt(sy(slo));
    out.push(`<line data-series="slo" x1="${left}" y1="${y}" x2="${left + plotW}" y2="${y}" stroke="${COLORS.slo}" stroke-dasharray="6 4" stroke-width="1.5"/>`);
    out.push(`<text x="${left + plotW - 4}" y="${fmt(sy(slo) - 4)}" text-anchor="end" fill="${COLORS.slo}">SLO</text>`);
  }
  if (options.markRate !== undefined && options.markRate >= xa.min && options.markRate <= xa.max) {
    const x = fmt(sx(options.markRate));
    out.push(`<line data-series="mark" x1="${x}" y1="${top}" x2="${x}" y2="${top + plotH}" stroke="#666666" stroke-dasharray="2 3"/>`);
    if (options.markLabel) {
      out.push(`<text x="${fmt(sx(options.markRate) + 3)}" y="${top + 12}" fill="#666666">${esc(options.markLabel)}</text>`);
    }
  }
  series.forEach((s, i) => {
    const pts = s.points.filter(([, v]) => Number.isFinite(v) && (!ya.log || v > 0));
    if (pts.length === 0) return;
    const d = pts.map(([x, y], j) => `${j === 0 ? 'M' : 'L'}${fmt(sx(x))},${fmt(sy(clamp(y, ya)))}`).join(' ');
    out.push(`<path data-series="${esc(s.id)}" d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 4"' : ''}/>`);
    for (const [x, y] of pts) {
      out.push(`<circle cx="${fmt(sx(x))}" cy="${fmt(sy(clamp(y, ya)))}" r="2.5" fill="${s.color}"/>`);
    }
    const ly = top + 12 + i * 14;
    out.push(`<line x1="${left + 8}" y1="${ly}" x2="${left + 26}" y2="${ly}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 4"' : ''}/>`);
    out.push(`<text x="${left + 30}" y="${ly}" dominant-baseline="middle">${esc(s.label)}</text>`);
  });
  out.push('</g>');
  return out;
}

/** What the autoscaling chart shows: windows of a run, as the engine's scaling report gives them. */
export interface TimelineChartInput {
  readonly title: string;
  /** Start of each window, seconds. */
  readonly startSeconds: number[];
  readonly windowSeconds: number;
  /** Requests that arrived in each window. */
  readonly arrivals: number[];
  /** Of those, the ones meeting both SLOs. */
  readonly good: number[];
  /** Per pool: its name and mean replicas billed (provisioning, serving, draining) and ready per window. */
  readonly pools: ReadonlyArray<{ readonly name: string; readonly replicas: number[]; readonly ready: number[] }>;
  /** The static deployment's SLO attainment per window, for comparison (optional). */
  readonly staticGood?: number[];
  /** The attainment to aim for (e.g. 0.99). */
  readonly targetShare: number;
}

const POOL_COLORS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7'];

/**
 * Three panels against time (hours): the load (arrivals/s per window), the replicas of each pool
 * (billed solid, ready dashed) and the share of each window's requests meeting both SLOs (the
 * autoscaled run, and the static one when given). Plain SVG 1.1, `<path data-series="...">` each.
 */
export function renderTimelineChart(input: TimelineChartInput): string {
  const hours = input.startSeconds.map(s => (s + input.windowSeconds / 2) / 3600);
  const at = (values: number[]): Array<[number, number]> => values.map((v, i) => [hours[i], v]);
  const share = (good: number[]): number[] => good.map((g, i) => (input.arrivals[i] > 0 ? (100 * g) / input.arrivals[i] : NaN));
  const panels: Panel[] = [
    { title: 'Load (req/s)', series: [{ id: 'load', label: 'arrivals', color: COLORS.offered, points: at(input.arrivals.map(n => n / input.windowSeconds)) }] },
    {
      title: 'Replicas per pool',
      series: input.pools.flatMap((p, i) => [
        { id: `replicas-${p.name}`, label: `${p.name} (billed)`, color: POOL_COLORS[i % POOL_COLORS.length], points: at(p.replicas) },
        { id: `ready-${p.name}`, label: `${p.name} (ready)`, color: POOL_COLORS[i % POOL_COLORS.length], dashed: true, points: at(p.ready) },
      ]),
    },
    {
      title: 'Requests meeting the SLO (%)',
      series: [
        { id: 'slo-autoscaled', label: 'autoscaled', color: COLORS.good, points: at(share(input.good)) },
        ...(input.staticGood ? [{ id: 'slo-static', label: 'static', color: COLORS.offered, dashed: true, points: at(share(input.staticGood)) }] : []),
      ],
      slo: input.targetShare * 100,
    },
  ];
  return renderChart(input.title, panels, hours, 'time (h)', {}, panel => {
    const values = yValues(panel, true);
    return axis(values.length > 0 ? values : [0, 1], false, true);
  });
}

/** An axis over `values` with "nice" ticks; log axes tick at 1-2-5 steps of each decade. */
function axis(values: number[], log: boolean, startAtZero: boolean): Axis {
  if (log) {
    const positive = values.filter(v => v > 0);
    const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...positive))));
    const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...positive))));
    const ticks: number[] = [];
    for (let d = lo; d <= hi * 1.0001; d *= 10) {
      ticks.push(d);
      if (hi / lo <= 1000) {
        for (const m of [2, 5]) if (d * m < hi) ticks.push(d * m);
      }
    }
    return { min: lo, max: hi, log: true, ticks: ticks.sort((a, b) => a - b) };
  }
  let min = startAtZero ? 0 : Math.min(0, ...values);
  let max = Math.max(...values);
  if (!(max > min)) max = min + 1;
  const step = niceStep((max - min) / 5);
  min = Math.floor(min / step) * step;
  max = Math.ceil(max / step) * step;
  const ticks: number[] = [];
  for (let t = min; t <= max + step / 2; t += step) ticks.push(Number(t.toPrecision(12)));
  return { min, max, log: false, ticks };
}

function niceStep(raw: number): number {
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const norm = raw / mag;
  return (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
}

function scale(v: number, a: Axis): number {
  if (a.log) {
    return (Math.log10(v) - Math.log10(a.min)) / (Math.log10(a.max) - Math.log10(a.min));
  }
  return (v - a.min) / (a.max - a.min);
}

function clamp(v: number, a: Axis): number {
  return Math.min(a.max, Math.max(a.min, v));
}

function tickLabel(v: number): string {
  if (v === 0) return '0';
  const abs = Math.abs(v);
  if (abs >= 1000) return `${Number((v / 1000).toPrecision(3))}k`;
  if (abs >= 1) return String(Number(v.toPrecision(3)));
  return String(Number(v.toPrecision(2)));
}

function fmt(v: number): string {
  return (Math.round(v * 10) / 10).toString();
}

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
