import { plan } from './addon';
import { SimulationConfig } from './engine-config';
import { EngineProgress, PlanCandidate } from './results';

/**
 * Where disaggregation starts to pay: the planner's best aggregated deployment against its best
 * prefill/decode split, searched apart at each TTFT SLO of a grid (the TPOT SLO, the workload and the
 * accelerator budget as given). The question DistServe's evaluation answers with its goodput-vs-SLO
 * figure: a split pays where a tight TTFT leaves an aggregated replica no room to batch prompts beside
 * decodes, and stops paying where a loose one lets it batch both on every accelerator.
 */

/** The TTFT SLOs searched when none are given, seconds: tight (interactive) to loose (batch-like). */
export const CROSSOVER_TTFT_SLOS_SECONDS: readonly number[] = [0.25, 0.5, 1, 2, 4];

/**
 * Within this share of each other, two goodputs per accelerator are a tie: the planner finds goodput
 * on a 5% rate grid, so a smaller difference is the grid's, not the deployments'.
 */
export const CROSSOVER_TIE_SHARE = 0.05;

/** The best deployment of one mode at one TTFT SLO. */
export interface CrossoverBest {
  /** `aggregated 4 x TP1`, `prefill 2 x TP1 + decode 1 x TP2`. */
  readonly layout: string;
  readonly accelerators: number;
  /** Highest rate meeting the SLO, req/s. */
  readonly goodputRatePerSecond: number;
  /** The planner's score: goodput per accelerator-hour, or per dollar when prices were given. */
  readonly score: number;
}

/** One row: a TTFT SLO, each mode's best, and which pays. */
export interface CrossoverRow {
  readonly ttftSeconds: number;
  /** Null when no aggregated deployment meets the SLO at any rate. */
  readonly aggregated: CrossoverBest | null;
  readonly disaggregated: CrossoverBest | null;
  /** P/D's score over aggregated's (null when either has none). */
  readonly ratio: number | null;
  readonly winner: CrossoverWinner;
}

/** Which mode pays at a TTFT SLO. */
export type CrossoverWinner = 'disaggregated' | 'aggregated' | 'tie' | 'neither';

/** The crossover over the grid, and the sentence that says it. */
export interface CrossoverResult {
  /** The TPOT SLO every row shares. */
  readonly tpotSeconds?: number;
  readonly rows: CrossoverRow[];
  /**
   * The TTFT SLO range where P/D pays: 'below' (P/D wins at `ttftSeconds` and tighter, aggregated
   * or a tie above), 'above' (the reverse), 'always', 'never', or 'mixed' (no single crossover).
   */
  readonly shape: 'below' | 'above' | 'always' | 'never' | 'mixed';
  /** The loosest (for 'below') or tightest (for 'above') TTFT SLO at which P/D still wins. */
  readonly ttftSeconds: number | null;
  /** One sentence for a person. */
  readonly verdict: string;
  readonly simulations: number;
}

/** One pool of a planner candidate, as `disagg plan` prints it: `2 x TP4`, `1 x EP16`. */
export function poolLayout(c: PlanCandidate, role: 'both' | 'prefill' | 'decode'): string {
  const p = c.pools.find(x => x.role === role)!;
  // An expert-parallel option spans more accelerators than its tensor-parallel size (its data-parallel ranks).
  return p.acceleratorsPerReplica > p.tensorParallel ? `${p.replicas} x EP${p.acceleratorsPerReplica}` : `${p.replicas} x TP${p.tensorParallel}`;
}

/** A planner candidate's layout, as `disagg plan` prints it: `aggregated 4 x TP1`, `prefill 2 x TP1 + decode 1 x TP2`. */
export function candidateLayout(c: PlanCandidate): string {
  return c.mode === 'aggregated' ? `aggregated ${poolLayout(c, 'both')}` : `prefill ${poolLayout(c, 'prefill')} + decode ${poolLayout(c, 'decode')}`;
}

/** The planner configuration of each mode, where the two arms run different engines or fabrics. */
export interface CrossoverArms {
  readonly aggregated: SimulationConfig;
  readonly disaggregated: SimulationConfig;
}

/**
 * Runs the planner once per mode per TTFT SLO of `ttftSlos` over `config` (a plannerConfig() result,
 * engine profile applied; or one per mode, as a published comparison ran its arms) and says where
 * P/D pays. Each mode is searched on its own, so the planner's pruning (candidates that cannot enter
 * the overall top three) never hides the best of a mode.
 */
export async function pdCrossover(config: SimulationConfig | CrossoverArms, ttftSlos: readonly number[] = CROSSOVER_TTFT_SLOS_SECONDS,
  onProgress?: (p: EngineProgress) => void): Promise<CrossoverResult> {
  const arms: CrossoverArms = 'aggregated' in config ? config : { aggregated: config, disaggregated: config };
  for (const [mode, c] of Object.entries(arms) as Array<[string, SimulationConfig]>) {
    if (!c.planner) throw new Error(`pdCrossover needs a planner configuration (plannerConfig()) for the ${mode} arm`);
    if (c.slo?.tpotSeconds === undefined) throw new Error(`pdCrossover needs the ${mode} arm's SLO (slo.tpotSeconds)`);
  }
  const slos = [...new Set(ttftSlos)].sort((a, b) => a - b);
  const bad = slos.find(t => !(t > 0 && Number.isFinite(t)));
  if (bad !== undefined) throw new Error(`crossover TTFT SLO ${bad} is not a positive number of seconds`);
  const rows: CrossoverRow[] = [];
  let simulations = 0;
  let done = 0;
  const total = slos.length * 2;
  for (const ttftSeconds of slos) {
    const best: Partial<Record<'aggregated' | 'disaggregated', CrossoverBest | null>> = {};
    for (const mode of ['aggregated', 'disaggregated'] as const) {
      const arm = arms[mode];
      // Only the best of the mode needs an exact goodput: rankDepth 1 prunes the rest as soon as they rank lower.
      const result = await plan({ ...arm, slo: { ...arm.slo, ttftSeconds }, planner: { ...arm.planner!, modes: [mode], rankDepth: 1 } });
      simulations += result.simulations;
      const top = result.candidates.find(c => c.status === 'evaluated' && c.goodputRatePerSecond > 0);
      best[mode] = top
        ? { layout: candidateLayout(top), accelerators: top.accelerators, goodputRatePerSecond: top.goodputRatePerSecond, score: top.score }
        : null;
      onProgress?.({ done: ++done, total, simulations, bestScore: 0 });
    }
    const [a, d] = [best.aggregated ?? null, best.disaggregated ?? null];
    const ratio = a && d ? d.score / a.score : null;
    const winner: CrossoverWinner = !a && !d ? 'neither' : !a ? 'disaggregated' : !d ? 'aggregated'
      : Math.abs(ratio! - 1) <= CROSSOVER_TIE_SHARE ? 'tie' : ratio! > 1 ? 'disaggregated' : 'aggregated';
    rows.push({ ttftSeconds, aggregated: a, disaggregated: d, ratio, winner });
  }
  return { tpotSeconds: arms.aggregated.slo!.tpotSeconds, rows, ...crossoverShape(rows), simulations };
}

/** Reads the shape of the crossover off the rows. */
export function crossoverShape(rows: readonly CrossoverRow[]): Pick<CrossoverResult, 'shape' | 'ttftSeconds' | 'verdict'> {
  const fmt = (t: number) => t < 1 ? `${Math.round(t * 1000)} ms` : `${t} s`;
  const range = rows.length > 0 ? `TTFT SLOs ${fmt(rows[0].ttftSeconds)} to ${fmt(rows[rows.length - 1].ttftSeconds)}` : 'no TTFT SLO';
  const wins = rows.map(r => r.winner === 'disaggregated');
  const scored = rows.filter(r => r.winner !== 'neither');
  if (!wins.some(w => w)) {
    const ties = rows.filter(r => r.winner === 'tie').map(r => fmt(r.ttftSeconds));
    return {
      shape: 'never',
      ttftSeconds: null,
      verdict: scored.length === 0 ? `no deployment meets the SLO at any of ${range}`
        : `a prefill/decode split never pays here over ${range}: aggregated serving does as well or better per accelerator` +
          (ties.length > 0 ? ` (within ${CROSSOVER_TIE_SHARE * 100}% at ${ties.join(', ')})` : ''),
    };
  }
  if (scored.every(r => r.winner === 'disaggregated')) {
    return { shape: 'always', ttftSeconds: null, verdict: `a prefill/decode split pays at every one of ${range}` };
  }
  // Among SLOs where some deployment meets the SLO: wins at the tight end only, or the loose end only.
  const w = scored.map(r => r.winner === 'disaggregated');
  const firstLoss = w.indexOf(false);
  if (w[0] && w.slice(firstLoss).every(x => !x)) {
    const t = scored[firstLoss - 1].ttftSeconds;
    return {
      shape: 'below',
      ttftSeconds: t,
      verdict: `a prefill/decode split pays at a TTFT SLO of ${fmt(t)} and tighter; from ${fmt(scored[firstLoss].ttftSeconds)} aggregated serving does as well or better per accelerator`,
    };
  }
  const firstWin = w.indexOf(true);
  if (!w[0] && w.slice(firstWin).every(x => x)) {
    const t = scored[firstWin].ttftSeconds;
    return {
      shape: 'above',
      ttftSeconds: t,
      verdict: `a prefill/decode split pays at a TTFT SLO of ${fmt(t)} and looser; at ${fmt(scored[firstWin - 1].ttftSeconds)} and tighter aggregated serving does as well or better per accelerator`,
    };
  }
  return {
    shape: 'mixed',
    ttftSeconds: null,
    verdict: `no single crossover: a prefill/decode split pays at ${scored.filter(r => r.winner === 'disaggregated').map(r => fmt(r.ttftSeconds)).join(', ')} only`,
  };
}
