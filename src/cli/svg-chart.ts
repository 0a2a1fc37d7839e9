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
 * The SVG document of a chart: its title (wrapped to the width, no line beyond it) over the panels
 * side by side, all on one x axis over `xValues` (from 0), each with the y axis `yAxis` gives it and
 * its legend in rows below the plot, off the data.
 */
function renderChart<P extends Panel>(
  title: string, panels: P[], xValues: number[], xLabel: string,
  options: Pick<SweepChartOptions, 'markRate' | 'markLabel'>, yAxis: (panel: P) => Axis,
): string {
  const width = PANEL_W * panels.length;
  const titleLines = wrapText(title, width - 20, TITLE_FONT, true);
  const header = 12 + titleLines.length * (TITLE_FONT + 4);
  const legends = panels.map(p => legendLayout(p.series));
  const legendRows = Math.max(1, ...legends.map(l => l.rows));
  const panelH = PANEL_H + legendRows * LEGEND_ROW;
  const height = header + panelH;
  const out: string[] = [];
  out.push('<?xml version="1.0" encoding="UTF-8"?>');
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="11">`);
  out.push(`<title>${esc(title)}</title>`);
  out.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  titleLines.forEach((line, i) => {
    out.push(`<text x="${width / 2}" y="${18 + i * (TITLE_FONT + 4)}" text-anchor="middle" font-size="${TITLE_FONT}" font-weight="bold">${esc(line)}</text>`);
  });
  const xAxis = axis(xValues.length > 0 ? xValues : [0, 1], false, true);
  panels.forEach((panel, i) => {
    out.push(...renderPanel(i * PANEL_W, header, panel.title, panel.series, legends[i], xAxis, yAxis(panel), panel.slo, options, xLabel));
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

const TITLE_FONT = 14;
const LEGEND_ROW = 15;

/**
 * Approximate width of `text` in Helvetica at `fontSize` px: 0.6 em a character (0.65 bold), a
 * little wider than the font's mean, so that text laid out by it does not collide. The overlap test
 * in test/cli/svg-chart.test.ts measures with the same rule.
 */
export function textWidth(text: string, fontSize: number, bold = false): number {
  return text.length * fontSize * (bold ? 0.65 : 0.6);
}

/** `text` in lines no wider than `maxWidth`, broken at spaces (a word longer than a line is cut). */
function wrapText(text: string, maxWidth: number, fontSize: number, bold: boolean): string[] {
  const maxChars = Math.max(8, Math.floor(maxWidth / textWidth('x', fontSize, bold)));
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    const next = line ? `${line} ${word}` : word;
    if (next.length <= maxChars) {
      line = next;
      continue;
    }
    if (line) lines.push(line);
    line = word.length <= maxChars ? word : word.slice(0, maxChars - 1) + '~';
  }
  if (line) lines.push(line);
  return lines;
}

/** Where each legend item of a panel goes: rows of items, each a line sample and its label. */
interface LegendLayout {
  readonly rows: number;
  readonly items: Array<{ row: number; x: number; width: number }>;
}

function legendLayout(series: Series[]): LegendLayout {
  const plotW = PANEL_W - MARGIN.left - MARGIN.right;
  const items: Array<{ row: number; x: number; width: number }> = [];
  let row = 0;
  let x = 0;
  for (const s of series) {
    const width = 22 + textWidth(s.label, 11) + 12;
    if (x > 0 && x + width > plotW) {
      row++;
      x = 0;
    }
    items.push({ row, x, width });
    x += width;
  }
  return { rows: series.length > 0 ? row + 1 : 0, items };
}

/** The values a panel's y axis spans: its series' points (the finite ones with `finiteOnly`) and its SLO. */
function yValues(panel: Panel, finiteOnly: boolean): number[] {
  const values = panel.series.flatMap(s => s.points.map(pt => pt[1]));
  return (finiteOnly ? values.filter(v => Number.isFinite(v)) : values).concat(panel.slo !== undefined ? [panel.slo] : []);
}

function renderPanel(
  x0: number, y0: number, title: string, series: Series[], legend: LegendLayout, xa: Axis, ya: Axis, slo: number | undefined,
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
    // Above its line, or below it when the line runs along the top of the frame (the mark's label is above).
    const ty = sy(slo) - 4 < top + 10 ? sy(slo) + 12 : sy(slo) - 4;
    out.push(`<text x="${left + plotW - 4}" y="${fmt(ty)}" text-anchor="end" fill="${COLORS.slo}">SLO</text>`);
  }
  if (options.markRate !== undefined && options.markRate >= xa.min && options.markRate <= xa.max) {
    const x = fmt(sx(options.markRate));
    out.push(`<line data-series="mark" x1="${x}" y1="${top}" x2="${x}" y2="${top + plotH}" stroke="#666666" stroke-dasharray="2 3"/>`);
    if (options.markLabel) {
      // Above the plot, between the panel title and the frame: never on a legend or a curve.
      const half = textWidth(options.markLabel, 11) / 2;
      const cx = Math.min(left + plotW - half, Math.max(left + half, sx(options.markRate)));
      out.push(`<text x="${fmt(cx)}" y="${top - 4}" text-anchor="middle" fill="#666666">${esc(options.markLabel)}</text>`);
    }
  }
  // Many points (a time series) read as a line; a sweep's few as dots on it.
  const dots = Math.max(0, ...series.map(s => s.points.length)) <= 40;
  series.forEach(s => {
    const pts = s.points.filter(([, v]) => Number.isFinite(v) && (!ya.log || v > 0));
    if (pts.length === 0) return;
    const d = pts.map(([x, y], j) => `${j === 0 ? 'M' : 'L'}${fmt(sx(x))},${fmt(sy(clamp(y, ya)))}`).join(' ');
    out.push(`<path data-series="${esc(s.id)}" d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 4"' : ''}/>`);
    if (dots || pts.length === 1) {
      for (const [x, y] of pts) {
        out.push(`<circle cx="${fmt(sx(x))}" cy="${fmt(sy(clamp(y, ya)))}" r="2.5" fill="${s.color}"/>`);
      }
    }
  });
  // The legend: rows under the axis label, on a white ground, off the data.
  if (legend.rows > 0) {
    const ly0 = top + plotH + 44;
    out.push(`<rect class="legend" x="${left}" y="${ly0 - 8}" width="${plotW}" height="${legend.rows * LEGEND_ROW + 2}" fill="#ffffff" stroke="#dddddd"/>`);
    series.forEach((s, i) => {
      const item = legend.items[i];
      const lx = left + 6 + item.x;
      const ly = ly0 + item.row * LEGEND_ROW;
      out.push(`<line x1="${fmt(lx)}" y1="${ly}" x2="${fmt(lx + 18)}" y2="${ly}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 4"' : ''}/>`);
      out.push(`<text x="${fmt(lx + 22)}" y="${ly}" dominant-baseline="middle">${esc(s.label)}</text>`);
    });
  }
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
  /**
   * 90th-percentile TTFT and TPOT of each window's completed arrivals, seconds (null: none completed),
   * with the SLOs they are read against; each adds a panel.
   */
  readonly latency?: {
    readonly ttftP90: ReadonlyArray<number | null>;
    readonly tpotP90: ReadonlyArray<number | null>;
    readonly ttftSloSeconds: number;
    readonly tpotSloSeconds: number;
  };
}

const POOL_COLORS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7'];

/**
 * Panels against time (hours): the load (arrivals/s per window), the 90th-percentile TTFT and TPOT
 * when given, the replicas of each pool (billed solid, ready dashed; none for a run without pools
 * given) and the share of each window's requests meeting both SLOs (the run, and the static one when
 * given). Plain SVG 1.1, `<path data-series="...">` each.
 */
export function renderTimelineChart(input: TimelineChartInput): string {
  // Minutes for a run shorter than two hours (a staged run), hours for a day.
  const end = input.startSeconds.length > 0 ? input.startSeconds[input.startSeconds.length - 1] + input.windowSeconds : 0;
  const unit = end < 7200 ? { seconds: 60, label: 'time (min)' } : { seconds: 3600, label: 'time (h)' };
  const hours = input.startSeconds.map(s => (s + input.windowSeconds / 2) / unit.seconds);
  const at = (values: number[]): Array<[number, number]> => values.map((v, i) => [hours[i], v]);
  const share = (good: number[]): number[] => good.map((g, i) => (input.arrivals[i] > 0 ? (100 * g) / input.arrivals[i] : NaN));
  const lat = input.latency;
  const latencyPanels: Panel[] = lat ? [
    {
      title: 'TTFT p90 (s)',
      series: [{ id: 'ttft-p90', label: 'p90', color: COLORS.p90, points: at(lat.ttftP90.map(v => v ?? NaN)) }],
      slo: lat.ttftSloSeconds,
    },
    {
      title: 'TPOT p90 (ms)',
      series: [{ id: 'tpot-p90', label: 'p90', color: COLORS.p90, points: at(lat.tpotP90.map(v => (v === null ? NaN : v * 1000))) }],
      slo: lat.tpotSloSeconds * 1000,
    },
  ] : [];
  const panels: Panel[] = [
    { title: 'Load (req/s)', series: [{ id: 'load', label: 'arrivals', color: COLORS.offered, points: at(input.arrivals.map(n => n / input.windowSeconds)) }] },
    ...latencyPanels,
    ...(input.pools.length === 0 ? [] : [{
      title: 'Replicas per pool',
      series: input.pools.flatMap((p, i) => [
        { id: `replicas-${p.name}`, label: `${p.name} (billed)`, color: POOL_COLORS[i % POOL_COLORS.length], points: at(p.replicas) },
        { id: `ready-${p.name}`, label: `${p.name} (ready)`, color: POOL_COLORS[i % POOL_COLORS.length], dashed: true, points: at(p.ready) },
      ]),
    }]),
    {
      title: 'Requests meeting the SLO (%)',
      series: [
        { id: 'slo-autoscaled', label: 'autoscaled', color: COLORS.good, points: at(share(input.good)) },
        ...(input.staticGood ? [{ id: 'slo-static', label: 'static', color: COLORS.offered, dashed: true, points: at(share(input.staticGood)) }] : []),
      ],
      slo: input.targetShare * 100,
    },
  ];
  return renderChart(input.title, panels, hours, unit.label, {}, panel => {
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
