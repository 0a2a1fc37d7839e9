// plan's "fits" is synth's "synthesizes" (issue 37): on every GPU instance type of the catalog and every
// tensor-parallel size plan sizes, the layout plan prints (EFA interfaces per pod included) is one the
// DisaggregatedInference construct behind synth accepts as is. A g6e.12xlarge TP1 plan once said
// "1 EFA interface per pod" for four pods on a node with one, which synth then refused.
import { ModelArchitecture, Precision, AcceleratedInstanceType, ParallelismRules, ServingPlan, ModelSource } from '../../src';
import { defaultProps, synthInference } from '../k8s/util';

const model = ModelArchitecture.fromName('llama-3.1-8b');
const gpuTypes = AcceleratedInstanceType.all().filter(t => !t.isNeuron && t.acceleratorCount > 0);

describe('plan and synth agree', () => {
  test.each(gpuTypes.map(t => [t.name, t] as const))('%s: every size plan says fits synthesizes with plan\'s layout', (_name, type) => {
    const checked: string[] = [];
    for (const tp of ParallelismRules.validTensorParallelSizes(model, type.acceleratorCount)) {
      const plan = ServingPlan.create({
        model, instanceType: type, weightPrecision: Precision.BF16, kvPrecision: Precision.BF16, maxContext: 8192, tensorParallel: tp,
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
