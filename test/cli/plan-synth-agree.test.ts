// plan's "fits" is synth's "synthesizes" (issue 37): on every GPU instance type of the catalog and every
// tensor-parallel size plan sizes, the layout plan prints (EFA interfaces per pod included) is one the
// DisaggregatedInference construct behind synth accepts as is. A g6e.12xlarge TP1 plan once said
// "1 EFA interface per pod" for four pods on a node with one, which synth then refused.
import { disagg, tmpdir } from './util';
import { ModelArchitecture, Precision, AcceleratedInstanceType, ParallelismRules, ServingPlan, ModelSource } from '../../src';
import { defaultProps, synthInference } from '../k8s/util';

const model = ModelArchitecture.fromName('llama-3.1-8b');
const gpuTypes = AcceleratedInstanceType.all().filter(t => !t.isNeuron && t.acceleratorCount > 0);

describe('plan and synth agree', () => {
  test.each(gpuTypes.map(t => [t.name, t] as const))('%s: every size plan says fits synthesizes with plan\'s layout', (_name, type) => {
    const checked: string[] = [];
    for (const tp of ParallelismRules.validTensorParallelSizes(model, type.acceleratorCount)) {
      const plan = ServingPlan.create({
        model, instanceType: type, weightPrecision: Precision.BF16, kvCachePrecision: Precision.BF16, maxContext: 8192, tensorParallel: tp,
      });
      if (!plan.fits) continue;
      const pods = Math.max(1, Math.floor(type.acceleratorCount / plan.layout.acceleratorsPerPod));
      // THEN the pods plan packs on a node never ask for more interfaces than it has
      expect(plan.layout.efaInterfacesPerPod * pods).toBeLessThanOrEqual(type.efaInterfacesFor(type.acceleratorCount));
      // AND the construct takes that layout without a word of complaint
      let error: string | undefined;
      try {
        synthInference(defaultProps({
          model,
          modelSource: ModelSource.huggingFace('meta-llama/Llama-3.1-8B-Instruct', { tokenSecret: { name: 'hf-token' } }),
          weightPrecision: Precision.BF16,
          kvCachePrecision: Precision.BF16,
          maxContext: 8192,
          prefill: { instanceType: type, replicas: 1, tensorParallel: tp },
          decode: { instanceType: type, replicas: 1, tensorParallel: tp },
        }));
      } catch (e) {
        error = (e as Error).message;
      }
      expect({ type: type.name, tp, error }).toEqual({ type: type.name, tp, error: undefined });
      checked.push(`TP${tp}`);
    }
    expect(checked.length).toBeGreaterThan(0);
  });
});

describe('plan and synth size the same weights', () => {
  test('on Trainium without --weight-precision both take the checkpoint\'s own BF16 (vLLM Neuron quantizes nothing), and the same KV', async () => {
    // WHEN plan and synth are asked about the same model on trn2 with the same TP and no --weight-precision
    const plan = JSON.parse((await disagg('plan', '--instance', 'trn2.48xlarge', '--model', 'llama-3.1-8b', '--tp', '4', '--json')).out);
    const synth = JSON.parse((await disagg('synth', '--instance', 'trn2.48xlarge', '--model', 'llama-3.1-8b', '--tp', '4', '--json',
      '--out', tmpdir('agree'))).out);
    // THEN plan sizes BF16 weights, and each rank holds what synth's pools hold
    expect(plan.weights.description).toBe('all weights bf16');
    expect(plan.kvCache.precision).toBe('bf16');
    expect(synth.pools.decode.weightBytesPerRank).toBe(plan.memoryPerRank.weightBytes);
    expect(synth.pools.decode.kvCacheBytesPerRank).toBe(plan.memoryPerRank.kvCacheBytes);
    expect(synth.pools.decode.kvTokensPerReplica).toBe(plan.kvTokens);
  });
});
