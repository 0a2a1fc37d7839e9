import { defaultProps, find, synthInference } from './util';
import { GatewayExposure } from '../../src';

describe('gateway exposure', () => {
  test('none: no Gateway API objects', () => {
    // GIVEN WHEN
    const { manifests } = synthInference(defaultProps({ gateway: GatewayExposure.none() }));
    // THEN
    expect(manifests.filter(m => m.apiVersion.startsWith('gateway.networking') || m.apiVersion.startsWith('inference.'))).toEqual([]);
  });

  test('a new Istio Gateway with an internal NLB and an HTTPRoute to the router', () => {
    // GIVEN WHEN
    const { manifests } = synthInference(defaultProps({ gateway: GatewayExposure.gateway({ hostnames: ['llm.example.com'] }) }));
    const gateway = find(manifests, 'Gateway');
    const route = find(manifests, 'HTTPRoute');
    // THEN
    expect(gateway.spec.gatewayClassName).toBe('istio');
    expect(gateway.spec.infrastructure.annotations['service.beta.kubernetes.io/aws-load-balancer-scheme']).toBe('internal');
    expect(route.spec.parentRefs[0]).toMatchObject({ kind: 'Gateway', name: gateway.metadata.name });
    expect(route.spec.hostnames).toEqual(['llm.example.com']);
    expect(route.spec.rules[0].backendRefs[0]).toEqual({ group: '', kind: 'Service', name: 'llama-3-3-70b-router', port: 80 });
  });

  test('InferencePool over the decode pods with an endpoint picker', () => {
    // GIVEN WHEN
    const { manifests } = synthInference(defaultProps({
      gateway: GatewayExposure.inferencePool({ gateway: { name: 'shared', namespace: 'gw' }, endpointPickerService: 'epp' }),
    }));
    const pool = find(manifests, 'InferencePool');
    const route = find(manifests, 'HTTPRoute');
    // THEN
    expect(pool.spec.selector.matchLabels['app.kubernetes.io/component']).toBe('decode');
    expect(pool.spec.targetPorts).toEqual([{ number: 8000 }]);
    expect(pool.spec.endpointPickerRef).toMatchObject({ name: 'epp', port: { number: 9002 } });
    expect(route.spec.parentRefs[0]).toMatchObject({ name: 'shared', namespace: 'gw' });
    expect(route.spec.rules[0].backendRefs[0]).toEqual({ group: 'inference.networking.k8s.io', kind: 'InferencePool', name: pool.metadata.name });
  });

  test('bad gateway options are rejected', () => {
    // GIVEN WHEN THEN
    expect(() => GatewayExposure.gateway({ port: 0 })).toThrow(/'gateway.port' \(0\)/);
    expect(() => GatewayExposure.gateway({ loadBalancerScheme: 'public' })).toThrow(/'gateway.loadBalancerScheme' \('public'\)/);
  });
});
