import { defaultProps, noEfaInstanceType, synthInference } from './util';
import { AcceleratedInstanceType, AttentionKind, KvTransfer, ModelArchitecture, ModelCache, ModelSource, Precision, RouterPolicy } from '../../src';

const P5EN = AcceleratedInstanceType.P5EN_48XLARGE;

/** disagg's command-line flags that are not vLLM's: a construct error must not suggest them. */
const CLI_FLAGS = /(?<![\w-])--(tp|pp|dp|prefill-tp|decode-tp|prefill-pp|decode-pp|ep|prefill-ep|decode-ep|max-context|weight-precision|kv-cache-precision|instance|model|capacity-block|capacity-reservation|replicas|prefill-replicas|decode-replicas|ttft|tpot)\b/;

describe('construction errors name the prop, the value and a fix', () => {
  const CASES: Array<[string, object, RegExp]> = [
    ['name', { name: 'Llama_70B' }, /'name' \('Llama_70B'\) must be a DNS label/],
    ['kvCachePrecision', { kvCachePrecision: Precision.INT8 }, /'kvCachePrecision' \(int8\) cannot hold a vLLM KV cache; use bf16, fp16, fp8/],
    ['weightPrecision without a checkpoint', { weightPrecision: Precision.INT4 }, /'weightPrecision' \(int4\) needs a checkpoint stored in int4.*prequantizedCheckpoint: true/],
    ['kvBlockSize', { kvBlockSize: 20 }, /'kvBlockSize' \(20\) must be one of vLLM's block sizes/],
    ['disaggregationThresholdTokens', { disaggregationThresholdTokens: -1 }, /'disaggregationThresholdTokens' \(-1\) must be an integer >= 0/],
    ['routerReplicas', { routerReplicas: 0 }, /'routerReplicas' \(0\) must be a positive integer/],
    ['modelLoadBandwidthGBps', { modelLoadBandwidthGBps: 0 }, /'modelLoadBandwidthGBps' \(0\) must be a positive number/],
    ['startupOverheadSeconds', { startupOverheadSeconds: -5 }, /'startupOverheadSeconds' \(-5\) must be a number >= 0/],
    ['maxContext beyond the model', { maxContext: 200000 }, /'maxContext' \(200000\) exceeds the 131,072-token context of llama-3.3-70b; use at most 131072/],
    ['replicas', { prefill: { instanceType: P5EN, replicas: 0 } }, /'prefill.replicas' \(0\) must be a positive integer/],
    ['tensorParallel not dividing heads', { prefill: { instanceType: P5EN, tensorParallel: 3 } },
      /'prefill.tensorParallel' \(3\) must divide the 64 attention heads of llama-3.3-70b; use 1, 2, 4 or 8/],
    ['tensorParallel not an integer', { decode: { instanceType: P5EN, tensorParallel: 2.5 } }, /'decode.tensorParallel' \(2.5\) must be a positive integer; use 1, 2, 4, 8/],
    ['tensorParallel beyond a node', { decode: { instanceType: P5EN, tensorParallel: 16 } }, /'decode.tensorParallel' \(16\) exceeds the 8 accelerators of one p5en.48xlarge/],
    ['pipelineParallel', { decode: { instanceType: P5EN, pipelineParallel: 0 } }, /'decode.pipelineParallel' \(0\) must be a positive integer/],
    ['replica not whole nodes', { decode: { instanceType: P5EN, tensorParallel: 4, pipelineParallel: 3 } },
      /'decode.pipelineParallel' \(3\) makes a replica of TP 4 x PP 1 x DP 1|'decode.pipelineParallel' \(3\) makes a replica of .* = 12 accelerators/],
    ['efaInterfaces beyond the node', { decode: { instanceType: P5EN, tensorParallel: 4, efaInterfaces: 12 } },
      /'decode.efaInterfaces' \(12\) x 2 pods per node exceeds the 16 EFA interfaces of one p5en.48xlarge; use at most 8/],
    ['efaInterfaces without EFA', { maxContext: 8192, decode: { instanceType: noEfaInstanceType(), tensorParallel: 4, efaInterfaces: 1 } },
      /'decode.efaInterfaces' \(1\) .* has no EFA: remove efaInterfaces/],
    ['LIBFABRIC without EFA', { maxContext: 8192, kvTransfer: KvTransfer.NIXL_LIBFABRIC, decode: { instanceType: noEfaInstanceType(), tensorParallel: 4 } },
      /'kvTransfer' \(nixl-libfabric\) needs EFA on both pools, but decode \(test-noefa.48xlarge\) has none/],
  ];
  test.each(CASES)('%s', (_name, overrides, message) => {
    // GIVEN a bad prop WHEN the construct is built THEN it throws naming the prop
    expect(() => synthInference(defaultProps(overrides as any))).toThrow(message);
  });

  test.each(CASES)('%s: the fix is in props, not in the CLI\'s flags', (_name, overrides) => {
    // GIVEN a bad prop WHEN the construct is built THEN its error suggests no `disagg` flag (the CLI translates at its edge)
    let thrown = '';
    try {
      synthInference(defaultProps(overrides as any));
    } catch (e) {
      thrown = (e as Error).message;
    }
    expect(thrown).not.toBe('');
    expect(thrown).not.toMatch(CLI_FLAGS);
  });

  test('weights that do not fit a pod', () => {
    // GIVEN Llama-3.1-405B in BF16 at TP 2 on H200s
    const props = defaultProps({
      model: ModelArchitecture.LLAMA_3_1_405B,
      modelSource: undefined,
      weightPrecision: Precision.BF16,
      prefill: { instanceType: P5EN, tensorParallel: 8 },
      decode: { instanceType: P5EN, tensorParallel: 2 },
    });
    // WHEN built THEN the error names the decode pool's tensorParallel and a fix
    expect(() => synthInference(props)).toThrow(/the decode pool cannot run llama-3.1-405b on p5en.48xlarge:\n- 'decode.tensorParallel' \(2\) leaves too little memory for the weights.*use tensorParallel >= 8/s);
  });

  test('GPUs per pod must divide GPUs per node', () => {
    // GIVEN a model whose heads allow TP 6
    const model = ModelArchitecture.custom({
      name: 'six-kv',
      huggingFaceId: 'example/six-kv',
      parametersTotal: 8e9,
      layers: 32,
      hiddenSize: 6144,
      attentionHeads: 48,
      kvHeads: 6,
      headDim: 128,
      attentionKind: AttentionKind.GQA,
      vocabSize: 32000,
      maxContext: 8192,
    });
    // WHEN a pool uses TP 6 on an 8-GPU node THEN
    const props = defaultProps({ model, modelSource: undefined, maxContext: 8192, prefill: { instanceType: P5EN, tensorParallel: 6 } });
    expect(() => synthInference(props))
      .toThrow(/'prefill.tensorParallel' \(6\) gives pods of 6 accelerators, which do not divide the 8 of one p5en.48xlarge; use 1, 2/);
  });

  test('union-like factories reject malformed input', () => {
    // GIVEN WHEN THEN
    expect(() => ModelSource.huggingFace('llama')).toThrow(/'modelSource' \('llama'\) must be a Hugging Face id 'owner\/repo'/);
    expect(() => ModelSource.huggingFace('a/b', { tokenSecret: { name: 'HF Token' } })).toThrow(/'tokenSecret.name' \('HF Token'\)/);
    expect(() => ModelSource.s3('https://bucket/x')).toThrow(/'modelSource' \('https:\/\/bucket\/x'\) must be an S3 URI/);
    expect(() => ModelCache.nodeLocal('models')).toThrow(/'modelCache' path \('models'\) must be an absolute directory/);
    expect(() => ModelCache.podLocal(0)).toThrow(/'modelCache' size \(0\)/);
    expect(() => RouterPolicy.kvAware({ queueWeight: -1 })).toThrow(/'queueWeight' \(-1\) must be a number >= 0/);
    expect(() => RouterPolicy.kvAware({ prefixWeight: 0, queueWeight: 0, kvUsageWeight: 0 })).toThrow(/weights are all 0/);
  });
});
