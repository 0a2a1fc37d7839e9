import { defaultProps, find, reportSkipped, synthInference, validateManifests } from './util';
import { AcceleratedInstanceType } from '../../src/catalog';

// Pools on p6e-gb200 UltraServers: a ComputeDomain per pool (IMEX for Multi-Node NVLink, through the
// NVIDIA DRA driver), every pod claims its channel, and the pods of a multi-node replica share a clique.

const GB200 = AcceleratedInstanceType.P6E_GB200_36XLARGE;

function gb200(decode: { tensorParallel: number; pipelineParallel?: number }) {
  return synthInference(defaultProps({
    prefill: { instanceType: GB200, replicas: 2, tensorParallel: 4 },
    decode: { instanceType: GB200, replicas: 1, ...decode },
  }));
}

describe('p6e-gb200 pools', () => {
  test('each pool gets a ComputeDomain whose channel its pods claim', () => {
    // GIVEN / WHEN single-node pools
    const { manifests } = gb200({ tensorParallel: 4 });
    // THEN one ComputeDomain per pool, numNodes 0 (the driver's DNS-name mode) and a named channel template
    const domains = manifests.filter((m) => m.kind === 'ComputeDomain');
    expect(domains.map((d) => d.apiVersion)).toEqual(['resource.nvidia.com/v1beta1', 'resource.nvidia.com/v1beta1']);
    const prefillDomain = domains.find((d) => d.metadata.name.endsWith('prefill'))!;
    expect(prefillDomain.spec).toEqual({ numNodes: 0, channel: { resourceClaimTemplate: { name: `${prefillDomain.metadata.name}-imex-channel` } } });
    expect(prefillDomain.metadata.namespace).toBe('inference');
    // AND the Deployment's pods claim it, from the engine container
    const pod = find(manifests, 'Deployment', 'prefill').spec.template.spec;
    expect(pod.resourceClaims).toEqual([{ name: 'imex-channel', resourceClaimTemplateName: `${prefillDomain.metadata.name}-imex-channel` }]);
    expect(pod.containers[0].resources.claims).toEqual([{ name: 'imex-channel' }]);
    expect(pod.containers[0].resources.limits['nvidia.com/gpu']).toBe(4);
    // AND a single-node pod needs no clique
    expect(pod.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution).toBeUndefined();
    expect(pod.affinity.nodeAffinity).toBeUndefined();
    // AND every object is valid (core objects with kubernetes-models, the ComputeDomain against its CRD)
    const result = validateManifests(manifests);
    reportSkipped(result);
    expect(result.errors).toEqual([]);
  });

  test('the pods of a multi-node replica stay in one NVLink clique', () => {
    // GIVEN / WHEN decode spans two nodes (TP4 x PP2)
    const { manifests } = gb200({ tensorParallel: 4, pipelineParallel: 2 });
    const lws = find(manifests, 'LeaderWorkerSet', 'decode');
    const domain = manifests.find((m) => m.kind === 'ComputeDomain' && m.metadata.name.endsWith('decode'));
    // THEN leader and workers claim the channel and require their group's clique
    for (const t of ['leaderTemplate', 'workerTemplate']) {
      const spec = lws.spec.leaderWorkerTemplate[t].spec;
      expect(spec.resourceClaims).toEqual([{ name: 'imex-channel', resourceClaimTemplateName: domain.spec.channel.resourceClaimTemplate.name }]);
      expect(spec.containers[0].resources.claims).toEqual([{ name: 'imex-channel' }]);
      const [term] = spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution;
      expect(term.topologyKey).toBe('nvidia.com/gpu.clique');
      expect(term.matchLabelKeys).toEqual(['leaderworkerset.sigs.k8s.io/group-key']);
      expect(term.labelSelector.matchLabels).toEqual(lws.spec.leaderWorkerTemplate[t].metadata.labels);
      expect(spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms)
        .toEqual([{ matchExpressions: [{ key: 'nvidia.com/gpu.clique', operator: 'Exists' }] }]);
      // the zone preference stays
      expect(spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution).toHaveLength(1);
    }
    const result = validateManifests(manifests);
    reportSkipped(result);
    expect(result.errors).toEqual([]);
  });

  test('pools on other GPU types get no ComputeDomain', () => {
    const { manifests } = synthInference(defaultProps());
    expect(manifests.filter((m) => m.kind === 'ComputeDomain')).toEqual([]);
    expect(find(manifests, 'Deployment', 'prefill').spec.template.spec.resourceClaims).toBeUndefined();
  });
});
