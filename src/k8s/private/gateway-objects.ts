import { GatewayExposure } from '../gateway-exposure';

/* eslint-disable @typescript-eslint/no-explicit-any */

/** Inputs of {@link gatewayObjects} (internal). */
export interface GatewayObjectsInputs {
  readonly exposure: GatewayExposure;
  readonly name: string;
  readonly namespace?: string;
  readonly routerService: string;
  readonly decodeSelector: Record<string, string>;
  readonly labels: Record<string, string>;
  /** Name of the InferencePool (default `<name>-decode`). */
  readonly poolName?: string;
  /** Target ports of the InferencePool (default [8000]): one per data-parallel rank of a pod. */
  readonly targetPorts?: number[];
}

/**
 * The Gateway API objects of an exposure, each with a construct `id`: Gateway v1 and HTTPRoute v1
 * (Gateway API v1.4 standard channel), InferencePool v1 (Gateway API Inference Extension v1.x).
 */
export function gatewayObjects(inputs: GatewayObjectsInputs): any[] {
  const { exposure, name, labels } = inputs;
  const objects: any[] = [];
  let parentRef: any;
  if (exposure.kind === 'none') {
    return objects;
  }
  if (exposure.kind === 'gateway') {
    const g = exposure.newGateway!;
    objects.push({
      id: 'Gateway',
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'Gateway',
      metadata: { name, labels },
      spec: {
        gatewayClassName: g.gatewayClassName ?? 'istio',
        // Passed on to the Service the implementation creates: an NLB through the AWS Load Balancer Controller.
        infrastructure: {
          annotations: {
            'service.beta.kubernetes.io/aws-load-balancer-type': 'external',
            'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip',
            'service.beta.kubernetes.io/aws-load-balancer-scheme': g.loadBalancerScheme ?? 'internal',
          },
        },
        listeners: [{ name: 'http', protocol: 'HTTP', port: g.port ?? 80, allowedRoutes: { namespaces: { from: 'Same' } } }],
      },
    });
    parentRef = { group: 'gateway.networking.k8s.io', kind: 'Gateway', name, sectionName: 'http' };
  } else {
    const e = exposure.existing!;
    parentRef = { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: e.name, ...(e.namespace ? { namespace: e.namespace } : {}) };
  }
  const hostnames = exposure.newGateway?.hostnames ?? exposure.existing?.hostnames;
  let backendRef: any = { group: '', kind: 'Service', name: inputs.routerService, port: 80 };
  if (exposure.kind === 'inference-pool') {
    const pool = exposure.pool!;
    objects.push({
      id: 'InferencePool',
      apiVersion: 'inference.networking.k8s.io/v1',
      kind: 'InferencePool',
      metadata: { name: inputs.poolName ?? `${name}-decode`, labels },
      spec: {
        selector: { matchLabels: inputs.decodeSelector },
        targetPorts: (inputs.targetPorts ?? [8000]).map(number => ({ number })),
        ...(pool.endpointPickerService ? {
          endpointPickerRef: { name: pool.endpointPickerService, port: { number: pool.endpointPickerPort ?? 9002 }, failureMode: 'FailClose' },
        } : {}),
      },
    });
    backendRef = { group: 'inference.networking.k8s.io', kind: 'InferencePool', name: inputs.poolName ?? `${name}-decode` };
  }
  objects.push({
    id: 'HttpRoute',
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'HTTPRoute',
    metadata: { name, labels },
    spec: {
      parentRefs: [parentRef],
      ...(hostnames && hostnames.length > 0 ? { hostnames } : {}),
      rules: [{
        matches: [{ path: { type: 'PathPrefix', value: '/' } }],
        backendRefs: [backendRef],
        // Long generations: no gateway-side request timeout shorter than the model's.
        timeouts: { request: '0s' },
      }],
    },
  });
  return objects;
}
