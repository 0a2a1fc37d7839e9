import { LengthDistributionConfig, loadEngine, SimulationPolicyConfig, SloConfig, WorkloadConfig } from '../engine';
import { CliIo, UsageError } from './command';
import { EngineProfile } from '../engine/engine-profile';
import { VLLM_STEP_MODEL } from '../engine/vllm-step-model';

/** parseArgs option specs of the workload, SLO and policy flags shared by `simulate` and `plan --simulate`. */
export const ENGINE_FLAG_OPTIONS = {
  'rate': { type: 'string' },
  'stages': { type: 'string' },
  'requests': { type: 'string' },
  'input-tokens': { type: 'string' },
  'output-tokens': { type: 'string' },
  'arrival': { type: 'string' },
  'turns': { type: 'string' },
  'think-time': { type: 'string' },
  'shared-prompts': { type: 'string' },
  'tenants': { type: 'string' },
  'system-prompt-tokens': { type: 'string' },
  'popularity': { type: 'string' },
  'users-per-prompt': { type: 'string' },
  'api': { type: 'string' },
  'trace': { type: 'string' },
  'concurrency': { type: 'string' },
  'engine': { type: 'string' },
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
  --stages RxS,RxS...          load in stages run back to back instead of --rate: R req/s for S seconds
                               each, e.g. 8x600,20x600; no sweep, one run whose summary covers every
                               stage; all their requests unless --requests caps them (at most 1024 stages)
  --requests N                 requests to simulate (default 1000, and in a sweep at least four request
                               lifetimes at the SLO's edge of arrivals per rate; with --stages: every stage's)
  --input-tokens DIST          prompt tokens (with --shared-prompts: each question's, after the shared
                               system prompt): N, uniform:MIN:MAX or lognormal:MEAN:STDDEV (default 1024)
  --output-tokens DIST         output tokens, same forms (default 256)
  --arrival PROCESS            poisson, constant (evenly spaced: arrival i at i / rate), gamma:CV (bursty
                               when CV > 1) or mmpp:BURST_FACTOR (default poisson)
  --turns DIST                 multi-turn chat sessions of DIST turns (default: single requests)
  --think-time S               mean seconds between turns of a session (default 5)
  --shared-prompts N           N system prompts (prompt groups, tenants), each prefixing the prompts of its
                               requests (default 0; --tenants N is the same flag)
  --system-prompt-tokens N     tokens of each shared system prompt (default 1024 with --shared-prompts)
  --popularity P               how requests pick their shared prompt: equal (in turn, shuffled once: what
                               inference-perf's shared_prefix does) or zipf[:S] (weight 1/k^S; default zipf:1)
  --users-per-prompt U         U users per shared prompt, each with one fixed question of --input-tokens
                               that every request of that user repeats (inference-perf's
                               num_prompts_per_group); without it every question is fresh text
  --api API                    completions: prompts are exactly the tokens above (/v1/completions, the
                               default); chat: plus the chat template's role headers (/v1/chat/completions)
  --trace FILE                 replay a JSONL trace ({timestamp_ms, input_length, output_length, hash_ids?})
  --concurrency N              closed loop instead of arrivals: N clients, each sending its next request
                               when its last one ends (how genai-perf and \`vllm bench serve
                               --max-concurrency\` drive a server); --requests in all (no rate sweep)
  --engine NAME                the engine generation every replica behaves as: vllm-v1 (default: chunked
                               prefill, async scheduling), vllm-v1-sync (before 0.14), vllm-v0 (whole
                               prompts in steps of their own, early-2024 vLLM), distserve, sglang, trtllm
SLO and router:
  --ttft S                     time-to-first-token target in seconds (default 2)
  --tpot S                     time-per-output-token target in seconds (default 0.1)
  --target-share F             share of requests that must meet both for goodput (default 0.9)
  --policy NAME                kv-aware, least-loaded, round-robin, sglang, dynamo or disagg (default kv-aware)
  --threshold N                uncached prompt tokens from which requests go through prefill (default 512)
  --step-overhead S            fixed seconds per engine step, besides 40 us per layer (default 0.0005)
  --seed N                     workload seed; the same seed gives the same numbers (default 1)
  --out DIR                    folder for the SVG chart and JSON results (default disagg.out)`;

/** Raw values of the shared flags. */
export type EngineFlagValues = { [K in keyof typeof ENGINE_FLAG_OPTIONS]?: string };

/** The flags resolved. */
export interface EngineFlags {
  /** --rate, or with --stages their mean rate (requests over the stages' duration). */
  readonly rate: number;
  /** --stages: the load runs in these stages (no sweep). */
  readonly stages?: ReadonlyArray<{ readonly ratePerSecond: number; readonly durationSeconds: number }>;
  readonly workload: WorkloadConfig;
  readonly slo: Required<Omit<SloConfig, '$comment'>>;
  readonly targetShare: number;
  readonly policy: SimulationPolicyConfig;
  readonly stepOverheadSeconds: number;
  readonly seed: number;
  readonly outDir: string;
  /** --concurrency: a closed loop of this many clients (one run, no sweep). */
  readonly concurrency?: number;
  /** --engine: the engine generation the pools behave as. */
  readonly engine?: EngineProfile;
}

/** Default fixed step overhead: what vLLM's async scheduling leaves of its scheduler's time per step (src/engine/vllm-step-model.ts). */
export const DEFAULT_STEP_OVERHEAD_SECONDS = VLLM_STEP_MODEL.stepOverheadSeconds;

/** Resolves the shared flags; throws UsageError naming the flag, the value and the fix. */
export function engineFlags(v: EngineFlagValues): EngineFlags {
  const stages = v.stages !== undefined ? stageList(v.stages) : undefined;
  if (stages && v.rate !== undefined) {
    throw new UsageError(`--rate (${v.rate}) and --stages (${v.stages}) both set the load; drop --rate (each stage has its own rate)`);
  }
  if (stages && v.trace !== undefined) {
    throw new UsageError('--stages does not apply with --trace: a trace replays its own arrival times; drop --stages');
  }
  const concurrency = wholeNumber('--concurrency', v.concurrency, 1);
  if (concurrency !== undefined) {
    const clash = [stages ? '--stages' : '', v.rate !== undefined ? '--rate' : '', v.trace !== undefined ? '--trace' : '', v.turns !== undefined ? '--turns' : '']
      .filter(f => f);
    if (clash.length > 0) {
      throw new UsageError(`--concurrency (${v.concurrency}) is a closed loop: clients send when their last request ends, so ${clash.join(' and ')} ` +
        `cannot also set the arrivals; drop ${clash.join(' and ')} (or --concurrency)`);
    }
  }
  let engine: EngineProfile | undefined;
  if (v.engine !== undefined) {
    try {
      engine = EngineProfile.fromName(v.engine);
    } catch (e) {
      throw new UsageError(`--engine: ${(e as Error).message}`);
    }
  }
  const rate = stages ? meanRate(stages) : positive('--rate', v.rate) ?? 4;
  const requests = wholeNumber('--requests', v.requests, 1) ?? (stages ? undefined : 1000);
  const turns = v.turns !== undefined ? lengthDist('--turns', v.turns) : undefined;
  if (v['shared-prompts'] !== undefined && v.tenants !== undefined) {
    throw new UsageError(`--shared-prompts (${v['shared-prompts']}) and --tenants (${v.tenants}) are the same flag; give one`);
  }
  const tenantFlag = v.tenants !== undefined ? '--tenants' : '--shared-prompts';
  const tenants = wholeNumber(tenantFlag, v.tenants ?? v['shared-prompts'], 0) ?? 0;
  const needsTenants = (flag: string, why: string) => {
    if (tenants === 0) throw new UsageError(`${flag} needs --shared-prompts N (N >= 1): ${why}`);
  };
  const systemPrompt = wholeNumber('--system-prompt-tokens', v['system-prompt-tokens'], 0);
  if (systemPrompt !== undefined) needsTenants('--system-prompt-tokens', 'each shared prompt is one system prompt');
  const pop = v.popularity !== undefined ? popularity(v.popularity) : undefined;
  if (pop) needsTenants('--popularity', 'it says how requests pick one of the shared prompts');
  const users = wholeNumber('--users-per-prompt', v['users-per-prompt'], 1);
  if (users !== undefined) {
    needsTenants('--users-per-prompt', 'the users of each shared prompt repeat their own question after it');
    if (turns || v.trace !== undefined) {
      throw new UsageError(`--users-per-prompt (${users}) applies to single requests; drop ${turns ? '--turns' : '--trace'} or --users-per-prompt`);
    }
  }
  if (users !== undefined && tenants * users > 1048576) {
    throw new UsageError(`--shared-prompts ${tenants} x --users-per-prompt ${users} is over 1048576 prompts; use fewer`);
  }
  const api = v.api !== undefined ? apiOf(v.api) : undefined;
  if (api === 'chat' && v.trace !== undefined) {
    throw new UsageError('--api chat does not apply with --trace: a trace\'s input_length already counts every prompt token; drop --api');
  }
  const workload: WorkloadConfig = {
    kind: v.trace !== undefined ? 'trace' : turns ? 'chat' : 'single',
    ...(requests !== undefined ? { requests } : {}),
    ...(concurrency !== undefined ? { concurrency } : {}),
    arrival: stages
      ? { ...arrival(v.arrival), stages: stages.map(s => ({ ...s })) }
      : { ...arrival(v.arrival), ratePerSecond: rate },
    inputTokens: lengthDist('--input-tokens', v['input-tokens'] ?? '1024'),
    outputTokens: lengthDist('--output-tokens', v['output-tokens'] ?? '256'),
    ...(tenants > 0 ? {
      tenants: {
        count: tenants,
        systemPromptTokens: systemPrompt ?? 1024,
        ...(pop ?? {}),
        ...(users !== undefined ? { usersPerTenant: users } : {}),
      },
    } : {}),
    ...(api !== undefined ? { api } : {}),
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
    ...(stages ? { stages } : {}),
    workload,
    slo: { ttftSeconds: positive('--ttft', v.ttft) ?? 2, tpotSeconds: positive('--tpot', v.tpot) ?? 0.1 },
    targetShare,
    policy: { name: policyName, ...(threshold !== undefined ? { disaggregation: { minUncachedPromptTokens: threshold } } : {}) },
    stepOverheadSeconds: nonNegative('--step-overhead', v['step-overhead']) ?? DEFAULT_STEP_OVERHEAD_SECONDS,
    seed: wholeNumber('--seed', v.seed, 0) ?? 1,
    outDir: v.out ?? 'disagg.out',
    ...(concurrency !== undefined ? { concurrency } : {}),
    ...(engine ? { engine } : {}),
  };
}

/**
 * parseArgs option specs of vLLM's engine arguments that `simulate` and `plan` share (with `plan`
 * they size the plan too; --cpu-offload-gib needs a simulation).
 */
export const SCHEDULER_FLAG_OPTIONS = {
  'max-num-seqs': { type: 'string' },
  'max-num-batched-tokens': { type: 'string' },
  'block-size': { type: 'string' },
  'gpu-memory-utilization': { type: 'string' },
  'cpu-offload-gib': { type: 'string' },
  'async-scheduling': { type: 'string' },
} as const;

/** Help lines of the scheduler flags. */
export const SCHEDULER_FLAG_HELP = `vLLM engine arguments of every replica (defaults: what the simulator and sizing assumed so far):
  --max-num-seqs N             sequences one step may hold (vLLM --max-num-seqs; default 256; the
                               sizing's activation estimate takes vLLM's device default until given)
  --max-num-batched-tokens N   token budget of one step, the chunked-prefill chunk (vLLM
                               --max-num-batched-tokens; default 8192, also in the sizing on large GPUs)
  --block-size N               tokens per KV block, the prefix cache's granularity (vLLM --block-size;
                               default 16)
  --gpu-memory-utilization F   fraction of accelerator memory vLLM may use; the KV capacity is what is left
                               of it after weights and reserves (vLLM --gpu-memory-utilization; default 0.9)
  --cpu-offload-gib N          vLLM's OffloadingConnector with an N GiB CPU pool per replica
                               (cpu_bytes_to_use = N x 2^30, all TP ranks together): the simulator's host
                               KV tier of N GiB on the assumed host link (50 GB/s per accelerator, PCIe
                               Gen5; simulate's --host-kv N@GB/s sets another), on the replicas that prefill
  --async-scheduling on|off    vLLM plans step k+1 while step k runs (vLLM --async-scheduling, on by
                               default since 0.14): a request arriving during a step joins the one after
                               the next; off for older vLLM or --no-async-scheduling (default on)`;

/** Raw values of the scheduler flags. */
export type SchedulerFlagValues = { [K in keyof typeof SCHEDULER_FLAG_OPTIONS]?: string };

/** The scheduler flags resolved; each undefined when not given (the defaults then apply unchanged). */
export interface SchedulerFlags {
  readonly maxNumSeqs?: number;
  readonly maxNumBatchedTokens?: number;
  readonly kvBlockSize?: number;
  readonly gpuMemoryUtilization?: number;
  readonly cpuOffloadGib?: number;
  readonly asyncScheduling?: boolean;
}

/** Resolves the scheduler flags; throws UsageError naming the flag, the value and the fix. */
export function schedulerFlags(v: SchedulerFlagValues): SchedulerFlags {
  const bounded = (flag: string, text: string | undefined, max: number, hint: string) => {
    const n = wholeNumber(flag, text, 1);
    if (n !== undefined && n > max) throw new UsageError(`${flag} (${text}) must be at most ${max}; ${hint}`);
    return n;
  };
  const utilizationText = v['gpu-memory-utilization'];
  const utilization = utilizationText === undefined ? undefined : Number(utilizationText);
  if (utilization !== undefined && !(utilizationText!.trim() !== '' && Number.isFinite(utilization) && utilization > 0 && utilization <= 1)) {
    throw new UsageError(`--gpu-memory-utilization '${utilizationText}' must be a fraction in (0, 1], e.g. 0.9 (vLLM's default) or 0.95`);
  }
  const offloadText = v['cpu-offload-gib'];
  const offload = offloadText === undefined ? undefined : Number(offloadText);
  if (offload !== undefined && !(offloadText!.trim() !== '' && Number.isFinite(offload) && offload > 0)) {
    throw new UsageError(`--cpu-offload-gib '${offloadText}' must be a positive number of GiB, e.g. 8 for cpu_bytes_to_use=8589934592`);
  }
  const asyncText = v['async-scheduling'];
  if (asyncText !== undefined && asyncText !== 'on' && asyncText !== 'off') {
    throw new UsageError(`--async-scheduling '${asyncText}' must be on or off (off: vLLM --no-async-scheduling, or vLLM before 0.14)`);
  }
  const result: SchedulerFlags = {
    maxNumSeqs: bounded('--max-num-seqs', v['max-num-seqs'], 1048576, "vLLM's default is 256 (1024 on large GPUs)"),
    maxNumBatchedTokens: bounded('--max-num-batched-tokens', v['max-num-batched-tokens'], 16777216, "vLLM's default is 8192"),
    kvBlockSize: bounded('--block-size', v['block-size'], 1024, "vLLM's block sizes are 8, 16 (default), 32, 64 and 128"),
    gpuMemoryUtilization: utilization,
    cpuOffloadGib: offload,
    asyncScheduling: asyncText === undefined ? undefined : asyncText === 'on',
  };
  return Object.fromEntries(Object.entries(result).filter(([, x]) => x !== undefined)) as SchedulerFlags;
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

/** `--stages 8x600,20x600`: RATExSECONDS, comma-separated, 1 to 1024 stages. */
export function stageList(text: string): Array<{ ratePerSecond: number; durationSeconds: number }> {
  const items = text.split(',').map(s => s.trim());
  if (items.length === 0 || items.length > 1024 || items.some(s => s === '')) {
    throw new UsageError(`--stages '${text}' must be 1 to 1024 comma-separated RATExSECONDS stages, e.g. --stages 8x600,20x600`);
  }
  return items.map(item => {
    const m = /^([0-9.eE+-]+)x([0-9.eE+-]+)$/.exec(item);
    const r = m ? Number(m[1]) : NaN;
    const d = m ? Number(m[2]) : NaN;
    if (!(Number.isFinite(r) && r > 0 && Number.isFinite(d) && d > 0)) {
      throw new UsageError(`--stages '${text}': stage '${item}' must be RATExSECONDS with positive numbers, e.g. 8x600 (8 req/s for 600 s)`);
    }
    return { ratePerSecond: r, durationSeconds: d };
  });
}

/** Requests over time of the stages. */
function meanRate(stages: ReadonlyArray<{ ratePerSecond: number; durationSeconds: number }>): number {
  const seconds = stages.reduce((t, s) => t + s.durationSeconds, 0);
  const requests = stages.reduce((n, s) => n + s.ratePerSecond * s.durationSeconds, 0);
  return Number((requests / seconds).toPrecision(6));
}

/** `--popularity equal`, `zipf` or `zipf:S`. */
function popularity(text: string): { popularity: 'equal' | 'zipf'; zipfExponent?: number } {
  if (text === 'equal') return { popularity: 'equal' };
  if (text === 'zipf') return { popularity: 'zipf' };
  const m = /^zipf:(.+)$/.exec(text);
  const s = m ? Number(m[1]) : NaN;
  if (m && m[1].trim() !== '' && Number.isFinite(s) && s >= 0) return { popularity: 'zipf', zipfExponent: s };
  throw new UsageError(`--popularity '${text}' is not a popularity; use equal, zipf or zipf:S with S >= 0 (e.g. zipf:1.2)`);
}

function apiOf(text: string): 'completions' | 'chat' {
  if (text === 'completions' || text === 'chat') return text;
  throw new UsageError(`--api '${text}' is not an API; use completions (prompts as given) or chat (with the chat template's tokens)`);
}

function arrival(text: string | undefined): NonNullable<WorkloadConfig['arrival']> {
  if (text === undefined || text === 'poisson') return { process: 'poisson' };
  if (text === 'constant') return { process: 'constant' };
  const [kind, value] = text.split(':');
  const n = Number(value);
  if (kind === 'gamma' && value !== undefined && Number.isFinite(n) && n > 0) return { process: 'gamma', cv: n };
  if (kind === 'mmpp' && (value === undefined || (Number.isFinite(n) && n > 1))) {
    return { process: 'mmpp', ...(value !== undefined ? { burstFactor: n } : {}) };
  }
  throw new UsageError(`--arrival '${text}' is not an arrival process; use poisson, constant, gamma:CV (CV > 0, e.g. gamma:2) or mmpp:BURST_FACTOR (> 1, e.g. mmpp:4)`);
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

/**
 * Loads the engine addon before a command that needs it. When it cannot (not built, or built for
 * another Node.js), prints `<command>: <why and how to fix it>` to `io.err` and returns false: the
 * caller then exits with ExitCode.INTERNAL.
 */
export function engineLoaded(io: CliIo, command: string): boolean {
  try {
    loadEngine();
    return true;
  } catch (e) {
    io.err(`${command}: ${(e as Error).message}`);
    return false;
  }
}
