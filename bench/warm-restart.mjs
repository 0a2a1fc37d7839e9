// bench/warm-restart.mjs: the share of requests routed to a worker that holds their prefix, second
// by second, before and after a router is killed (SIGKILL) and restarted under load, for three
// restarts: cold (no replay, no peer: today's), replay (the workers' replay sockets, vLLM's
// KVEventsConfig.replay_endpoint) and peer (a second router's snapshot, --peer-port / --peers,
// workers without replay). "Holds their prefix": the worker's usage.prompt_tokens_details.cached_tokens
// > 0 (what the worker found, not what the router believed); the router's X-Disagg-Cached-Blocks
// > 0 share is printed beside it.
// Usage: node bench/warm-restart.mjs ENGINE   (env: PREFIXES 2000, CONCURRENCY 4, RATE 200, BEFORE_S 6,
// AFTER_S 12). The measured load is paced to RATE requests/s, each request one of PREFIXES shared
// prefixes (uniformly drawn) with a tail of its own; every prefix is sent once before (warm-up).
import { spawn } from 'node:child_process';
import net from 'node:net';

const engine = process.argv[2] ?? 'engine/build/disagg-engine';
const CONFIG = 'engine/examples/llama-3.3-70b-p5en.json';
const MODEL = 'sim-model';
const PREFIXES = Number(process.env.PREFIXES ?? 2000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 4);
const RATE = Number(process.env.RATE ?? 200);  // requests per second of the measured load, at most
const BEFORE_S = Number(process.env.BEFORE_S ?? 6);
const AFTER_S = Number(process.env.AFTER_S ?? 12);

const procs = [];
function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}
function start(args) {
  const proc = spawn(engine, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  procs.push(proc);
  let err = '';
  proc.stderr.on('data', (d) => { err += d.toString(); });
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${args[0]} did not start: ${err}`)), 20_000);
    proc.stdout.on('data', (d) => {
      out += d.toString();
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) { clearTimeout(timer); resolve({ proc, exited, url: `http://127.0.0.1:${m[1]}`, err: () => err }); }
    });
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function ready(r) {
  let last = '';
  for (let i = 0; i < 300; i++) {
    try {
      const res = await fetch(`${r.url}/ready`);
      if (res.status === 200) return;
      last = await res.text();
    } catch (e) { last = String(e); }
    await sleep(50);
  }
  throw new Error(`router not ready: ${last}\n${r.err().slice(-2000)}`);
}
function words(k) {
  return Array.from({ length: 90 }, (_, i) => `doc${k}w${i}`).join(' ');
}

// Closed-loop load through `target()` (the router of the moment); every answer is recorded with
// its time. Requests to a router that is down fail and are not counted.
function load(target, stop, log) {
  let seq = 0;
  let rng = 12345;  // xorshift32: seeded, uniform enough over the prefixes
  const next = () => { rng ^= rng << 13; rng >>>= 0; rng ^= rng >>> 17; rng ^= rng << 5; rng >>>= 0; return rng; };
  const one = async () => {
    while (!stop.done) {
      const k = next() % PREFIXES;
      const r = target();
      try {
        const res = await fetch(`${r.url}/v1/completions`, {
          method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: MODEL, prompt: `${words(k)} question ${seq++}`, max_tokens: 2 }),
        });
        const body = await res.json();
        if (res.status !== 200) continue;
        log.push({ t: Date.now(), hit: (body.usage?.prompt_tokens_details?.cached_tokens ?? 0) > 0,
          believed: Number(res.headers.get('x-disagg-cached-blocks') ?? 0) > 0 });
      } catch { await sleep(20); }
      await sleep((1000 * CONCURRENCY) / RATE);
    }
  };
  return Promise.all(Array.from({ length: CONCURRENCY }, one));
}

async function scenario(name) {
  const workers = [];
  const kv = [await freePort(), await freePort()];
  const replay = [await freePort(), await freePort()];
  for (let j = 0; j < 2; j++) {
    workers.push(await start(['sim-worker', '--config', CONFIG, '--port', '0', '--model-name', MODEL, '--speedup', '1000',
      '--kv-blocks', '65536', '--kv-events-port', String(kv[j]), '--seed', String(j + 1),
      ...(name.startsWith('replay') ? ['--kv-events-replay-port', String(replay[j]), '--kv-events-buffer-steps', String(name === 'replay' ? 10_000 : 1_000)] : [])]));
  }
  const endpoints = workers.flatMap((w, j) => ['--endpoint',
    `role=both,url=${w.url},kv=tcp://127.0.0.1:${kv[j]}${name.startsWith('replay') ? `,replay=tcp://127.0.0.1:${replay[j]}` : ''}`]);
  const common = ['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL, '--policy', 'kv-aware',
    '--prefix-source', 'index', '--health-interval-ms', '200', '--scrape-interval-ms', '200', ...endpoints];
  const [peerA, peerB] = [await freePort(), await freePort()];
  const argsA = name === 'peer' ? [...common, '--peer-port', String(peerA), '--peers', `127.0.0.1:${peerB}`] : common;
  let router = await start(argsA);
  const peer = name === 'peer' ? await start([...common, '--peer-port', String(peerB)]) : null;
  await ready(router);
  if (peer) await ready(peer);
  const log = [];
  const stop = { done: false };
  // Warm-up: every prefix once (unmeasured), then the measured load.
  const warm = [];
  await Promise.all(Array.from({ length: CONCURRENCY }, async (_, c) => {
    for (let k = c; k < PREFIXES; k += CONCURRENCY) {
      await fetch(`${router.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, prompt: `${words(k)} warm`, max_tokens: 2 }) }).then((r) => r.json()).then(() => warm.push(k));
    }
  }));
  await sleep(500);
  const running = load(() => router, stop, log);
  await sleep(BEFORE_S * 1000);
  const killed = Date.now();
  router.proc.kill('SIGKILL');
  await router.exited;
  router = await start(argsA);
  await ready(router);
  const back = Date.now();
  await sleep(AFTER_S * 1000);
  stop.done = true;
  await running;
  for (const p of procs.splice(0)) p.kill('SIGKILL');
  await sleep(300);
  const share = (xs, key) => (xs.length ? xs.filter((x) => x[key]).length / xs.length : NaN);
  const beforeLog = log.filter((x) => x.t < killed && x.t >= killed - BEFORE_S * 1000 + 1000);
  const bins = [];
  for (let s = 0; s < AFTER_S; s++) {
    const xs = log.filter((x) => x.t >= back + s * 1000 && x.t < back + (s + 1) * 1000);
    bins.push({ hit: share(xs, 'hit'), believed: share(xs, 'believed'), n: xs.length });
  }
  const pre = share(beforeLog, 'hit');
  const within = bins.findIndex((b) => b.hit >= pre - 0.05);
  const first100 = log.filter((x) => x.t >= back).slice(0, 100);
  const rate = log.filter((x) => x.t >= back).length / AFTER_S;
  return { name, rate, pre, preBelieved: share(beforeLog, 'believed'), bins, within, restartMs: back - killed,
    first100: share(first100, 'hit') };
}

const results = [];
// replay: vLLM's default buffer_steps (10,000 batches: this run's whole history); replay-1k:
// --kv-events-buffer-steps 1000, a buffer shorter than the history (blocks stored before it began
// are not in it, nor can their children be keyed).
for (const name of (process.env.SCENARIOS ?? 'cold,replay,replay-1k,peer').split(',')) results.push(await scenario(name));
const pct = (x) => (Number.isNaN(x) ? '-' : `${(100 * x).toFixed(0)}%`);
console.log(`Share of requests whose worker held their prefix (cached_tokens > 0), ${PREFIXES} prefixes, concurrency ${CONCURRENCY} paced to ${RATE} requests/s (${results.map((r) => `${r.name} ${r.rate.toFixed(0)}/s`).join(', ')} after the restart), 2 sim-workers; kill -9 of the router, restart, ready after the ms shown.`);
console.log();
console.log(`| restart | before | first 100 after | ${Array.from({ length: AFTER_S }, (_, s) => `${s}-${s + 1} s`).join(' | ')} | back within 5% |`);
console.log(`|---|---:|---:|${Array.from({ length: AFTER_S }, () => '---:').join('|')}|---:|`);
for (const r of results) {
  console.log(`| ${r.name} (ready in ${r.restartMs} ms) | ${pct(r.pre)} | ${pct(r.first100)} | ${r.bins.map((b) => pct(b.hit)).join(' | ')} | ${r.within < 0 ? `not in ${AFTER_S} s` : `${r.within + 1} s`} |`);
}
console.log();
console.log(`Router's belief (X-Disagg-Cached-Blocks > 0), same requests:`);
console.log();
console.log(`| restart | before | ${Array.from({ length: AFTER_S }, (_, s) => `${s}-${s + 1} s`).join(' | ')} |`);
console.log(`|---|---:|${Array.from({ length: AFTER_S }, () => '---:').join('|')}|`);
for (const r of results) console.log(`| ${r.name} | ${pct(r.preBelieved)} | ${r.bins.map((b) => pct(b.believed)).join(' | ')} |`);
process.exit(0);
