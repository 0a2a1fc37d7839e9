// Issue 24 on loopback: scaling down under load loses nothing, and the router's scaling signals move
// the right way. Real processes only: `disagg-engine router` in front of `disagg-engine sim-worker`s,
// driven by the official `openai` npm SDK (streamed and whole chats), workers scaled down with
// SIGTERM while requests are in flight (the sim-worker drains: new requests 503 + Retry-After, the
// router sends them elsewhere), `disagg-engine drain-wait` as the preStop hook would run it, and
// GET /scaling read while load runs. Assertions are counts and orderings, never wall-clock limits.
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import OpenAI from 'openai';
import { BINARY, CONFIG, describeIfRoles, EngineProcess, metrics, prompt, startEngine, total, waitFor } from './util';

const describeIfBuilt = describeIfRoles('scale-down and scaling-signal tests', 'router', 'sim-worker', 'drain-wait');
const MODEL = 'llama-3.3-70b';

jest.setTimeout(180_000);

const started: EngineProcess[] = [];
let tmp: string;

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-scale-down-'));
});

afterAll(async () => {
  for (const p of started) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
  await Promise.all(started.map((p) => p.exited));
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** A sim-worker; `drainingAt()` is when it said (on stdout) that its drain began, or null. */
interface Worker extends EngineProcess {
  readonly drainingAt: () => number | null;
}

async function startWorker(role: string, speedup: number): Promise<Worker> {
  const p = await startEngine(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', String(speedup), '--role', role]);
  started.push(p);
  let draining: number | null = null;
  let out = '';
  p.proc.stdout!.on('data', (d) => {
    out += d.toString();
    if (draining === null && out.includes('draining:')) draining = Date.now();
  });
  return { ...p, drainingAt: () => draining };
}

/** The router with the `autoscaling` block of the issue 24 contract in its configuration file. */
async function startRouter(args: string[]): Promise<EngineProcess> {
  const config = path.join(tmp, `router-${started.length}.json`);
  fs.writeFileSync(config, JSON.stringify({
    router: { servedModelName: MODEL },
    autoscaling: {
      slo: { ttftSeconds: 2.0, tpotSeconds: 0.05 },
      prefill: { tokensPerSecond: 20000, fixedSeconds: 0.02 },
      decode: { stepSecondsBase: 0.012, stepSecondsPerSequence: 0.0002 },
    },
  }));
  const r = await startEngine(['router', '--config', config, '--host', '127.0.0.1', '--port', '0',
    '--health-interval-ms', '200', '--scrape-interval-ms', '100', ...args]);
  started.push(r);
  await waitFor(async () => (await fetch(`${r.url}/ready`)).status === 200, 10_000, 'router ready');
  return r;
}

function sdk(p: EngineProcess): OpenAI {
  return new OpenAI({ baseURL: `${p.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
}

/** A prompt of `words` distinct words. */
/** One request of the load, as the client saw it. */
interface Outcome {
  readonly stream: boolean;
  readonly sentAt: number;
  readonly endedAt: number;
  readonly endpoint: string | null;
  readonly ok: boolean;
  /** Streams: the last chunk carried finish_reason; whole answers: the choice did. */
  readonly finished: boolean;
  readonly words: number;
  readonly maxTokens: number;
  readonly error?: string;
}

/** One chat through the router, streamed or whole; never throws (an error is an Outcome). */
async function chat(client: OpenAI, stream: boolean, content: string, maxTokens: number): Promise<Outcome> {
  const sentAt = Date.now();
  let endpoint: string | null = null;
  try {
    if (stream) {
      const { data, response } = await client.chat.completions.create({
        model: MODEL, messages: [{ role: 'user', content }], max_tokens: maxTokens, stream: true,
      }).withResponse();
      endpoint = response.headers.get('x-disagg-endpoint');
      let words = 0;
      let finish: string | null = null;
      for await (const chunk of data) {
        words += (chunk.choices[0]?.delta?.content ?? '').split(' ').filter((w) => w).length;
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      return { stream, sentAt, endedAt: Date.now(), endpoint, ok: true, finished: finish !== null, words, maxTokens };
    }
    const { data, response } = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content }], max_tokens: maxTokens,
    }).withResponse();
    endpoint = response.headers.get('x-disagg-endpoint');
    const words = (data.choices[0].message.content ?? '').split(' ').filter((w) => w).length;
    return { stream, sentAt, endedAt: Date.now(), endpoint, ok: true, finished: data.choices[0].finish_reason !== null, words, maxTokens };
  } catch (e) {
    return { stream, sentAt, endedAt: Date.now(), endpoint, ok: false, finished: false, words: 0, maxTokens, error: String(e) };
  }
}

/** `clients` loops of requests (streamed and whole, alternating) until stop() is called. */
function steadyLoad(client: OpenAI, clients: number, promptWords: number, maxTokens: number) {
  let running = true;
  const outcomes: Outcome[] = [];
  const loops = Array.from({ length: clients }, async (_, c) => {
    for (let i = 0; running; i++) {
      outcomes.push(await chat(client, (c + i) % 2 === 0, prompt(`c${c}r${i}w`, promptWords), maxTokens));
    }
  });
  return {
    outcomes,
    stop: async () => {
      running = false;
      await Promise.all(loops);
      return outcomes;
    },
  };
}

/** Runs `disagg-engine drain-wait` against a worker, as a preStop hook would; resolves with its exit code and output. */
function drainWait(w: EngineProcess): Promise<{ code: number | null; out: string }> {
  const p = spawn(BINARY, ['drain-wait', '--metrics-url', `${w.url}/metrics`, '--timeout-s', '60', '--quiet-s', '0.3', '--poll-s', '0.05'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout!.on('data', (d) => { out += d.toString(); });
  p.stderr!.on('data', (d) => { out += d.toString(); });
  // 'close', not 'exit': the output may still be in the pipe when the process has exited.
  return new Promise((resolve) => p.once('close', (code) => resolve({ code, out })));
}

/** The router's count of requests in flight on endpoint `label`. */
async function inflightOn(router: EngineProcess, label: string): Promise<number> {
  const m = await metrics(router);
  let n = 0;
  for (const [k, v] of m) if (k.startsWith('disagg_router_endpoint_inflight{') && k.includes(`endpoint="${label}"`)) n += v;
  return n;
}

/**
 * Scales `victim` down as a cluster would (SIGTERM; drain-wait alongside), once it has `inflight`
 * requests in flight. Resolves when it has exited, with its exit code, drain-wait's result and when its drain began.
 */
async function scaleDown(router: EngineProcess, victim: Worker, inflight = 2) {
  const label = `127.0.0.1:${victim.port}`;
  await waitFor(async () => (await inflightOn(router, label)) >= inflight, 30_000, `requests in flight on ${label}`);
  victim.proc.kill('SIGTERM');
  const waited = drainWait(victim);
  const code = await victim.exited;
  await waitFor(async () => victim.drainingAt() !== null, 5_000, `${label} said it drains`);
  return { label, code, drainWait: await waited, drainingAt: victim.drainingAt()! };
}

/** Every request ended well: no error, every stream and answer whole with its finish reason. */
function expectNothingLost(outcomes: Outcome[]): void {
  const failed = outcomes.filter((o) => !o.ok || !o.finished || o.words !== o.maxTokens);
  expect(failed.map((o) => `${o.stream ? 'stream' : 'whole'} on ${o.endpoint}: ${o.error ?? `${o.words}/${o.maxTokens} words, finished ${o.finished}`}`))
    .toEqual([]);
}

describeIfBuilt('scale-down under load', () => {
  test('two of four workers leave while chats stream: 0 requests lost, streams in flight complete, no new request reaches a draining worker', async () => {
    // GIVEN four slow workers (a 120-token answer takes about a second) behind the router
    const workers = await Promise.all([0, 1, 2, 3].map(() => startWorker('aggregated', 2)));
    // (health checks 2 s apart: the router learns of a drain from the 503 a request gets, at once)
    const router = await startRouter(['--policy', 'least-loaded', '--health-interval-ms', '2000',
      ...workers.flatMap((w) => ['--endpoint', `role=both,url=${w.url}`])]);
    const client = sdk(router);

    // WHEN 12 clients send chats back to back (streamed and whole, alternating)
    const load = steadyLoad(client, 12, 40, 120);
    // AND two workers are scaled down one after the other while they serve some of them
    const first = await scaleDown(router, workers[0]);
    const second = await scaleDown(router, workers[1]);
    // AND the load goes on a while on the two that are left
    const after = load.outcomes.length;
    await waitFor(async () => load.outcomes.length >= after + 24, 60_000, 'requests after the scale-down');
    const outcomes = await load.stop();

    // THEN not one request failed: every stream ended with its finish reason and every token
    expect(outcomes.length).toBeGreaterThan(40);
    expectNothingLost(outcomes);
    for (const s of [first, second]) {
      // AND the worker finished what it had, then exited 0; drain-wait saw it through
      expect(s.code).toBe(0);
      expect(s.drainWait.code).toBe(0);
      expect(s.drainWait.out).toMatch(/drained|no longer listens/);
      const served = outcomes.filter((o) => o.endpoint === s.label);
      // AND requests in flight on it when its drain began ran to completion there (streams included)
      const inFlight = served.filter((o) => o.sentAt < s.drainingAt && o.endedAt > s.drainingAt);
      expect(inFlight.length).toBeGreaterThan(0);
      // AND none it served was sent after its drain began (those went elsewhere)
      expect(served.filter((o) => o.sentAt > s.drainingAt)).toEqual([]);
    }
    expect(outcomes.some((o) => o.stream && o.endpoint === first.label && o.sentAt < first.drainingAt && o.endedAt > first.drainingAt) ||
      outcomes.some((o) => o.stream && o.endpoint === second.label && o.sentAt < second.drainingAt && o.endedAt > second.drainingAt)).toBe(true);

    // AND the router counted every request as ok; its signals show two endpoints ready
    await waitFor(async () => total(await metrics(router), 'disagg_router_requests_total') >= outcomes.length, 5_000, 'every request counted');
    const m = await metrics(router);
    expect(m.get('disagg_router_requests_total{route="chat",outcome="ok"}')).toBe(outcomes.length);
    expect(m.get('disagg_router_requests_total{route="chat",outcome="error"}')).toBe(0);
    const scaling = await (await fetch(`${router.url}/scaling`)).json() as any;
    expect(scaling.pools.decode.readyEndpoints).toBe(2);
  });

  test('a request routed to a draining worker goes to another at once: a drained-endpoint retry, not an error', async () => {
    // GIVEN two slow workers, health checks a minute apart (the router learns of the drain from a
    // request's 503), and three long streams: two on one worker, one on the other
    const workers = await Promise.all([0, 1].map(() => startWorker('aggregated', 2)));
    const router = await startRouter(['--policy', 'least-loaded', '--health-interval-ms', '60000',
      ...workers.flatMap((w) => ['--endpoint', `role=both,url=${w.url}`])]);
    const client = sdk(router);
    const streams = [0, 1, 2].map((i) => chat(client, true, `long stream ${i}`, 600));
    await waitFor(async () => (await inflightOn(router, `127.0.0.1:${workers[0].port}`)) +
      (await inflightOn(router, `127.0.0.1:${workers[1].port}`)) === 3, 10_000, 'three streams in flight');
    const lighter = (await inflightOn(router, `127.0.0.1:${workers[0].port}`)) === 1 ? 0 : 1;
    const victim = workers[lighter];
    const label = `127.0.0.1:${victim.port}`;
    // WHEN the less loaded worker drains
    victim.proc.kill('SIGTERM');
    await waitFor(async () => victim.drainingAt() !== null, 5_000, 'the drain began');
    // AND a request arrives (least-loaded picks the draining worker first)
    const late = await chat(client, false, 'arrives during the drain', 5);
    // THEN it was answered by the other worker, after one drained-endpoint retry and no error
    expect(late.ok).toBe(true);
    expect(late.endpoint).not.toBe(label);
    const m = await metrics(router);
    expect(m.get('disagg_router_drained_endpoint_retries_total')).toBe(1);
    expect(m.get('disagg_router_errors_total{cause="upstream_5xx"}')).toBe(0);
    expect(m.get('disagg_router_retries_total')).toBe(0);
    expect(m.get('disagg_router_pool_draining_endpoints{pool="decode"}')).toBe(1);
    // AND the stream in flight on the draining worker completed, and the worker exited 0
    expectNothingLost(await Promise.all(streams));
    expect(await victim.exited).toBe(0);
  });

  test('P/D: a prefill and a decode worker leave under load; KV transfers held for decode are served first; 0 requests lost', async () => {
    // GIVEN two prefill and two decode workers, prompts long enough to disaggregate (prefill slowed
    // down so that a prefill leg is in flight long enough to be caught by the scale-down)
    const prefill = await Promise.all([0, 1].map(() => startWorker('prefill', 0.25)));
    const decode = await Promise.all([0, 1].map(() => startWorker('decode', 2)));
    const router = await startRouter(['--policy', 'disagg', '--min-uncached-tokens', '32',
      ...prefill.map((w) => ['--endpoint', `role=prefill,url=${w.url}`]).flat(),
      ...decode.map((w) => ['--endpoint', `role=decode,url=${w.url}`]).flat()]);
    const client = sdk(router);

    // WHEN 8 clients send long-prompt chats and one worker of each pool is scaled down
    const load = steadyLoad(client, 8, 600, 80);
    const gone = [await scaleDown(router, prefill[0], 1), await scaleDown(router, decode[0])];
    const after = load.outcomes.length;
    await waitFor(async () => load.outcomes.length >= after + 16, 60_000, 'requests after the scale-down');
    const outcomes = await load.stop();

    // THEN nothing was lost, both workers drained and exited 0, and no decode leg was sent to the
    // decode worker after its drain began
    expectNothingLost(outcomes);
    for (const g of gone) {
      expect(g.code).toBe(0);
      expect(g.drainWait.code).toBe(0);
    }
    expect(outcomes.filter((o) => o.endpoint === gone[1].label && o.sentAt > gone[1].drainingAt)).toEqual([]);
    const m = await metrics(router);
    expect(total(m, 'disagg_router_requests_total{route="chat",outcome="error"}')).toBe(0);
  });
});

describeIfBuilt('scaling signals under load', () => {
  /** Polls GET /scaling every 20 ms until `until` settles; returns every reading. */
  async function sampleScaling(router: EngineProcess, until: Promise<unknown>): Promise<any[]> {
    let done = false;
    void until.finally(() => { done = true; });
    const readings: any[] = [];
    while (!done) {
      readings.push(await (await fetch(`${router.url}/scaling`)).json());
      await new Promise((r) => setTimeout(r, 20));
    }
    return readings;
  }

  test('long prompts raise the prefill pressure; many running sequences raise the decode pressure', async () => {
    // GIVEN one prefill and one decode worker behind the router, idle
    const prefill = await startWorker('prefill', 5);
    const decode = await startWorker('decode', 5);
    const router = await startRouter(['--policy', 'disagg', '--min-uncached-tokens', '256',
      '--endpoint', `role=prefill,url=${prefill.url}`, '--endpoint', `role=decode,url=${decode.url}`]);
    const client = sdk(router);
    await waitFor(async () => (await (await fetch(`${router.url}/scaling`)).json() as any).pools.decode.readyEndpoints === 1, 5_000, 'decode ready');
    const idle = await (await fetch(`${router.url}/scaling`)).json() as any;
    expect(idle.pools.prefill.readyEndpoints).toBe(1);
    expect(idle.pools.prefill.waitingPromptTokens).toBe(0);

    // WHEN eight long prompts (disaggregated: prefilled on the prefill pool) arrive at once
    const longPrompts = Promise.all(Array.from({ length: 8 }, (_, i) =>
      client.completions.create({ model: MODEL, prompt: prompt(`long${i}-`, 3000), max_tokens: 2 })));
    const duringPrefill = await sampleScaling(router, longPrompts);
    await longPrompts;
    // THEN the prefill pool's waiting prompt tokens, predicted TTFT and pressure rose above idle
    const maxOf = (rs: any[], pool: string, key: string) => Math.max(...rs.map((r) => r.pools[pool][key]));
    expect(maxOf(duringPrefill, 'prefill', 'waitingPromptTokens')).toBeGreaterThan(0);
    expect(maxOf(duringPrefill, 'prefill', 'predictedTtftSeconds')).toBeGreaterThan(idle.pools.prefill.predictedTtftSeconds);
    expect(maxOf(duringPrefill, 'prefill', 'pressure')).toBeGreaterThan(idle.pools.prefill.pressure);

    // WHEN 32 short prompts (decode-only) stream long answers (seconds) at once
    const quietDecode = await (await fetch(`${router.url}/scaling`)).json() as any;
    const streams = Promise.all(Array.from({ length: 32 }, async (_, i) => {
      const s = await client.completions.create({ model: MODEL, prompt: `short ${i}`, max_tokens: 1000, stream: true });
      for await (const chunk of s) void chunk;
    }));
    const duringDecode = await sampleScaling(router, streams);
    await streams;
    // THEN the decode pool's running sequences, predicted TPOT and pressure rose above where they were
    expect(maxOf(duringDecode, 'decode', 'runningSequences')).toBeGreaterThan(quietDecode.pools.decode.runningSequences);
    expect(maxOf(duringDecode, 'decode', 'predictedTpotSeconds')).toBeGreaterThan(quietDecode.pools.decode.predictedTpotSeconds);
    expect(maxOf(duringDecode, 'decode', 'pressure')).toBeGreaterThan(quietDecode.pools.decode.pressure);
    // AND /metrics carries the same signals for Prometheus (an HPA on external metrics)
    const m = await metrics(router);
    for (const pool of ['prefill', 'decode']) {
      expect(m.has(`disagg_router_pool_slo_pressure{pool="${pool}"}`)).toBe(true);
      expect(m.get(`disagg_router_pool_ready_endpoints{pool="${pool}"}`)).toBe(1);
    }
  });
});
