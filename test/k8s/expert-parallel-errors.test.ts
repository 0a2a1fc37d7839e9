import { defaultProps, noEfaInstanceType, synthChart, wideEpProps } from './util';
import { AcceleratedInstanceType, Accelerator, AllToAllBackend, CpuArchitecture, EksAmiType, DataParallelEndpoints, DisaggregatedInference, ExpertParallelPool, KvTransfer, ModelArchitecture, PoolRole, Precision } from '../../src';

const P5EN = AcceleratedInstanceType.P5EN_48XLARGE;

/** A hypothetical 16-GPU type (every catalogued GPU type has 8): 16 ranks per pod. */
function sixteenGpuInstanceType(): AcceleratedInstanceType {
  return AcceleratedInstanceType.of({
    name: 'x16.48xlarge',
    accelerator: Accelerator.H200,
    acceleratorCount: 16,
    vcpus: 192,
    memoryGib: 2048,
    localNvmeCount: 8,
    localNvmeGbEach: 3800,
    networkBandwidthGbps: 3200,
    networkCards: 16,
    maxEfaInterfaces: 16,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
  });
}

describe('ExpertParallelPool errors name the prop, the value and a fix', () => {
  test.each([
    ['dense model', { model: ModelArchitecture.LLAMA_3_3_70B }, /'model' \(llama-3.3-70b\) is a dense model: expert parallelism needs routed experts/],
    ['tensorParallel not dividing the node', { tensorParallel: 3 }, /'tensorParallel' \(3\) must be a positive integer dividing the 8 accelerators of one p5en.48xlarge/],
    ['redundantExperts negative', { redundantExperts: -1 }, /'redundantExperts' \(-1\) must be an integer >= 0/],
    ['redundantExperts without EPLB', { redundantExperts: 16, expertLoadBalancing: false }, /'redundantExperts' \(16\) only applies with expert load balancing/],
    ['nodesPerGroup', { nodesPerGroup: 0 }, /'nodesPerGroup' \(0\) must be a positive integer/],
    ['group size does not match nodes x GPUs', { nodesPerGroup: 2, dataParallel: 12 },
      /'dataParallel' \(12\) x tensorParallel 1 must equal nodesPerGroup 2 x 8 accelerators of one p5en.48xlarge .*; use dataParallel 16/],
    ['experts not divisible by the EP size', { nodesPerGroup: 3 },
      /'dataParallel' \(24\) gives an expert-parallel size of tensorParallel 1 x dataParallel 24 = 24, which does not divide the 256 routed experts of deepseek-v3/],
    ['redundant experts counted in the division', { nodesPerGroup: 2, redundantExperts: 8 },
      /which does not divide the 256 routed experts of deepseek-v3 plus 8 redundant \(16.50 per rank\)/],
    ['per-rank ports beyond an InferencePool', { instanceType: sixteenGpuInstanceType(), nodesPerGroup: 1 },
      /'endpoints' \(per-rank\) gives 16 ports per pod, more than the 8 target ports of an InferencePool/],
    ['a Trainium instance type', { instanceType: AcceleratedInstanceType.TRN2_48XLARGE, nodesPerGroup: 1 },
      /'instanceType' \(trn2.48xlarge\) is a Trainium type, and ExpertParallelPool builds CUDA vLLM's expert parallelism; serve the MoE model on Trainium with DisaggregatedInference/],
    ['per-rank start ranks beyond the KV events port', { nodesPerGroup: 700, redundantExperts: 5344 },
      /'endpoints' \(per-rank\) with 700 nodes of 8 ranks starts the last pod at data-parallel rank 5592, but per-rank KV events need start ranks below 5557; use DataParallelEndpoints.SINGLE/],
    ['weights that do not fit', { weightPrecision: Precision.BF16, modelSource: undefined, nodesPerGroup: 1, prequantizedCheckpoint: true, instanceType: AcceleratedInstanceType.P5_48XLARGE },
      /leaves too little memory for the weights/],
    ['NIXL over libfabric without EFA', {
      role: PoolRole.DECODE,
      model: ModelArchitecture.QWEN3_235B_A22B,
      instanceType: noEfaInstanceType(),
      nodesPerGroup: 2,
      kvTransfer: KvTransfer.NIXL_LIBFABRIC,
      kvCachePrecision: Precision.FP8,
      weightPrecision: Precision.FP8,
      maxContext: 4096,
    },
    /'kvTransfer' \(nixl-libfabric\) needs EFA, but test-noefa.48xlarge has none/],
  ])('%s', (_name, overrides, message) => {
    // GIVEN a bad prop WHEN the construct is built THEN it throws naming it
    expect(() => synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps(overrides as any)))).toThrow(message);
  });

  test('no group up to 16 nodes fits: the error says so', () => {
    // GIVEN Kimi-K2 in BF16 at the full context on 40 GiB A100s WHEN built without nodesPerGroup
    const build = () => synthChart(c => new ExpertParallelPool(c, 'K', {
      model: ModelArchitecture.KIMI_K2, image: 'img', instanceType: AcceleratedInstanceType.P4D_24XLARGE, weightPrecision: Precision.BF16, prequantizedCheckpoint: true,
    }));
    // THEN
    expect(build).toThrow(/no group of 1 to 16 nodes fits; set 'nodesPerGroup'/);
  });

  test('malformed all-to-all backend name', () => {
    // GIVEN WHEN THEN
    expect(() => AllToAllBackend.of('deep ep')).toThrow(/'allToAllBackend' \('deep ep'\) must be a vLLM --all2all-backend name/);
  });

  test('inside DisaggregatedInference: exactly one pool kind per side, fields prefixed', () => {
    const base = {
      model: ModelArchitecture.DEEPSEEK_V3,
      modelSource: undefined,
      weightPrecision: Precision.FP8,
      prefill: { instanceType: P5EN, tensorParallel: 8 },
    };
    // GIVEN both decode kinds WHEN built THEN
    expect(() => synthChart(c => new DisaggregatedInference(c, 'D', defaultProps({ ...base, decodeExpertParallel: { instanceType: P5EN } }))))
      .toThrow(/set exactly one of 'decode' \(a tensor-parallel pool\) and 'decodeExpertParallel' .*; both given/);
    // GIVEN neither
    expect(() => synthChart(c => new DisaggregatedInference(c, 'D', defaultProps({ ...base, decode: undefined }))))
      .toThrow(/set exactly one of 'decode' .*; neither given/);
    // GIVEN per-rank endpoints behind the router THEN accepted (the router discovers every rank's port)
    expect(() => synthChart(c => new DisaggregatedInference(c, 'D', defaultProps({
      ...base, decode: undefined, decodeExpertParallel: { instanceType: P5EN, endpoints: DataParallelEndpoints.PER_RANK },
    })))).not.toThrow();
    // GIVEN a bad group inside the deployment: the field carries the side's prop name
    expect(() => synthChart(c => new DisaggregatedInference(c, 'D', defaultProps({
      ...base, decode: undefined, decodeExpertParallel: { instanceType: P5EN, nodesPerGroup: 2, dataParallel: 4 },
    })))).toThrow(/'decodeExpertParallel.dataParallel' \(4\)/);
  });
});
