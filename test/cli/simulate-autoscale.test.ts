import * as fs from 'fs';
import * as path from 'path';
import { disagg, tmpdir, wellFormedXml } from './util';
import { loadStages } from '../../src/cli/autoscale-simulate';

// Requires the engine addon (`npx projen engine`). Small loads: a simulated half hour at a few
// requests/s, so each run takes about a second.

describe('disagg simulate --autoscale', () => {
  test('compares the static deployment with the autoscaled one: table, GPU-hours, no lost request, chart', async () => {
    // GIVEN an output folder
    const out = tmpdir('autoscale');
    // WHEN the default deployment (2 prefill + 2 decode TP4) runs a half-hour day shape, autoscaled 1-3 per pool
    const { code, out: stdout, err } = await disagg('simulate', '--autoscale', '--load-shape', 'diurnal', '--duration', '1800',
      '--rate', '3', '--output-tokens', '64', '--max-replicas', '3', '--scale-down-window', '60', '--out', out);
    // THEN it exits 0 with one row per pool and one for all
    expect(err).not.toMatch(/error/i);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^disagg simulate --autoscale: llama-3\.3-70b on p5en\.48xlarge: 2 x prefill TP4 \+ 2 x decode TP4$/m);
    expect(stdout).toMatch(/^ {2}pool +GPUs\/replica +static replicas +static GPU-h +peak-sized +peak-sized GPU-h +autoscaled GPU-h +peak +scale-ups +scale-downs +provision +drained +lost$/m);
    expect(stdout).toMatch(/^ {2}prefill \(prefill\) +4 +2 +4\.0 /m);
    expect(stdout).toMatch(/^ {2}decode \(decode\) +4 +2 +4\.0 /m);
    expect(stdout).toMatch(/requests lost on scale-down: 0/);
    // the static deployment is billed 4 replicas x 4 GPUs from 0 to the horizon (the half hour, or
    // the last request's end past it); the autoscaled one scaled down
    const report = JSON.parse(fs.readFileSync(path.join(out, 'simulate-autoscale.json'), 'utf8'));
    const horizon = report.static.scaling.horizonSeconds;
    expect(horizon).toBeGreaterThanOrEqual(1800);
    expect(horizon).toBeLessThan(1900);
    expect(report.static.scaling.gpuHours).toBeCloseTo(16 * horizon / 3600, 9);
    expect(report.autoscaled.scaling.gpuHours).toBeLessThan(report.static.scaling.gpuHours);
    const downs = report.autoscaled.scaling.pools.map((p: { scaleDowns: number }) => p.scaleDowns);
    expect(downs.reduce((x: number, y: number) => x + y)).toBeGreaterThan(0);
    expect(report.gpuHoursSaved).toBeCloseTo(1 - report.autoscaled.scaling.gpuHours / report.static.scaling.gpuHours, 9);
    // AND beside the user's static deployment, the smallest static one meeting the SLO at the peak (3 req/s
    // needs one replica per pool), whose saving is the honest one
    expect(report.peakSized.replicas).toEqual([1, 1]);
    expect(report.peakSized.probes).toBeGreaterThan(2);
    expect(report.peakSized.result.scaling.gpuHours).toBeLessThan(report.static.scaling.gpuHours);
    expect(report.peakSized.gpuHoursSaved).toBeCloseTo(1 - report.autoscaled.scaling.gpuHours / report.peakSized.result.scaling.gpuHours, 9);
    expect(report.peakSized.gpuHoursSaved).toBeLessThan(report.gpuHoursSaved);
    expect(stdout).toMatch(/peer {6}1 \+ 1 replicas: the smallest static deployment found to keep 90% of requests within the SLO at the peak \(3 req\/s held /);
    expect(stdout).toMatch(/vs [\d.]+ static sized for the peak \([\d.]+% (saved|more); goodput [\d.]+x\) and [\d.]+ your static/);
    // every request is accounted for: finished or refused, none lost
    const a = report.autoscaled;
    expect(a.completed + a.rejected).toBe(a.submitted);
    expect(a.scaling.lostOnScaleDown).toBe(0);
    // windows of 60 s cover the horizon (a last short one past the half hour), with the arrivals of the run
    expect(a.scaling.windows.count).toBe(Math.ceil(a.scaling.horizonSeconds / 60));
    expect(a.scaling.windows.arrivals.reduce((x: number, y: number) => x + y)).toBe(a.submitted);
    // AND the chart is well-formed SVG with the load, each pool's replicas and the SLO attainment
    const svg = fs.readFileSync(path.join(out, 'simulate-autoscale.svg'), 'utf8');
    expect(wellFormedXml(svg)[0]).toBe('svg');
    for (const series of ['load', 'replicas-prefill', 'ready-prefill', 'replicas-decode', 'ready-decode', 'slo-autoscaled', 'slo-static']) {
      expect(svg).toContain(`data-series="${series}"`);
    }
  }, 120_000);

  test('without --rate the peak is 3/4 of what the static deployment serves, so the pools must grow', async () => {
    // GIVEN one prefill and one decode replica of Llama-3.1-8B at TP1 and a half-hour day, no --rate
    const out = tmpdir('autoscale-peak');
    const { code, out: stdout } = await disagg('simulate', '--autoscale', '--model', 'llama-3.1-8b', '--instance', 'p5.48xlarge',
      '--weight-precision', 'bf16', '--tp', '1', '--prefill-replicas', '1', '--decode-replicas', '1', '--input-tokens', '2048',
      '--output-tokens', '32', '--duration', '1800', '--max-replicas', '4', '--scale-down-window', '60', '--out', out);
    expect(code).toBe(0);
    const report = JSON.parse(fs.readFileSync(path.join(out, 'simulate-autoscale.json'), 'utf8'));
    // THEN the peak is a rate the 1 + 1 deployment serves within the SLO, found by search, and the load says so
    expect(report.peakRate).toBeGreaterThan(1);
    expect(stdout).toMatch(/3\/4 of what your static deployment serves within the SLO; --rate sets the peak/);
    // AND the peak-sized static deployment is yours (it serves 4/3 of the peak)
    expect(report.peakSized.replicas).toEqual([1, 1]);
  }, 120_000);

  test('a long-prompt surge is replayed from a trace it writes', async () => {
    const out = tmpdir('autoscale');
    const { code, out: stdout } = await disagg('simulate', '--autoscale', '--load-shape', 'long-prompt-surge', '--duration', '600',
      '--rate', '2', '--output-tokens', '32', '--out', out);
    expect(code).toBe(0);
    expect(stdout).toMatch(/load +long-prompt surge: 2 req\/s for 600 s/);
    const lines = fs.readFileSync(path.join(out, 'surge-trace.jsonl'), 'utf8').trim().split('\n').map(l => JSON.parse(l));
    expect(lines.length).toBeGreaterThan(900);
    const mean = (from: number, to: number) => {
      const sel = lines.filter(l => l.timestamp_ms >= from * 1000 && l.timestamp_ms < to * 1000);
      return sel.reduce((s, l) => s + l.input_length, 0) / sel.length;
    };
    // prompts are about 4x longer in the middle third
    expect(mean(200, 400) / mean(0, 200)).toBeGreaterThan(3);
  }, 120_000);

  test('bad flags are refused naming the flag', async () => {
    const shape = await disagg('simulate', '--autoscale', '--load-shape', 'weekly');
    expect(shape.code).toBe(2);
    expect(shape.err).toMatch(/--load-shape 'weekly' is not known; use one of diurnal, bursty, long-prompt-surge, constant/);
    const lone = await disagg('simulate', '--load-shape', 'diurnal');
    expect(lone.code).toBe(2);
    expect(lone.err).toMatch(/--load-shape needs --autoscale/);
    const bounds = await disagg('simulate', '--autoscale', '--min-replicas', '4', '--max-replicas', '2');
    expect(bounds.code).toBe(2);
    expect(bounds.err).toMatch(/--max-replicas \(2\) must be >= --min-replicas \(4\)/);
  });
});

describe('loadStages', () => {
  test('bursty is a 10-minute burst at the start of every real hour, whatever the duration', () => {
    expect(loadStages('bursty', 10, 7200)).toEqual([
      { ratePerSecond: 10, durationSeconds: 600 }, { ratePerSecond: 3, durationSeconds: 3000 },
      { ratePerSecond: 10, durationSeconds: 600 }, { ratePerSecond: 3, durationSeconds: 3000 },
    ]);
    expect(loadStages('bursty', 10, 900)).toEqual([{ ratePerSecond: 10, durationSeconds: 600 }, { ratePerSecond: 3, durationSeconds: 300 }]);
    const day = loadStages('bursty', 10, 86_400);
    expect(day).toHaveLength(48);
    expect(day.filter(st => st.ratePerSecond === 10).reduce((sum, st) => sum + st.durationSeconds, 0)).toBe(24 * 600);
  });

  test('a diurnal day peaks at 16:00 at the given rate and bottoms at 04:00 at a fifth of it', () => {
    const stages = loadStages('diurnal', 10, 86_400);
    expect(stages).toHaveLength(144);
    expect(stages.reduce((s, x) => s + x.durationSeconds, 0)).toBeCloseTo(86_400, 6);
    const rates = stages.map(s => s.ratePerSecond);
    const top = rates.indexOf(Math.max(...rates));
    const bottom = rates.indexOf(Math.min(...rates));
    expect(Math.floor(top * 600 / 3600)).toBe(15); // the 10 minutes before 16:00
    expect(Math.floor(bottom * 600 / 3600)).toBe(3); // the 10 minutes before 04:00
    expect(Math.max(...rates)).toBeCloseTo(10, 1);
    expect(Math.min(...rates)).toBeCloseTo(2, 1);
  });
});
