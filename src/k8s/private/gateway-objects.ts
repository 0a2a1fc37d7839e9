import { Construct } from 'constructs';
import {
  Gateway, GatewaySpecListenersAllowedRoutesNamespacesFrom, GatewaySpecListenersTlsMode, HttpRoute, HttpRouteSpecParentRefs,
  HttpRouteSpecRulesBackendRefs, HttpRouteSpecRulesMatchesPathType,
} from '../../imports/gateway.networking.k8s.io';
import { InferencePool, InferencePoolSpecEndpointPickerRefFailureMode } from '../../imports/inference.networking.k8s.io';
import { GatewayExposure } from '../gateway-exposure';
import { strip } from './model-inputs';

/** The new Gateway's one listener ('http' whatever its protocol, so that routes keep their sectionName). */
const LISTENER = 'http';

/** Inputs of {@link addGatewayObjects} (internal). */
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
 * Adds the Gateway API objects of an exposure to `scope`: Gateway v1 and HTTPRoute v1 (Gateway API v1.4
 * standard channel), InferencePool v1 (Gateway API Inference Extension v1.x).
 */
export function addGatewayObjects(scope: Construct, inputs: GatewayObjectsInputs): void {
  const { exposure, name, namespace, labels } = inputs;
  if (exposure.kind === 'none') {
    return;
  }
  const metadata = (objectName: string) => strip({ name: objectName, namespace, labels });
  let parentRef: HttpRouteSpecParentRefs;
  if (exposure.kind === 'gateway') {
    const g = exposure.newGateway!;
    const port = g.port ?? 80;
    // ACM: the NLB holds the certificate and speaks TLS on the listener's port; the gateway stays HTTP.
    const acm: Record<string, string> = g.tls?.kind === 'acm' ? {
      'service.beta.kubernetes.io/aws-load-balancer-ssl-cert': g.tls.reference,
      'service.beta.kubernetes.io/aws-load-balancer-ssl-ports': String(port),
      'service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy': 'ELBSecurityPolicy-TLS13-1-2-2021-06',
    } : {};
    const secret = g.tls?.kind === 'secret' ? g.tls.reference : undefined;
    new Gateway(scope, 'Gateway', {
      metadata: metadata(name),
      spec: {
        gatewayClassName: g.gatewayClassName ?? 'istio',
        // Passed on to the Service the implementation creates: an NLB through the AWS Load Balancer Controller.
        infrastructure: {
          annotations: {
            'service.beta.kubernetes.io/aws-load-balancer-type': 'external',
            'service.beta.kubernetes.io/aws-load-balancer-nlb-target-type': 'ip',
            'service.beta.kubernetes.io/aws-load-balancer-scheme': g.loadBalancerScheme ?? 'internal',
            ...acm,
          },
        },
        listeners: [{
          name: LISTENER,
          protocol: secret ? 'HTTPS' : 'HTTP',
          port,
          ...(secret ? {
            tls: {
              mode: GatewaySpecListenersTlsMode.TERMINATE,
              certificateRefs: [{ group: '', kind: 'Secret', name: secret }],
            },
          } : {}),
          allowedRoutes: { namespaces: { from: GatewaySpecListenersAllowedRoutesNamespacesFrom.SAME } },
        }],
      },
    });
    parentRef = { group: 'gateway.networking.k8s.io', kind: 'Gateway', name, sectionName: LISTENER };
  } else {
    const e = exposure.existing!;
    parentRef = { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: e.name, ...(e.namespace ? { namespace: e.namespace } : {}) };
  }
  const hostnames = exposure.newGateway?.hostnames ?? exposure.existing?.hostnames;
  let backendRef: HttpRouteSpecRulesBackendRefs = { group: '', kind: 'Service', name: inputs.routerService, port: 80 };
  if (exposure.kind === 'inference-pool') {
    const pool = exposure.pool!;
    const poolName = inputs.poolName ?? `${name}-decode`;
    new InferencePool(scope, 'InferencePool', {
      metadata: metadata(poolName),
      spec: {
        selector: { matchLabels: inputs.decodeSelector },
        targetPorts: (inputs.targetPorts ?? [8000]).map(number => ({ number })),
        ...(pool.endpointPickerService ? {
          endpointPickerRef: {
            name: pool.endpointPickerService,
            port: { number: pool.endpointPickerPort ?? 9002 },
            failureMode: InferencePoolSpecEndpointPickerRefFailureMode.FAIL_CLOSE,
          },
        } : {}),
      },
    });
    backendRef = { group: 'inference.networking.k8s.io', kind: 'InferencePool', name: poolName };
  }
  new HttpRoute(scope, 'HttpRoute', {
    metadata: metadata(name),
    spec: {
      parentRefs: [parentRef],
      ...(hostnames && hostnames.length > 0 ? { hostnames } : {}),
      rules: [{
        matches: [{ path: { type: HttpRouteSpecRulesMatchesPathType.PATH_PREFIX, value: '/' } }],
        backendRefs: [backendRef],
        // Long generations: no gateway-side request timeout shorter than the model's.
        timeouts: { request: '0s' },
      }],
    },
  });
}
