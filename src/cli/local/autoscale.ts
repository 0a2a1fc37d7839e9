import * as fs from 'fs';
import * as path from 'path';
import { LocalAutoscaleDeployment, LocalPool, workerConfig } from './deployment';
import { consecutiveFreePorts, EngineProcess, ProcessGroup, waitFor200 } from './processes';
import { Job, Message, percentile, RequestApi, RequestSample, sendChat } from './workload';
import { PoolAutoscalerRule, poolAutoscaler } from '../../engine';
import type { RouterAutoscaling } from '../../k8s/private/autoscaling';
import { RouterConfigFile, withoutClusterNetwork } from '../../k8s/private/router-config';

/**
 * `disagg local --autoscale`: the issue 24 scaling rule against sim-worker processes on loopback.
 *
 * The cluster's loop, with each part played by a real process or the engine's own code:
 * - the router (the construct's configuration, DNS discovery of each pool over a block of loopback
 *   ports, one per replica slot, as a headless Service's addresses) computes each pool's SLO
 *   pressure and serves it on GET /scaling, as KEDA polls it;
 * - every interval, the engine's rule (disagg::PoolAutoscaler through the addon: the one the
 *   simulator applies, with the ScaledObject's bounds and windows) turns each pool's pressure into a
 *   replica count, as KEDA's HPA does;
 * - this file plays the ReplicaSet and kubelet: a scale-up takes a free slot, waits the
 *   provisioning time and starts a sim-worker there; a scale-down cancels a replica still
 *   provisioning, else SIGTERMs the newest running one, which drains as a pod does (new requests get
 *   503 and the router sends them elsewhere, the ones in flight finish) and exits.
 * A load that rises and falls (open-loop arrivals) runs meanwhile; every request is counted.
 *
 * Model time runs `speedup` times wall time in the sim-workers, so the router's SLO and capacity
 * (model seconds in the construct's configuration) are scaled to wall time here: the pressure the
 * router computes is then the one the cluster would see for the same load in model time.
 */

/** The pools `--autoscale` scales (P/D). */
export const AUTOSCALED_POOLS = ['prefill', 'decode'] as const;
export type AutoscaledPool = (typeof AUTOSCALED_POOLS)[number];

/** How the run goes. */
export interface LocalAutoscaleOptions {
  readonly deployment: LocalAutoscaleDeployment;
  /** Model seconds per wall second of the sim-workers. */
  readonly speedup: number;
  /** Running sequences per decode sim-worker (vLLM --max-num-seqs; the router's decode.maxSequences). */
  readonly maxNumSeqs: number;
  /** KV cache tokens per sim-worker. @default - the pool's */
  readonly kvTokens?: number;
  /** Replicas of each pool at the start (>= its minReplicas). */
  readonly initial: Record<AutoscaledPool, number>;
  /** Seconds between two evaluations of the rule (KEDA polls every 15 s in the cluster). */
  readonly intervalSeconds: number;
  /** Seconds a new replica takes before its process starts (a node start and a model load, shortened). */
  readonly provisionSeconds: number;
  /** Seconds the load runs. */
  readonly durationSeconds: number;
  /** Requests per second at the load's peak (its middle); it starts and ends at `troughShare` of it. */
  readonly peakRate: number;
  readonly troughShare: number;
  /** Conversations and requests to send, cycled. */
  readonly jobs: Job[];
  readonly maxTokens: number;
  readonly api: RequestApi;
  /** Requests in flight at most; an arrival beyond it is not sent and counted as shed. */
  readonly maxInFlight: number;
  readonly tmp: string;
  readonly tokenizer?: string;
  readonly interrupted: { value: boolean };
  readonly seed: number;
}

/** One decision of the rule that changed a pool's size. */
export interface ScalingStep {
  /** Seconds since the load began. */
  readonly t: number;
  readonly pool: AutoscaledPool;
  readonly from: number;
  readonly to: number;
  readonly pressure: number;
  readonly ready: number;
  /** The rule's raw recommendation before the stabilization windows. */
  readonly recommendation: number;
  /** e.g. 'start decode-3 on :31003', 'drain decode-2 (3 requests in flight)'. */
  readonly actions: string[];
}

/** A replica that left: its drain, as the cluster would see it. */
export interface DrainRecord {
  readonly replica: string;
  readonly pool: AutoscaledPool;
  /** Seconds since the load began when it got SIGTERM. */
  readonly t: number;
  /** The router's requests in flight on it then (disagg_router_endpoint_inflight). */
  readonly inFlightAtStart: number;
  /** Seconds from SIGTERM to exit. */
  readonly seconds: number;
  /** Its exit code (0: drained), or the signal that ended it. */
  readonly exit: number | string;
}

/** One sample of the run, every interval. */
export interface TimelineSample {
  readonly t: number;
  /** The offered arrival rate then (requests/s). */
  readonly rate: number;
  readonly inFlight: number;
  readonly pools: Record<AutoscaledPool, { requested: number; ready: number; draining: number; pressure: number }>;
}

/** What `disagg local --autoscale` reports. */
export interface LocalAutoscaleResult {
  readonly requests: {
    readonly sent: number;
    readonly ok: number;
    /** Errors, and streams that ended short of max_tokens. */
    readonly failed: number;
    /** Arrivals not sent: the client had maxInFlight requests in flight. */
    readonly shed: number;
    readonly firstError?: string;
    readonly ttftSeconds: { p50: number; p99: number };
    readonly tpotSeconds: { p50: number; p99: number };
    /**
     * The deployment's SLO in wall time (model seconds / speedup, what the router scales on), and the
     * share of requests that met both targets (failed ones count as missed).
     */
    readonly slo: { readonly ttftSeconds: number; readonly tpotSeconds: number; readonly attainment: number };
  };
  readonly steps: ScalingStep[];
  readonly drains: DrainRecord[];
  readonly timeline: TimelineSample[];
  readonly pools: Record<AutoscaledPool, {
    readonly minReplicas: number;
    readonly maxReplicas: number;
    readonly peakReplicas: number;
    readonly scaleUps: number;
    readonly scaleDowns: number;
    /** Replica-seconds billed (provisioning, serving and draining), and a static pool at the peak's. */
    readonly replicaSeconds: number;
    readonly staticReplicaSeconds: number;
  }>;
  /** Seconds from the load's start to the last replica's exit. */
  readonly seconds: number;
  /** The router's requests that a drain sent elsewhere (disagg_router_drained_endpoint_retries_total). */
  readonly drainedEndpointRetries: number;
}

/** provisioning (waiting), starting (its process launching), running, draining, gone. */
type ReplicaState = 'provisioning' | 'starting' | 'running' | 'draining' | 'gone';

interface Replica {
  readonly pool: AutoscaledPool;
  readonly name: string;
  /** Its port slot; moved when another process took the slot's port before it bound it. */
  slot: number;
  state: ReplicaState;
  proc?: EngineProcess;
  /** Set when a scale-down cancels it while it provisions. */
  cancelled: boolean;
  /** Billing: when it was asked for, and when it left. */
  since: number;
  until?: number;
}

/** The deployment's SLO in wall time: the sim-workers run at `speedup`, so model seconds / speedup. */
function wallTimeSlo(d: LocalAutoscaleDeployment, speedup: number): { ttftSeconds: number; tpotSeconds: number } {
  return { ttftSeconds: d.autoscaling.slo.ttftSeconds / speedup, tpotSeconds: d.autoscaling.slo.tpotSeconds / speedup };
}

/** The router's configuration for the run: each pool discovered over its slots, capacity in wall time. */
export function autoscaleRouterConfig(d: LocalAutoscaleDeployment, slots: Record<AutoscaledPool, { http: number; kv: number; count: number }>,
  speedup: number, maxNumSeqs: number): RouterConfigFile {
  const a: RouterAutoscaling = d.autoscaling;
  const wall: RouterAutoscaling = {
    slo: wallTimeSlo(d, speedup),
    prefill: { tokensPerSecond: a.prefill.tokensPerSecond * speedup, fixedSeconds: a.prefill.fixedSeconds / speedup },
    decode: {
      stepSecondsBase: a.decode.stepSecondsBase / speedup,
      stepSecondsPerSequence: a.decode.stepSecondsPerSequence / speedup,
      maxSequences: maxNumSeqs,
    },
  };
  const config = withoutClusterNetwork(d.config);
  return {
    ...config,
    policy: { ...config.policy, prefixSource: 'index' },
    pools: config.pools.map(p => {
      const s = slots[p.name as AutoscaledPool];
      return {
        ...p,
        discovery: { type: 'dns', host: '127.0.0.1', ports: Array.from({ length: s.count }, (_, j) => s.http + j), refreshSeconds: 1 },
        kvEvents: { ...p.kvEvents, port: s.kv },
      };
    }),
    autoscaling: wall,
  };
}

const sleep = (ms: number) => new Promise<void>(r => setTimeout(r, ms));

/** The pools' signals from GET /scaling (zeros when the router does not answer). */
async function readScaling(routerUrl: string): Promise<Record<AutoscaledPool, { pressure: number; ready: number; draining: number }>> {
  const zero = { pressure: 0, ready: 0, draining: 0 };
  try {
    const r = await fetch(`${routerUrl}/scaling`, { signal: AbortSignal.timeout(2_000) });
    const body = await r.json() as { pools?: Record<string, { pressure?: number; readyEndpoints?: number; drainingEndpoints?: number }> };
    const of = (name: string) => {
      const p = body.pools?.[name];
      return p ? { pressure: p.pressure ?? 0, ready: p.readyEndpoints ?? 0, draining: p.drainingEndpoints ?? 0 } : zero;
    };
    return { prefill: of('prefill'), decode: of('decode') };
  } catch {
    return { prefill: zero, decode: zero };
  }
}

/** The router's gauge or counter `family` for endpoint `label` (summed over other labels). */
async function routerValue(routerUrl: string, family: string, label?: string): Promise<number> {
  try {
    const page = await (await fetch(`${routerUrl}/metrics`, { signal: AbortSignal.timeout(2_000) })).text();
    let n = 0;
    for (const m of page.matchAll(new RegExp(`^${family}(\\{[^}]*\\})?\\s+(\\S+)`, 'gm'))) {
      if (label === undefined || (m[1] ?? '').includes(`endpoint="${label}"`)) n += Number(m[2]);
    }
    return n;
  } catch {
    return NaN;
  }
}

/** The offered rate at `t` of a load rising from trough to peak at the middle and back. */
export function offeredRate(t: number, o: { durationSeconds: number; peakRate: number; troughShare: number }): number {
  const x = Math.min(1, Math.max(0, t / o.durationSeconds));
  return o.peakRate * (o.troughShare + (1 - o.troughShare) * Math.sin(Math.PI * x) ** 2);
}

/**
 * Runs the autoscaled deployment under a load that rises and falls; every process it started is
 * stopped before it returns. `say` prints each scaling step and a status line as they happen.
 */
export async function runLocalAutoscale(group: ProcessGroup, o: LocalAutoscaleOptions, say: (line: string) => void): Promise<LocalAutoscaleResult> {
  const d = o.deployment;
  const pools = new Map<AutoscaledPool, LocalPool>(AUTOSCALED_POOLS.map(name => [name, d.pools.find(p => p.name === name)!]));
  // Slots: room for every replica at the maximum plus as many leaving beside them (a pod that
  // terminates does not count against the ReplicaSet's size).
  const slots = {} as Record<AutoscaledPool, { http: number; kv: number; count: number }>;
  for (const name of AUTOSCALED_POOLS) {
    const count = 2 * d.rules[name].maxReplicas;
    slots[name] = { http: await consecutiveFreePorts(count), kv: await consecutiveFreePorts(count), count };
  }
  /** Slots whose ports another process bound after the run began. */
  const foreign = Object.fromEntries(AUTOSCALED_POOLS.map(name => [name, new Set<number>()])) as Record<AutoscaledPool, Set<number>>;
  const routerFile = path.join(o.tmp, 'router-autoscale.json');
  fs.writeFileSync(routerFile, JSON.stringify(autoscaleRouterConfig(d, slots, o.speedup, o.maxNumSeqs), undefined, 2));
  const configFiles = {} as Record<AutoscaledPool, string>;
  for (const name of AUTOSCALED_POOLS) {
    configFiles[name] = path.join(o.tmp, `worker-${name}.json`);
    fs.writeFileSync(configFiles[name], JSON.stringify(workerConfig(pools.get(name)!), undefined, 2));
  }

  const replicas: Replica[] = [];
  let serial = 0;
  let t0 = performance.now();
  const now = () => (performance.now() - t0) / 1000;
  const fmtT = (t: number) => `${t.toFixed(1).padStart(6)} s`;
  const live = (pool: AutoscaledPool) => replicas.filter(r => r.pool === pool && !r.cancelled &&
    (r.state === 'provisioning' || r.state === 'starting' || r.state === 'running'));
  const drainGraceMs = 60_000;
  const pending: Array<Promise<void>> = [];
  const drains: DrainRecord[] = [];
  let router: EngineProcess | undefined;

  /** A scale-up: a free slot, the provisioning wait, then the sim-worker. */
  const addReplica = (pool: AutoscaledPool, provisionSeconds: number): Replica => {
    const freeSlot = (): number | undefined => {
      const used = new Set(replicas.filter(r => r.pool === pool && r.state !== 'gone').map(r => r.slot));
      return Array.from({ length: slots[pool].count }, (_, j) => j).find(j => !used.has(j) && !foreign[pool].has(j));
    };
    const slot = freeSlot();
    if (slot === undefined) throw new Error(`no free ${pool} slot (${slots[pool].count} in all)`);
    const r: Replica = { pool, name: `${pool}-${serial++}`, slot, state: 'provisioning', cancelled: false, since: now() };
    replicas.push(r);
    const p = pools.get(pool)!;
    const seed = o.seed + serial;
    const args = () => ['sim-worker', '--config', configFiles[pool], '--host', '127.0.0.1', '--role', pool,
      '--model-name', d.servedModelName, '--block-size', String(d.kvBlockSize),
      '--kv-blocks', String(Math.max(1, Math.floor((o.kvTokens ?? p.kvTokensPerReplica) / d.kvBlockSize))),
      '--max-num-seqs', String(pool === 'decode' ? o.maxNumSeqs : Math.max(1, p.maxConcurrencyPerReplica)),
      '--speedup', String(o.speedup), '--seed', String(seed),
      '--port', String(slots[pool].http + r.slot), '--kv-events-port', String(slots[pool].kv + r.slot),
      ...(o.tokenizer ? ['--tokenizer', o.tokenizer] : [])];
    pending.push((async () => {
      await sleep(provisionSeconds * 1000);
      if (r.cancelled) return;
      r.state = 'starting';
      // The slots were free when the run began; another process may have bound one since (a
      // kubelet would place the pod elsewhere): that slot is skipped from then on.
      for (;;) {
        try {
          r.proc = await group.start(r.name, args());
          break;
        } catch (e) {
          if (!/Address already in use/.test((e as Error).message)) throw e;
          foreign[pool].add(r.slot);
          const next = freeSlot();
          if (next === undefined) throw e;
          say(`${fmtT(now())}  ${r.name}: slot :${slots[pool].http + r.slot} is taken by another process; moving to :${slots[pool].http + next}`);
          r.slot = next;
        }
      }
      r.state = 'running';
      // Scaled down while its process launched: it leaves as any running replica does.
      if (r.cancelled) await removeReplica(r, 'scaled down while it started');
    })());
    return r;
  };

  /** A scale-down of one replica: a provisioning one is cancelled, a running one drains and exits. */
  const removeReplica = async (r: Replica, why: string): Promise<void> => {
    if (r.state === 'provisioning') {
      r.cancelled = true;
      r.state = 'gone';
      r.until = now();
      return;
    }
    if (r.state === 'starting') {
      r.cancelled = true; // its starter drains it once it listens
      return;
    }
    if (r.state !== 'running' || !r.proc) return;
    r.state = 'draining';
    const t = now();
    const inFlight = router ? await routerValue(router.url, 'disagg_router_endpoint_inflight', `127.0.0.1:${slots[r.pool].http + r.slot}`) : NaN;
    const exit = await group.stop(r.proc, drainGraceMs);
    r.state = 'gone';
    r.until = now();
    drains.push({ replica: r.name, pool: r.pool, t, inFlightAtStart: inFlight, seconds: r.until - t, exit });
    say(`${fmtT(r.until)}  ${r.name} ${exit === 0 ? 'drained and exited 0' : `exited with ${exit}`} after ${(r.until - t).toFixed(1)} s` +
      `${Number.isFinite(inFlight) ? ` (${inFlight} request(s) were in flight on it)` : ''}${why ? `; ${why}` : ''}`);
  };

  // The initial replicas, and the router once they listen.
  for (const name of AUTOSCALED_POOLS) for (let i = 0; i < o.initial[name]; i++) addReplica(name, 0);
  await Promise.all(pending.splice(0));
  router = await group.start('router', ['router', '--config', routerFile, '--host', '127.0.0.1', '--port', '0',
    '--health-interval-ms', '200', '--scrape-interval-ms', '200', ...(o.tokenizer ? ['--tokenizer', o.tokenizer] : [])]);
  await waitFor200(`${router.url}/ready`, 15_000);
  const deadline = Date.now() + 15_000;
  for (;;) {
    const s = await readScaling(router.url);
    if (AUTOSCALED_POOLS.every(p => s[p].ready >= o.initial[p])) break;
    if (Date.now() > deadline) throw new Error(`the router did not see the initial replicas ready within 15 s: ${JSON.stringify(s)}`);
    await sleep(100);
  }
  const routerUrl = router.url;

  // The rules: the engine's, with the construct's bounds and windows.
  const rules = {} as Record<AutoscaledPool, PoolAutoscalerRule>;
  for (const name of AUTOSCALED_POOLS) {
    const r = d.rules[name];
    rules[name] = poolAutoscaler({
      minReplicas: r.minReplicas,
      maxReplicas: r.maxReplicas,
      target: r.targetPressure,
      scaleUpStabilizationSeconds: r.scaleUpStabilizationSeconds,
      scaleDownStabilizationSeconds: r.scaleDownStabilizationSeconds,
      scaleToZero: r.scaleToZero,
      idleSecondsBeforeZero: r.idleSecondsBeforeZero,
    }, o.intervalSeconds, `${name}.autoscaling`);
  }

  // The load: open-loop arrivals (a Poisson process at the offered rate); a conversation's turns
  // follow each other, so conversations arrive at the rate over their mean turns.
  const samples: RequestSample[] = [];
  let shed = 0;
  let inFlight = 0;
  const meanTurns = o.jobs.reduce((n, j) => n + j.turns.length, 0) / Math.max(1, o.jobs.length);
  // Park-Miller (48271, 2^31 - 1): exact in doubles, one sequence per seed.
  let seed = (Math.abs(Math.floor(o.seed)) % 2147483646) + 1;
  const uniform = () => {
    seed = (seed * 48271) % 2147483647;
    return seed / 2147483647;
  };
  const conversations: Array<Promise<void>> = [];
  const converse = async (job: Job) => {
    const messages: Message[] = [...job.preamble];
    for (const turn of job.turns) {
      if (inFlight >= o.maxInFlight) {
        shed++;
        return;
      }
      messages.push({ role: 'user', content: turn });
      inFlight++;
      const { sample, text } = await sendChat(routerUrl, d.servedModelName, messages, o.maxTokens, AbortSignal.timeout(300_000), o.api);
      inFlight--;
      const whole = sample.ok && sample.outputTokens === o.maxTokens;
      samples.push(whole || !sample.ok ? sample : { ...sample, ok: false, error: `the stream ended after ${sample.outputTokens} of ${o.maxTokens} tokens` });
      if (!whole) return;
      messages.push({ role: 'assistant', content: text });
    }
  };
  t0 = performance.now();
  for (const r of replicas) r.since = 0;
  const load = (async () => {
    let t = 0;
    let next = 0;
    for (;;) {
      t += -Math.log(1 - uniform()) / (offeredRate(t, o) / meanTurns);
      if (t >= o.durationSeconds || o.interrupted.value) break;
      const wait = t * 1000 - (performance.now() - t0);
      if (wait > 0) await sleep(wait);
      conversations.push(converse(o.jobs[next++ % o.jobs.length]));
    }
    await Promise.all(conversations);
  })();
  let loadDone = false;
  void load.then(() => { loadDone = true; });

  // The scaling loop: every interval until the load is over and the pools are back at their floor.
  const steps: ScalingStep[] = [];
  const timeline: TimelineSample[] = [];
  let lastStatus = -Infinity;
  let quietSince = Infinity;
  while (!o.interrupted.value) {
    const t = now();
    const signals = await readScaling(routerUrl);
    const sample: TimelineSample['pools'] = {} as TimelineSample['pools'];
    for (const name of AUTOSCALED_POOLS) {
      const s = signals[name];
      const mine = live(name);
      const requested = mine.length;
      const ready = Math.min(s.ready, mine.filter(r => r.state === 'running').length);
      const desired = rules[name].evaluate(t, ready, requested, s.pressure, t);
      sample[name] = { requested, ready, draining: replicas.filter(r => r.pool === name && r.state === 'draining').length, pressure: s.pressure };
      if (desired === requested) continue;
      const actions: string[] = [];
      if (desired > requested) {
        for (let k = requested; k < desired; k++) {
          const r = addReplica(name, o.provisionSeconds);
          actions.push(`start ${r.name} on :${slots[name].http + r.slot}${o.provisionSeconds > 0 ? ` after ${o.provisionSeconds} s of provisioning` : ''}`);
        }
      } else {
        // Kubernetes' order: replicas not yet running first, then the newest.
        const order = (r: Replica) => (r.state === 'provisioning' ? 0 : r.state === 'starting' ? 1 : 2);
        const victims = [...mine].sort((a, b) => order(a) - order(b) || b.since - a.since)
          .slice(0, requested - desired);
        for (const v of victims) {
          actions.push(v.state === 'provisioning' ? `cancel ${v.name} (provisioning)` : v.state === 'starting' ? `drain ${v.name} once started` : `drain ${v.name}`);
          pending.push(removeReplica(v, ''));
        }
      }
      const recommendation = rules[name].lastRecommendation();
      steps.push({ t, pool: name, from: requested, to: desired, pressure: s.pressure, ready, recommendation, actions });
      say(`${fmtT(t)}  ${name.padEnd(7)} ${requested} -> ${desired}  pressure ${s.pressure.toFixed(2)} over ${ready} ready: ${actions.join(', ')}`);
    }
    timeline.push({ t, rate: t < o.durationSeconds ? offeredRate(t, o) : 0, inFlight, pools: sample });
    if (t - lastStatus >= 5) {
      lastStatus = t;
      const failed = samples.filter(s => !s.ok).length;
      say(`${fmtT(t)}  load ${(t < o.durationSeconds ? offeredRate(t, o) : 0).toFixed(1)} req/s, ${inFlight} in flight, ` +
        `${samples.length} done, ${failed} failed; replicas prefill ${sample.prefill.requested}, decode ${sample.decode.requested}`);
    }
    // Done when the load is over and both pools have sat at their floor, with nothing draining,
    // for a scale-down window (so a late scale-down would have shown).
    const atFloor = loadDone && AUTOSCALED_POOLS.every(p => sample[p].requested <= Math.max(1, d.rules[p].minReplicas) && sample[p].draining === 0);
    quietSince = atFloor ? Math.min(quietSince, t) : Infinity;
    const window = Math.max(...AUTOSCALED_POOLS.map(p => d.rules[p].scaleDownStabilizationSeconds));
    if (atFloor && t - quietSince >= window + 2 * o.intervalSeconds) break;
    if (loadDone && t > o.durationSeconds + window + 120) break; // the floor never came: stop anyway
    await sleep(Math.max(0, (t + o.intervalSeconds - now()) * 1000));
  }
  await load;
  await Promise.all(pending);
  const drainedEndpointRetries = await routerValue(routerUrl, 'disagg_router_drained_endpoint_retries_total');
  const seconds = now();
  // Everything else stops now (the caller's stopAll): bill the replicas still up to this moment.
  for (const r of replicas) if (r.until === undefined) r.until = seconds;

  const ok = samples.filter(s => s.ok);
  const pct = (v: number[]) => ({ p50: percentile(v, 50), p99: percentile(v, 99) });
  const wallSlo = wallTimeSlo(d, o.speedup);
  const poolReport = {} as LocalAutoscaleResult['pools'];
  for (const name of AUTOSCALED_POOLS) {
    const mine = replicas.filter(r => r.pool === name);
    const peak = Math.max(...timeline.map(s => s.pools[name].requested + s.pools[name].draining), o.initial[name]);
    poolReport[name] = {
      minReplicas: d.rules[name].minReplicas,
      maxReplicas: d.rules[name].maxReplicas,
      peakReplicas: peak,
      scaleUps: steps.filter(s => s.pool === name && s.to > s.from).length,
      scaleDowns: steps.filter(s => s.pool === name && s.to < s.from).length,
      replicaSeconds: mine.reduce((n, r) => n + (r.until! - r.since), 0),
      staticReplicaSeconds: peak * seconds,
    };
  }
  return {
    requests: {
      sent: samples.length,
      ok: ok.length,
      failed: samples.length - ok.length,
      shed,
      ...(samples.find(s => !s.ok)?.error ? { firstError: samples.find(s => !s.ok)!.error } : {}),
      ttftSeconds: pct(ok.map(s => s.ttft)),
      tpotSeconds: pct(ok.map(s => s.tpot)),
      slo: {
        ttftSeconds: wallSlo.ttftSeconds,
        tpotSeconds: wallSlo.tpotSeconds,
        attainment: samples.length === 0 ? 0
          : ok.filter(s => s.ttft <= wallSlo.ttftSeconds && s.tpot <= wallSlo.tpotSeconds).length / samples.length,
      },
    },
    steps,
    drains,
    timeline,
    pools: poolReport,
    seconds,
    drainedEndpointRetries,
  };
}
