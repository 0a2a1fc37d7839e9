import * as fs from 'fs';
import * as path from 'path';
import { disagg, tmpdir, wellFormedXml } from './util';
import { AcceleratedInstanceType, ModelArchitecture } from '../../src/catalog';
import { simulationConfig } from '../../src/engine/engine-config-builder';

// Requires the engine addon (`npx projen engine`).

describe('disagg simulate', () => {
  test('prints a table per rate and writes a well-formed SVG chart with every series', async () => {
    // GIVEN an output folder
    const out = tmpdir('sim');
    // WHEN the default deployment is simulated at three rates
    const { code, out: stdout, err } = await disagg('simulate', '--requests', '150', '--rate', '6', '--rates', '2,6,12', '--out', out);
    // THEN it exits 0 with a row per rate, the --rate row marked
    expect(code).toBe(0);
    expect(stdout).toMatch(/^disagg simulate: llama-3.3-70b on p5en\.48xlarge: 2 x prefill TP4 \+ 2 x decode TP4$/m);
    expect(stdout).toMatch(/^ {2}rate\/s +TTFT p50 +p90 +p99 +TPOT p50 +p90 +p99 +good +good\/s +out tok\/s +prefix hit$/m);
    // (150 requests span 75 s at 2/s, less than four 27.6 s lifetimes: every row is marked, with the fix)
    for (const rate of ['2', '6', '12']) {
      expect(stdout).toMatch(new RegExp(`^ {2}${rate} ~ +[\\d.]+ m?s .*%`, 'm'));
    }
    expect(stdout).toMatch(/^ {2}~ arrivals span less than 110 s, four request lifetimes at the SLO's edge: .* --requests 1325 or more, or no --requests, fixes them$/m);
    expect(stdout).toMatch(/^ {2}6 ~ .*<- --rate$/m);
    expect(stdout).toMatch(/At 6 req\/s: 150\/150 completed/);
    // AND one goodput: the highest rate swept with 90% good, and good/s = rate x share on each row
    expect(stdout).toMatch(/^ {2}goodput: (2|6|12) req\/s, the highest rate swept with 90% of requests within both SLOs$|^ {2}goodput: below 2 req\/s/m);
    const rows = [...stdout.matchAll(/^ {2}(\d+) ~ .* ([\d.]+)%(?: !)? +([\d.]+) +[\d,]+ +\d+%/gm)];
    expect(rows.length).toBe(3);
    for (const m of rows) expect(Number(m[3])).toBeCloseTo(Number(m[1]) * Number(m[2]) / 100, 1);
    // AND progress went to stderr as periodic lines (stderr is not a terminal here)
    expect(err).toMatch(/^simulating: 100% 3\/3/m);
    // AND the chart is well-formed SVG with the TTFT/TPOT percentiles, goodput and SLO lines
    const svg = fs.readFileSync(path.join(out, 'simulate.svg'), 'utf8');
    const elements = wellFormedXml(svg);
    expect(elements[0]).toBe('svg');
    const series = [...svg.matchAll(/data-series="([^"]+)"/g)].map(m => m[1]);
    for (const s of ['ttft-p50', 'ttft-p90', 'ttft-p99', 'tpot-p50', 'tpot-p90', 'tpot-p99', 'good', 'offered', 'slo']) {
      expect(series).toContain(s);
    }
    // AND each latency series has one point per rate
    const ttft = svg.match(/data-series="ttft-p90" d="([^"]+)"/)![1];
    expect(ttft.split(' ').length).toBe(3);
    expect(fs.existsSync(path.join(out, 'simulate.json'))).toBe(true);
  });

  test('without --requests each rate simulates four request lifetimes of arrivals at least, so high rates reach steady state', async () => {
    // GIVEN 16-token outputs at TTFT 2 s / TPOT 100 ms: a lifetime of 3.6 s, a window of 14.4 s
    const run = async (...extra: string[]) => JSON.parse((await disagg('simulate', '--model', 'llama-3.1-8b', '--instance', 'p5.48xlarge',
      '--weight-precision', 'bf16', '--aggregated', '--replicas', '1', '--tp', '1', '--input-tokens', '128', '--output-tokens', '16',
      '--rate', '20', '--rates', '20,100', '--json', '--out', tmpdir('sim'), ...extra)).out);
    // WHEN swept without --requests THEN 1,000 requests where they span the window (20/s), 1,440 at 100/s
    const scaled = await run();
    expect(scaled.sweep.map((p: any) => [p.ratePerSecond, p.summary.submitted])).toEqual([[20, 1000], [100, 1440]]);
    // AND --requests is what every rate simulates, as asked
    const asked = await run('--requests', '300');
    expect(asked.sweep.map((p: any) => p.summary.submitted)).toEqual([300, 300]);
  });

  test('--json prints the result at --rate and the sweep', async () => {
    const out = tmpdir('sim');
    const { code, out: stdout } = await disagg('simulate', '--aggregated', '--replicas', '2', '--tp', '2', '--requests', '120',
      '--input-tokens', 'uniform:200:800', '--output-tokens', 'lognormal:100:40', '--rate', '3', '--rates', '1,3', '--json', '--out', out);
    expect(code).toBe(0);
    const json = JSON.parse(stdout);
    expect(json.pools).toBe('2 x aggregated TP2');
    expect(json.rate).toBe(3);
    expect(json.result.completed).toBe(120);
    expect(json.result.disaggregatedRequests).toBe(0);
    expect(json.sweep.map((p: { ratePerSecond: number }) => p.ratePerSecond)).toEqual([1, 3]);
    expect(json.sweep[1].summary).toEqual(json.result);
    expect(json.config.workload.inputTokens).toEqual({ distribution: 'uniform', min: 200, max: 800, mean: 500 });
  });

  test('without --rates the sweep climbs until the deployment misses the SLO target', async () => {
    // GIVEN one small aggregated replica at a rate it serves easily
    const out = tmpdir('sim');
    const { code, out: stdout } = await disagg('simulate', '--aggregated', '--replicas', '1', '--tp', '2', '--requests', '120',
      '--input-tokens', '2000', '--output-tokens', '200', '--rate', '0.5', '--json', '--out', out);
    expect(code).toBe(0);
    // WHEN the default sweep (0.25x to 2x) ends inside the SLO
    const sweep = JSON.parse(stdout).sweep as Array<{ ratePerSecond: number; summary: { goodputShare: number } }>;
    // THEN higher rates were added until the target was missed, and only then
    const rates = sweep.map(p => p.ratePerSecond);
    expect(rates.slice(0, 8)).toEqual([0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1]);
    expect(rates.length).toBeGreaterThan(8);
    expect(sweep[sweep.length - 1].summary.goodputShare).toBeLessThan(0.9);
    expect(sweep[sweep.length - 3].summary.goodputShare).toBeGreaterThanOrEqual(0.9);
  });

  test('lower KV tiers: links sized from the replica\'s share of the instance, traffic in the result', async () => {
    // GIVEN two TP2 replicas on p5en.48xlarge (8 GPUs, 8 NVMe drives) with host, disk and remote tiers
    const out = tmpdir('sim');
    const { code, out: stdout } = await disagg('simulate', '--aggregated', '--replicas', '2', '--tp', '2', '--requests', '200',
      '--turns', '4', '--tenants', '4', '--rate', '1', '--rates', '1', '--host-kv', '64', '--disk-kv', '1000@3', '--remote-kv', '4000',
      '--json', '--out', out);
    expect(code).toBe(0);
    const json = JSON.parse(stdout);
    // THEN each replica gets its GPUs' PCIe links, 2 of the 8 drives (here overridden to 3 GB/s), a capped store link
    expect(json.config.pools[0].kvTiers).toEqual([
      { tier: 'host', capacityBytes: 64 * 1024 ** 3, readBytesPerSecond: 100e9, writeBytesPerSecond: 100e9, latencySeconds: 10e-6 },
      { tier: 'disk', capacityBytes: 1000 * 1024 ** 3, readBytesPerSecond: 3e9, writeBytesPerSecond: 1.5e9, latencySeconds: 100e-6 },
      { tier: 'remote', capacityBytes: 4000 * 1024 ** 3, readBytesPerSecond: 12.5e9, writeBytesPerSecond: 12.5e9, latencySeconds: 500e-6 },
    ]);
    // AND the result reports what went through each tier
    expect(Object.keys(json.result.kvTiers).sort()).toEqual(['disk', 'host', 'remote']);
    expect(json.result.kvTiers.host.bytesOffloaded).toBeGreaterThan(0);
    // AND impossible tiers are usage errors that say why
    const tooBig = await disagg('simulate', '--aggregated', '--tp', '2', '--disk-kv', '99999', '--out', out);
    expect(tooBig.code).toBe(2);
    expect(tooBig.err).toMatch(/'diskGib' \(99999\) exceeds the 7078 GiB of instance-store NVMe a replica of p5en.48xlarge gets \(2 drive\(s\)\)/);
    const malformed = await disagg('simulate', '--host-kv', 'lots', '--out', out);
    expect(malformed.err).toMatch(/--host-kv 'lots' must be GIB or GIB@GB\/s/);
  });

  test('--concurrency runs a closed loop once; --engine picks how every replica batches; bad combinations are refused', async () => {
    // GIVEN one Llama-3.1-8B replica driven by 8 clients, as genai-perf does
    const base = ['simulate', '--model', 'llama-3.1-8b', '--instance', 'p5.48xlarge', '--aggregated', '--replicas', '1', '--tp', '1',
      '--input-tokens', '2048', '--output-tokens', '128', '--requests', '200', '--json'];
    const run = async (...extra: string[]) => {
      const { code, out } = await disagg(...base, ...extra, '--out', tmpdir('sim-closed'));
      expect(code).toBe(0);
      return JSON.parse(out);
    };
    const v1 = await run('--concurrency', '8');
    const v0 = await run('--concurrency', '8', '--engine', 'vllm-v0');
    // THEN one run, at the rate the clients achieved, never more than 8 in flight
    expect(v1.sweep).toHaveLength(1);
    expect(v1.config.workload.concurrency).toBe(8);
    expect(v1.rate).toBeCloseTo(v1.result.requestsPerSecond, 2);
    // AND the V0 engine runs whole prompts in steps of their own: its decodes stall behind them (TPOT
    // p90 grows), where V1 mixes prompt chunks into decode steps
    expect(v0.config.pools[0]).toMatchObject({ chunkedPrefill: false, asyncScheduling: false });
    expect(v1.config.pools[0].chunkedPrefill).not.toBe(false);
    expect(v0.result.tpotSeconds.p90).toBeGreaterThan(v1.result.tpotSeconds.p90);
    // AND what cannot go together is refused with the fix
    const clash = await disagg('simulate', '--concurrency', '4', '--rate', '3');
    expect(clash.code).toBe(2);
    expect(clash.err).toMatch(/--concurrency \(4\) is a closed loop.*drop --rate/);
    const engine = await disagg('simulate', '--engine', 'vllm-v9');
    expect(engine.err).toMatch(/--engine: unknown engine 'vllm-v9'; use one of vllm-v1, vllm-v1-sync, vllm-v0, distserve, sglang, trtllm/);
    const plan = await disagg('plan', '--simulate', '--concurrency', '4');
    expect(plan.err).toMatch(/--concurrency \(4\) cannot be planned/);
  });

  test('a larger seed changes the numbers, the same seed repeats them', async () => {
    const run = async (seed: string) => JSON.parse((await disagg('simulate', '--requests', '80', '--rates', '5', '--rate', '5',
      '--input-tokens', 'lognormal:1000:500', '--seed', seed, '--json', '--out', tmpdir('sim'))).out).result;
    const a = await run('1');
    expect(await run('1')).toEqual(a);
    expect((await run('2')).ttftSeconds).not.toEqual(a.ttftSeconds);
  });

  test('bad flags are usage errors that say how to fix them', async () => {
    let r = await disagg('simulate', '--aggregated', '--prefill-tp', '2');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--prefill-tp does not apply with --aggregated; use --replicas, --tp and --pp/);
    r = await disagg('simulate', '--input-tokens', 'normal:5');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--input-tokens 'normal:5' is not a distribution; use N, uniform:MIN:MAX or lognormal:MEAN:STDDEV/);
    r = await disagg('simulate', '--policy', 'random');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--policy 'random' is not a routing policy/);
    r = await disagg('simulate', '--prefill-tp', '3');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--prefill-tp 3 must divide/);
  });
});

describe('disagg simulate: wide expert parallelism', () => {
  test('EP pools simulate one group per replica and charge the all-to-all; a dense model refuses --decode-ep', async () => {
    const out = tmpdir('sim');
    // GIVEN DeepSeek-V3 FP8 with an EP 8 prefill group and an EP 16 decode group on p5en
    const { code, out: stdout, err } = await disagg('simulate', '--model', 'deepseek-v3', '--weight-precision', 'fp8', '--kv-cache-precision', 'fp8',
      '--prefill-replicas', '1', '--prefill-ep', '8', '--decode-replicas', '1', '--decode-ep', '16', '--requests', '60', '--input-tokens', '1000', '--output-tokens', '100',
      '--rate', '4', '--rates', '4', '--json', '--out', out);
    // THEN it runs every request through both groups
    expect(err).not.toMatch(/error/i);
    expect(code).toBe(0);
    const json = JSON.parse(stdout);
    expect(json.pools).toBe('1 x prefill EP8 + 1 x decode EP16');
    expect(json.result.completed).toBe(60);
    const decode = json.config.pools.find((p: { role: string }) => p.role === 'decode');
    expect(decode.parallel).toEqual({ tensorParallel: 1, dataParallel: 16, expertParallel: 16, redundantExperts: 0 });
    expect(decode.hardware.scaleOutBytesPerSecond).toBe(5e10);
    expect(decode.maxConcurrencyPerReplica).toBe(256 * 16);
    // AND a dense model cannot take an EP size
    const dense = await disagg('simulate', '--decode-ep', '8', '--out', out);
    expect(dense.code).toBe(2);
    expect(dense.err).toMatch(/--decode-ep 8: .* is a dense model; expert parallelism needs routed experts/);
  });
});

describe('disagg simulate: KV block size', () => {
  test('an MLA model simulates at the block size vLLM runs (64 on H200), as the constructs configure it; 16 is refused', async () => {
    // GIVEN DeepSeek-V3 (MLA) on p5en (H200) WHEN its simulation configuration is built without --block-size
    const inputs = {
      model: ModelArchitecture.DEEPSEEK_V3,
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      maxContext: 8192,
      prefill: { replicas: 1, tensorParallel: 8 },
      decode: { replicas: 1, tensorParallel: 8 },
      workload: { kind: 'single' as const, requests: 10, arrival: { process: 'poisson' as const, ratePerSecond: 1 }, inputTokens: { mean: 1000 }, outputTokens: { mean: 100 } },
    };
    // THEN the router (the simulator's prefix-cache granularity) takes 64, Llama keeps 16
    expect(simulationConfig(inputs).router.kvBlockSize).toBe(64);
    expect(simulationConfig({ ...inputs, model: ModelArchitecture.LLAMA_3_3_70B }).router.kvBlockSize).toBe(16);
    // AND the CLI refuses --block-size 16 for it, naming the fix
    const r = await disagg('simulate', '--model', 'deepseek-v3', '--weight-precision', 'native', '--prefill-tp', '8', '--decode-tp', '8', '--block-size', '16');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--block-size \(16\) is not what vLLM runs deepseek-v3 with on p5en\.48xlarge .*use 64 or leave --block-size unset/);
  });
});

describe('disagg plan --simulate', () => {
  test('ranks candidates, names the best and writes its chart', async () => {
    const out = tmpdir('sim');
    const { code, out: stdout, err } = await disagg('plan', '--simulate', '--max-accelerators', '4', '--requests', '100',
      '--tpot', '0.05', '--price-per-hour', '80', '--crossover', '0.5,2', '--out', out);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^disagg plan --simulate: llama-3.3-70b on p5en\.48xlarge, at most 4 accelerators$/m);
    expect(stdout).toMatch(/^ {2}rank +mode +prefill +decode +accelerators +goodput\/s +TTFT p90 +TPOT p90 +req\/\$$/m);
    expect(stdout).toMatch(/^ +1 +(aggregated|disaggregated) /m);
    expect(stdout).toMatch(/^\d+ candidates: \d+ simulated to the end, \d+ pruned/m);
    expect(stdout).toMatch(/^Best: .*goodput [\d.]+ req\/s on [1-4] accelerators/m);
    expect(err).toMatch(/^planning: 100% (\d+)\/\1/m);
    wellFormedXml(fs.readFileSync(path.join(out, 'plan.svg'), 'utf8'));
    // AND it says where a prefill/decode split pays: each mode's best at each asked TTFT SLO, and a verdict
    expect(stdout).toMatch(/^Where a prefill\/decode split pays: the best of each mode at each TTFT SLO \(TPOT 50\.0 ms\), ratio of req\/\$/m);
    expect(stdout).toMatch(/^ +TTFT SLO +best aggregated +req\/\$ +best P\/D +req\/\$ +P\/D : agg +pays$/m);
    for (const slo of ['500 ms', '2.00 s \\*']) {
      expect(stdout).toMatch(new RegExp(`^ +${slo} +(\\d x TP\\d|none meets it) .* (P/D|aggregated|tie|neither)$`, 'm'));
    }
    expect(stdout).toMatch(/^\(\* the search above\.\) Verdict: (a prefill\/decode split|no deployment)/m);
    expect(err).toMatch(/^where P\/D pays: 100% 4\/4/m);
    // AND --json gives the planner's result, ranks from 1
    const json = JSON.parse((await disagg('plan', '--simulate', '--max-accelerators', '4', '--requests', '100', '--tpot', '0.05', '--json',
      '--crossover', 'off', '--out', out)).out);
    expect(json.result.candidates[0].rank).toBe(1);
    expect(json.crossover).toBeNull();
    expect(json.result.total).toBe(18);
    expect(json.bestSweep.length).toBe(6);
  });

  test('--trace plans for the trace: its rate is measured and required of every candidate', async () => {
    // GIVEN a trace of 300 requests at 4 req/s sharing a 512-token prefix
    const out = tmpdir('sim');
    const trace = path.join(out, 'trace.jsonl');
    fs.writeFileSync(trace, Array.from({ length: 300 }, (_, i) =>
      JSON.stringify({ timestamp_ms: i * 250, input_length: 1024, output_length: 64, hash_ids: [1, 2, 3, 4, 1000 + i] })).join('\n') + '\n');
    // WHEN planned for it
    const { code, out: stdout } = await disagg('plan', '--simulate', '--model', 'llama-3.1-8b', '--instance', 'p5.48xlarge',
      '--weight-precision', 'bf16', '--max-context', '4096', '--max-accelerators', '2', '--trace', trace, '--crossover', 'off', '--out', out);
    // THEN the trace's own rate is shown and the best carries it, with its headroom
    expect(code).toBe(0);
    expect(stdout).toMatch(/^ {2}trace: 300 records at 4\.00 req\/s;/m);
    const best = /^Best: .*goodput ([\d.]+) req\/s \(([\d.]+) x the trace's rate\)/m.exec(stdout);
    expect(best).not.toBeNull();
    expect(Number(best![1])).toBeGreaterThanOrEqual(4);
    expect(fs.existsSync(path.join(out, 'plan.svg'))).toBe(false);
  });

  test('each probe simulates the 400 requests sizeFor does unless --requests says otherwise', async () => {
    const run = async (...extra: string[]) => JSON.parse((await disagg('plan', '--simulate', '--max-accelerators', '2', '--tpot', '0.05',
      '--json', '--crossover', 'off', '--out', tmpdir('sim'), ...extra)).out).result.candidates;
    const byDefault = await run();
    expect(byDefault).toEqual(await run('--requests', '400'));
    expect(byDefault).not.toEqual(await run('--requests', '1000'));
  });

  test('--crossover: a bad list or a single mode is a usage error that says the fix', async () => {
    const bad = await disagg('plan', '--simulate', '--crossover', '0.5,soon');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--crossover '0\.5,soon': 'soon' is not a TTFT SLO in seconds; give a comma-separated list of positive seconds \(0\.25,1,4\) or off/);
    const one = await disagg('plan', '--simulate', '--modes', 'aggregated', '--crossover', '1');
    expect(one.code).toBe(2);
    expect(one.err).toMatch(/--crossover compares aggregated serving with a prefill\/decode split, but --modes is 'aggregated'/);
  });

  test('simulation flags without --simulate are refused', async () => {
    const r = await disagg('plan', '--ttft', '1');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--ttft needs --simulate/);
  });
});
