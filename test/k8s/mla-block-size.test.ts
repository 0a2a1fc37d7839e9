import { container, deepseekEpPdProps, defaultProps, find, flag, IMAGE, synthChart, synthInference, wideEpProps } from './util';
import { DisaggregatedInference, AcceleratedInstanceType, ExpertParallelPool, ModelArchitecture, ServingPlan } from '../../src';
import { resolveKvBlockSize } from '../../src/sizing/private/kv-block-size';

/** DeepSeek-V3 P/D with a TP8 prefill and a TP8 decode pool on `type`. */
function deepseekPd(type: AcceleratedInstanceType, kvBlockSize?: number) {
  return defaultProps({
    model: ModelArchitecture.DEEPSEEK_V3,
    modelSource: undefined,
    kvBlockSize,
    maxContext: 32660, // not a multiple of 64: the sizing's rounding to whole blocks shows
    prefill: { instanceType: type, tensorParallel: 8 },
    decode: { instanceType: type, tensorParallel: 8 },
  });
}

/** The vLLM arguments of a pool's server (a Deployment's container, or an LWS leader's). */
function poolArgs(manifests: any[], suffix: string): string[] {
  const lws = manifests.find(m => m.kind === 'LeaderWorkerSet' && m.metadata.name.endsWith(suffix));
  return lws ? container(lws, 'leaderTemplate').args : container(find(manifests, 'Deployment', suffix)).args;
}

describe('KV block size of MLA models (vLLM forces its MLA backend\'s block size)', () => {
  test.each([
    ['p5en (H200, FlashMLA)', AcceleratedInstanceType.P5EN_48XLARGE],
    ['p6-b200 (B200, FlashInfer MLA)', AcceleratedInstanceType.P6_B200_48XLARGE],
  ])('DeepSeek-V3 P/D on %s: both pools and the router use 64', (_name, type) => {
    // GIVEN DeepSeek-V3 (MLA) with no kvBlockSize WHEN synthesized
    const { manifests, inference } = synthInference(deepseekPd(type));
    // THEN both pools run 64-token blocks, as vLLM would anyway
    expect(flag(poolArgs(manifests, '-prefill'), '--block-size')).toBe('64');
    expect(flag(poolArgs(manifests, '-decode'), '--block-size')).toBe('64');
    // AND the router indexes prefixes at the size the events carry
    expect(JSON.parse(inference.routerConfig).router.kvBlockSize).toBe(64);
    // AND the sizing rounds each sequence's KV to those blocks
    const sizing = (inference.decode as unknown as { plan: { plan: ServingPlan } }).plan.plan;
    const share = sizing.kvCache.rankShare(sizing.parallelism.tensorParallel, sizing.parallelism.pipelineParallel);
    expect(sizing.kvBytesPerSequencePerRank).toBe(sizing.kvCache.bytesPerSequence(32660, 64) * share);
    expect(sizing.kvBytesPerSequencePerRank).toBeGreaterThan(sizing.kvCache.bytesPerSequence(32660, 16) * share);
  });

  test('an expert-parallel decode side takes the deployment\'s block size', () => {
    // GIVEN DeepSeek-V3 with a TP8 prefill pool and a wide-EP decode side on p5en WHEN synthesized
    const { manifests, result } = synthChart(c => new DisaggregatedInference(c, 'Ds', deepseekEpPdProps()));
    // THEN the LWS leader, the prefill pool and the router agree on 64
    expect(flag(poolArgs(manifests, '-decode'), '--block-size')).toBe('64');
    expect(flag(poolArgs(manifests, '-prefill'), '--block-size')).toBe('64');
    expect(JSON.parse(result.routerConfig).router.kvBlockSize).toBe(64);
  });

  test('a standalone ExpertParallelPool of Kimi-K2 on p6-b200 emits 64', () => {
    // GIVEN Kimi-K2 (MLA) wide EP on p6-b200 WHEN synthesized
    const { manifests } = synthChart(c => new ExpertParallelPool(c, 'Kimi', wideEpProps({
      model: ModelArchitecture.KIMI_K2, instanceType: AcceleratedInstanceType.P6_B200_48XLARGE, image: IMAGE,
    })));
    // THEN its server runs the block size FlashInfer MLA forces
    expect(flag(poolArgs(manifests, ''), '--block-size')).toBe('64');
  });

  test('128 (a multiple FlashMLA splits into 64-token kernel blocks) is kept', () => {
    const { manifests } = synthInference(deepseekPd(AcceleratedInstanceType.P5EN_48XLARGE, 128));
    expect(flag(poolArgs(manifests, '-decode'), '--block-size')).toBe('128');
  });

  test('an explicit 16 for DeepSeek-V3 on H200 is refused with the fix', () => {
    // GIVEN kvBlockSize 16 THEN the error names the model, the accelerator and what to use
    expect(() => synthInference(deepseekPd(AcceleratedInstanceType.P5EN_48XLARGE, 16)))
      .toThrow(/'kvBlockSize' \(16\) is not what vLLM runs deepseek-v3 with on p5en\.48xlarge \(H200\).*use 64 or leave 'kvBlockSize' unset/);
  });

  test('models without MLA keep vLLM\'s 16 on the same instances', () => {
    const { manifests, inference } = synthInference(defaultProps());
    expect(flag(poolArgs(manifests, '-decode'), '--block-size')).toBe('16');
    expect(JSON.parse(inference.routerConfig).router.kvBlockSize).toBe(16);
  });

  test('per accelerator: what vLLM keeps for MLA', () => {
    const ds = ModelArchitecture.DEEPSEEK_V3;
    const { P4D_24XLARGE: a100, G6E_48XLARGE: l40s, P5EN_48XLARGE: h200, P6_B200_48XLARGE: b200 } = AcceleratedInstanceType;
    // A100 and L40S run Triton MLA, which takes any block size: vLLM's default stays.
    expect(resolveKvBlockSize('t', ds, undefined, [a100])).toBe(16);
    expect(resolveKvBlockSize('t', ds, undefined, [l40s])).toBe(16);
    // One pool on Hopper or Blackwell sets the size for both (blocks move between them as they are).
    expect(resolveKvBlockSize('t', ds, undefined, [a100, h200])).toBe(64);
    expect(resolveKvBlockSize('t', ds, undefined, [AcceleratedInstanceType.P5_48XLARGE])).toBe(64);
    // FlashInfer MLA on Blackwell also takes 32; FlashMLA on Hopper does not.
    expect(resolveKvBlockSize('t', ds, 32, [b200])).toBe(32);
    expect(() => resolveKvBlockSize('t', ds, 32, [b200, h200])).toThrow(/on p5en\.48xlarge \(H200\)/);
    // Malformed sizes are refused whatever the model.
    expect(() => resolveKvBlockSize('t', ModelArchitecture.LLAMA_3_3_70B, 24, [h200])).toThrow(/must be one of vLLM's block sizes/);
  });
});
