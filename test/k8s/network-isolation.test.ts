import { deepseekEpPdProps, defaultProps, synthChart, synthInference, tieredPdChart, validateManifests, wideEpProps } from './util';
import { ExpertParallelPool, GatewayExposure, NetworkIsolation, TrafficSource } from '../../src';
import { admits, outsider, podsOf, refusedConnections, servingConnections } from '../deploy/network';

const policies = (manifests: any[]) => manifests.filter(m => m.kind === 'NetworkPolicy');
const podOf = (manifests: any[], owner: string) => {
  const pod = podsOf(manifests, 'inference').find(p => p.owner === owner);
  if (!pod) throw new Error(`no pod of ${owner} among ${podsOf(manifests, 'inference').map(p => p.owner).join(', ')}`);
  return pod;
};

describe('NetworkIsolation', () => {
  test('by default a P/D deployment serves: every connection it opens is admitted, and there are connections of every kind', () => {
    const { manifests } = synthInference(defaultProps({ routerReplicas: 2 }));
    expect(policies(manifests).map(p => p.metadata.name).sort()).toEqual(['llama-3-3-70b-router', 'llama-3-3-70b-workers']);
    const needed = servingConnections(manifests, 'inference');
    // Router legs to both pools, KV events and replay, the P/D handshake, the router's peers, the gateway.
    for (const purpose of ['router -> prefill API', 'router -> decode KV events', 'router -> decode KV-event replay',
      'NIXL side channel (P/D handshake)', 'router -> peer snapshot', 'gateway -> API']) {
      expect(needed.map(c => c.purpose)).toContain(purpose);
    }
    expect(refusedConnections(manifests, 'inference')).toEqual([]);
    expect(validateManifests(manifests).errors).toEqual([]);
  });

  test('workers take nothing from outside the deployment; the router takes its API port from anywhere, its peer port from replicas only', () => {
    const { manifests } = synthInference(defaultProps({ routerReplicas: 2 }));
    const decode = podOf(manifests, 'Deployment/llama-3-3-70b-decode');
    const prefill = podOf(manifests, 'Deployment/llama-3-3-70b-prefill');
    const router = podOf(manifests, 'Deployment/llama-3-3-70b-router');
    const stranger = outsider('default', { app: 'curl' });
    const neighbour = outsider('inference', { app: 'notebook' });
    for (const port of [8000, 5557, 15557, 5600, 6379]) {
      expect(admits(manifests, stranger, decode, port).admitted).toBe(false);
      expect(admits(manifests, neighbour, prefill, port).admitted).toBe(false);
    }
    expect(admits(manifests, stranger, router, 8000).admitted).toBe(true);
    expect(admits(manifests, stranger, router, 8100).admitted).toBe(false);
    expect(admits(manifests, router, router, 8100).admitted).toBe(true);
    expect(admits(manifests, router, decode, 8000).admitted).toBe(true);
    expect(admits(manifests, decode, prefill, 5600).admitted).toBe(true);
  });

  test('metricsFrom admits Prometheus to the API ports (where vLLM serves /metrics), not to the other ports', () => {
    const { manifests } = synthInference(defaultProps({
      networkIsolation: NetworkIsolation.workersBehindRouter({
        metricsFrom: [TrafficSource.namespace('monitoring'), TrafficSource.pods({ app: 'scraper' }), TrafficSource.cidr('10.0.0.0/16')],
      }),
    }));
    const decode = podOf(manifests, 'Deployment/llama-3-3-70b-decode');
    const prometheus = outsider('monitoring', { 'app.kubernetes.io/name': 'prometheus' });
    expect(admits(manifests, prometheus, decode, 8000).admitted).toBe(true);
    expect(admits(manifests, prometheus, decode, 5600).admitted).toBe(false);
    expect(admits(manifests, outsider('inference', { app: 'scraper' }), decode, 8000).admitted).toBe(true);
    expect(admits(manifests, outsider('other', { app: 'scraper' }), decode, 8000).admitted).toBe(false);
    const rule = policies(manifests).find(p => p.metadata.name.endsWith('workers')).spec.ingress[1];
    expect(rule.from).toContainEqual({ ipBlock: { cidr: '10.0.0.0/16' } });
    expect(validateManifests(manifests).errors).toEqual([]);
  });

  test('an InferencePool gateway in another namespace reaches the decode pods it balances', () => {
    const { manifests } = synthInference(defaultProps({
      gateway: GatewayExposure.inferencePool({ gateway: { name: 'shared', namespace: 'gw' }, endpointPickerService: 'epp' }),
    }));
    expect(servingConnections(manifests, 'inference').some(c => c.purpose === 'gateway -> InferencePool member')).toBe(true);
    expect(refusedConnections(manifests, 'inference')).toEqual([]);
    // The endpoint picker in the workload's namespace scrapes the pool's metrics.
    const decode = podOf(manifests, 'Deployment/llama-3-3-70b-decode');
    expect(admits(manifests, outsider('inference', { app: 'epp' }), decode, 8000).admitted).toBe(true);
    expect(admits(manifests, outsider('elsewhere'), decode, 8000).admitted).toBe(false);
  });

  test('expert-parallel sides: ranks of a group reach each other, the router reaches every rank port', () => {
    const { manifests } = synthInference(deepseekEpPdProps());
    const needed = servingConnections(manifests, 'inference');
    expect(needed.some(c => c.purpose.startsWith('ranks of one group'))).toBe(true);
    expect(refusedConnections(manifests, 'inference')).toEqual([]);
  });

  test('a standalone expert-parallel pool keeps its API open and its collective ports closed', () => {
    const { manifests } = synthChart(c => new ExpertParallelPool(c, 'Ep', wideEpProps()));
    const [policy] = policies(manifests);
    expect(policy.spec.podSelector.matchExpressions).toBeUndefined();
    expect(refusedConnections(manifests, 'inference')).toEqual([]);
    const leader = podsOf(manifests, 'inference').find(p => p.owner.endsWith('(leader)'))!;
    const client = outsider('apps');
    expect(admits(manifests, client, leader, 8000).admitted).toBe(true);
    expect(admits(manifests, client, leader, 6379).admitted).toBe(false);
    expect(admits(manifests, client, leader, 5600).admitted).toBe(false);
  });

  test('the kvstore takes the workers and nobody else', () => {
    const { manifests } = tieredPdChart();
    expect(servingConnections(manifests, 'inference').some(c => c.purpose === 'worker -> kvstore')).toBe(true);
    expect(refusedConnections(manifests, 'inference')).toEqual([]);
    const store = podsOf(manifests, 'inference').find(p => p.owner.startsWith('StatefulSet/'))!;
    expect(admits(manifests, outsider('inference', { app: 'x' }), store, 6379).admitted).toBe(false);
  });

  test('none() emits no policy', () => {
    const { manifests } = synthInference(defaultProps({ networkIsolation: NetworkIsolation.none() }));
    expect(policies(manifests)).toEqual([]);
  });

  test('the walk notices a policy that shuts the P/D handshake out', () => {
    const { manifests } = synthInference(defaultProps());
    const workers = policies(manifests).find(p => p.metadata.name.endsWith('workers'));
    // A hand-tightened policy: the router's ports only, from the router only.
    workers.spec.ingress = [{ from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/component': 'router' } } }] }];
    const refused = refusedConnections(manifests, 'inference');
    expect(refused.map(c => c.purpose)).toContain('NIXL side channel (P/D handshake)');
    expect(refused.every(c => c.isolatedBy.includes('llama-3-3-70b-workers'))).toBe(true);
  });

  test('bad sources are refused with the fix', () => {
    expect(() => TrafficSource.cidr('10.0.0.0')).toThrow(/address\/prefix/);
    expect(() => TrafficSource.namespace('Monitoring')).toThrow(/DNS label/);
    expect(() => TrafficSource.pods({})).toThrow(/name the labels/);
  });
});
