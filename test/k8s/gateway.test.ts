import { defaultProps, find, synthInference, validateManifests } from './util';
import { GatewayExposure, GatewayTls } from '../../src';

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

  test('TLS from a Secret: an HTTPS listener on 443 that terminates with the Secret, valid against the Gateway API CRD', () => {
    // GIVEN WHEN
    const { manifests, inference } = synthInference(defaultProps({
      gateway: GatewayExposure.gateway({ tls: GatewayTls.certificateSecret('llm-example-com'), loadBalancerScheme: 'internet-facing' }),
    }));
    const gateway = find(manifests, 'Gateway');
    // THEN
    expect(gateway.spec.listeners).toEqual([expect.objectContaining({
      protocol: 'HTTPS',
      port: 443,
      tls: { mode: 'Terminate', certificateRefs: [{ group: '', kind: 'Secret', name: 'llm-example-com' }] },
    })]);
    expect(find(manifests, 'HTTPRoute').spec.parentRefs[0].sectionName).toBe(gateway.spec.listeners[0].name);
    expect(inference.warnings.join('\n')).not.toMatch(/plain HTTP/);
    expect(validateManifests(manifests).errors).toEqual([]);
  });

  test('TLS from ACM: the NLB terminates with the certificate on the listener port, the gateway stays HTTP', () => {
    // GIVEN
    const arn = 'arn:aws:acm:us-east-2:123456789012:certificate/0f6a1c1e-1111-2222-3333-444455556666';
    // WHEN
    const { manifests } = synthInference(defaultProps({ gateway: GatewayExposure.gateway({ tls: GatewayTls.acmCertificate(arn) }) }));
    const gateway = find(manifests, 'Gateway');
    // THEN
    expect(gateway.spec.listeners[0]).toMatchObject({ protocol: 'HTTP', port: 443 });
    expect(gateway.spec.listeners[0].tls).toBeUndefined();
    expect(gateway.spec.infrastructure.annotations).toMatchObject({
      'service.beta.kubernetes.io/aws-load-balancer-ssl-cert': arn,
      'service.beta.kubernetes.io/aws-load-balancer-ssl-ports': '443',
    });
    // Gateway API v1.4 allows at most 8 infrastructure annotations.
    expect(Object.keys(gateway.spec.infrastructure.annotations).length).toBeLessThanOrEqual(8);
    expect(validateManifests(manifests).errors).toEqual([]);
  });

  test('an internet-facing gateway without TLS is warned about', () => {
    const { inference } = synthInference(defaultProps({ gateway: GatewayExposure.gateway({ loadBalancerScheme: 'internet-facing' }) }));
    expect(inference.warnings.join('\n')).toMatch(/internet-facing and speaks plain HTTP.*GatewayTls/);
  });

  test('bad TLS references are rejected with the expected form', () => {
    expect(() => GatewayTls.acmCertificate('arn:aws:iam::123456789012:server-certificate/x')).toThrow(/arn:aws:acm:<region>:<account>:certificate\/<id>/);
    expect(() => GatewayTls.certificateSecret('My_Cert')).toThrow(/not a Secret name/);
  });

  test('bad gateway options are rejected', () => {
    // GIVEN WHEN THEN
    expect(() => GatewayExposure.gateway({ port: 0 })).toThrow(/'gateway.port' \(0\)/);
    expect(() => GatewayExposure.gateway({ loadBalancerScheme: 'public' })).toThrow(/'gateway.loadBalancerScheme' \('public'\)/);
  });
});
