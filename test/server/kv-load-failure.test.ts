// End to end: a failed KV pull on the decode side of P/D. `disagg-engine sim-worker --role decode
// --kv-load-fail-rate 1` fails every pull the way vLLM does under its kv_load_failure_policy: 'fail'
// answers 500 (an error event that opens the stream, when streaming), 'recompute' prefills the prompt
// locally. The router in front retries a failed decode leg decode-only, without the transfer
// parameters, so every request still succeeds and nothing counts against the decode worker.
import OpenAI from 'openai';
import { CONFIG, describeIfRoles, EngineProcess, metrics, prompt, startEngine, total, waitFor } from './util';

const describeIfBuilt = describeIfRoles('KV load failure tests', 'router', 'sim-worker');
const MODEL = 'llama-3.3-70b';

jest.setTimeout(120_000);

const started: EngineProcess[] = [];

async function startProc(args: string[]): Promise<EngineProcess> {
  const p = await startEngine(args);
  started.push(p);
  return p;
}

async function startWorker(role: string, extra: string[] = []): Promise<EngineProcess> {
  return startProc(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', '200', '--role', role, ...extra]);
}

/** A P/D router (prompts >= 32 uncached tokens disaggregated) in front of `prefill` and `decode`. */
async function startRouter(prefill: EngineProcess, decode: EngineProcess): Promise<EngineProcess> {
  const r = await startProc(['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL,
    '--health-interval-ms', '200', '--scrape-interval-ms', '200', '--policy', 'disagg', '--min-uncached-tokens', '32',
    '--eject-after', '2', '--endpoint', `role=prefill,url=${prefill.url}`, '--endpoint', `role=decode,url=${decode.url}`]);
  await waitFor(async () => (await fetch(`${r.url}/ready`)).status === 200, 10_000, 'router ready');
  return r;
}

afterAll(async () => {
  for (const p of started) {
    if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
    await p.exited;
  }
});

/** A completion, a streamed completion and a streamed chat through `router`; returns their texts. */
async function threeRequests(router: EngineProcess, tag: string): Promise<string[]> {
  const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
  const c = await client.completions.create({ model: MODEL, prompt: prompt(`${tag}-a-`, 120), max_tokens: 4 });
  let streamed = '';
  for await (const chunk of await client.completions.create({ model: MODEL, prompt: prompt(`${tag}-b-`, 120), max_tokens: 5, stream: true })) {
    streamed += chunk.choices[0]?.text ?? '';
  }
  let chat = '';
  for await (const chunk of await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: prompt(`${tag}-c-`, 120) }], max_tokens: 6, stream: true,
  })) {
    chat += chunk.choices[0]?.delta?.content ?? '';
  }
  return [c.choices[0].text, streamed, chat];
}

const words = (t: string) => t.trim().split(' ').filter((w) => w).length;

describeIfBuilt('a failed KV pull on the decode worker', () => {
  test('the sim-worker answers it as vLLM does under policy fail: 500, or a stream that opens with an error', async () => {
    // GIVEN a decode worker whose every pull fails
    const decode = await startWorker('decode', ['--kv-load-fail-rate', '1']);
    const params = { do_remote_prefill: true, do_remote_decode: false, remote_block_ids: [1, 2], remote_engine_id: 'e', remote_host: '127.0.0.1', remote_port: 5600 };
    const send = (stream: boolean) => fetch(`${decode.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: prompt('direct-', 40), max_tokens: 3, stream, kv_transfer_params: params }),
    });
    // WHEN a request with transfer parameters arrives, whole or streamed
    const whole = await send(false);
    const streamed = await send(true);
    // THEN the whole one is a 500 "Internal server error"
    expect(whole.status).toBe(500);
    expect((await whole.json()).error.message).toBe('Internal server error');
    // AND the streamed one a 200 stream whose first event is the error, then [DONE]
    expect(streamed.status).toBe(200);
    const events = (await streamed.text()).split('\n\n').filter((e) => e);
    expect(JSON.parse(events[0].slice('data: '.length)).error.message).toBe('Internal server error');
    expect(events[1]).toBe('data: [DONE]');
    // AND a request without them is served (nothing to pull)
    const local = await fetch(`${decode.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: prompt('direct-', 40), max_tokens: 3 }),
    });
    expect(local.status).toBe(200);
    // AND a streamed chat opens with the role chunk, as vLLM's does, before the error
    const chat = await fetch(`${decode.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, stream: true, kv_transfer_params: params }),
    });
    const chatEvents = (await chat.text()).split('\n\n').filter((e) => e).map((e) => e.slice('data: '.length));
    expect(JSON.parse(chatEvents[0]).choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(JSON.parse(chatEvents[1]).error.message).toBe('Internal server error');
    expect(chatEvents[2]).toBe('[DONE]');
    expect(total(await metrics(decode), 'disagg:sim_worker_kv_load_failures_total')).toBe(3);
  });

  test('policy fail: the router retries decode-only without the transfer parameters, and every request succeeds', async () => {
    // GIVEN a healthy prefill worker and a decode worker whose every pull fails (policy fail)
    const prefill = await startWorker('prefill');
    const decode = await startWorker('decode', ['--kv-load-fail-rate', '1', '--kv-load-failure-policy', 'fail']);
    const router = await startRouter(prefill, decode);
    // WHEN a completion, a streamed completion and a streamed chat go through the router
    const texts = await threeRequests(router, 'fail');
    // THEN each comes back whole: the retry, decode-only, was prefilled on the decode worker
    expect(texts.map(words)).toEqual([4, 5, 6]);
    const rm = await metrics(router);
    expect(rm.get('disagg_router_pd_decisions_total{reason="disaggregate"}')).toBe(3);
    expect(total(rm, 'disagg_router_kv_transfer_fallbacks_total')).toBe(3);
    expect(total(rm, 'disagg_router_retries_total')).toBe(3);
    // AND the decode worker failed one pull per request and served every request (none pulled twice)
    const dm = await metrics(decode);
    expect(total(dm, 'disagg:sim_worker_kv_load_failures_total')).toBe(3);
    expect(total(dm, 'disagg:sim_worker_kv_pulls_total')).toBe(0);
    expect(total(dm, 'vllm:request_success_total')).toBe(3);
    // AND the decode worker, which only reported failed pulls, is neither ejected nor blamed
    expect(total(rm, 'disagg_router_endpoint_ejections_total')).toBe(0);
    expect(total(rm, 'disagg_router_endpoint_healthy')).toBe(2);
  });

  test('policy recompute: the decode worker prefills itself and the router sees no failure', async () => {
    // GIVEN the same pools with policy recompute on the decode worker
    const prefill = await startWorker('prefill');
    const decode = await startWorker('decode', ['--kv-load-fail-rate', '1', '--kv-load-failure-policy', 'recompute']);
    const router = await startRouter(prefill, decode);
    // WHEN the same three requests go through the router
    const texts = await threeRequests(router, 'recompute');
    // THEN they come back whole at the first attempt
    expect(texts.map(words)).toEqual([4, 5, 6]);
    const rm = await metrics(router);
    expect(total(rm, 'disagg_router_kv_transfer_fallbacks_total')).toBe(0);
    expect(total(rm, 'disagg_router_retries_total')).toBe(0);
    const dm = await metrics(decode);
    expect(total(dm, 'disagg:sim_worker_kv_load_failures_total')).toBe(3);
    expect(total(dm, 'vllm:request_success_total')).toBe(3);
  });
});
