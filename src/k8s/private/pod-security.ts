/**
 * The Kubernetes Pod Security Standards, evaluated on plain pod specs: which of `privileged`, `baseline`
 * and `restricted` a pod satisfies, and why not a stricter one. The namespace a workload lands in enforces
 * the strictest level every one of its pods meets (so no pod is rejected) and warns and audits at
 * `restricted` (so what keeps it lower shows in `kubectl` and the audit log).
 *
 * Rules as written in https://kubernetes.io/docs/concepts/security/pod-security-standards/ (v1.35); the
 * checks below cover the fields this library's objects and common charts set. AppArmor, SELinux types,
 * `/proc` mount types and sysctls are checked as the standard writes them.
 */

/** The three levels, least to most restrictive. */
export const POD_SECURITY_LEVELS = ['privileged', 'baseline', 'restricted'] as const;
export type PodSecurityLevelName = typeof POD_SECURITY_LEVELS[number];

/** Capabilities `baseline` lets a container add (the standard's list). */
const BASELINE_CAPABILITIES = new Set(['AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD', 'NET_BIND_SERVICE',
  'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT']);

/** Volume types `restricted` allows. */
const RESTRICTED_VOLUMES = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']);

/** Sysctls `baseline` allows. */
const SAFE_SYSCTLS = new Set(['kernel.shm_rmid_forced', 'net.ipv4.ip_local_port_range', 'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies', 'net.ipv4.ping_group_range', 'net.ipv4.ip_local_reserved_ports', 'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes']);

/** The strictest level a pod meets, and the reasons it misses each stricter one. */
export interface PodSecurityVerdict {
  readonly level: PodSecurityLevelName;
  /** Why the pod is not `baseline` (empty when it is). */
  readonly notBaseline: string[];
  /** Why the pod is not `restricted` (empty when it is). */
  readonly notRestricted: string[];
}

/** Evaluates one pod spec (`spec` of a Pod, or `template.spec` of a workload). */
export function podSecurityOf(pod: any): PodSecurityVerdict {
  const spec = pod ?? {};
  const baseline: string[] = [];
  const restricted: string[] = [];
  const containers: any[] = [...spec.initContainers ?? [], ...spec.containers ?? [], ...spec.ephemeralContainers ?? []];
  const podCtx = spec.securityContext ?? {};

  // --- baseline ---
  for (const field of ['hostNetwork', 'hostPID', 'hostIPC'] as const) {
    if (spec[field] === true) baseline.push(`${field}: true`);
  }
  for (const v of spec.volumes ?? []) {
    if (v.hostPath) baseline.push(`volume '${v.name}' is a hostPath`);
    const type = Object.keys(v).find((k) => k !== 'name');
    if (type && !RESTRICTED_VOLUMES.has(type) && !v.hostPath) restricted.push(`volume '${v.name}' is of type ${type}`);
  }
  for (const s of podCtx.sysctls ?? []) {
    if (!SAFE_SYSCTLS.has(s.name)) baseline.push(`sysctl ${s.name}`);
  }
  const badSeccomp = (ctx: any) => ctx?.seccompProfile?.type === 'Unconfined';
  if (badSeccomp(podCtx)) baseline.push('pod seccompProfile Unconfined');
  if (podCtx.appArmorProfile?.type === 'Unconfined') baseline.push('pod appArmorProfile Unconfined');
  const badSeLinux = (ctx: any) => {
    const o = ctx?.seLinuxOptions;
    return o && ((o.type && !['container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'].includes(o.type)) || o.user || o.role);
  };
  if (badSeLinux(podCtx)) baseline.push('pod seLinuxOptions');

  for (const c of containers) {
    const ctx = c.securityContext ?? {};
    const name = `container '${c.name}'`;
    if (ctx.privileged === true) baseline.push(`${name} is privileged`);
    const added: string[] = ctx.capabilities?.add ?? [];
    const beyond = added.filter((cap) => !BASELINE_CAPABILITIES.has(cap));
    if (beyond.length > 0) baseline.push(`${name} adds ${beyond.join(', ')}`);
    for (const p of c.ports ?? []) {
      if ((p.hostPort ?? 0) !== 0) baseline.push(`${name} uses hostPort ${p.hostPort}`);
    }
    if (badSeccomp(ctx)) baseline.push(`${name} seccompProfile Unconfined`);
    if (ctx.appArmorProfile?.type === 'Unconfined') baseline.push(`${name} appArmorProfile Unconfined`);
    if (badSeLinux(ctx)) baseline.push(`${name} seLinuxOptions`);
    if (ctx.procMount !== undefined && ctx.procMount !== 'Default') baseline.push(`${name} procMount ${ctx.procMount}`);

    // --- restricted ---
    if (ctx.allowPrivilegeEscalation !== false) restricted.push(`${name} does not set allowPrivilegeEscalation: false`);
    const nonRoot = ctx.runAsNonRoot ?? podCtx.runAsNonRoot;
    if (nonRoot !== true) restricted.push(`${name} does not run with runAsNonRoot: true`);
    if ((ctx.runAsUser ?? podCtx.runAsUser) === 0) restricted.push(`${name} runs as uid 0`);
    const seccomp = ctx.seccompProfile?.type ?? podCtx.seccompProfile?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') restricted.push(`${name} has no RuntimeDefault seccompProfile`);
    const dropped: string[] = ctx.capabilities?.drop ?? [];
    if (!dropped.includes('ALL')) restricted.push(`${name} does not drop ALL capabilities`);
    const addedRestricted = added.filter((cap) => cap !== 'NET_BIND_SERVICE');
    if (addedRestricted.length > 0) restricted.push(`${name} adds ${addedRestricted.join(', ')}`);
  }
  const level: PodSecurityLevelName = baseline.length > 0 ? 'privileged' : restricted.length > 0 ? 'baseline' : 'restricted';
  return { level, notBaseline: baseline, notRestricted: [...baseline, ...restricted] };
}

/** True when `level` admits a pod of level `podLevel`. */
export function admits(level: PodSecurityLevelName, podLevel: PodSecurityLevelName): boolean {
  return POD_SECURITY_LEVELS.indexOf(podLevel) >= POD_SECURITY_LEVELS.indexOf(level);
}

/** The least restrictive of some levels (`restricted` for none). */
export function loosest(levels: PodSecurityLevelName[]): PodSecurityLevelName {
  return levels.reduce<PodSecurityLevelName>((a, b) => (POD_SECURITY_LEVELS.indexOf(b) < POD_SECURITY_LEVELS.indexOf(a) ? b : a), 'restricted');
}

/** The pod specs of workload objects, by `Kind/name` (Pods, Deployments and friends, Jobs, CronJobs, LeaderWorkerSets). */
export function podSpecsOf(objects: any[]): Array<{ owner: string; spec: any }> {
  const out: Array<{ owner: string; spec: any }> = [];
  for (const o of objects) {
    const kind = String(o?.kind ?? '');
    const owner = `${kind}/${o?.metadata?.name ?? '?'}`;
    const spec = o?.spec ?? {};
    switch (kind) {
      case 'Pod': out.push({ owner, spec }); break;
      case 'Deployment': case 'StatefulSet': case 'ReplicaSet': case 'DaemonSet': case 'Job':
        if (spec.template?.spec) out.push({ owner, spec: spec.template.spec });
        break;
      case 'CronJob':
        if (spec.jobTemplate?.spec?.template?.spec) out.push({ owner, spec: spec.jobTemplate.spec.template.spec });
        break;
      case 'LeaderWorkerSet': {
        const lwt = spec.leaderWorkerTemplate ?? {};
        if (lwt.leaderTemplate?.spec) out.push({ owner: `${owner} (leader)`, spec: lwt.leaderTemplate.spec });
        if (lwt.workerTemplate?.spec) out.push({ owner: `${owner} (workers)`, spec: lwt.workerTemplate.spec });
        break;
      }
      default: break;
    }
  }
  return out;
}

/** Namespaces Kubernetes creates itself: nothing needs to create them first. */
export const BUILT_IN_NAMESPACES = new Set(['default', 'kube-system', 'kube-public', 'kube-node-lease']);

/** Kinds that are not namespaced (the built-in ones and those of the CRDs this library emits). */
export const CLUSTER_SCOPED_KINDS = new Set([
  'Namespace', 'Node', 'PersistentVolume', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'StorageClass',
  'CSIDriver', 'CSINode', 'VolumeAttachment', 'PriorityClass', 'RuntimeClass', 'IngressClass', 'APIService',
  'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding',
  'MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding', 'FlowSchema', 'PriorityLevelConfiguration', 'CertificateSigningRequest',
  'DeviceClass', 'ResourceSlice', 'GatewayClass', 'NodePool', 'EC2NodeClass', 'NodeClaim', 'ClusterIssuer',
]);

/**
 * The Pod Security labels of a namespace for these objects: enforce the strictest level all their pods
 * meet (every pod is admitted), warn and audit at `restricted`.
 */
export function podSecurityLabels(objects: any[]): Record<string, string> {
  const level = loosest(podSpecsOf(objects).map((p) => podSecurityOf(p.spec).level));
  return {
    'pod-security.kubernetes.io/enforce': level,
    'pod-security.kubernetes.io/enforce-version': 'latest',
    'pod-security.kubernetes.io/warn': 'restricted',
    'pod-security.kubernetes.io/audit': 'restricted',
  };
}
