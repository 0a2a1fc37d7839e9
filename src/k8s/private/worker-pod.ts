import { k8s } from 'cdk8s-plus-28';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../catalog';
import { ModelCache } from '../model-cache';
import { ModelSource } from '../model-source';
import { VllmVersion } from '../vllm-version';
import { DEFAULT_DRAIN_TPOT_SECONDS, DrainPlan, NIXL_KV_LEASE_SECONDS, drainPlan, preStopHook } from './drain';
import { APP_COMPONENT, APP_INSTANCE, HOSTNAME, LWS_WORKER_INDEX, NODE_INSTANCE_TYPE, NODE_POOL_ROLE, PORTS, TOPOLOGY_ZONE } from './labels';
import { neuronKvTransferConfig } from './neuron';
import { PoolExtras } from './pool-extras';
import { PoolPlan } from './pool-plan';
import { EFA_HUGEPAGES_MIB_PER_NODE } from '../../catalog/private/efa';

/** What every worker pod of one deployment shares (internal). */
export interface WorkerContext {
  readonly instance: string;
  readonly model: ModelArchitecture;
  readonly source: ModelSource;
  readonly servedModelName: string;
  readonly image: string;
  readonly imagePullPolicy?: string;
  readonly serviceAccountName: string;
  readonly maxContext: number;
  readonly weightPrecision: Precision;
  readonly kvCachePrecision: Precision;
  readonly prequantizedCheckpoint: boolean;
  readonly kvBlockSize: number;
  /** NIXL backend: 'LIBFABRIC' or 'UCX'. */
  readonly nixlBackend: string;
  /** The vLLM release the image runs. */
  readonly vllmVersion: VllmVersion;
  /** vLLM's kv_load_failure_policy for the decode pool ('fail' or 'recompute'); unset: not written. */
  readonly kvLoadFailurePolicy?: string;
  readonly modelCache: ModelCache;
  readonly runAsNonRoot: boolean;
  /** Whether EFA pods request the 2 MiB hugepages libfabric's EFA provider uses (ModelDeploymentOptions.efaHugePages). */
  readonly efaHugePages: boolean;
  /** Seconds a model load may take before the startup probe gives up. */
  readonly startupSeconds: number;
  readonly zone?: string;
  /**
   * The TPOT SLO that sizes the drain of a leaving pod.
   * @default DEFAULT_DRAIN_TPOT_SECONDS
   */
  readonly drainTpotSeconds?: number;
  /**
   * The longest output a request may ask for, tokens.
   * @default - maxContext
   */
  readonly maxOutputTokens?: number;
}

/** How a pool's pods drain when they leave it (grace period and preStop hook; drain.ts). */
export function workerDrain(ctx: WorkerContext, pool: PoolPlan): DrainPlan {
  return drainPlan(pool, {
    tpotSeconds: ctx.drainTpotSeconds ?? DEFAULT_DRAIN_TPOT_SECONDS,
    maxOutputTokens: ctx.maxOutputTokens ?? ctx.maxContext,
    maxContext: ctx.maxContext,
  });
}

/** Pod kinds: a single-node server, or the leader / a worker of a multi-node group. */
export type WorkerKind = 'server' | 'leader' | 'worker';

/** Where model files go inside the container. */
const CACHE_MOUNT = '/models';

/**
 * The instance families whose EFA supports device RDMA (RDMA read/write of GPU memory), where
 * libfabric needs FI_EFA_USE_DEVICE_RDMA=1: P4d (EFA v1 with RDMA), P5/P5e/P5en, P6, Trn1, Trn2.
 * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types
 */
const RDMA_FAMILIES = ['p4d', 'p4de', 'p5', 'p5e', 'p5en', 'p6-b200', 'p6e-gb200', 'trn1', 'trn1n', 'trn2', 'trn2u'];

/** vLLM server arguments for one pool (the leader's in a multi-node group). */
export function vllmArgs(ctx: WorkerContext, pool: PoolPlan, extras?: PoolExtras): string[] {
  const p = pool.parallelism;
  const args = [
    // `vllm serve` takes the model as its first argument (and refuses --model).
    ctx.source.uri,
    '--served-model-name', ctx.servedModelName,
    // GPUs per replica, or logical NeuronCores per replica on Trainium (pool-plan.ts).
    '--tensor-parallel-size', String(pool.vllmTensorParallel),
  ];
  if (p.pipelineParallel > 1) {
    args.push('--pipeline-parallel-size', String(p.pipelineParallel));
  }
  if (pool.multiNode) {
    // vLLM spans nodes through Ray; the group's pods form one Ray cluster (leader = head).
    args.push('--distributed-executor-backend', 'ray');
  }
  args.push(...modelArgs(ctx, pool));
  const own = pool.options.instanceType.isNeuron ? neuronKvTransferConfig(pool.role)
    : kvTransferConfig(ctx.nixlBackend, ctx.vllmVersion, pool.role, pool.role === 'decode' ? ctx.kvLoadFailurePolicy : undefined);
  args.push(...(extras ? extras.kvTransferArgs(own) : ['--kv-transfer-config', JSON.stringify(own)]));
  args.push('--kv-events-config', JSON.stringify(kvEventsConfig(ctx.servedModelName)));
  args.push('--port', String(PORTS.http));
  return [...args, ...(pool.options.extraArgs ?? []), ...(extras?.args ?? [])];
}

/** Common vLLM arguments: model, precision, memory and block size (shared with expert-parallel pools). */
export function modelArgs(ctx: WorkerContext, pool: PoolPlan): string[] {
  const args = [
    '--max-model-len', String(ctx.maxContext),
    '--gpu-memory-utilization', String(pool.gpuMemoryUtilization),
    '--block-size', String(ctx.kvBlockSize),
    '--kv-cache-dtype', ctx.kvCachePrecision.vllmKvCacheDtype!,
  ];
  const quantization = quantizationFlag(ctx, pool);
  if (quantization !== undefined) {
    args.push('--quantization', quantization);
  }
  if (ctx.source.kind === 's3') {
    args.push('--load-format', 'runai_streamer');
  }
  if (ctx.source.revision !== undefined) {
    args.push('--revision', ctx.source.revision);
  }
  return args;
}

/**
 * Host memory a vLLM pod needs besides its KV cache tiers, GiB: the Python processes, tokenizers and
 * CUDA host allocations (about 4 GiB per accelerator) plus 16 GiB for the server. An estimate with
 * margin; the pod's request is never below its share of the node anyway.
 */
export function workingSetGib(acceleratorsPerPod: number): number {
  return 16 + 4 * acceleratorsPerPod;
}

/**
 * `--quantization` for the weights, or undefined when vLLM reads the scheme from the checkpoint. Never
 * on Trainium: vLLM Neuron takes FP8 from the checkpoint's `quantization_config` and warns against the
 * flag (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/guides/reference-configuration.html);
 * pool-plan.ts refuses the precisions it cannot run.
 */
export function quantizationFlag(ctx: WorkerContext, pool: PoolPlan): string | undefined {
  if (pool.options.instanceType.isNeuron || ctx.prequantizedCheckpoint || ctx.weightPrecision === ctx.model.nativePrecision) {
    return undefined;
  }
  return ctx.weightPrecision.vllmQuantization;
}

/**
 * vLLM's `--kv-transfer-config` for NixlConnector with the chosen NIXL backend, and on a decode pool the
 * `kv_load_failure_policy` ('fail' or 'recompute': KVTransferConfig in vllm/config/kv_transfer.py, e.g.
 * vllm-project/vllm@9dc4946457fb). The role is the pool's where the release takes one (0.22.1 deprecated
 * `kv_both` for NixlConnector: vLLM PR #43874), `kv_both` before.
 */
export function kvTransferConfig(backend: string, version: VllmVersion, role: string, kvLoadFailurePolicy?: string): Record<string, unknown> {
  const perPool = version.kvRolesPerPool && (role === 'prefill' || role === 'decode');
  return {
    kv_connector: 'NixlConnector',
    kv_role: perPool ? (role === 'prefill' ? 'kv_producer' : 'kv_consumer') : 'kv_both',
    // Older releases ignore the lease key (the extra config is free-form); newer ones default to 30 s.
    kv_connector_extra_config: { backends: [backend], kv_lease_duration: NIXL_KV_LEASE_SECONDS },
    ...(kvLoadFailurePolicy !== undefined ? { kv_load_failure_policy: kvLoadFailurePolicy } : {}),
  };
}

/**
 * vLLM's `--kv-events-config`: a ZMQ PUB socket on every pod that the router subscribes to. The topic
 * names the pod (`$(POD_IP)` is expanded by the kubelet from the POD_IP variable) so the router can
 * tell endpoints apart: `kv@<pod IP>:<port>@<model>`.
 */
export function kvEventsConfig(servedModelName: string): Record<string, unknown> {
  return {
    enable_kv_cache_events: true,
    publisher: 'zmq',
    endpoint: `tcp://*:${PORTS.kvEvents}`,
    // Kept for a restarting router and for gaps: the last buffer_steps batches (vLLM's default, 10000).
    replay_endpoint: `tcp://*:${PORTS.kvEventsReplay}`,
    topic: `kv@$(POD_IP):${PORTS.http}@${servedModelName}`,
  };
}

/** Environment of a worker container. */
export function workerEnv(ctx: WorkerContext, pool: PoolPlan, kind: WorkerKind): k8s.EnvVar[] {
  const podIp = { valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } };
  const env: k8s.EnvVar[] = [
    { name: 'POD_IP', ...podIp },
    // NIXL's handshake address must be routable from the other pool: the pod IP, not the host name.
    { name: 'VLLM_NIXL_SIDE_CHANNEL_HOST', ...podIp },
    { name: 'VLLM_NIXL_SIDE_CHANNEL_PORT', value: String(PORTS.nixlSideChannel) },
    // Block hashes (prefix cache, KV events) must agree across pods and with the router's index.
    { name: 'PYTHONHASHSEED', value: '0' },
    { name: 'HF_HOME', value: `${CACHE_MOUNT}/huggingface` },
  ];
  if (pool.multiNode) {
    env.push({ name: 'VLLM_HOST_IP', ...podIp });
  }
  if (ctx.nixlBackend === 'LIBFABRIC' && pool.efaInterfacesPerPod > 0) {
    env.push({ name: 'FI_PROVIDER', value: 'efa' });
    if (RDMA_FAMILIES.includes(pool.options.instanceType.family)) {
      env.push({ name: 'FI_EFA_USE_DEVICE_RDMA', value: '1' });
    }
  }
  if (pool.efaInterfacesPerPod > 0 && !ctx.efaHugePages) {
    // Without a hugepages request the pod's hugetlb limit is 0: libfabric must not try them.
    env.push({ name: 'FI_EFA_USE_HUGE_PAGE', value: '0' });
  }
  if (pool.role === 'prefill') {
    // The router holds the prefill connection while it forwards to decode; keep it open (vLLM's P/D docs).
    env.push({ name: 'VLLM_HTTP_TIMEOUT_KEEP_ALIVE', value: '120' });
  }
  env.push(...neuronEnv(pool));
  if (ctx.source.tokenSecret !== undefined) {
    env.push({
      name: 'HF_TOKEN',
      valueFrom: { secretKeyRef: { name: ctx.source.tokenSecret.name, key: ctx.source.tokenSecret.key ?? 'token' } },
    });
  }
  if (ctx.source.region !== undefined) {
    env.push({ name: 'AWS_REGION', value: ctx.source.region });
  }
  if (kind === 'worker') {
    return env.filter(e => e.name !== 'VLLM_HTTP_TIMEOUT_KEEP_ALIVE');
  }
  return env;
}

/**
 * The Neuron runtime and vLLM Neuron settings of a Trainium pod (none for GPUs):
 * - `NEURON_LOGICAL_NC_CONFIG`: the LNC the TP size was counted with, so compiler and runtime agree
 *   (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html);
 *   only where LNC applies (Trn2 and later);
 * - `VLLM_CACHE_ROOT` on the model cache volume: compiled NEFFs survive restarts on the node's disk
 *   (setup guide: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/getting-started/setup-guide.html);
 * - prefill: `VLLM_NEURON_SKIP_DECODE_WARMUP=1`, since a prefill server never decodes past its first token
 *   (DI design: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/design/vllm/disaggregated-inference.html).
 *   Decode keeps its prefill warmup: the router prefills short prompts on the decode pods.
 */
function neuronEnv(pool: PoolPlan): k8s.EnvVar[] {
  const type = pool.options.instanceType;
  if (!type.isNeuron) {
    return [];
  }
  const env: k8s.EnvVar[] = [];
  if (type.logicalNeuronCoreConfigs.length > 1 && pool.logicalNeuronCoreConfig !== undefined) {
    env.push({ name: 'NEURON_LOGICAL_NC_CONFIG', value: String(pool.logicalNeuronCoreConfig) });
  }
  env.push({ name: 'VLLM_CACHE_ROOT', value: `${CACHE_MOUNT}/vllm` });
  if (pool.role === 'prefill') {
    env.push({ name: 'VLLM_NEURON_SKIP_DECODE_WARMUP', value: '1' });
  }
  return env;
}

/** GiB of host memory and whole CPUs a pod requests: its share of the node less a system reserve. */
export function hostShare(type: AcceleratedInstanceType, nodeShare: number): { memoryGib: number; cpus: number } {
  // 10% of memory and CPU stay with the kubelet, the OS and DaemonSets (EKS reserves less; headroom for
  // the device plugins, CNI and node agents).
  const usable = 0.9;
  return {
    memoryGib: Math.floor(type.memoryGib * nodeShare * usable),
    cpus: Math.floor(type.vcpus * nodeShare * usable),
  };
}

/** MiB of 2 MiB hugepages a pod with EFA requests: its share of what the EFA driver allocates per node. */
export function hugepagesMib(nodeShare: number): number {
  return Math.floor((EFA_HUGEPAGES_MIB_PER_NODE * nodeShare) / 2) * 2;
}

/** /dev/shm size, GiB: 8 GiB per accelerator (NCCL and vLLM's shared-memory broadcast), at most a quarter of the pod's memory. */
export function shmGib(acceleratorsPerPod: number, podMemoryGib: number): number {
  return Math.max(1, Math.min(8 * acceleratorsPerPod, Math.floor(podMemoryGib / 4)));
}

/** The container resources of a worker (with a KV cache's host memory, if attached). */
export function workerResources(pool: PoolPlan, extras?: PoolExtras, hugePages = true): k8s.ResourceRequirements {
  const base = baseResources(pool, hugePages);
  const cacheGib = extras?.kvCache?.hostMemoryGib ?? 0;
  if (extras === undefined || cacheGib === 0) {
    return base;
  }
  const host = hostShare(pool.options.instanceType, pool.nodeShare);
  const needed = cacheGib + workingSetGib(pool.layout.acceleratorsPerPod) + shmGib(pool.layout.acceleratorsPerPod, host.memoryGib);
  return extras.applyResources(base, host.memoryGib, Math.ceil(needed));
}

function baseResources(pool: PoolPlan, hugePages: boolean): k8s.ResourceRequirements {
  const type = pool.options.instanceType;
  const host = hostShare(type, pool.nodeShare);
  const memory = k8s.Quantity.fromString(`${host.memoryGib}Gi`);
  const accelerators = k8s.Quantity.fromNumber(pool.layout.acceleratorsPerPod);
  const requests: Record<string, k8s.Quantity> = {
    cpu: k8s.Quantity.fromString(String(host.cpus)),
    memory,
  };
  const limits: Record<string, k8s.Quantity> = {
    memory,
    [type.acceleratorResourceName]: accelerators,
  };
  requests[type.acceleratorResourceName] = accelerators;
  if (pool.efaInterfacesPerPod > 0) {
    const efa = k8s.Quantity.fromNumber(pool.efaInterfacesPerPod);
    requests[type.efaResourceName] = efa;
    limits[type.efaResourceName] = efa;
  }
  if (pool.efaInterfacesPerPod > 0 && hugePages) {
    const huge = k8s.Quantity.fromString(`${hugepagesMib(pool.nodeShare)}Mi`);
    requests['hugepages-2Mi'] = huge;
    limits['hugepages-2Mi'] = huge;
  }
  return { requests, limits };
}

/** The vLLM container's health probes on a named port: startup (model load), readiness, liveness. */
export function workerProbes(ctx: WorkerContext, port: string): Pick<k8s.Container, 'startupProbe' | 'readinessProbe' | 'livenessProbe'> {
  const httpGet = { path: '/health', port: k8s.IntOrString.fromString(port) };
  const period = 10;
  return {
    startupProbe: { httpGet, periodSeconds: period, failureThreshold: Math.ceil(ctx.startupSeconds / period), timeoutSeconds: 5 },
    readinessProbe: { httpGet, periodSeconds: 10, failureThreshold: 3, timeoutSeconds: 5 },
    livenessProbe: { httpGet, periodSeconds: 30, failureThreshold: 5, timeoutSeconds: 10 },
  };
}

/** The pod template (metadata and spec) of one worker kind. */
export function workerPodTemplate(
  ctx: WorkerContext, pool: PoolPlan, kind: WorkerKind, labels: Record<string, string>, checkpointGib: number, extras?: PoolExtras,
): k8s.PodTemplateSpec {
  const type = pool.options.instanceType;
  const host = hostShare(type, pool.nodeShare);
  const other = pool.role === 'prefill' ? 'decode' : 'prefill';
  const serves = kind !== 'worker';
  const disk = extras?.diskVolume();
  const drain = workerDrain(ctx, pool);
  const container: k8s.Container = {
    name: 'vllm',
    image: ctx.image,
    imagePullPolicy: ctx.imagePullPolicy,
    ...workerCommand(ctx, pool, kind, extras),
    env: extras ? extras.mergeEnv(workerEnv(ctx, pool, kind)) : workerEnv(ctx, pool, kind),
    ports: serves ? [
      { name: 'http', containerPort: PORTS.http, protocol: 'TCP' },
      { name: 'kv-events', containerPort: PORTS.kvEvents, protocol: 'TCP' },
      { name: 'kv-replay', containerPort: PORTS.kvEventsReplay, protocol: 'TCP' },
      { name: 'nixl', containerPort: PORTS.nixlSideChannel, protocol: 'TCP' },
    ] : [{ name: 'ray', containerPort: PORTS.ray, protocol: 'TCP' }],
    resources: workerResources(pool, extras, ctx.efaHugePages),
    volumeMounts: [
      { name: 'dshm', mountPath: '/dev/shm' },
      { name: 'model-cache', mountPath: CACHE_MOUNT },
      ...(disk ? [disk.mount] : []),
    ],
    securityContext: {
      allowPrivilegeEscalation: false,
      // EFA registers (pins) memory; IPC_LOCK lifts the memlock limit for root. A non-root process relies on
      // the node's unlimited memlock limit instead (the EKS AMI's containerd sets LimitMEMLOCK=infinity).
      capabilities: { add: ['IPC_LOCK'] },
      ...(ctx.runAsNonRoot ? { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000 } : {}),
    },
    ...(serves ? workerProbes(ctx, 'http') : {}),
    // Leave without dropping a request: wait out the router's DNS refresh, then for the server to go
    // idle; a group's worker pod waits on its leader's server, whose collective it is part of.
    lifecycle: serves ? preStopHook(drain, [PORTS.http]) : preStopHook(drain, [PORTS.http], '$LWS_LEADER_ADDRESS'),
  };
  const cacheVolume: k8s.Volume = ctx.modelCache.kind === 'host-path'
    ? { name: 'model-cache', hostPath: { path: ctx.modelCache.hostPath!, type: 'DirectoryOrCreate' } }
    : { name: 'model-cache', emptyDir: { sizeLimit: k8s.Quantity.fromString(`${ctx.modelCache.sizeGib ?? Math.ceil(checkpointGib * 2)}Gi`) } };
  const nodeSelector: Record<string, string> = { [NODE_INSTANCE_TYPE]: type.name };
  if (pool.options.nodePoolRole !== undefined) {
    nodeSelector[NODE_POOL_ROLE] = pool.options.nodePoolRole;
  }
  if (ctx.zone !== undefined) {
    nodeSelector[TOPOLOGY_ZONE] = ctx.zone;
  }
  const instanceSelector = (component: string) => ({ matchLabels: { [APP_INSTANCE]: ctx.instance, [APP_COMPONENT]: component } });
  const spec: k8s.PodSpec = {
    serviceAccountName: ctx.serviceAccountName,
    automountServiceAccountToken: false,
    // The preStop drain (DNS wait, in-flight requests at the TPOT SLO) and vLLM's exit: drain.ts.
    terminationGracePeriodSeconds: drain.graceSeconds,
    securityContext: {
      seccompProfile: { type: 'RuntimeDefault' },
      ...(ctx.runAsNonRoot ? { fsGroup: 1000 } : {}),
    },
    nodeSelector,
    tolerations: [
      { key: type.acceleratorResourceName, operator: 'Exists', effect: 'NoSchedule' },
    ],
    affinity: {
      // Prefill and decode on one host fight over the EFA devices and NIXL reports EAGAIN: keep them apart.
      ...(pool.role === 'serve' ? {} : {
        podAntiAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: instanceSelector(other), topologyKey: HOSTNAME }],
        },
      }),
      // KV transfer and the router's hops stay inside one Availability Zone (EFA does not cross zones).
      podAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [{
          weight: 100,
          podAffinityTerm: { labelSelector: { matchLabels: { [APP_INSTANCE]: ctx.instance } }, topologyKey: TOPOLOGY_ZONE },
        }],
      },
    },
    // Replicas that share a node leave together when it is drained (a node group update, a scale-down):
    // the budget lets one go, the other waits for a new node and a model load, past EKS's drain timeout.
    // Prefer spreading them over the nodes there are; never hold a pod back for it.
    ...(pool.nodeShare < 1 && kind !== 'worker' ? {
      topologySpreadConstraints: [{ maxSkew: 1, topologyKey: HOSTNAME, whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: labels } }],
    } : {}),
    containers: [container],
    volumes: [
      { name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: k8s.Quantity.fromString(`${shmGib(pool.layout.acceleratorsPerPod, host.memoryGib)}Gi`) } },
      cacheVolume,
      ...(disk ? [disk.volume] : []),
    ],
  };
  return { metadata: { labels }, spec };
}

/** The command and arguments of a worker container. */
function workerCommand(ctx: WorkerContext, pool: PoolPlan, kind: WorkerKind, extras?: PoolExtras): { command: string[]; args: string[] } {
  const serve = ['vllm', 'serve'];
  if (kind === 'server') {
    return { command: serve, args: vllmArgs(ctx, pool, extras) };
  }
  if (kind === 'worker') {
    return {
      command: ['/bin/sh', '-c'],
      args: [`exec ray start --address=$(LWS_LEADER_ADDRESS):${PORTS.ray} --block`],
    };
  }
  // Leader: start the Ray head, wait until every pod of the group has joined, then serve. "$@" carries
  // the vLLM arguments unchanged (the kubelet has already expanded $(POD_IP) in them).
  const script = [
    `ray start --head --port=${PORTS.ray}`,
    'until [ "$(python3 -c \'import ray; ray.init(address="auto", logging_level="ERROR"); print(len([n for n in ray.nodes() if n["Alive"]]))\')" -ge "$LWS_GROUP_SIZE" ]; do sleep 5; done',
    `exec ${serve.join(' ')} "$@"`,
  ].join(' && ');
  return { command: ['/bin/sh', '-c', script, 'vllm'], args: vllmArgs(ctx, pool, extras) };
}

/** The selector labels of the pods that serve HTTP in a pool (LWS: the leaders only). */
export function servingSelector(labels: Record<string, string>, pool: PoolPlan): Record<string, string> {
  return pool.multiNode ? { ...labels, [LWS_WORKER_INDEX]: '0' } : labels;
}
