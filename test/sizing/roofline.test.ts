import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src/catalog';
import { KvCacheFootprint, Parallelism, Roofline, RooflineBound, WeightFootprint } from '../../src/sizing';

const P5 = AcceleratedInstanceType.P5_48XLARGE;

function rooflineFor(model: ModelArchitecture, weightPrecision: Precision, parallelism?: Parallelism, instanceType = P5): Roofline {
  return Roofline.of({
    instanceType,
    weights: WeightFootprint.of({ model, weightPrecision }),
    kvCache: KvCacheFootprint.of({ model, precision: Precision.BF16 }),
    parallelism,
  });
}

describe('Roofline', () => {
  test('decode of Llama-3.1-8B BF16 on one H100 at batch 1 is weights over HBM bandwidth over efficiency', () => {
    // GIVEN 8.03B parameters x 2 bytes = 16.06 GB, 3.35 TB/s, efficiency 0.7
    const roofline = rooflineFor(ModelArchitecture.LLAMA_3_1_8B, Precision.BF16);
    // WHEN one sequence with a one-token context decodes
    const step = roofline.decodeStep(1, 1);
    // THEN the step is memory bound and within 1% of 16.06e9 / 3.35e12 / 0.7 (6.85 ms)
    const expected = 16.06e9 / 3.35e12 / 0.7;
    expect(step.bound).toBe(RooflineBound.MEMORY);
    expect(Math.abs(step.stepSeconds - expected) / expected).toBeLessThan(0.01);
    expect(step.communicationSeconds).toBe(0);
    expect(step.tokensPerSecond).toBeCloseTo(1 / step.stepSeconds, 6);
  });

  test('efficiency factors are overridable and scale the estimate', () => {
    const model = ModelArchitecture.LLAMA_3_1_8B;
    const base = { instanceType: P5, weights: WeightFootprint.of({ model }), kvCache: KvCacheFootprint.of({ model, precision: Precision.BF16 }) };
    const slow = Roofline.of({ ...base, memoryBandwidthEfficiency: 0.35 }).decodeStep(1, 1);
    const fast = Roofline.of({ ...base, memoryBandwidthEfficiency: 0.7 }).decodeStep(1, 1);
    expect(slow.stepSeconds / fast.stepSeconds).toBeCloseTo(2, 5);
  });

  test('KV reads add to decode time with context and batch', () => {
    const roofline = rooflineFor(ModelArchitecture.LLAMA_3_1_8B, Precision.BF16);
    const short = roofline.decodeStep(8, 1024);
    const long = roofline.decodeStep(8, 8192);
    // 8 sequences x 7168 more tokens x 131,072 B/token over 3.35 TB/s x 0.7
    const extra = (8 * 7168 * 131_072) / (3.35e12 * 0.7);
    expect(long.memorySeconds - short.memorySeconds).toBeCloseTo(extra, 6);
  });

  test('property: decode step time and throughput never fall as the batch grows; huge batches turn compute bound', () => {
    const roofline = rooflineFor(ModelArchitecture.LLAMA_3_3_70B, Precision.FP8, Parallelism.of({ tensorParallel: 4 }));
    let previous = roofline.decodeStep(1, 2048);
    for (const batch of [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]) {
      const step = roofline.decodeStep(batch, 2048);
      expect(step.stepSeconds).toBeGreaterThanOrEqual(previous.stepSeconds);
      expect(step.tokensPerSecond).toBeGreaterThanOrEqual(previous.tokensPerSecond);
      previous = step;
    }
    expect(roofline.decodeStep(4096, 128).bound).toBe(RooflineBound.COMPUTE);
  });

  test('prefill of a long prompt is compute bound at about 2 x params FLOPs per token plus attention', () => {
    // GIVEN Llama-3.1-8B BF16 on one H100 (989 TFLOP/s x 0.5)
    const roofline = rooflineFor(ModelArchitecture.LLAMA_3_1_8B, Precision.BF16);
    const prefill = roofline.prefill(4096);
    const linear = (2 * 8.03e9 * 4096) / (989e12 * 0.5);
    const attention = (4 * 32 * 128 * 32 * (4096 * 4097) / 2) / (989e12 * 0.5);
    expect(prefill.bound).toBe(RooflineBound.COMPUTE);
    expect(prefill.computeSeconds).toBeCloseTo(linear + attention, 6);
    expect(prefill.seconds).toBeCloseTo(prefill.computeSeconds, 9);
    expect(prefill.tokensPerSecond).toBeCloseTo(4096 / prefill.seconds, 3);
    // AND a longer prompt takes longer
    expect(roofline.prefill(8192).seconds).toBeGreaterThan(prefill.seconds);
  });

  test('FP8 weights on Hopper halve memory time and double the matrix rate; FP4 on Hopper computes at BF16', () => {
    const model = ModelArchitecture.LLAMA_3_1_8B;
    const bf16 = rooflineFor(model, Precision.BF16);
    const fp8 = rooflineFor(model, Precision.FP8);
    expect(fp8.denseComputePrecision).toBe(Precision.FP8);
    expect(fp8.decodeStep(1, 1).memorySeconds * 2).toBeCloseTo(bf16.decodeStep(1, 1).memorySeconds, 6);
    expect(fp8.prefill(4096).computeSeconds).toBeLessThan(bf16.prefill(4096).computeSeconds);
    const fp4 = rooflineFor(model, Precision.FP4);
    expect(fp4.denseComputePrecision).toBe(Precision.BF16);
    const b200 = rooflineFor(model, Precision.FP4, undefined, AcceleratedInstanceType.P6_B200_48XLARGE);
    expect(b200.denseComputePrecision).toBe(Precision.FP4);
  });

  test('tensor parallelism adds two all-reduces per layer over NVLink', () => {
    const model = ModelArchitecture.LLAMA_3_3_70B;
    const tp1 = rooflineFor(model, Precision.FP8);
    const tp4 = rooflineFor(model, Precision.FP8, Parallelism.of({ tensorParallel: 4 }));
    expect(tp1.allReduceSeconds(1e6)).toBe(0);
    // ring all-reduce of 1 MB over 4 ranks: 8 us + 2 x 3/4 x 1e6 B / (450 GB/s x 0.7)
    expect(tp4.allReduceSeconds(1e6)).toBeCloseTo(8e-6 + (1.5e6 / (450e9 * 0.7)), 9);
    const step = tp4.decodeStep(1, 1);
    expect(step.communicationSeconds).toBeCloseTo(2 * 80 * tp4.allReduceSeconds(8192 * 2), 9);
    // AND splitting the weights 4 ways makes the memory part 4 times faster
    expect(tp1.decodeStep(1, 1).memorySeconds / step.memorySeconds).toBeCloseTo(4, 1);
  });

  test('MoE decode at batch 1 reads only the experts it touches', () => {
    const model = ModelArchitecture.DEEPSEEK_V3;
    const ep = rooflineFor(model, Precision.FP8, Parallelism.of({ dataParallel: 8, expertParallel: true }), AcceleratedInstanceType.P5EN_48XLARGE);
    const weights = WeightFootprint.of({ model, weightPrecision: Precision.FP8 });
    const perRank = weights.bytesPerRank(Parallelism.of({ dataParallel: 8, expertParallel: true }));
    const step = ep.decodeStep(1, 1);
    const allWeights = perRank / (4.8e12 * 0.7);
    expect(step.memorySeconds).toBeLessThan(allWeights);
    // AND a large batch touches nearly all of them
    expect(ep.decodeStep(4096, 1).memorySeconds).toBeGreaterThan(0.99 * allWeights);
    expect(step.communicationSeconds).toBeGreaterThan(0);
  });

  describe('expert-parallel all-to-all', () => {
    const P5EN = AcceleratedInstanceType.P5EN_48XLARGE;
    const wideEp = (ep: number, extra: Partial<Parameters<typeof Roofline.of>[0]> = {}, instanceType = P5EN, redundantExperts = 0) => Roofline.of({
      instanceType,
      weights: WeightFootprint.of({ model: ModelArchitecture.DEEPSEEK_V3, weightPrecision: Precision.FP8 }),
      kvCache: KvCacheFootprint.of({ model: ModelArchitecture.DEEPSEEK_V3, precision: Precision.FP8 }),
      parallelism: Parallelism.of({ dataParallel: ep, expertParallel: true, redundantExperts }),
      ...extra,
    });

    test('is charged by hand: FP8 dispatch and BF16 combine, the off-node share over EFA', () => {
      // GIVEN DeepSeek-V3 (58 MoE layers, hidden 7168, top-8) at EP 16 on two p5en (8 x H200, 3200 Gbit/s EFA)
      const r = wideEp(16, { expertImbalance: 1 });
      // WHEN 64 sequences per rank decode
      const step = r.decodeStep(64 * 16, 1024);
      // THEN per rank and direction 64 x 8 x 7168 elements move; half the destinations are off the node, over
      //      400 Gbit/s x 0.5 = 25 GB/s, 7/16 on it over 450 GB/s x 0.7; the EFA share is the slower: each
      //      direction = bytes / 2 / 25e9 + 30 us, 58 layers
      const elements = 64 * 8 * 7168;
      const direction = (bytesPerElement: number) => (elements * bytesPerElement * 0.5) / 25e9 + 30e-6;
      expect(step.allToAllSeconds).toBeCloseTo(58 * (direction(1) + direction(2)), 12);
      expect(step.communicationSeconds).toBeCloseTo(step.allToAllSeconds, 12);
      expect(step.stepSeconds).toBeCloseTo(Math.max(step.computeSeconds, step.memorySeconds) + step.allToAllSeconds, 12);
    });

    test('is zero for a dense model and for experts split by tensor parallelism', () => {
      const dense = rooflineFor(ModelArchitecture.LLAMA_3_3_70B, Precision.FP8, Parallelism.of({ tensorParallel: 8 }), P5EN);
      expect(dense.decodeStep(64, 1024).allToAllSeconds).toBe(0);
      const tp8 = rooflineFor(ModelArchitecture.DEEPSEEK_V3, Precision.FP8, Parallelism.of({ tensorParallel: 8 }), P5EN);
      expect(tp8.decodeStep(64, 1024).allToAllSeconds).toBe(0);
      expect(tp8.expertImbalance).toBe(1);
    });

    test('grows as the group spans more nodes, at the same tokens per rank', () => {
      const a2a = (ep: number) => wideEp(ep).decodeStep(64 * ep, 1024).allToAllSeconds;
      // One node: NVLink only; two nodes: half the traffic over EFA; four: three quarters
      expect(a2a(16)).toBeGreaterThan(5 * a2a(8));
      expect(a2a(32)).toBeGreaterThan(a2a(16));
      expect(a2a(64)).toBeGreaterThan(a2a(32));
      // AND its share of the step grows with it
      const share = (ep: number) => { const s = wideEp(ep).decodeStep(64 * ep, 1024); return s.allToAllSeconds / s.stepSeconds; };
      expect(share(32)).toBeGreaterThan(share(8));
    });

    test('is shorter with more EFA bandwidth or a better all-to-all efficiency', () => {
      const slow = wideEp(32).decodeStep(2048, 1024).allToAllSeconds;
      const efficient = wideEp(32, { allToAllEfficiency: 0.9 }).decodeStep(2048, 1024).allToAllSeconds;
      expect(efficient).toBeLessThan(slow);
      // p5 has 3200 Gbit/s like p5en; p4d's 400 Gbit/s for 8 A100 is 8x less per accelerator
      const p4d = wideEp(32, {}, AcceleratedInstanceType.P4D_24XLARGE).decodeStep(2048, 1024).allToAllSeconds;
      expect(p4d).toBeGreaterThan(4 * slow);
    });

    test('waits for the busiest expert rank; redundant experts (EPLB) lower the default imbalance', () => {
      expect(wideEp(32).expertImbalance).toBe(Roofline.DEFAULT_EXPERT_IMBALANCE);
      expect(wideEp(32, {}, P5EN, 32).expertImbalance).toBe(Roofline.DEFAULT_EXPERT_IMBALANCE_EPLB);
      const balanced = wideEp(32, { expertImbalance: 1 }).decodeStep(2048, 1024);
      const skewed = wideEp(32, { expertImbalance: 1.5 }).decodeStep(2048, 1024);
      const latency = 2 * 58 * 30e-6;
      expect(skewed.allToAllSeconds - latency).toBeCloseTo(1.5 * (balanced.allToAllSeconds - latency), 12);
      expect(skewed.computeSeconds).toBeGreaterThan(balanced.computeSeconds);
      expect(wideEp(32, {}, P5EN, 32).decodeStep(2048, 1024).stepSeconds).toBeLessThan(wideEp(32).decodeStep(2048, 1024).stepSeconds);
    });

    test('dual-batch overlap hides it, up to the step\'s compute or memory time', () => {
      const plain = wideEp(32).decodeStep(2048, 1024);
      const roof = Math.max(plain.computeSeconds, plain.memorySeconds);
      const part = wideEp(32, { allToAllOverlap: 0.2 }).decodeStep(2048, 1024);
      expect(0.2 * plain.allToAllSeconds).toBeLessThan(roof);
      expect(part.allToAllSeconds).toBeCloseTo(0.8 * plain.allToAllSeconds, 12);
      const full = wideEp(32, { allToAllOverlap: 1 }).decodeStep(2048, 1024);
      expect(plain.allToAllSeconds).toBeGreaterThan(roof);
      expect(full.allToAllSeconds).toBeCloseTo(plain.allToAllSeconds - roof, 12);
    });

    test('refuses an impossible imbalance or overlap, naming the field and the fix', () => {
      expect(() => wideEp(16, { expertImbalance: 0.8 })).toThrow(/'expertImbalance' \(0.8\) must be >= 1 .*omit it for 1.4/);
      expect(() => wideEp(16, { allToAllOverlap: 2 })).toThrow(/'allToAllOverlap' \(2\) must be between 0/);
      expect(() => wideEp(16, { allToAllEfficiency: 0 })).toThrow(/'allToAllEfficiency' \(0\)/);
    });

    test('prefillBatch spreads prompts over the data-parallel ranks; one prompt on one rank equals prefill()', () => {
      const tp8 = rooflineFor(ModelArchitecture.DEEPSEEK_V3, Precision.FP8, Parallelism.of({ tensorParallel: 8 }), P5EN);
      expect(tp8.prefillBatch(2048, 1).seconds).toBeCloseTo(tp8.prefill(2048).seconds, 12);
      const ep = wideEp(16);
      const batch = ep.prefillBatch(1024, 8 * 16);
      expect(batch.tokensPerSecond).toBeGreaterThan(ep.prefill(1024).tokensPerSecond);
      expect(batch.allToAllSeconds).toBeGreaterThan(0);
    });
  });

  test('cost per million tokens', () => {
    // $3.60 per hour at 1000 tokens/s = 3.6M tokens per hour -> $1 per million
    expect(Roofline.costPerMillionTokens(3.6, 1000)).toBeCloseTo(1, 9);
    expect(() => Roofline.costPerMillionTokens(0, 1000)).toThrow(/'pricePerHour' \(0\) must be a positive number/);
    expect(() => Roofline.costPerMillionTokens(1, -1)).toThrow(/'tokensPerSecond' \(-1\)/);
  });

  test('rejects bad inputs naming the field', () => {
    const model = ModelArchitecture.LLAMA_3_1_8B;
    const base = { instanceType: P5, weights: WeightFootprint.of({ model }), kvCache: KvCacheFootprint.of({ model, precision: Precision.BF16 }) };
    expect(() => Roofline.of({ ...base, computeEfficiency: 1.5 })).toThrow(/'computeEfficiency' \(1.5\) must be greater than 0 and at most 1/);
    expect(() => Roofline.of({ ...base, memoryBandwidthEfficiency: 0 })).toThrow(/'memoryBandwidthEfficiency' \(0\)/);
    expect(() => Roofline.of({ ...base, interconnectEfficiency: -1 })).toThrow(/'interconnectEfficiency' \(-1\)/);
    expect(() => Roofline.of({ ...base, collectiveLatencyUs: -1 })).toThrow(/'collectiveLatencyUs' \(-1\) must be a number >= 0/);
    expect(() => Roofline.of({ ...base, maxNumBatchedTokens: 0 })).toThrow(/'maxNumBatchedTokens' \(0\)/);
    expect(() => Roofline.of({ ...base, kvCache: KvCacheFootprint.of({ model: ModelArchitecture.MISTRAL_7B, precision: Precision.BF16 }) }))
      .toThrow(/'kvCache' is for mistral-7b but 'weights' are for llama-3.1-8b/);
    const roofline = Roofline.of(base);
    expect(() => roofline.decodeStep(0, 10)).toThrow(/'batchSize' \(0\)/);
    expect(() => roofline.decodeStep(1, 0.5)).toThrow(/'contextTokens' \(0.5\)/);
    expect(() => roofline.prefill(-3)).toThrow(/'promptTokens' \(-3\)/);
  });
});
