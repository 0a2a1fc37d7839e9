/**
 * Synth-time checks of a cdk8s chart against the cluster it is added to: API objects whose CRDs or
 * device plugins are switched off, pods whose node selectors match no node group, and pools that
 * ask for more accelerators than their node groups can ever hold. Each finding is a sentence that
 * names the prop, the value and the fix.
 */
import { podSpecsOf } from '../../k8s/private/pod-security';

/** Resource names the checks count. */
export const GPU_RESOURCE = 'nvidia.com/gpu';
export const NEURON_RESOURCE = 'aws.amazon.com/neuron';
export const NEURON_CORE_RESOURCE = 'aws.amazon.com/neuroncore';
export const EFA_RESOURCE = 'vpc.amazonaws.com/efa';
const ACCELERATOR_RESOURCES = [GPU_RESOURCE, NEURON_RESOURCE, NEURON_CORE_RESOURCE];

/** Label keys whose values the library knows for every node group (anything else is not checked). */
const WELL_KNOWN_INSTANCE_TYPE = 'node.kubernetes.io/instance-type';
const LEGACY_INSTANCE_TYPE = 'beta.kubernetes.io/instance-type';
const DISAGG_PREFIX = 'disagg.dev/';

/** One kind of pod a workload object runs, and how many of it. */
export interface PodGroup {
  /** `Kind/name` of the object that owns the pods (with `(leader)` / `(workers)` for LeaderWorkerSets). */
  readonly owner: string;
  /** Pods of this shape. */
  readonly count: number;
  /** How the count came about, for messages (e.g. `2 replicas`). */
  readonly countText: string;
  /** Required node labels: nodeSelector plus single-valued `In` terms of required node affinity. */
  readonly nodeLabels: Record<string, string[]>;
  /** Extended resources one pod requests (accelerators, EFA), by name. */
  readonly resources: Record<string, number>;
  /** Whether a container requests hugepages (any size). */
  readonly hugePages: boolean;
}

/** A node group as the checks see it. */
export interface NodeGroupShape {
  /** Construct id, for messages. */
  readonly id: string;
  /** EC2 instance type. */
  readonly instanceType: string;
  /** Kubernetes labels of the nodes (the well-known instance-type label included). */
  readonly labels: Record<string, string>;
  /** Allocatable extended resources of one node, by name (empty when unknown). */
  readonly perNode: Record<string, number>;
  /** Maximum number of nodes (undefined when it is a token). */
  readonly maxSize?: number;
  /** A Karpenter NodePool: it launches nodes for pending pods from what it knows of the instance type. */
  readonly karpenter?: boolean;
}

/** The kinds of API objects a chart holds, by `group/Kind`. */
export function objectKinds(objects: any[]): Array<{ group: string; kind: string; name: string; spec: any }> {
  return objects.map((o) => ({
    group: String(o.apiVersion ?? '').includes('/') ? String(o.apiVersion).split('/')[0] : '',
    kind: String(o.kind ?? ''),
    name: String(o.metadata?.name ?? ''),
    spec: o.spec ?? {},
  }));
}

/**
 * The most replicas an autoscaler (a KEDA ScaledObject or a HorizontalPodAutoscaler) gives each object
 * it scales, by `Kind/name`: capacity must hold the pools at their maximum.
 */
function autoscaledMaximum(objects: any[]): Map<string, number> {
  const max = new Map<string, number>();
  for (const o of objects) {
    const spec = o.spec ?? {};
    const ref = spec.scaleTargetRef;
    const most = o.kind === 'ScaledObject' ? spec.maxReplicaCount : o.kind === 'HorizontalPodAutoscaler' ? spec.maxReplicas : undefined;
    if (ref?.name !== undefined && typeof most === 'number') {
      max.set(`${ref.kind ?? 'Deployment'}/${ref.name}`, most);
    }
  }
  return max;
}

/**
 * Every pod a chart's workload objects run (DaemonSets excluded: they follow the nodes); an autoscaled
 * workload at its autoscaler's maximum.
 */
export function podGroups(objects: any[]): PodGroup[] {
  const groups: PodGroup[] = [];
  const autoscaled = autoscaledMaximum(objects);
  const replicasOf = (name: string, spec: any): { replicas: number; text: string } => {
    const most = autoscaled.get(name);
    if (most !== undefined) {
      return { replicas: most, text: `up to ${most} replicas (autoscaling)` };
    }
    const replicas = num(spec.replicas, 1);
    return { replicas, text: `${replicas} replicas` };
  };
  for (const o of objects) {
    const kind = String(o.kind ?? '');
    const name = `${kind}/${o.metadata?.name ?? '?'}`;
    const spec = o.spec ?? {};
    switch (kind) {
      case 'Deployment':
      case 'StatefulSet':
      case 'ReplicaSet': {
        const { replicas, text } = replicasOf(name, spec);
        groups.push(pod(name, replicas, text, spec.template?.spec));
        break;
      }
      case 'Job': {
        const parallelism = num(spec.parallelism, 1);
        groups.push(pod(name, parallelism, `parallelism ${parallelism}`, spec.template?.spec));
        break;
      }
      case 'Pod':
        groups.push(pod(name, 1, '1 pod', spec));
        break;
      case 'LeaderWorkerSet': {
        // Each replica is a group of `size` pods: one leader (leaderTemplate, or workerTemplate when
        // absent) and size - 1 workers.
        const { replicas, text } = replicasOf(name, spec);
        const lwt = spec.leaderWorkerTemplate ?? {};
        const size = num(lwt.size, 1);
        const worker = lwt.workerTemplate?.spec;
        groups.push(pod(`${name} (leader)`, replicas, text, lwt.leaderTemplate?.spec ?? worker));
        if (size > 1) {
          groups.push(pod(`${name} (workers)`, replicas * (size - 1), `${text} x ${size - 1} workers`, worker));
        }
        break;
      }
      default:
        break;
    }
  }
  return groups;
}

/**
 * The longest `terminationGracePeriodSeconds` of the pods a chart's workload objects run (0 when none
 * sets one): a node autoscaler that drains a node must wait at least this long.
 */
export function longestGracePeriod(objects: any[]): number {
  let longest = 0;
  for (const { spec } of podSpecsOf(objects)) {
    const grace = spec.terminationGracePeriodSeconds;
    if (typeof grace === 'number' && Number.isFinite(grace)) {
      longest = Math.max(longest, grace);
    }
  }
  return longest;
}

function pod(owner: string, count: number, countText: string, spec: any): PodGroup {
  const hugePages = [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])]
    .some((c: any) => Object.keys({ ...c.resources?.requests, ...c.resources?.limits }).some((k) => k.startsWith('hugepages-')));
  return { owner, count, countText, nodeLabels: requiredLabels(spec ?? {}), resources: podResources(spec ?? {}), hugePages };
}

function num(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

/** Effective extended-resource requests of a pod: the larger of its containers' sum and any init container. */
function podResources(spec: any): Record<string, number> {
  const sum: Record<string, number> = {};
  for (const c of spec.containers ?? []) {
    for (const [k, v] of Object.entries(containerResources(c))) {
      sum[k] = (sum[k] ?? 0) + v;
    }
  }
  for (const c of spec.initContainers ?? []) {
    for (const [k, v] of Object.entries(containerResources(c))) {
      sum[k] = Math.max(sum[k] ?? 0, v);
    }
  }
  return sum;
}

function containerResources(c: any): Record<string, number> {
  // Extended resources must have requests equal to limits; either one says how many.
  const out: Record<string, number> = {};
  const from = { ...c.resources?.limits, ...c.resources?.requests };
  for (const name of [...ACCELERATOR_RESOURCES, EFA_RESOURCE]) {
    const n = Number(from[name]);
    if (from[name] !== undefined && Number.isFinite(n) && n > 0) {
      out[name] = n;
    }
  }
  return out;
}

/** nodeSelector entries and the `In` expressions of a single required node-affinity term. */
function requiredLabels(spec: any): Record<string, string[]> {
  const labels: Record<string, string[]> = {};
  for (const [k, v] of Object.entries(spec.nodeSelector ?? {})) {
    labels[k] = [String(v)];
  }
  const terms = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
  // Several terms are ORed; only a single term narrows the nodes for certain.
  if (terms.length === 1) {
    for (const e of terms[0].matchExpressions ?? []) {
      if (e.operator === 'In' && Array.isArray(e.values) && labels[e.key] === undefined) {
        labels[e.key] = e.values.map(String);
      }
    }
  }
  return labels;
}

/** Whether a pod group is placed by labels this library manages (so its node group must exist here). */
function checkedKeys(g: PodGroup): string[] {
  return Object.keys(g.nodeLabels).filter((k) =>
    k.startsWith(DISAGG_PREFIX) || k === WELL_KNOWN_INSTANCE_TYPE || k === LEGACY_INSTANCE_TYPE);
}

function matches(g: PodGroup, n: NodeGroupShape): boolean {
  return checkedKeys(g).every((k) => {
    const value = k === LEGACY_INSTANCE_TYPE ? n.labels[WELL_KNOWN_INSTANCE_TYPE] : n.labels[k];
    return value !== undefined && g.nodeLabels[k].includes(value);
  });
}

function describeSelector(g: PodGroup): string {
  return checkedKeys(g).map((k) => `${k}=${g.nodeLabels[k].join('|')}`).join(', ');
}

function acceleratorsOf(g: PodGroup): string[] {
  return ACCELERATOR_RESOURCES.filter((r) => (g.resources[r] ?? 0) > 0);
}

/**
 * Placement and capacity findings: pods no node group can take, pods larger than one node, and
 * pools asking for more accelerators than their node groups' `maxSize` allows.
 */
export function placementFindings(chartId: string, groups: PodGroup[], nodeGroups: NodeGroupShape[]): string[] {
  const findings: string[] = [];
  const demand = new Map<string, { candidates: NodeGroupShape[]; pods: PodGroup[] }>();
  for (const g of groups) {
    const accelerators = acceleratorsOf(g);
    if (checkedKeys(g).length === 0 && accelerators.length === 0) {
      continue; // CPU pods without library labels: any node will do.
    }
    const candidates = nodeGroups.filter((n) => matches(g, n));
    if (candidates.length === 0) {
      const known = nodeGroups.map((n) => `${n.id} (${describeLabels(n)})`).join('; ') || 'none';
      findings.push(`addWorkload('${chartId}'): ${g.owner} selects nodes with ${describeSelector(g) || 'any labels'}, but no node group of this `
        + `cluster has them (node groups: ${known}); add one with addAcceleratedNodeGroup({ instanceType, poolRole }) that matches, `
        + 'or point the pool\'s instanceType / nodePoolRole at an existing group.');
      continue;
    }
    for (const r of accelerators) {
      const fit = candidates.filter((n) => (n.perNode[r] ?? 0) >= g.resources[r]);
      if (fit.length === 0) {
        const largest = Math.max(...candidates.map((n) => n.perNode[r] ?? 0));
        findings.push(`addWorkload('${chartId}'): each pod of ${g.owner} requests ${g.resources[r]} ${r}, but the node groups it can run on `
          + `(${candidates.map((n) => `${n.id}: ${n.instanceType}`).join(', ')}) offer at most ${largest} per node; lower the pod's `
          + `parallelism (tensorParallel x pipelineParallel) to ${largest || 'a size the nodes have'} or select an instance type with more.`);
      }
    }
    if (g.hugePages && candidates.every((n) => n.karpenter)) {
      // Karpenter simulates a new node from the instance type (CPU, memory, accelerators, EFA), never
      // hugepages, so it launches nothing for these pods and they stay Pending.
      findings.push(`addWorkload('${chartId}'): ${g.owner} requests hugepages and can only run on Karpenter NodePools `
        + `(${candidates.map((n) => `${n.id}: ${n.instanceType}`).join(', ')}), which cannot know that a new node offers hugepages: `
        + 'Karpenter never launches a node for them. Set \'efaHugePages: false\' on the deployment (libfabric then uses regular pages), '
        + 'or run the pool on a managed node group (addAcceleratedNodeGroup), whose Cluster Autoscaler tags announce them.');
    }
    if (accelerators.length > 0) {
      const key = candidates.map((n) => n.id).join(',');
      const entry = demand.get(key) ?? { candidates, pods: [] };
      entry.pods.push(g);
      demand.set(key, entry);
    }
  }
  for (const { candidates, pods } of demand.values()) {
    for (const r of ACCELERATOR_RESOURCES) {
      const users = pods.filter((p) => (p.resources[r] ?? 0) > 0);
      if (users.length === 0 || candidates.some((n) => n.maxSize === undefined || n.perNode[r] === undefined)) {
        continue;
      }
      const need = users.reduce((s, p) => s + p.count * p.resources[r], 0);
      const have = candidates.reduce((s, n) => s + n.maxSize! * n.perNode[r], 0);
      if (need > have) {
        const perNode = candidates[0].perNode[r];
        const nodes = Math.ceil(need / perNode);
        const parts = users.map((p) => `${p.owner}: ${p.countText} x ${p.resources[r]}`).join(', ');
        const groupsText = candidates.map((n) => `${n.id} (maxSize ${n.maxSize} x ${n.perNode[r]} ${r})`).join(', ');
        findings.push(`addWorkload('${chartId}'): the pods need ${need} ${r} (${parts}), but ${groupsText} can hold at most ${have}; `
          + `raise 'maxSize' of ${candidates.length === 1 ? `node group ${candidates[0].id}` : 'those node groups'} `
          + `to ${candidates.length === 1 ? nodes : `${nodes} nodes in total`} (and 'desiredSize' once the capacity is there), `
          + 'or lower the pools\' replicas or parallelism.');
      }
    }
  }
  return findings;
}

function describeLabels(n: NodeGroupShape): string {
  const shown = Object.entries(n.labels)
    .filter(([k]) => k.startsWith(DISAGG_PREFIX) && !k.endsWith('/accelerator') && !k.endsWith('/accelerator-vendor'))
    .map(([k, v]) => `${k}=${v}`);
  return shown.join(', ') || n.instanceType;
}
