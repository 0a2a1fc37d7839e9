import * as fs from 'fs';
import * as path from 'path';
import { disagg, overlaps, textBoxes, tmpdir, wellFormedXml } from './util';
import { renderSweepChart, renderTimelineChart, textWidth } from '../../src/cli/svg-chart';
import { loadEngine } from '../../src/engine';

const built = loadEngine() !== undefined;

/** What a person must be able to read at a glance: no text on other text, none outside the picture, no path of this machine. */
function expectReadable(svg: string): void {
  wellFormedXml(svg);
  const width = Number(/<svg[^>]* width="([\d.]+)"/.exec(svg)![1]);
  const height = Number(/<svg[^>]* height="([\d.]+)"/.exec(svg)![1]);
  const boxes = textBoxes(svg, textWidth);
  expect(boxes.length).toBeGreaterThan(10);
  expect(overlaps(boxes)).toEqual([]);
  const outside = boxes.filter(b => b.x0 < 0 || b.x1 > width || b.y0 < 0 || b.y1 > height).map(b => b.text);
  expect(outside).toEqual([]);
  // An absolute path in a chart names the machine that drew it, not the run.
  expect(svg).not.toMatch(/(^|[\s(>"'])\/(tmp|home|work|Users|var|root)\//m);
}

/** A sweep point with these latencies (seconds) and share meeting the SLO. */
function point(rate: number, ttft: number, tpot: number, share: number) {
  const stats = (v: number) => ({ count: 100, mean: v, p50: v, p90: v * 1.5, p99: v * 2, max: v * 3 });
  return {
    ratePerSecond: rate,
    summary: { ttftSeconds: stats(ttft), tpotSeconds: stats(tpot), goodputShare: share } as never,
  };
}

describe('charts a person reads at a glance', () => {
  test('the overlap check finds text on text', () => {
    const svg = '<svg><text x="10" y="20">--rate</text><text x="30" y="22">p50</text><text x="200" y="20">far</text></svg>';
    expect(overlaps(textBoxes(svg, textWidth))).toEqual([['--rate', 'p50']]);
  });

  test('the sweep chart: legends under the plots, the --rate label above them, a long title wrapped', () => {
    // GIVEN a sweep whose marked rate sits where the legends used to be (the left of each panel) and a long title
    const points = [0.25, 0.5, 1, 2, 4, 8, 16].map((r, i) => point(r, 0.05 * (i + 1) ** 2, 0.02 * (i + 1), i < 5 ? 1 : 0.5));
    const svg = renderSweepChart(points, {
      title: 'llama-3.3-70b on p5en.48xlarge: 2 x prefill TP4 + 2 x decode TP4 with a title long enough to need a second line of its own',
      ttftSloSeconds: 2,
      tpotSloSeconds: 0.1,
      targetShare: 0.9,
      markRate: 0.25,
      markLabel: '--rate',
    });
    // THEN nothing overlaps, and the title takes two lines
    expectReadable(svg);
    expect(svg.match(/font-size="14" font-weight="bold"/g)!.length).toBe(2);
    // AND each panel has its legend on a white ground below the plot
    expect(svg.match(/<rect class="legend"/g)!.length).toBe(3);
  });

  test('the timeline: many windows read as lines, with latency panels and their SLOs', () => {
    // GIVEN 96 windows of a day with two pools
    const n = 96;
    const startSeconds = Array.from({ length: n }, (_, i) => i * 900);
    const arrivals = startSeconds.map((_, i) => Math.round(3600 * (1 + Math.sin(i / 15))));
    const svg = renderTimelineChart({
      title: 'llama-3.3-70b on p5en.48xlarge: 2 x prefill TP4 + 2 x decode TP4, autoscaled (diurnal, peak 8 req/s over 86400 s)',
      startSeconds,
      windowSeconds: 900,
      arrivals,
      good: arrivals.map(a => Math.round(a * 0.97)),
      pools: [{ name: 'prefill', replicas: arrivals.map(a => 1 + a / 3600), ready: arrivals.map(a => a / 3600) },
        { name: 'decode', replicas: arrivals.map(a => 2 + a / 3600), ready: arrivals.map(a => 1 + a / 3600) }],
      staticGood: arrivals,
      targetShare: 0.9,
      latency: {
        ttftP90: arrivals.map(a => a / 4000), tpotP90: arrivals.map((a, i) => (i === 3 ? null : a / 80000)), ttftSloSeconds: 2, tpotSloSeconds: 0.1,
      },
    });
    expectReadable(svg);
    // THEN the latency panels are there, and a day of windows is drawn as lines, not dots
    for (const series of ['load', 'ttft-p90', 'tpot-p90', 'replicas-prefill', 'ready-decode', 'slo-autoscaled', 'slo-static']) {
      expect(svg).toContain(`data-series="${series}"`);
    }
    expect(svg).not.toContain('<circle');
    expect(svg).toContain('time (h)');
  });

  (built ? test : test.skip)('disagg simulate --stages draws its run over time', async () => {
    // GIVEN a staged run (two stages of 2 minutes)
    const out = tmpdir('chart-stages');
    const r = await disagg('simulate', '--model', 'llama-3.1-8b', '--instance', 'p5.48xlarge', '--weight-precision', 'bf16', '--aggregated',
      '--replicas', '1', '--tp', '1', '--stages', '4x120,12x120', '--input-tokens', '512', '--output-tokens', '64', '--out', out);
    expect(r.code).toBe(0);
    const svg = fs.readFileSync(path.join(out, 'simulate.svg'), 'utf8');
    // THEN the chart is a time series in minutes: the load steps from 4 to 12 req/s
    expectReadable(svg);
    expect(svg).toContain('time (min)');
    const load = /data-series="load" d="([^"]+)"/.exec(svg)![1].split(' ');
    expect(load.length).toBeGreaterThanOrEqual(50);
    const ys = load.map(p => Number(p.slice(1).split(',')[1]));
    // (SVG y grows downward: the second stage's load draws higher, a smaller y)
    expect(Math.min(...ys.slice(-10))).toBeLessThan(Math.min(...ys.slice(0, 10)) - 20);
    expect(svg).toContain('data-series="ttft-p90"');
    // AND the windows it draws are in simulate.json: every window's TTFT p90 measured, the busier stage's higher
    const { timeline } = JSON.parse(fs.readFileSync(path.join(out, 'simulate.json'), 'utf8'));
    const all = timeline.windows.ttftP90 as Array<number | null>;
    expect(all.length).toBe(timeline.windows.count);
    const p90 = all.filter((_, i) => timeline.windows.arrivals[i] > 0) as number[];
    expect(p90.length).toBeGreaterThanOrEqual(50);
    expect(p90.every(v => v > 0)).toBe(true);
    const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
    expect(mean(p90.slice(-30))).toBeGreaterThan(mean(p90.slice(0, 30)));
  });

  (built ? test : test.skip)('the long-prompt surge names its trace by file name, the run\'s folder being anywhere', async () => {
    const out = tmpdir('chart-surge');
    const r = await disagg('simulate', '--model', 'llama-3.1-8b', '--instance', 'p5.48xlarge', '--weight-precision', 'bf16', '--aggregated',
      '--replicas', '1', '--tp', '1', '--autoscale', '--load-shape', 'long-prompt-surge', '--duration', '600', '--rate', '2', '--out', out);
    expect(r.code).toBe(0);
    const svg = fs.readFileSync(path.join(out, 'simulate-autoscale.svg'), 'utf8');
    expectReadable(svg);
    expect(svg).toContain('surge-trace.jsonl');
  });
});
