import { deviceWithMemory, nodeOf } from './fixtures';
import { AcceleratedInstanceType, Accelerator, ModelArchitecture, Precision } from '../../src/catalog';
import { ServingPlan, ServingPlanProps } from '../../src/sizing';

const GIB = 1024 ** 3;
const LLAMA_70B = ModelArchitecture.LLAMA_3_3_70B;
const P5 = AcceleratedInstanceType.P5_48XLARGE;
const P5EN = AcceleratedInstanceType.P5EN_48XLARGE;

const defaultDeployment: ServingPlanProps = {
  model: LLAMA_70B,
  instanceType: P5EN,
  weightPrecision: Precision.FP8,
  kvCachePrecision: Precision.FP8,
  maxContext: 8192,
};

describe('ServingPlan', () => {
  test('BF16 Llama-3.3-70B on one H100 does not fit; the error names the field, the value, both units and the fixes', () => {
    // GIVEN BF16 weights at tensorParallel 1 on an H100 (80 GiB)
    const props: ServingPlanProps = { model: LLAMA_70B, instanceType: P5, weightPrecision: Precision.BF16, tensorParallel: 1, maxContext: 8192 };
    // WHEN planned
    const plan = ServingPlan.create(props);
    // THEN it does not fit, and the one problem says why and what to do
    expect(plan.fits).toBe(false);
    expect(plan.problems).toHaveLength(1);
    const [problem] = plan.problems;
    expect(problem.field).toBe('tensorParallel');
    expect(problem.value).toBe('1');
    expect(problem.message).toMatch(/^'tensorParallel' \(1\) leaves too little memory for the weights: llama-3.3-70b needs 141.2 GB \(131.5 GiB\) of bf16 weights/);
    expect(problem.message).toMatch(/one H100 offers 72.0 GiB \(77.3 GB\) at gpuMemoryUtilization 0.9/);
    expect(problem.message).toMatch(/; use tensorParallel >= 2, fp8 weights or a B200 \(p6-b200.48xlarge\)$/);
    // AND validate returns the same, and assertFits throws it
    expect(ServingPlan.validate(props)).toEqual(plan.problems);
    expect(() => ServingPlan.assertFits(props)).toThrow(/llama-3.3-70b does not fit p5.48xlarge:\n- 'tensorParallel' \(1\) leaves too little memory/);
  });

  test('the KV cache precision has the constructs\' name; the first name still works and a disagreement is an error', () => {
    const base = { model: ModelArchitecture.LLAMA_3_1_8B, instanceType: AcceleratedInstanceType.fromName('p5.48xlarge'), maxContext: 8192, tensorParallel: 1 };
    expect(ServingPlan.create({ ...base, kvCachePrecision: Precision.FP8 }).kvCache.precision).toBe(Precision.FP8);
    expect(ServingPlan.create({ ...base, kvPrecision: Precision.FP8 }).kvCache.precision).toBe(Precision.FP8);
    expect(ServingPlan.create({ ...base, kvPrecision: Precision.FP8, kvCachePrecision: Precision.FP8 }).kvCache.precision).toBe(Precision.FP8);
    expect(() => ServingPlan.create({ ...base, kvPrecision: Precision.FP8, kvCachePrecision: Precision.BF16 }))
      .toThrow("'kvPrecision' (fp8) and 'kvCachePrecision' (bf16) name the same setting and disagree; pass only 'kvCachePrecision'");
  });

  test('the default deployment fits at the smallest tensor-parallel size', () => {
    const plan = ServingPlan.assertFits(defaultDeployment);
    expect(plan.fits).toBe(true);
    expect(plan.problems).toEqual([]);
    expect(ServingPlan.validate(defaultDeployment)).toEqual([]);
    expect(plan.tensorParallelChosen).toBe(true);
    expect(plan.parallelism.tensorParallel).toBe(1);
    expect(plan.validTensorParallelSizes).toEqual([1, 2, 4, 8]);
    // Memory adds up: usable = weights + reserve + KV cache
    expect(plan.memory.usableBytes).toBeCloseTo(141 * GIB * 0.9, 0);
    expect(plan.weightBytesPerRank + plan.memory.reserveBytes + plan.kvCacheBytesPerRank).toBeCloseTo(plan.memory.usableBytes, 0);
    // KV tokens and sequences follow from 163,840 B/token (FP8)
    expect(plan.kvTokens).toBe(Math.floor(plan.kvCacheBytesPerRank / 163_840));
    expect(plan.maxConcurrency).toBe(Math.floor(plan.kvCacheBytesPerRank / (8192 * 163_840)));
    // EFA: one GPU of 8 gets 16/8 interfaces
    expect(plan.layout.efaInterfacesPerPod).toBe(2);
    expect(plan.layout.replicasPerNode).toBe(8);
  });

  test('a small device makes the plan choose a larger tensor-parallel size', () => {
    const plan = ServingPlan.create({ ...defaultDeployment, instanceType: P5, weightPrecision: Precision.BF16, kvCachePrecision: Precision.BF16 });
    expect(plan.fits).toBe(true);
    expect(plan.parallelism.tensorParallel).toBe(2);
    const tp1 = plan.tensorParallelOptions.find(o => o.tensorParallel === 1)!;
    expect(tp1.fits).toBe(false);
    expect(tp1.problem).toMatch(/'tensorParallel' \(1\) leaves too little memory/);
  });

  test('when nothing fits, the largest valid size is chosen and the problem says so', () => {
    // Llama-3.1-405B BF16 (812 GB) exceeds one p5.48xlarge (8 x 72 GiB usable)
    const plan = ServingPlan.create({ model: ModelArchitecture.LLAMA_3_1_405B, instanceType: P5, weightPrecision: Precision.BF16, maxContext: 8192 });
    expect(plan.fits).toBe(false);
    expect(plan.parallelism.tensorParallel).toBe(8);
    expect(plan.reasons[0]).toMatch(/use tensorParallel 8 with pipelineParallel 2 \(2 nodes per replica\), fp8 weights/);
  });

  test('an invalid tensor-parallel size is a problem naming the valid ones', () => {
    const problems = ServingPlan.validate({ ...defaultDeployment, tensorParallel: 3 });
    expect(problems[0]).toEqual({
      field: 'tensorParallel', value: '3', message: "'tensorParallel' (3) must divide the 64 attention heads of llama-3.3-70b; use 1, 2, 4 or 8",
    });
  });

  test('a context longer than the model supports is a problem', () => {
    const problems = ServingPlan.validate({ ...defaultDeployment, maxContext: 200_000 });
    expect(problems.map(p => p.field)).toContain('maxContext');
    expect(problems[0].message).toBe("'maxContext' (200000) exceeds the 131,072-token context of llama-3.3-70b; use at most 131072");
  });

  test('a sequence that does not fit the KV cache left is a problem with the longest context that fits', () => {
    // GIVEN Llama-3.1-8B BF16 on one L40S (44 GiB) at 60% utilization, 131072 tokens and TP 1: 16 GiB of KV per sequence
    const props: ServingPlanProps = {
      model: ModelArchitecture.LLAMA_3_1_8B,
      instanceType: AcceleratedInstanceType.G6E_12XLARGE,
      weightPrecision: Precision.BF16,
      tensorParallel: 1,
      maxContext: 131_072,
      gpuMemoryUtilization: 0.6,
    };
    const plan = ServingPlan.create(props);
    expect(plan.fits).toBe(false);
    const problem = plan.problems[0];
    expect(problem.field).toBe('maxContext');
    expect(problem.message).toMatch(/^'maxContext' \(131072\) needs 16.0 GiB of bf16 KV cache per accelerator for one sequence, but one L40S has [\d.]+ GiB left/);
    const longest = Number(/maxContext <= (\d+)/.exec(problem.message)![1]);
    expect(problem.message).toMatch(/tensorParallel >= 2/);
    expect(problem.message).toMatch(/gpuMemoryUtilization 0.95/);
    // AND the suggested context does fit
    expect(ServingPlan.create({ ...props, maxContext: longest }).fits).toBe(true);
    expect(ServingPlan.create({ ...props, maxContext: longest + 16 }).fits).toBe(false);
  });

  test('expert-parallel and layout problems surface from the rules', () => {
    const v3: ServingPlanProps = { model: ModelArchitecture.DEEPSEEK_V3, instanceType: AcceleratedInstanceType.P5EN_48XLARGE, maxContext: 8192 };
    expect(ServingPlan.validate({ ...v3, tensorParallel: 2, dataParallel: 3, expertParallel: true }).map(p => p.field)).toContain('dataParallel');
    expect(ServingPlan.validate({ ...defaultDeployment, expertParallel: true }).map(p => p.field)).toContain('expertParallel');
    expect(ServingPlan.validate({ ...defaultDeployment, tensorParallel: 4, pipelineParallel: 3 }).map(p => p.field)).toContain('pipelineParallel');
    // DeepSeek-V3 with wide EP over two p5en nodes fits
    const wide = ServingPlan.create({ ...v3, tensorParallel: 1, dataParallel: 16, expertParallel: true });
    expect(wide.fits).toBe(true);
    expect(wide.layout).toMatchObject({ nodesPerReplica: 2, acceleratorsPerPod: 8, efaInterfacesPerPod: 16 });
    // AND data-parallel attention multiplies the KV capacity (each rank holds its own sequences)
    expect(wide.maxConcurrency % 16).toBe(0);
  });

  test('malformed inputs throw from create; validate turns them into problems and never throws', () => {
    const cases: Array<[Partial<ServingPlanProps>, RegExp]> = [
      [{ maxContext: 0 }, /'maxContext' \(0\) must be a positive integer/],
      [{ maxContext: 1.5 }, /'maxContext' \(1.5\)/],
      [{ gpuMemoryUtilization: 1.1 }, /'gpuMemoryUtilization' \(1.1\)/],
      [{ kvBlockSize: 0 }, /'kvBlockSize' \(0\)/],
      [{ pricePerHour: -1 }, /'pricePerHour' \(-1\)/],
      [{ tensorParallel: 0 }, /'tensorParallel' \(0\)/],
      [{ kvCachePrecision: Precision.INT4 }, /'kvCachePrecision' \(int4\) cannot hold a KV cache/],
      [{ maxNumBatchedTokens: -5 }, /'maxNumBatchedTokens' \(-5\)/],
      [{ maxNumSeqs: 0 }, /'maxNumSeqs' \(0\)/],
      [{ batchSizes: [0] }, /'batchSize' \(0\)/],
      [{ promptLengths: [2.5] }, /'promptTokens' \(2.5\)/],
      [{ decodeContextTokens: -1 }, /'decodeContextTokens' \(-1\)/],
      [{ computeEfficiency: 2 }, /'computeEfficiency' \(2\)/],
    ];
    for (const [override, pattern] of cases) {
      const props = { ...defaultDeployment, ...override };
      expect(() => ServingPlan.create(props)).toThrow(pattern);
      const problems = ServingPlan.validate(props);
      expect(problems).toHaveLength(1);
      expect(problems[0].message).toMatch(pattern);
      expect(problems[0].field).not.toBe('');
    }
  });

  test('estimates: TTFT per prompt length, TPOT per batch size, capacity flags and cost', () => {
    const plan = ServingPlan.create({ ...defaultDeployment, pricePerHour: 98.32 });
    expect(plan.prefillEstimates.map(e => e.promptTokens)).toEqual([1024, 4096, 8192]);
    expect(plan.decodeEstimates.map(e => e.batchSize)).toEqual([1, 8, 32, 128]);
    for (const e of plan.decodeEstimates) {
      expect(e.withinKvCapacity).toBe(e.batchSize <= plan.maxConcurrency);
      // one GPU of eight pays an eighth of the instance price
      expect(e.costPerMillionOutputTokens).toBeCloseTo((98.32 / 8) / (e.tokensPerSecond * 3600) * 1e6, 6);
    }
    // AND without a price there is no cost
    expect(ServingPlan.create(defaultDeployment).decodeEstimates[0].costPerMillionOutputTokens).toBeUndefined();
    // AND short contexts drop the 4096 prompt length
    expect(ServingPlan.create({ ...defaultDeployment, maxContext: 2048 }).prefillEstimates.map(e => e.promptTokens)).toEqual([1024, 2048]);
  });

  test('notes explain KV head replication, weight-only math and sliding windows', () => {
    const replicated = ServingPlan.create({ ...defaultDeployment, instanceType: AcceleratedInstanceType.P6E_GB200_36XLARGE, tensorParallel: 16 });
    expect(replicated.notes.join('\n')).toMatch(/tensorParallel 16 exceeds the 8 KV heads of llama-3.3-70b: each KV head is stored on 2 ranks/);
    const gptOss = ServingPlan.create({ model: ModelArchitecture.GPT_OSS_120B, instanceType: P5EN, maxContext: 8192 });
    expect(gptOss.fits).toBe(true);
    expect(gptOss.notes.join('\n')).toMatch(/H200 has no native fp4 math/);
    expect(gptOss.notes.join('\n')).toMatch(/18 of 36 layers keep only a 128-token window/);
  });

  test('property: more memory never fits fewer tokens', () => {
    for (const model of [ModelArchitecture.LLAMA_3_1_8B, ModelArchitecture.QWEN3_32B, ModelArchitecture.GPT_OSS_20B]) {
      let previous = -1;
      for (let memoryGib = 16; memoryGib <= 256; memoryGib += 8) {
        const plan = ServingPlan.create({ model, instanceType: nodeOf(deviceWithMemory(memoryGib)), tensorParallel: 1, maxContext: 4096 });
        expect(plan.kvTokens).toBeGreaterThanOrEqual(previous);
        expect(plan.kvTokens).toBeGreaterThanOrEqual(0);
        previous = plan.kvTokens;
      }
      expect(previous).toBeGreaterThan(0);
    }
  });

  test('property: an FP8 KV cache holds twice the tokens of BF16', () => {
    for (const model of ModelArchitecture.all()) {
      const props: ServingPlanProps = {
        model, instanceType: AcceleratedInstanceType.P6_B200_48XLARGE, weightPrecision: Precision.FP8, tensorParallel: 8, maxContext: 4096,
      };
      const bf16 = ServingPlan.create({ ...props, kvCachePrecision: Precision.BF16 });
      const fp8 = ServingPlan.create({ ...props, kvCachePrecision: Precision.FP8 });
      if (bf16.kvTokens === 0) continue; // does not fit at all
      expect(fp8.kvTokens).toBeGreaterThanOrEqual(2 * bf16.kvTokens);
      expect(fp8.kvTokens).toBeLessThanOrEqual(2 * bf16.kvTokens + 1);
    }
  });

  test('property: across the tensor-parallel options, per-rank weights never rise and KV tokens never fall', () => {
    for (const model of ModelArchitecture.all()) {
      const plan = ServingPlan.create({ model, instanceType: AcceleratedInstanceType.P6_B200_48XLARGE, maxContext: 4096 });
      const options = plan.tensorParallelOptions;
      for (let i = 1; i < options.length; i++) {
        expect(options[i].weightBytesPerRank).toBeLessThanOrEqual(options[i - 1].weightBytesPerRank);
        expect(options[i].kvTokens).toBeGreaterThanOrEqual(options[i - 1].kvTokens);
      }
    }
  });

  test('a bigger accelerator is only suggested when it holds the configuration; beyond one node, pipeline stages', () => {
    // GIVEN Llama-405B BF16 (811 GB) at TP 1: no catalogued device holds it, nor does TP 8 on one p5.48xlarge
    const plan = ServingPlan.create({
      model: ModelArchitecture.LLAMA_3_1_405B, instanceType: P5, weightPrecision: Precision.BF16, tensorParallel: 1, maxContext: 8192,
    });
    expect(plan.reasons[0]).not.toMatch(/ an? [A-Z]/);
    expect(plan.reasons[0]).not.toMatch(/tensorParallel >=/);
    expect(plan.reasons[0]).toMatch(/use tensorParallel 8 with pipelineParallel 2 \(2 nodes per replica\)$/);
    // AND Accelerator.all() is what the suggestion draws from
    expect(Accelerator.all().every(a => a.memoryGib < 812e9 / GIB)).toBe(true);
  });
});
