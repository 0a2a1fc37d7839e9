import * as fs from 'fs';
import * as path from 'path';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../catalog';
import { KvTierSizes, probeWindowSeconds, simulate, simulateSweep, simulationConfig, SimulationConfig, SimulationResult, SweepPoint } from '../../engine';
import { AUTOSCALE_FLAG_HELP, AUTOSCALE_FLAG_OPTIONS, runAutoscale, ScaledResult, ScalingReport } from '../autoscale-simulate';
import { CliIo, Command, ExitCode, UsageError, parseOptions } from '../command';
import { DEFAULT_DEPLOYMENT, defaultTensorParallel, MODEL_FLAG_OPTIONS, defaultContext, defaultKvPrecision, effectiveWeightsFlag } from '../defaults';
import {
  ENGINE_FLAG_HELP, ENGINE_FLAG_OPTIONS, EngineFlags, engineFlags, engineLoaded, formatLatency, positive, SCHEDULER_FLAG_HELP, SCHEDULER_FLAG_OPTIONS,
  schedulerFlags, sweepRates, wholeNumber,
} from '../engine-flags';
import { ProgressReporter } from '../progress';
import { renderSweepChart, renderTimelineChart } from '../svg-chart';
import { renderTable } from '../table';
import { CliVocabulary } from '../vocabulary';

const HELP = `Usage: disagg simulate [options]

Simulates a deployment on a virtual clock with the engine's own scheduler, KV cache and router: time to
first token (TTFT) and time per output token (TPOT) percentiles, good requests/s (the rate times the share
meeting both SLOs) and the goodput (the highest rate at which the target share meets them),
throughput, prefix-cache hits. Runs the workload at --rate and at rates around it (or --rates), prints
a table and writes <out>/simulate.svg (latency percentiles and goodput against the rate) and
<out>/simulate.json. With --stages (or --trace, --concurrency) it runs the load once instead, and
the chart is a time series: load, TTFT and TPOT p90 and the share meeting the SLO. Needs the engine addon
(\`npx projen engine\`).
With no options it simulates the default deployment: ${DEFAULT_DEPLOYMENT.model}, ${DEFAULT_DEPLOYMENT.prefillReplicas} prefill and ${DEFAULT_DEPLOYMENT.decodeReplicas} decode
replicas of TP${DEFAULT_DEPLOYMENT.tensorParallel} on ${DEFAULT_DEPLOYMENT.instance}.

Deployment:
  --model NAME                 catalog model name or Hugging Face id (default ${DEFAULT_DEPLOYMENT.model})
  --instance NAME              EC2 instance type (default ${DEFAULT_DEPLOYMENT.instance})
  --weight-precision P         weight precision (default ${DEFAULT_DEPLOYMENT.weights}; was --weights)
  --kv-cache-precision P       KV cache precision (default ${DEFAULT_DEPLOYMENT.kv} with the default
                               weights, else bf16 = vLLM's auto; was --kv)
  --max-context TOKENS         longest sequence (default ${DEFAULT_DEPLOYMENT.context}, or the model's own if shorter;
                               was --context)
  --tp N                       tensor-parallel size of every pool's replicas (default ${DEFAULT_DEPLOYMENT.tensorParallel} where it is
                               valid and fits, else the smallest size that fits: what \`disagg plan\` describes)
  --pp N                       pipeline-parallel size of every pool's replicas: N stages of --tp ranks,
                               beyond one node over EFA (default 1)
  --prefill-replicas N         prefill replicas (default ${DEFAULT_DEPLOYMENT.prefillReplicas})
  --prefill-tp N, --prefill-pp N
                               the prefill pool's own sizes (default: --tp and --pp)
  --decode-replicas N          decode replicas (default ${DEFAULT_DEPLOYMENT.decodeReplicas})
  --decode-tp N, --decode-pp N the decode pool's own sizes (default: --tp and --pp)
  --aggregated                 serve whole requests on one pool instead (with --replicas, --tp and --pp)
  --replicas N                 aggregated replicas (default ${DEFAULT_DEPLOYMENT.prefillReplicas + DEFAULT_DEPLOYMENT.decodeReplicas})
  --prefill-ep N, --decode-ep N, --ep N
                               MoE models: one replica is an expert-parallel group of N ranks (TP x
                               data-parallel attention ranks; TP defaults to 1), each rank whole experts;
                               each step pays the dispatch and combine all-to-all over EFA and NVLink and
                               waits for the busiest expert rank (see \`disagg plan\` for the sizes)

KV tiers below HBM (on replicas that prefill; offloaded blocks are loaded back instead of recomputed):
  --host-kv GIB[@GB/s]         CPU memory per replica (default link: 50 GB/s per accelerator, PCIe Gen5)
  --disk-kv GIB[@GB/s]         instance-store NVMe per replica (default: 2 GB/s read per drive)
  --remote-kv GIB[@GB/s]       one store shared by all replicas (default link: 12.5 GB/s per replica)
${SCHEDULER_FLAG_HELP}
${ENGINE_FLAG_HELP}
${AUTOSCALE_FLAG_HELP}

Output:
  --rates LIST                 arrival rates of the chart (default: 0.25x to 2x --rate, then higher
                               until the deployment misses the SLO target, up to 32x --rate; not with
                               --stages or --trace)
  --json                       print machine-readable JSON only
  -h, --help                   show this help

Example: one vLLM replica of Llama-3.1-8B on an H100 (p5.48xlarge), TP1, under inference-perf's shared_prefix
load at 8 then 20 req/s (a run of ../shared/validation):
  disagg simulate --model llama-3.1-8b --instance p5.48xlarge --weight-precision bf16 \\
    --kv-cache-precision bf16 --max-context 4096 --aggregated --replicas 1 --tp 1 --max-num-seqs 128 \\
    --max-num-batched-tokens 2048 --gpu-memory-utilization 0.9 --block-size 16 --arrival constant \\
    --stages 8x600,20x600 \\
    --shared-prompts 9 --popularity equal --users-per-prompt 5 --system-prompt-tokens 100 \\
    --input-tokens 447 --output-tokens 248 --api completions

Exit codes: 0 simulated, 2 usage error or a deployment that cannot run, 3 engine addon missing.`;

/** Rounds of higher rates added when the default sweep ends inside the SLO (each x1.5 and x2 of the top). */
const SATURATION_ROUNDS = 4;

/** The flags of `disagg simulate`, as its parser reads them (tests parse the README's commands with them). */
const OPTIONS = {
  ...ENGINE_FLAG_OPTIONS,
  ...MODEL_FLAG_OPTIONS,
  'prefill-replicas': { type: 'string' },
  'prefill-tp': { type: 'string' },
  'decode-replicas': { type: 'string' },
  'decode-tp': { type: 'string' },
  'prefill-pp': { type: 'string' },
  'decode-pp': { type: 'string' },
  'pp': { type: 'string' },
  'prefill-ep': { type: 'string' },
  'decode-ep': { type: 'string' },
  'aggregated': { type: 'boolean' },
  'replicas': { type: 'string' },
  'tp': { type: 'string' },
  'ep': { type: 'string' },
  'rates': { type: 'string' },
  'host-kv': { type: 'string' },
  'disk-kv': { type: 'string' },
  'remote-kv': { type: 'string' },
  ...SCHEDULER_FLAG_OPTIONS,
  ...AUTOSCALE_FLAG_OPTIONS,
  'json': { type: 'boolean' },
  'help': { type: 'boolean', short: 'h' },
} as const;

/** `disagg simulate`: one deployment under one workload, swept over arrival rates. */
export const command: Command = {
  name: 'simulate',
  options: OPTIONS,
  summary: 'Simulate a deployment under a workload: TTFT/TPOT percentiles and goodput by arrival rate (SVG chart)',
  help: HELP,
  vocabulary: CliVocabulary.SIMULATE,
  run: runSimulate,
};

async function runSimulate(argv: string[], io: CliIo): Promise<number> {
  const values = parseOptions(argv, OPTIONS, io);
  if (values.help) {
    io.out(HELP);
    return ExitCode.OK;
  }
  const flags = engineFlags(values);
  const scheduler = schedulerFlags(values);
  const model = lookup('--model', values.model ?? DEFAULT_DEPLOYMENT.model, ModelArchitecture.fromName);
  const instanceType = lookup('--instance', values.instance ?? DEFAULT_DEPLOYMENT.instance, AcceleratedInstanceType.fromName);
  const weightsFlag = effectiveWeightsFlag(values['weight-precision'], instanceType, model);
  const weights = weightsFlag ?? DEFAULT_DEPLOYMENT.weights;
  const int = (flag: string, v: string | undefined, fallback: number) => wholeNumber(flag, v, 1) ?? fallback;
  const aggregated = values.aggregated === true;
  const perPool = ['prefill-replicas', 'prefill-tp', 'prefill-pp', 'prefill-ep', 'decode-replicas', 'decode-tp', 'decode-pp', 'decode-ep'];
  for (const flag of aggregated ? perPool : ['replicas', 'ep']) {
    if ((values as Record<string, unknown>)[flag] !== undefined) {
      throw new UsageError(`--${flag} ${aggregated ? 'does not apply with --aggregated' : 'needs --aggregated'}; ` +
        (aggregated ? 'use --replicas, --tp and --pp' : `use --prefill-replicas/--decode-replicas${flag === 'ep' ? ' and --prefill-ep/--decode-ep' : ''}`));
    }
  }
  // --tp and --pp are every pool's sizes; --prefill-tp, --decode-tp (and -pp) set one pool's. An
  // expert-parallel pool defaults to TP1 (its ranks are data-parallel attention ranks).
  const shapeOf = (pool: 'prefill' | 'decode' | undefined, replicasDefault: number) => {
    const flag = (name: string) => (pool ? `${pool}-${name}` : name);
    const v = values as Record<string, string | undefined>;
    const ep = epOf(flag('ep'));
    const pp = int(`--${flag('pp')}`, v[flag('pp')], int('--pp', values.pp, 1));
    const fallbackTp = ep.expertParallel !== undefined ? 1 : defaultTensorParallel({
      model,
      instanceType,
      weightPrecision,
      kvCachePrecision,
      maxContext,
      pipelineParallel: pp,
      gpuMemoryUtilization: scheduler.gpuMemoryUtilization,
      maxNumSeqs: scheduler.maxNumSeqs,
      maxNumBatchedTokens: scheduler.maxNumBatchedTokens,
    });
    const tp = int(`--${flag('tp')}`, v[flag('tp')], int('--tp', values.tp, fallbackTp));
    return { replicas: int(`--${flag('replicas')}`, v[flag('replicas')], replicasDefault), tensorParallel: tp, ...(pp > 1 ? { pipelineParallel: pp } : {}), ...ep };
  };
  // Expert parallelism: one replica is a group of EP ranks (TP x data-parallel attention ranks).
  const epOf = (flag: string) => {
    const ep = wholeNumber(`--${flag}`, (values as Record<string, string | undefined>)[flag], 1);
    if (ep !== undefined && !model.isMoe) {
      throw new UsageError(`--${flag} ${ep}: ${model.name} is a dense model; expert parallelism needs routed experts`);
    }
    return ep !== undefined && ep > 1 ? { expertParallel: ep } : {};
  };
  const weightPrecision = weights.toLowerCase() === 'native' ? undefined : lookup('--weight-precision', weights, Precision.of);
  const kvCachePrecision = lookup('--kv-cache-precision', values['kv-cache-precision'] ?? defaultKvPrecision(weightsFlag), Precision.of);
  const maxContext = int('--max-context', values['max-context'], defaultContext(model));
  let config: SimulationConfig;
  try {
    config = simulationConfig({
      model,
      instanceType,
      weightPrecision,
      kvCachePrecision,
      maxContext,
      gpuMemoryUtilization: scheduler.gpuMemoryUtilization,
      kvBlockSize: scheduler.kvBlockSize,
      maxNumSeqs: scheduler.maxNumSeqs,
      maxNumBatchedTokens: scheduler.maxNumBatchedTokens,
      asyncScheduling: scheduler.asyncScheduling,
      ...(aggregated
        ? { aggregated: shapeOf(undefined, DEFAULT_DEPLOYMENT.prefillReplicas + DEFAULT_DEPLOYMENT.decodeReplicas) }
        : { prefill: shapeOf('prefill', DEFAULT_DEPLOYMENT.prefillReplicas), decode: shapeOf('decode', DEFAULT_DEPLOYMENT.decodeReplicas) }),
      workload: flags.workload,
      slo: flags.slo,
      policy: flags.policy,
      efficiency: { stepOverheadSeconds: flags.stepOverheadSeconds },
      kvTiers: kvTierFlags(values, scheduler.cpuOffloadGib),
      seed: flags.seed,
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (flags.engine) config = flags.engine.applyTo(config);
  if (values.autoscale === true || Object.keys(AUTOSCALE_FLAG_OPTIONS).some(f => (values as Record<string, unknown>)[f] !== undefined)) {
    if (values.rates !== undefined) throw new UsageError('--rates does not apply with --autoscale (one run under a changing load); drop --rates');
    return runAutoscale({
      io,
      values: values as Record<string, unknown>,
      config,
      model,
      instanceType,
      weights: weights.toLowerCase() === 'native' ? undefined : Precision.of(weights),
      rate: flags.rate,
      rateGiven: values.rate !== undefined,
      seed: flags.seed,
      targetShare: flags.targetShare,
      outDir: path.resolve(flags.outDir),
      title: `${model.name} on ${instanceType.name}: ${describePools(config)}`,
      json: values.json === true,
    });
  }
  // A trace, stages and a closed loop fix their own arrivals: one run, no sweep.
  const single = config.workload.kind === 'trace' || flags.stages !== undefined || flags.concurrency !== undefined;
  if (single && values.rates !== undefined) {
    const why = flags.stages ? '--stages' : flags.concurrency !== undefined ? '--concurrency' : '--trace';
    throw new UsageError(`--rates does not apply with ${why}, which fixes its own arrivals; drop --rates`);
  }
  const rates = values.rates !== undefined ? rateList(values.rates) : sweepRates(flags.rate);
  if (!rates.includes(flags.rate) && !single) rates.push(flags.rate);
  rates.sort((a, b) => a - b);

  if (!engineLoaded(io, 'disagg simulate')) return ExitCode.INTERNAL;
  // A row judges a deployment at steady state only when its arrivals span several request lifetimes
  // (the planner's probe window): without --requests each rate simulates at least that long.
  const window = single ? 0 : probeWindowSeconds(1, flags.slo, meanTokens(config.workload.outputTokens));
  const scaled = !single && values.requests === undefined;
  const requestsAt = (rate: number) => scaled ? Math.max(config.workload.requests ?? 0, Math.ceil(rate * window)) : config.workload.requests ?? 0;
  const sweep = async (at: number[], onProgress: (done: number) => void): Promise<SweepPoint[]> => {
    if (!scaled) return simulateSweep(config, at, p => onProgress(p.done));
    const out: SweepPoint[] = [];
    for (const rate of at) {
      out.push(...await simulateSweep({ ...config, workload: { ...config.workload, requests: requestsAt(rate) } }, [rate]));
      onProgress(out.length);
    }
    return out;
  };
  const progress = new ProgressReporter(io, 'simulating');
  let points: SweepPoint[];
  let timeline: ScalingReport | undefined;
  try {
    if (single) {
      // One run over time: the engine's window report (the same the autoscaling comparison reads) gives
      // the chart its time series; the pools keep their replicas (no autoscaling section of their own).
      const stagedSeconds = flags.stages?.reduce((sum, st) => sum + st.durationSeconds, 0);
      const windowSeconds = stagedSeconds !== undefined ? Math.max(1, Math.round(stagedSeconds / 60)) : 10;
      const timed = { ...config, autoscaling: { evaluationIntervalSeconds: 15, windowSeconds, horizonSeconds: stagedSeconds ?? windowSeconds } };
      // (the report goes to the chart and `timeline`; the summary stays what a run without it gives)
      const { scaling, ...summary } = await simulate(timed, p => progress.update(p.done, p.total)) as ScaledResult;
      timeline = scaling;
      // A closed loop's rate is what its clients achieved.
      const achieved = flags.concurrency !== undefined ? Number(summary.requestsPerSecond.toPrecision(4)) : flags.rate;
      points = [{ ratePerSecond: achieved, summary }];
    } else {
      points = await sweep(rates, done => progress.update(done, rates.length, `rate ${rates[done - 1]}/s`));
      // A chart that never leaves the SLO says nothing about capacity: without --rates, keep raising
      // the rate (x1.5, x2 of the highest) until the deployment saturates, a few rounds at most.
      for (let round = 0; values.rates === undefined && round < SATURATION_ROUNDS; round++) {
        const top = points[points.length - 1];
        if (top.summary.goodputShare < flags.targetShare) break;
        const more = [1.5, 2].map(f => Number((top.ratePerSecond * f).toPrecision(6)));
        const done = points.length;
        points = points.concat(await sweep(more,
          d => progress.update(done + d, done + more.length, `rate ${more[d - 1]}/s (looking for saturation)`)));
      }
    }
  } catch (e) {
    progress.finish();
    throw new UsageError((e as Error).message);
  } finally {
    progress.finish();
  }
  const main = single ? points[0] : points.find(p => p.ratePerSecond === flags.rate) ?? points[0];
  const outDir = path.resolve(flags.outDir);
  fs.mkdirSync(outDir, { recursive: true });
  const svgFile = path.join(outDir, 'simulate.svg');
  const jsonFile = path.join(outDir, 'simulate.json');
  const title = `${model.name} on ${instanceType.name}: ${describePools(config)}`;
  fs.writeFileSync(svgFile, timeline !== undefined
    // A staged, replayed or closed-loop run is one run over time: its chart is a time series.
    ? renderTimelineChart({
      title: `${title}, ${flags.stages ? `${flags.stages.length} stages` : config.workload.kind === 'trace' ? 'trace replay' : `${flags.concurrency} clients`}`,
      startSeconds: timeline.windows.startSeconds,
      windowSeconds: timeline.windowSeconds,
      arrivals: timeline.windows.arrivals,
      good: timeline.windows.good,
      pools: [],
      targetShare: flags.targetShare,
      latency: {
        ttftP90: timeline.windows.ttftP90,
        tpotP90: timeline.windows.tpotP90,
        ttftSloSeconds: flags.slo.ttftSeconds,
        tpotSloSeconds: flags.slo.tpotSeconds,
      },
    })
    : renderSweepChart(points, {
      title,
      ttftSloSeconds: flags.slo.ttftSeconds,
      tpotSloSeconds: flags.slo.tpotSeconds,
      targetShare: flags.targetShare,
      markRate: main.ratePerSecond,
      markLabel: flags.concurrency !== undefined ? `${flags.concurrency} clients` : '--rate',
    }));
  const report = {
    model: model.name,
    instanceType: instanceType.name,
    pools: describePools(config),
    slo: flags.slo,
    targetShare: flags.targetShare,
    rate: main.ratePerSecond,
    result: main.summary,
    sweep: points,
    // A single run's windows over time (what the chart draws): arrivals, good, TTFT and TPOT p90.
    ...(timeline ? { timeline: { windowSeconds: timeline.windowSeconds, windows: timeline.windows } } : {}),
    chart: svgFile,
    config,
  };
  fs.writeFileSync(jsonFile, JSON.stringify(report, undefined, 2) + '\n');
  if (values.json) {
    io.out(JSON.stringify(report, undefined, 2));
    return ExitCode.OK;
  }
  io.out(`disagg simulate: ${title}`);
  io.out(`  workload  ${describeWorkload(flags, scaled ? window : undefined)}; seed ${flags.seed}${flags.engine ? `; engine ${flags.engine.name}` : ''}`);
  io.out(`  SLO       TTFT <= ${formatLatency(flags.slo.ttftSeconds)}, TPOT <= ${formatLatency(flags.slo.tpotSeconds)}; ` +
    `good: requests meeting both; goodput: the highest rate with ${Math.round(flags.targetShare * 100)}% good`);
  io.out('');
  // Rows whose arrivals end before the deployment has filled: marked, with the --requests that fixes them.
  const short = single ? [] : points.filter(p => requestsAt(p.ratePerSecond) / p.ratePerSecond < window * 0.999);
  io.out(...[renderSweepTable(points, flags.concurrency !== undefined ? undefined : main.ratePerSecond, flags.targetShare,
    new Set(short.map(p => p.ratePerSecond))).join('\n')]);
  if (short.length > 0) {
    const top = short[short.length - 1].ratePerSecond;
    io.out(`  ~ arrivals span less than ${window.toFixed(0)} s, four request lifetimes at the SLO's edge: those rows judge a deployment ` +
      `still filling (its decode batches and queues not yet grown); --requests ${Math.ceil(top * window)} or more, or no --requests, fixes them`);
  }
  io.out('');
  const s = main.summary;
  // A chat workload's rate counts sessions, each of several requests.
  const unit = config.workload.kind === 'chat' ? 'sessions/s' : 'req/s';
  const at = flags.concurrency !== undefined ? `With ${flags.concurrency} clients (${s.requestsPerSecond.toFixed(2)} req/s)`
    : flags.stages ? `Over the stages (mean ${main.ratePerSecond} ${unit})` : `At ${main.ratePerSecond} ${unit}`;
  io.out(`${at}: ${s.completed}/${s.submitted} completed, ${pct(s.goodputShare)} good (${s.goodputShare >= flags.targetShare ? 'meets' : 'misses'} the ${pct(flags.targetShare)} target), ` +
    `prefix-cache hits ${describeHits(s)}, ${s.disaggregatedRequests} requests through prefill, ${s.preemptions} preemptions, mean utilization ${pct(s.meanUtilization)}`);
  // Goodput, one definition everywhere (the planner's, DistServe's): the highest rate swept at which
  // the target share of requests meets both SLOs.
  const passing = single ? [] : points.filter(p => p.summary.goodputShare >= flags.targetShare);
  if (!single) {
    io.out(passing.length > 0
      ? `  goodput: ${passing[passing.length - 1].ratePerSecond} ${unit}, the highest rate swept with ${pct(flags.targetShare)} ` +
        'of requests within both SLOs'
      : `  goodput: below ${points[0].ratePerSecond} ${unit}: no rate swept had ${pct(flags.targetShare)} of requests within both SLOs`);
  }
  const top = points[points.length - 1];
  if (values.rates === undefined && !single && top.summary.goodputShare >= flags.targetShare) {
    io.out(`  still meeting the target at ${top.ratePerSecond} ${unit}: pass higher --rates to find the saturation point`);
  }
  io.out(`  wrote ${rel(svgFile)} and ${rel(jsonFile)}`);
  return ExitCode.OK;
}

/** Rows per rate: latency percentiles, goodput, throughput. */
export function renderSweepTable(points: SweepPoint[], mark: number | undefined, targetShare: number,
  short: ReadonlySet<number> = new Set()): string[] {
  const headers = ['rate/s', 'TTFT p50', 'p90', 'p99', 'TPOT p50', 'p90', 'p99', 'good', 'good/s', 'out tok/s', 'prefix hit', ''];
  const rows = points.map(p => {
    const s = p.summary;
    return [
      String(p.ratePerSecond) + (short.has(p.ratePerSecond) ? ' ~' : ''),
      formatLatency(s.ttftSeconds.p50), formatLatency(s.ttftSeconds.p90), formatLatency(s.ttftSeconds.p99),
      formatLatency(s.tpotSeconds.p50), formatLatency(s.tpotSeconds.p90), formatLatency(s.tpotSeconds.p99),
      pct(s.goodputShare) + (s.goodputShare >= targetShare ? '' : ' !'),
      // good requests per second of offered load: one definition with the chart's (rate x share)
      (p.ratePerSecond * s.goodputShare).toFixed(2),
      Math.round(s.outputTokensPerSecond).toLocaleString('en-US'),
      pct(totalHits(s)),
      p.ratePerSecond === mark ? '<- --rate' : '',
    ];
  });
  return renderTable(headers, rows, headers.map((_, i) => i > 0 && i < 11));
}

/** Share of prompt tokens found cached in any tier. */
function totalHits(s: SimulationResult): number {
  const h = s.prefixHitRate;
  return h.gpu + (h.host ?? 0) + (h.disk ?? 0) + (h.remote ?? 0);
}

/** "42%", or with lower tiers "61% (gpu 42%, host 9%, disk 10%)". */
function describeHits(s: SimulationResult): string {
  const tiers = (['host', 'disk', 'remote'] as const).filter(t => s.kvTiers?.[t] !== undefined);
  if (tiers.length === 0) return pct(s.prefixHitRate.gpu);
  const parts = [`gpu ${pct(s.prefixHitRate.gpu)}`, ...tiers.map(t => `${t} ${pct(s.prefixHitRate[t])}`)];
  const loaded = tiers.reduce((sum, t) => sum + s.kvTiers![t].bytesLoaded, 0);
  return `${pct(totalHits(s))} (${parts.join(', ')}; ${(loaded / 1e9).toFixed(1)} GB loaded from lower tiers)`;
}

function describePools(config: SimulationConfig): string {
  return (config.pools ?? []).map(p => {
    const ep = p.parallel?.expertParallel;
    const pp = Number(p.parallel?.pipelineParallel ?? 1);
    return `${p.replicas} x ${p.role === 'both' ? 'aggregated' : p.role} ${typeof ep === 'number' && ep > 1 ? `EP${ep}` : `TP${p.tensorParallel}`}`
      + (pp > 1 ? ` x PP${pp}` : '');
  }).join(' + ');
}

/** The mean of a token-count distribution (uniform: the midpoint). */
function meanTokens(d: { distribution?: string; mean?: number; min?: number; max?: number } | undefined): number {
  if (!d) return 1;
  return d.distribution === 'uniform' ? ((d.min ?? 0) + (d.max ?? 0)) / 2 : d.mean ?? 1;
}

function describeWorkload(flags: EngineFlags, windowSeconds?: number): string {
  const w = flags.workload;
  const dist = (d: typeof w.inputTokens) => (d?.distribution === 'uniform' ? `uniform ${d.min}-${d.max}` : d?.distribution === 'lognormal' ? `lognormal ${d.mean}±${d.stddev}` : String(d?.mean));
  if (w.kind === 'trace') return `trace ${w.trace?.path}`;
  const what = w.kind === 'chat' ? 'chat sessions' : 'requests';
  const load = flags.concurrency !== undefined
    ? `${what} from a closed loop of ${flags.concurrency} clients`
    : flags.stages
      ? `${what} in stages ${flags.stages.map(s => `${s.ratePerSecond}/s x ${s.durationSeconds} s`).join(', ')} (${w.arrival?.process})`
      : `${what} at ${flags.rate}/s (${w.arrival?.process})`;
  const count = windowSeconds !== undefined ? `per rate ${w.requests} requests or ${windowSeconds.toFixed(0)} s of arrivals, whichever is more`
    : w.requests !== undefined ? `${w.requests} requests` : 'every stage\'s requests';
  const parts = [load, count, `input ${dist(w.inputTokens)}`, `output ${dist(w.outputTokens)} tokens`];
  if (w.tenants) {
    const t = w.tenants;
    const pop = t.popularity === 'equal' ? 'equal popularity' : `Zipf ${t.zipfExponent ?? 1} popularity`;
    parts.push(`${t.count} shared ${t.systemPromptTokens}-token system prompts (${pop}` +
      `${t.usersPerTenant !== undefined ? `, ${t.usersPerTenant} users each repeating a fixed question` : ''})`);
  }
  if (w.chat) parts.push(`turns ${dist(w.chat.turns)}`);
  if (w.api) parts.push(`${w.api} API`);
  return parts.join(', ');
}

function rateList(text: string): number[] {
  const items = text.split(',').map(s => s.trim()).filter(s => s !== '');
  if (items.length === 0 || items.length > 64) {
    throw new UsageError(`--rates expects 1 to 64 comma-separated positive rates, got '${text}'`);
  }
  return [...new Set(items.map(item => positive('--rates', item)!))];
}

/**
 * `--host-kv GIB[@GB/s]` and its siblings: sizes (and bandwidth overrides) of the lower KV tiers.
 * `cpuOffloadGib` (--cpu-offload-gib) is the host tier on the assumed link.
 */
function kvTierFlags(values: { 'host-kv'?: string; 'disk-kv'?: string; 'remote-kv'?: string }, cpuOffloadGib?: number): KvTierSizes | undefined {
  const sizes: Record<string, number> = {};
  if (cpuOffloadGib !== undefined) {
    if (values['host-kv'] !== undefined) {
      throw new UsageError(`--cpu-offload-gib (${cpuOffloadGib}) and --host-kv (${values['host-kv']}) both size the host KV tier; give one (--host-kv GIB@GB/s also sets its link)`);
    }
    sizes.hostGib = cpuOffloadGib;
  }
  for (const tier of ['host', 'disk', 'remote'] as const) {
    const text = values[`${tier}-kv`];
    if (text === undefined) continue;
    const m = /^([0-9.]+)(?:@([0-9.]+))?$/.exec(text.trim());
    const gib = m ? Number(m[1]) : NaN;
    const gbps = m?.[2] !== undefined ? Number(m[2]) : undefined;
    if (!(gib > 0) || (gbps !== undefined && !(gbps > 0))) {
      throw new UsageError(`--${tier}-kv '${text}' must be GIB or GIB@GB/s with positive numbers, e.g. --${tier}-kv 256 or --${tier}-kv 256@40`);
    }
    sizes[`${tier}Gib`] = gib;
    if (gbps !== undefined) sizes[`${tier}GBps`] = gbps;
  }
  return Object.keys(sizes).length > 0 ? sizes : undefined;
}

function lookup<T>(flag: string, name: string, parse: (n: string) => T): T {
  try {
    return parse(name);
  } catch (e) {
    throw new UsageError(`${flag}: ${(e as Error).message}`);
  }
}

function pct(share: number): string {
  return `${Math.round(share * 1000) / 10}%`;
}

function rel(file: string): string {
  const relative = path.relative(process.cwd(), file);
  return relative && !relative.startsWith('..') ? relative : file;
}
