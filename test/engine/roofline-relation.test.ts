import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../src/catalog';
import { costModel, loadEngine } from '../../src/engine';
import { planFor, poolTemplate } from '../../src/engine/engine-config-builder';
import { VLLM_STEP_MODEL } from '../../src/engine/vllm-step-model';
import { ServingPlan } from '../../src/sizing';

// The one relation between `disagg plan`'s numbers and `disagg simulate`'s (README, "What `disagg
// plan` tells you"): a simulated vLLM step is the roofline of src/sizing at the step model's
// efficiencies (60% of peak FLOP/s, the accelerator's calibrated memory efficiency) plus fixed
// costs, 40 us per layer and 0.5 ms per step; plan prints the same roofline at planning margins
// (50% and 70%). Held here for every dense catalog model on every GPU type, at every TP that fits.

const built = loadEngine() !== undefined;
const GPU_TYPES = AcceleratedInstanceType.all().filter(t => !t.isNeuron);
const DENSE = ModelArchitecture.all().filter(m => !m.isMoe);

/** Every (model, instance, TP) whose BF16 weights fit at 8k. */
function cases(): Array<[string, string, number]> {
  const out: Array<[string, string, number]> = [];
  for (const model of DENSE) {
    for (const type of GPU_TYPES) {
      const plan = ServingPlan.create({ model, instanceType: type, maxContext: Math.min(8192, model.maxContext), weightPrecision: Precision.BF16 });
      for (const option of plan.tensorParallelOptions.filter(o => o.fits)) out.push([model.name, type.name, option.tensorParallel]);
    }
  }
  return out;
}

const CASES = cases();

describe('the simulator\'s step is plan\'s roofline at the step model\'s efficiencies, plus fixed costs', () => {
  test('the matrix covers every dense model and GPU type', () => {
    expect(new Set(CASES.map(c => c[0])).size).toBe(DENSE.length);
    expect(new Set(CASES.map(c => c[1])).size).toBeGreaterThanOrEqual(GPU_TYPES.length - 1);
    expect(CASES.length).toBeGreaterThan(50);
  });

  // BF16 throughout; FP8 weights with an FP8 KV cache (attention in FP8 on Hopper, FlashAttention 3); FP8
  // weights with a BF16 cache (attention in BF16 beside FP8 matmuls): one attention rule for both sides.
  (built ? test.each([['bf16', 'bf16'], ['fp8', 'fp8'], ['fp8', 'bf16']]) : test.skip.each([['', '']]))(
    'prefill of 1k and 4k tokens and a decode step of 32 at 4k, on every case, %s weights and %s KV cache', async (w, kv) => {
      const off: string[] = [];
      const weightPrecision = Precision.of(w);
      for (const [name, typeName, tp] of CASES) {
        const model = ModelArchitecture.fromName(name);
        const type = AcceleratedInstanceType.fromName(typeName);
        const inputs = { model, weightPrecision, kvCachePrecision: Precision.of(kv), maxContext: Math.min(8192, model.maxContext) };
        // GIVEN the simulator's replica and the roofline at the step model's efficiencies
        const t = poolTemplate(planFor(inputs, type, tp), weightPrecision);
        const steps = await costModel({ model: t.model, hardware: t.hardware, parallel: t.parallel, efficiency: t.efficiency } as never,
          { prefillTokens: [1024, 4096], decodeBatches: [32], contextTokensPerSequence: 4096 });
        const roofline = ServingPlan.create({
          ...inputs,
          instanceType: type,
          tensorParallel: tp,
          computeEfficiency: VLLM_STEP_MODEL.computeEfficiency,
          memoryBandwidthEfficiency: type.accelerator.decodeMemoryEfficiency ?? VLLM_STEP_MODEL.defaultMemoryEfficiency,
        }).roofline;
        const fixed = model.layers * VLLM_STEP_MODEL.layerOverheadSeconds + VLLM_STEP_MODEL.stepOverheadSeconds;
        // THEN each step is the roofline's time plus the fixed costs, to 1% (the roofline prefills a 4k prompt in
        // chunks of the step budget and pays each chunk's all-reduce latency, where this probe costs one step:
        // 0.5 ms apart on 32 layers at TP > 1)
        const checks: Array<[string, number, number]> = [
          ['prefill 1k', steps.prefill[0].totalSeconds, roofline.prefill(1024).seconds + fixed],
          ['prefill 4k', steps.prefill[1].totalSeconds, roofline.prefill(4096).seconds + fixed],
          ['decode 32 @ 4k', steps.decode[0].totalSeconds, roofline.decodeStep(32, 4096).stepSeconds + fixed],
        ];
        for (const [what, engine, expected] of checks) {
          if (Math.abs(engine - expected) / expected > 0.01) off.push(`${name} on ${typeName} TP${tp} ${what}: engine ${engine}, roofline + fixed ${expected}`);
        }
      }
      expect(off).toEqual([]);
    });

  test('plan\'s own roofline is the same formula at planning margins: slower than the step model\'s', () => {
    const plan = ServingPlan.create({
      model: ModelArchitecture.LLAMA_3_3_70B, instanceType: AcceleratedInstanceType.P5EN_48XLARGE, tensorParallel: 4, maxContext: 8192,
    });
    const stepModel = ServingPlan.create({
      model: ModelArchitecture.LLAMA_3_3_70B,
      instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
      tensorParallel: 4,
      maxContext: 8192,
      computeEfficiency: VLLM_STEP_MODEL.computeEfficiency,
      memoryBandwidthEfficiency: 0.85,
    });
    expect(plan.roofline.prefill(1024).computeSeconds / stepModel.roofline.prefill(1024).computeSeconds).toBeCloseTo(0.6 / 0.5, 6);
    expect(plan.roofline.decodeStep(32, 4096).memorySeconds / stepModel.roofline.decodeStep(32, 4096).memorySeconds).toBeCloseTo(0.85 / 0.7, 6);
  });
});
