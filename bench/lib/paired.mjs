// Statistics for the router benchmarks (bench/router.sh, bench/router-ab.sh): medians and
// bootstrap intervals over interleaved rounds. On a small shared machine one round of a proxy
// benchmark can swing by 30%, so a single median says little about whether two proxies differ;
// pairing each round's router value with the same round's nginx value (measured seconds apart)
// removes most of the machine's drift, and the interval says whether what is left is noise.

/** The median of a non-empty list of numbers. */
export function median(xs) {
  if (xs.length === 0) throw new Error('median of an empty list');
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * A 95% bootstrap interval for the median of `xs`: the 2.5th and 97.5th percentiles of the medians
 * of `resamples` resamples (with replacement). The generator has a fixed seed (xorshift32), so the
 * same data always gives the same interval and a rerun of the summary does not move it.
 */
export function medianInterval(xs, resamples = 2000) {
  if (xs.length === 0) throw new Error('interval of an empty list');
  let seed = 0x2545f491;
  const random = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 4294967296;
  };
  const meds = [];
  for (let k = 0; k < resamples; k++) meds.push(median(xs.map(() => xs[Math.floor(random() * xs.length)])));
  meds.sort((a, b) => a - b);
  return [meds[Math.floor(resamples * 0.025)], meds[Math.ceil(resamples * 0.975) - 1]];
}

/**
 * Fewer rounds than this give no verdict: a bootstrap interval over a handful of values is about as
 * wide as the values themselves and says little (2 rounds give the span of the two).
 */
export const MIN_ROUNDS = 8;

/**
 * What a paired interval [lo, hi] says about the first of the two things compared: 'better' or
 * 'worse' beyond this run's noise, or 'even' when the interval holds `parity` (1 for ratios, 0 for
 * differences). `lowerIsBetter`: true for latency and CPU, false for requests/s.
 */
export function verdict([lo, hi], parity, lowerIsBetter) {
  if (lo <= parity && parity <= hi) return 'even';
  return (hi < parity) === lowerIsBetter ? 'better' : 'worse';
}
