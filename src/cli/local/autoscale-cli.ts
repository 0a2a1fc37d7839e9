import { CliIo, ExitCode, UsageError } from '../command';
import { positive, wholeNumber } from '../engine-flags';
import { renderTable } from '../table';
import { AUTOSCALED_POOLS, LocalAutoscaleResult, runLocalAutoscale } from './autoscale';
import { localAutoscaleDeployment } from './deployment';
import { resolveEngineBinary, withProcessGroup } from './processes';
import { scrapeTargetsOf } from './scrape-targets';
import { buildJobs, RequestApi, WorkloadSpec } from './workload';

/** The flag values `disagg local --autoscale` reads (parseOptions' result). */
export type LocalFlagValues = Record<string, string | boolean | string[] | undefined>;

/** Flags of a fixed-size run that mean nothing here. */
const NOT_WITH_AUTOSCALE = ['replicas', 'expert-parallel', 'prefill-ranks', 'decode-ranks', 'policy', 'baseline', 'prefix-source',
  'requests', 'concurrency', 'timeout'] as const;

function text(v: LocalFlagValues, flag: string): string | undefined {
  const x = v[flag];
  return typeof x === 'string' ? x : undefined;
}

/** `disagg local --autoscale`: reads the flags, runs, prints the steps and the summary. */
export async function runAutoscale(v: LocalFlagValues, io: CliIo, readText: (files: string[]) => string): Promise<number> {
  const stray = NOT_WITH_AUTOSCALE.find(f => v[f] !== undefined);
  if (stray) {
    throw new UsageError(`--${stray} is not for --autoscale: an autoscaled run sizes the P/D pools itself under an open-loop load ` +
      '(--rate, --duration); leave it out');
  }
  const minReplicas = wholeNumber('--min-replicas', text(v, 'min-replicas'), 1) ?? 1;
  const maxReplicas = wholeNumber('--max-replicas', text(v, 'max-replicas'), 1) ?? 4;
  if (maxReplicas < minReplicas) throw new UsageError(`--max-replicas (${maxReplicas}) must be >= --min-replicas (${minReplicas})`);
  if (maxReplicas > 8) throw new UsageError(`--max-replicas (${maxReplicas}) must be <= 8 locally: each pool keeps 2 x max slots (replicas leaving beside new ones), 32 sim-workers at most`);
  const initial = {
    prefill: wholeNumber('--prefill-replicas', text(v, 'prefill-replicas'), 1) ?? minReplicas,
    decode: wholeNumber('--decode-replicas', text(v, 'decode-replicas'), 1) ?? minReplicas,
  };
  for (const p of AUTOSCALED_POOLS) {
    if (initial[p] < minReplicas || initial[p] > maxReplicas) {
      throw new UsageError(`--${p}-replicas (${initial[p]}) starts the pool outside --min-replicas..--max-replicas (${minReplicas}..${maxReplicas})`);
    }
  }
  const scaleDownWindowSeconds = wholeNumber('--scale-down-window', text(v, 'scale-down-window'), 0) ?? 10;
  if (scaleDownWindowSeconds > 3600) throw new UsageError(`--scale-down-window (${scaleDownWindowSeconds}) must be at most 3600 s (the HPA's limit)`);
  const durationSeconds = positive('--duration', text(v, 'duration')) ?? 90;
  if (durationSeconds > 3600) throw new UsageError(`--duration (${durationSeconds}) must be at most 3600 s locally`);
  const peakRate = positive('--rate', text(v, 'rate')) ?? 6;
  if (peakRate > 200) throw new UsageError(`--rate (${peakRate}) must be at most 200 requests/s: one client process on this machine sends them`);
  const intervalSeconds = positive('--interval', text(v, 'interval')) ?? 1;
  const provisionSeconds = text(v, 'provision-seconds') === undefined ? 2 : Number(text(v, 'provision-seconds'));
  if (!(provisionSeconds >= 0 && provisionSeconds <= 600)) {
    throw new UsageError(`--provision-seconds '${text(v, 'provision-seconds')}' must be a number of seconds from 0 to 600`);
  }
  const maxNumSeqs = wholeNumber('--max-num-seqs', text(v, 'max-num-seqs'), 1) ?? 8;
  const ttftSeconds = positive('--ttft', text(v, 'ttft')) ?? 2;
  const tpotSeconds = positive('--tpot', text(v, 'tpot')) ?? 0.05;
  const speedup = positive('--speedup', text(v, 'speedup')) ?? 0.25;
  const kvTokens = wholeNumber('--kv-tokens', text(v, 'kv-tokens'), 1024);
  // Mostly distinct long prompts by default, so that the prefill pool has work to scale on too.
  const kind = text(v, 'workload') ?? 'shared-prefix';
  if (kind !== 'mixed' && kind !== 'shared-prefix' && kind !== 'chat') {
    throw new UsageError(`--workload '${kind}' is not a workload; use mixed, shared-prefix or chat`);
  }
  const api = (text(v, 'api') ?? 'chat') as RequestApi;
  if (api !== 'chat' && api !== 'completions') {
    throw new UsageError(`--api '${api}' is not an API; use chat (/v1/chat/completions, the default) or completions (/v1/completions)`);
  }
  const files = v.text as string[] | undefined;
  const workload: WorkloadSpec = {
    kind,
    // Enough conversations for the whole load (they are cycled if it sends more).
    requests: Math.min(100_000, Math.ceil(peakRate * durationSeconds) + 16),
    tenants: wholeNumber('--tenants', text(v, 'tenants'), 1) ?? 400,
    systemTokens: wholeNumber('--system-tokens', text(v, 'system-tokens'), 4) ?? 1500,
    questionTokens: 128,
    turns: wholeNumber('--turns', text(v, 'turns'), 1) ?? 4,
    turnTokens: 128,
    maxTokens: wholeNumber('--max-tokens', text(v, 'max-tokens'), 1) ?? 64,
    seed: wholeNumber('--seed', text(v, 'seed'), 0) ?? 1,
    ...(files ? { text: readText(files) } : {}),
  };
  const json = v.json === true;
  const tokenizer = text(v, 'tokenizer');

  let deployment;
  try {
    deployment = localAutoscaleDeployment({ minReplicas, maxReplicas, scaleDownWindowSeconds, ttftSeconds, tpotSeconds });
  } catch (e) {
    throw new UsageError(`the autoscaled deployment is invalid: ${(e as Error).message}`);
  }
  let binary: string;
  try {
    binary = resolveEngineBinary(text(v, 'engine'));
  } catch (e) {
    io.err(`disagg local: ${(e as Error).message}`);
    return ExitCode.INTERNAL;
  }
  const say = json ? () => undefined : (line: string) => io.err(line);
  if (!json) {
    io.err(`disagg local --autoscale: ${deployment.servedModelName} (${deployment.description}), P/D, each pool ${minReplicas}-${maxReplicas} replicas ` +
      `(target pressure ${deployment.rules.decode.targetPressure}, scale-down window ${scaleDownWindowSeconds} s, rule every ${intervalSeconds} s, ` +
      `${provisionSeconds} s to provision), SLO TTFT ${ttftSeconds} s / TPOT ${tpotSeconds * 1000} ms, speedup ${speedup}`);
    io.err(`  load: ${durationSeconds} s from ${(peakRate * 0.1).toFixed(2)} to ${peakRate} req/s and back (${kind}, ${workload.maxTokens} output tokens, ` +
      `${api} API); decode sim-workers run ${maxNumSeqs} sequences at most`);
  }
  let result: LocalAutoscaleResult;
  let pids: Array<{ name: string; pid: number }> = [];
  try {
    result = await withProcessGroup(binary, io, async ({ group, tmp, interrupted }) => {
      pids = group.pids;
      return runLocalAutoscale(group, {
        deployment,
        speedup,
        maxNumSeqs,
        kvTokens,
        initial,
        intervalSeconds,
        provisionSeconds,
        durationSeconds,
        peakRate,
        troughShare: 0.1,
        jobs: buildJobs(workload),
        maxTokens: workload.maxTokens,
        api,
        maxInFlight: 512,
        tmp,
        tokenizer,
        interrupted,
        seed: workload.seed,
      }, say);
    }, scrapeTargetsOf(v['scrape-targets'], deployment));
  } catch (e) {
    io.err(`disagg local: ${(e as Error).message}`);
    return ExitCode.INTERNAL;
  }
  const r = result.requests;
  const badDrains = result.drains.filter(d => d.exit !== 0);
  const failed = r.failed > 0 || r.shed > 0 || r.ok === 0 || badDrains.length > 0;
  if (json) {
    io.out(JSON.stringify({
      deployment: {
        model: deployment.servedModelName,
        description: deployment.description,
        rules: deployment.rules,
        speedup,
        maxNumSeqs,
      },
      load: { durationSeconds, peakRate, troughShare: 0.1, workload: { ...workload, text: files } },
      ...result,
      processes: pids,
    },
    (_k, x) => (typeof x === 'number' && !Number.isFinite(x) ? null : x), 2));
    return failed ? ExitCode.NEGATIVE : ExitCode.OK;
  }
  const ms = (s: number) => (Number.isFinite(s) ? `${(s * 1000).toFixed(0)} ms` : '-');
  // The share of requests within both targets that the autoscaler's rule aims for (its `target` is a
  // pressure, not this share; 90% is the goodput convention the rest of the CLI uses).
  const SLO_TARGET = 0.9;
  io.out([
    `disagg local --autoscale: ${deployment.servedModelName} (${deployment.description}), ${result.seconds.toFixed(0)} s`,
    '',
    `requests: ${r.sent} sent, ${r.ok} ok, ${r.failed} failed, ${r.shed} shed by the client` +
      `; TTFT p50 ${ms(r.ttftSeconds.p50)} p99 ${ms(r.ttftSeconds.p99)}, TPOT p50 ${ms(r.tpotSeconds.p50)} p99 ${ms(r.tpotSeconds.p99)}`,
    `SLO: ${(r.slo.attainment * 100).toFixed(1)}% of requests within TTFT ${ms(r.slo.ttftSeconds)} and TPOT ${ms(r.slo.tpotSeconds)} ` +
      `(the deployment's ${ttftSeconds} s / ${tpotSeconds * 1000} ms at ${speedup}x speed)` +
      (r.slo.attainment >= SLO_TARGET ? '' : `: MISSED, under ${SLO_TARGET * 100}%` +
        (r.ttftSeconds.p99 > r.slo.ttftSeconds ? `; TTFT p99 ${ms(r.ttftSeconds.p99)} is over it, queues grew before the scale-ups were ready ` +
          '(each takes --provision-seconds plus its start): a longer --duration (a slower ramp), a lower --rate or more --min-replicas would hold it' : '')),
    `drains: ${result.drains.length} sim-workers left, ${result.drains.length - badDrains.length} drained and exited 0, ` +
      `${result.drains.reduce((n, d) => n + (Number.isFinite(d.inFlightAtStart) ? d.inFlightAtStart : 0), 0)} requests were in flight on them; ` +
      `${result.drainedEndpointRetries} request(s) that reached a draining worker were sent elsewhere`,
    '',
    ...renderTable(['pool', 'min', 'max', 'peak', 'scale-ups', 'scale-downs', 'replica-s', 'static at peak', 'saved'],
      AUTOSCALED_POOLS.map(p => {
        const x = result.pools[p];
        return [p, String(x.minReplicas), String(x.maxReplicas), String(x.peakReplicas), String(x.scaleUps), String(x.scaleDowns),
          x.replicaSeconds.toFixed(0), x.staticReplicaSeconds.toFixed(0),
          x.staticReplicaSeconds > 0 ? `${((1 - x.replicaSeconds / x.staticReplicaSeconds) * 100).toFixed(0)}%` : '-'];
      }), [false, true, true, true, true, true, true, true, true]),
    '',
    'timeline (every 5 s): offered load, requests in flight, replicas (ready) and SLO pressure per pool',
    ...renderTable(['t', 'req/s', 'in flight', 'prefill', 'pressure', 'decode', 'pressure'],
      result.timeline.filter((s, i, all) => i === 0 || Math.floor(s.t / 5) > Math.floor(all[i - 1].t / 5)).map(s => [
        `${s.t.toFixed(0)} s`, s.rate.toFixed(1), String(s.inFlight),
        `${s.pools.prefill.requested} (${s.pools.prefill.ready})`, s.pools.prefill.pressure.toFixed(2),
        `${s.pools.decode.requested} (${s.pools.decode.ready})`, s.pools.decode.pressure.toFixed(2),
      ]), [true, true, true, true, true, true, true]),
  ].join('\n'));
  if (r.firstError) io.err(`disagg local: ${r.failed} request(s) failed; first: ${r.firstError}`);
  if (r.shed > 0) io.err(`disagg local: ${r.shed} arrival(s) were not sent: 512 requests were in flight; lower --rate or raise --max-replicas`);
  for (const d of badDrains) io.err(`disagg local: ${d.replica} did not drain: it exited with ${d.exit} after ${d.seconds.toFixed(1)} s`);
  return failed ? ExitCode.NEGATIVE : ExitCode.OK;
}
