import { Chart } from 'cdk8s';
import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { AcceleratedInstanceType } from '../catalog';
import { AllToAllBackend } from './all-to-all-backend';
import { DataParallelEndpoints } from './data-parallel-endpoints';
import { GatewayExposure, InferencePoolExposureOptions } from './gateway-exposure';
import { KvLoadFailurePolicy } from './kv-load-failure-policy';
import { KvTransfer } from './kv-transfer';
import { ModelDeploymentOptions } from './model-deployment-options';
import { NetworkIsolation } from './network-isolation';
import { PoolAutoscaling } from './pool-autoscaling';
import { PoolRole } from './pool-role';
import { addComputeDomain, claimComputeDomain, needsComputeDomain } from './private/compute-domain';
import { preStopHook } from './private/drain';
import { addGatewayObjects } from './private/gateway-objects';
import { DRAIN_TPOT, FIELD_PREFIX, HiddenPoolProps, INSTANCE, KV_LOAD_FAILURE_POLICY, NIXL_BACKEND } from './private/hidden-props';
import { APP_INSTANCE, APP_PART_OF, LWS_WORKER_INDEX, PORTS, componentLabels } from './private/labels';
import { addLeaderWorkerSet } from './private/leader-worker-set';
import { ResolvedModel, resolveModel, resolveVllmVersion, strip } from './private/model-inputs';
import { addDeploymentPolicies } from './private/network-policies';
import { PoolExtras } from './private/pool-extras';
import { PoolPlan, PoolPlanInputs, planPool } from './private/pool-plan';
import { workloadServiceAccount } from './private/service-account';
import { WorkerContext, kvEventsConfig, kvTransferConfig, modelArgs, workerDrain, workerPodTemplate, workerProbes } from './private/worker-pod';
import { podCapacity } from './private/worker-pool';
import { IServingPool, KvCacheAttachment } from './serving-pool';

/** vLLM's data-parallel RPC port on the group's first node (any free port; llm-d and vLLM's examples use 5555). */
const DP_RPC_PORT = 5555;
/**
 * Base NIXL side-channel port of expert-parallel pods. vLLM adds the data-parallel rank (times TP in
 * some versions) to it, and adds the rank to the KV-events port (5557) too, so a base far above both
 * keeps the two ranges apart for any group size.
 */
const EP_NIXL_SIDE_CHANNEL_BASE = 20000;
/** Most groups tried when `nodesPerGroup` is left to the sizing. */
const MAX_AUTO_NODES = 16;

/**
 * The layout of an {@link ExpertParallelPool}: where it runs and how it splits the model.
 */
export interface ExpertParallelPoolOptions {
  /** The instance type of the nodes (whole nodes: one pod per node). */
  readonly instanceType: AcceleratedInstanceType;
  /**
   * Nodes in one data x expert parallel group (the LeaderWorkerSet's `size`).
   * @default - the fewest nodes whose expert shards, replicated dense weights and one `maxContext`
   * sequence fit each accelerator and whose rank count divides the experts
   */
  readonly nodesPerGroup?: number;
  /**
   * Groups (LeaderWorkerSet replicas), each a full copy of the model; leave it unset with `autoscaling`.
   * @default 1 (with `autoscaling`: `autoscaling.minReplicas` at first, then the autoscaler's)
   */
  readonly replicas?: number;
  /**
   * Tensor-parallel size of each data-parallel rank's attention (vLLM `--tensor-parallel-size`).
   * @default 1 (data-parallel attention: each GPU one rank, MLA's latent cache not replicated)
   */
  readonly tensorParallel?: number;
  /**
   * Data-parallel ranks of one group (vLLM `--data-parallel-size`); must equal
   * `nodesPerGroup x accelerators per node / tensorParallel`. The expert-parallel size is
   * `dataParallel x tensorParallel`.
   * @default - nodesPerGroup x accelerators per node / tensorParallel
   */
  readonly dataParallel?: number;
  /**
   * The all-to-all backend of the MoE layers (vLLM `--all2all-backend`).
   * @default - AllToAllBackend.forInstanceType(instanceType): NCCL-based all-gather/reduce-scatter on EFA
   */
  readonly allToAllBackend?: AllToAllBackend;
  /**
   * Expert parallel load balancing (vLLM `--enable-eplb`): vLLM moves hot experts between ranks and
   * keeps `redundantExperts` extra copies.
   * @default - true when redundantExperts > 0, else false
   * @see https://docs.vllm.ai/en/latest/serving/expert_parallel_deployment.html#expert-parallel-load-balancer-eplb
   */
  readonly expertLoadBalancing?: boolean;
  /**
   * Redundant expert copies (EPLB `num_redundant_experts`); they take memory and count towards the
   * experts each rank holds, so `routed + redundant` must be divisible by the expert-parallel size.
   * @default 0
   */
  readonly redundantExperts?: number;
  /**
   * How ranks take HTTP requests.
   * @default DataParallelEndpoints.PER_RANK (SINGLE inside a DisaggregatedInference, one endpoint per
   * group; its router discovers every rank's port when PER_RANK is set)
   */
  readonly endpoints?: DataParallelEndpoints;
  /**
   * Fraction of accelerator memory vLLM may use (`--gpu-memory-utilization`).
   * @default 0.9
   */
  readonly gpuMemoryUtilization?: number;
  /**
   * EFA interfaces each pod requests (`vpc.amazonaws.com/efa`).
   * @default - every interface of the node
   */
  readonly efaInterfaces?: number;
  /**
   * Value of the `disagg.dev/pool-role` node label the pods select.
   * @default - no pool-role selector
   */
  readonly nodePoolRole?: string;
  /**
   * Extra vLLM arguments, appended after the generated ones.
   * @default - none
   */
  readonly extraArgs?: string[];
  /**
   * Scale the number of groups (the LeaderWorkerSet's scale subresource: a group is the unit) on the
   * pool's SLO pressure. Only for a prefill or decode side of a `DisaggregatedInference`
   * (`prefillExpertParallel` / `decodeExpertParallel`), whose router computes the pressure.
   * @default - no autoscaling: `replicas` groups
   */
  readonly autoscaling?: PoolAutoscaling;
}

/**
 * Props of {@link ExpertParallelPool}.
 */
export interface ExpertParallelPoolProps extends ModelDeploymentOptions, ExpertParallelPoolOptions {
  /**
   * What the pool does: whole requests, or one side of a prefill/decode split (then it moves KV cache
   * with NIXL, `--kv-transfer-config`).
   * @default PoolRole.SERVE
   */
  readonly role?: PoolRole;
  /**
   * Expose the pool through a Gateway API Inference Extension InferencePool (one target port per
   * local rank) and an HTTPRoute from an existing Gateway.
   * @default - no InferencePool: reach the pods through the headless Service
   */
  readonly inferencePool?: InferencePoolExposureOptions;
  /**
   * An existing ServiceAccount for the pods.
   * @default - a new ServiceAccount named after the pool
   */
  readonly serviceAccountName?: string;
  /**
   * With the decode role: what a rank does when it cannot pull a prompt's KV cache from the prefill
   * pool (vLLM's `kv_load_failure_policy` in `--kv-transfer-config`), written explicitly because vLLM's
   * default changed between releases. FAIL suits a router that retries a failed decode leg without
   * the transfer parameters (the disagg router does; check yours), RECOMPUTE one that does not. Inside
   * a DisaggregatedInference its own `kvLoadFailurePolicy` applies.
   * @default - KvLoadFailurePolicy.FAIL with the decode role; not set for the other roles
   * @see https://docs.vllm.ai/en/latest/api/vllm/config/kv_transfer/
   */
  readonly kvLoadFailurePolicy?: KvLoadFailurePolicy;
}

/**
 * Wide expert parallelism for MoE models (DeepSeek-V3/R1, Qwen3-235B-A22B, Kimi-K2, gpt-oss) with vLLM:
 * data-parallel attention and expert-parallel MoE layers across the nodes of a LeaderWorkerSet group.
 *
 * Emits a LeaderWorkerSet (`size` = nodes per group, one pod per node holding every accelerator), a
 * headless Service with one port per local rank, a PodDisruptionBudget, a ServiceAccount unless given,
 * and an InferencePool with an HTTPRoute on request. vLLM's data-parallel flags are wired to the LWS
 * environment: `--data-parallel-address $(LWS_LEADER_ADDRESS)`, ranks starting at
 * `LWS_WORKER_INDEX x local ranks`. With per-rank endpoints each pod runs one `vllm serve` per local
 * rank (`--data-parallel-rank`, port 8000 + local rank, KV events on 5557 + local rank) and is ready
 * when every rank answers /health; with a single endpoint the leader serves and the other pods run
 * `--headless`.
 *
 * Validation (src/sizing): the model has routed experts; `routed + redundant` experts divide by the
 * expert-parallel size; dense weights, the expert shard and one `maxContext` sequence fit each
 * accelerator; `dataParallel x tensorParallel` equals `nodesPerGroup x` accelerators per node.
 */
export class ExpertParallelPool extends Construct implements IServingPool {
  public readonly poolName: string;
  public readonly role: string;
  public readonly instanceType: AcceleratedInstanceType;
  public readonly acceleratorsPerPod: number;
  public readonly serverProcessesPerPod: number;
  public readonly kvCacheBytesPerPod: number;
  public readonly hostMemoryGibPerPod: number;
  public readonly sharedMemoryGib: number;
  public readonly localDiskGibPerPod: number;
  public readonly usesNixl: boolean;
  /** Nodes (pods) per group. */
  public readonly nodesPerGroup: number;
  /** Data-parallel ranks per group (`--data-parallel-size`). */
  public readonly dataParallel: number;
  /** Data-parallel ranks per pod (`--data-parallel-size-local`). */
  public readonly dataParallelLocal: number;
  /** Expert-parallel size: dataParallel x tensorParallel. */
  public readonly expertParallelSize: number;
  /** The all-to-all backend in use. */
  public readonly allToAllBackend: AllToAllBackend;
  /** How ranks take requests. */
  public readonly endpoints: DataParallelEndpoints;
  /** HTTP ports of each serving pod (one per local rank, or 8000 alone). */
  public readonly httpPorts: number[];
  /** Warnings with stable ids. */
  public readonly warnings: string[] = [];
  /** @internal The resolved plan (used by DisaggregatedInference for the router configuration). */
  public readonly _plan: PoolPlan;
  /**
   * @internal The labels of the pods that serve HTTP: every pod with per-rank endpoints, the group
   * leaders with a single endpoint (used by DisaggregatedInference for its InferencePool).
   */
  public readonly _servingSelector: Record<string, string>;
  private readonly extras: PoolExtras;

  constructor(scope: Construct, id: string, props: ExpertParallelPoolProps) {
    super(scope, id);
    const where = `ExpertParallelPool '${this.node.path}'`;
    const role = props.role ?? PoolRole.SERVE;
    const defaultName = `${props.model.name.replace(/\./g, '-')}${role === PoolRole.SERVE ? '' : `-${role.name}`}`;
    const resolved = resolveModel(where, props, defaultName, [props.instanceType], 50);
    const model = resolved.model;
    const type = props.instanceType;
    const namespace = props.namespace ?? Chart.of(this).namespace;
    // Set only by a DisaggregatedInference that creates the pool (symbol keys: not in the jsii API).
    const hidden: HiddenPoolProps = props as ExpertParallelPoolProps & HiddenPoolProps;
    // Errors name pool fields plainly here; DisaggregatedInference prefixes them with its prop.
    const fieldPrefix = hidden[FIELD_PREFIX] ?? '';
    const field = (f: string) => (fieldPrefix ? `${fieldPrefix}.${f}` : f);
    if (type.isNeuron) {
      // This pool is CUDA vLLM's data-parallel expert parallelism (all-to-all backends, per-rank ports);
      // vLLM Neuron configures expert parallelism differently (`neuron_config.ep_degree`, features guide:
      // https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/guides/features-guide.html).
      throw new Error(`${where}: '${field('instanceType')}' (${type.name}) is a Trainium type, and ExpertParallelPool builds CUDA vLLM's ` +
        'expert parallelism; serve the MoE model on Trainium with DisaggregatedInference \'prefill\' / \'decode\' pools (tensor parallelism), ' +
        'or use a GPU instance type');
    }
    if (!model.isMoe) {
      throw new Error(`${where}: 'model' (${model.name}) is a dense model: expert parallelism needs routed experts; ` +
        'serve it with DisaggregatedInference pools (tensor parallelism) or pick an MoE model');
    }
    const perNode = type.acceleratorCount;
    const tp = props.tensorParallel ?? 1;
    if (!(Number.isInteger(tp) && tp >= 1 && perNode % tp === 0)) {
      throw new Error(`${where}: '${field('tensorParallel')}' (${tp}) must be a positive integer dividing the ${perNode} accelerators of one ${type.name}; use 1 for data-parallel attention`);
    }
    const redundant = props.redundantExperts ?? 0;
    if (!(Number.isInteger(redundant) && redundant >= 0)) {
      throw new Error(`${where}: '${field('redundantExperts')}' (${redundant}) must be an integer >= 0; use 0 without EPLB`);
    }
    const eplb = props.expertLoadBalancing ?? redundant > 0;
    if (props.kvLoadFailurePolicy !== undefined && role !== PoolRole.DECODE && hidden[INSTANCE] === undefined) {
      throw new Error(`${where}: 'kvLoadFailurePolicy' (${props.kvLoadFailurePolicy.value}) applies to a pool that pulls KV cache, the decode role, ` +
        `not '${role.name}'; remove it or set role: PoolRole.DECODE`);
    }
    if (redundant > 0 && !eplb) {
      throw new Error(`${where}: '${field('redundantExperts')}' (${redundant}) only applies with expert load balancing; set expertLoadBalancing: true or redundantExperts: 0`);
    }
    if (props.autoscaling !== undefined && hidden[INSTANCE] === undefined) {
      throw new Error(`${where}: '${field('autoscaling')}' scales on the SLO pressure that the disagg router computes, and a stand-alone ` +
        'ExpertParallelPool has no router; use the pool as a side of a DisaggregatedInference (prefillExpertParallel / decodeExpertParallel) ' +
        "with 'slo' there, or remove 'autoscaling' and size the pool with 'replicas'");
    }
    const maxOutputTokens = props.maxOutputTokens;
    if (maxOutputTokens !== undefined && !(Number.isInteger(maxOutputTokens) && maxOutputTokens >= 1)) {
      throw new Error(`${where}: 'maxOutputTokens' (${maxOutputTokens}) must be a positive whole number of tokens`);
    }
    const replicas = props.replicas ?? 1;
    const local = perNode / tp;
    let nodes = props.nodesPerGroup;
    if (nodes !== undefined && !(Number.isInteger(nodes) && nodes >= 1)) {
      throw new Error(`${where}: '${field('nodesPerGroup')}' (${nodes}) must be a positive integer`);
    }
    if (props.dataParallel !== undefined) {
      const dp = props.dataParallel;
      if (nodes === undefined && Number.isInteger(dp) && dp > 0 && (dp * tp) % perNode === 0) {
        nodes = (dp * tp) / perNode;
      }
      if (nodes === undefined || dp * tp !== nodes * perNode) {
        const n = nodes ?? Math.max(1, Math.round((dp * tp) / perNode));
        throw new Error(`${where}: '${field('dataParallel')}' (${dp}) x tensorParallel ${tp} must equal nodesPerGroup ${n} x ${perNode} accelerators of one ${type.name} ` +
          `(every accelerator of the group is one rank's); use dataParallel ${(n * perNode) / tp}`);
      }
    }
    const options = {
      instanceType: type,
      replicas,
      tensorParallel: tp,
      gpuMemoryUtilization: props.gpuMemoryUtilization,
      efaInterfaces: props.efaInterfaces,
      nodePoolRole: props.nodePoolRole,
      extraArgs: props.extraArgs,
    };
    const inputs: PoolPlanInputs = {
      where,
      model,
      maxContext: resolved.maxContext,
      weightPrecision: resolved.weightPrecision,
      kvCachePrecision: resolved.kvCachePrecision,
      kvBlockSize: resolved.kvBlockSize,
    };
    const roleName = role.name as 'serve' | 'prefill' | 'decode';
    const planFor = (n: number) =>
      planPool(roleName, options, inputs, { dataParallel: (n * perNode) / tp, redundantExperts: redundant }, fieldPrefix);
    let plan: PoolPlan | undefined;
    if (nodes !== undefined) {
      plan = planFor(nodes);
    } else {
      let last: Error | undefined;
      for (let n = 1; n <= MAX_AUTO_NODES && plan === undefined; n++) {
        try {
          plan = planFor(n);
          nodes = n;
        } catch (e) {
          last = e as Error;
        }
      }
      if (plan === undefined) {
        throw new Error(`${last!.message}\n(no group of 1 to ${MAX_AUTO_NODES} nodes fits; set '${field('nodesPerGroup')}' and read the problems above)`);
      }
    }
    this._plan = plan;
    this.nodesPerGroup = nodes!;
    this.dataParallel = plan.parallelism.dataParallel;
    this.dataParallelLocal = local;
    this.expertParallelSize = plan.parallelism.expertParallelSize;

    const endpoints = props.endpoints ?? DataParallelEndpoints.PER_RANK;
    if (endpoints === DataParallelEndpoints.PER_RANK && local > 8) {
      throw new Error(`${where}: 'endpoints' (per-rank) gives ${local} ports per pod, more than the 8 target ports of an InferencePool; ` +
        'use tensorParallel >= 2 or DataParallelEndpoints.SINGLE');
    }
    // Per rank, pod i configures KV events on PORTS.kvEvents - START (START = i x local ranks) so that
    // vLLM's rank offset lands every pod's rank j on PORTS.kvEvents + j (see epScript): START must
    // stay below that port.
    const lastStart = (nodes! - 1) * local;
    if (endpoints === DataParallelEndpoints.PER_RANK && lastStart >= PORTS.kvEvents) {
      throw new Error(`${where}: 'endpoints' (per-rank) with ${nodes} nodes of ${local} ranks starts the last pod at data-parallel rank ${lastStart}, ` +
        `but per-rank KV events need start ranks below ${PORTS.kvEvents}; use DataParallelEndpoints.SINGLE or fewer nodes per group`);
    }
    this.endpoints = endpoints;
    this.httpPorts = endpoints === DataParallelEndpoints.PER_RANK
      ? Array.from({ length: local }, (_, r) => PORTS.http + r)
      : [PORTS.http];
    this.serverProcessesPerPod = endpoints === DataParallelEndpoints.PER_RANK ? local : 1;

    this.allToAllBackend = props.allToAllBackend ?? AllToAllBackend.forInstanceType(type);
    if (this.allToAllBackend.needsGpuInitiatedRdma && type.supportsEfa && this.nodesPerGroup > 1) {
      this.warn('disagg:deepEpOnEfa', `all-to-all backend ${this.allToAllBackend.name} needs GPU-initiated RDMA (IBGDA) between nodes, which EFA ` +
        `on ${type.name} does not offer; use AllToAllBackend.ALLGATHER_REDUCESCATTER (NCCL over EFA)`);
    }

    // KV transfer for a prefill or decode role.
    this.usesNixl = role !== PoolRole.SERVE;
    const efa = type.supportsEfa && plan.efaInterfacesPerPod > 0;
    const transfer = hidden[NIXL_BACKEND]
      ?? (this.usesNixl ? resolveNixl(props.kvTransfer ?? KvTransfer.AUTO, efa, type, where) : (efa ? 'LIBFABRIC' : 'UCX'));
    if (this.usesNixl && transfer === 'UCX' && hidden[NIXL_BACKEND] === undefined) {
      this.warn('disagg:tcpKvTransfer', `KV cache moves over NIXL/UCX on TCP: ${type.name} has no EFA`);
    }

    this.role = role.name;
    this.poolName = resolved.name;
    this.instanceType = type;
    this.acceleratorsPerPod = plan.layout.acceleratorsPerPod;
    this.kvCacheBytesPerPod = plan.plan.kvCacheBytesPerRank * plan.layout.acceleratorsPerPod;
    const ctx: WorkerContext = {
      instance: hidden[INSTANCE] ?? resolved.name,
      model,
      source: resolved.source,
      servedModelName: resolved.servedModelName,
      image: props.image,
      imagePullPolicy: props.imagePullPolicy,
      serviceAccountName: props.serviceAccountName ?? resolved.name,
      maxContext: resolved.maxContext,
      weightPrecision: resolved.weightPrecision,
      kvCachePrecision: resolved.kvCachePrecision,
      prequantizedCheckpoint: resolved.prequantized,
      kvBlockSize: resolved.kvBlockSize,
      nixlBackend: transfer,
      modelCache: resolved.modelCache,
      runAsNonRoot: props.runWorkersAsNonRoot ?? false,
      efaHugePages: props.efaHugePages ?? true,
      vllmVersion: resolveVllmVersion(props),
      startupSeconds: resolved.startupSeconds,
      zone: props.zone,
      drainTpotSeconds: hidden[DRAIN_TPOT],
      maxOutputTokens,
    };
    const checkpointGib = resolved.checkpointBytes / 2 ** 30;
    const capacity = podCapacity(plan, ctx, checkpointGib);
    this.hostMemoryGibPerPod = capacity.hostMemoryGib;
    this.sharedMemoryGib = capacity.sharedMemoryGib;
    this.localDiskGibPerPod = capacity.localDiskGib;
    this.extras = new PoolExtras(`pool '${this.node.path}'`);

    const meta = (objectName: string, labels: Record<string, string>, extra?: Partial<k8s.ObjectMeta>): k8s.ObjectMeta => strip({
      name: objectName, namespace, labels: { ...labels, [APP_PART_OF]: 'disagg' }, ...extra,
    });
    const labels = componentLabels(ctx.instance, role === PoolRole.SERVE ? 'serve' : role.name);
    if (props.serviceAccountName === undefined) {
      workloadServiceAccount(this, 'ServiceAccount', {
        name: resolved.name, namespace, labels, annotations: props.serviceAccountAnnotations, reads: resolved.source,
      });
    }
    const shape: EpShape = {
      ctx,
      plan,
      resolved,
      labels,
      checkpointGib,
      extras: this.extras,
      endpoints,
      tp,
      local,
      dp: this.dataParallel,
      eplb,
      redundant,
      backend: this.allToAllBackend,
      // A decode pool says what a failed KV pull does: the deployment's policy inside a
      // DisaggregatedInference, else its own (FAIL unless given).
      nixl: this.usesNixl ? kvTransferConfig(transfer, ctx.vllmVersion, role.name, role === PoolRole.DECODE
        ? hidden[KV_LOAD_FAILURE_POLICY] ?? (props.kvLoadFailurePolicy ?? KvLoadFailurePolicy.FAIL).value
        : undefined) : undefined,
      ports: this.httpPorts,
    };
    // One group of nodesPerGroup pods per replica: every rank of a group joins one collective.
    const workload = addLeaderWorkerSet(this, 'Workload', {
      metadata: meta(resolved.name, labels),
      // An autoscaler (DisaggregatedInference) owns the group count: left out of the manifest.
      replicas: props.autoscaling !== undefined ? undefined : replicas,
      size: this.nodesPerGroup,
      leaderTemplate: () => epPodTemplate(shape, 'leader'),
      workerTemplate: () => epPodTemplate(shape, 'worker'),
    });
    if (needsComputeDomain(type)) {
      // p6e-gb200: the ranks claim the pool's IMEX channel (all-to-all over Multi-Node NVLink), one clique per group.
      const claimTemplate = addComputeDomain(this, 'ComputeDomain', meta(resolved.name, labels));
      claimComputeDomain(workload, ['/spec/leaderWorkerTemplate/leaderTemplate', '/spec/leaderWorkerTemplate/workerTemplate'],
        claimTemplate, labels, this.nodesPerGroup > 1);
    }
    const selector = endpoints === DataParallelEndpoints.PER_RANK ? labels : { ...labels, [LWS_WORKER_INDEX]: '0' };
    this._servingSelector = selector;
    new k8s.KubeService(this, 'Service', {
      metadata: meta(resolved.name, labels),
      spec: {
        clusterIp: 'None',
        selector,
        ports: this.httpPorts.map((port, r) => ({ name: portName(endpoints, r), port, targetPort: k8s.IntOrString.fromNumber(port), protocol: 'TCP' })),
      },
    });
    new k8s.KubePodDisruptionBudget(this, 'Budget', {
      metadata: meta(resolved.name, labels),
      spec: { maxUnavailable: k8s.IntOrString.fromNumber(1), selector: { matchLabels: { [APP_INSTANCE]: ctx.instance, ...labels } } },
    });
    if (props.inferencePool !== undefined) {
      addGatewayObjects(this, {
        exposure: GatewayExposure.inferencePool(props.inferencePool),
        name: resolved.name,
        namespace,
        routerService: resolved.name,
        decodeSelector: selector,
        labels: componentLabels(ctx.instance, 'gateway'),
        poolName: resolved.name,
        targetPorts: this.httpPorts,
      });
    }
    if (hidden[INSTANCE] === undefined) {
      // Standalone: clients reach the API ports; Ray, torch.distributed and NIXL only the pool's own pods.
      addDeploymentPolicies(this, {
        isolation: props.networkIsolation ?? NetworkIsolation.workersBehindRouter(),
        instance: ctx.instance,
        namespace,
        workerHttpPorts: this.httpPorts,
        inferencePoolGateway: props.inferencePool !== undefined ? { namespace: props.inferencePool.gateway.namespace ?? namespace } : undefined,
      });
    }
  }

  public addEnv(name: string, value: string): void {
    this.extras.addEnv(name, value);
  }

  public addArgs(...args: string[]): void {
    this.extras.addArgs(args);
  }

  public attachKvCache(attachment: KvCacheAttachment): void {
    this.extras.attachKvCache(attachment);
  }

  private warn(id: string, message: string): void {
    const text = `${id}: ${message}`;
    this.warnings.push(text);
    this.node.addMetadata('disagg:warning', text);
  }
}

function resolveNixl(transfer: KvTransfer, efa: boolean, type: AcceleratedInstanceType, where: string): string {
  if (transfer === KvTransfer.NIXL_LIBFABRIC && !efa) {
    throw new Error(`${where}: 'kvTransfer' (nixl-libfabric) needs EFA, but ${type.name} has none; use an EFA instance type or KvTransfer.NIXL_UCX`);
  }
  return transfer.nixlBackend ?? (efa ? 'LIBFABRIC' : 'UCX');
}

function portName(endpoints: DataParallelEndpoints, rank: number): string {
  return endpoints === DataParallelEndpoints.PER_RANK ? `http-${rank}` : 'http';
}

/** Everything an expert-parallel pod template needs (internal). */
interface EpShape {
  readonly ctx: WorkerContext;
  readonly plan: PoolPlan;
  readonly resolved: ResolvedModel;
  readonly labels: Record<string, string>;
  readonly checkpointGib: number;
  readonly extras: PoolExtras;
  readonly endpoints: DataParallelEndpoints;
  readonly tp: number;
  readonly local: number;
  readonly dp: number;
  readonly eplb: boolean;
  readonly redundant: number;
  readonly backend: AllToAllBackend;
  readonly nixl?: Record<string, unknown>;
  readonly ports: number[];
}

/** The vLLM arguments every process of the group shares (the model first: `vllm serve "$@"`). */
function epArgs(s: EpShape): string[] {
  const args = [
    s.ctx.source.uri,
    '--served-model-name', s.ctx.servedModelName,
    '--tensor-parallel-size', String(s.tp),
    '--enable-expert-parallel',
    '--data-parallel-size', String(s.dp),
    '--data-parallel-address', '$(LWS_LEADER_ADDRESS)',
    '--data-parallel-rpc-port', String(DP_RPC_PORT),
  ];
  if (s.endpoints === DataParallelEndpoints.SINGLE) {
    args.push('--data-parallel-size-local', String(s.local));
  }
  args.push('--all2all-backend', s.backend.name);
  if (s.eplb) {
    // vLLM's EPLB settings live in --eplb-config; window and interval keep vLLM's defaults.
    args.push('--enable-eplb', '--eplb-config', JSON.stringify({ num_redundant_experts: s.redundant }));
  }
  args.push(...modelArgs(s.ctx, s.plan));
  args.push(...s.extras.kvTransferArgs(s.nixl));
  if (s.endpoints === DataParallelEndpoints.SINGLE) {
    args.push('--kv-events-config', JSON.stringify(kvEventsConfig(s.ctx.servedModelName)), '--port', String(PORTS.http));
  }
  return [...args, ...(s.plan.options.extraArgs ?? []), ...s.extras.args];
}

/** Single-quotes a value for bash. */
function shellQuote(value: string): string {
  return `'${value.replace(/'/g, '\'\\\'\'')}'`;
}

/**
 * The bash script that starts a pod's vLLM processes; "$@" holds {@link epArgs}. Kubernetes expands only
 * `$(NAME)` of defined variables in it; the shell's `$((...))` arithmetic passes through unchanged.
 */
function epScript(s: EpShape, kind: 'leader' | 'worker'): string {
  const start = `START=$((LWS_WORKER_INDEX * ${s.local}))`;
  if (s.endpoints === DataParallelEndpoints.SINGLE) {
    return [
      start,
      `exec vllm serve "$@"${kind === 'worker' ? ' --headless' : ''} --data-parallel-start-rank "$START"`,
    ].join('\n');
  }
  // One API server per local rank on its own GPUs and port. vLLM binds the KV-events endpoint's port
  // plus the global data-parallel rank (vllm/distributed/kv_events.py, offset_endpoint_port, given
  // parallel_config.data_parallel_index); configuring 5557 - START makes local rank j of every pod
  // publish on 5557 + j, next to its HTTP port 8000 + j, which is what the router derives
  // (engine/src/servers/router/router_config.h, dns_kv_events_port). The topic names the rank's HTTP endpoint.
  const events = JSON.stringify({ ...kvEventsConfig('@MODEL@'), endpoint: 'tcp://*:%s', replay_endpoint: 'tcp://*:%s', topic: 'kv@%s:%s@%s' });
  return [
    start,
    `for LOCAL in $(seq 0 ${s.local - 1}); do`,
    '  RANK=$((START + LOCAL))',
    `  PORT=$((${PORTS.http} + LOCAL))`,
    `  GPUS=$(seq -s, $((LOCAL * ${s.tp})) $((LOCAL * ${s.tp} + ${s.tp - 1})))`,
    `  EVENTS=$(printf ${shellQuote(events)} "$((${PORTS.kvEvents} - START))" "$((${PORTS.kvEventsReplay} - START))" "$POD_IP" "$PORT" `
      + `${shellQuote(s.ctx.servedModelName)})`,
    '  CUDA_VISIBLE_DEVICES="$GPUS" vllm serve "$@" --data-parallel-rank "$RANK" --port "$PORT" --kv-events-config "$EVENTS" &',
    'done',
    // A rank that exits breaks the group's collectives: end the pod so the LWS restarts the group.
    'wait -n',
    'exit 1',
  ].join('\n');
}

/**
 * The probes of a serving pod. With a single endpoint, the tensor-parallel worker's on port 8000. Per
 * rank, the pod is ready only when every local rank's API server answers /health: a Ready pod is what
 * the headless Service's DNS and an InferencePool's endpoint picker offer, with every target port, so
 * a rank still loading must keep its pod out. Startup and liveness stay on rank 0 (a rank that exits
 * ends the pod through epScript's `wait -n`).
 */
function epProbes(s: EpShape): Pick<k8s.Container, 'startupProbe' | 'readinessProbe' | 'livenessProbe'> {
  const probes = workerProbes(s.ctx, portName(s.endpoints, 0));
  if (s.endpoints === DataParallelEndpoints.SINGLE) {
    return probes;
  }
  // bash's /dev/tcp: the image needs no HTTP client. Each rank answers within the probe's timeout.
  const check = [
    `for PORT in ${s.ports.join(' ')}; do`,
    '  exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1',
    '  printf \'GET /health HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n\' >&3',
    '  read -r -t 2 VERSION CODE REST <&3',
    '  exec 3<&-',
    '  [ "$CODE" = 200 ] || { echo "rank on port $PORT not ready: ${CODE:-no answer}"; exit 1; }',
    'done',
  ].join('\n');
  return {
    ...probes,
    readinessProbe: { exec: { command: ['/bin/bash', '-c', check] }, periodSeconds: 10, failureThreshold: 3, timeoutSeconds: 5 },
  };
}

/** The leader or worker pod template of an expert-parallel group. */
function epPodTemplate(s: EpShape, kind: 'leader' | 'worker'): k8s.PodTemplateSpec {
  const serves = s.endpoints === DataParallelEndpoints.PER_RANK || kind === 'leader';
  const template = workerPodTemplate(s.ctx, s.plan, serves ? 'leader' : 'worker', s.labels, s.checkpointGib, s.extras);
  const spec = template.spec!;
  const [vllm, ...others] = spec.containers;
  // The group's own command, arguments, ports and probes replace the tensor-parallel worker's.
  const { startupProbe: _startup, readinessProbe: _readiness, livenessProbe: _liveness, ...base } = vllm;
  const ports: k8s.ContainerPort[] = serves ? s.ports.map((port, r) => ({ name: portName(s.endpoints, r), containerPort: port, protocol: 'TCP' })) : [];
  if (s.endpoints === DataParallelEndpoints.SINGLE && kind === 'leader') {
    ports.push({ name: 'kv-events', containerPort: PORTS.kvEvents, protocol: 'TCP' });
    ports.push({ name: 'kv-replay', containerPort: PORTS.kvEventsReplay, protocol: 'TCP' });
  }
  if (s.endpoints === DataParallelEndpoints.PER_RANK) {
    // Local rank j publishes KV events on 5557 + j (epScript), which the router subscribes to.
    ports.push(...s.ports.map((_, r) => ({ name: `kv-events-${r}`, containerPort: PORTS.kvEvents + r, protocol: 'TCP' })));
    ports.push(...s.ports.map((_, r) => ({ name: `kv-replay-${r}`, containerPort: PORTS.kvEventsReplay + r, protocol: 'TCP' })));
  }
  const env = (vllm.env ?? []).filter(e => !['VLLM_NIXL_SIDE_CHANNEL_PORT', 'VLLM_HOST_IP'].includes(e.name));
  env.push(
    { name: 'VLLM_NIXL_SIDE_CHANNEL_PORT', value: String(EP_NIXL_SIDE_CHANNEL_BASE) },
    // Keep torch.distributed's and NCCL's bootstrap on the pod network; NCCL's data path takes EFA
    // through the libfabric plugin (vLLM's EP guide sets GLOO_SOCKET_IFNAME for the same reason on IB).
    { name: 'GLOO_SOCKET_IFNAME', value: 'eth0' },
    { name: 'NCCL_SOCKET_IFNAME', value: 'eth0' },
  );
  const container: k8s.Container = {
    ...base,
    command: ['/bin/bash', '-c', epScript(s, kind), 'vllm'],
    args: epArgs(s),
    ports,
    ...(serves ? epProbes(s) : {}),
    // Every rank's server of the pod drains (or, on a headless pod, the leader's).
    lifecycle: serves ? preStopHook(workerDrain(s.ctx, s.plan), s.ports)
      : preStopHook(workerDrain(s.ctx, s.plan), [PORTS.http], '$LWS_LEADER_ADDRESS'),
    env: s.extras.mergeEnv(env),
  };
  return { ...template, spec: { ...spec, containers: [container, ...others] } };
}
