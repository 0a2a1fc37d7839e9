// Per-rank routing behind one "pod": sim-workers stand in for the data-parallel ranks of an
// expert-parallel pod as vLLM runs them with per-rank API servers (same address, consecutive HTTP
// ports; each rank's KV events on the configured port + its rank, batches stamped with
// data_parallel_rank). The router discovers every rank of the pod from one DNS name and a port
// range, routes P/D legs between a prefill rank and a decode rank, accounts load per rank, sends a
// repeated prompt back to the rank that holds its blocks, and labels its metrics with each rank.
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { CONFIG, describeIfRoles, EngineProcess, engineProcesses, metrics, ofEndpoint, prompt, startEngine, total, waitFor } from './util';
import { consecutiveFreePorts } from '../../src/cli/local/processes';

const describeIfBuilt = describeIfRoles('data-parallel rank tests', 'router', 'sim-worker');
const MODEL = 'sim-model';

jest.setTimeout(120_000);

const start = engineProcesses(30_000);

/**
 * One pod of `ranks` ranks of `role`: HTTP ports http..http+ranks-1, KV events configured as
 * `kvConfigured` (vLLM's kv-events endpoint port) with ranks firstRank.. (so each binds
 * kvConfigured + its rank, as vLLM's offset_endpoint_port does).
 */
async function pod(role: string, ranks: number, http: number, kvConfigured: number, firstRank: number): Promise<EngineProcess[]> {
  return Promise.all(Array.from({ length: ranks }, (_, j) => start(['sim-worker', '--config', CONFIG, '--role', role,
    '--port', String(http + j), '--model-name', MODEL, '--speedup', '200', '--kv-blocks', '4096',
    '--kv-events-port', String(kvConfigured), '--data-parallel-rank', String(firstRank + j), '--seed', String(j + 1)])));
}

/** Whether `port` can be bound on 127.0.0.1 (closed again at once). */
async function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

async function complete(router: EngineProcess, text: string): Promise<{ decode: string; prefill: string | null; cached: number }> {
  const r = await fetch(`${router.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, prompt: text, max_tokens: 3 }),
  });
  expect(r.status).toBe(200);
  await r.json();
  return {
    decode: r.headers.get('x-disagg-endpoint')!,
    prefill: r.headers.get('x-disagg-prefill-endpoint'),
    cached: Number(r.headers.get('x-disagg-cached-blocks') ?? 0),
  };
}

describeIfBuilt('router with per-rank endpoints of expert-parallel pods', () => {
  test('every rank of a pod is an endpoint: P/D legs, KV events, prefix hits and load per rank', async () => {
    // GIVEN a prefill pod of 2 ranks and a decode pod of 4 ranks that is the second pod of its group
    // (ranks 4-7, configured with KV port base - 4 as the expert-parallel pool's pod script does)
    const [ph, pk] = [await consecutiveFreePorts(2), await consecutiveFreePorts(2)];
    const [dh, dk] = [await consecutiveFreePorts(4), await consecutiveFreePorts(4)];
    const prefill = await pod('prefill', 2, ph, pk, 0);
    const decode = await pod('decode', 4, dh, dk - 4, 4);
    // AND the router discovering each pod by name and port range, KV events of ports[j] on kv-port + j
    const router = await start(['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL,
      '--policy', 'llm-d', '--prefix-source', 'index', '--min-uncached-tokens', '64',
      '--health-interval-ms', '200', '--scrape-interval-ms', '200',
      '--dns-pool', `role=prefill,pool=prefill,host=127.0.0.1,ports=${ph}-${ph + 1},kv-port=${pk},refresh=1`,
      '--dns-pool', `role=decode,pool=decode,host=127.0.0.1,ports=${dh}-${dh + 3},kv-port=${dk},refresh=1`]);
    await waitFor(async () => {
      const m = await metrics(router);
      return total(m, 'disagg_router_endpoint_healthy') === 6;
    }, 20_000, 'six healthy rank endpoints');
    const rankEndpoint = (http: number, j: number) => `127.0.0.1:${http + j}`;
    const decodeEndpoints = decode.map((_, j) => rankEndpoint(dh, j));
    const prefillEndpoints = prefill.map((_, j) => rankEndpoint(ph, j));
    // (each rank's KV-event subscription has joined: ZeroMQ drops what a publisher sends before a
    // subscriber's connection completes, so a rank is sent a short prompt of its own, directly, until
    // the router has learned its rank from a batch; on a loaded machine the first may be lost)
    let warm = 0;
    await waitFor(async () => {
      const m = await metrics(router);
      const unknown = [...prefill, ...decode].filter((w) =>
        ofEndpoint(m, 'disagg_router_endpoint_data_parallel_rank', `127.0.0.1:${w.port}`) === undefined);
      for (const w of unknown) {
        const r = await fetch(`${w.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: MODEL, prompt: prompt(`warm${warm++}w`, 32, 36), max_tokens: 1 }),
        });
        expect(r.status).toBe(200);
        await r.json();
      }
      return unknown.length === 0;
    }, 20_000, 'every rank subscribed');
    const baseEntries = total(await metrics(router), 'disagg_router_kv_index_entries');
    const baseSuccess = await Promise.all(prefill.map(async (w) => total(await metrics(w), 'vllm:request_success_total')));

    // WHEN 12 distinct long prompts go through the router at once, each once
    const texts = Array.from({ length: 12 }, (_, i) => prompt(`topic${i}w`, 256, 36));
    const first = new Map<string, { decode: string; prefill: string | null }>();
    (await Promise.all(texts.map((t) => complete(router, t)))).forEach((r, i) => first.set(texts[i], r));
    // (the ranks' KV events reach the router)
    await waitFor(async () => total(await metrics(router), 'disagg_router_kv_index_entries') >= baseEntries + 12 * 16, 5_000, 'KV events');
    // THEN each was disaggregated: a prefill rank's leg, then a decode rank pulling its KV
    for (const r of first.values()) {
      expect(prefillEndpoints).toContain(r.prefill);
      expect(decodeEndpoints).toContain(r.decode);
    }
    // AND the ranks share the work: every decode rank and every prefill rank served some
    const used = new Set([...first.values()].flatMap((r) => [r.decode, r.prefill]));
    for (const e of [...decodeEndpoints, ...prefillEndpoints]) expect(used).toContain(e);

    // WHEN each prompt is sent again
    for (const [text, r] of first) {
      const again = await complete(router, text);
      // THEN it goes back to the decode rank that holds its blocks (not just to the pod), found
      // cached there, and stays on it alone (below the disaggregation threshold once cached)
      expect(again.decode).toBe(r.decode);
      expect(again.cached).toBeGreaterThanOrEqual(15);
      expect(again.prefill).toBeNull();
    }

    // AND the router labels each endpoint with the rank its KV events named (global ranks: 0-1 on the
    // prefill pod, 4-7 on the decode pod) and accounts legs and predicted hits per rank
    const m = await metrics(router);
    prefillEndpoints.forEach((e, j) => expect(ofEndpoint(m, 'disagg_router_endpoint_data_parallel_rank', e)).toBe(j));
    decodeEndpoints.forEach((e, j) => expect(ofEndpoint(m, 'disagg_router_endpoint_data_parallel_rank', e)).toBe(4 + j));
    expect(total(m, 'disagg_router_kv_batches_rank_mismatch_total')).toBe(0);
    for (const [j, e] of decodeEndpoints.entries()) {
      const mine = [...first.values()].filter((r) => r.decode === e).length;
      // one decode leg per prompt and one per repeat
      expect(ofEndpoint(m, 'disagg_router_endpoint_requests_total', e)).toBe(2 * mine);
      expect(ofEndpoint(m, 'disagg_router_endpoint_predicted_prefix_hit_tokens_total', e)).toBeGreaterThanOrEqual(mine * 15 * 16);
      // the rank's own counters agree: it pulled KV once per prompt it decoded first
      expect(total(await metrics(decode[j]), 'disagg:sim_worker_kv_pulls_total')).toBe(mine);
    }
    for (const [j, e] of prefillEndpoints.entries()) {
      const mine = [...first.values()].filter((r) => r.prefill === e).length;
      expect(ofEndpoint(m, 'disagg_router_endpoint_requests_total', e)).toBe(mine);
      expect(total(await metrics(prefill[j]), 'vllm:request_success_total') - baseSuccess[j]).toBe(mine);
    }
  });

  test('a static endpoint configured with its rank drops KV events that name another rank', async () => {
    // GIVEN two decode ranks whose KV-event addresses are crossed in the router's configuration
    const [http, kv] = [await consecutiveFreePorts(2), await consecutiveFreePorts(2)];
    const workers = await pod('decode', 2, http, kv, 0);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dp-ranks-')), 'router.json');
    fs.writeFileSync(file, JSON.stringify({
      router: { servedModelName: MODEL },
      policy: { name: 'least-loaded', prefixSource: 'index' },
      pools: [{ name: 'decode', role: 'both' }],
      endpoints: workers.map((w, j) => ({ pool: 'decode', url: w.url, kvEventsEndpoint: `tcp://127.0.0.1:${kv + 1 - j}`, dataParallelRank: j })),
    }));
    const router = await start(['router', '--config', file, '--host', '127.0.0.1', '--port', '0', '--health-interval-ms', '200']);
    await waitFor(async () => (await fetch(`${router.url}/ready`)).status === 200, 15_000, 'router ready');
    // WHEN both ranks store blocks
    for (let i = 0; i < 4; i++) await complete(router, prompt(`crossed${i}w`, 128, 36));
    // THEN every batch names the other rank: none reaches the index, each is counted, and the log says why
    await waitFor(async () => total(await metrics(router), 'disagg_router_kv_batches_rank_mismatch_total') >= 4, 5_000, 'mismatched batches');
    const m = await metrics(router);
    expect(total(m, 'disagg_router_kv_index_entries')).toBe(0);
    workers.forEach((w, j) => expect(ofEndpoint(m, 'disagg_router_endpoint_data_parallel_rank', `127.0.0.1:${w.port}`)).toBe(j));
    expect(router.stderr()).toMatch(/KV events of 127\.0\.0\.1:\d+ name data-parallel rank 1, not its rank 0: dropped/);
    // AND a rank outside 0..65535 in the file is refused with the field named
    fs.writeFileSync(file, JSON.stringify({
      router: { servedModelName: MODEL },
      policy: { name: 'least-loaded' },
      pools: [{ name: 'decode', role: 'both' }],
      endpoints: [{ pool: 'decode', url: workers[0].url, dataParallelRank: -1 }],
    }));
    const bad = await startEngine(['router', '--config', file, '--host', '127.0.0.1', '--port', '0']).catch((e: Error) => e.message);
    expect(bad).toMatch(/'endpoints\[0\]\.dataParallelRank' \(-1\) must be a whole number in 0\.\.65535/);
  });

  test('sim-worker --data-parallel-rank: the KV-event port is offset by the rank, as vLLM does, and checked', async () => {
    const [http, kv] = [await consecutiveFreePorts(1), await consecutiveFreePorts(8)];
    await start(['sim-worker', '--config', CONFIG, '--port', String(http), '--kv-events-port', String(kv), '--data-parallel-rank', '5']);
    // kv + 5 is taken (its publisher), kv itself is not
    expect(await bindable(kv + 5)).toBe(false);
    expect(await bindable(kv)).toBe(true);
    const bad = await startEngine(['sim-worker', '--config', CONFIG, '--port', '0', '--kv-events-port', '65530',
      '--data-parallel-rank', '9']).catch((e: Error) => e.message);
    expect(bad).toMatch(/'--kv-events-port' \(65530\) plus '--data-parallel-rank' \(9\) exceeds 65535; use a port <= 65526/);
  });
});
