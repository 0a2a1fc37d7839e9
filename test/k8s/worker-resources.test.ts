import { container, defaultProps, find, synthInference } from './util';
import { AcceleratedInstanceType, ModelCache } from '../../src';

describe('worker resources and placement', () => {
  test('TP4 on p5en: 4 GPUs, half the EFA interfaces, hugepages, and half the host', () => {
    // GIVEN the default configuration WHEN synthesized
    const { manifests } = synthInference(defaultProps());
    const deployment = find(manifests, 'Deployment', '-decode');
    const r = container(deployment).resources;
    const type = AcceleratedInstanceType.P5EN_48XLARGE;
    // THEN accelerators and EFA come from the catalog share: 4 of 8 GPUs -> 8 of 16 EFA
    expect(r.limits['nvidia.com/gpu']).toBe(4);
    expect(r.requests['vpc.amazonaws.com/efa']).toBe(type.efaInterfacesFor(4));
    expect(r.limits['vpc.amazonaws.com/efa']).toBe(8);
    // hugepages: half of the EFA driver's 5128 x 2 MiB, requests = limits
    expect(r.requests['hugepages-2Mi']).toBe('5128Mi');
    expect(r.limits['hugepages-2Mi']).toBe(r.requests['hugepages-2Mi']);
    // memory and CPU: half the node less a 10% reserve
    expect(r.requests.memory).toBe(`${Math.floor(2048 * 0.5 * 0.9)}Gi`);
    expect(r.requests.cpu).toBe(String(Math.floor(192 * 0.5 * 0.9)));
    // /dev/shm: 8 GiB per GPU in memory
    const shm = deployment.spec.template.spec.volumes.find((v: any) => v.name === 'dshm');
    expect(shm.emptyDir).toEqual({ medium: 'Memory', sizeLimit: '32Gi' });
    expect(container(deployment).securityContext.capabilities.add).toContain('IPC_LOCK');
  });

  test('TP8 takes the whole node and every EFA interface', () => {
    // GIVEN decode at TP8 WHEN synthesized
    const { manifests } = synthInference(defaultProps({ decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, tensorParallel: 8 } }));
    const r = container(find(manifests, 'Deployment', '-decode')).resources;
    // THEN
    expect(r.limits['vpc.amazonaws.com/efa']).toBe(16);
    expect(r.limits['hugepages-2Mi']).toBe('10256Mi');
  });

  test('node selector, toleration, host anti-affinity between pools, zone affinity', () => {
    // GIVEN a node pool role and a zone WHEN synthesized
    const { manifests } = synthInference(defaultProps({
      zone: 'us-west-2a',
      prefill: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, tensorParallel: 4, nodePoolRole: 'prefill' },
    }));
    const spec = find(manifests, 'Deployment', '-prefill').spec.template.spec;
    // THEN
    expect(spec.nodeSelector).toEqual({
      'node.kubernetes.io/instance-type': 'p5en.48xlarge',
      'disagg.dev/pool-role': 'prefill',
      'topology.kubernetes.io/zone': 'us-west-2a',
    });
    expect(spec.tolerations).toContainEqual({ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' });
    const anti = spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0];
    expect(anti.topologyKey).toBe('kubernetes.io/hostname');
    expect(anti.labelSelector.matchLabels['app.kubernetes.io/component']).toBe('decode');
    expect(spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey).toBe('topology.kubernetes.io/zone');
  });

  test('replicas that could share a node prefer different nodes, so one drain never takes a whole pool', () => {
    // GIVEN TP4 on 8-GPU nodes (two pods fit one node) and TP8 (one pod per node) WHEN synthesized
    const half = find(synthInference(defaultProps()).manifests, 'Deployment', '-decode');
    const whole = find(synthInference(defaultProps({ decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, tensorParallel: 8 } })).manifests,
      'Deployment', '-decode');
    // THEN the half-node pods spread by host, softly (a pod is never held back for it)
    expect(half.spec.template.spec.topologySpreadConstraints).toEqual([{
      maxSkew: 1,
      topologyKey: 'kubernetes.io/hostname',
      whenUnsatisfiable: 'ScheduleAnyway',
      labelSelector: { matchLabels: half.spec.selector.matchLabels },
    }]);
    // AND a pod that fills its node needs no constraint
    expect(whole.spec.template.spec.topologySpreadConstraints).toBeUndefined();
  });

  test('efaHugePages: false drops the hugepages request and turns them off in libfabric', () => {
    // GIVEN WHEN
    const c = container(find(synthInference(defaultProps({ efaHugePages: false })).manifests, 'Deployment', '-decode'));
    // THEN
    expect(c.resources.requests['hugepages-2Mi']).toBeUndefined();
    expect(c.resources.limits['hugepages-2Mi']).toBeUndefined();
    expect(c.resources.limits['vpc.amazonaws.com/efa']).toBe(8);
    expect(c.env).toContainEqual({ name: 'FI_EFA_USE_HUGE_PAGE', value: '0' });
    // AND by default they are requested and libfabric is left to use them
    const d = container(find(synthInference(defaultProps()).manifests, 'Deployment', '-decode'));
    expect(d.env.map((e: any) => e.name)).not.toContain('FI_EFA_USE_HUGE_PAGE');
  });

  test('the model cache is a hostPath on the NVMe RAID0 mount by default, or a sized emptyDir', () => {
    // GIVEN default and pod-local caches WHEN synthesized
    const host = synthInference(defaultProps()).manifests;
    const pod = synthInference(defaultProps({ modelCache: ModelCache.podLocal() })).manifests;
    const volume = (m: any[]) => find(m, 'Deployment', '-decode').spec.template.spec.volumes.find((v: any) => v.name === 'model-cache');
    // THEN
    expect(volume(host).hostPath).toEqual({ path: '/mnt/k8s-disks/0/disagg/models', type: 'DirectoryOrCreate' });
    // 70.6e9 BF16 parameters = 141.2 GB = 131.5 GiB checkpoint, twice that
    expect(volume(pod).emptyDir.sizeLimit).toBe(`${Math.ceil(((70.6e9 * 2) / 2 ** 30) * 2)}Gi`);
  });

  test('probes: startup sized for the checkpoint download plus warm-up; readiness and liveness on /health', () => {
    // GIVEN a 1 GB/s download WHEN synthesized
    const { manifests } = synthInference(defaultProps({ modelLoadBandwidthGBps: 1, startupOverheadSeconds: 300 }));
    const c = container(find(manifests, 'Deployment', '-decode'));
    // THEN 141.2 GB / 1 GB/s + 300 s = 441.2 s -> 45 probes of 10 s
    expect(c.startupProbe.failureThreshold * c.startupProbe.periodSeconds).toBeGreaterThanOrEqual(441);
    expect(c.startupProbe.failureThreshold).toBe(45);
    expect(c.readinessProbe.httpGet.path).toBe('/health');
    expect(c.livenessProbe.httpGet.path).toBe('/health');
  });

  test('PodDisruptionBudgets for both pools and the router', () => {
    // GIVEN WHEN
    const { manifests } = synthInference(defaultProps());
    const budgets = manifests.filter(m => m.kind === 'PodDisruptionBudget');
    // THEN
    expect(budgets.map(b => b.metadata.name).sort()).toEqual(['llama-3-3-70b-decode', 'llama-3-3-70b-prefill', 'llama-3-3-70b-router']);
    expect(find(manifests, 'PodDisruptionBudget', '-router').spec.minAvailable).toBe(1);
  });

  test('non-root workers on request', () => {
    // GIVEN runWorkersAsNonRoot with a pod-local cache WHEN synthesized
    const { manifests, inference } = synthInference(defaultProps({ runWorkersAsNonRoot: true, modelCache: ModelCache.podLocal(300) }));
    const d = find(manifests, 'Deployment', '-decode');
    // THEN
    expect(container(d).securityContext.runAsNonRoot).toBe(true);
    expect(d.spec.template.spec.securityContext.fsGroup).toBe(1000);
    expect(inference.warnings).toEqual([]);
  });
});
