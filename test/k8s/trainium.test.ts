import { Size } from 'cdk8s';
import { container, defaultProps, env, find, flag, synthChart, synthInference } from './util';
import {
  AcceleratedInstanceType, DisaggregatedInference, DisaggregatedInferenceProps, KvTier, KvTransfer, ModelArchitecture, ModelSource,
  Precision, TieredKvCache,
} from '../../src';

// What vLLM on Neuron takes, per the Neuron docs (src/k8s/private/neuron.ts cites each page):
// TP counted in logical NeuronCores (LNC), FP8 only from a static-FP8 checkpoint and never
// `--quantization`, P/D with NixlConnector over LIBFABRIC (kv_producer / kv_consumer) on Trn2.

const TRN2 = AcceleratedInstanceType.TRN2_48XLARGE;
const NEURON_IMAGE = 'public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.24.0.1.1.0-neuronx-py313-sdk2.32.0-ubuntu24.04';

/** Llama-3.3-70B in BF16 on trn2.48xlarge: prefill and decode of 2 x 4 devices each (one node per pool). */
function trainiumProps(overrides?: Partial<DisaggregatedInferenceProps>): DisaggregatedInferenceProps {
  return defaultProps({
    image: NEURON_IMAGE,
    weightPrecision: Precision.BF16,
    kvCachePrecision: Precision.BF16,
    prefill: { instanceType: TRN2, replicas: 2, tensorParallel: 4 },
    decode: { instanceType: TRN2, replicas: 2, tensorParallel: 4 },
    ...overrides,
  });
}

describe('Trainium pools get what vLLM Neuron takes', () => {
  test('TP in logical NeuronCores, whole devices, no --quantization, LIBFABRIC producer/consumer', () => {
    // GIVEN / WHEN
    const { inference, manifests } = synthInference(trainiumProps());
    const prefill = container(find(manifests, 'Deployment', '-prefill'));
    const decode = container(find(manifests, 'Deployment', '-decode'));

    // THEN 4 Trainium2 devices x 4 logical cores at the default LNC 2 = TP 16
    expect(flag(prefill.args, '--tensor-parallel-size')).toBe('16');
    expect(inference.prefillTensorParallel).toBe(4);
    expect(prefill.resources.limits['aws.amazon.com/neuron']).toBe(4);
    expect(prefill.resources.requests['aws.amazon.com/neuron']).toBe(4);
    expect(prefill.resources.limits['nvidia.com/gpu']).toBeUndefined();
    expect(prefill.args).not.toContain('--quantization');
    expect(env(prefill, 'NEURON_LOGICAL_NC_CONFIG').value).toBe('2');
    expect(env(prefill, 'VLLM_CACHE_ROOT').value).toBe('/models/vllm');
    // AND prefill skips decode warmup; decode keeps prefill warmup (the router prefills short prompts there)
    expect(env(prefill, 'VLLM_NEURON_SKIP_DECODE_WARMUP').value).toBe('1');
    expect(env(decode, 'VLLM_NEURON_SKIP_DECODE_WARMUP')).toBeUndefined();
    expect(env(decode, 'VLLM_NEURON_SKIP_PREFILL_WARMUP')).toBeUndefined();
    // AND KV moves with NIXL over LIBFABRIC, as the Neuron DI tutorial configures it
    const kv = (c: any) => JSON.parse(flag(c.args, '--kv-transfer-config')!);
    expect(kv(prefill)).toEqual({
      kv_connector: 'NixlConnector', kv_role: 'kv_producer', kv_buffer_device: 'cuda', kv_connector_extra_config: { backends: ['LIBFABRIC'] },
    });
    expect(kv(decode).kv_role).toBe('kv_consumer');
    expect(env(prefill, 'FI_PROVIDER').value).toBe('efa');
    // AND Trainium P/D is supported: no warning says otherwise
    expect(inference.nixlBackend).toBe('LIBFABRIC');
    expect(inference.warnings).toEqual([]);
  });

  test('LNC 1 counts every physical core: 4 devices = TP 32', () => {
    const { manifests } = synthInference(trainiumProps({
      prefill: { instanceType: TRN2, replicas: 2, tensorParallel: 4, logicalNeuronCoreConfig: 1 },
    }));
    const prefill = container(find(manifests, 'Deployment', '-prefill'));
    expect(flag(prefill.args, '--tensor-parallel-size')).toBe('32');
    expect(env(prefill, 'NEURON_LOGICAL_NC_CONFIG').value).toBe('1');
  });

  test('the default size is a connected device set: Llama-3.3-70B BF16 needs 2 devices, gets 4', () => {
    const { inference, manifests } = synthInference(trainiumProps({
      prefill: { instanceType: TRN2 },
      decode: { instanceType: TRN2 },
    }));
    expect(inference.prefillTensorParallel).toBe(4);
    expect(flag(container(find(manifests, 'Deployment', '-prefill')).args, '--tensor-parallel-size')).toBe('16');
  });

  test('FP8 weights from a static-FP8 checkpoint: no --quantization flag', () => {
    const { manifests } = synthInference(trainiumProps({
      weightPrecision: Precision.FP8,
      prequantizedCheckpoint: true,
      modelSource: ModelSource.huggingFace('nvidia/Llama-3.3-70B-Instruct-FP8'),
    }));
    const prefill = container(find(manifests, 'Deployment', '-prefill'));
    expect(prefill.args).not.toContain('--quantization');
  });

  test('a slow first start: the startup probe allows for Neuron compilation', () => {
    const probe = (props: DisaggregatedInferenceProps) =>
      container(find(synthInference(props).manifests, 'Deployment', '-decode')).startupProbe.failureThreshold;
    const gpu = probe(defaultProps({ weightPrecision: Precision.BF16, kvCachePrecision: Precision.BF16 }));
    expect(probe(trainiumProps()) - gpu).toBe(120); // 1,200 s more at a 10 s period
  });

  test('sizeFor considers connected device sets only (requires the engine addon)', () => {
    // GIVEN pools with an instance type only, sized by the planner over up to 8 devices
    const { inference } = synthInference(trainiumProps({
      prefill: { instanceType: TRN2 },
      decode: { instanceType: TRN2 },
      sizeFor: {
        slo: { ttftSeconds: 5, tpotSeconds: 0.2 },
        workload: { inputTokens: 1024, outputTokens: 64, simulatedRequests: 50 },
        maxAccelerators: 8,
      },
    }));
    // THEN each pool's pods take 4 devices (2 would fit Llama-3.3-70B BF16, but is not a connected set)
    expect(inference.prefillTensorParallel).toBe(4);
    expect(inference.decodeTensorParallel).toBe(4);
  });

  test('warnings: an image that is not a Neuron image, FP8 KV cache without checkpoint scales', () => {
    const { inference } = synthInference(trainiumProps({ image: 'registry.example.com/disagg/engine:0.1.0', kvCachePrecision: Precision.FP8 }));
    expect(inference.warnings.map(w => w.split(':').slice(0, 2).join(':')).sort()).toEqual(['disagg:neuronFp8KvScales', 'disagg:neuronImage']);
  });
});

describe('Trainium errors name the prop, the value and the fix', () => {
  test.each<[string, Partial<DisaggregatedInferenceProps>, RegExp]>([
    ['mixed vendors (trn2 prefill, p5en decode)',
      { decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4 } },
      /'prefill.instanceType' \(trn2.48xlarge, Neuron \(Trainium2\)\) and 'decode.instanceType' \(p5en.48xlarge, H200 GPUs\) are different accelerator vendors: KV cache cannot move between CUDA and Neuron vLLM; use trn2.48xlarge or p5en.48xlarge for both pools/],
    ['FP8 weights quantized at load time',
      { weightPrecision: Precision.FP8 },
      /'weightPrecision' \(fp8\) on trn2.48xlarge: vLLM Neuron does not quantize at load time \(no '--quantization'\); .*set 'prequantizedCheckpoint: true', or use Precision.BF16/],
    ['INT4 (AWQ) weights',
      { weightPrecision: Precision.INT4, prequantizedCheckpoint: true },
      /'weightPrecision' \(int4\) on trn2.48xlarge: .*rejects compressed-tensors \/ AWQ \/ GPTQ weights; use Precision.FP8/],
    ['FP4 weights on Trn2',
      { weightPrecision: Precision.FP4, prequantizedCheckpoint: true },
      /'weightPrecision' \(fp4\) on trn2.48xlarge: vLLM Neuron runs MXFP4 only for gpt-oss on Trn3/],
    ['P/D on trn1',
      { prefill: { instanceType: AcceleratedInstanceType.TRN1_32XLARGE }, decode: { instanceType: AcceleratedInstanceType.TRN1_32XLARGE } },
      /'prefill.instanceType' \(trn1.32xlarge\): vLLM Neuron supports disaggregated prefill\/decode on Trn2 and Trn3, not on Trainium; use trn2.48xlarge/],
    ['KV over UCX',
      { kvTransfer: KvTransfer.NIXL_UCX },
      /'kvTransfer' \(nixl-ucx\): vLLM Neuron moves KV cache between prefill and decode with NIXL over LIBFABRIC \(EFA\) only/],
    ['no EFA on a pool',
      { decode: { instanceType: TRN2, replicas: 2, tensorParallel: 4, efaInterfaces: 0 } },
      /'decode' \(no EFA interfaces\): vLLM Neuron moves KV cache .* over LIBFABRIC \(EFA\) only/],
    ['two devices per pod',
      { prefill: { instanceType: TRN2, replicas: 2, tensorParallel: 2 } },
      /'prefill.tensorParallel' \(2\) Trainium devices per pod: Neuron allocates connected sets of 1, 4, 8, 16 devices; use 1, 4, 8, 16/],
    ['pipeline parallelism',
      { decode: { instanceType: TRN2, tensorParallel: 16, pipelineParallel: 2 } },
      /'decode.pipelineParallel' \(2\): vLLM Neuron does not support pipeline parallelism/],
    ['an LNC trn2 does not have',
      { prefill: { instanceType: TRN2, replicas: 2, tensorParallel: 4, logicalNeuronCoreConfig: 4 } },
      /'prefill.logicalNeuronCoreConfig' \(4\) is not a Logical NeuronCore configuration of trn2.48xlarge; use 2 or 1/],
  ])('%s', (_, overrides, message) => {
    expect(() => synthInference(trainiumProps(overrides))).toThrow(message);
  });

  test('an LNC on a GPU pool', () => {
    expect(() => synthInference(defaultProps({
      prefill: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 2, tensorParallel: 4, logicalNeuronCoreConfig: 2 },
    }))).toThrow(/'prefill.logicalNeuronCoreConfig' \(2\) applies to Trainium pools only; p5en.48xlarge has GPUs: remove it/);
  });

  test('a tiered KV cache on a Trainium pool', () => {
    expect(() => synthChart(c => {
      const inference = new DisaggregatedInference(c, 'Llama', trainiumProps({ model: ModelArchitecture.LLAMA_3_3_70B }));
      new TieredKvCache(c, 'Cache', { tiers: [KvTier.hostMemory(Size.gibibytes(500))] }).attachTo(inference.decode);
    })).toThrow(/runs on trn2.48xlarge \(Trainium\), and vLLM Neuron documents no KV cache offloading/);
  });
});
