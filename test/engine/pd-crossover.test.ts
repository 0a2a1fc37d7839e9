import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src/catalog';
import { CrossoverRow, crossoverShape, EngineProfile, pdCrossover, plan, plannerConfig } from '../../src/engine';

// Requires the engine addon (`npx projen engine`) for the planner runs.

/** A row whose two scores are `agg` and `pd` per accelerator-hour (0: that mode meets the SLO nowhere). */
function row(ttftSeconds: number, agg: number, pd: number): CrossoverRow {
  const best = (score: number) => score > 0 ? { layout: 'x', accelerators: 1, goodputRatePerSecond: score / 3600, score } : null;
  const ratio = agg > 0 && pd > 0 ? pd / agg : null;
  const winner = agg === 0 && pd === 0 ? 'neither' : agg === 0 ? 'disaggregated' : pd === 0 ? 'aggregated'
    : Math.abs(ratio! - 1) <= 0.05 ? 'tie' : ratio! > 1 ? 'disaggregated' : 'aggregated';
  return { ttftSeconds, aggregated: best(agg), disaggregated: best(pd), ratio, winner };
}

describe('where a prefill/decode split pays: the shape of the crossover', () => {
  test.each([
    // DistServe's shape: P/D at tight TTFT, aggregated from a looser one
    ['below', 0.25, [row(0.1, 0, 50), row(0.25, 80, 100), row(1, 120, 100), row(4, 130, 100)], /pays at a TTFT SLO of 250 ms and tighter; from 1 s aggregated/],
    // today's chunked-prefill shape: P/D's isolation of decodes pays where TTFT leaves room for the transfer
    ['above', 4, [row(0.25, 80, 20), row(1, 100, 90), row(4, 100, 120)], /pays at a TTFT SLO of 4 s and looser; at 1 s and tighter aggregated/],
    ['never', null, [row(0.25, 80, 20), row(1, 100, 98), row(4, 100, 104)], /never pays here over TTFT SLOs 250 ms to 4 s: .* \(within 5% at 1 s, 4 s\)/],
    ['always', null, [row(0.25, 0, 20), row(1, 100, 120)], /pays at every one of TTFT SLOs 250 ms to 1 s/],
    ['mixed', null, [row(0.25, 100, 120), row(1, 100, 80), row(4, 100, 120)], /no single crossover: a prefill\/decode split pays at 250 ms, 4 s only/],
    // rows where nothing meets the SLO do not bend the shape
    ['below', 0.25, [row(0.1, 0, 0), row(0.25, 80, 100), row(1, 120, 100)], /pays at a TTFT SLO of 250 ms and tighter/],
    ['never', null, [row(0.1, 0, 0)], /no deployment meets the SLO at any of TTFT SLOs 100 ms to 100 ms/],
  ])('%s', (shape, ttft, rows, verdict) => {
    const s = crossoverShape(rows as CrossoverRow[]);
    expect(s.shape).toBe(shape);
    expect(s.ttftSeconds).toBe(ttft);
    expect(s.verdict).toMatch(verdict as RegExp);
  });
});

describe('pdCrossover on the planner', () => {
  const model = ModelArchitecture.fromName('llama-3.1-8b');
  const config = plannerConfig({
    model,
    instanceType: AcceleratedInstanceType.P5_48XLARGE,
    weightPrecision: Precision.BF16,
    kvCachePrecision: Precision.BF16,
    maxContext: 4096,
    workload: { requests: 200, arrival: { process: 'poisson', ratePerSecond: 4 }, inputTokens: { distribution: 'lognormal', mean: 1500, stddev: 600 }, outputTokens: { distribution: 'lognormal', mean: 200, stddev: 100 } },
    slo: { ttftSeconds: 1, tpotSeconds: 0.03 },
    planner: { maxAccelerators: 3 },
  });

  test('each mode searched apart: its best is at least the best of that mode in the joint search; the winner follows the scores', async () => {
    // WHEN the crossover runs at two TTFT SLOs, one of them the joint search's
    const progress: number[] = [];
    const c = await pdCrossover(config, [1, 0.3], p => progress.push(p.done));
    // THEN the rows come tightest first, each with a verdict consistent with its scores
    expect(c.rows.map(r => r.ttftSeconds)).toEqual([0.3, 1]);
    expect(progress).toEqual([1, 2, 3, 4]);
    expect(c.tpotSeconds).toBe(0.03);
    for (const r of c.rows) {
      if (r.aggregated && r.disaggregated) {
        expect(r.ratio).toBeCloseTo(r.disaggregated.score / r.aggregated.score, 9);
        expect(r.winner).toBe(Math.abs(r.ratio! - 1) <= 0.05 ? 'tie' : r.ratio! > 1 ? 'disaggregated' : 'aggregated');
      }
      expect(r.aggregated?.layout ?? 'aggregated').toMatch(/^aggregated \d+ x TP\d$/);
      expect(r.disaggregated?.layout ?? 'prefill 1 x TP1 + decode 1 x TP1').toMatch(/^prefill \d+ x TP\d \+ decode \d+ x TP\d$/);
    }
    // AND at the joint search's SLO, neither mode's best is worse than what the joint search kept of it
    const joint = await plan(config);
    const at1 = c.rows.find(r => r.ttftSeconds === 1)!;
    for (const mode of ['aggregated', 'disaggregated'] as const) {
      const kept = joint.candidates.find(x => x.mode === mode && x.status === 'evaluated' && x.goodputRatePerSecond > 0);
      if (kept) expect(at1[mode]!.score).toBeGreaterThanOrEqual(kept.score * 0.999);
    }
    expect(c.verdict.length).toBeGreaterThan(20);
  });

  test('arms may differ (a published comparison ran its arms on different engines); bad SLOs are refused', async () => {
    const v0 = EngineProfile.VLLM_V0.applyTo(config);
    const c = await pdCrossover({ aggregated: v0, disaggregated: config }, [1]);
    const same = await pdCrossover(config, [1]);
    // the P/D arm is the same search either way; the aggregated arm ran the V0 engine
    expect(c.rows[0].disaggregated).toEqual(same.rows[0].disaggregated);
    expect(c.rows[0].aggregated?.score).not.toBe(same.rows[0].aggregated?.score);
    await expect(pdCrossover(config, [0])).rejects.toThrow(/crossover TTFT SLO 0 is not a positive number of seconds/);
  });
});
