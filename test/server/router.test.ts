// End to end: `disagg-engine router` in front of real `disagg-engine sim-worker` processes on
// loopback, driven by the official `openai` npm SDK (streaming and not) and curl for raw HTTP
// errors. Covers the OpenAI front, KV-event-fed prefix routing, the P/D handshake on the wire
// (prefill worker sees a prefill-only request, decode worker a remote-prefill one), prefill failure
// fallback, and a worker killed mid-stream (retries before the first byte, clear errors after it,
// ejection and recovery, every request accounted for).
import * as http from 'http';
import * as net from 'net';
import OpenAI from 'openai';
import { CONFIG, curl, describeIfRoles, EngineProcess, freePort, metrics, prompt, startEngine, total, waitFor } from './util';

const describeIfBuilt = describeIfRoles('router end-to-end tests', 'router', 'sim-worker');
const MODEL = 'llama-3.3-70b';

jest.setTimeout(120_000);

type Proc = EngineProcess;

const started: Proc[] = [];

/** Starts `disagg-engine <args>` and waits for its "listening on" line (test/server/util.ts). */
async function startProc(args: string[]): Promise<Proc> {
  const p = await startEngine(args);
  started.push(p);
  return p;
}

interface WorkerOptions {
  readonly role?: string;
  readonly port?: number;
  readonly kvPort?: number;
  readonly extra?: string[];
}

async function startWorker(o: WorkerOptions = {}): Promise<Proc> {
  const args = ['sim-worker', '--config', CONFIG, '--port', String(o.port ?? 0), '--speedup', '200',
    '--role', o.role ?? 'aggregated', ...(o.extra ?? [])];
  if (o.kvPort) args.push('--kv-events-port', String(o.kvPort));
  return startProc(args);
}

async function startRouter(args: string[]): Promise<Proc> {
  const r = await startProc(['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL,
    '--health-interval-ms', '200', '--scrape-interval-ms', '200', ...args]);
  await waitFor(async () => (await fetch(`${r.url}/ready`)).status === 200, 10_000, 'router ready');
  return r;
}

async function stop(p: Proc): Promise<void> {
  if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
  await p.exited;
}

afterAll(async () => {
  await Promise.all(started.map(stop));
});

function sdk(p: Proc): OpenAI {
  return new OpenAI({ baseURL: `${p.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
}

/** Runs `body` with a loopback upstream on the port it is given: GET /health answers ok (so the
 * router finds it healthy), other GETs an empty page, and POSTs go to `onPost`. */
async function withUpstream(onPost: http.RequestListener, body: (port: number) => Promise<void>): Promise<void> {
  const upstream = http.createServer((req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end(req.url === '/health' ? 'ok' : '');
      return;
    }
    onPost(req, res);
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  try {
    await body((upstream.address() as net.AddressInfo).port);
  } finally {
    await new Promise((resolve) => upstream.close(resolve));
  }
}

/** A prompt of `words` distinct words sharing `prefix`. */
describeIfBuilt('router, aggregated pool, with the openai SDK', () => {
  let workers: Proc[];
  let router: Proc;
  let sent = 0;
  beforeAll(async () => {
    const kv = [await freePort(), await freePort()];
    workers = await Promise.all(kv.map((k) => startWorker({ kvPort: k })));
    router = await startRouter(['--policy', 'kv-aware', '--max-body-bytes', '4096', '--session-header', 'x-session-id',
      ...workers.flatMap((w, i) => ['--endpoint', `role=both,url=${w.url},kv=tcp://127.0.0.1:${kv[i]}`])]);
  });

  test('completions and chat, streaming and not, through the router', async () => {
    // GIVEN the router in front of two workers
    const client = sdk(router);
    // WHEN a completion and a streamed chat are requested
    const c = await client.completions.create({ model: MODEL, prompt: 'say something short', max_tokens: 4 });
    sent++;
    const stream = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'count to five' }], max_tokens: 6, stream: true,
    });
    sent++;
    let text = '';
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    // THEN both come back complete, as from a worker
    expect(c.object).toBe('text_completion');
    expect(c.choices[0].text.trim().split(' ')).toHaveLength(4);
    expect(c.usage!.completion_tokens).toBe(4);
    expect(chunks).toBeGreaterThanOrEqual(6);
    expect(text.trim().split(' ')).toHaveLength(6);
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
  });

  test('a repeated long prompt goes where its KV blocks are (KV events feed the index)', async () => {
    // GIVEN a long prompt served once
    const body = JSON.stringify({ model: MODEL, prompt: prompt('tenant-a-', 300), max_tokens: 2 });
    const first = await fetch(`${router.url}/v1/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    sent++;
    expect(first.status).toBe(200);
    const home = first.headers.get('x-disagg-endpoint');
    // WHEN its KV events have reached the router
    await waitFor(async () => total(await metrics(router), 'disagg_router_kv_index_entries') >= 18, 5_000, 'KV events');
    // THEN the same prompt goes to the same worker every time, and the router counts prefix hits
    for (let i = 0; i < 4; i++) {
      const again = await fetch(`${router.url}/v1/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      sent++;
      expect(again.status).toBe(200);
      expect(again.headers.get('x-disagg-endpoint')).toBe(home);
      await again.text();
    }
    const m = await metrics(router);
    expect(total(m, 'disagg_router_prefix_hit_blocks_total')).toBeGreaterThanOrEqual(4 * 18);
    expect(total(m, 'disagg_router_kv_events_total')).toBeGreaterThan(0);
    expect(total(m, 'disagg_router_decision_seconds_count')).toBeGreaterThanOrEqual(5);
  });

  test('a session header pins different prompts to one worker', async () => {
    // GIVEN two sessions WHEN each sends four unrelated short prompts
    const homes = new Map<string, Set<string | null>>();
    for (const session of ['alice', 'bob']) {
      homes.set(session, new Set());
      for (let i = 0; i < 4; i++) {
        const r = await fetch(`${router.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-session-id': session },
          body: JSON.stringify({ model: MODEL, prompt: `${session} turn ${i} ${'x'.repeat(i)}`, max_tokens: 1 }),
        });
        sent++;
        expect(r.status).toBe(200);
        await r.text();
        homes.get(session)!.add(r.headers.get('x-disagg-endpoint'));
      }
    }
    // THEN each session stayed on one worker
    expect(homes.get('alice')!.size).toBe(1);
    expect(homes.get('bob')!.size).toBe(1);
  });

  test('raw HTTP errors in the OpenAI shape (curl)', () => {
    const url = `${router.url}/v1/completions`;
    const cases: Array<[string[], number, RegExp]> = [
      [['-d', '{not json', url], 400, /not valid JSON/],
      [['-d', '{"model":3,"prompt":"x"}', url], 400, /'model' is required/],
      [['-d', '{"model":"gpt-9","prompt":"x"}', url], 404, /model `gpt-9` does not exist/],
      [['-d', `{"model":"${MODEL}"}`, url], 400, /'prompt' is required/],
      [['-d', `{"model":"${MODEL}","prompt":"x","max_tokens":0}`, url], 400, /max_tokens/],
      [['-d', JSON.stringify({ model: MODEL, prompt: 'x'.repeat(10_000) }), url], 413, /larger than the limit/],
    ];
    for (const [args, status, message] of cases) {
      const [got, body] = curl(['-H', 'content-type: application/json', ...args]);
      expect(got).toBe(status);
      const err = JSON.parse(body).error;
      expect(err.message).toMatch(message);
      expect(err.type).toBe('invalid_request_error');
    }
    sent += cases.length - 1; // the 413 is refused by the HTTP layer before the router counts it
    // AND a request naming no model is served by the base model, as vLLM serves it
    const [status, answer] = curl(['-H', 'content-type: application/json', '-d', '{"prompt":"x","max_tokens":2}', url]);
    expect(status).toBe(200);
    expect(JSON.parse(answer).model).toBe(MODEL);
    sent += 1;
    expect(curl([`${router.url}/v1/completions`])[0]).toBe(405);
    expect(curl([`${router.url}/nowhere`])[0]).toBe(404);
  });

  test('metrics: every request is counted, with the families dashboards need', async () => {
    // (a request is counted after its answer went out: the last count can trail the client)
    await waitFor(async () => total(await metrics(router), 'disagg_router_requests_total') >= sent, 5_000, 'every request counted');
    const m = await metrics(router);
    expect(total(m, 'disagg_router_requests_total')).toBe(sent);
    for (const family of ['disagg_router_ttft_seconds_count', 'disagg_router_tpot_seconds_count',
      'disagg_router_overhead_seconds_count', 'disagg_router_endpoint_inflight', 'disagg_router_endpoint_kv_usage',
      'disagg_router_routing_lock_sleeps_total']) {
      expect([...m.keys()].some((k) => k.startsWith(family))).toBe(true);
    }
    expect(m.get('disagg_router_errors_total{cause="unknown_model"}')).toBe(1);
    expect(m.get('disagg_router_errors_total{cause="bad_request"}')).toBe(4);
    // (clients that leave are counted in 'router, a client that leaves', against a slow worker: at this
    // speed-up a whole answer can be written before a loaded client reads its third chunk)
    expect(m.get('disagg_router_errors_total{cause="client_gone"}') ?? 0).toBe(0);
    expect(total(m, 'disagg_router_endpoint_healthy')).toBe(2);
    // AND upstream connections were kept alive and reused (sequential requests need no new connection)
    expect(m.get('disagg_router_upstream_connections_reused_total')).toBeGreaterThan(sent / 2);
  });
});

describeIfBuilt('router, endpoints discovered by DNS', () => {
  test('workers behind a DNS name are found, checked at once and served', async () => {
    // GIVEN two workers and a router that knows them only as DNS pools on "localhost", with
    // health checks and scrapes a minute apart: whether DNS answers before or after the health
    // loop first runs, an endpoint is checked when it is added, not a minute later
    const workers = [await startWorker(), await startWorker()];
    const router = await startRouter(['--health-interval-ms', '60000', '--scrape-interval-ms', '60000',
      ...workers.flatMap((w, i) => ['--dns-pool', `role=aggregated,host=localhost,port=${w.port},pool=p${i}`])]);
    // WHEN completions are sent through it
    const client = sdk(router);
    for (let i = 0; i < 8; i++) {
      const c = await client.completions.create({ model: MODEL, prompt: prompt(`dns${i}-`, 12), max_tokens: 2 });
      expect(c.usage!.completion_tokens).toBe(2);
    }
    // THEN both resolved endpoints are listed as healthy, and the requests went to them
    const m = await metrics(router);
    for (const [i, w] of workers.entries()) {
      const labels = `endpoint="127.0.0.1:${w.port}",pool="p${i}",role="aggregated"`;
      expect(m.get(`disagg_router_endpoint_healthy{${labels}}`)).toBe(1);
    }
    expect(total(m, 'disagg_router_endpoint_requests_total')).toBe(8);
    // AND DNS may add endpoints later, so the prefix history keeps its default size
    expect(router.stderr()).toContain('prefix history: 500000 blocks, sized for 16 endpoints');
  });
});

describeIfBuilt('router, prefill/decode pools', () => {
  test('P/D on the wire: prefill-only request on the prefill worker, remote prefill on decode', async () => {
    // GIVEN a prefill worker, a decode worker and the router disaggregating prompts >= 32 uncached tokens
    const prefill = await startWorker({ role: 'prefill' });
    const decode = await startWorker({ role: 'decode' });
    const router = await startRouter(['--policy', 'disagg', '--min-uncached-tokens', '32',
      '--endpoint', `role=prefill,url=${prefill.url}`, '--endpoint', `role=decode,url=${decode.url}`]);
    const client = sdk(router);
    // WHEN a long completion and a long streamed chat go through the router
    const { data: c, response } = await client.completions.create({
      model: MODEL, prompt: prompt('pd-', 200), max_tokens: 5,
    }).withResponse();
    const stream = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: prompt('pd-chat-', 150) }], max_tokens: 7, stream: true,
    });
    let words = 0;
    for await (const chunk of stream) words += (chunk.choices[0]?.delta?.content ?? '').split(' ').filter((w) => w).length;
    // AND a short one stays on the decode worker alone
    await client.completions.create({ model: MODEL, prompt: 'short', max_tokens: 2 });
    // THEN the answers are whole, and the router named both legs
    expect(c.choices[0].text.trim().split(' ')).toHaveLength(5);
    expect(words).toBe(7);
    expect(response.headers.get('x-disagg-endpoint')).toBe(`127.0.0.1:${decode.port}`);
    expect(response.headers.get('x-disagg-prefill-endpoint')).toBe(`127.0.0.1:${prefill.port}`);
    // AND the prefill worker generated exactly one token per disaggregated request (max_tokens 1)
    const pm = await metrics(prefill);
    expect(total(pm, 'vllm:request_success_total')).toBe(2);
    expect(total(pm, 'vllm:generation_tokens_total')).toBe(2);
    // AND the decode worker pulled KV for both (do_remote_prefill with the returned block ids)
    const dm = await metrics(decode);
    expect(total(dm, 'disagg:sim_worker_kv_pulls_total')).toBe(2);
    expect(total(dm, 'vllm:request_success_total')).toBe(3);
    const rm = await metrics(router);
    expect(rm.get('disagg_router_pd_decisions_total{reason="disaggregate"}')).toBe(2);
    expect(rm.get('disagg_router_pd_decisions_total{reason="below_threshold"}')).toBe(1);
  });

  test('a failing prefill worker: requests fall back to decode-only and still succeed', async () => {
    // GIVEN a prefill worker that answers every generation with 500 (its /health still passes)
    const prefill = await startWorker({ role: 'prefill', extra: ['--fail-rate', '1'] });
    const decode = await startWorker({ role: 'decode' });
    const router = await startRouter(['--policy', 'disagg', '--min-uncached-tokens', '32', '--eject-after', '2',
      '--endpoint', `role=prefill,url=${prefill.url}`, '--endpoint', `role=decode,url=${decode.url}`]);
    const client = sdk(router);
    // WHEN four long requests are sent
    for (let i = 0; i < 4; i++) {
      const c = await client.completions.create({ model: MODEL, prompt: prompt(`fb${i}-`, 100), max_tokens: 3 });
      // THEN each is served (decode worker prefills locally)
      expect(c.choices[0].text.trim().split(' ')).toHaveLength(3);
    }
    const rm = await metrics(router);
    expect(total(rm, 'disagg_router_prefill_fallbacks_total')).toBeGreaterThanOrEqual(2);
    // AND after two failures the prefill worker is ejected, so later requests skip it
    expect(rm.get('disagg_router_pd_decisions_total{reason="no_prefill_endpoint"}')).toBeGreaterThanOrEqual(1);
    expect(total(rm, 'disagg_router_endpoint_ejections_total')).toBe(1);
    expect(total(await metrics(decode), 'disagg:sim_worker_kv_pulls_total')).toBe(0);
  });
});

describeIfBuilt('router, an upstream that answers in pieces', () => {
  // The router sends a one-piece answer from the upstream's buffer and gathers one that comes in
  // pieces: both must reach the client byte for byte.
  test('non-streaming answers framed by length or by chunks, in one piece or several, arrive whole', async () => {
    // GIVEN an OpenAI-shaped upstream whose answer to prompt "<framing> <pieces>" is a 40 KiB JSON
    // body (above the router's 16 KiB read size) written in that many pieces, 20 ms apart
    const answer = (tag: string) => JSON.stringify({ id: tag, object: 'text_completion', choices: [{ index: 0, text: `${tag}:${'x'.repeat(40_000)}` }] });
    await withUpstream((req, res) => {
      let raw = '';
      req.on('data', (d) => { raw += d; });
      req.on('end', () => {
        const [framing, count] = (JSON.parse(raw).prompt as string).split(' ');
        const body = Buffer.from(answer(`${framing}-${count}`));
        res.writeHead(200, framing === 'length' ? { 'content-type': 'application/json', 'content-length': body.length } : { 'content-type': 'application/json' });
        const n = Number(count);
        const size = Math.ceil(body.length / n);
        const write = (i: number) => {
          if (i === n) {
            res.end();
            return;
          }
          res.write(body.subarray(i * size, (i + 1) * size));
          setTimeout(() => write(i + 1), 20);
        };
        write(0);
      });
    }, async (port) => {
      const router = await startRouter(['--endpoint', `role=both,url=http://127.0.0.1:${port}`]);
      for (const framing of ['length', 'chunked']) {
        for (const pieces of [1, 3]) {
          // WHEN a client asks for it through the router
          const r = await fetch(`${router.url}/v1/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: MODEL, prompt: `${framing} ${pieces}`, max_tokens: 4 }),
          });
          // THEN it gets the upstream's bytes, exactly
          expect(r.status).toBe(200);
          expect(r.headers.get('content-type')).toBe('application/json');
          const got = await r.text();
          const want = answer(`${framing}-${pieces}`);
          expect(got.length).toBe(want.length);
          expect(got === want).toBe(true); // (a 40 KiB diff would bury the failure)
        }
      }
    });
  });
});

describeIfBuilt('router, two HTTP threads', () => {
  test('request ids are unique across the HTTP threads, and every leg is counted on its endpoint', async () => {
    // GIVEN an upstream that notes the X-Request-Id of each request, behind a two-thread router
    // (each thread takes its request ids in blocks of its own)
    const ids: string[] = [];
    await withUpstream((req, res) => {
      ids.push(String(req.headers['x-request-id']));
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'x', object: 'text_completion', choices: [] }));
      });
    }, async (port) => {
      const router = await startRouter(['--threads', '2', '--endpoint', `role=both,url=http://127.0.0.1:${port}`]);
      // WHEN 8 keep-alive connections (handed to the threads in turn) send 25 requests each
      const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
      const post = () => new Promise<number>((resolve, reject) => {
        const body = JSON.stringify({ model: MODEL, prompt: 'the same words every time', max_tokens: 4 });
        const req = http.request(`${router.url}/v1/completions`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end(body);
      });
      const statuses = await Promise.all(Array.from({ length: 8 }, async () => {
        const mine: number[] = [];
        for (let i = 0; i < 25; ++i) mine.push(await post());
        return mine;
      }));
      agent.destroy();
      // THEN every request succeeded under an id of its own
      expect(statuses.flat().filter((s) => s !== 200)).toEqual([]);
      expect(ids).toHaveLength(200);
      expect(ids.every((id) => /^disagg-\d+$/.test(id))).toBe(true);
      expect(new Set(ids).size).toBe(200);
      // AND both threads served (ids from two blocks) and the endpoint counted every request
      expect(new Set(ids.map((id) => Math.floor((Number(id.slice('disagg-'.length)) - 1) / 1024))).size).toBe(2);
      const m = await metrics(router);
      expect(total(m, 'disagg_router_endpoint_requests_total')).toBe(200);
    });
  });
});

describeIfBuilt('router, limits and shutdown', () => {
  test('a full queue answers 429 with Retry-After; a slow worker hits the request timeout (504)', async () => {
    // GIVEN one slot, no queue, and a worker that stalls each request 5 s
    const w = await startWorker({ extra: ['--stall-ms', '5000'] });
    const router = await startRouter(['--max-inflight', '1', '--max-queue', '0', '--request-timeout-ms', '1500',
      '--endpoint', `role=both,url=${w.url}`]);
    const body = JSON.stringify({ model: MODEL, prompt: 'wait for it', max_tokens: 1 });
    const post = () => fetch(`${router.url}/v1/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    // WHEN a second request arrives while the first holds the only slot (ordered by the router's own
    // gauge, not by a sleep, so a loaded machine cannot reorder them)
    const first = post();
    await waitFor(async () => (await metrics(router)).get('disagg_router_inflight_requests') === 1, 10_000, 'the first request in flight');
    const b = await post();
    const a = await first;
    // THEN the second is refused at once with 429 + Retry-After, the first times out with 504
    expect(b.status).toBe(429);
    expect(b.headers.get('retry-after')).toBe('1');
    expect(((await b.json()) as any).error.type).toBe('rate_limit_error');
    expect(a.status).toBe(504);
    expect(((await a.json()) as any).error.message).toMatch(/first_byte_timeout|timed out/);
    const m = await metrics(router);
    expect(m.get('disagg_router_errors_total{cause="queue_full"}')).toBe(1);
    expect(total(m, 'disagg_router_requests_total')).toBe(2);
    // AND with one static endpoint the prefix history is sized for one
    expect(router.stderr()).toContain('prefix history: 31250 blocks, sized for 1 endpoint ');
  });

  test('a client that leaves while queued for a slot gives its place up at once', async () => {
    // GIVEN one slot held by a request the worker stalls 5 s, and a long queue timeout
    const w = await startWorker({ extra: ['--stall-ms', '5000'] });
    const router = await startRouter(['--max-inflight', '1', '--max-queue', '4', '--queue-timeout-ms', '60000',
      '--endpoint', `role=both,url=${w.url}`]);
    const body = { model: MODEL, prompt: 'hold the slot', max_tokens: 1 };
    const holder = fetch(`${router.url}/v1/completions`, {
      method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' },
    });
    await waitFor(async () => (await metrics(router)).get('disagg_router_inflight_requests') === 1, 10_000, 'the slot taken');
    // AND a second client queued behind it
    const queued = rawRequest(router.url, { ...body, prompt: 'queued' });
    await waitFor(async () => (await metrics(router)).get('disagg_router_queued_requests') === 1, 10_000, 'a request queued');
    // WHEN that client hangs up
    queued.hangUp();
    // THEN the router drops it from the queue and counts it as client_gone while the slot is still
    // held (before the fix it stayed queued until the slot freed or its queue timeout ran out)
    await waitFor(async () => {
      const m = await metrics(router);
      return m.get('disagg_router_queued_requests') === 0 &&
        m.get('disagg_router_requests_total{route="completions",outcome="client_gone"}') === 1;
    }, 3_000, 'the queued request dropped');
    const m = await metrics(router);
    expect(m.get('disagg_router_inflight_requests')).toBe(1);
    expect(m.get('disagg_router_errors_total{cause="client_gone"}')).toBe(1);
    // AND the request holding the slot is still served
    expect((await holder).status).toBe(200);
    // AND the worker saw only that one request
    expect(total(await metrics(w), 'vllm:request_success_total')).toBe(1);
  });

  test('SIGTERM drains: in-flight streams finish, /ready fails, the process exits 0', async () => {
    const w = await startWorker({ extra: ['--speedup', '5'] });
    const router = await startRouter(['--endpoint', `role=both,url=${w.url}`]);
    // GIVEN a stream in flight
    const stream = await sdk(router).completions.create({ model: MODEL, prompt: 'drain me', max_tokens: 40, stream: true });
    let words = 0;
    let signalled = false;
    // WHEN SIGTERM arrives after the first chunk
    for await (const chunk of stream) {
      words += chunk.choices[0].text.split(' ').filter((x) => x).length;
      if (!signalled) {
        signalled = true;
        router.proc.kill('SIGTERM');
        await new Promise((r) => setTimeout(r, 50));
        // New connections are no longer accepted (the listener is closed).
        await expect(fetch(`${router.url}/ready`)).rejects.toThrow();
      }
    }
    // THEN the stream completed and the router exited cleanly
    expect(words).toBe(40);
    expect(await router.exited).toBe(0);
  });
});

describeIfBuilt('router, a worker killed mid-stream', () => {
  test('queued requests are retried elsewhere, streams end with a clear error, the worker is ejected and returns', async () => {
    // GIVEN three slow workers (so streams last seconds) behind the router
    const ports = [await freePort(), await freePort(), await freePort()];
    const slow = ['--speedup', '2'];
    const workers = await Promise.all(ports.map((p) => startWorker({ port: p, extra: slow })));
    const router = await startRouter(['--policy', 'least-loaded', '--eject-after', '1', '--eject-ms', '1000',
      ...workers.flatMap((w) => ['--endpoint', `role=both,url=${w.url}`])]);
    const victim = workers[0];
    const client = sdk(router);
    const label = `127.0.0.1:${victim.port}`;

    // WHEN 9 streams (seconds long) and 6 non-streamed requests (about a second) run, and one
    // worker is killed while all of them are in flight
    type Result = { kind: 'ok' | 'error'; endpoint: string | null; message?: string; streamed: boolean };
    let firstChunks = 0;
    const streams = Array.from({ length: 9 }, async (_, i): Promise<Result> => {
      const { data, response } = await client.completions.create({
        model: MODEL, prompt: `stream ${i} please`, max_tokens: 1500, stream: true,
      }).withResponse();
      const endpoint = response.headers.get('x-disagg-endpoint');
      let n = 0;
      try {
        for await (const chunk of data) {
          if (n++ === 0) firstChunks++;
          void chunk;
        }
        return { kind: 'ok', endpoint, streamed: true };
      } catch (e) {
        return { kind: 'error', endpoint, message: (e as Error).message, streamed: n > 0 };
      }
    });
    await waitFor(async () => firstChunks >= 9, 20_000, 'all streams flowing');
    // Non-streamed requests queue up on every worker (least-loaded spreads them) before the kill.
    const whole = Array.from({ length: 6 }, async (_, i): Promise<Result> => {
      try {
        const { data, response } = await client.completions.create({
          model: MODEL, prompt: `whole ${i}`, max_tokens: 400,
        }).withResponse();
        expect(data.choices[0].text.trim().split(' ')).toHaveLength(400);
        return { kind: 'ok', endpoint: response.headers.get('x-disagg-endpoint'), streamed: false };
      } catch (e) {
        return { kind: 'error', endpoint: null, message: (e as Error).message, streamed: false };
      }
    });
    await new Promise((r) => setTimeout(r, 300));
    victim.proc.kill('SIGKILL');
    await victim.exited;
    const results = await Promise.all([...streams, ...whole]);

    // THEN every non-streamed request succeeded (retried on a live worker when the victim died)
    const wholeResults = results.slice(9);
    expect(wholeResults.filter((r) => r.kind === 'ok')).toHaveLength(6);
    expect(wholeResults.some((r) => r.endpoint === label)).toBe(false);
    // AND streams on the victim ended with a clear error, the others completed
    const onVictim = results.slice(0, 9).filter((r) => r.endpoint === label);
    expect(onVictim.length).toBeGreaterThan(0);
    for (const r of onVictim) {
      expect(r.kind).toBe('error');
      expect(r.message).toMatch(/failed mid-stream/);
    }
    for (const r of results.slice(0, 9).filter((x) => x.endpoint !== label)) expect(r.kind).toBe('ok');
    // (least-loaded spread the non-streamed requests over all three, so some had to be retried)
    expect(total(await metrics(router), 'disagg_router_retries_total')).toBeGreaterThanOrEqual(1);

    // AND the victim is out of rotation: new requests all land elsewhere and succeed
    await waitFor(async () => (await metrics(router)).get(`disagg_router_endpoint_healthy{endpoint="${label}",pool="aggregated",role="aggregated"}`) === 0,
      5_000, 'victim marked unhealthy');
    for (let i = 0; i < 4; i++) {
      const { response } = await client.completions.create({ model: MODEL, prompt: `after ${i}`, max_tokens: 2 }).withResponse();
      expect(response.headers.get('x-disagg-endpoint')).not.toBe(label);
    }

    // AND after a restart on the same port, health checks bring it back
    workers[0] = await startWorker({ port: victim.port, extra: slow });
    await waitFor(async () => (await metrics(router)).get(`disagg_router_endpoint_healthy{endpoint="${label}",pool="aggregated",role="aggregated"}`) === 1,
      10_000, 'victim healthy again');
    const served = new Set<string | null>();
    for (let i = 0; i < 6; i++) {
      const { response } = await client.completions.create({ model: MODEL, prompt: `back ${i}`, max_tokens: 2 }).withResponse();
      served.add(response.headers.get('x-disagg-endpoint'));
    }
    expect(served.has(label)).toBe(true);

    // AND no request was silently dropped: the router counted every one, as ok or error (it counts
    // a request after its answer went out, so the last count can trail the client by a moment)
    await waitFor(async () => total(await metrics(router), 'disagg_router_requests_total') >= 9 + 6 + 4 + 6,
      5_000, 'every request counted');
    const m = await metrics(router);
    expect(total(m, 'disagg_router_requests_total')).toBe(9 + 6 + 4 + 6);
    expect(m.get('disagg_router_requests_total{route="completions",outcome="error"}')).toBe(onVictim.length);
  });
});

/** Sends a generation request with Node's http client; `hangUp()` closes the connection mid-way. */
function rawRequest(url: string, body: object): { firstData: Promise<void>; hangUp: () => void } {
  const req = http.request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } });
  const firstData = new Promise<void>((resolve, reject) => {
    req.once('response', (res) => res.once('data', () => resolve()));
    req.once('error', reject);
  });
  firstData.catch(() => { /* the hang-up ends it */ });
  req.on('error', () => { /* expected after hangUp() */ });
  req.end(JSON.stringify(body));
  return { firstData, hangUp: () => req.destroy() };
}

describeIfBuilt('router, a client that leaves', () => {
  const GONE = 'disagg_router_requests_total{route="completions",outcome="client_gone"}';
  let worker: Proc;
  let router: Proc;
  let idleKv = 0;
  let aborts = 0;
  let served = 0;
  beforeAll(async () => {
    // A slow worker: 4000 tokens take many seconds, so only an abort ends them early.
    worker = await startWorker({ extra: ['--speedup', '4'] });
    router = await startRouter(['--policy', 'least-loaded', '--endpoint', `role=both,url=${worker.url}`]);
    idleKv = (await metrics(worker)).get(`vllm:kv_cache_usage_perc{engine="0",model_name="${MODEL}"}`)!;
  });

  const abortCount = async (): Promise<number> =>
    (await metrics(worker)).get(`vllm:request_success_total{engine="0",model_name="${MODEL}",finished_reason="abort"}`) ?? -1;

  async function expectWorkerAbortedAndServing(): Promise<void> {
    // THEN within a bounded wait the worker runs nothing, counted the abort, and its KV use is idle
    aborts++;
    await waitFor(async () => {
      const m = await metrics(worker);
      return total(m, 'vllm:num_requests_running') === 0 && await abortCount() === aborts
        && m.get(`vllm:kv_cache_usage_perc{engine="0",model_name="${MODEL}"}`) === idleKv;
    }, 5_000, 'the worker to abort the request');
    const m = await metrics(worker);
    expect(m.get(`vllm:request_success_total{engine="0",model_name="${MODEL}",finished_reason="length"}`)).toBe(served);
    expect(total(m, 'vllm:generation_tokens_total')).toBeLessThan(4000 * aborts);
    // AND the worker still serves a new request through the router
    const c = await sdk(router).completions.create({ model: MODEL, prompt: 'short after abort', max_tokens: 2 });
    expect(c.choices[0].text.trim().split(' ')).toHaveLength(2);
    served++;
    await waitFor(async () => total(await metrics(worker), 'vllm:num_requests_running') === 0, 5_000, 'idle again');
  }

  test('streaming: a hang-up after the first tokens aborts the request on the worker', async () => {
    // GIVEN a streamed request for 4000 tokens through the router
    const r = rawRequest(router.url, { model: MODEL, prompt: 'a long streamed story', max_tokens: 4000, stream: true });
    // WHEN the client hangs up after the first tokens
    await r.firstData;
    r.hangUp();
    await expectWorkerAbortedAndServing();
    // AND the router counted it as client_gone
    await waitFor(async () => (await metrics(router)).get(GONE) === 1, 5_000, 'client_gone counted');
  });

  test('P/D: a hang-up during the prefill leg aborts it, and the decode leg is never sent', async () => {
    // GIVEN a P/D router whose prefill worker is slow: 16-token prefill steps at 1/20 of real time
    // (a 300-token prefill takes about 7 s; the running gauge shows it after the first step)
    const prefill = await startWorker({ role: 'prefill', extra: ['--speedup', '0.05', '--max-num-batched-tokens', '16'] });
    const decode = await startWorker({ role: 'decode' });
    const pd = await startRouter(['--policy', 'disagg', '--min-uncached-tokens', '32',
      '--endpoint', `role=prefill,url=${prefill.url}`, '--endpoint', `role=decode,url=${decode.url}`]);
    const prefillAborts = async (): Promise<number | undefined> =>
      (await metrics(prefill)).get(`vllm:request_success_total{engine="0",model_name="${MODEL}",finished_reason="abort"}`);
    expect(await prefillAborts()).toBe(0);
    // AND a long prompt, disaggregated, whose prefill is running
    const r = rawRequest(pd.url, { model: MODEL, prompt: prompt('leave-pd-', 200), max_tokens: 50 });
    await waitFor(async () => total(await metrics(prefill), 'vllm:num_requests_running') === 1, 5_000, 'the prefill to run');
    // WHEN the client hangs up 200 ms later
    await new Promise((res) => setTimeout(res, 200));
    r.hangUp();
    // THEN the prefill worker aborts its request long before the prefill would have ended
    await waitFor(async () => await prefillAborts() === 1, 3_000, 'the prefill worker to abort the request');
    const pm = await metrics(prefill);
    expect(total(pm, 'vllm:num_requests_running')).toBe(0);
    expect(pm.get(`vllm:request_success_total{engine="0",model_name="${MODEL}",finished_reason="length"}`)).toBe(0);
    // AND the router counted the request as client_gone, with no prefill failure or fallback
    await waitFor(async () => (await metrics(pd)).get(GONE) === 1, 5_000, 'client_gone counted');
    const rm = await metrics(pd);
    expect(rm.get('disagg_router_pd_decisions_total{reason="disaggregate"}')).toBe(1);
    expect(total(rm, 'disagg_router_prefill_fallbacks_total')).toBe(0);
    expect(rm.get('disagg_router_errors_total{cause="prefill_failed"}') ?? 0).toBe(0);
    // AND the decode worker never saw the request (still nothing there a moment later)
    await new Promise((res) => setTimeout(res, 300));
    const dm = await metrics(decode);
    expect(total(dm, 'vllm:request_success_total')).toBe(0);
    expect(total(dm, 'vllm:prompt_tokens_total')).toBe(0);
    expect(total(dm, 'vllm:num_requests_running') + total(dm, 'vllm:num_requests_waiting')).toBe(0);
    await Promise.all([pd, prefill, decode].map(stop));
  });

  test('non-streaming: a hang-up while the answer is pending aborts the request on the worker', async () => {
    // GIVEN a whole-body request for 4000 tokens through the router, running on the worker
    const r = rawRequest(router.url, { model: MODEL, prompt: 'a long whole story', max_tokens: 4000 });
    await waitFor(async () => total(await metrics(worker), 'vllm:num_requests_running') === 1, 5_000, 'the request to run');
    // WHEN the client hangs up 200 ms later (no byte of the answer was sent yet)
    await new Promise((res) => setTimeout(res, 200));
    r.hangUp();
    await expectWorkerAbortedAndServing();
    // AND the router counted it as client_gone
    await waitFor(async () => (await metrics(router)).get(GONE) === 2, 5_000, 'client_gone counted');
  });

  test('the openai SDK aborting a stream (AbortController) aborts the request on the worker', async () => {
    // GIVEN a long streamed completion through the router with the official SDK
    const controller = new AbortController();
    const stream = await sdk(router).completions.create(
      { model: MODEL, prompt: 'a long story for the sdk', max_tokens: 4000, stream: true },
      { signal: controller.signal });
    // WHEN the client aborts after the first chunks (the SDK ends the iteration quietly)
    let n = 0;
    try {
      for await (const chunk of stream) {
        void chunk;
        if (++n === 3) controller.abort();
      }
    } catch { /* some SDK versions raise an abort error instead */ }
    expect(n).toBeGreaterThanOrEqual(3);
    expect(n).toBeLessThan(4000);
    await expectWorkerAbortedAndServing();
    // AND the router counted it as client_gone
    await waitFor(async () => (await metrics(router)).get(GONE) === 3, 5_000, 'client_gone counted');
  });

  test('streamed tokens reach the client as the worker makes them, not at the end', async () => {
    // GIVEN a streamed request for 120 tokens (about 0.3 s of decoding at this speed-up)
    const arrivals = await new Promise<number[]>((resolve, reject) => {
      const times: number[] = [];
      const req = http.request(`${router.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        res.on('data', (d: Buffer) => {
          for (const _ of d.toString().matchAll(/^data: /gm)) times.push(performance.now());
        });
        res.on('end', () => resolve(times));
      });
      req.on('error', reject);
      req.end(JSON.stringify({ model: MODEL, prompt: 'stream me as you go', max_tokens: 120, stream: true }));
    });
    served++;
    // THEN the events arrive spread over the decoding: a router that held the stream back would
    // deliver (nearly) all of them in one burst at the end
    expect(arrivals.length).toBeGreaterThanOrEqual(120);
    const span = arrivals[arrivals.length - 1] - arrivals[0];
    expect(span).toBeGreaterThan(100);
    expect(arrivals.filter((t) => t - arrivals[0] < span / 2).length).toBeGreaterThan(20);
  });
});
