/**
 * A deploy verifier: walks a synthesized CloudFormation template the way `cdk deploy` will run it, and
 * reports what would roll the stack back or leave the cluster unable to serve or scale.
 *
 * 1. CloudFormation: every resource waits for what it references (Ref, Fn::GetAtt, Fn::Sub) and its
 *    DependsOn; nothing else orders two resources, so a prerequisite must be an ancestor in that graph.
 *    Accelerated node groups must not launch instances at creation: a launch that fails
 *    (InsufficientInstanceCapacity, VcpuLimitExceeded, an inactive Capacity Block) fails the node group
 *    and rolls back the whole stack.
 * 2. aws-cdk-lib's kubectl handler: a manifest is `kubectl create -f` of its objects in order, a Helm chart
 *    `helm upgrade --install` (with `--create-namespace` unless told otherwise, `--wait` when asked). Each
 *    object needs its namespace (created by an ancestor, or earlier in the same manifest), its kind's CRD
 *    established by an ancestor that waits for it, and the admission webhooks that see it answering (their
 *    chart installed with `--wait` by an ancestor). Pods pass their namespace's Pod Security level.
 *    Secrets, ConfigMaps and ServiceAccounts a pod uses exist in the template or are a documented user step.
 * 3. The scheduler and the autoscalers: each pod group finds a node group whose labels it selects and
 *    whose taints it tolerates, that offers its resources (accelerators, EFA, hugepages, CPU, memory), and
 *    whose disk holds the images that land there. A group that starts empty can only be scaled from zero by
 *    the Cluster Autoscaler if its node-template tags announce every extended resource the pods request,
 *    and Karpenter cannot launch for hugepages at all.
 * 4. The operator: a private API endpoint needs an access entry for someone besides the kubectl Lambda.
 *
 * Each finding names the resource, the rule and the fix. `blocker` findings are deploy or serving failures;
 * the others are what a careful operator would want fixed.
 */
import { refusedConnections } from './network';
import { AcceleratedInstanceType, NetworkInterfaceType } from '../../src/catalog';
import { EFA_HUGEPAGES_MIB_PER_NODE } from '../../src/catalog/private/efa';
import { admits, BUILT_IN_NAMESPACES, CLUSTER_SCOPED_KINDS, podSecurityOf, podSpecsOf } from '../../src/k8s/private/pod-security';

/** One thing the deploy would trip on. */
export interface DeployFinding {
  /** Logical id of the CloudFormation resource, with `Kind/namespace/name` of a Kubernetes object where there is one. */
  readonly resource: string;
  /** The rule: a short stable id. */
  readonly rule: string;
  /** True when the deploy rolls back, or the deployment cannot serve or scale. */
  readonly blocker: boolean;
  /** What happens, and the fix. */
  readonly message: string;
}

/** What the walk knows beyond the template. */
export interface WalkOptions {
  /**
   * Secrets (by `namespace/name`) that the user creates after the deploy, as the documentation says; pods
   * that use them wait for them (CreateContainerConfigError) without failing the deploy.
   */
  readonly userSecrets?: string[];
  /** Uncompressed size in GiB of an image, by its reference in the manifest (tokens as the walk renders them); undefined when unknown. */
  readonly imageGib?: (image: string) => number | undefined;
}

/** Rules, by id. */
export const RULES = {
  cycle: 'cfn-dependency-cycle',
  capacityAtCreate: 'accelerated-capacity-at-create',
  namespace: 'namespace-exists',
  crd: 'crd-established',
  webhook: 'webhook-ready',
  reference: 'referenced-object-exists',
  podSecurity: 'pod-security-admission',
  noNode: 'pod-has-a-node-group',
  fit: 'pod-fits-a-node',
  disk: 'images-fit-node-disk',
  scaleFromZero: 'scale-from-zero-sees-resources',
  access: 'operator-access',
  modelAccess: 'pods-can-read-their-model',
  imds: 'imds-hop-limit',
  endpoints: 'vpc-endpoints',
  policies: 'network-policy-admits-serving',
  loadBalancers: 'load-balancers-released-on-delete',
  manifest: 'manifest-readable',
} as const;

const MANIFEST = 'Custom::AWSCDK-EKS-KubernetesResource';
const HELM = 'Custom::AWSCDK-EKS-HelmChart';
const OBJECT_VALUE = 'Custom::AWSCDK-EKS-KubernetesObjectValue';

/** API groups the API server serves without a CRD. */
const BUILT_IN_GROUPS = new Set(['', 'apps', 'batch', 'policy', 'autoscaling', 'rbac.authorization.k8s.io', 'networking.k8s.io',
  'storage.k8s.io', 'scheduling.k8s.io', 'coordination.k8s.io', 'discovery.k8s.io', 'node.k8s.io', 'admissionregistration.k8s.io',
  'apiextensions.k8s.io', 'certificates.k8s.io', 'events.k8s.io', 'flowcontrol.apiserver.k8s.io', 'resource.k8s.io']);

/**
 * Helm charts whose templates or crds/ folder install CRDs, and the API groups they serve. A chart's CRDs
 * are established before objects of an ancestor-dependent resource when Helm waits: for crds/ Helm always
 * waits for establishment; for CRDs among the templates only with `--wait` (helm pkg/kube/ready.go).
 */
const CRD_CHARTS: Array<{ chart: RegExp; groups: string[]; crdsFolder: boolean }> = [
  { chart: /^lws$/, groups: ['leaderworkerset.x-k8s.io'], crdsFolder: false },
  { chart: /^keda$/, groups: ['keda.sh', 'eventing.keda.sh'], crdsFolder: false },
  { chart: /^gateway-crds-helm$/, groups: ['gateway.networking.k8s.io'], crdsFolder: false },
  { chart: /^base$/, groups: ['networking.istio.io', 'security.istio.io', 'telemetry.istio.io', 'extensions.istio.io'], crdsFolder: false },
  { chart: /dra-driver/, groups: ['resource.nvidia.com'], crdsFolder: true },
];

/** Groups of the Gateway API Inference Extension, whose CRDs a Job applies and a KubernetesObjectValue waits for. */
const INFERENCE_EXTENSION_GROUPS = ['inference.networking.k8s.io', 'inference.networking.x-k8s.io'];

/** Groups of Karpenter, which the user installs (this library documents it as a prerequisite). */
const KARPENTER_GROUPS = ['karpenter.sh', 'karpenter.k8s.aws'];

/** Admission webhooks with failurePolicy Fail that charts register, and what they admit. */
const WEBHOOKS: Array<{ chart: RegExp; admits: (o: any) => boolean; what: string }> = [
  // mservice.elbv2.k8s.aws (failurePolicy Fail): every Service; a Service created before the controller
  // answers is refused ("failed calling webhook ... no endpoints available").
  { chart: /^aws-load-balancer-controller$/, admits: (o) => o.kind === 'Service', what: 'Services (mservice.elbv2.k8s.aws)' },
  // KEDA's validating webhook for ScaledObjects.
  { chart: /^keda$/, admits: (o) => groupOf(o) === 'keda.sh', what: 'KEDA objects (vscaledobject.kb.io)' },
  // istiod validates Istio's own configuration objects.
  { chart: /^istiod$/, admits: (o) => groupOf(o).endsWith('.istio.io'), what: 'Istio configuration (validation.istio.io)' },
];

/** Resource names the scheduler treats as extended resources a node template must announce. */
const NATIVE_RESOURCES = new Set(['cpu', 'memory', 'ephemeral-storage', 'pods']);

/** GiB the OS, the kubelet's own files and the add-ons' images take on a node's root volume. */
const NODE_BASE_GIB = 8;

/** Share of the root volume images may fill: the kubelet's image GC starts at 85% and evicts pods at 90% (nodefs.available < 10%). */
const IMAGE_DISK_SHARE = 0.85;

/** Walks a template; returns every finding, blockers first. */
export function walkDeploy(template: any, options: WalkOptions = {}): DeployFinding[] {
  return new Walk(template, options).run();
}

/** A Kubernetes object inside a template resource. */
interface PlacedObject {
  readonly resource: string;
  readonly index: number;
  readonly object: any;
}

/** A node group as the scheduler and the autoscalers see it. */
interface NodeShape {
  readonly id: string;
  readonly instanceType: string;
  readonly labels: Record<string, string>;
  readonly taints: Array<{ key: string; value?: string; effect: string }>;
  readonly diskGib: number;
  readonly minSize: number;
  readonly desiredSize: number;
  /** What one node offers: cpu (cores), memory (GiB), and extended resources (counts; hugepages-2Mi in MiB). */
  readonly offers: Record<string, number>;
  /** Extended resources the Cluster Autoscaler's template node has for a group at zero (tags, plus what it knows itself). */
  readonly templateResources: Set<string>;
  readonly karpenter: boolean;
  readonly hopLimit?: number;
}

class Walk {
  private readonly resources: Record<string, any>;
  private readonly findings: DeployFinding[] = [];
  private readonly ancestorMemo = new Map<string, Set<string>>();
  private readonly objects: PlacedObject[] = [];

  constructor(template: any, private readonly options: WalkOptions) {
    this.resources = template.Resources ?? {};
  }

  run(): DeployFinding[] {
    this.checkCycles();
    this.readManifests();
    this.checkCapacityAtCreate();
    this.checkNamespaces();
    this.checkCrds();
    this.checkWebhooks();
    this.checkReferences();
    this.checkPodSecurity();
    this.checkPlacement();
    this.checkAccess();
    this.checkModelAccess();
    this.checkNetwork();
    this.checkPolicies();
    this.checkLoadBalancerTeardown();
    return [...this.findings].sort((a, b) => Number(b.blocker) - Number(a.blocker));
  }

  private add(resource: string, rule: string, blocker: boolean, message: string): void {
    this.findings.push({ resource, rule, blocker, message });
  }

  // --- CloudFormation order ------------------------------------------------------------------------

  /** Resources a resource waits for directly: DependsOn plus every reference in its properties. */
  private deps(id: string): string[] {
    const r = this.resources[id] ?? {};
    const out = new Set<string>([r.DependsOn ?? []].flat());
    const visit = (v: any) => {
      if (Array.isArray(v)) {
        v.forEach(visit);
      } else if (v && typeof v === 'object') {
        if (typeof v.Ref === 'string') out.add(v.Ref);
        if (Array.isArray(v['Fn::GetAtt'])) out.add(v['Fn::GetAtt'][0]);
        const sub = v['Fn::Sub'];
        const text = typeof sub === 'string' ? sub : Array.isArray(sub) ? sub[0] : undefined;
        if (typeof text === 'string') {
          for (const m of text.matchAll(/\$\{([^}!.]+)(?:\.[^}]+)?\}/g)) out.add(m[1]);
        }
        Object.values(v).forEach(visit);
      }
    };
    visit(r.Properties);
    return [...out].filter((d) => d in this.resources && d !== id);
  }

  /** Every resource created before `id` is (transitively). */
  private ancestors(id: string): Set<string> {
    const memo = this.ancestorMemo.get(id);
    if (memo) return memo;
    const seen = new Set<string>();
    const stack = [...this.deps(id)];
    while (stack.length > 0) {
      const next = stack.pop()!;
      if (seen.has(next)) continue;
      seen.add(next);
      stack.push(...this.deps(next));
    }
    this.ancestorMemo.set(id, seen);
    return seen;
  }

  private checkCycles(): void {
    const state = new Map<string, number>();
    const visit = (id: string, path: string[]): void => {
      state.set(id, 1);
      for (const d of this.deps(id)) {
        if (state.get(d) === 1) {
          this.add(id, RULES.cycle, true, `CloudFormation rejects the template: ${[...path, id, d].join(' -> ')} is a dependency cycle.`);
        } else if (!state.has(d)) {
          visit(d, [...path, id]);
        }
      }
      state.set(id, 2);
    };
    Object.keys(this.resources).forEach((id) => state.has(id) || visit(id, []));
  }

  // --- what launches at creation -------------------------------------------------------------------

  private checkCapacityAtCreate(): void {
    for (const group of this.nodeShapes().filter((g) => !g.karpenter && isAccelerated(g.instanceType))) {
      if (group.desiredSize > 0 || group.minSize > 0) {
        this.add(group.id, RULES.capacityAtCreate, true,
          `the node group launches ${Math.max(group.desiredSize, group.minSize)} x ${group.instanceType} while the stack is created; if they cannot `
          + 'launch (InsufficientInstanceCapacity in the zone, VcpuLimitExceeded on the account\'s quota, a Capacity Block not active yet) the node '
          + 'group fails and CloudFormation rolls back the whole stack, VPC and cluster included. Fix: leave desiredSize and minSize at 0 (the '
          + 'default) with maxSize at the nodes needed, run `disagg preflight`, and scale up with the stack\'s <group>ScaleUp output.');
      }
    }
  }

  // --- Kubernetes objects ----------------------------------------------------------------------------

  private readManifests(): void {
    for (const [id, r] of Object.entries<any>(this.resources)) {
      if (r.Type !== MANIFEST) continue;
      const text = renderTokens(r.Properties?.Manifest);
      try {
        const list = JSON.parse(text);
        (Array.isArray(list) ? list : [list]).forEach((object, index) => this.objects.push({ resource: id, index, object }));
      } catch (e) {
        this.add(id, RULES.manifest, true, `the manifest is not JSON once its tokens are rendered (${(e as Error).message}); kubectl would refuse it.`);
      }
    }
  }

  private helmCharts(): Array<{ id: string; props: any }> {
    return Object.entries<any>(this.resources).filter(([, r]) => r.Type === HELM).map(([id, r]) => ({ id, props: r.Properties ?? {} }));
  }

  /** Namespaces that exist when resource `id` runs, before its own objects. */
  private namespacesBefore(id: string): Set<string> {
    const names = new Set(BUILT_IN_NAMESPACES);
    const before = this.ancestors(id);
    for (const o of this.objects) {
      if (before.has(o.resource) && o.object.kind === 'Namespace') names.add(o.object.metadata?.name);
    }
    for (const chart of this.helmCharts()) {
      if (before.has(chart.id) && chart.props.CreateNamespace !== false) names.add(chart.props.Namespace ?? 'default');
    }
    return names;
  }

  private checkNamespaces(): void {
    for (const id of Object.keys(this.resources)) {
      const own = this.objects.filter((o) => o.resource === id);
      if (own.length === 0) continue;
      const existing = this.namespacesBefore(id);
      for (const o of own) {
        if (o.object.kind === 'Namespace') {
          existing.add(o.object.metadata?.name);
          continue;
        }
        if (CLUSTER_SCOPED_KINDS.has(o.object.kind)) continue;
        const ns = o.object.metadata?.namespace ?? 'default';
        if (!existing.has(ns)) {
          this.add(`${id} ${describe(o.object)}`, RULES.namespace, true,
            `kubectl create fails with 'namespaces "${ns}" not found': nothing creates namespace '${ns}' before this manifest, so the `
            + 'custom resource fails and CloudFormation rolls back the stack. Fix: create the namespace first (InferenceCluster.addWorkload '
            + 'does; a cdk8s chart can hold a WorkloadNamespace), as a resource this manifest depends on or earlier in the same manifest.');
        }
      }
    }
    for (const chart of this.helmCharts()) {
      const ns = chart.props.Namespace ?? 'default';
      if (chart.props.CreateNamespace === false && !this.namespacesBefore(chart.id).has(ns)) {
        this.add(chart.id, RULES.namespace, true, `helm installs release '${chart.props.Release}' into namespace '${ns}' without --create-namespace, `
          + 'and nothing creates it first. Fix: createNamespace: true, or depend on the resource that creates it.');
      }
    }
  }

  /** API groups whose CRDs are established before resource `id` applies its objects. */
  private groupsBefore(id: string): { established: Set<string>; user: Set<string> } {
    const established = new Set(BUILT_IN_GROUPS);
    const before = this.ancestors(id);
    for (const chart of this.helmCharts()) {
      const known = CRD_CHARTS.find((c) => c.chart.test(String(chart.props.Chart ?? '')) || c.chart.test(String(chart.props.Release ?? '')));
      if (known && before.has(chart.id) && (known.crdsFolder || chart.props.Wait === true || known.chart.source === '^base$')) {
        known.groups.forEach((g) => established.add(g));
      }
    }
    for (const a of before) {
      const r = this.resources[a];
      if (r?.Type === OBJECT_VALUE && String(r.Properties?.ObjectType) === 'job' && /inference-extension|gateway-api-inference/.test(String(r.Properties?.ObjectName))) {
        INFERENCE_EXTENSION_GROUPS.forEach((g) => established.add(g));
      }
    }
    for (const o of this.objects) {
      if (before.has(o.resource) && o.object.kind === 'CustomResourceDefinition') established.add(o.object.spec?.group);
    }
    return { established, user: new Set(KARPENTER_GROUPS) };
  }

  private checkCrds(): void {
    for (const id of new Set(this.objects.map((o) => o.resource))) {
      const { established, user } = this.groupsBefore(id);
      for (const o of this.objects.filter((x) => x.resource === id)) {
        const group = groupOf(o.object);
        if (established.has(group) || user.has(group)) continue;
        this.add(`${id} ${describe(o.object)}`, RULES.crd, true,
          `kubectl create fails with 'no matches for kind "${o.object.kind}" in version "${o.object.apiVersion}"': nothing that this manifest depends on `
          + `establishes the CRDs of ${group} first, so CloudFormation rolls back the stack. Fix: make the manifest depend on the chart (installed `
          + 'with wait: true) or the Job that establishes them.');
      }
    }
  }

  private checkWebhooks(): void {
    for (const chart of this.helmCharts()) {
      const hook = WEBHOOKS.find((w) => w.chart.test(String(chart.props.Chart ?? '')));
      if (!hook) continue;
      for (const o of this.objects) {
        if (!hook.admits(o.object) || o.resource === chart.id) continue;
        const before = this.ancestors(o.resource);
        if (!before.has(chart.id) || chart.props.Wait !== true) {
          this.add(`${o.resource} ${describe(o.object)}`, RULES.webhook, true,
            `${chart.props.Release ?? chart.id} registers an admission webhook for ${hook.what} with failurePolicy Fail, and this object can be `
            + `created before the webhook answers (${before.has(chart.id) ? 'the chart is installed without wait: true' : 'the manifest does not depend on the chart'}): `
            + "kubectl create fails with 'failed calling webhook ... no endpoints available'. Fix: depend on the chart and install it with wait: true.");
        }
      }
    }
  }

  private checkReferences(): void {
    const defined = new Set(this.objects.map((o) => `${o.object.kind}/${o.object.metadata?.namespace ?? 'default'}/${o.object.metadata?.name}`));
    const userSecrets = new Set(this.options.userSecrets ?? []);
    for (const o of this.objects) {
      const ns = o.object.metadata?.namespace ?? 'default';
      for (const { owner, spec } of podSpecsOf([o.object])) {
        for (const ref of podReferences(spec)) {
          if (ref.optional || defined.has(`${ref.kind}/${ns}/${ref.name}`)) continue;
          if (ref.kind === 'ServiceAccount' && ref.name === 'default') continue;
          if (ref.kind === 'Secret' && userSecrets.has(`${ns}/${ref.name}`)) {
            this.add(`${o.resource} ${owner}`, RULES.reference, false,
              `pods use Secret '${ns}/${ref.name}', which the user creates after the deploy (documented); until then they wait in CreateContainerConfigError.`);
            continue;
          }
          this.add(`${o.resource} ${owner}`, RULES.reference, true,
            `pods use ${ref.kind} '${ns}/${ref.name}', which nothing creates and no documented step asks for: they never start. Fix: add it to the `
            + 'chart, or document the step that creates it.');
        }
      }
    }
  }

  private checkPodSecurity(): void {
    const levels = new Map<string, string>();
    for (const o of this.objects) {
      if (o.object.kind === 'Namespace') {
        const enforce = o.object.metadata?.labels?.['pod-security.kubernetes.io/enforce'];
        if (enforce) levels.set(o.object.metadata.name, enforce);
      }
    }
    for (const o of this.objects) {
      const ns = o.object.metadata?.namespace ?? 'default';
      const level = levels.get(ns);
      if (!level) continue;
      for (const { owner, spec } of podSpecsOf([o.object])) {
        const verdict = podSecurityOf(spec);
        if (!admits(level as any, verdict.level)) {
          const why = level === 'restricted' ? verdict.notRestricted : verdict.notBaseline;
          this.add(`${o.resource} ${owner}`, RULES.podSecurity, true,
            `namespace '${ns}' enforces Pod Security '${level}', and these pods are only '${verdict.level}' (${why.slice(0, 3).join('; ')}): the API `
            + 'server refuses to create them. Fix: label the namespace with the level its pods meet (WorkloadNamespace derives it), or tighten the pods.');
        }
      }
    }
  }

  // --- the scheduler and the autoscalers ---------------------------------------------------------------

  private nodeShapes(): NodeShape[] {
    const shapes: NodeShape[] = [];
    for (const [id, r] of Object.entries<any>(this.resources)) {
      if (r.Type !== 'AWS::EKS::Nodegroup') continue;
      const p = r.Properties ?? {};
      const lt = p.LaunchTemplate?.Id?.Ref ? this.resources[p.LaunchTemplate.Id.Ref]?.Properties?.LaunchTemplateData : undefined;
      const instanceType = String(p.InstanceTypes?.[0] ?? lt?.InstanceType ?? 'unknown');
      const labels: Record<string, string> = { ...(p.Labels ?? {}), 'node.kubernetes.io/instance-type': instanceType };
      const taints = (p.Taints ?? []).map((t: any) => ({ key: t.Key, value: t.Value, effect: taintEffect(t.Effect) }));
      const diskGib = Number(lt?.BlockDeviceMappings?.[0]?.Ebs?.VolumeSize ?? p.DiskSize ?? 20);
      const offers = offersOf(instanceType);
      const tags: Record<string, string> = p.Tags ?? {};
      const templateResources = new Set<string>(['nvidia.com/gpu'].filter(() => (offers['nvidia.com/gpu'] ?? 0) > 0));
      for (const key of Object.keys(tags)) {
        const m = /^k8s\.io\/cluster-autoscaler\/node-template\/resources\/(.+)$/.exec(key);
        if (m) templateResources.add(m[1]);
      }
      shapes.push({
        id,
        instanceType,
        labels,
        taints,
        diskGib,
        offers,
        templateResources,
        karpenter: false,
        minSize: Number(p.ScalingConfig?.MinSize ?? 0),
        desiredSize: Number(p.ScalingConfig?.DesiredSize ?? p.ScalingConfig?.MinSize ?? 0),
        hopLimit: lt?.MetadataOptions?.HttpPutResponseHopLimit,
      });
    }
    for (const o of this.objects) {
      if (o.object.kind !== 'NodePool' || groupOf(o.object) !== 'karpenter.sh') continue;
      const spec = o.object.spec?.template?.spec ?? {};
      const requirement = (key: string) => (spec.requirements ?? []).find((r: any) => r.key === key && r.operator === 'In')?.values?.[0];
      const instanceType = String(requirement('node.kubernetes.io/instance-type') ?? 'unknown');
      const offers = offersOf(instanceType);
      shapes.push({
        id: `${o.resource} NodePool/${o.object.metadata?.name}`,
        instanceType,
        labels: { ...(o.object.spec?.template?.metadata?.labels ?? {}), 'node.kubernetes.io/instance-type': instanceType },
        taints: (spec.taints ?? []).map((t: any) => ({ key: t.key, value: t.value, effect: t.effect })),
        diskGib: 300,
        offers,
        minSize: 0,
        desiredSize: 0,
        karpenter: true,
        // Karpenter models CPU, memory, pods, accelerators and EFA of an instance type, not hugepages.
        templateResources: new Set(Object.keys(offers).filter((k) => !k.startsWith('hugepages-'))),
      });
    }
    return shapes;
  }

  private checkPlacement(): void {
    const groups = this.nodeShapes();
    const autoscaler = this.helmCharts().some((c) => /cluster-autoscaler/.test(String(c.props.Chart)));
    const imagesOn = new Map<string, Map<string, number>>();
    for (const o of this.objects) {
      if (o.object.kind === 'DaemonSet') continue;
      for (const { owner, spec } of podSpecsOf([o.object])) {
        const where = `${o.resource} ${owner}`;
        const requests = podRequests(spec);
        const candidates = groups.filter((g) => selects(spec, g.labels) && tolerates(spec, g.taints));
        if (candidates.length === 0) {
          this.add(where, RULES.noNode, true, `no node group has the labels these pods select (${JSON.stringify(spec.nodeSelector ?? {})}) with taints `
            + 'they tolerate: they stay Pending. Fix: add a node group with those labels, or change the pool\'s instance type or pool role.');
          continue;
        }
        const fitting = candidates.filter((g) => Object.entries(requests).every(([k, v]) => v <= (g.offers[k] ?? 0)));
        if (fitting.length === 0) {
          const g = candidates[0];
          const short = Object.entries(requests).filter(([k, v]) => v > (g.offers[k] ?? 0)).map(([k, v]) => `${k} ${v} > ${g.offers[k] ?? 0}`);
          this.add(where, RULES.fit, true, `no node of the groups it selects (${candidates.map((c) => `${c.id}: ${c.instanceType}`).join(', ')}) `
            + `offers what one pod requests (${short.join(', ')}): the pods stay Pending. Fix: lower the requests or pick a larger instance type.`);
          continue;
        }
        for (const g of fitting) {
          const images = imagesOn.get(g.id) ?? new Map<string, number>();
          for (const c of [...spec.initContainers ?? [], ...spec.containers ?? []]) {
            const gib = this.options.imageGib?.(String(c.image));
            if (gib !== undefined) images.set(String(c.image), gib);
          }
          imagesOn.set(g.id, images);
        }
        const extended = Object.keys(requests).filter((k) => !NATIVE_RESOURCES.has(k));
        const fromZero = fitting.filter((g) => g.desiredSize === 0);
        if (fromZero.length === fitting.length) {
          const blind = fitting.map((g) => ({ g, missing: extended.filter((k) => !g.templateResources.has(k)) }));
          if (blind.every((b) => b.missing.length > 0) && (autoscaler || fitting.some((g) => g.karpenter))) {
            const b = blind[0];
            this.add(where, RULES.scaleFromZero, true,
              `the pods' node group ${b.g.id} (${b.g.instanceType}) starts with no nodes, and ${b.g.karpenter ? 'Karpenter' : 'the Cluster Autoscaler'} cannot `
              + `see that a new node would offer ${b.missing.join(', ')} (${b.g.karpenter ? 'Karpenter does not model hugepages'
                : 'no k8s.io/cluster-autoscaler/node-template/resources/ tag announces it'}), so it never launches one and the pods stay Pending. `
              + `Fix: ${b.g.karpenter ? "set 'efaHugePages: false' on the deployment (no hugepages request)" : 'tag the node group with the resources one node offers'}.`);
          } else if (!autoscaler && !fitting.some((g) => g.karpenter)) {
            this.add(where, RULES.scaleFromZero, false,
              `the pods' node group${fitting.length > 1 ? 's' : ''} ${fitting.map((g) => g.id).join(', ')} start${fitting.length > 1 ? '' : 's'} empty and nothing `
              + 'scales them: the pods wait until the user scales the group up (the stack\'s <group>ScaleUp output, documented).');
          }
        }
      }
    }
    for (const g of groups) {
      if (isAccelerated(g.instanceType) && (g.hopLimit ?? 1) > 1) {
        this.add(g.id, RULES.imds, false, `the launch template lets IMDSv2 answer ${g.hopLimit} hops away, so every pod on the node can take the node `
          + 'role\'s credentials. Fix: HttpPutResponseHopLimit 1, and EKS Pod Identity for the pods that call AWS.');
      }
      const images = imagesOn.get(g.id);
      if (!images || images.size === 0) continue;
      const total = [...images.values()].reduce((a, b) => a + b, 0);
      const room = g.diskGib * IMAGE_DISK_SHARE - NODE_BASE_GIB;
      if (total > room) {
        const list = [...images.entries()].sort((a, b) => b[1] - a[1]).map(([i, s]) => `${shortImage(i)} ${s} GiB`).join(', ');
        this.add(g.id, RULES.disk, true,
          `pods that land on ${g.instanceType} nodes with a ${g.diskGib} GiB root volume pull ${total.toFixed(1)} GiB of images (${list}), more than the `
          + `${room.toFixed(1)} GiB left below the kubelet's 85% image-GC threshold after the OS and add-ons: the pull fails or disk pressure evicts `
          + 'the node\'s pods (CoreDNS and controllers on system nodes). Fix: run the router and kvstore on the slim engine image (routerImage), '
          + 'or give the nodes a larger disk.');
      }
    }
  }

  // --- the operator ---------------------------------------------------------------------------------

  private checkAccess(): void {
    for (const [id, r] of Object.entries<any>(this.resources)) {
      if (r.Type !== 'AWS::EKS::Cluster') continue;
      const entries = Object.values<any>(this.resources).filter((e) => e.Type === 'AWS::EKS::AccessEntry');
      const people = entries.filter((e) => !JSON.stringify(e.Properties?.PrincipalArn ?? '').includes('KubectlProvider'));
      if (people.length === 0) {
        this.add(id, RULES.access, true, 'the cluster gives Kubernetes access to its kubectl Lambda only: nobody who deployed the stack can reach the API '
          + 'to create the Hugging Face token Secret or scale a pool while the GPUs bill. Fix: an access entry for the deploying principal '
          + '(InferenceCluster does this for the CDK deploy role) or adminRoleArns.');
      }
    }
  }

  /**
   * Pods that read their model from S3 (their ServiceAccount says which prefix, `disagg.dev/s3-read`) need
   * credentials when they start: a Pod Identity association for that account, created before the
   * manifest, whose role may get objects under the prefix; and the Region, which IMDS at one hop will
   * not tell them.
   */
  private checkModelAccess(): void {
    const associations = Object.entries<any>(this.resources).filter(([, r]) => r.Type === 'AWS::EKS::PodIdentityAssociation');
    for (const o of this.objects) {
      const uri = o.object.kind === 'ServiceAccount' ? o.object.metadata?.annotations?.['disagg.dev/s3-read'] : undefined;
      if (typeof uri !== 'string') continue;
      const ns = o.object.metadata?.namespace ?? 'default';
      const sa = o.object.metadata?.name;
      const where = `${o.resource} ServiceAccount/${sa}`;
      const bound = associations.filter(([, r]) => r.Properties?.Namespace === ns && r.Properties?.ServiceAccount === sa);
      if (bound.length === 0) {
        this.add(where, RULES.modelAccess, true, `pods of ServiceAccount '${ns}/${sa}' read the model at ${uri}, but no Pod Identity association gives `
          + 'that account a role: vLLM\'s streamer gets AccessDenied (or no credentials) and the workers crash-loop. Fix: a role that may read the prefix, '
          + 'associated with the account (InferenceCluster.addWorkload makes both).');
        continue;
      }
      const [assocId, assoc] = bound[0];
      if (!this.ancestors(o.resource).has(assocId)) {
        this.add(where, RULES.modelAccess, true, `the association ${assocId} for '${ns}/${sa}' is not created before the manifest: pods created first get no `
          + 'credentials until they are recreated. Fix: make the manifest depend on the association.');
      }
      const roleId = assoc.Properties?.RoleArn?.['Fn::GetAtt']?.[0];
      const { bucket, prefix } = splitS3(uri);
      const grants = Object.values<any>(this.resources).filter((r) => r.Type === 'AWS::IAM::Policy'
        && JSON.stringify(r.Properties?.Roles ?? []).includes(`"${roleId}"`))
        .flatMap((r) => r.Properties?.PolicyDocument?.Statement ?? [])
        .filter((st: any) => st.Effect === 'Allow' && [st.Action].flat().some((a: string) => a === 's3:GetObject' || a === 's3:*'))
        .flatMap((st: any) => [st.Resource].flat().map(String));
      const object = `arn:aws:s3:::${bucket}/${prefix === '' ? '' : `${prefix}/`}config.json`;
      if (!grants.some((g) => globMatches(g, object))) {
        this.add(where, RULES.modelAccess, true, `the role ${roleId} bound to '${ns}/${sa}' may not get ${object}: the model does not load. `
          + 'Fix: allow s3:GetObject on the prefix.');
      }
      for (const p of this.objects.filter((x) => (x.object.metadata?.namespace ?? 'default') === ns)) {
        for (const { owner, spec } of podSpecsOf([p.object])) {
          if (spec.serviceAccountName !== sa) continue;
          const blind = [...(spec.initContainers ?? []), ...(spec.containers ?? [])]
            .filter((c: any) => !(c.env ?? []).some((e: any) => e.name === 'AWS_REGION' || e.name === 'AWS_DEFAULT_REGION'));
          if (blind.length > 0) {
            this.add(`${p.resource} ${owner}`, RULES.modelAccess, true, `containers ${blind.map((c: any) => c.name).join(', ')} read ${uri} with no AWS_REGION, `
              + 'and IMDS (one hop) cannot tell a pod its Region: the SDK refuses to sign. Fix: set AWS_REGION (InferenceCluster.addWorkload does).');
          }
        }
      }
    }
  }

  /** Every connection the workloads open to serve is admitted by the NetworkPolicies (a wrong policy fails silently). */
  private checkPolicies(): void {
    const objects = this.objects.map((o) => o.object);
    for (const c of refusedConnections(objects)) {
      const resource = this.objects.find((o) => c.isolatedBy.includes(o.object.metadata?.name) && o.object.kind === 'NetworkPolicy')?.resource ?? '';
      this.add(`${resource} ${c.to.owner}`.trim(), RULES.policies, true,
        `${c.from.owner} cannot reach ${c.to.owner} on port ${c.port} (${c.purpose}): NetworkPolicy ${c.isolatedBy.join(', ')} selects it and no `
        + 'rule admits that source and port, so requests time out once the CNI enforces the policy. Fix: admit the deployment\'s own pods '
        + '(NetworkIsolation.workersBehindRouter does), or name the source in metricsFrom.');
    }
  }

  /**
   * On delete, CloudFormation removes a resource before what it depends on. A Gateway's or a LoadBalancer
   * Service's NLB is removed by the Load Balancer Controller after the object is gone (for a Gateway, after
   * Istio's Service is garbage-collected in the background), so something must wait for it between the
   * object and the controller, or the NLB's interfaces outlive the cluster and block the VPC's deletion.
   */
  private checkLoadBalancerTeardown(): void {
    const controller = this.helmCharts().find((c) => /aws-load-balancer-controller/.test(String(c.props.Chart)));
    if (!controller) return;
    const cleanups = Object.entries<any>(this.resources).filter(([id, r]) => r.Type === 'Custom::LoadBalancerCleanup'
      && this.ancestors(id).has(controller.id)).map(([id]) => id);
    const guarded = (id: string) => cleanups.some((c) => this.ancestors(id).has(c));
    const makesLoadBalancer = (o: any) => (o.kind === 'Gateway' && o.apiVersion?.startsWith('gateway.networking.k8s.io'))
      || (o.kind === 'Service' && o.spec?.type === 'LoadBalancer');
    const owners = new Set<string>();
    for (const o of this.objects) if (makesLoadBalancer(o.object)) owners.add(o.resource);
    for (const chart of this.helmCharts()) {
      if (JSON.stringify(chart.props.Values ?? '').includes('LoadBalancer')) owners.add(chart.id);
    }
    for (const id of owners) {
      if (!guarded(id)) {
        this.add(id, RULES.loadBalancers, true, 'on stack deletion or rollback this resource goes before the Load Balancer Controller, and '
          + 'nothing waits for the NLB the controller made for it: the controller can be uninstalled first, the NLB stays, and its network '
          + 'interfaces and security groups block the VPC\'s deletion (DependencyViolation) after the cluster is gone. Fix: depend on a '
          + 'cleanup step that depends on the controller (InferenceCluster adds Custom::LoadBalancerCleanup and orders workloads after it).');
      }
    }
  }

  private checkNetwork(): void {
    const vpcs = Object.entries<any>(this.resources).filter(([, r]) => r.Type === 'AWS::EC2::VPC');
    const s3 = Object.values<any>(this.resources).some((r) => r.Type === 'AWS::EC2::VPCEndpoint' && /s3/.test(JSON.stringify(r.Properties?.ServiceName)));
    for (const [id] of vpcs) {
      if (!s3) {
        this.add(id, RULES.endpoints, false, 'the VPC has no S3 endpoint: image layers and model weights cross the NAT gateway, billed per GB. '
          + 'Fix: gateway endpoint for S3 and interface endpoints for ECR, STS and Logs (InferenceCluster adds them unless vpcEndpoints is false).');
      }
    }
  }
}

// --- helpers ----------------------------------------------------------------------------------------

/** Whether an IAM resource pattern ('*' any run of characters) matches an ARN. */
function globMatches(pattern: string, arn: string): boolean {
  const escaped = pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${escaped.join('.*')}$`).test(arn);
}

/** 's3://bucket/a/b/' -> { bucket, prefix: 'a/b' }. */
function splitS3(uri: string): { bucket: string; prefix: string } {
  const [bucket, ...rest] = uri.replace(/^s3:\/\//, '').split('/');
  return { bucket, prefix: rest.join('/').replace(/\/+$/, '') };
}

/** A manifest property as text, its CloudFormation tokens rendered as `${...}` placeholders. */
function renderTokens(v: any): string {
  if (typeof v === 'string') return v;
  if (v && Array.isArray(v['Fn::Join'])) {
    const [sep, parts] = v['Fn::Join'];
    return (parts as any[]).map((p) => (typeof p === 'string' ? p : tokenText(p))).join(sep);
  }
  return JSON.stringify(v);
}

/** A token inside a string, as a placeholder that keeps what it names. */
function tokenText(p: any): string {
  if (p?.Ref) return `\${${p.Ref}}`;
  if (p?.['Fn::GetAtt']) return `\${${p['Fn::GetAtt'].join('.')}}`;
  if (p?.['Fn::Sub']) return String(Array.isArray(p['Fn::Sub']) ? p['Fn::Sub'][0] : p['Fn::Sub']).replace(/"/g, '');
  return '${token}';
}

function groupOf(o: any): string {
  const v = String(o?.apiVersion ?? '');
  return v.includes('/') ? v.split('/')[0] : '';
}

function describe(o: any): string {
  const ns = o?.metadata?.namespace;
  return `${o?.kind}/${ns ? `${ns}/` : ''}${o?.metadata?.name}`;
}

function shortImage(image: string): string {
  return image.length > 60 ? `${image.slice(0, 28)}...${image.slice(-28)}` : image;
}

function taintEffect(effect: string): string {
  return ({ NO_SCHEDULE: 'NoSchedule', NO_EXECUTE: 'NoExecute', PREFER_NO_SCHEDULE: 'PreferNoSchedule' } as Record<string, string>)[effect] ?? effect;
}

function isAccelerated(type: string): boolean {
  return /^(p\d|g\d|trn\d|inf\d|dl\d)/.test(type);
}

/** What one node of an instance type offers: the catalog for accelerated types, the EC2 naming scheme for others. */
function offersOf(type: string): Record<string, number> {
  try {
    const t = AcceleratedInstanceType.fromName(type);
    const offers: Record<string, number> = { cpu: t.vcpus, memory: t.memoryGib, [t.acceleratorResourceName]: t.acceleratorCount };
    if (t.isNeuron && t.neuronCoresPerDevice) offers['aws.amazon.com/neuroncore'] = t.acceleratorCount * t.neuronCoresPerDevice;
    if (t.supportsEfa) {
      offers[t.efaResourceName] = t.networkInterfaceLayout().filter((s) => s.interfaceType !== NetworkInterfaceType.INTERFACE).length;
      offers['hugepages-2Mi'] = EFA_HUGEPAGES_MIB_PER_NODE;
    }
    return offers;
  } catch {
    const m = /^([a-z]+)(\d+)[a-z-]*\.(\d*)(nano|micro|small|medium|large|xlarge|metal)$/.exec(type);
    if (!m) return {};
    const vcpus = m[4] === 'xlarge' ? 4 * (m[3] ? Number(m[3]) : 1) : ({ large: 2, medium: 1, small: 1, micro: 1, nano: 1 } as Record<string, number>)[m[4]] ?? 0;
    const gibPerVcpu = ({ c: 2, m: 4, r: 8, t: 4, x: 16 } as Record<string, number>)[m[1][0]] ?? 4;
    return { cpu: vcpus, memory: vcpus * gibPerVcpu };
  }
}

/** What one pod requests (the larger of requests and limits; init containers at their largest), in the units of {@link offersOf}. */
function podRequests(spec: any): Record<string, number> {
  const sum: Record<string, number> = {};
  const of = (c: any) => ({ ...c.resources?.limits, ...c.resources?.requests });
  for (const c of spec.containers ?? []) {
    for (const [k, v] of Object.entries(of(c))) sum[k] = (sum[k] ?? 0) + quantity(k, v);
  }
  for (const c of spec.initContainers ?? []) {
    for (const [k, v] of Object.entries(of(c))) sum[k] = Math.max(sum[k] ?? 0, quantity(k, v));
  }
  return sum;
}

/** A Kubernetes quantity: cores for cpu, GiB for memory, MiB for hugepages, a count otherwise. */
function quantity(resource: string, v: any): number {
  const m = /^([0-9.]+)([a-zA-Z]*)$/.exec(String(v));
  if (!m) return 0;
  const n = Number(m[1]);
  const unit: Record<string, number> = { '': 1, 'm': 1e-3, 'k': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12, 'Ki': 2 ** 10, 'Mi': 2 ** 20, 'Gi': 2 ** 30, 'Ti': 2 ** 40 };
  const raw = n * (unit[m[2]] ?? 1);
  if (resource === 'cpu') return raw;
  if (resource === 'memory' || resource === 'ephemeral-storage') return raw / 2 ** 30;
  if (resource.startsWith('hugepages-')) return raw / 2 ** 20;
  return raw;
}

function selects(spec: any, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries<string>(spec.nodeSelector ?? {})) {
    if (labels[k] !== v) return false;
  }
  const terms = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (Array.isArray(terms) && terms.length > 0) {
    return terms.some((t: any) => (t.matchExpressions ?? []).every((e: any) => {
      const value = labels[e.key];
      switch (e.operator) {
        case 'In': return value !== undefined && e.values.includes(value);
        case 'NotIn': return value === undefined || !e.values.includes(value);
        case 'Exists': return value !== undefined;
        case 'DoesNotExist': return value === undefined;
        // Labels the walk cannot know (zones, cliques): assume a node of the group may carry them.
        default: return true;
      }
    }));
  }
  return true;
}

function tolerates(spec: any, taints: NodeShape['taints']): boolean {
  const tolerations: any[] = spec.tolerations ?? [];
  return taints.filter((t) => t.effect !== 'PreferNoSchedule').every((t) => tolerations.some((tol) =>
    (tol.key === undefined && tol.operator === 'Exists')
    || (tol.key === t.key && (tol.operator === 'Exists' || tol.value === t.value) && (tol.effect === undefined || tol.effect === t.effect))));
}

/** Secrets, ConfigMaps and the ServiceAccount a pod spec uses. */
function podReferences(spec: any): Array<{ kind: string; name: string; optional: boolean }> {
  const refs: Array<{ kind: string; name: string; optional: boolean }> = [];
  refs.push({ kind: 'ServiceAccount', name: spec.serviceAccountName ?? 'default', optional: false });
  for (const v of spec.volumes ?? []) {
    if (v.secret) refs.push({ kind: 'Secret', name: v.secret.secretName, optional: v.secret.optional === true });
    if (v.configMap) refs.push({ kind: 'ConfigMap', name: v.configMap.name, optional: v.configMap.optional === true });
    for (const s of v.projected?.sources ?? []) {
      if (s.secret) refs.push({ kind: 'Secret', name: s.secret.name, optional: s.secret.optional === true });
      if (s.configMap) refs.push({ kind: 'ConfigMap', name: s.configMap.name, optional: s.configMap.optional === true });
    }
  }
  for (const c of [...spec.initContainers ?? [], ...spec.containers ?? []]) {
    for (const e of c.env ?? []) {
      const s = e.valueFrom?.secretKeyRef;
      if (s) refs.push({ kind: 'Secret', name: s.name, optional: s.optional === true });
      const cm = e.valueFrom?.configMapKeyRef;
      if (cm) refs.push({ kind: 'ConfigMap', name: cm.name, optional: cm.optional === true });
    }
    for (const f of c.envFrom ?? []) {
      if (f.secretRef) refs.push({ kind: 'Secret', name: f.secretRef.name, optional: f.secretRef.optional === true });
      if (f.configMapRef) refs.push({ kind: 'ConfigMap', name: f.configMapRef.name, optional: f.configMapRef.optional === true });
    }
  }
  for (const s of spec.imagePullSecrets ?? []) refs.push({ kind: 'Secret', name: s.name, optional: false });
  return refs;
}
