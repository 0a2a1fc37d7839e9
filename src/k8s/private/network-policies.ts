import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { NetworkIsolation, TrafficSource } from '../network-isolation';
import { APP_COMPONENT, APP_INSTANCE, APP_NAME, APP_PART_OF } from './labels';
import { strip } from './model-inputs';

/** The label the API server sets on every namespace (Kubernetes >= 1.21). */
const NAMESPACE_NAME = 'kubernetes.io/metadata.name';

/** Inputs of {@link addDeploymentPolicies} (internal). */
export interface DeploymentPolicyInputs {
  readonly isolation: NetworkIsolation;
  /** The deployment's `app.kubernetes.io/instance`: every pod of it carries the label. */
  readonly instance: string;
  readonly namespace?: string;
  /** Ports the workers serve HTTP on (vLLM's API and /metrics): 8000, and 8000 + r per rank endpoint. */
  readonly workerHttpPorts: number[];
  /**
   * The router's labels, API port and peer port, when the deployment has one; else the workers' API
   * ports are what clients reach, and stay open.
   * @default - no router
   */
  readonly router?: { readonly labels: Record<string, string>; readonly port: number; readonly peerPort: number };
  /**
   * The namespace of the gateway an InferencePool over the workers hands requests to (it reaches the
   * workers' API ports directly), with the workload's namespace, where an endpoint picker runs.
   * @default - no InferencePool
   */
  readonly inferencePoolGateway?: { readonly namespace?: string };
}

/**
 * NetworkPolicies of one deployment (see NetworkIsolation): `<instance>-workers` over every pod of the
 * deployment but its router, and `<instance>-router` over the router.
 */
export function addDeploymentPolicies(scope: Construct, inputs: DeploymentPolicyInputs): void {
  const { isolation, instance, namespace } = inputs;
  if (isolation.kind === 'none') {
    return;
  }
  const ownPods: k8s.NetworkPolicyPeer = { podSelector: { matchLabels: { [APP_NAME]: 'disagg', [APP_INSTANCE]: instance } } };
  const httpPorts = portsOf(inputs.workerHttpPorts);
  const ingress: k8s.NetworkPolicyIngressRule[] = [
    // Router legs, the P/D handshake (NIXL's side channel), Ray and torch.distributed inside a group,
    // KV events to the router: all between the deployment's own pods.
    { from: [ownPods] },
  ];
  if (inputs.router === undefined) {
    ingress.push({ ports: httpPorts });
  }
  if (isolation.metricsFrom.length > 0) {
    ingress.push({ from: isolation.metricsFrom.map(s => peerOf(s)), ports: httpPorts });
  }
  if (inputs.inferencePoolGateway !== undefined) {
    const gatewayNamespace = inputs.inferencePoolGateway.namespace;
    const from: k8s.NetworkPolicyPeer[] = [{ podSelector: {} }];
    if (gatewayNamespace !== undefined && gatewayNamespace !== namespace) {
      from.push({ namespaceSelector: { matchLabels: { [NAMESPACE_NAME]: gatewayNamespace } } });
    }
    ingress.push({ from, ports: httpPorts });
  }
  new k8s.KubeNetworkPolicy(scope, 'WorkersNetworkPolicy', {
    metadata: metadata(`${instance}-workers`, namespace, instance),
    spec: {
      podSelector: {
        matchLabels: { [APP_NAME]: 'disagg', [APP_INSTANCE]: instance },
        ...(inputs.router ? { matchExpressions: [{ key: APP_COMPONENT, operator: 'NotIn', values: [inputs.router.labels[APP_COMPONENT]] }] } : {}),
      },
      policyTypes: ['Ingress'],
      ingress,
    },
  });
  if (inputs.router !== undefined) {
    const r = inputs.router;
    new k8s.KubeNetworkPolicy(scope, 'RouterNetworkPolicy', {
      metadata: metadata(`${instance}-router`, namespace, instance),
      spec: {
        podSelector: { matchLabels: r.labels },
        policyTypes: ['Ingress'],
        ingress: [
          // The API: clients, the gateway, KEDA's scaler and Prometheus, from anywhere.
          { ports: portsOf([r.port]) },
          // The index snapshot: only the other replicas.
          { from: [{ podSelector: { matchLabels: r.labels } }], ports: portsOf([r.peerPort]) },
        ],
      },
    });
  }
}

/** Inputs of {@link addKvStorePolicy} (internal). */
export interface KvStorePolicyInputs {
  readonly isolation: NetworkIsolation;
  readonly name: string;
  readonly namespace?: string;
  readonly labels: Record<string, string>;
  readonly port: number;
  readonly metricsPort: number;
}

/** The kvstore's NetworkPolicy: its RESP port from the library's pods in its namespace, metrics from the sources named. */
export function addKvStorePolicy(scope: Construct, inputs: KvStorePolicyInputs): void {
  if (inputs.isolation.kind === 'none') {
    return;
  }
  const ingress: k8s.NetworkPolicyIngressRule[] = [
    { from: [{ podSelector: { matchLabels: { [APP_NAME]: 'disagg' } } }], ports: portsOf([inputs.port, inputs.metricsPort]) },
  ];
  if (inputs.isolation.metricsFrom.length > 0) {
    ingress.push({ from: inputs.isolation.metricsFrom.map(s => peerOf(s)), ports: portsOf([inputs.metricsPort]) });
  }
  new k8s.KubeNetworkPolicy(scope, 'NetworkPolicy', {
    metadata: metadata(inputs.name, inputs.namespace, inputs.labels[APP_INSTANCE]),
    spec: { podSelector: { matchLabels: inputs.labels }, policyTypes: ['Ingress'], ingress },
  });
}

/** The NetworkPolicyPeer of a source. */
export function peerOf(source: TrafficSource): k8s.NetworkPolicyPeer {
  switch (source.kind) {
    case 'namespace':
      return { namespaceSelector: { matchLabels: { [NAMESPACE_NAME]: source.namespaceName! } } };
    case 'pods':
      return {
        podSelector: { matchLabels: source.podLabels },
        ...(source.namespaceName !== undefined ? { namespaceSelector: { matchLabels: { [NAMESPACE_NAME]: source.namespaceName } } } : {}),
      };
    default:
      return { ipBlock: { cidr: source.range! } };
  }
}

function portsOf(ports: number[]): k8s.NetworkPolicyPort[] {
  return [...new Set(ports)].map(port => ({ protocol: 'TCP', port: k8s.IntOrString.fromNumber(port) }));
}

function metadata(name: string, namespace: string | undefined, instance: string | undefined): k8s.ObjectMeta {
  return strip({
    name,
    namespace,
    labels: { [APP_NAME]: 'disagg', ...(instance !== undefined ? { [APP_INSTANCE]: instance } : {}), [APP_PART_OF]: 'disagg' },
  });
}
