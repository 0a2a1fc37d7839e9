/**
 * NetworkPolicy semantics (networking.k8s.io/v1) over a set of Kubernetes objects, and the connections a
 * deployment needs to serve, read from the objects themselves: the router's ConfigMap (its pools, KV-event
 * sockets and peers), the workers' NIXL side channel, a LeaderWorkerSet group's ranks, the kvstore URL,
 * Services and HTTPRoutes. The walk checks every needed connection is admitted; tests also ask what an
 * outsider may reach.
 */
/** A pod as the policies see it: where it runs and its labels. */
export interface PodShape {
  /** `Kind/name` of the workload, with `(leader)`/`(worker)` for LeaderWorkerSet templates. */
  readonly owner: string;
  readonly namespace: string;
  readonly labels: Record<string, string>;
  /** Container port numbers by name (named ports in a policy resolve against them). */
  readonly namedPorts: Record<string, number>;
  readonly spec: any;
}

/** A connection a deployment opens while it serves. */
export interface Connection {
  readonly from: PodShape;
  readonly to: PodShape;
  readonly port: number;
  /** Why it is opened, e.g. 'router -> decode API'. */
  readonly purpose: string;
}

/** Labels the API server puts on a namespace. */
function namespaceLabels(objects: any[], ns: string): Record<string, string> {
  const declared = objects.find(o => o.kind === 'Namespace' && o.metadata?.name === ns);
  return { ...(declared?.metadata?.labels ?? {}), 'kubernetes.io/metadata.name': ns };
}

/** Whether a LabelSelector selects `labels` (an empty selector selects everything). */
export function selectorMatches(selector: any, labels: Record<string, string>): boolean {
  if (!selector) return true;
  for (const [k, v] of Object.entries<string>(selector.matchLabels ?? {})) {
    if (labels[k] !== v) return false;
  }
  for (const e of selector.matchExpressions ?? []) {
    const has = e.key in labels;
    const value = labels[e.key];
    switch (e.operator) {
      case 'In': if (!has || !e.values.includes(value)) return false; break;
      case 'NotIn': if (has && e.values.includes(value)) return false; break;
      case 'Exists': if (!has) return false; break;
      case 'DoesNotExist': if (has) return false; break;
      default: throw new Error(`unknown selector operator ${e.operator}`);
    }
  }
  return true;
}

/** Every pod template of the objects, with its namespace and labels. */
export function podsOf(objects: any[], defaultNamespace = 'default'): PodShape[] {
  const out: PodShape[] = [];
  for (const o of objects) {
    const ns = o.metadata?.namespace ?? defaultNamespace;
    const lws = o.spec?.leaderWorkerTemplate;
    const templates: Array<{ role: string; t: any; extra: Record<string, string> }> = lws
      ? [
        { role: ' (leader)', t: lws.leaderTemplate ?? lws.workerTemplate, extra: { 'leaderworkerset.sigs.k8s.io/worker-index': '0' } },
        ...(Number(lws.size ?? 1) > 1 ? [{ role: ' (worker)', t: lws.workerTemplate, extra: { 'leaderworkerset.sigs.k8s.io/worker-index': '1' } }] : []),
      ]
      : o.spec?.template?.spec ? [{ role: '', t: o.spec.template, extra: {} }] : [];
    for (const { role, t, extra } of templates) {
      if (!t?.spec || o.kind === 'Job' || o.kind === 'CronJob') continue;
      const namedPorts: Record<string, number> = {};
      for (const c of [...(t.spec.containers ?? []), ...(t.spec.initContainers ?? [])]) {
        for (const p of c.ports ?? []) if (p.name) namedPorts[p.name] = p.containerPort;
      }
      out.push({ owner: `${o.kind}/${o.metadata?.name}${role}`, namespace: ns, labels: { ...(t.metadata?.labels ?? {}), ...extra }, namedPorts, spec: t.spec });
    }
  }
  return out;
}

/** Whether the policies among `objects` admit a TCP connection from `from` to `to`:`port`. */
export function admits(objects: any[], from: PodShape, to: PodShape, port: number): { admitted: boolean; isolatedBy: string[] } {
  const selecting = objects.filter(o => o.kind === 'NetworkPolicy'
    && (o.metadata?.namespace ?? 'default') === to.namespace
    && selectorMatches(o.spec?.podSelector ?? {}, to.labels)
    && (o.spec?.policyTypes ?? ['Ingress']).includes('Ingress'));
  if (selecting.length === 0) return { admitted: true, isolatedBy: [] };
  const fromNsLabels = namespaceLabels(objects, from.namespace);
  const peerMatches = (peer: any, policyNs: string): boolean => {
    if (peer.ipBlock) return false; // pod-to-pod traffic through an ipBlock is implementation-defined: not counted
    const nsOk = peer.namespaceSelector ? selectorMatches(peer.namespaceSelector, fromNsLabels) : from.namespace === policyNs;
    const podOk = peer.podSelector ? selectorMatches(peer.podSelector, from.labels) : true;
    return nsOk && podOk;
  };
  const portMatches = (p: any): boolean => {
    if ((p.protocol ?? 'TCP') !== 'TCP') return false;
    if (p.port === undefined) return true;
    const start = typeof p.port === 'string' ? to.namedPorts[p.port] : p.port;
    if (start === undefined) return false;
    return port >= start && port <= (p.endPort ?? start);
  };
  const admitted = selecting.some(policy => (policy.spec?.ingress ?? []).some((rule: any) =>
    (!rule.from || rule.from.length === 0 || rule.from.some((peer: any) => peerMatches(peer, to.namespace)))
    && (!rule.ports || rule.ports.length === 0 || rule.ports.some(portMatches))));
  return { admitted, isolatedBy: selecting.map(p => p.metadata?.name) };
}

/** A pod of no workload in `namespace`, with `labels`: a client, Prometheus, a gateway. */
export function outsider(namespace: string, labels: Record<string, string> = {}): PodShape {
  return { owner: `a pod in ${namespace}`, namespace, labels, namedPorts: {}, spec: {} };
}

/** The connections the objects' workloads open while serving. */
export function servingConnections(objects: any[], defaultNamespace = 'default'): Connection[] {
  const pods = podsOf(objects, defaultNamespace);
  const out: Connection[] = [];
  const services = objects.filter(o => o.kind === 'Service');
  const serviceByHost = (host: string) => {
    const [name, ns] = host.split('.');
    return services.find(s => s.metadata?.name === name && (s.metadata?.namespace ?? defaultNamespace) === (ns ?? defaultNamespace));
  };
  const backends = (svc: any): PodShape[] => pods.filter(p => p.namespace === (svc.metadata?.namespace ?? defaultNamespace)
    && svc.spec?.selector && selectorMatches({ matchLabels: svc.spec.selector }, p.labels));
  const targetPort = (svc: any, port: number, pod: PodShape): number => {
    const sp = (svc.spec?.ports ?? []).find((p: any) => p.port === port);
    const t = sp?.targetPort ?? port;
    return typeof t === 'string' ? pod.namedPorts[t] ?? port : t;
  };
  const mounts = (pod: PodShape, configMap: string) => (pod.spec.volumes ?? []).some((v: any) => v.configMap?.name === configMap);

  // The router: its pools' API ports, their KV-event and replay sockets, its peers.
  for (const cm of objects.filter(o => o.kind === 'ConfigMap')) {
    for (const text of Object.values<string>(cm.data ?? {})) {
      let config: any;
      try { config = JSON.parse(text); } catch { continue; }
      if (!config?.router || !Array.isArray(config.pools)) continue;
      const routers = pods.filter(p => p.namespace === (cm.metadata?.namespace ?? defaultNamespace) && mounts(p, cm.metadata.name));
      for (const pool of config.pools) {
        const svc = pool.discovery?.host ? serviceByHost(pool.discovery.host) : undefined;
        if (!svc) continue;
        const apiPorts: number[] = pool.discovery.ports ?? [pool.discovery.port ?? 8000];
        for (const router of routers) {
          for (const worker of backends(svc)) {
            for (const p of apiPorts) out.push({ from: router, to: worker, port: targetPort(svc, p, worker), purpose: `router -> ${pool.name} API` });
            if (pool.kvEvents?.port) out.push({ from: router, to: worker, port: pool.kvEvents.port, purpose: `router -> ${pool.name} KV events` });
            if (pool.kvEvents?.replayPort) out.push({ from: router, to: worker, port: pool.kvEvents.replayPort, purpose: `router -> ${pool.name} KV-event replay` });
          }
        }
      }
      const peers = config.router.peers;
      const peerSvc = peers?.host ? serviceByHost(peers.host) : undefined;
      if (peerSvc) {
        for (const a of routers) for (const b of backends(peerSvc)) out.push({ from: a, to: b, port: peers.port, purpose: 'router -> peer snapshot' });
      }
    }
  }

  // NIXL's side channel: the KV consumer asks the producer's side-channel port for its agent metadata.
  const env = (pod: PodShape, name: string): string | undefined => {
    for (const c of pod.spec.containers ?? []) {
      const e = (c.env ?? []).find((x: any) => x.name === name);
      if (e?.value !== undefined) return String(e.value);
    }
    return undefined;
  };
  const instance = (p: PodShape) => p.labels['app.kubernetes.io/instance'];
  const nixl = pods.filter(p => env(p, 'VLLM_NIXL_SIDE_CHANNEL_PORT') !== undefined);
  for (const producer of nixl) {
    for (const consumer of nixl) {
      if (consumer === producer || instance(consumer) !== instance(producer)) continue;
      out.push({ from: consumer, to: producer, port: Number(env(producer, 'VLLM_NIXL_SIDE_CHANNEL_PORT')), purpose: 'NIXL side channel (P/D handshake)' });
    }
  }

  // A LeaderWorkerSet group: Ray and torch.distributed between the ranks, on ports picked at run time.
  for (const o of objects.filter(x => x.spec?.leaderWorkerTemplate && Number(x.spec.leaderWorkerTemplate.size ?? 1) > 1)) {
    const group = pods.filter(p => p.owner.startsWith(`${o.kind}/${o.metadata?.name} (`));
    for (const a of group) for (const b of group) if (a !== b) out.push({ from: a, to: b, port: 29500, purpose: 'ranks of one group (torch.distributed, Ray)' });
  }

  // The remote KV tier: redis://host:port in the workers' environment.
  for (const pod of pods) {
    for (const c of pod.spec.containers ?? []) {
      for (const e of c.env ?? []) {
        const m = /^redis:\/\/([^:/]+):(\d+)/.exec(String(e.value ?? ''));
        const svc = m ? serviceByHost(m[1]) : undefined;
        if (svc) for (const store of backends(svc)) out.push({ from: pod, to: store, port: targetPort(svc, Number(m![2]), store), purpose: 'worker -> kvstore' });
      }
    }
  }

  // Clients: a Service the gateway routes to is reached from the gateway's namespace.
  for (const route of objects.filter(o => o.kind === 'HTTPRoute')) {
    const routeNs = route.metadata?.namespace ?? defaultNamespace;
    const gatewayNs = route.spec?.parentRefs?.[0]?.namespace ?? routeNs;
    const gateway = outsider(gatewayNs, { 'gateway.networking.k8s.io/gateway-name': String(route.spec?.parentRefs?.[0]?.name) });
    for (const rule of route.spec?.rules ?? []) {
      for (const ref of rule.backendRefs ?? []) {
        if ((ref.kind ?? 'Service') === 'Service') {
          const svc = services.find(s => s.metadata?.name === ref.name && (s.metadata?.namespace ?? defaultNamespace) === routeNs);
          if (svc) for (const b of backends(svc)) out.push({ from: gateway, to: b, port: targetPort(svc, ref.port, b), purpose: 'gateway -> API' });
        } else if (ref.kind === 'InferencePool') {
          const pool = objects.find(x => x.kind === 'InferencePool' && x.metadata?.name === ref.name);
          const members = pods.filter(p => p.namespace === routeNs && selectorMatches(pool?.spec?.selector, p.labels));
          for (const m of members) {
            for (const tp of pool?.spec?.targetPorts ?? []) out.push({ from: gateway, to: m, port: tp.number, purpose: 'gateway -> InferencePool member' });
          }
        }
      }
    }
  }
  return out;
}

/** Needed connections the policies refuse. */
export function refusedConnections(objects: any[], defaultNamespace = 'default'): Array<Connection & { isolatedBy: string[] }> {
  return servingConnections(objects, defaultNamespace).flatMap(c => {
    const verdict = admits(objects, c.from, c.to, c.port);
    return verdict.admitted ? [] : [{ ...c, isolatedBy: verdict.isolatedBy }];
  });
}
