// A router that restarts warm (issue 35): after a kill -9 under load, the restarted router routes
// requests to the worker that holds their prefix as often as before, from its first requests on,
// because it rebuilt its KV-block index from the workers' replay buffers (vLLM's replay socket,
// the sim-worker's --kv-events-replay-port) or from a live peer router's snapshot (--peer-port,
// --peers). "Holds their prefix" is what the worker says: usage.prompt_tokens_details.cached_tokens
// > 0. A cold router (today's) starts with an empty index and sends the first request of each
// prefix wherever load says: about half of them miss with two workers.
import * as net from 'net';
import { CONFIG, describeIfRoles, EngineProcess, engineProcesses, freePort, metrics, prompt, total, waitFor } from './util';
import { consecutiveFreePorts } from '../../src/cli/local/processes';

const describeIfBuilt = describeIfRoles('warm restart tests', 'router', 'sim-worker');
const MODEL = 'sim-model';
const PREFIXES = 24;

jest.setTimeout(120_000);

const start = engineProcesses(30_000);

interface Routed { workerHit: boolean; routerCached: number }

async function complete(router: EngineProcess, text: string): Promise<Routed> {
  const r = await fetch(`${router.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, prompt: text, max_tokens: 2 }),
  });
  expect(r.status).toBe(200);
  const body: any = await r.json();
  return {
    workerHit: (body.usage?.prompt_tokens_details?.cached_tokens ?? 0) > 0,
    routerCached: Number(r.headers.get('x-disagg-cached-blocks') ?? 0),
  };
}

/** One request per shared prefix (a distinct tail each round); the share the worker had cached. */
async function round(router: EngineProcess, n: number): Promise<number> {
  let hits = 0;
  for (let k = 0; k < PREFIXES; k++) {
    const r = await complete(router, `${prompt(`doc${k}w`, 90)} question ${n} about ${k}`);
    if (r.workerHit) hits++;
  }
  return hits / PREFIXES;
}

/** Waits until the router's index stops growing (the workers' KV events have arrived). */
async function settled(router: EngineProcess): Promise<number> {
  let last = -1;
  let now = 0;
  await waitFor(async () => {
    now = total(await metrics(router), 'disagg_router_kv_index_entries');
    const same = now === last && now > 0;
    last = now;
    return same;
  }, 10_000, 'the KV index to settle');
  return now;
}

async function worker(http: number, kv: number, replay: number | undefined, seed: number): Promise<EngineProcess> {
  return start(['sim-worker', '--config', CONFIG, '--port', String(http), '--model-name', MODEL, '--speedup', '200',
    '--kv-blocks', '8192', '--kv-events-port', String(kv), '--seed', String(seed),
    ...(replay !== undefined ? ['--kv-events-replay-port', String(replay), '--kv-events-buffer-steps', '10000'] : [])]);
}

function routerArgs(extra: string[]): string[] {
  return ['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL, '--policy', 'kv-aware',
    '--prefix-source', 'index', '--health-interval-ms', '200', '--scrape-interval-ms', '200', ...extra];
}

async function ready(router: EngineProcess): Promise<void> {
  await waitFor(async () => (await fetch(`${router.url}/ready`)).status === 200, 15_000, 'router ready');
}

/**
 * Kills `router` (SIGKILL), starts `args` again and measures the first round of requests after
 * it is ready and its warm start is over (or 3 s passed); returns the share, the restarted router
 * and how long from the restart to the end of that round.
 */
async function killAndRestart(router: EngineProcess, args: string[], source: string): Promise<[number, EngineProcess, number]> {
  router.proc.kill('SIGKILL');
  await router.exited;
  const t0 = Date.now();
  const again = await start(args);
  await ready(again);
  await waitFor(async () => {
    const m = await metrics(again);
    return (m.get(`disagg_router_kv_warm_start_blocks_total{source="${source}"}`) ?? 0) > 0 || Date.now() - t0 > 3_000;
  }, 10_000, 'the warm start');
  const share = await round(again, 100);
  return [share, again, Date.now() - t0];
}

describeIfBuilt('a router restarted with kill -9', () => {
  test('rebuilds its index from the workers\' replay buffers and routes as before within 10 s', async () => {
    // GIVEN two sim-workers with replay sockets (vLLM's KVEventsConfig.replay_endpoint), found by
    // the router through DNS on consecutive ports, replay sockets on replay-port + j
    const http = await consecutiveFreePorts(2);
    const kv = await consecutiveFreePorts(2);
    const replay = await consecutiveFreePorts(2);
    await Promise.all([0, 1].map((j) => worker(http + j, kv + j, replay + j, j + 1)));
    const args = routerArgs(['--dns-pool',
      `role=both,pool=workers,host=127.0.0.1,ports=${http}-${http + 1},kv-port=${kv},replay-port=${replay},refresh=1`]);
    let router = await start(args);
    await ready(router);
    // AND load with shared prefixes: a first round stores them, the second finds them
    await round(router, 0);
    await settled(router);
    const before = await round(router, 1);
    expect(before).toBeGreaterThan(0.9);
    await settled(router);
    // WHEN the router is killed and restarted
    const [after, again, ms] = await killAndRestart(router, args, 'replay');
    router = again;
    // THEN its first requests find their prefix as often as before, within 10 s of the restart
    expect(after).toBeGreaterThanOrEqual(before - 0.05);
    expect(ms).toBeLessThan(10_000);
    const m = await metrics(router);
    expect(m.get('disagg_router_kv_warm_start_blocks_total{source="replay"}')).toBeGreaterThan(0);
    expect(total(m, 'disagg_router_kv_warm_start_replays_total')).toBeGreaterThanOrEqual(2);
    // AND its metrics say it knew the cache the workers used: the hits it predicted are the hits
    // the workers reported (disagg_router_endpoint_known_hit_ratio, per endpoint, from the scrapes)
    await waitFor(async () => {
      const ratios = [...(await metrics(router))].filter(([k]) => k.startsWith('disagg_router_endpoint_known_hit_ratio{'));
      return ratios.length > 0 && ratios.every(([, v]) => v >= 0.5);
    }, 5_000, 'known hit ratios of 0.5 or more (a cold router: about 0)');
  });

  test('loads a live peer router\'s snapshot (workers without replay) and routes as before within 10 s', async () => {
    // GIVEN two sim-workers without replay sockets, and two routers over them, each serving its
    // index on a peer port of its own (not the API port)
    const http = [await freePort(), await freePort()];
    const kv = [await freePort(), await freePort()];
    await Promise.all([0, 1].map((j) => worker(http[j], kv[j], undefined, j + 11)));
    const endpoints = [0, 1].flatMap((j) => ['--endpoint', `role=both,url=http://127.0.0.1:${http[j]},kv=tcp://127.0.0.1:${kv[j]}`]);
    const [peerA, peerB] = [await freePort(), await freePort()];
    const argsA = routerArgs([...endpoints, '--peer-port', String(peerA), '--peers', `127.0.0.1:${peerB}`]);
    let a = await start(argsA);
    const b = await start(routerArgs([...endpoints, '--peer-port', String(peerB), '--peers', `127.0.0.1:${peerA}`]));
    await Promise.all([ready(a), ready(b)]);
    // (each router's subscriptions are up: ZeroMQ drops what is published before a subscriber joins)
    await waitFor(async () => {
      await round(a, -1);
      return total(await metrics(b), 'disagg_router_kv_index_entries') > 0 && total(await metrics(a), 'disagg_router_kv_index_entries') > 0;
    }, 20_000, 'both routers subscribed');
    // AND load with shared prefixes through router A
    await round(a, 0);
    await settled(b);
    const before = await round(a, 1);
    expect(before).toBeGreaterThan(0.9);
    await settled(b);
    // WHEN A is killed and restarted with B as its peer
    const [after, again, ms] = await killAndRestart(a, argsA, 'peer');
    a = again;
    // THEN A loaded B's snapshot and its first requests find their prefix as often as before
    expect(after).toBeGreaterThanOrEqual(before - 0.05);
    expect(ms).toBeLessThan(10_000);
    const m = await metrics(a);
    expect(m.get('disagg_router_kv_warm_start_blocks_total{source="peer"}')).toBeGreaterThan(0);
    // AND the snapshot is not on the API port
    expect((await fetch(`${a.url}/snapshot`)).status).toBe(404);
    const snap = await fetch(`http://127.0.0.1:${peerA}/snapshot`);
    expect(snap.status).toBe(200);
    expect(Buffer.from(await snap.arrayBuffer()).subarray(0, 4).toString()).toBe('DGPS');
  });

  test('a hostile or broken peer means a cold start and a log line, never a crash or a hang', async () => {
    // GIVEN fake peers: one claims a huge snapshot, one sends bytes that are no snapshot, one never answers
    const answers = [
      'HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\nDGPS',
      'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nNOTASNAP',
      null,
    ];
    const sockets: net.Socket[] = [];
    const servers = await Promise.all(answers.map((answer) => new Promise<net.Server>((resolve) => {
      const srv = net.createServer((c) => {
        sockets.push(c);
        c.on('error', () => undefined);
        if (answer !== null) c.end(answer);
      });
      srv.listen(0, '127.0.0.1', () => resolve(srv));
    })));
    try {
      const http = await freePort();
      const kv = await freePort();
      await worker(http, kv, undefined, 21);
      for (const srv of servers) {
        // WHEN a router starts with it as its peer
        const port = (srv.address() as net.AddressInfo).port;
        const started = Date.now();
        const r = await start(routerArgs(['--endpoint', `role=both,url=http://127.0.0.1:${http},kv=tcp://127.0.0.1:${kv}`,
          '--peers', `127.0.0.1:${port}`, '--peer-timeout-ms', '500']));
        // THEN it serves, within about its peer timeout, with an empty index and says why
        await ready(r);
        expect(Date.now() - started).toBeLessThan(8_000);
        expect(r.stderr()).toMatch(/peers: no snapshot loaded, starting with an empty KV index \(127\.0\.0\.1:\d+: (snapshot larger than|bad_magic|timed out reading)/);
        expect((await metrics(r)).get('disagg_router_kv_warm_start_blocks_total{source="peer"}')).toBe(0);
        r.proc.kill('SIGKILL');
        await r.exited;
      }
    } finally {
      for (const c of sockets) c.destroy();
      await Promise.all(servers.map((srv) => new Promise((resolve) => srv.close(resolve))));
    }
  });
});
