import type { LengthDistributionConfig, SimulationPolicyConfig, SloConfig, WorkloadConfig } from '../engine';
import { UsageError } from './command';

/** parseArgs option specs of the workload, SLO and policy flags shared by `simulate` and `plan --simulate`. */
export const ENGINE_FLAG_OPTIONS = {
  'rate': { type: 'string' },
  'requests': { type: 'string' },
  'input-tokens': { type: 'string' },
  'output-tokens': { type: 'string' },
  'arrival': { type: 'string' },
  'turns': { type: 'string' },
  'think-time': { type: 'string' },
  'tenants': { type: 'string' },
  'system-prompt-tokens': { type: 'string' },
  'trace': { type: 'string' },
  'ttft': { type: 'string' },
  'tpot': { type: 'string' },
  'target-share': { type: 'string' },
  'policy': { type: 'string' },
  'threshold': { type: 'string' },
  'step-overhead': { type: 'string' },
  'seed': { type: 'string' },
  'out': { type: 'string' },
} as const;

/** Help lines of the shared flags. */
export const ENGINE_FLAG_HELP = `Workload:
  --rate R                     arrival rate: requests/s (chat: sessions/s) (default 4)
  --requests N                 requests to simulate (default 1000)
  --input-tokens DIST          prompt tokens: N, uniform:MIN:MAX or lognormal:MEAN:STDDEV (default 1024)
  --output-tokens DIST         output tokens, same forms (default 256)
  --arrival PROCESS            poisson, gamma:CV (bursty when CV > 1) or mmpp:BURST_FACTOR (default poisson)
  --turns DIST                 multi-turn chat sessions of DIST turns (default: single requests)
  --think-time S               mean seconds between turns of a session (default 5)
  --tenants N                  tenants with their own system prompt, Zipf popularity (default 0)
  --system-prompt-tokens N     tokens of each tenant's system prompt (default 1024 with --tenants)
  --trace FILE                 replay a JSONL trace ({timestamp_ms, input_length, output_length, hash_ids?})
SLO and router:
  --ttft S                     time-to-first-token target in seconds (default 2)
  --tpot S                     time-per-output-token target in seconds (default 0.1)
  --target-share F             share of requests that must meet both for goodput (default 0.9)
  --policy NAME                kv-aware, least-loaded, round-robin, sglang, dynamo or disagg (default kv-aware)
  --threshold N                uncached prompt tokens from which requests go through prefill (default 512)
  --step-overhead S            fixed seconds per engine step (scheduling, launches) (default 0.003)
  --seed N                     workload seed; the same seed gives the same numbers (default 1)
  --out DIR                    folder for the SVG chart and JSON results (default disagg.out)`;

/** Raw values of the shared flags. */
export type EngineFlagValues = { [K in keyof typeof ENGINE_FLAG_OPTIONS]?: string };

/** The flags resolved. */
export interface EngineFlags {
  readonly rate: number;
  readonly workload: WorkloadConfig;
  readonly slo: Required<Omit<SloConfig, '$comment'>>;
  readonly targetShare: number;
  readonly policy: SimulationPolicyConfig;
  readonly stepOverheadSeconds: number;
  readonly seed: number;
  readonly outDir: string;
}

/** Default fixed step overhead: a few ms per step of scheduling and kernel launches (an assumption, as in engine/examples). */
export const DEFAULT_STEP_OVERHEAD_SECONDS = 0.003;

/** Resolves the shared flags; throws UsageError naming the flag, the value and the fix. */
export function engineFlags(v: EngineFlagValues): EngineFlags {
  const rate = positive('--rate', v.rate) ?? 4;
  const requests = wholeNumber('--requests', v.requests, 1) ?? 1000;
  const turns = v.turns !== undefined ? lengthDist('--turns', v.turns) : undefined;
  const tenants = wholeNumber('--tenants', v.tenants, 0) ?? 0;
  const systemPrompt = wholeNumber('--system-prompt-tokens', v['system-prompt-tokens'], 0);
  if (systemPrompt !== undefined && tenants === 0) {
    throw new UsageError('--system-prompt-tokens needs --tenants N (N >= 1): each tenant has its own system prompt');
  }
  const workload: WorkloadConfig = {
    kind: v.trace !== undefined ? 'trace' : turns ? 'chat' : 'single',
    requests,
    arrival: { ...arrival(v.arrival), ratePerSecond: rate },
    inputTokens: lengthDist('--input-tokens', v['input-tokens'] ?? '1024'),
    outputTokens: lengthDist('--output-tokens', v['output-tokens'] ?? '256'),
    ...(tenants > 0 ? { tenants: { count: tenants, systemPromptTokens: systemPrompt ?? 1024 } } : {}),
    ...(turns ? { chat: { turns, thinkTimeSeconds: positive('--think-time', v['think-time']) ?? 5 } } : {}),
    ...(v.trace !== undefined ? { trace: { path: v.trace } } : {}),
  };
  if (v['think-time'] !== undefined && !turns) {
    throw new UsageError('--think-time needs --turns DIST (multi-turn chat sessions)');
  }
  const targetShare = positive('--target-share', v['target-share']) ?? 0.9;
  if (targetShare > 1) {
    throw new UsageError(`--target-share (${v['target-share']}) must be in (0, 1]; e.g. 0.9`);
  }
  const policyName = v.policy ?? 'kv-aware';
  const known: ReadonlyArray<SimulationPolicyConfig['name']> = ['kv-aware', 'least-loaded', 'round-robin', 'sglang', 'dynamo', 'disagg', 'llm-d', 'least-load'];
  if (!isPolicyName(policyName, known)) {
    throw new UsageError(`--policy '${policyName}' is not a routing policy; use ${known.slice(0, 6).join(', ')}`);
  }
  const threshold = wholeNumber('--threshold', v.threshold, 0);
  return {
    rate,
    workload,
    slo: { ttftSeconds: positive('--ttft', v.ttft) ?? 2, tpotSeconds: positive('--tpot', v.tpot) ?? 0.1 },
    targetShare,
    policy: { name: policyName, ...(threshold !== undefined ? { disaggregation: { minUncachedPromptTokens: threshold } } : {}) },
    stepOverheadSeconds: nonNegative('--step-overhead', v['step-overhead']) ?? DEFAULT_STEP_OVERHEAD_SECONDS,
    seed: wholeNumber('--seed', v.seed, 0) ?? 1,
    outDir: v.out ?? 'disagg.out',
  };
}

function isPolicyName(name: string, known: ReadonlyArray<SimulationPolicyConfig['name']>): name is SimulationPolicyConfig['name'] {
  return (known as readonly string[]).includes(name);
}

/** "1024", "uniform:128:4096" or "lognormal:2000:1000". */
export function lengthDist(flag: string, text: string): LengthDistributionConfig {
  const parts = text.trim().split(':');
  const num = (s: string | undefined, what: string) => {
    const n = Number(s);
    if (s === undefined || s.trim() === '' || !Number.isFinite(n) || n < (what === 'stddev' ? 0 : 1)) {
      throw new UsageError(`${flag} '${text}': ${what} must be a number >= ${what === 'stddev' ? 0 : 1}; use N, uniform:MIN:MAX or lognormal:MEAN:STDDEV`);
    }
    return n;
  };
  if (parts.length === 1) {
    return { distribution: 'fixed', mean: Math.round(num(parts[0], 'the token count')) };
  }
  if (parts[0] === 'uniform' && parts.length === 3) {
    const min = Math.round(num(parts[1], 'min'));
    const max = Math.round(num(parts[2], 'max'));
    if (max < min) throw new UsageError(`${flag} '${text}': max (${max}) is below min (${min})`);
    return { distribution: 'uniform', min, max, mean: (min + max) / 2 };
  }
  if (parts[0] === 'lognormal' && parts.length === 3) {
    return { distribution: 'lognormal', mean: num(parts[1], 'mean'), stddev: num(parts[2], 'stddev') };
  }
  throw new UsageError(`${flag} '${text}' is not a distribution; use N, uniform:MIN:MAX or lognormal:MEAN:STDDEV`);
}

function arrival(text: string | undefined): NonNullable<WorkloadConfig['arrival']> {
  if (text === undefined || text === 'poisson') return { process: 'poisson' };
  const [kind, value] = text.split(':');
  const n = Number(value);
  if (kind === 'gamma' && value !== undefined && Number.isFinite(n) && n > 0) return { process: 'gamma', cv: n };
  if (kind === 'mmpp' && (value === undefined || (Number.isFinite(n) && n > 1))) {
    return { process: 'mmpp', ...(value !== undefined ? { burstFactor: n } : {}) };
  }
  throw new UsageError(`--arrival '${text}' is not an arrival process; use poisson, gamma:CV (CV > 0, e.g. gamma:2) or mmpp:BURST_FACTOR (> 1, e.g. mmpp:4)`);
}

export function positive(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n <= 0) {
    throw new UsageError(`${flag} expects a positive number, got '${text}'`);
  }
  return n;
}

function nonNegative(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < 0) {
    throw new UsageError(`${flag} expects a number >= 0, got '${text}'`);
  }
  return n;
}

export function wholeNumber(flag: string, text: string | undefined, min: number): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text.trim()) || Number(text) < min) {
    throw new UsageError(`${flag} expects a whole number >= ${min}, got '${text}'`);
  }
  return Number(text);
}

/** Rates around `rate` for the chart: 0.25x to 2x, 8 points. */
export function sweepRates(rate: number): number[] {
  return [0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2].map(f => Number((rate * f).toPrecision(6)));
}

/** A readable duration: "850 ms", "1.24 s". */
export function formatLatency(seconds: number): string {
  if (!Number.isFinite(seconds)) return '-';
  if (seconds < 1) return `${(seconds * 1000).toPrecision(3)} ms`;
  return `${seconds.toPrecision(3)} s`;
}
