// End to end: the real `disagg-engine sim-worker` binary on loopback, driven by the official
// `openai` npm SDK (completions and chat, streaming and not), curl for raw HTTP errors, plain
// fetch for the P/D handshake and metrics, and signals / failure injection for faults.
// KV events (ZMQ) are verified by the GoogleTest suite (engine/tests/servers/sim_worker/sim_worker_test.cc),
// since no ZMQ client is installed for Node.
import OpenAI from 'openai';
import { CONFIG, curl, describeIfRoles, EngineProcess, startEngine } from './util';

const describeIfBuilt = describeIfRoles('sim-worker end-to-end tests', 'sim-worker');
const MODEL = 'llama-3.3-70b';

jest.setTimeout(60_000);

type Worker = EngineProcess;

const started: Worker[] = [];

/** Starts a sim-worker on an ephemeral port and waits for its "listening on" line. */
async function startWorker(extra: string[] = []): Promise<Worker> {
  const w = await startEngine(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', '200', ...extra], 10_000);
  started.push(w);
  return w;
}

async function stopWorker(w: Worker): Promise<void> {
  if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill('SIGKILL');
  await w.exited;
}

afterAll(async () => {
  await Promise.all(started.map(stopWorker));
});

function sdk(w: Worker): OpenAI {
  return new OpenAI({ baseURL: `${w.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 20_000 });
}

/** Parses the Prometheus text into name -> value, summing the series of a family (e.g. every finished_reason). */
async function metrics(w: Worker): Promise<Map<string, number>> {
  const text = await (await fetch(`${w.url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const name = line.slice(0, line.indexOf('{') >= 0 ? line.indexOf('{') : line.indexOf(' '));
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (!line.includes('_bucket{')) out.set(name, (out.get(name) ?? 0) + value);
  }
  return out;
}

describeIfBuilt('sim-worker with the openai SDK', () => {
  let w: Worker;
  beforeAll(async () => {
    w = await startWorker(['--max-body-bytes', '4096']);
  });

  test('completions, non-streaming: filler text with usage and cached-token counts', async () => {
    // GIVEN a prompt WHEN it is completed twice with 5 tokens
    const prompt = 'The tenant system prompt repeats across requests so its blocks are cached';
    const first = await sdk(w).completions.create({ model: MODEL, prompt, max_tokens: 5 });
    const second = await sdk(w).completions.create({ model: MODEL, prompt, max_tokens: 5 });
    // THEN 5 words come back, with usage, and the second request hits the prefix cache
    expect(first.object).toBe('text_completion');
    expect(first.choices[0].text.trim().split(' ')).toHaveLength(5);
    expect(first.choices[0].finish_reason).toBe('length');
    expect(first.usage).toMatchObject({ completion_tokens: 5 });
    expect(first.usage!.prompt_tokens).toBeGreaterThan(10);
    expect(second.choices[0].text).toBe(first.choices[0].text); // deterministic filler
    const cached = (second.usage as unknown as { prompt_tokens_details: { cached_tokens: number } })
      .prompt_tokens_details.cached_tokens;
    expect(cached).toBeGreaterThanOrEqual(16);
  });

  test('completions, streaming: one chunk per token, then the end of the stream', async () => {
    // GIVEN a streaming request for 12 tokens
    const stream = await sdk(w).completions.create({ model: MODEL, prompt: 'count to twelve', max_tokens: 12, stream: true });
    // WHEN the chunks are read
    const pieces: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      pieces.push(chunk.choices[0].text);
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    // THEN each token arrived as its own chunk and the last one says why it stopped
    expect(pieces).toHaveLength(12);
    expect(finish).toBe('length');
  });

  test('chat completions, non-streaming and streaming with usage', async () => {
    // GIVEN a two-message conversation
    const messages = [
      { role: 'system' as const, content: 'You are terse.' },
      { role: 'user' as const, content: 'Say something.' },
    ];
    // WHEN it is sent without and with streaming
    const full = await sdk(w).chat.completions.create({ model: MODEL, messages, max_tokens: 7 });
    const stream = await sdk(w).chat.completions.create({
      model: MODEL, messages, max_tokens: 7, stream: true, stream_options: { include_usage: true },
    });
    let text = '';
    let role: string | undefined;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      if (chunk.choices.length > 0) {
        role = chunk.choices[0].delta.role ?? role;
        text += chunk.choices[0].delta.content ?? '';
      }
      usage = chunk.usage ?? usage;
    }
    // THEN both carry the same 7 words, the stream starts with the assistant role and ends with usage
    expect(full.object).toBe('chat.completion');
    expect(full.choices[0].message.role).toBe('assistant');
    expect(full.choices[0].message.content!.trim().split(' ')).toHaveLength(7);
    expect(text).toBe(full.choices[0].message.content);
    expect(role).toBe('assistant');
    expect(usage).toMatchObject({ completion_tokens: 7, prompt_tokens: full.usage!.prompt_tokens });
  });

  test('models lists the served model; an unknown model is a 404', async () => {
    // GIVEN / WHEN the model list is fetched THEN it holds the configured model
    const models = await sdk(w).models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
    // WHEN another model is asked for THEN the SDK raises NotFoundError
    await expect(sdk(w).completions.create({ model: 'gpt-4', prompt: 'x', max_tokens: 1 }))
      .rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  test('raw HTTP errors use the OpenAI error shape', () => {
    // GIVEN malformed JSON THEN 400 invalid_request_error
    const [s400, b400] = curl(['-X', 'POST', '-H', 'Content-Type: application/json', '-d', '{"model":', `${w.url}/v1/completions`]);
    expect(s400).toBe(400);
    expect(JSON.parse(b400).error).toMatchObject({ type: 'invalid_request_error', param: null });
    // GIVEN a missing prompt THEN 400 naming the field
    const [sMissing, bMissing] = curl(['-X', 'POST', '-d', `{"model":"${MODEL}"}`, `${w.url}/v1/completions`]);
    expect(sMissing).toBe(400);
    expect(JSON.parse(bMissing).error.param).toBe('prompt');
    // GIVEN a body over --max-body-bytes 4096 THEN 413
    const big = JSON.stringify({ model: MODEL, prompt: 'x '.repeat(5000) });
    const [s413, b413] = curl(['-X', 'POST', '-H', 'Content-Type: application/json', '--data-binary', big, `${w.url}/v1/completions`]);
    expect(s413).toBe(413);
    expect(JSON.parse(b413).error.message).toMatch(/4096/);
    // GIVEN an unknown model THEN 404 model_not_found
    const [s404, b404] = curl(['-X', 'POST', '-d', JSON.stringify({ model: 'nope', prompt: 'x' }), `${w.url}/v1/completions`]);
    expect(s404).toBe(404);
    expect(JSON.parse(b404).error.code).toBe('model_not_found');
    // GIVEN an unknown path THEN 404; a known path with the wrong method THEN 405
    expect(curl([`${w.url}/v2/whatever`])[0]).toBe(404);
    expect(curl([`${w.url}/v1/completions`])[0]).toBe(405);
    // AND health is 200
    expect(curl([`${w.url}/health`])[0]).toBe(200);
  });

  test('metrics carry vLLM names and move with traffic', async () => {
    // GIVEN the metrics before WHEN a request with a repeated prompt runs THEN counters rise
    const before = await metrics(w);
    for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc',
      'vllm:time_to_first_token_seconds_count', 'vllm:inter_token_latency_seconds_count',
      'vllm:e2e_request_latency_seconds_count', 'vllm:prefix_cache_hits_total', 'vllm:prefix_cache_queries_total']) {
      expect(before.has(name)).toBe(true);
    }
    const prompt = 'metrics prompt with enough words to fill at least one block of sixteen tokens for sure ok';
    await sdk(w).completions.create({ model: MODEL, prompt, max_tokens: 4 });
    await sdk(w).completions.create({ model: MODEL, prompt, max_tokens: 4 });
    const after = await metrics(w);
    expect(after.get('vllm:request_success_total')! - before.get('vllm:request_success_total')!).toBe(2);
    expect(after.get('vllm:time_to_first_token_seconds_count')! - before.get('vllm:time_to_first_token_seconds_count')!).toBe(2);
    expect(after.get('vllm:inter_token_latency_seconds_count')! - before.get('vllm:inter_token_latency_seconds_count')!).toBe(6);
    expect(after.get('vllm:prefix_cache_queries_total')!).toBeGreaterThan(before.get('vllm:prefix_cache_queries_total')!);
    expect(after.get('vllm:prefix_cache_hits_total')! - before.get('vllm:prefix_cache_hits_total')!).toBeGreaterThanOrEqual(16);
  });
});

describeIfBuilt('sim-worker P/D handshake (vLLM NixlConnector protocol)', () => {
  test('prefill returns kv_transfer_params; decode consumes them and is charged the transfer', async () => {
    // GIVEN a prefill worker and a decode worker
    const prefill = await startWorker(['--role', 'prefill', '--engine-id', 'prefill-0', '--side-channel-port', '5601']);
    const decode = await startWorker(['--role', 'decode']);
    const prompt = 'a long shared document '.repeat(20);
    // WHEN the proxy step 1 runs: prefill with max_tokens 1, stream false, do_remote_decode
    const res1 = await fetch(`${prefill.url}/v1/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt, max_tokens: 1, stream: false, kv_transfer_params: { do_remote_decode: true } }),
    });
    expect(res1.status).toBe(200);
    const body1 = await res1.json() as { kv_transfer_params: Record<string, unknown>; usage: { prompt_tokens: number } };
    // THEN the response carries the transfer parameters of the prefilled blocks
    const params = body1.kv_transfer_params;
    expect(params).toMatchObject({
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: 'prefill-0',
      remote_host: '127.0.0.1',
      remote_port: 5601,
      tp_size: 4,
    });
    expect(typeof params.remote_request_id).toBe('string');
    // Only full 16-token blocks are transferred, as vLLM does.
    expect((params.remote_block_ids as number[]).length).toBe(Math.floor(body1.usage.prompt_tokens / 16));
    // WHEN step 2 sends the original request to the decode worker with those params (SDK, streaming)
    const before = await metrics(decode);
    const stream = await sdk(decode).completions.create({
      model: MODEL, prompt, max_tokens: 6, stream: true, kv_transfer_params: params,
    } as OpenAI.CompletionCreateParamsStreaming);
    let n = 0;
    for await (const chunk of stream) n += chunk.choices.length;
    // THEN it streams its tokens and one KV pull was charged
    expect(n).toBe(6);
    const after = await metrics(decode);
    expect(after.get('disagg:sim_worker_kv_pulls_total')! - before.get('disagg:sim_worker_kv_pulls_total')!).toBe(1);
    expect(after.get('disagg:sim_worker_kv_pull_model_seconds_total')!).toBeGreaterThan(0);
    // AND a decode worker refuses a prefill-only request (wrong role) with 400
    const [status] = curl(['-X', 'POST', '-d', JSON.stringify({ model: MODEL, prompt: 'x', kv_transfer_params: { do_remote_decode: true } }),
      `${decode.url}/v1/completions`]);
    expect(status).toBe(400);
  });
});

describeIfBuilt('sim-worker faults and limits', () => {
  test('--crash-after ends a stream mid-way and the process exits', async () => {
    // GIVEN a worker that dies after 5 tokens
    const w = await startWorker(['--crash-after', '5', '--speedup', '20']);
    // WHEN a 50-token stream is read
    const stream = await sdk(w).completions.create({ model: MODEL, prompt: 'doomed', max_tokens: 50, stream: true });
    let received = 0;
    const read = (async () => {
      for await (const chunk of stream) received += chunk.choices.length;
    })();
    // THEN the client sees an error before the end, and the process exits with code 3
    await expect(read).rejects.toThrow();
    expect(received).toBeGreaterThan(0);
    expect(received).toBeLessThan(50);
    expect(await w.exited).toBe(3);
  });

  test('a full queue answers 429 with Retry-After', async () => {
    // GIVEN a slow worker that holds one running and one waiting request
    const w = await startWorker(['--max-num-seqs', '1', '--max-waiting', '1', '--speedup', '5']);
    // WHEN six requests arrive at once
    const results = await Promise.all(Array.from({ length: 6 }, () => fetch(`${w.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, prompt: 'queue me', max_tokens: 20 }),
    })));
    // THEN two are served and the rest are refused with 429 and Retry-After
    const refused = results.filter((r) => r.status === 429);
    expect(results.filter((r) => r.status === 200)).toHaveLength(2);
    expect(refused).toHaveLength(4);
    expect(refused[0].headers.get('retry-after')).toBe('1');
    expect((await refused[0].json() as { error: { type: string } }).error.type).toBe('rate_limit_error');
    await Promise.all(results.filter((r) => !r.bodyUsed).map((r) => r.text()));
  });

  test('--fail-rate 1 answers every generation with 500; SIGTERM drains: new requests 503, in-flight streams finish', async () => {
    // GIVEN a worker failing every request THEN a generation is a 500 in OpenAI shape
    const failing = await startWorker(['--fail-rate', '1']);
    const [status, body] = curl(['-X', 'POST', '-d', JSON.stringify({ model: MODEL, prompt: 'x' }), `${failing.url}/v1/completions`]);
    expect(status).toBe(500);
    expect(JSON.parse(body).error.type).toBe('server_error');
    // GIVEN a slow stream in flight on another worker (40 tokens of ~4 ms each)
    const w = await startWorker(['--speedup', '2']);
    const stream = await sdk(w).completions.create({ model: MODEL, prompt: 'drain me', max_tokens: 40, stream: true });
    // WHEN SIGTERM arrives after the first chunk
    let received = 0;
    for await (const chunk of stream) {
      if (received === 0) {
        w.proc.kill('SIGTERM');
        await new Promise((r) => setTimeout(r, 20));
        // THEN the worker drains (issue 24): /health fails, and a new generation is refused with
        // 503 + Retry-After (go elsewhere) rather than a refused connection
        expect((await fetch(`${w.url}/health`)).status).toBe(503);
        const late = await fetch(`${w.url}/v1/completions`, {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, prompt: 'late', max_tokens: 2 }),
        });
        expect(late.status).toBe(503);
        expect(late.headers.get('retry-after')).toBe('1');
        expect(((await late.json()) as any).error.code).toBe('draining');
      }
      received += chunk.choices.length;
    }
    // AND the in-flight stream still completes, and the process exits 0 afterwards
    expect(received).toBe(40);
    expect(await w.exited).toBe(0);
  });
});
