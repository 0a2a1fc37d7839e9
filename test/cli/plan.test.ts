import { disagg, tmpdir } from './util';
import { ModelArchitecture, AcceleratedInstanceType } from '../../src/catalog';
import { DEFAULT_DEPLOYMENT } from '../../src/cli/defaults';

describe('disagg plan', () => {
  test('with no flags plans the default deployment and exits 0 because it fits', async () => {
    // WHEN
    const { code, out, err } = await disagg('plan');
    // THEN the header names the default model, instance and context
    expect(code).toBe(0);
    expect(err).toBe('');
    expect(out).toMatch(new RegExp(`^disagg plan: ${DEFAULT_DEPLOYMENT.model} on ${DEFAULT_DEPLOYMENT.instance.replace('.', '\\.')} \\(8 x H200`));
    expect(out).toMatch(/all weights fp8/);
    expect(out).toMatch(/KV cache {2}fp8, 163,840 bytes per token/);
    expect(out).toMatch(/context {3}8,192 tokens/);
    // (TP 4, the pods synth, simulate and local deploy, with the smallest size that fits named)
    expect(out).toMatch(/^FITS: TP 4; 2 replicas per node, 4 accelerators and 8 EFA interfaces per pod\n {2}\(TP 4: the pods `disagg synth`, `simulate` and `local` deploy without --tp; the smallest size that fits is TP 1, in the table below\)$/m);
    // AND the tables are there: TP options with the plan marked, TTFT per prompt, TPOT per batch
    expect(out).toMatch(/^ {2}TP {2}weights\/rank +KV\/rank +KV tokens +seqs @8,192 +replicas\/node +EFA\/pod +fits$/m);
    expect(out).toMatch(/^ {3}4 +16\.4 GiB .* yes {2}<- plan$/m);
    expect(out).toMatch(/^ {3}8 +8\.2 GiB .* 16 {2}yes$/m);
    expect(out).toMatch(/^ +1,024 +[\d.]+ ms +[\d,]+ +compute$/m);
    for (const batch of ['1', '8', '32', '128']) {
      expect(out).toMatch(new RegExp(`^ +${batch} +[\\d.]+ ms +[\\d,]+ +memory`, 'm'));
    }
    expect(out).toMatch(/Assumptions: roofline estimates at 50% of peak FLOP\/s, 70% of HBM bandwidth/);
  });

  test('the issue example with --tp and --price-per-hour adds a cost column', async () => {
    const { code, out } = await disagg('plan', '--model', 'llama-3.3-70b', '--instance', 'p5en.48xlarge', '--weight-precision', 'fp8',
      '--kv-cache-precision', 'fp8', '--max-context', '8192', '--tp', '2', '--price-per-hour', '98.32');
    expect(code).toBe(0);
    expect(out).toMatch(/^FITS: TP 2; 4 replicas per node, 2 accelerators and 4 EFA interfaces per pod$/m);
    expect(out).toMatch(/cost\/M output tokens/);
    expect(out).toMatch(/^ +1 +[\d.]+ ms +[\d,]+ +memory +\d+\.\d\d +yes$/m);
    expect(out).toMatch(/Cost: 98.32 per instance-hour/);
  });

  test('--json emits only JSON describing the plan', async () => {
    const { code, out } = await disagg('plan', '--json');
    expect(code).toBe(0);
    const json = JSON.parse(out);
    expect(json.fits).toBe(true);
    expect(json.problems).toEqual([]);
    expect(json.model.name).toBe(DEFAULT_DEPLOYMENT.model);
    expect(json.instanceType.name).toBe(DEFAULT_DEPLOYMENT.instance);
    expect(json.maxContext).toBe(DEFAULT_DEPLOYMENT.context);
    expect(json.kvCache).toMatchObject({ precision: 'fp8', bytesPerToken: 163_840 });
    expect(json.parallelism).toMatchObject({ tensorParallel: 4, tensorParallelChosen: true });
    expect(json.validTensorParallelSizes).toEqual([1, 2, 4, 8]);
    expect(json.tensorParallelOptions.map((o: { efaInterfacesPerPod: number }) => o.efaInterfacesPerPod)).toEqual([2, 4, 8, 16]);
    expect(json.estimates.decode.map((d: { batchSize: number }) => d.batchSize)).toEqual([1, 8, 32, 128]);
    expect(json.estimates.prefill.map((p: { promptTokens: number }) => p.promptTokens)).toEqual([1024, 4096, 8192]);
    expect(json.kvTokens).toBeGreaterThan(0);
    expect(json.memoryPerRank.usableBytes).toBeCloseTo(141 * 1024 ** 3 * 0.9, 0);
  });

  test('a model of a shorter context than the default 8,192 gets its own, in plan and simulate', async () => {
    // GIVEN OPT-13B, whose context is 2,048 tokens, and no --max-context
    const plan = await disagg('plan', '--model', 'opt-13b', '--instance', 'p4de.24xlarge', '--weight-precision', 'fp16');
    // THEN it is planned at 2,048 instead of refused for 8,192
    expect(plan.code).toBe(0);
    expect(plan.out).toMatch(/^ {2}context {3}2,048 tokens;/m);
    const sim = await disagg('simulate', '--model', 'opt-13b', '--instance', 'p4de.24xlarge', '--weight-precision', 'fp16', '--prefill-tp', '1',
      '--decode-tp', '1', '--requests', '20', '--rates', '1', '--out', tmpdir('ctx'));
    expect(sim.err).not.toMatch(/maxContext/);
    expect(sim.code).toBe(0);
    // AND an explicit --max-context above the model's is still refused, naming the limit
    const over = await disagg('plan', '--model', 'opt-13b', '--instance', 'p4de.24xlarge', '--weight-precision', 'fp16', '--max-context', '4096');
    expect(over.out + over.err).toMatch(/exceeds the 2,048-token context of opt-13b; use at most 2048/);
  });

  test('a configuration that does not fit prints why and exits 1', async () => {
    const { code, out } = await disagg('plan', '--instance', 'p5.48xlarge', '--weight-precision', 'bf16', '--kv-cache-precision', 'bf16', '--tp', '1');
    expect(code).toBe(1);
    expect(out).toMatch(/^DOES NOT FIT: TP 1;/m);
    expect(out).toMatch(/- --tp 1 leaves too little memory for the weights: llama-3.3-70b needs 141.2 GB \(131.5 GiB\) of bf16 weights.*use --tp 2 \(or more\), --weight-precision fp8 or --instance p6-b200.48xlarge \(B200\)/);
    const json = JSON.parse((await disagg('plan', '--instance', 'p5.48xlarge', '--weight-precision', 'bf16', '--tp', '1', '--json')).out);
    expect(json.fits).toBe(false);
    expect(json.problems[0].field).toBe('tensorParallel');
  });

  test('the KV cache precision follows vLLM\'s auto once --weight-precision is given', async () => {
    // GIVEN no flags, only --weight-precision, and --weight-precision with --kv-cache-precision
    const kvOf = async (...argv: string[]) => JSON.parse((await disagg('plan', ...argv, '--json')).out).kvCache.precision;
    // WHEN planned THEN the default deployment keeps FP8 KV, other weights get the activation dtype
    expect(await kvOf()).toBe('fp8');
    expect(await kvOf('--weight-precision', 'bf16')).toBe('bf16');
    expect(await kvOf('--weight-precision', 'bf16', '--kv-cache-precision', 'fp8')).toBe('fp8');
  });

  test('an invalid tensor-parallel size exits 1 with the valid sizes', async () => {
    const { code, out } = await disagg('plan', '--tp', '3');
    expect(code).toBe(1);
    expect(out).toMatch(/- --tp 3 must divide the 64 attention heads of llama-3.3-70b; use 1, 2, 4 or 8/);
  });

  test('native weights of an MoE model, and expert parallelism', async () => {
    const { code, out } = await disagg('plan', '--model', 'openai/gpt-oss-120b', '--weight-precision', 'native', '--json');
    expect(code).toBe(0);
    expect(JSON.parse(out).weights).toMatchObject({ expertPrecision: 'fp4', densePrecision: 'bf16' });
    const ep = JSON.parse((await disagg('plan', '--model', 'deepseek-v3', '--weight-precision', 'native', '--tp', '1', '--dp', '16', '--expert-parallel', '--json')).out);
    expect(ep.fits).toBe(true);
    expect(ep.parallelism).toMatchObject({ expertParallel: true, expertParallelSize: 16 });
    expect(ep.layout).toMatchObject({ nodesPerReplica: 2, efaInterfacesPerPod: 16 });
  });

  test("an MLA model's KV block size is what vLLM runs on the GPU (64 on H200), as in the constructs; --block-size 16 is refused", async () => {
    // GIVEN DeepSeek-V3 (MLA) on p5en (H200), and Llama (GQA) on the same GPUs
    const ds = JSON.parse((await disagg('plan', '--model', 'deepseek-v3', '--weight-precision', 'native', '--tp', '1', '--dp', '16', '--expert-parallel', '--json')).out);
    const llama = JSON.parse((await disagg('plan', '--json')).out);
    // THEN the MLA model takes FlashMLA's 64-token blocks and the GQA model vLLM's 16
    expect(ds.kvCache.blockSizeTokens).toBe(64);
    expect(llama.kvCache.blockSizeTokens).toBe(16);
    // AND a block size vLLM would replace is a usage error naming the flag and the fix, with or without --simulate
    for (const extra of [[], ['--simulate', '--max-accelerators', '8']]) {
      const r = await disagg('plan', '--model', 'deepseek-v3', '--weight-precision', 'native', '--block-size', '16', ...extra);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/--block-size \(16\) is not what vLLM runs deepseek-v3 with on p5en\.48xlarge .*use 64 or leave --block-size unset/);
    }
  });

  test('unknown model or instance exits 2 and lists the known names', async () => {
    const model = await disagg('plan', '--model', 'llama-9000');
    expect(model.code).toBe(2);
    expect(model.out).toBe('');
    expect(model.err).toMatch(/unknown model 'llama-9000' \(--model\); known models: /);
    for (const m of ModelArchitecture.all()) {
      expect(model.err).toContain(m.name);
    }
    const instance = await disagg('plan', '--instance', 'p9.huge', '--json');
    expect(instance.code).toBe(2);
    expect(instance.out).toBe('');
    for (const t of AcceleratedInstanceType.all()) {
      expect(instance.err).toContain(t.name);
    }
  });

  test.each([
    [['--weight-precision', 'fp7'], /--weight-precision: Unknown precision 'fp7'; known: /],
    [['--kv-cache-precision', 'int4'], /--kv-cache-precision 'int4': vLLM cannot hold a KV cache in int4; use bf16, fp16, fp8/],
    [['--max-context', 'abc'], /--max-context expects a positive integer, got 'abc'/],
    [['--tp', '0'], /--tp expects a positive integer, got '0'/],
    [['--price-per-hour=-3'], /--price-per-hour expects a positive number, got '-3'/],
    [['--price-per-hour', '0'], /--price-per-hour expects a positive number, got '0'/],
    [['--batch-sizes', '1,x'], /--batch-sizes expects a positive integer, got 'x'/],
    [['--batch-sizes', ','], /--batch-sizes expects a comma-separated list/],
    [['--gpu-memory-utilization', '1.5'], /--gpu-memory-utilization '1.5' must be a fraction in \(0, 1\], e.g. 0.9/],
    [['--max-num-seqs', '0'], /--max-num-seqs expects a whole number >= 1, got '0'/],
    [['--block-size', '4096'], /--block-size \(4096\) must be at most 1024; vLLM's block sizes are 8, 16 \(default\), 32, 64 and 128/],
    [['--cpu-offload-gib', '8'], /--cpu-offload-gib needs --simulate/],
    [['--frobnicate'], /Unknown option '--frobnicate'/],
    [['extra'], /Unexpected argument 'extra'|positional/i],
  ])('bad arguments %p exit 2 with a message', async (args, pattern) => {
    const { code, out, err } = await disagg('plan', ...args);
    expect(code).toBe(2);
    expect(out).toBe('');
    expect(err).toMatch(pattern);
    expect(err).toMatch(/Run 'disagg plan --help' for the options/);
  });

  test('--kv-cache-precision auto means bf16, --batch-sizes and --prompt-lengths choose the estimates', async () => {
    const json = JSON.parse((await disagg('plan', '--kv-cache-precision', 'auto', '--batch-sizes', '2,4', '--prompt-lengths', '100', '--decode-context', '512', '--json')).out);
    expect(json.kvCache.precision).toBe('bf16');
    expect(json.estimates.decode.map((d: { batchSize: number }) => d.batchSize)).toEqual([2, 4]);
    expect(json.estimates.prefill.map((p: { promptTokens: number }) => p.promptTokens)).toEqual([100]);
    expect(json.estimates.decodeContextTokens).toBe(512);
  });

  describe('wide expert parallelism for an MoE model', () => {
    const deepseek = ['plan', '--model', 'deepseek-v3', '--instance', 'p5en.48xlarge', '--weight-precision', 'fp8', '--kv-cache-precision', 'fp8', '--max-context', '8192'];

    test('sizes EP over whole nodes, shows the all-to-all share, and picks decode, prefill and P:D', async () => {
      const { code, out, err } = await disagg(...deepseek);
      expect(err).toBe('');
      expect(code).toBe(0);
      expect(out).toMatch(/^Wide expert parallelism \(TP 1, one attention rank per accelerator; 1,024 prompt \+ 1,024 output tokens; at most 256 sequences per rank\)$/m);
      expect(out).toMatch(/^ +EP +nodes +experts\/rank +KV seqs\/rank +batch\/rank +TPOT +output tok\/s\/acc +all-to-all +prefill tok\/s\/acc +all-to-all +fits$/m);
      // EP 8, 16, 32, 64: whole p5en nodes, each rank 32, 16, 8, 4 of the 256 experts
      for (const [ep, nodes, experts] of [[8, 1, 32], [16, 2, 16], [32, 4, 8], [64, 8, 4]]) {
        expect(out).toMatch(new RegExp(`^ +${ep} +${nodes} +${experts} +[\\d,]+ +256 +[\\d.]+ ms +[\\d,]+ +\\d+% +[\\d,]+ +\\d+% +yes`, 'm'));
      }
      expect(out).toMatch(/^Decode: EP \d+ \(\d+ nodes?\), [\d,]+ output tok\/s per accelerator at \d+ sequences per rank, \d+% of each step in the all-to-all\.$/m);
      expect(out).toMatch(/^Prefill: EP \d+, [\d,]+ prompt tok\/s per accelerator\. P:D = \d+ prefill groups? of EP \d+ per decode group of EP \d+ \([\d.]+ prefill accelerators per decode accelerator keep both busy\)\.$/m);
      expect(out).toMatch(/Assumptions: all-to-all FP8 dispatch and BF16 combine at 50% of each accelerator's EFA share \(400 Gbit\/s\)/);
    });

    test('the all-to-all share grows as the group spans nodes, and the JSON has the same numbers', async () => {
      const { code, out } = await disagg(...deepseek, '--json');
      expect(code).toBe(0);
      const sizing = JSON.parse(out).expertParallelSizing;
      const share = (ep: number) => sizing.options.find((o: any) => o.expertParallel === ep).decodeAllToAllShare;
      expect(share(8)).toBeGreaterThan(0);
      expect(share(16)).toBeGreaterThan(share(8));
      expect(share(64)).toBeGreaterThan(share(16));
      expect(sizing.decode.decodeTokensPerSecondPerAccelerator).toBeGreaterThan(0);
      expect(sizing.prefillGroupsPerDecodeGroup).toBeGreaterThanOrEqual(1);
    });

    test('a layout that does not fit exits 1 as for a dense model, and names the expert-parallel layout that does', async () => {
      // GIVEN DeepSeek-V3 asked for at TP4 (its FP8 weights need 156 GiB per H200 there)
      const { code, out } = await disagg(...deepseek, '--tp', '4');
      // THEN the verdict and the exit code agree, and the verdict says what fits instead
      expect(code).toBe(1);
      expect(out).toMatch(/^DOES NOT FIT: TP 4/m);
      expect(out).toMatch(/^ {2}- an expert-parallel layout fits instead: EP 8 \(1 node\); .*--expert-parallel --tp 1 --dp 8$/m);
      const json = await disagg(...deepseek, '--tp', '4', '--json');
      expect(json.code).toBe(1);
      expect(JSON.parse(json.out).fits).toBe(false);
      // AND the layout it names does fit
      const ep = await disagg(...deepseek, '--expert-parallel', '--tp', '1', '--dp', '8', '--json');
      expect(ep.code).toBe(0);
      expect(JSON.parse(ep.out).fits).toBe(true);
    });

    test('--tpot limits the batch per rank, and the ISL/OSL flags apply without --simulate', async () => {
      const loose = JSON.parse((await disagg(...deepseek, '--json')).out).expertParallelSizing;
      const { code, out } = await disagg(...deepseek, '--json', '--tpot', '0.05', '--input-tokens', '2000', '--output-tokens', '500', '--max-accelerators', '32');
      expect(code).toBe(0);
      const tight = JSON.parse(out).expertParallelSizing;
      expect(tight.inputs).toMatchObject({ inputTokens: 2000, outputTokens: 500, tpotSeconds: 0.05, maxAccelerators: 32 });
      expect(tight.options.map((o: any) => o.expertParallel)).toEqual([8, 16, 32]);
      for (const o of tight.options.filter((x: any) => x.fits)) {
        expect(o.tpotSeconds).toBeLessThanOrEqual(0.05);
      }
      const batch = (s: any, ep: number) => s.options.find((o: any) => o.expertParallel === ep).decodeBatchPerRank;
      expect(batch(tight, 16)).toBeLessThan(batch(loose, 16));
    });

    test('a dense model gets no EP table, and the EP flags still need --simulate there', async () => {
      const { out } = await disagg('plan');
      expect(out).not.toMatch(/Wide expert parallelism/);
      const { code, err } = await disagg('plan', '--input-tokens', '1000');
      expect(code).toBe(2);
      expect(err).toMatch(/--input-tokens needs --simulate/);
      const tooLong = await disagg(...deepseek, '--input-tokens', '8000', '--output-tokens', '1000');
      expect(tooLong.code).toBe(2);
      expect(tooLong.err).toMatch(/--input-tokens 8000 \+ --output-tokens 1000 exceed --max-context 8192/);
    });
  });

  test('plan --help and -h print the options', async () => {
    for (const flag of ['--help', '-h']) {
      const { code, out } = await disagg('plan', flag);
      expect(code).toBe(0);
      expect(out).toMatch(/^Usage: disagg plan \[options\]/);
      expect(out).toMatch(/--model NAME/);
      expect(out).toMatch(/--json/);
      expect(out).toContain(`default ${DEFAULT_DEPLOYMENT.instance}`);
    }
  });
});

describe('disagg', () => {
  test('--help lists the commands', async () => {
    const { code, out } = await disagg('--help');
    expect(code).toBe(0);
    expect(out).toMatch(/^Usage: disagg <command> \[options\]/);
    expect(out).toMatch(/^ {2}plan {6}Check that a model fits/m);
  });

  test('no command or an unknown one exits 2 with the usage', async () => {
    const none = await disagg();
    expect(none.code).toBe(2);
    expect(none.err).toMatch(/Usage: disagg/);
    const unknown = await disagg('deploy');
    expect(unknown.code).toBe(2);
    expect(unknown.err).toMatch(/unknown command 'deploy'; known: (\w+, )*plan(, \w+)*\n/);
  });
});
