// The router's Kubernetes objects (src/k8s/private/router.ts), built from a configuration file alone.
import * as fs from 'fs';
import * as path from 'path';
import { Chart, Testing } from 'cdk8s';
import { find, validateManifests } from './util';
import { Router, RouterInputs } from '../../src/k8s/private/router';
import { RouterConfigFile } from '../../src/k8s/private/router-config';

const CONFIG: RouterConfigFile = {
  router: { listenPort: 8000, servedModelName: 'm', kvBlockSize: 16 },
  policy: { name: 'round-robin', prefixSource: 'history' },
  pools: [{ name: 'decode', role: 'decode', discovery: { type: 'dns', host: 'd', port: 8000 } }],
};
const LABELS = { 'app.kubernetes.io/name': 'disagg', 'app.kubernetes.io/instance': 'x', 'app.kubernetes.io/component': 'router' };

function synthRouter(overrides: Partial<RouterInputs> = {}, namespace = 'ns'): { manifests: any[]; router: Router } {
  const chart = new Chart(Testing.app(), 'test', namespace ? { namespace } : {});
  const router = new Router(chart, 'Router', {
    name: 'x', labels: LABELS, image: 'img:1', replicas: 2, config: CONFIG, ...overrides,
  });
  return { manifests: Testing.synth(chart), router };
}

describe('router objects', () => {
  test('its ServiceAccount, a ConfigMap holding the file, a Deployment reading it, a Service and a budget, in the chart namespace', () => {
    // GIVEN WHEN
    const { manifests, router } = synthRouter();
    // THEN five objects, named after the instance
    expect(manifests.map(m => `${m.apiVersion}/${m.kind}/${m.metadata.name}/${m.metadata.namespace}`)).toEqual([
      'v1/ServiceAccount/x-router/ns', 'v1/ConfigMap/x-router-config/ns', 'apps/v1/Deployment/x-router/ns', 'v1/Service/x-router/ns', 'policy/v1/PodDisruptionBudget/x-router/ns',
    ]);
    for (const m of manifests) expect(m.metadata.labels).toEqual({ ...LABELS, 'app.kubernetes.io/part-of': 'disagg' });
    // AND the ConfigMap holds the file as given, which the Deployment mounts and passes to the router
    expect(JSON.parse(find(manifests, 'ConfigMap').data['config.json'])).toEqual(CONFIG);
    expect(router.configJson).toBe(find(manifests, 'ConfigMap').data['config.json']);
    const deployment = find(manifests, 'Deployment');
    const pod = deployment.spec.template.spec;
    expect(pod.volumes).toEqual([{ name: 'config', configMap: { name: 'x-router-config' } }]);
    expect(pod.containers[0]).toMatchObject({
      image: 'img:1',
      command: ['disagg-engine'],
      args: ['router', '--config', '/etc/disagg/config.json'],
      resources: { requests: { cpu: '2', memory: '4Gi' }, limits: { memory: '4Gi' } },
      readinessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 5, failureThreshold: 3 },
      livenessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 15, failureThreshold: 4, timeoutSeconds: 5 },
    });
    expect(pod.containers[0].imagePullPolicy).toBeUndefined();
    expect(pod).toMatchObject({ serviceAccountName: 'x-router', automountServiceAccountToken: false });
    // AND the router's own account mounts no token and carries no grant (it downloads nothing from S3 here)
    expect(find(manifests, 'ServiceAccount')).toMatchObject({ automountServiceAccountToken: false });
    expect(find(manifests, 'ServiceAccount').metadata.annotations).toBeUndefined();
    expect(deployment.spec).toMatchObject({ replicas: 2, selector: { matchLabels: LABELS } });
    expect(find(manifests, 'Service').spec).toEqual({
      type: 'ClusterIP', selector: LABELS, ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }],
    });
    expect(router.serviceName).toBe('x-router');
    // AND two or more replicas keep one up; the objects are valid Kubernetes objects
    expect(find(manifests, 'PodDisruptionBudget').spec).toEqual({ minAvailable: 1, selector: { matchLabels: LABELS } });
    expect(validateManifests(manifests).errors).toEqual([]);
  });

  test('one replica may be evicted; the pull policy passes through; the namespace is the inputs\', else the chart\'s, else none', () => {
    // GIVEN WHEN
    const { manifests } = synthRouter({ replicas: 1, imagePullPolicy: 'Always' }, '');
    // THEN
    expect(find(manifests, 'PodDisruptionBudget').spec).toEqual({ maxUnavailable: 1, selector: { matchLabels: LABELS } });
    expect(find(manifests, 'Deployment').spec.template.spec.containers[0].imagePullPolicy).toBe('Always');
    for (const m of manifests) expect(m.metadata.namespace).toBeUndefined();
    // AND an explicit namespace wins over the chart's
    for (const m of synthRouter({ namespace: 'other' }).manifests) expect(m.metadata.namespace).toBe('other');
  });

  test('the pods roll when the file changes, and only then', () => {
    // GIVEN the same file twice and a changed one WHEN synthesized
    const sha = (config: RouterConfigFile) => find(synthRouter({ config }).manifests, 'Deployment').spec.template.metadata.annotations['disagg.dev/config-sha256'];
    // THEN the annotation follows the file
    expect(sha(CONFIG)).toMatch(/^[0-9a-f]{64}$/);
    expect(sha({ ...CONFIG })).toBe(sha(CONFIG));
    expect(sha({ ...CONFIG, router: { ...CONFIG.router, kvBlockSize: 32 } })).not.toBe(sha(CONFIG));
  });

  test('object bodies are typed: the module builds them with the cdk8s k8s bindings, never `as any`', () => {
    // GIVEN the module's source WHEN read THEN it uses typed Kube* classes and no untyped escape
    const source = fs.readFileSync(path.resolve(__dirname, '..', '..', 'src', 'k8s', 'private', 'router.ts'), 'utf8');
    expect(source).not.toMatch(/as any|new ApiObject\(/);
    expect(source).toMatch(/new k8s\.KubeDeployment\(/);
  });
});
