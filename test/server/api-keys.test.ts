// End to end: the router's API keys (router.apiKeys.file, --api-key-file) with the real router in
// front of a real sim-worker on loopback, driven by the official `openai` npm SDK. The key file is
// laid out as the kubelet mounts a Secret (keys -> ..data/keys, ..data -> a versioned folder) and
// rotated as the kubelet rotates it (a new folder, ..data swapped by a rename): the new key is
// accepted within a few seconds, without a restart, and the old one refused.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import OpenAI from 'openai';
import { CONFIG, describeIfRoles, EngineProcess, engineProcesses, metrics, waitFor } from './util';

const describeIfBuilt = describeIfRoles('router API key tests', 'router', 'sim-worker');
const MODEL = 'llama-3.3-70b';
const FIRST_KEY = 'sk-disagg-test-first-2f9c1e';
const SECOND_KEY = 'sk-disagg-test-second-7a41d0';

jest.setTimeout(120_000);

const start = engineProcesses(30_000);

/** A Secret volume as the kubelet lays it out, holding `keys`; rotate() swaps in a new version. */
class SecretVolume {
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-api-keys-'));
  private version = 0;
  constructor(keys: string) {
    this.rotate(keys);
    fs.symlinkSync('..data/keys', this.file);
  }
  get file(): string {
    return path.join(this.dir, 'keys');
  }
  rotate(keys: string): void {
    const v = `..v${++this.version}`;
    fs.mkdirSync(path.join(this.dir, v));
    fs.writeFileSync(path.join(this.dir, v, 'keys'), keys);
    fs.symlinkSync(v, path.join(this.dir, '..data_tmp'));
    fs.renameSync(path.join(this.dir, '..data_tmp'), path.join(this.dir, '..data'));
    if (this.version > 1) fs.rmSync(path.join(this.dir, `..v${this.version - 1}`), { recursive: true });
  }
  remove(): void {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

function sdk(router: EngineProcess, apiKey: string): OpenAI {
  return new OpenAI({ baseURL: `${router.url}/v1`, apiKey, maxRetries: 0, timeout: 30_000 });
}

describeIfBuilt('router with API keys, in front of a sim-worker', () => {
  let secret: SecretVolume;
  let worker: EngineProcess;
  let router: EngineProcess;
  beforeAll(async () => {
    secret = new SecretVolume(`# API keys of the test deployment\n\n  ${FIRST_KEY}  \n`);
    worker = await start(['sim-worker', '--config', CONFIG, '--port', '0', '--speedup', '200']);
    router = await start(['router', '--host', '127.0.0.1', '--port', '0', '--model-name', MODEL,
      '--api-key-file', secret.file, '--health-interval-ms', '200', '--scrape-interval-ms', '200',
      '--endpoint', `role=both,url=${worker.url}`]);
    await waitFor(async () => (await fetch(`${router.url}/ready`)).status === 200, 15_000, 'router ready');
  });
  afterAll(() => secret?.remove());

  test('the right key gets a completion, through the SDK', async () => {
    // GIVEN the router's key WHEN a completion is asked for THEN it is served by the worker
    const c = await sdk(router, FIRST_KEY).completions.create({ model: MODEL, prompt: 'say something short', max_tokens: 4 });
    expect(c.object).toBe('text_completion');
    expect(c.usage!.completion_tokens).toBe(4);
    // AND the worker never saw the key (the router forwards no client header)
    expect(worker.stderr()).not.toContain(FIRST_KEY);
  });

  test('a wrong key gets 401 with OpenAI\'s invalid_api_key error', async () => {
    // WHEN the SDK sends a wrong key
    const err = await sdk(router, 'sk-wrong').completions.create({ model: MODEL, prompt: 'hi', max_tokens: 2 })
      .catch((e: unknown) => e);
    // THEN it raises the SDK's AuthenticationError with the error object OpenAI sends
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
    const e = err as InstanceType<typeof OpenAI.AuthenticationError>;
    expect(e.status).toBe(401);
    expect(e.code).toBe('invalid_api_key');
    expect(e.type).toBe('invalid_request_error');
    expect(e.param).toBeNull();
    expect(e.headers.get('www-authenticate')).toBe('Bearer');
    expect(e.message).not.toContain('sk-wrong');
    // AND the raw body is exactly that shape
    const r = await fetch(`${router.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'authorization': 'Bearer sk-wrong' },
      body: JSON.stringify({ model: MODEL, prompt: 'hi', max_tokens: 2 }),
    });
    expect(r.status).toBe(401);
    const body = await r.json();
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
    expect(body.error).toMatchObject({ type: 'invalid_request_error', param: null, code: 'invalid_api_key' });
    expect(body.error.message).toMatch(/Incorrect API key/);
  });

  test('no key gets 401; /health, /ready and /metrics stay open', async () => {
    // WHEN no Authorization header is sent
    const r = await fetch(`${router.url}/v1/models`);
    // THEN 401 says the key is missing
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer');
    const body = await r.json();
    expect(body.error).toMatchObject({ type: 'invalid_request_error', param: null, code: 'invalid_api_key' });
    expect(body.error.message).toMatch(/didn't provide an API key/);
    // AND the probes and the metrics need none
    expect((await fetch(`${router.url}/health`)).status).toBe(200);
    expect((await fetch(`${router.url}/ready`)).status).toBe(200);
    const m = await metrics(router);
    expect(m.get('disagg_router_auth_rejected_total{reason="missing"}')).toBeGreaterThanOrEqual(1);
    expect(m.get('disagg_router_auth_rejected_total{reason="invalid"}')).toBeGreaterThanOrEqual(2);
  });

  test('a rotated Secret: the new key works within seconds, the old one is refused', async () => {
    // GIVEN the first key works
    const models = await sdk(router, FIRST_KEY).models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
    // WHEN the kubelet swaps the Secret's ..data to a version holding the second key only
    const rotated = Date.now();
    secret.rotate(`${SECOND_KEY}\n`);
    // THEN the second key is accepted within a few seconds, without a restart
    await waitFor(async () => (await fetch(`${router.url}/v1/models`,
      { headers: { authorization: `Bearer ${SECOND_KEY}` } })).status === 200, 5_000, 'the rotated key');
    expect(Date.now() - rotated).toBeLessThan(5_000);
    const c = await sdk(router, SECOND_KEY).completions.create({ model: MODEL, prompt: 'after rotation', max_tokens: 2 });
    expect(c.choices).toHaveLength(1);
    // AND the first key is refused
    await expect(sdk(router, FIRST_KEY).models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    expect((await metrics(router)).get('disagg_router_auth_key_reloads_total{outcome="loaded"}')).toBe(1);
    expect(router.proc.exitCode).toBeNull();
  });
});
