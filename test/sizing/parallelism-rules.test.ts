import { denseModel } from './fixtures';
import { AcceleratedInstanceType, AttentionKind, ModelArchitecture } from '../../src/catalog';
import { Parallelism, ParallelismRules } from '../../src/sizing';

const P5EN = AcceleratedInstanceType.P5EN_48XLARGE;

describe('Parallelism', () => {
  test('accelerators per replica and expert-parallel size', () => {
    const p = Parallelism.of({ tensorParallel: 2, pipelineParallel: 2, dataParallel: 4, expertParallel: true });
    expect(p.acceleratorsPerReplica).toBe(16);
    expect(p.expertParallelSize).toBe(8);
    expect(Parallelism.of({ tensorParallel: 4 }).expertParallelSize).toBe(1);
  });

  test.each([
    ['tensorParallel', 0], ['tensorParallel', 1.5], ['pipelineParallel', -1], ['dataParallel', NaN], ['redundantExperts', -2],
  ])('rejects %s %p', (field, value) => {
    expect(() => Parallelism.of({ [field]: value })).toThrow(new RegExp(`'${field}' \\(${value}\\) must be`));
  });
});

describe('ParallelismRules', () => {
  test('TP must divide the attention heads; the message lists the valid sizes', () => {
    const problem = ParallelismRules.tensorParallelProblem(ModelArchitecture.LLAMA_3_3_70B, 3, P5EN);
    expect(problem).toEqual({
      field: 'tensorParallel',
      value: '3',
      message: "'tensorParallel' (3) must divide the 64 attention heads of llama-3.3-70b; use 1, 2, 4 or 8",
    });
  });

  test('KV heads: TP must divide them or be a multiple of them (replication)', () => {
    // GIVEN 48 query heads and 16 KV heads: TP 12 divides 48 but neither divides nor is a multiple of 16
    const model = denseModel({ attentionKind: AttentionKind.GQA, attentionHeads: 48, kvHeads: 16 });
    const node = AcceleratedInstanceType.P6E_GB200_36XLARGE; // NVLink domain of 72 devices
    expect(ParallelismRules.tensorParallelProblem(model, 12, node)?.message).toMatch(/must divide the 16 KV heads of test-model, or be a multiple of them/);
    // AND TP 48 (a multiple of 16) is valid: KV heads are replicated
    expect(ParallelismRules.tensorParallelProblem(model, 48, node)).toBeUndefined();
    // AND Qwen3-235B (64 heads, 4 KV heads) allows TP 8 by replication
    expect(ParallelismRules.validTensorParallelSizes(ModelArchitecture.QWEN3_235B_A22B, 8)).toEqual([1, 2, 4, 8]);
  });

  test('TP is limited to one node, or to the NVLink domain of an UltraServer', () => {
    expect(ParallelismRules.maxTensorParallel(P5EN)).toBe(8);
    expect(ParallelismRules.maxTensorParallel(AcceleratedInstanceType.P6E_GB200_36XLARGE)).toBe(72);
    const problem = ParallelismRules.tensorParallelProblem(ModelArchitecture.LLAMA_3_1_405B, 16, P5EN);
    expect(problem?.message).toMatch(/^'tensorParallel' \(16\) exceeds the 8 accelerators of one p5en.48xlarge; .*Use tensorParallel 4 or 8 and span nodes with pipelineParallel 2/);
    expect(ParallelismRules.tensorParallelProblem(ModelArchitecture.LLAMA_3_1_405B, 16, AcceleratedInstanceType.P6E_GB200_36XLARGE)).toBeUndefined();
  });

  test('MLA constrains TP by query heads only', () => {
    expect(ParallelismRules.validTensorParallelSizes(ModelArchitecture.DEEPSEEK_V3, 8)).toEqual([1, 2, 4, 8]);
  });

  test('expert parallelism needs experts, and TP x DP must divide them (plus redundant ones)', () => {
    const v3 = ModelArchitecture.DEEPSEEK_V3;
    // dense model
    expect(ParallelismRules.expertParallelProblem(ModelArchitecture.LLAMA_3_3_70B, Parallelism.of({ expertParallel: true }))?.message)
      .toBe("'expertParallel' (true) needs routed experts, but llama-3.3-70b is a dense model; remove expertParallel");
    // redundant experts without EP
    expect(ParallelismRules.expertParallelProblem(v3, Parallelism.of({ redundantExperts: 32 }))?.field).toBe('redundantExperts');
    // 2 x 3 = 6 does not divide 256
    const six = ParallelismRules.expertParallelProblem(v3, Parallelism.of({ tensorParallel: 2, dataParallel: 3, expertParallel: true }));
    expect(six?.field).toBe('dataParallel');
    expect(six?.message).toMatch(/expert-parallel size of tensorParallel 2 x dataParallel 3 = 6, which does not divide the 256 routed experts of deepseek-v3 \(42.67 per rank\); use tensorParallel x dataParallel of 2, 4, 8, 16, 32, 64, 128 or 256/);
    // 8 divides 256, and 256 + 32 = 288 = 8 x 36
    expect(ParallelismRules.expertParallelProblem(v3, Parallelism.of({ dataParallel: 8, expertParallel: true }))).toBeUndefined();
    const redundant = Parallelism.of({ dataParallel: 8, expertParallel: true, redundantExperts: 32 });
    expect(ParallelismRules.expertParallelProblem(v3, redundant)).toBeUndefined();
    // 256 + 30 = 286 is not divisible by 8
    expect(ParallelismRules.expertParallelProblem(v3, Parallelism.of({ dataParallel: 8, expertParallel: true, redundantExperts: 30 }))?.message)
      .toMatch(/plus 30 redundant/);
    expect(ParallelismRules.validExpertParallelSizes(ModelArchitecture.LLAMA_3_3_70B)).toEqual([]);
    // Wide EP: whole nodes of 8, each rank whole experts (256 routed; 288 with 32 redundant)
    const p5en = AcceleratedInstanceType.P5EN_48XLARGE;
    expect(ParallelismRules.wideExpertParallelSizes(ModelArchitecture.DEEPSEEK_V3, p5en, 64)).toEqual([8, 16, 32, 64]);
    expect(ParallelismRules.wideExpertParallelSizes(ModelArchitecture.DEEPSEEK_V3, p5en, 256)).toEqual([8, 16, 32, 64, 128, 256]);
    expect(ParallelismRules.wideExpertParallelSizes(ModelArchitecture.DEEPSEEK_V3, p5en, 96, 32)).toEqual([8, 16, 24, 32, 48, 72, 96]);
    expect(ParallelismRules.wideExpertParallelSizes(ModelArchitecture.LLAMA_3_3_70B, p5en, 64)).toEqual([]);
  });

  test('a replica fills part of one node or whole nodes', () => {
    expect(ParallelismRules.layoutProblem(Parallelism.of({ tensorParallel: 8, pipelineParallel: 2 }), P5EN)).toBeUndefined();
    const problem = ParallelismRules.layoutProblem(Parallelism.of({ tensorParallel: 4, pipelineParallel: 3 }), P5EN);
    expect(problem?.field).toBe('pipelineParallel');
    expect(problem?.message).toMatch(/= 12 accelerators, more than one p5en.48xlarge \(8\) but not whole nodes/);
  });

  test('layout and EFA per pod follow the share of the node a pod uses', () => {
    // GIVEN p5en.48xlarge: 8 GPUs, 16 EFA interfaces
    const tp2 = ParallelismRules.layout(Parallelism.of({ tensorParallel: 2 }), P5EN);
    expect(tp2).toEqual({
      acceleratorsPerReplica: 2, podsPerReplica: 1, acceleratorsPerPod: 2, nodesPerReplica: 1, replicasPerNode: 4, efaInterfacesPerPod: 4,
    });
    const twoNodes = ParallelismRules.layout(Parallelism.of({ tensorParallel: 8, pipelineParallel: 2 }), P5EN);
    expect(twoNodes).toMatchObject({ podsPerReplica: 2, acceleratorsPerPod: 8, nodesPerReplica: 2, replicasPerNode: 0, efaInterfacesPerPod: 16 });
    expect(ParallelismRules.efaInterfacesPerPod(P5EN, 1)).toBe(P5EN.efaInterfacesFor(1));
  });
});
