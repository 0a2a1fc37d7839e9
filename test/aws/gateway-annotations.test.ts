import { App, Stack } from 'aws-cdk-lib';
import { InferenceCluster, LoadBalancerAnnotations, LoadBalancerScheme } from '../../src/aws';

// Construct-tree checks only: a full cluster synthesis is slow.
function newCluster(props: ConstructorParameters<typeof InferenceCluster>[2] = {}): InferenceCluster {
  return new InferenceCluster(new Stack(new App(), 'Test'), 'Inference', props);
}

describe('LoadBalancerAnnotations', () => {
  test('an internal NLB with IP targets by default', () => {
    // WHEN
    const a = LoadBalancerAnnotations.networkLoadBalancer();
    // THEN
    expect(a).toEqual({
      'service.beta.kubernetes.io/aws-load-balancer-type': 'external',
      'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip',
      'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internal',
    });
  });

  test('the scheme is passed through and each call returns a fresh map', () => {
    // WHEN
    const a = LoadBalancerAnnotations.networkLoadBalancer(LoadBalancerScheme.INTERNET_FACING);
    a.extra = 'x';
    // THEN
    expect(a['service.beta.kubernetes.io/aws-load-balancer-scheme']).toBe('internet-facing');
    expect(LoadBalancerAnnotations.networkLoadBalancer()).not.toHaveProperty('extra');
  });
});

describe('InferenceCluster.gatewayInfrastructureAnnotations', () => {
  // (example-stack.snapshot.test.ts checks that the Helm ingress gateway's Service gets the same map)
  test('default: an internal NLB', () => {
    // GIVEN / WHEN
    const c = newCluster();
    // THEN
    expect(c.gatewayInfrastructureAnnotations['service.beta.kubernetes.io/aws-load-balancer-scheme']).toBe('internal');
    expect(c.gatewayInfrastructureAnnotations).toEqual(LoadBalancerAnnotations.networkLoadBalancer(LoadBalancerScheme.INTERNAL));
    // Gateway API v1.4 allows at most 8 entries in spec.infrastructure.annotations
    expect(Object.keys(c.gatewayInfrastructureAnnotations).length).toBeLessThanOrEqual(8);
  });

  test('follows addons.istio.ingressScheme, also when the Helm ingress gateway is off', () => {
    // GIVEN / WHEN
    const c = newCluster({ addons: { istio: { ingressScheme: LoadBalancerScheme.INTERNET_FACING, ingressGateway: false } } });
    // THEN
    expect(c.gatewayInfrastructureAnnotations['service.beta.kubernetes.io/aws-load-balancer-scheme']).toBe('internet-facing');
    expect(c.node.tryFindChild('IstioIngressGateway')).toBeUndefined();
  });
});
