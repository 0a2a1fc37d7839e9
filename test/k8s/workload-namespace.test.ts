import { App, ApiObject, Chart } from 'cdk8s';
import { WorkloadNamespace } from '../../src';
import { podSecurityOf } from '../../src/k8s/private/pod-security';

/** A Deployment whose single container has `securityContext`. */
function deployment(chart: Chart, id: string, securityContext: any, podSecurityContext: any = {}): ApiObject {
  return new ApiObject(chart, id, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: id },
    spec: { template: { spec: { securityContext: podSecurityContext, containers: [{ name: 'c', image: 'x', securityContext }] } } },
  } as any);
}

const RESTRICTED = { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] } };

describe('WorkloadNamespace', () => {
  test('comes first in the chart, without a namespace of its own, labelled with the level every pod meets', () => {
    // GIVEN a restricted router, then the namespace, then a worker that adds IPC_LOCK
    const chart = new Chart(new App(), 'serving', { namespace: 'serving' });
    deployment(chart, 'router', RESTRICTED, { seccompProfile: { type: 'RuntimeDefault' } });
    new WorkloadNamespace(chart, 'Namespace');
    deployment(chart, 'worker', { allowPrivilegeEscalation: false, capabilities: { add: ['IPC_LOCK'] } });
    // WHEN
    const objects = chart.toJson();
    // THEN
    expect(objects.map((o: any) => o.kind)).toEqual(['Namespace', 'Deployment', 'Deployment']);
    expect(objects[0].metadata.namespace).toBeUndefined();
    expect(objects[0].metadata.labels).toEqual({
      'pod-security.kubernetes.io/enforce': 'privileged',
      'pod-security.kubernetes.io/enforce-version': 'latest',
      'pod-security.kubernetes.io/warn': 'restricted',
      'pod-security.kubernetes.io/audit': 'restricted',
    });
  });

  test('a chart of restricted pods gets a restricted namespace', () => {
    const chart = new Chart(new App(), 'router', { namespace: 'router' });
    new WorkloadNamespace(chart, 'Namespace', { labels: { team: 'ml' } });
    deployment(chart, 'router', RESTRICTED, { seccompProfile: { type: 'RuntimeDefault' } });
    expect(chart.toJson()[0].metadata.labels).toMatchObject({ 'team': 'ml', 'pod-security.kubernetes.io/enforce': 'restricted' });
  });

  test('bad names are errors that name the fix', () => {
    expect(() => new WorkloadNamespace(new Chart(new App(), 'a'), 'N')).toThrow(/the chart has no 'namespace'; pass \{ name: 'inference' \}/);
    expect(() => new WorkloadNamespace(new Chart(new App(), 'b', { namespace: 'kube-system' }), 'N')).toThrow(/created by Kubernetes itself/);
    expect(() => new WorkloadNamespace(new Chart(new App(), 'c'), 'N', { name: 'Inference_1' })).toThrow(/is not a DNS label/);
  });
});

describe('Pod Security Standards', () => {
  test.each([
    ['restricted', { containers: [{ name: 'c', securityContext: RESTRICTED }], securityContext: { seccompProfile: { type: 'RuntimeDefault' } } }],
    ['baseline', { containers: [{ name: 'c' }] }],
    ['baseline', { containers: [{ name: 'c', securityContext: { capabilities: { add: ['NET_BIND_SERVICE', 'CHOWN'] } } }] }],
    ['privileged', { containers: [{ name: 'c', securityContext: { capabilities: { add: ['IPC_LOCK'] } } }] }],
    ['privileged', { containers: [{ name: 'c' }], volumes: [{ name: 'v', hostPath: { path: '/models' } }] }],
    ['privileged', { hostNetwork: true, containers: [{ name: 'c' }] }],
    ['privileged', { containers: [{ name: 'c', securityContext: { privileged: true } }] }],
    ['privileged', { containers: [{ name: 'c', ports: [{ containerPort: 80, hostPort: 80 }] }] }],
  ])('%s: %j', (level, spec) => {
    expect(podSecurityOf(spec).level).toBe(level);
  });

  test('says why a pod is not restricted', () => {
    expect(podSecurityOf({ containers: [{ name: 'vllm', securityContext: { capabilities: { add: ['IPC_LOCK'] } } }] }).notRestricted)
      .toEqual(expect.arrayContaining(["container 'vllm' adds IPC_LOCK", "container 'vllm' does not run with runAsNonRoot: true"]));
  });
});
