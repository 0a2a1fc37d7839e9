/**
 * Where traffic the NetworkPolicies of a workload let in comes from: a namespace, pods by label, or an
 * address range.
 *
 * A union-like class; each factory maps to one `NetworkPolicyPeer`.
 *
 * @see https://kubernetes.io/docs/concepts/services-networking/network-policies/
 */
export class TrafficSource {
  /**
   * Every pod of a namespace (by its `kubernetes.io/metadata.name` label, which the API server sets), e.g.
   * the one Prometheus runs in.
   */
  public static namespace(name: string): TrafficSource {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name)) {
      throw new Error(`TrafficSource.namespace('${name}'): not a namespace name (a DNS label: lowercase letters, digits and '-', at most 63 characters)`);
    }
    return new TrafficSource('namespace', name, undefined, undefined);
  }

  /**
   * Pods with these labels, in `namespace` (or in the workload's own namespace).
   */
  public static pods(labels: { [key: string]: string }, namespace?: string): TrafficSource {
    if (Object.keys(labels).length === 0) {
      throw new Error('TrafficSource.pods({}): no labels would admit every pod; name the labels of the pods that need access, '
        + 'or use TrafficSource.namespace(...)');
    }
    return new TrafficSource('pods', namespace, { ...labels }, undefined);
  }

  /**
   * An IPv4 or IPv6 range: clients that are not pods, such as Amazon Managed Service for Prometheus'
   * agentless collector, which scrapes from network interfaces in the VPC's subnets.
   */
  public static cidr(cidr: string): TrafficSource {
    const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr);
    const v4ok = v4 !== null && v4.slice(1, 5).every(o => Number(o) <= 255) && Number(v4[5]) <= 32;
    const v6ok = /^[0-9a-fA-F:]+\/\d{1,3}$/.test(cidr) && cidr.includes(':') && Number(cidr.split('/')[1]) <= 128;
    if (!v4ok && !v6ok) {
      throw new Error(`TrafficSource.cidr('${cidr}'): not an address range; write it as address/prefix, e.g. '10.0.0.0/16'`);
    }
    return new TrafficSource('cidr', undefined, undefined, cidr);
  }

  /** 'namespace', 'pods' or 'cidr'. */
  public readonly kind: string;
  /**
   * The namespace (of `namespace`, or of `pods` when given).
   * @default - the workload's namespace for `pods`; none for `cidr`
   */
  public readonly namespaceName?: string;
  /**
   * Pod labels of a `pods` source.
   * @default - none
   */
  public readonly podLabels?: { [key: string]: string };
  /**
   * The range of a `cidr` source.
   * @default - none
   */
  public readonly range?: string;

  private constructor(kind: string, namespaceName?: string, podLabels?: { [key: string]: string }, range?: string) {
    this.kind = kind;
    this.namespaceName = namespaceName;
    this.podLabels = podLabels;
    this.range = range;
  }
}

/** Options of {@link NetworkIsolation.workersBehindRouter}. */
export interface NetworkIsolationOptions {
  /**
   * Who may also reach the workers' HTTP ports: the Prometheus that scrapes them. vLLM serves `/metrics`
   * on its API port, so a scraper must be named here; the router's own port stays open to the cluster.
   * @default - none: only the deployment's own pods (and, with an InferencePool, the gateway) reach the workers
   */
  readonly metricsFrom?: TrafficSource[];
}

/**
 * Which pods may open connections to a deployment's pods: NetworkPolicies the workload constructs emit.
 *
 * `workersBehindRouter()` (the default) keeps every port of the workers (vLLM's API, NIXL's side
 * channel, Ray, torch.distributed, the KV-event sockets) reachable only from the deployment's own pods:
 * its router and its other workers. The router's API port stays open to the cluster (clients, the
 * gateway, KEDA), its peer port only to the other router replicas; a standalone pool's API ports stay
 * open, its other ports do not; a kvstore takes connections from the library's pods in its namespace.
 * An InferencePool's gateway (and its endpoint picker in the workload's namespace) reaches the decode
 * pods' API ports. Egress is not restricted (workers download models and join collectives).
 *
 * The policies take effect only where the cluster's CNI enforces them: `InferenceCluster` turns on the
 * Amazon VPC CNI's network policy agent. EFA's RDMA traffic (NIXL, all-to-all) bypasses the kernel's
 * network stack and no policy sees it; the EFA security group bounds it to the node groups.
 *
 * @see https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy.html
 */
export class NetworkIsolation {
  /** NetworkPolicies: workers only from the deployment's own pods (and the sources named), the router from anywhere. */
  public static workersBehindRouter(options: NetworkIsolationOptions = {}): NetworkIsolation {
    return new NetworkIsolation('workers-behind-router', options.metricsFrom ?? []);
  }

  /** No NetworkPolicies: every pod of the cluster reaches every port of the workers. */
  public static none(): NetworkIsolation {
    return new NetworkIsolation('none', []);
  }

  /** 'workers-behind-router' or 'none'. */
  public readonly kind: string;
  /** Sources that may scrape the workers' metrics. */
  public readonly metricsFrom: TrafficSource[];

  private constructor(kind: string, metricsFrom: TrafficSource[]) {
    this.kind = kind;
    this.metricsFrom = metricsFrom;
  }
}
