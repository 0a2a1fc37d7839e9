import * as fs from 'fs';
import * as path from 'path';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../catalog';
import { probeWindowSeconds, simulate, SimulationConfig, SimulationResult } from '../engine';
import { CliIo, ExitCode, UsageError } from './command';
import { engineLoaded, formatLatency, positive, wholeNumber } from './engine-flags';
import { ProgressReporter } from './progress';
import { renderTimelineChart } from './svg-chart';
import { renderTable } from './table';
import { DEFAULT_TARGET_PRESSURE } from '../k8s/private/autoscaling';

/**
 * `disagg simulate --autoscale`: the issue 24 scaling rule on the engine's virtual clock
 * (engine/README.md, "Autoscaling"), the same deployment once autoscaled and once static, under a
 * load that changes.
 */

/** Load shapes of `--load-shape`. */
export const LOAD_SHAPES = ['diurnal', 'bursty', 'long-prompt-surge', 'constant'] as const;
export type LoadShape = (typeof LOAD_SHAPES)[number];

/** Default run length per shape: a day, or three hours for the surge. */
const DEFAULT_DURATION: Record<LoadShape, number> = { 'diurnal': 86_400, 'bursty': 86_400, 'long-prompt-surge': 10_800, 'constant': 3_600 };

/** The flags `--autoscale` adds to `disagg simulate`. */
export const AUTOSCALE_FLAG_OPTIONS = {
  'autoscale': { type: 'boolean' },
  'load-shape': { type: 'string' },
  'duration': { type: 'string' },
  'min-replicas': { type: 'string' },
  'max-replicas': { type: 'string' },
  'scale-down-window': { type: 'string' },
  'scale-to-zero': { type: 'boolean' },
} as const;

export const AUTOSCALE_FLAG_HELP = `Autoscaling (--autoscale: the deployment autoscaled against static ones, GPU-hours and goodput):
  --autoscale                  scale each pool on its own SLO pressure (the cluster's KEDA/HPA rule);
                               the pools' replica flags are your static deployment and the autoscaled
                               one's replicas at time 0. Both are compared with the smallest static
                               deployment that meets the SLO at the peak (searched at --rate held for
                               10 minutes or four request lifetimes), as a capacity planner sizes one.
                               Without --rate the peak is 3/4 of what your static deployment serves
                               within the SLO (searched the same way), so the pools have to grow
  --load-shape SHAPE           diurnal (one day's cycle over --duration: trough at 1/6 of it of 0.2x
                               --rate, peak at 2/3 of it of --rate, in 144 steps), bursty (0.3x --rate
                               with a 10-minute burst at --rate at the start of every hour, in real
                               minutes whatever --duration is), long-prompt-surge (--rate throughout;
                               prompts 4x longer in the middle third, replayed from a written trace)
                               or constant (default diurnal; --trace replays a trace instead)
  --duration SECONDS           length of the load (default: a day; 3 hours for long-prompt-surge)
  --min-replicas N             fewest replicas per pool (default 1)
  --max-replicas N             most replicas per pool (default 8)
  --scale-down-window SECONDS  scale-down stabilization (default 300, HPA's)
  --scale-to-zero              let a pool go to zero after 600 s without requests`;

export interface AutoscaleFlags {
  readonly shape: LoadShape;
  readonly durationSeconds: number;
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly scaleDownWindowSeconds: number;
  readonly scaleToZero: boolean;
}

/** Reads the --autoscale flags (UsageError naming the flag on bad values). */
export function autoscaleFlags(v: Record<string, unknown>): AutoscaleFlags {
  const shape = (v['load-shape'] as string | undefined) ?? 'diurnal';
  if (!(LOAD_SHAPES as readonly string[]).includes(shape)) {
    throw new UsageError(`--load-shape '${shape}' is not known; use one of ${LOAD_SHAPES.join(', ')}`);
  }
  const s = shape as LoadShape;
  const minReplicas = wholeNumber('--min-replicas', v['min-replicas'] as string | undefined, 0) ?? (v['scale-to-zero'] ? 0 : 1);
  const maxReplicas = wholeNumber('--max-replicas', v['max-replicas'] as string | undefined, 1) ?? 8;
  if (maxReplicas < Math.max(minReplicas, 1)) {
    throw new UsageError(`--max-replicas (${maxReplicas}) must be >= --min-replicas (${minReplicas}) and >= 1`);
  }
  if (maxReplicas > 16) {
    throw new UsageError(`--max-replicas (${maxReplicas}) must be <= 16: the simulated router tracks 64 endpoints and each pool keeps 2 x max (replicas draining beside new ones)`);
  }
  const down = v['scale-down-window'] === undefined ? 300 : Number(v['scale-down-window']);
  if (!(down >= 0) || !Number.isFinite(down)) {
    throw new UsageError(`--scale-down-window '${v['scale-down-window']}' must be a number of seconds >= 0, e.g. 300`);
  }
  return {
    shape: s,
    durationSeconds: positive('--duration', v.duration as string | undefined) ?? DEFAULT_DURATION[s],
    minReplicas,
    maxReplicas,
    scaleDownWindowSeconds: down,
    scaleToZero: v['scale-to-zero'] === true,
  };
}

/** Stages of `shape` over `duration` seconds with `peak` req/s at the top (not for the surge). */
export function loadStages(shape: LoadShape, peak: number, duration: number): Array<{ ratePerSecond: number; durationSeconds: number }> {
  const stages: Array<{ ratePerSecond: number; durationSeconds: number }> = [];
  if (shape === 'constant' || shape === 'long-prompt-surge') return [{ ratePerSecond: peak, durationSeconds: duration }];
  if (shape === 'bursty') {
    // A 10-minute burst at the start of every hour of real time, whatever the duration: what the help promises.
    for (let hour = 0; hour * 3600 < duration; hour++) {
      const burst = Math.min(600, duration - hour * 3600);
      stages.push({ ratePerSecond: peak, durationSeconds: burst });
      const quiet = Math.min(3000, duration - hour * 3600 - burst);
      if (quiet > 0) stages.push({ ratePerSecond: Number((peak * 0.3).toPrecision(6)), durationSeconds: quiet });
    }
    return stages;
  }
  const step = Math.max(60, duration / 144);
  const n = Math.min(1024, Math.ceil(duration / step));
  for (let k = 0; k < n; k++) {
    const len = Math.min(step, duration - k * step);
    const mid = (k * step + len / 2) / duration * 24; // hour of the day, compressed into `duration`
    const share = 0.2 + 0.8 * (1 - Math.cos(2 * Math.PI * (mid - 4) / 24)) / 2;
    stages.push({ ratePerSecond: Number((peak * share).toPrecision(6)), durationSeconds: Number(len.toPrecision(9)) });
  }
  return stages;
}

/**
 * Writes the long-prompt surge as a JSONL trace (streamed line by line): Poisson arrivals at `rate`
 * for `duration` seconds, lognormal prompts around `inputMean` tokens (4x in the middle third) and
 * outputs around `outputMean`; deterministic in `seed`.
 */
export function writeSurgeTrace(file: string, rate: number, duration: number, inputMean: number, outputMean: number, seed: number): number {
  // Park-Miller (48271, 2^31 - 1): exact in doubles, the same sequence per seed everywhere.
  let state = (Math.abs(Math.floor(seed)) % 2147483646) + 1;
  const uniform = () => {
    state = (state * 48271) % 2147483647;
    return state / 2147483647;
  };
  const normal = () => Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
  const lognormal = (mean: number, cv: number) => {
    const s2 = Math.log(1 + cv * cv);
    return Math.exp(Math.log(mean) - s2 / 2 + Math.sqrt(s2) * normal());
  };
  const fd = fs.openSync(file, 'w');
  let lines = 0;
  try {
    let t = 0;
    let chunk = '';
    for (;;) {
      t += -Math.log(uniform()) / rate;
      if (t >= duration) break;
      const surge = t >= duration / 3 && t < 2 * duration / 3;
      const input = Math.max(16, Math.min(32_000, Math.round(lognormal(inputMean * (surge ? 4 : 1), 0.5))));
      const output = Math.max(1, Math.min(8_000, Math.round(lognormal(outputMean, 0.5))));
      chunk += `{"timestamp_ms": ${Math.round(t * 1000)}, "input_length": ${input}, "output_length": ${output}}\n`;
      lines++;
      if (chunk.length > 65_536) {
        fs.writeSync(fd, chunk);
        chunk = '';
      }
    }
    fs.writeSync(fd, chunk);
  } finally {
    fs.closeSync(fd);
  }
  return lines;
}

/** Provisioning of one replica of `tensorParallel` accelerators of `instanceType` (engine/README.md, "Autoscaling"). */
export function provisioningFor(model: ModelArchitecture, weights: Precision | undefined, instanceType: AcceleratedInstanceType) {
  const bytesPerWeight = weights?.bytesPerElement ?? 2;
  // S3 reaches at most 100 Gb/s to one instance; half of it is assumed. NVMe: 2 GB/s read per local drive.
  const networkGbps = Math.min(instanceType.networkBandwidthGbps, 100);
  return {
    nodeStartSeconds: 240,
    imagePullSeconds: 120,
    engineStartSeconds: 60,
    checkpointBytes: model.parametersTotal * bytesPerWeight,
    networkBytesPerSecond: networkGbps * 1e9 / 8 * 0.5,
    nvmeBytesPerSecond: Math.max(1, instanceType.localNvmeCount) * 2e9,
  };
}

/** Pool and top-level keys the engine reads for autoscaling (engine/README.md, "Autoscaling"). */
export interface AutoscalingSections {
  readonly autoscaling: { evaluationIntervalSeconds: number; windowSeconds: number; horizonSeconds: number };
  readonly pools: Array<Record<string, unknown>>;
}

/** `base` with the scaling report on, and (when `scaled`) every pool autoscaled. */
export function withAutoscaling(base: SimulationConfig, flags: AutoscaleFlags, scaled: boolean,
  provisioning: Record<string, number>): SimulationConfig & AutoscalingSections {
  const windowSeconds = Math.max(60, Math.round(flags.durationSeconds / 96));
  return {
    ...base,
    autoscaling: { evaluationIntervalSeconds: 15, windowSeconds, horizonSeconds: flags.durationSeconds },
    pools: (base.pools ?? []).map(p => (scaled
      ? {
        ...p,
        replicas: Math.min(Math.max(p.replicas ?? 1, flags.minReplicas), flags.maxReplicas),
        autoscaling: {
          minReplicas: flags.minReplicas,
          maxReplicas: flags.maxReplicas,
          target: DEFAULT_TARGET_PRESSURE,
          scaleDownStabilizationSeconds: flags.scaleDownWindowSeconds,
          scaleToZero: flags.scaleToZero,
          provisioning,
        },
      }
      : { ...p })),
  };
}

/** The engine's `scaling` report (engine/include/disagg/simulation_config.h, scaling_to_json). */
export interface ScalingReport {
  readonly horizonSeconds: number;
  readonly windowSeconds: number;
  readonly pools: ReadonlyArray<{
    readonly name: string;
    readonly role: string;
    readonly gpusPerReplica: number;
    readonly gpuHours: number;
    readonly peakReplicas: number;
    readonly scaleUps: number;
    readonly scaleDowns: number;
    readonly provisionSeconds: number;
    readonly drainedRequests: number;
    readonly lostOnScaleDown: number;
  }>;
  readonly gpuHours: number;
  readonly lostOnScaleDown: number;
  readonly heldForCapacity: number;
  readonly goodRequests: number;
  readonly goodPerGpuHour: number;
  readonly windows: {
    readonly count: number;
    readonly startSeconds: number[];
    readonly arrivals: number[];
    readonly good: number[];
    readonly promptTokens: number[];
    /** 90th-percentile TTFT and TPOT of each window's completed arrivals, seconds (null: none completed). */
    readonly ttftP90: Array<number | null>;
    readonly tpotP90: Array<number | null>;
    readonly replicas: number[][];
    readonly readyReplicas: number[][];
  };
}

export type ScaledResult = SimulationResult & { readonly scaling: ScalingReport };

/** The comparison table: per pool, then the whole deployment. */
export function renderAutoscaleTable(stat: ScaledResult, auto: ScaledResult, peer?: ScaledResult): string[] {
  const headers = ['pool', 'GPUs/replica', 'static replicas', 'static GPU-h', ...(peer ? ['peak-sized', 'peak-sized GPU-h'] : []),
    'autoscaled GPU-h', 'peak', 'scale-ups', 'scale-downs', 'provision', 'drained', 'lost'];
  const rows = auto.scaling.pools.map((p, i) => {
    const s = stat.scaling.pools[i];
    const q = peer?.scaling.pools[i];
    return [
      `${p.name} (${p.role})`, String(p.gpusPerReplica), String(s.peakReplicas), s.gpuHours.toFixed(1),
      ...(q ? [String(q.peakReplicas), q.gpuHours.toFixed(1)] : []), p.gpuHours.toFixed(1),
      String(p.peakReplicas), String(p.scaleUps), String(p.scaleDowns), formatLatency(p.provisionSeconds),
      String(p.drainedRequests), String(p.lostOnScaleDown),
    ];
  });
  const all = [stat.scaling.gpuHours.toFixed(1), ...(peer ? ['', peer.scaling.gpuHours.toFixed(1)] : []), auto.scaling.gpuHours.toFixed(1)];
  rows.push(['all', '', '', ...all, '', '', '', '', '', String(auto.scaling.lostOnScaleDown)]);
  // Every column but the pool's name holds a number.
  return renderTable(headers, rows, headers.map((_, i) => i > 0));
}

/** Worst window's SLO attainment (good / arrivals) among windows with arrivals. */
export function worstWindow(r: ScalingReport): { start: number; share: number } | undefined {
  let worst: { start: number; share: number } | undefined;
  r.windows.arrivals.forEach((n, w) => {
    if (n === 0) return;
    const share = r.windows.good[w] / n;
    if (!worst || share < worst.share) worst = { start: r.windows.startSeconds[w], share };
  });
  return worst;
}

/** Checks that a trace or a shape, not both, drives the load. */
export function checkAutoscaleLoad(values: Record<string, unknown>): void {
  if (values.trace !== undefined && values['load-shape'] !== undefined) {
    throw new UsageError('--load-shape does not apply with --trace: the trace replays its own arrivals; drop one');
  }
  if (values.stages !== undefined) {
    throw new UsageError('--stages does not apply with --autoscale; use --load-shape (or --trace)');
  }
  for (const flag of Object.keys(AUTOSCALE_FLAG_OPTIONS)) {
    if (flag !== 'autoscale' && values[flag] !== undefined && values.autoscale !== true) {
      throw new UsageError(`--${flag} needs --autoscale`);
    }
  }
}

/** What runAutoscale needs from `disagg simulate`. */
export interface AutoscaleRun {
  readonly io: CliIo;
  readonly values: Record<string, unknown>;
  /** The deployment as `disagg simulate` built it: the static one. */
  readonly config: SimulationConfig;
  readonly model: ModelArchitecture;
  readonly instanceType: AcceleratedInstanceType;
  readonly weights: Precision | undefined;
  readonly rate: number;
  /** --rate was given; without it the peak is 3/4 of what the static deployment serves. */
  readonly rateGiven: boolean;
  readonly seed: number;
  readonly targetShare: number;
  readonly outDir: string;
  readonly title: string;
  readonly json: boolean;
}

/** Replicas per pool, in the config's pool order. */
type Replicas = number[];

/**
 * `config` with its synthetic workload arriving in `stages` (Poisson unless it names a process) and
 * no request count: the stages end the run. The one rewrite the probes and the shaped run share.
 */
export function withStages(config: SimulationConfig, stages: Array<{ ratePerSecond: number; durationSeconds: number }>): SimulationConfig {
  const { requests: _requests, ...workload } = config.workload;
  return { ...config, workload: { ...workload, arrival: { ...workload.arrival, process: workload.arrival?.process ?? 'poisson', stages } } };
}

/** The smallest static deployment found to meet the SLO at the peak, and how it was found. */
export interface PeakSized {
  /** Replicas per pool (the config's order); undefined when none up to --max-replicas meets it. */
  readonly replicas?: Replicas;
  readonly rate: number;
  readonly probeSeconds: number;
  /** Constant-load runs the search made. */
  readonly probes: number;
}

/**
 * Probes static deployments at a constant `rate` for `probeSeconds` (Poisson arrivals, the run's
 * prompts and outputs): whether the share meeting the SLO reaches `targetShare`. Memoized per
 * replica vector and rate.
 */
export class PeakProber {
  public probes = 0;
  private readonly seen = new Map<string, boolean>();

  constructor(private readonly config: SimulationConfig, public readonly probeSeconds: number, private readonly targetShare: number,
    private readonly onProbe: (what: string) => void) {}

  public async meets(replicas: Replicas, rate: number): Promise<boolean> {
    const key = `${replicas.join('+')}@${rate}`;
    const known = this.seen.get(key);
    if (known !== undefined) return known;
    const probe = withStages({ ...this.config, pools: (this.config.pools ?? []).map((p, i) => ({ ...p, replicas: replicas[i] })) },
      [{ ratePerSecond: rate, durationSeconds: this.probeSeconds }]);
    this.onProbe(`${replicas.join('+')} replicas at ${rate} req/s`);
    this.probes++;
    const result = await simulate(probe);
    const ok = result.goodputShare >= this.targetShare;
    this.seen.set(key, ok);
    return ok;
  }
}

/** The smallest `n` in [lo, hi] for which `ok(n)` holds (assumed monotone), or undefined. */
async function smallest(lo: number, hi: number, ok: (n: number) => Promise<boolean>): Promise<number | undefined> {
  if (!(await ok(hi))) return undefined;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (await ok(mid)) hi = mid; else lo = mid + 1;
  }
  return hi;
}

/**
 * The smallest static deployment meeting the SLO at `rate`, as bench/autoscaling.sh sizes its peer:
 * one pool (aggregated), the fewest replicas; two (prefill and decode), the fewest decode replicas with
 * prefill at the most, then the fewest prefill replicas with those (each a binary search, as more
 * replicas never serve less).
 */
export async function peakSizedStatic(
  prober: PeakProber, pools: number, maxReplicas: number, rate: number,
): Promise<PeakSized> {
  let replicas: Replicas | undefined;
  if (pools === 1) {
    const n = await smallest(1, maxReplicas, r => prober.meets([r], rate));
    replicas = n === undefined ? undefined : [n];
  } else {
    const d = await smallest(1, maxReplicas, r => prober.meets([maxReplicas, r], rate));
    const p = d === undefined ? undefined : await smallest(1, maxReplicas, r => prober.meets([r, d], rate));
    replicas = d === undefined || p === undefined ? undefined : [p, d];
  }
  return { replicas, rate, probeSeconds: prober.probeSeconds, probes: prober.probes };
}

/**
 * The highest rate `replicas` serve within the SLO, to a tenth of it: doubling from 1 req/s until it
 * fails, then halving the gap four times.
 */
async function servedRate(prober: PeakProber, replicas: Replicas): Promise<number> {
  let lo = 0;
  let hi = 1;
  for (let k = 0; k < 14 && (await prober.meets(replicas, hi)); k++) {
    lo = hi;
    hi *= 2;
  }
  for (let k = 0; k < 4; k++) {
    const mid = Number(((lo + hi) / 2).toPrecision(4));
    if (await prober.meets(replicas, mid)) lo = mid; else hi = mid;
  }
  return lo;
}

/** Runs the deployment static and autoscaled under the load shape; prints the table, writes the chart. */
export async function runAutoscale(run: AutoscaleRun): Promise<number> {
  const { io, values, config } = run;
  checkAutoscaleLoad(values);
  const flags = autoscaleFlags(values);
  fs.mkdirSync(run.outDir, { recursive: true });
  if (!engineLoaded(io, 'disagg simulate')) return ExitCode.INTERNAL;
  // The peak and the static deployment sized for it, for a load of a shape (a trace and the surge
  // bring their own arrivals: no peak to size for).
  const shaped = config.workload.kind !== 'trace' && flags.shape !== 'long-prompt-surge';
  const probeSeconds = probeWindowSeconds(600, { ttftSeconds: config.slo?.ttftSeconds ?? 2, tpotSeconds: config.slo?.tpotSeconds ?? 0.1 },
    config.workload.outputTokens?.mean ?? 256);
  const searching = new ProgressReporter(io, 'sizing');
  const prober = new PeakProber(config, probeSeconds, run.targetShare, what => searching.update(prober.probes, prober.probes + 1, what));
  const yours: Replicas = (config.pools ?? []).map(p => p.replicas ?? 1);
  let peak = run.rate;
  let peer: PeakSized | undefined;
  try {
    if (shaped && !run.rateGiven) {
      const served = await servedRate(prober, yours);
      if (served <= 0) {
        throw new UsageError(`the static deployment (${yours.join(' + ')} replicas) keeps ${Math.round(run.targetShare * 100)}% of requests within the SLO at no rate `
          + 'from 1 req/s: give the peak with --rate, or more replicas');
      }
      peak = Number((0.75 * served).toPrecision(3));
    }
    if (shaped) peer = await peakSizedStatic(prober, yours.length, flags.maxReplicas, peak);
  } catch (e) {
    throw e instanceof UsageError ? e : new UsageError((e as Error).message);
  } finally {
    searching.finish();
  }
  let base: SimulationConfig = config;
  let load: string;
  let chartLoad: string;
  if (config.workload.kind === 'trace') {
    load = `trace ${config.workload.trace?.path}`;
    chartLoad = `trace ${path.basename(config.workload.trace?.path ?? '')}`;
  } else if (flags.shape === 'long-prompt-surge') {
    const file = path.join(run.outDir, 'surge-trace.jsonl');
    const inputMean = config.workload.inputTokens?.mean ?? 1024;
    const outputMean = config.workload.outputTokens?.mean ?? 256;
    const lines = writeSurgeTrace(file, run.rate, flags.durationSeconds, inputMean, outputMean, run.seed);
    base = { ...config, workload: { kind: 'trace', trace: { path: file } } };
    load = `long-prompt surge: ${run.rate} req/s for ${flags.durationSeconds} s, prompts ~${inputMean} tokens, 4x in the middle third (${lines} requests in ${rel(file)})`;
    // The chart names the trace by its file name: a title is no place for a path of this machine.
    chartLoad = `long-prompt surge: ${run.rate} req/s for ${flags.durationSeconds} s, prompts ~${inputMean} tokens, 4x in the middle third (${path.basename(file)})`;
  } else {
    base = withStages(config, loadStages(flags.shape, peak, flags.durationSeconds));
    load = `${flags.shape}, peak ${peak} req/s over ${flags.durationSeconds} s`
      + (run.rateGiven ? '' : ' (3/4 of what your static deployment serves within the SLO; --rate sets the peak)');
    chartLoad = load;
  }
  const provisioning = provisioningFor(run.model, run.weights, run.instanceType);
  const staticConfig = withAutoscaling(base, flags, false, provisioning);
  const scaledConfig = withAutoscaling(base, flags, true, provisioning);
  const peerReplicas = peer?.replicas;
  const samePeer = peerReplicas !== undefined && peerReplicas.every((r, i) => r === yours[i]);
  const peerConfig = peerReplicas !== undefined && !samePeer
    ? { ...staticConfig, pools: (staticConfig.pools ?? []).map((p, i) => ({ ...p, replicas: peerReplicas[i] })) }
    : undefined;
  const runs = peerConfig ? 3 : 2;
  const progress = new ProgressReporter(io, 'simulating');
  let stat: ScaledResult;
  let auto: ScaledResult;
  let peerResult: ScaledResult | undefined;
  try {
    stat = await simulate(staticConfig, p => progress.update(p.done, runs * p.total, 'your static (virtual seconds)')) as ScaledResult;
    if (peerConfig) {
      peerResult = await simulate(peerConfig, p => progress.update(p.total + p.done, runs * p.total, 'peak-sized static (virtual seconds)')) as ScaledResult;
    } else if (samePeer) {
      peerResult = stat;
    }
    auto = await simulate(scaledConfig, p => progress.update((runs - 1) * p.total + p.done, runs * p.total, 'autoscaled (virtual seconds)')) as ScaledResult;
  } catch (e) {
    throw new UsageError((e as Error).message);
  } finally {
    progress.finish();
  }
  const svgFile = path.join(run.outDir, 'simulate-autoscale.svg');
  const jsonFile = path.join(run.outDir, 'simulate-autoscale.json');
  const w = auto.scaling.windows;
  fs.writeFileSync(svgFile, renderTimelineChart({
    title: `${run.title}, autoscaled (${chartLoad})`,
    startSeconds: w.startSeconds,
    windowSeconds: auto.scaling.windowSeconds,
    arrivals: w.arrivals,
    good: w.good,
    pools: auto.scaling.pools.map((p, i) => ({ name: p.name, replicas: w.replicas[i], ready: w.readyReplicas[i] })),
    staticGood: stat.scaling.windows.good,
    targetShare: run.targetShare,
    latency: { ttftP90: w.ttftP90, tpotP90: w.tpotP90, ttftSloSeconds: config.slo?.ttftSeconds ?? 2, tpotSloSeconds: config.slo?.tpotSeconds ?? 0.1 },
  }));
  const saved = stat.scaling.gpuHours > 0 ? 1 - auto.scaling.gpuHours / stat.scaling.gpuHours : 0;
  const goodputRatio = stat.goodRequests > 0 ? auto.goodRequests / stat.goodRequests : 0;
  const peerSaved = peerResult && peerResult.scaling.gpuHours > 0 ? 1 - auto.scaling.gpuHours / peerResult.scaling.gpuHours : undefined;
  const report = {
    load,
    peakRate: peak,
    autoscaling: flags,
    provisioning,
    static: stat,
    autoscaled: auto,
    gpuHoursSaved: saved,
    goodputRatio,
    // The static deployment a capacity planner would buy for the peak: the fairer baseline.
    peakSized: peer === undefined ? undefined : {
      ...peer,
      result: peerResult,
      gpuHoursSaved: peerSaved,
      goodputRatio: peerResult && peerResult.goodRequests > 0 ? auto.goodRequests / peerResult.goodRequests : undefined,
    },
    chart: svgFile,
    config: { static: staticConfig, autoscaled: scaledConfig },
  };
  fs.writeFileSync(jsonFile, JSON.stringify(report, undefined, 2) + '\n');
  if (run.json) {
    io.out(JSON.stringify(report, undefined, 2));
    return ExitCode.OK;
  }
  io.out(`disagg simulate --autoscale: ${run.title}`);
  io.out(`  load      ${load}`);
  io.out(`  rule      per pool: SLO pressure, target ${DEFAULT_TARGET_PRESSURE}, tolerance 0.1, replicas ${flags.minReplicas}-${flags.maxReplicas}, scale-down window ${flags.scaleDownWindowSeconds} s${flags.scaleToZero ? ', to zero after 600 s idle' : ''}; evaluated every 15 s`);
  io.out(`  provision ${formatLatency(auto.scaling.pools[0]?.provisionSeconds ?? 0)} per replica (node 240 s, image 120 s, ${(provisioning.checkpointBytes / 1e9).toFixed(1)} GB of weights at ${(provisioning.networkBytesPerSecond / 1e9).toFixed(2)} GB/s download and ${(provisioning.nvmeBytesPerSecond / 1e9).toFixed(0)} GB/s NVMe, engine 60 s)`);
  io.out('');
  if (peer) {
    io.out(`  peer      ${peer.replicas ? `${peer.replicas.join(' + ')} replicas: the smallest static deployment found to keep ${Math.round(run.targetShare * 100)}% of requests within the SLO `
      + `at the peak (${peak} req/s held ${formatLatency(probeSeconds)}; ${peer.probes} probe runs)`
      : `none up to --max-replicas ${flags.maxReplicas} keeps ${Math.round(run.targetShare * 100)}% of requests within the SLO at the peak (${peak} req/s); raise --max-replicas or lower --rate`}`);
  }
  io.out('');
  io.out(renderAutoscaleTable(stat, auto, peerResult).join('\n'));
  io.out('');
  const worst = worstWindow(auto.scaling);
  const savedText = (share: number) => (share >= 0 ? `${pct(share)} saved` : `${pct(-share)} more`);
  const vs = (r: ScaledResult, share: number | undefined, name: string) => `${r.scaling.gpuHours.toFixed(1)} ${name} (${savedText(share ?? 0)}; goodput ${(r.goodRequests > 0 ? auto.goodRequests / r.goodRequests : 0).toFixed(3)}x)`;
  io.out(`GPU-hours: ${auto.scaling.gpuHours.toFixed(1)} autoscaled vs ` + (peerResult && !samePeer ? `${vs(peerResult, peerSaved, 'static sized for the peak')} and ` : '')
    + `${vs(stat, saved, samePeer ? 'static (yours, which is also the smallest sized for the peak)' : 'your static')}; `
    + `goodput ${auto.goodRequests}/${auto.submitted} (${pct(auto.goodputShare)}) vs ${stat.goodRequests}/${stat.submitted} (${pct(stat.goodputShare)}) yours; `
    + `requests lost on scale-down: ${auto.scaling.lostOnScaleDown}${worst ? `; worst ${formatLatency(auto.scaling.windowSeconds)} window at ${(worst.start / 3600).toFixed(2)} h: ${pct(worst.share)} within the SLO` : ''}`);
  io.out(`  wrote ${rel(svgFile)} and ${rel(jsonFile)}`);
  return ExitCode.OK;
}

function pct(share: number): string {
  return `${Math.round(share * 1000) / 10}%`;
}

function rel(file: string): string {
  const relative = path.relative(process.cwd(), file);
  return relative && !relative.startsWith('..') ? relative : file;
}
