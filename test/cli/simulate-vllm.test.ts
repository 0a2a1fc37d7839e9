import { disagg, tmpdir } from './util';
import { engineFlags, schedulerFlags, stageList } from '../../src/cli/engine-flags';

// Reproducing a vLLM deployment (issue 21): constant arrivals in stages, shared prompts with users,
// the API, and vLLM's engine arguments as flags of `disagg simulate` and `disagg plan --simulate`.
// Requires the engine addon (`npx projen engine`).

jest.setTimeout(60_000);

/** One H100 replica of Llama-3.1-8B, TP1, as in ../shared/validation. */
const REPLICA = ['--model', 'llama-3.1-8b', '--instance', 'p5.48xlarge', '--weight-precision', 'bf16', '--kv-cache-precision', 'bf16', '--max-context', '4096',
  '--aggregated', '--replicas', '1', '--tp', '1'];

describe('flag parsing', () => {
  test('--stages, --arrival constant, shared prompts, users and the API become the workload section', () => {
    // GIVEN WHEN the flags of a staged shared-prefix run are resolved
    const f = engineFlags({
      'stages': '8x600,20x600',
      'arrival': 'constant',
      'shared-prompts': '9',
      'system-prompt-tokens': '100',
      'popularity': 'equal',
      'users-per-prompt': '5',
      'input-tokens': '447',
      'output-tokens': '248',
      'api': 'completions',
    });
    // THEN the stages carry the load (no request limit: every stage's requests) and the mean rate is reported
    expect(f.stages).toEqual([{ ratePerSecond: 8, durationSeconds: 600 }, { ratePerSecond: 20, durationSeconds: 600 }]);
    expect(f.rate).toBe(14);
    expect(f.workload).toEqual({
      kind: 'single',
      arrival: { process: 'constant', stages: [{ ratePerSecond: 8, durationSeconds: 600 }, { ratePerSecond: 20, durationSeconds: 600 }] },
      inputTokens: { distribution: 'fixed', mean: 447 },
      outputTokens: { distribution: 'fixed', mean: 248 },
      tenants: { count: 9, systemPromptTokens: 100, popularity: 'equal', usersPerTenant: 5 },
      api: 'completions',
    });
    // AND zipf takes an exponent, --tenants is the same flag as --shared-prompts, --requests caps stages
    expect(engineFlags({ tenants: '3', popularity: 'zipf:1.5' }).workload.tenants).toEqual(
      { count: 3, systemPromptTokens: 1024, popularity: 'zipf', zipfExponent: 1.5 });
    expect(engineFlags({ stages: '2x10', requests: '7' }).workload.requests).toBe(7);
    expect(stageList('0.5x30')).toEqual([{ ratePerSecond: 0.5, durationSeconds: 30 }]);
    // AND the scheduler flags resolve only what was given (the defaults stay the simulator's own)
    expect(schedulerFlags({})).toEqual({});
    expect(schedulerFlags({ 'max-num-seqs': '128', 'max-num-batched-tokens': '2048', 'block-size': '32', 'gpu-memory-utilization': '0.95', 'cpu-offload-gib': '8' }))
      .toEqual({ maxNumSeqs: 128, maxNumBatchedTokens: 2048, kvBlockSize: 32, gpuMemoryUtilization: 0.95, cpuOffloadGib: 8 });
  });
});

describe('disagg simulate reproduces a vLLM run', () => {
  test('a staged shared-prefix run: the config holds every setting, the summary covers every stage', async () => {
    // GIVEN the shape of validation run 16 (stages shortened to 20 s each)
    const out = tmpdir('vllm');
    const { code, out: stdout } = await disagg('simulate', ...REPLICA, '--max-num-seqs', '128', '--max-num-batched-tokens', '2048',
      '--gpu-memory-utilization', '0.9', '--block-size', '16', '--arrival', 'constant', '--stages', '8x20,20x20',
      '--shared-prompts', '9', '--popularity', 'equal', '--users-per-prompt', '5', '--system-prompt-tokens', '100',
      '--input-tokens', '447', '--output-tokens', '248', '--api', 'completions', '--json', '--out', out);
    expect(code).toBe(0);
    const json = JSON.parse(stdout);
    // THEN the pool has vLLM's limits and the router its block size
    expect(json.config.pools[0]).toMatchObject({ role: 'both', replicas: 1, tensorParallel: 1, maxConcurrencyPerReplica: 128, maxBatchedTokens: 2048 });
    expect(json.config.router.kvBlockSize).toBe(16);
    expect(json.config.workload.arrival).toEqual({ process: 'constant', stages: [{ ratePerSecond: 8, durationSeconds: 20 }, { ratePerSecond: 20, durationSeconds: 20 }] });
    // AND one run (no sweep) of 160 + 400 requests, at the stages' mean rate
    expect(json.sweep).toHaveLength(1);
    expect(json.rate).toBe(14);
    expect(json.result.submitted).toBe(560);
    expect(json.result.completed).toBe(560);
    // AND the 45 repeating prompts are cached after their first request (whole blocks: not the last partial one)
    expect(json.result.prefixHitRate.gpu).toBeGreaterThan(0.9);
    // AND the text output names the stages
    const text = await disagg('simulate', ...REPLICA, '--arrival', 'constant', '--stages', '8x5,20x5', '--out', out);
    expect(text.out).toMatch(/requests in stages 8\/s x 5 s, 20\/s x 5 s \(constant\), every stage's requests/);
    expect(text.out).toMatch(/^Over the stages \(mean 14 req\/s\): 140\/140 completed/m);
  });

  test('two runs that differ in one flag give different predictions', async () => {
    // GIVEN a loaded replica with shared system prompts
    const base = [...REPLICA, '--requests', '300', '--rate', '20', '--rates', '20', '--input-tokens', '1500', '--output-tokens', '100',
      '--shared-prompts', '4', '--system-prompt-tokens', '120'];
    const result = async (...extra: string[]) => {
      const r = await disagg('simulate', ...base, ...extra, '--json', '--out', tmpdir('vllm'));
      expect(r.err).not.toMatch(/disagg simulate: /);
      expect(r.code).toBe(0);
      return JSON.parse(r.out).result;
    };
    const reference = await result();
    const tightKv = await result('--gpu-memory-utilization', '0.3');
    // WHEN each flag is changed on its own THEN the summary changes
    const variants: Array<[string[], unknown]> = [
      [['--max-num-seqs', '8'], reference],
      [['--max-num-batched-tokens', '512'], reference],
      [['--block-size', '32'], reference],
      [['--gpu-memory-utilization', '0.3'], reference],
      [['--gpu-memory-utilization', '0.3', '--cpu-offload-gib', '8'], tightKv],
      [['--arrival', 'constant'], reference],
      [['--popularity', 'equal'], reference],
      [['--users-per-prompt', '3'], reference],
      [['--api', 'chat'], reference],
      [['--async-scheduling', 'off'], reference],
    ];
    for (const [extra, against] of variants) {
      const changed = await result(...extra);
      expect({ flags: extra, result: changed }).not.toEqual({ flags: extra, result: against });
    }
    // AND so do the number of shared prompts and the stages, while one Poisson stage at --rate is --rate
    expect(await result('--shared-prompts', '8')).not.toEqual(reference);
    const staged = async (stages: string) => JSON.parse((await disagg('simulate', ...REPLICA, '--requests', '300', '--stages', stages,
      '--input-tokens', '1500', '--output-tokens', '100', '--shared-prompts', '4', '--system-prompt-tokens', '120', '--json', '--out', tmpdir('vllm'))).out).result;
    expect(await staged('20x15')).toEqual(reference);
    expect(await staged('10x10,40x10')).not.toEqual(reference);
    // AND without async scheduling a request joins the next step, so TTFT drops at equal load
    expect((await result('--async-scheduling', 'off')).ttftSeconds.mean).toBeLessThan(reference.ttftSeconds.mean);
    // AND offloading to CPU shows in the tier report
    expect((await result('--gpu-memory-utilization', '0.3', '--cpu-offload-gib', '8')).kvTiers.host.bytesOffloaded).toBeGreaterThan(0);
  });

  test('the host tier of --cpu-offload-gib is N GiB per replica on the assumed PCIe link', async () => {
    const { code, out } = await disagg('simulate', '--aggregated', '--replicas', '2', '--tp', '2', '--requests', '20', '--rates', '4', '--rate', '4',
      '--cpu-offload-gib', '8', '--json', '--out', tmpdir('vllm'));
    expect(code).toBe(0);
    expect(JSON.parse(out).config.pools[0].kvTiers).toEqual([
      { tier: 'host', capacityBytes: 8 * 1024 ** 3, readBytesPerSecond: 100e9, writeBytesPerSecond: 100e9, latencySeconds: 10e-6 },
    ]);
  });

  test.each([
    [['--stages', '8x600,20'], /--stages '8x600,20': stage '20' must be RATExSECONDS with positive numbers, e.g. 8x600/],
    [['--stages', '8x0'], /stage '8x0' must be RATExSECONDS with positive numbers/],
    [['--stages', '8x600', '--rate', '3'], /--rate \(3\) and --stages \(8x600\) both set the load; drop --rate/],
    [['--stages', '8x600', '--rates', '1,2'], /--rates does not apply with --stages, which fixes its own arrivals; drop --rates/],
    [['--arrival', 'uniform'], /--arrival 'uniform' is not an arrival process; use poisson, constant, gamma:CV/],
    [['--popularity', 'equal'], /--popularity needs --shared-prompts N \(N >= 1\)/],
    [['--shared-prompts', '4', '--popularity', 'zipf:-1'], /--popularity 'zipf:-1' is not a popularity; use equal, zipf or zipf:S with S >= 0/],
    [['--shared-prompts', '4', '--tenants', '4'], /--shared-prompts \(4\) and --tenants \(4\) are the same flag; give one/],
    [['--users-per-prompt', '5'], /--users-per-prompt needs --shared-prompts N/],
    [['--shared-prompts', '4', '--users-per-prompt', '0'], /--users-per-prompt expects a whole number >= 1, got '0'/],
    [['--shared-prompts', '4', '--users-per-prompt', '2', '--turns', '3'], /--users-per-prompt \(2\) applies to single requests; drop --turns or --users-per-prompt/],
    [['--api', 'responses'], /--api 'responses' is not an API; use completions \(prompts as given\) or chat/],
    [['--api', 'chat', '--trace', 'x.jsonl'], /--api chat does not apply with --trace/],
    [['--max-num-seqs', '1.5'], /--max-num-seqs expects a whole number >= 1, got '1.5'/],
    [['--max-num-batched-tokens', '0'], /--max-num-batched-tokens expects a whole number >= 1, got '0'/],
    [['--block-size', '2000'], /--block-size \(2000\) must be at most 1024/],
    [['--gpu-memory-utilization', '0'], /--gpu-memory-utilization '0' must be a fraction in \(0, 1\], e.g. 0.9/],
    [['--cpu-offload-gib', 'lots'], /--cpu-offload-gib 'lots' must be a positive number of GiB, e.g. 8/],
    [['--async-scheduling', 'yes'], /--async-scheduling 'yes' must be on or off/],
    [['--cpu-offload-gib', '8', '--host-kv', '16'], /--cpu-offload-gib \(8\) and --host-kv \(16\) both size the host KV tier; give one/],
  ])('bad flags %p are usage errors naming the flag, the value and the fix', async (args, pattern) => {
    const r = await disagg('simulate', ...args, '--out', tmpdir('vllm'));
    expect(r.code).toBe(2);
    expect(r.err).toMatch(pattern);
  });
});

describe('disagg plan with vLLM engine arguments', () => {
  test('--simulate passes them to every option; a smaller --max-num-seqs lowers the goodput; stages are refused', async () => {
    const args = ['plan', '--simulate', '--model', 'llama-3.1-8b', '--instance', 'p5.48xlarge', '--weight-precision', 'bf16', '--kv-cache-precision', 'bf16',
      '--max-context', '4096', '--tp', '1', '--max-accelerators', '1', '--modes', 'aggregated', '--requests', '100',
      '--input-tokens', '512', '--output-tokens', '256', '--json', '--out', tmpdir('vllm')];
    const goodput = async (...extra: string[]) => {
      const r = await disagg(...args, ...extra);
      expect(r.code).toBe(0);
      return JSON.parse(r.out).result.candidates[0].goodputRatePerSecond as number;
    };
    expect(await goodput('--max-num-seqs', '2')).toBeLessThan(await goodput());
    const staged = await disagg(...args, '--stages', '8x60');
    expect(staged.code).toBe(2);
    expect(staged.err).toMatch(/--stages cannot be planned .* plan with --rate, then check with `disagg simulate --stages`/);
  });

  test('without --simulate they size the plan: a smaller step budget leaves more KV cache', async () => {
    const kv = async (...extra: string[]) => JSON.parse((await disagg('plan', '--model', 'llama-3.1-8b', '--instance', 'p5.48xlarge',
      '--weight-precision', 'bf16', '--kv-cache-precision', 'bf16', '--tp', '1', '--json', ...extra)).out).kvTokens as number;
    expect(await kv('--max-num-batched-tokens', '2048')).toBeGreaterThan(await kv());
    expect(await kv('--gpu-memory-utilization', '0.95')).toBeGreaterThan(await kv());
  });
});
