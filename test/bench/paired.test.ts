import { execFileSync } from 'child_process';
import * as path from 'path';
import { pathToFileURL } from 'url';

// bench/lib/paired.mjs decides what bench/router.sh and bench/router-ab.sh print as "router better",
// "nginx better" or "no difference beyond noise", and RESULTS.md quotes those verdicts. The module is
// ESM (the bench scripts import it), so it runs in a node child here.
const MODULE = pathToFileURL(path.resolve(__dirname, '..', '..', 'bench', 'lib', 'paired.mjs')).href;

function run(expression: string): unknown {
  const script = `import * as p from ${JSON.stringify(MODULE)};\nconsole.log(JSON.stringify(await (async () => ${expression})()));`;
  return JSON.parse(execFileSync('node', ['--input-type=module', '-e', script], { encoding: 'utf8' }));
}

describe('bench/lib/paired.mjs', () => {
  test('median of odd and even lists, unsorted input left alone', () => {
    expect(run('[p.median([3, 1, 2]), p.median([4, 1, 3, 2]), (() => { const xs = [3, 1, 2]; p.median(xs); return xs; })()]')).toEqual([
      2, 2.5, [3, 1, 2],
    ]);
  });

  test('an empty list is an error, not NaN in a results table', () => {
    expect(run("(() => { try { p.median([]); return 'no error'; } catch (e) { return e.message; } })()")).toBe('median of an empty list');
    expect(run("(() => { try { p.medianInterval([]); return 'no error'; } catch (e) { return e.message; } })()")).toBe('interval of an empty list');
  });

  test('the interval of a constant list is that constant; the same data gives the same interval', () => {
    expect(run('p.medianInterval([1.2, 1.2, 1.2, 1.2])')).toEqual([1.2, 1.2]);
    const xs = '[0.82, 1.08, 1.21, 1.02, 1.06, 0.83, 0.77, 0.98, 1.04, 0.72]';
    const [a, b] = run(`[p.medianInterval(${xs}), p.medianInterval(${xs})]`) as number[][];
    expect(a).toEqual(b);
  });

  test('the interval holds the median and lies within the data', () => {
    const [lo, hi, med] = run('[...p.medianInterval([0.82, 1.08, 1.21, 1.02, 1.06, 0.83, 0.77, 0.98, 1.04, 0.72]), p.median([0.82, 1.08, 1.21, 1.02, 1.06, 0.83, 0.77, 0.98, 1.04, 0.72])]') as number[];
    expect(lo).toBeLessThanOrEqual(med);
    expect(med).toBeLessThanOrEqual(hi);
    expect(lo).toBeGreaterThanOrEqual(0.72);
    expect(hi).toBeLessThanOrEqual(1.21);
    expect(hi - lo).toBeGreaterThan(0.05); // noisy rounds give a wide interval, not a point
  });

  test('two rounds give the span of the two values, so the scripts give no verdict below MIN_ROUNDS', () => {
    expect(run('[p.medianInterval([0.9, 1.1]), p.MIN_ROUNDS]')).toEqual([[0.9, 1.1], 8]);
  });

  test('verdicts: a clear shift is a difference, a spread around parity is not', () => {
    // Twelve rounds of ratios all 1.1-1.3: the first costs more (CPU) or serves more (requests/s).
    const shifted = '[1.1, 1.2, 1.3, 1.15, 1.25, 1.12, 1.18, 1.22, 1.28, 1.14, 1.2, 1.16]';
    const around = '[0.82, 1.08, 1.21, 1.02, 1.06, 0.83, 0.77, 0.98, 1.04, 0.72]';
    expect(
      run(`[
        p.verdict(p.medianInterval(${shifted}), 1, true),
        p.verdict(p.medianInterval(${shifted}), 1, false),
        p.verdict(p.medianInterval(${around}), 1, false),
        p.verdict(p.medianInterval([-269, -198, -357, -621, -320, -548, -49, -837, -217, -120]), 0, true),
        p.verdict([-5, 3], 0, true),
      ]`),
    ).toEqual(['worse', 'better', 'even', 'better', 'even']);
  });
});
