import { Chart } from 'cdk8s';
import { k8s } from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import { AcceleratedInstanceType, Precision } from '../catalog';
import { KvTierSizes, plannerConfig, planSync, SIZING_SIMULATED_REQUESTS } from '../engine';
import { ParallelismRules } from '../sizing';
import { ApiKeySecret } from './api-key-secret';
import { Autoscaler } from './autoscaler';
import { DataParallelEndpoints } from './data-parallel-endpoints';
import { ExpertParallelPool, ExpertParallelPoolOptions, ExpertParallelPoolProps } from './expert-parallel-pool';
import { GatewayExposure } from './gateway-exposure';
import { InferencePoolOptions } from './inference-pool-options';
import { KvLoadFailurePolicy } from './kv-load-failure-policy';
import { KvTier } from './kv-tier';
import { KvTransfer } from './kv-transfer';
import { ModelDeploymentOptions } from './model-deployment-options';
import { Monitoring } from './monitoring';
import { NetworkIsolation } from './network-isolation';
import { PoolAutoscaling } from './pool-autoscaling';
import { PoolRole } from './pool-role';
import { PoolSizing, ServingSlo } from './pool-sizing';
import {
  ResolvedAutoscaling, RouterAutoscaling, addAutoscaler, checkSlo, checkSloReachable, decodeCapacity, prefillCapacity, resolveAutoscaling,
} from './private/autoscaling';
import { DEFAULT_DRAIN_TPOT_SECONDS, DRAIN_DNS_SECONDS, DRAIN_MARGIN_SECONDS } from './private/drain';
import { addGatewayObjects } from './private/gateway-objects';
import { DRAIN_TPOT, FIELD_PREFIX, HiddenPoolProps, INSTANCE, KV_LOAD_FAILURE_POLICY, NIXL_BACKEND } from './private/hidden-props';
import { APP_PART_OF, PORTS, componentLabels } from './private/labels';
import { resolveModel, resolveVllmVersion, strip } from './private/model-inputs';
import { addDeploymentMonitoring } from './private/monitoring-objects';
import { MonitoredPool } from './private/monitoring-queries';
import { addDeploymentPolicies } from './private/network-policies';
import { NEURON_DEVICES_PER_POD, NEURON_DOCS, neuronDisaggregationProblem } from './private/neuron';
import { planPool } from './private/pool-plan';
import { Router } from './private/router';
import { planRouter, ROUTER_API_KEYS_DIR, RouterPlan } from './private/router-config';
import { workloadServiceAccount } from './private/service-account';
import { WorkerContext, servingSelector } from './private/worker-pod';
import { WorkerPool } from './private/worker-pool';
import { RouterPolicy } from './router-policy';
import { RouterTokenizer } from './router-tokenizer';
import { IServingPool } from './serving-pool';

/**
 * Props of {@link DisaggregatedInference}.
 */
export interface DisaggregatedInferenceProps extends ModelDeploymentOptions {
  /**
   * Image of the router pods (the slim engine image without vLLM, `images/engine-slim`).
   * @default - `image`
   */
  readonly routerImage?: string;
  /**
   * The prefill pool (tensor parallel): computes prompts' KV cache and hands it to decode.
   * @default - none; then `prefillExpertParallel` is required
   */
  readonly prefill?: InferencePoolOptions;
  /**
   * The decode pool (tensor parallel): receives KV cache and generates tokens.
   * @default - none; then `decodeExpertParallel` is required
   */
  readonly decode?: InferencePoolOptions;
  /**
   * An expert-parallel prefill pool (MoE models) instead of `prefill`: an `ExpertParallelPool` with the
   * prefill role, sharing this deployment's model, image, ServiceAccount and KV transfer.
   * @default - none; then `prefill` is required
   */
  readonly prefillExpertParallel?: ExpertParallelPoolOptions;
  /**
   * An expert-parallel decode pool (MoE models) instead of `decode`. Its endpoints default to
   * `DataParallelEndpoints.PER_RANK`, as a standalone pool's: the router discovers every rank's port of
   * every pod (8000, 8001, ...), subscribes to each rank's KV events and routes to each rank's KV cache.
   * `DataParallelEndpoints.SINGLE` gives one API server per group, which balances over its ranks by
   * queue length, and the router sees only rank 0's cache.
   * @default - none; then `decode` is required
   */
  readonly decodeExpertParallel?: ExpertParallelPoolOptions;
  /**
   * What the decode pool does when a prompt's KV cache cannot be pulled from the prefill pool (vLLM's
   * `kv_load_failure_policy`, written into the decode pool's `--kv-transfer-config`): fail the request,
   * which the router then retries decode-only without the transfer parameters, or recompute the missing
   * blocks on the decode pod. Not set on Trainium pools (vLLM Neuron's connector).
   * @default KvLoadFailurePolicy.FAIL
   * @see https://docs.vllm.ai/en/latest/api/vllm/config/kv_transfer/
   */
  readonly kvLoadFailurePolicy?: KvLoadFailurePolicy;
  /**
   * How the router picks endpoints.
   * @default RouterPolicy.KV_AWARE
   */
  readonly routerPolicy?: RouterPolicy;
  /**
   * Uncached prompt tokens from which the router sends a request through the prefill pool; shorter
   * (or mostly cached) prompts are prefilled on the decode pod itself.
   * @default 512
   */
  readonly disaggregationThresholdTokens?: number;
  /**
   * Router replicas.
   * @default 2
   */
  readonly routerReplicas?: number;
  /**
   * API keys the router asks clients for (`Authorization: Bearer <key>`), from a Secret you create; see
   * {@link ApiKeySecret}. Give them to any deployment a gateway exposes beyond its own teams.
   * @default - none: whoever reaches the router uses the model (a warning when the gateway is internet-facing)
   */
  readonly apiKeys?: ApiKeySecret;
  /**
   * Where the router gets the served model's tokenizer and chat template, to route on the same token
   * ids as the KV events vLLM publishes (precise prefix routing). Without them, or when they fail to
   * load, it routes on its own routing history (approximate) and says so in its log and in
   * `disagg_router_prefix_source_info`.
   * @default RouterTokenizer.fromModelSource(): downloaded by an init container from the workers' model source
   */
  readonly routerTokenizer?: RouterTokenizer;
  /**
   * How clients reach the router from outside the cluster.
   * @default GatewayExposure.none()
   */
  readonly gateway?: GatewayExposure;
  /**
   * Size the prefill and decode pools from the simulation-based planner at synth time: it sets
   * `replicas` and `tensorParallel` of `prefill` and `decode` (leave both unset there) to the split of
   * at most `maxAccelerators` with the highest goodput per accelerator-dollar under the SLO. Opt-in:
   * only this needs the engine addon, and synthesis waits for the search (it is deterministic).
   * @default - no sizing: the pools' own `replicas` and `tensorParallel`
   */
  readonly sizeFor?: PoolSizing;
  /**
   * The deployment's latency targets. The router computes each pool's SLO pressure against them
   * (predicted TTFT / `ttftSeconds` for prefill; predicted TPOT / `tpotSeconds`, or KV use, for
   * decode), which the pools' `autoscaling` scales on; `tpotSeconds` also sizes how long a leaving
   * worker may take to finish its streams (`maxOutputTokens`). An SLO that an idle replica cannot
   * meet by the sizing model (src/sizing) is an error. `targetShare` is the planner's (`sizeFor`) and,
   * with `monitoring`, the objective of the SLO burn-rate alerts (error budget 1 - targetShare).
   * @default - none: no autoscaling; the router's signals use 2 s TTFT and 0.1 s TPOT
   */
  readonly slo?: ServingSlo;
  /**
   * What scales the pools that have `autoscaling`.
   * @default Autoscaler.KEDA
   */
  readonly autoscaler?: Autoscaler;
  /**
   * Scraping, alerts and dashboards for the deployment: `Monitoring.prometheusOperator()` emits a
   * PodMonitor `<name>-workers` (every vLLM API port of the prefill and decode pods), a ServiceMonitor
   * `<name>-router` (the router's Service, port `http`: also what `Autoscaler.HPA`'s metrics adapter
   * reads), a PrometheusRule `<name>` (SLO burn rate with `slo`, KV transfer failures, KV over TCP on EFA,
   * prefix hits below prediction, a herding endpoint, an autoscaler at its maximum, a worker failing
   * health) and Grafana dashboards as ConfigMaps (also in `dashboards`). docs/monitoring.md has the
   * metrics and a runbook per alert.
   * @default Monitoring.none()
   * @see https://prometheus-operator.dev/docs/developer/getting-started/
   */
  readonly monitoring?: Monitoring;
}

/**
 * Disaggregated prefill/decode serving of one model with vLLM: a prefill pool and a decode pool that move
 * KV cache over NIXL (libfabric on EFA), behind the project's KV-aware router.
 *
 * Emits a ServiceAccount; per pool a Deployment (a LeaderWorkerSet when a replica spans nodes, or an
 * `ExpertParallelPool` for `prefillExpertParallel` / `decodeExpertParallel`), a headless Service for
 * endpoint discovery and a PodDisruptionBudget; the router's ConfigMap, Deployment, Service and
 * PodDisruptionBudget; a KEDA ScaledObject (or an autoscaling/v2 HPA) per pool with `autoscaling`; and the
 * Gateway API objects `gateway` asks for. Worker pods drain before they exit (a preStop hook waits for
 * the router to drop them and for their requests to finish, within a grace period sized from `slo`). Pools are sized and checked with
 * src/sizing when constructed: every error names the prop, the value and a fix.
 *
 * Warnings (environmental, not fatal) are in `warnings` and in the construct metadata under
 * `disagg:warning`; cdk8s has no Annotations facility.
 */
export class DisaggregatedInference extends Construct {
  /** Base name of the objects. */
  public readonly name: string;
  /** The prefill pool's headless Service name. */
  public readonly prefillServiceName: string;
  /** The decode pool's headless Service name. */
  public readonly decodeServiceName: string;
  /** The router's Service name (port 80, or `routerPort`). */
  public readonly routerServiceName: string;
  /**
   * The router's JSON configuration, as written into its ConfigMap: the `router`, `policy` and `pools`
   * sections of the engine configuration (engine/schema/engine-config.schema.json) that
   * `disagg-engine router` reads.
   */
  public readonly routerConfig: string;
  /**
   * @internal The router's configuration and the pools it routes to, typed (`disagg local` reads it
   * instead of parsing `routerConfig`).
   */
  public readonly _router: RouterPlan;
  /**
   * @internal Each autoscaled pool's scaling rule with its defaults applied (what its ScaledObject or
   * HPA carries; `disagg local --autoscale` applies the same rule to sim-workers).
   */
  public readonly _autoscaling: Partial<Record<'prefill' | 'decode', ResolvedAutoscaling>>;
  /** The NIXL backend in use: 'LIBFABRIC' or 'UCX'. */
  public readonly nixlBackend: string;
  /** Whether the prefill pool is a LeaderWorkerSet (a replica spans nodes). */
  public readonly prefillIsMultiNode: boolean;
  /** Whether the decode pool is a LeaderWorkerSet. */
  public readonly decodeIsMultiNode: boolean;
  /** Tensor-parallel size of the prefill pool (resolved). */
  public readonly prefillTensorParallel: number;
  /** Tensor-parallel size of the decode pool (resolved). */
  public readonly decodeTensorParallel: number;
  /**
   * With `sizeFor`: the planned goodput (requests/s meeting the SLO) of the chosen split.
   * @default - undefined without `sizeFor`
   */
  public readonly sizedGoodputPerSecond?: number;
  /** Warnings with stable ids, e.g. 'disagg:tcpKvTransfer: ...'. */
  public readonly warnings: string[] = [];
  /** The prefill pool: add env, arguments or a KV cache (`TieredKvCache.attachTo`). */
  public readonly prefill: IServingPool;
  /** The decode pool: add env, arguments or a KV cache. */
  public readonly decode: IServingPool;
  /**
   * The Grafana dashboards `monitoring` asks for, as JSON models by slug ('slo', 'phases', 'kv-transfer',
   * 'prefix-cache', 'autoscaler', and 'cost' with `instancePricePerHour`): the data of the dashboard
   * ConfigMaps, to write as files for a Grafana that does not load ConfigMaps. Empty without dashboards.
   */
  public readonly dashboards: { [slug: string]: string };

  constructor(scope: Construct, id: string, props: DisaggregatedInferenceProps) {
    super(scope, id);
    const where = `DisaggregatedInference '${this.node.path}'`;
    const poolTypes = [props.prefill, props.prefillExpertParallel, props.decode, props.decodeExpertParallel]
      .flatMap(o => (o === undefined ? [] : [o.instanceType]));
    const resolved = resolveModel(where, props, props.model.name.replace(/\./g, '-'), poolTypes);
    const { name, model, weightPrecision, kvCachePrecision, maxContext, kvBlockSize, modelCache } = resolved;
    this.name = name;
    const namespace = props.namespace ?? Chart.of(this).namespace;
    const { threshold, routerReplicas, maxOutputTokens } = checkDeploymentProps(where, props, maxContext);

    // The two sides: which kind of pool each is, its autoscaling, its size (sizeFor) and plan.
    const sides = { prefill: sideOf(where, props, 'prefill'), decode: sideOf(where, props, 'decode') };
    const scaling = resolvePoolScaling(where, props, sides, namespace);
    this._autoscaling = scaling;
    checkVendors(where, {
      prefill: { type: (sides.prefill.options ?? sides.prefill.ep!).instanceType, field: sides.prefill.options ? 'prefill' : 'prefillExpertParallel' },
      decode: { type: (sides.decode.options ?? sides.decode.ep!).instanceType, field: sides.decode.options ? 'decode' : 'decodeExpertParallel' },
    });
    if (props.sizeFor) {
      const sized = sizePools(where, props.sizeFor, sides.prefill.options, sides.decode.options, resolved);
      sides.prefill.options = sized.prefill;
      sides.decode.options = sized.decode;
      this.sizedGoodputPerSecond = sized.goodputPerSecond;
    }
    // An autoscaled pool is planned (and starts) at its minimum; the autoscaler owns the count after.
    for (const role of ['prefill', 'decode'] as const) {
      const min = scaling[role]?.minReplicas;
      if (min !== undefined) {
        const side = sides[role];
        if (side.options) side.options = { ...side.options, replicas: min };
        if (side.ep) side.ep = { ...side.ep, replicas: min };
      }
    }
    if (scaling.decode && maxOutputTokens === undefined) this.warnLongDrain(props, maxContext);
    const inputs = { where, model, maxContext, weightPrecision, kvCachePrecision, kvBlockSize, prequantizedCheckpoint: resolved.prequantized };
    const planned: PlannedSides = {
      prefill: sides.prefill.options ? planPool('prefill', sides.prefill.options, inputs) : undefined,
      decode: sides.decode.options ? planPool('decode', sides.decode.options, inputs) : undefined,
    };
    this.nixlBackend = this.resolveNixlBackend(where, props, planned, sides);
    const neuron = (planned.prefill?.options.instanceType ?? sides.prefill.ep!.instanceType).isNeuron;
    if (neuron) {
      this.neuronWarnings(props, resolved.prequantized);
    }
    if (props.runWorkersAsNonRoot && modelCache.kind === 'host-path') {
      this.warn('disagg:nonRootHostPath', 'non-root workers cannot write a hostPath model cache that the kubelet creates root-owned; use ModelCache.podLocal() or pre-create the directory');
    }

    // The workers: their ServiceAccount (the router has its own, private/router.ts) and both pools.
    workloadServiceAccount(this, 'ServiceAccount', {
      name, namespace, labels: componentLabels(name, 'serving'), annotations: props.serviceAccountAnnotations, reads: resolved.source,
    });
    const ctx = this.workerContext(props, resolved, neuron);
    this.prefillServiceName = `${name}-prefill`;
    this.decodeServiceName = `${name}-decode`;
    const pools = {
      prefill: this.pool('prefill', props, sides, planned, ctx, namespace, scaling, resolved.checkpointBytes),
      decode: this.pool('decode', props, sides, planned, ctx, namespace, scaling, resolved.checkpointBytes),
    };
    this.prefill = pools.prefill;
    this.decode = pools.decode;
    const prefill = planOf(pools.prefill);
    const decode = planOf(pools.decode);
    this.prefillIsMultiNode = prefill.multiNode;
    this.decodeIsMultiNode = decode.multiNode;
    this.prefillTensorParallel = prefill.parallelism.tensorParallel;
    this.decodeTensorParallel = decode.parallelism.tensorParallel;
    if (props.slo) {
      checkSloReachable(where, props.slo, prefill, decode, threshold, maxContext);
    }

    // The router, the autoscalers on its pressure, the gateway and the network policies.
    const router = this.router(props, resolved, pools, namespace, scaling, threshold, routerReplicas, ctx.startupSeconds);
    this._router = router.plan;
    this.routerServiceName = router.serviceName;
    this.routerConfig = router.configJson;
    this.addAutoscalers(props, pools, scaling, namespace);
    this.expose(props, pools, namespace);
    this.dashboards = this.monitor(where, props, pools, scaling, namespace);
  }

  /** A decode pod's drain may run for a maxContext-long answer: say so when that is long. */
  private warnLongDrain(props: DisaggregatedInferenceProps, maxContext: number): void {
    // Scale-downs are routine here: a grace sized for a maxContext-long answer keeps a leaving pod's
    // node (and, under a Cluster Autoscaler, its scale-down) waiting that long for a stream that may exist.
    const tpot = props.slo?.tpotSeconds ?? DEFAULT_DRAIN_TPOT_SECONDS;
    const grace = Math.ceil(DRAIN_DNS_SECONDS + 1.5 * maxContext * tpot + DRAIN_MARGIN_SECONDS);
    if (grace > 3600) {
      this.warn('disagg:longDrain', `a leaving decode pod may take up to ${grace} s to finish its streams (terminationGracePeriodSeconds: ` +
        `a ${maxContext}-token answer, maxContext, at 1.5 x ${tpot} s per token), and each scale-down holds its node that long in the worst case; ` +
        "set 'maxOutputTokens' to the longest output your clients ask for (vLLM's max_tokens)");
    }
  }

  /** KV transfer: NIXL over libfabric needs EFA on both pools (and Neuron has nothing else). */
  private resolveNixlBackend(where: string, props: DisaggregatedInferenceProps, planned: PlannedSides, sides: Sides): string {
    const efaOf = (role: 'prefill' | 'decode'): { type: AcceleratedInstanceType; efa: number } => {
      const plan = planned[role];
      if (plan) return { type: plan.options.instanceType, efa: plan.efaInterfacesPerPod };
      const ep = sides[role].ep!;
      const efa = ep.efaInterfaces ?? ep.instanceType.efaInterfacesFor(ep.instanceType.acceleratorCount);
      return { type: ep.instanceType, efa: ep.instanceType.supportsEfa ? efa : 0 };
    };
    const efa = { prefill: efaOf('prefill'), decode: efaOf('decode') };
    const transfer = props.kvTransfer ?? KvTransfer.AUTO;
    const efaBoth = efa.prefill.type.supportsEfa && efa.decode.type.supportsEfa && efa.prefill.efa > 0 && efa.decode.efa > 0;
    if (transfer === KvTransfer.NIXL_LIBFABRIC && !efaBoth) {
      const lacking = (['prefill', 'decode'] as const).filter(r => efa[r].efa === 0).map(r => `${r} (${efa[r].type.name})`).join(' and ');
      throw new Error(`${where}: 'kvTransfer' (nixl-libfabric) needs EFA on both pools, but ${lacking} has none; ` +
        'use an EFA instance type or KvTransfer.NIXL_UCX');
    }
    const backend = transfer.nixlBackend ?? (efaBoth ? 'LIBFABRIC' : 'UCX');
    if (efa.prefill.type.isNeuron && backend !== 'LIBFABRIC') {
      // Neuron's P/D moves KV with NIXL over LIBFABRIC (EFA) only.
      const cause = transfer === KvTransfer.NIXL_UCX ? "'kvTransfer' (nixl-ucx)"
        : `${(['prefill', 'decode'] as const).filter(r => efa[r].efa === 0).map(r => `'${r}' (no EFA interfaces)`).join(' and ')}`;
      throw new Error(`${where}: ${cause}: vLLM Neuron moves KV cache between prefill and decode with NIXL over LIBFABRIC (EFA) only; ` +
        `use KvTransfer.AUTO or KvTransfer.NIXL_LIBFABRIC with EFA on both pools (${NEURON_DOCS.disaggregated})`);
    }
    if (backend === 'UCX') {
      this.warn('disagg:tcpKvTransfer', 'KV cache moves over NIXL/UCX on TCP: without EFA a long prompt\'s KV transfer can take longer than ' +
        'prefilling it on the decode pod; prefer EFA instance types for both pools');
    }
    return backend;
  }

  /** What every worker pod of both pools shares. */
  private workerContext(props: DisaggregatedInferenceProps, resolved: ReturnType<typeof resolveModel>, neuron: boolean): WorkerContext {
    return {
      instance: resolved.name,
      model: resolved.model,
      source: resolved.source,
      servedModelName: resolved.servedModelName,
      image: props.image,
      imagePullPolicy: props.imagePullPolicy,
      serviceAccountName: resolved.name,
      maxContext: resolved.maxContext,
      weightPrecision: resolved.weightPrecision,
      kvCachePrecision: resolved.kvCachePrecision,
      prequantizedCheckpoint: resolved.prequantized,
      kvBlockSize: resolved.kvBlockSize,
      nixlBackend: this.nixlBackend,
      kvLoadFailurePolicy: (props.kvLoadFailurePolicy ?? KvLoadFailurePolicy.FAIL).value,
      modelCache: resolved.modelCache,
      runAsNonRoot: props.runWorkersAsNonRoot ?? false,
      efaHugePages: props.efaHugePages ?? true,
      vllmVersion: resolveVllmVersion(props),
      // vLLM Neuron compiles the model on first start (~15-20 min for a 70B model: Llama 3.3 70B tutorial,
      // https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/tutorials/tutorial-llama3-70b.html).
      startupSeconds: resolved.startupSeconds + (neuron && props.startupOverheadSeconds === undefined ? NEURON_COMPILE_SECONDS : 0),
      zone: props.zone,
      drainTpotSeconds: props.slo?.tpotSeconds,
      maxOutputTokens: props.maxOutputTokens,
    };
  }

  /** One side's pool: a tensor-parallel WorkerPool, or an ExpertParallelPool as a part of this deployment. */
  private pool(role: 'prefill' | 'decode', props: DisaggregatedInferenceProps, sides: Sides, planned: PlannedSides, ctx: WorkerContext,
    namespace: string | undefined, scaling: Partial<Record<'prefill' | 'decode', ResolvedAutoscaling>>, checkpointBytes: number): WorkerPool | ExpertParallelPool {
    const objectName = role === 'prefill' ? this.prefillServiceName : this.decodeServiceName;
    const constructId = role === 'prefill' ? 'Prefill' : 'Decode';
    const plan = planned[role];
    if (plan) {
      return new WorkerPool(this, constructId, {
        plan,
        ctx,
        meta: metaIn(namespace),
        objectName,
        labels: componentLabels(this.name, role),
        checkpointGib: checkpointBytes / 2 ** 30,
        autoscaled: scaling[role] !== undefined,
      });
    }
    const ep = sides[role].ep!;
    const { prefill: _p, decode: _d, prefillExpertParallel: _pe, decodeExpertParallel: _de, ...common } = props;
    const epProps: ExpertParallelPoolProps & HiddenPoolProps = {
      ...common,
      ...ep,
      // The deployment's block size: both sides and the router agree on it (kv-block-size.ts).
      kvBlockSize: ctx.kvBlockSize,
      role: role === 'prefill' ? PoolRole.PREFILL : PoolRole.DECODE,
      name: objectName,
      namespace,
      serviceAccountName: this.name,
      // Per rank by default, as a standalone pool: the router then sees, and routes to, every rank's cache.
      endpoints: ep.endpoints ?? DataParallelEndpoints.PER_RANK,
      [FIELD_PREFIX]: `${role}ExpertParallel`,
      [NIXL_BACKEND]: this.nixlBackend,
      [KV_LOAD_FAILURE_POLICY]: ctx.kvLoadFailurePolicy,
      [INSTANCE]: this.name,
      [DRAIN_TPOT]: props.slo?.tpotSeconds,
    };
    const pool = new ExpertParallelPool(this, constructId, epProps);
    this.warnings.push(...pool.warnings);
    return pool;
  }

  /** The router: its configuration (with the pools' capacity for the pressure), Deployment, Service and PodDisruptionBudget. */
  private router(props: DisaggregatedInferenceProps, resolved: ReturnType<typeof resolveModel>, pools: Pools, namespace: string | undefined,
    scaling: Partial<Record<'prefill' | 'decode', ResolvedAutoscaling>>, threshold: number, routerReplicas: number, startupSeconds: number,
  ): { plan: RouterPlan; serviceName: string; configJson: string } {
    const name = this.name;
    const dns = dnsIn(namespace);
    const prefill = planOf(pools.prefill);
    const decode = planOf(pools.decode);
    const coldStart = (['prefill', 'decode'] as const).some(r => scaling[r]?.scaleToZero)
      ? Math.ceil(NODE_START_SECONDS + startupSeconds) : undefined;
    const routerAutoscaling: RouterAutoscaling | undefined = props.slo ? {
      slo: { ttftSeconds: props.slo.ttftSeconds, tpotSeconds: props.slo.tpotSeconds },
      prefill: prefillCapacity(prefill, resolved.maxContext, endpointsPerReplica(pools.prefill)),
      decode: decodeCapacity(decode, endpointsPerReplica(pools.decode)),
    } : undefined;
    const routerTokenizer = props.routerTokenizer ?? RouterTokenizer.fromModelSource();
    const plan = planRouter({
      servedModelName: resolved.servedModelName,
      weightPrecision: resolved.weightPrecision,
      kvBlockSize: resolved.kvBlockSize,
      maxModelLen: resolved.maxContext,
      // A restarted router loads its index from a running peer instead of starting cold.
      peersHost: routerReplicas > 1 ? dns(`${name}-router-peers`) : undefined,
      apiKeysFile: props.apiKeys ? `${ROUTER_API_KEYS_DIR}/keys` : undefined,
      nixlBackend: this.nixlBackend,
      policy: props.routerPolicy ?? RouterPolicy.KV_AWARE,
      disaggregationThresholdTokens: threshold,
      prefill,
      decode,
      prefillHost: dns(this.prefillServiceName),
      decodeHost: dns(this.decodeServiceName),
      // Per-rank expert-parallel pods serve one API server per local rank: the router lists each port.
      prefillPorts: pools.prefill instanceof ExpertParallelPool ? pools.prefill.httpPorts : undefined,
      decodePorts: pools.decode instanceof ExpertParallelPool ? pools.decode.httpPorts : undefined,
      tokenizer: routerTokenizer.kind !== 'none',
      autoscaling: routerAutoscaling,
      // A pool at zero comes back in a node start and a model load: the router holds its requests
      // meanwhile, up to its request timeout.
      queueTimeoutSeconds: coldStart ? Math.min(ROUTER_REQUEST_TIMEOUT_SECONDS, coldStart) : undefined,
    });
    if (coldStart !== undefined && coldStart > ROUTER_REQUEST_TIMEOUT_SECONDS) {
      this.warn('disagg:coldStart', `a pool scaled to zero comes back in about ${coldStart} s (a node start and the model load), longer than the ` +
        `router holds a request (${ROUTER_REQUEST_TIMEOUT_SECONDS} s): the first requests after an idle period fail; keep 'scaleToZero' off ` +
        'where that matters, or load the model faster (modelCache, modelLoadBandwidthGBps)');
    }
    const router = new Router(this, 'Router', {
      name,
      namespace,
      labels: componentLabels(name, 'router'),
      image: props.routerImage ?? props.image,
      imagePullPolicy: props.imagePullPolicy,
      serviceAccountAnnotations: props.serviceAccountAnnotations,
      replicas: routerReplicas,
      config: plan.config,
      tokenizer: { from: routerTokenizer, modelSource: resolved.source },
      apiKeys: props.apiKeys,
    });
    return { plan, serviceName: router.serviceName, configJson: router.configJson };
  }

  /** One autoscaler per autoscaled pool, on the router's pressure for that pool. */
  private addAutoscalers(props: DisaggregatedInferenceProps, pools: Pools, scaling: Partial<Record<'prefill' | 'decode', ResolvedAutoscaling>>,
    namespace: string | undefined): void {
    for (const role of ['prefill', 'decode'] as const) {
      const s = scaling[role];
      if (s === undefined) continue;
      const pool = pools[role];
      const multiNode = pool instanceof ExpertParallelPool || pool.plan.multiNode;
      const objectName = role === 'prefill' ? this.prefillServiceName : this.decodeServiceName;
      addAutoscaler(this, role === 'prefill' ? 'PrefillAutoscaler' : 'DecodeAutoscaler', {
        kind: props.autoscaler ?? Autoscaler.KEDA,
        scaling: s,
        target: multiNode
          ? { apiVersion: 'leaderworkerset.x-k8s.io/v1', kind: 'LeaderWorkerSet', name: objectName }
          : { apiVersion: 'apps/v1', kind: 'Deployment', name: objectName },
        pool: role,
        // KEDA's operator polls from its own namespace: the router's full DNS name.
        scalingUrl: `http://${dnsIn(namespace)(this.routerServiceName)}:${ROUTER_SERVICE_PORT}/scaling`,
        routerService: this.routerServiceName,
        metadata: metaIn(namespace)(objectName, componentLabels(this.name, role)),
      });
    }
  }

  /** The gateway objects the exposure asks for, the warnings an open one earns, and the network policies. */
  private expose(props: DisaggregatedInferenceProps, pools: Pools, namespace: string | undefined): void {
    const name = this.name;
    const exposure = props.gateway ?? GatewayExposure.none();
    addGatewayObjects(this, {
      exposure,
      name,
      namespace,
      routerService: this.routerServiceName,
      // An expert-parallel decode side serves from every pod per rank (leaders only with a single
      // endpoint); a multi-node tensor-parallel replica from its leader.
      decodeSelector: pools.decode instanceof ExpertParallelPool ? pools.decode._servingSelector
        : servingSelector(componentLabels(name, 'decode'), planOf(pools.decode)),
      labels: componentLabels(name, 'gateway'),
      targetPorts: pools.decode instanceof ExpertParallelPool ? pools.decode.httpPorts : undefined,
    });
    if (exposure.newGateway?.loadBalancerScheme === 'internet-facing') {
      if (exposure.newGateway.tls === undefined) {
        this.warn('disagg:plainHttpGateway', 'the gateway is internet-facing and speaks plain HTTP: prompts and completions cross the internet '
          + "unencrypted; give it 'tls' (GatewayTls.acmCertificate(...) or GatewayTls.certificateSecret(...))");
      }
      if (props.apiKeys === undefined) {
        this.warn('disagg:openGateway', "the gateway is internet-facing and the router asks for no API key: anyone who finds the address uses the model; set 'apiKeys'");
      }
    }
    addDeploymentPolicies(this, {
      isolation: props.networkIsolation ?? NetworkIsolation.workersBehindRouter(),
      instance: name,
      namespace,
      workerHttpPorts: [pools.prefill, pools.decode].flatMap(p => (p instanceof ExpertParallelPool ? p.httpPorts : [PORTS.http])),
      router: { labels: componentLabels(name, 'router'), port: PORTS.router, peerPort: PORTS.routerPeer },
      inferencePoolGateway: exposure.kind === 'inference-pool' ? { namespace: exposure.existing?.namespace ?? namespace } : undefined,
    });
  }

  /** The monitoring objects `monitoring` asks for (private/monitoring-objects.ts); returns the dashboards' JSON by slug. */
  private monitor(where: string, props: DisaggregatedInferenceProps, pools: Pools, scaling: Partial<Record<'prefill' | 'decode', ResolvedAutoscaling>>,
    namespace: string | undefined): Record<string, string> {
    const options = (props.monitoring ?? Monitoring.none()).prometheusOperatorOptions;
    if (options === undefined) return {};
    const targetShare = props.slo?.targetShare ?? 0.9;
    if (props.slo && !(targetShare > 0 && targetShare < 1)) {
      throw new Error(`${where}: 'slo.targetShare' (${targetShare}) must be between 0 and 1 (exclusive) for the SLO burn-rate alerts, ` +
        'whose error budget is 1 - targetShare; e.g. 0.99 for 1% of requests allowed to miss');
    }
    const isolation = props.networkIsolation ?? NetworkIsolation.workersBehindRouter();
    if (isolation.kind !== 'none' && isolation.metricsFrom.length === 0) {
      this.warn('disagg:monitoringBlocked', "the workers' NetworkPolicy lets no Prometheus reach their /metrics, so the PodMonitor's scrapes " +
        "fail; set 'networkIsolation: NetworkIsolation.workersBehindRouter({ metricsFrom: [TrafficSource.namespace(<Prometheus' namespace>)] })'");
    }
    const monitored = (role: 'prefill' | 'decode'): MonitoredPool => {
      const plan = planOf(pools[role]);
      const endpoints = endpointsPerReplica(pools[role]);
      const s = scaling[role];
      const objectName = role === 'prefill' ? this.prefillServiceName : this.decodeServiceName;
      return {
        instancesPerEndpoint: plan.layout.podsPerReplica * plan.nodeShare / endpoints,
        // KEDA names the HPA it manages after the ScaledObject.
        autoscaling: s && {
          maxEndpoints: s.maxReplicas * endpoints,
          maxReplicas: s.maxReplicas,
          targetPressure: s.targetPressure,
          hpaName: (props.autoscaler ?? Autoscaler.KEDA) === Autoscaler.KEDA ? `keda-hpa-${objectName}` : objectName,
        },
      };
    };
    // The API ports' names: one per local rank on a per-rank expert-parallel pod (expert-parallel-pool.ts portName).
    const portNames = (pool: WorkerPool | ExpertParallelPool) => (
      pool instanceof ExpertParallelPool && pool.endpoints === DataParallelEndpoints.PER_RANK ? pool.httpPorts.map((_, rank) => `http-${rank}`) : ['http']);
    return addDeploymentMonitoring(this, {
      name: this.name,
      namespace,
      slo: props.slo && { ttftSeconds: props.slo.ttftSeconds, tpotSeconds: props.slo.tpotSeconds, targetShare },
      nixlBackend: this.nixlBackend,
      pools: { prefill: monitored('prefill'), decode: monitored('decode') },
      instancePricePerHour: options.instancePricePerHour,
      options,
      labels: componentLabels(this.name, 'monitoring'),
      workerPortNames: [...new Set([...portNames(pools.prefill), ...portNames(pools.decode)])],
      routerLabels: componentLabels(this.name, 'router'),
    });
  }

  /** Environmental Neuron concerns the synth cannot check: the image, and FP8 KV scales. */
  private neuronWarnings(props: DisaggregatedInferenceProps, prequantized: boolean): void {
    if (!/neuron/i.test(props.image)) {
      this.warn('disagg:neuronImage', `Trainium pools need a vLLM Neuron image (e.g. the Neuron DLC public.ecr.aws/neuron/pytorch-inference-vllm-neuronx, ${NEURON_DOCS.dlc}) ` +
        `with NIXL's LIBFABRIC backend, libfabric and a libcuda.so.1 stub (vLLM Neuron setup guide); '${props.image}' does not look like one`);
    }
    if (props.kvCachePrecision === Precision.FP8 && !prequantized) {
      this.warn('disagg:neuronFp8KvScales', 'vLLM Neuron takes FP8 KV cache scales from the checkpoint and uses 1.0 without them, which degrades accuracy; ' +
        `serve a checkpoint calibrated with KV scales ('prequantizedCheckpoint: true') or use Precision.BF16 for the KV cache (${NEURON_DOCS.features})`);
    }
  }

  private warn(id: string, message: string): void {
    const text = `${id}: ${message}`;
    this.warnings.push(text);
    this.node.addMetadata('disagg:warning', text);
  }
}

/**
 * Runs the planner for `sizeFor` and returns both pools' options with the chosen replicas and
 * tensor-parallel sizes. Synchronous (constructors cannot await): the addon's planSync blocks
 * synthesis for the search.
 */
function sizePools(
  where: string, sizing: PoolSizing, prefill: InferencePoolOptions | undefined, decode: InferencePoolOptions | undefined,
  resolved: ReturnType<typeof resolveModel>,
): { prefill: InferencePoolOptions; decode: InferencePoolOptions; goodputPerSecond: number } {
  if (!prefill || !decode) {
    throw new Error(`${where}: 'sizeFor' sizes tensor-parallel pools; set 'prefill' and 'decode' (not the expert-parallel pools)`);
  }
  for (const [role, options] of [['prefill', prefill], ['decode', decode]] as const) {
    for (const field of ['replicas', 'tensorParallel', 'pipelineParallel'] as const) {
      if (options[field] !== undefined) {
        throw new Error(`${where}: '${role}.${field}' (${options[field]}) is chosen by 'sizeFor'; remove it, or remove 'sizeFor' to size the pools yourself`);
      }
    }
  }
  const w = sizing.workload;
  const positive = (field: string, v: number | undefined) => {
    if (v !== undefined && !(Number.isFinite(v) && v > 0)) {
      throw new Error(`${where}: 'sizeFor.${field}' (${v}) must be a positive number`);
    }
  };
  positive('slo.ttftSeconds', sizing.slo.ttftSeconds);
  positive('slo.tpotSeconds', sizing.slo.tpotSeconds);
  positive('workload.inputTokens', w.inputTokens);
  positive('workload.outputTokens', w.outputTokens);
  const turns = w.conversationTurns ?? 1;
  const tenants = w.tenants ?? 0;
  if (!(Number.isInteger(turns) && turns >= 1) || !(Number.isInteger(tenants) && tenants >= 0)) {
    throw new Error(`${where}: 'sizeFor.workload.conversationTurns' (${turns}) must be an integer >= 1 and 'tenants' (${tenants}) >= 0`);
  }
  const maxAccelerators = sizing.maxAccelerators ?? 2 * decode.instanceType.acceleratorCount;
  const kvTiers = kvTierSizes(where, sizing.kvCacheTiers ?? []);
  const config = sizingError(where, () => plannerConfig({
    model: resolved.model,
    weightPrecision: resolved.weightPrecision,
    kvCachePrecision: resolved.kvCachePrecision,
    maxContext: resolved.maxContext,
    kvBlockSize: resolved.kvBlockSize,
    gpuMemoryUtilization: prefill.gpuMemoryUtilization,
    instanceType: prefill.instanceType,
    decodeInstanceType: decode.instanceType,
    // Trainium pods take connected sets of 1, 4, 8 or 16 devices (src/k8s/private/neuron.ts).
    ...(prefill.instanceType.isNeuron ? {
      tensorParallelSizes: ParallelismRules.validTensorParallelSizes(resolved.model, prefill.instanceType.acceleratorCount)
        .filter(n => NEURON_DEVICES_PER_POD.includes(n)),
    } : {}),
    pricePerInstanceHour: sizing.pricePerInstanceHour,
    decodePricePerInstanceHour: sizing.decodePricePerInstanceHour,
    ...(kvTiers ? { kvTiers } : {}),
    workload: {
      kind: turns > 1 ? 'chat' : 'single',
      requests: w.simulatedRequests ?? SIZING_SIMULATED_REQUESTS,
      arrival: { process: 'poisson', ratePerSecond: 1 },
      inputTokens: { mean: w.inputTokens },
      outputTokens: { mean: w.outputTokens },
      ...(tenants > 0 ? { tenants: { count: tenants, systemPromptTokens: w.systemPromptTokens ?? 1024 } } : {}),
      ...(turns > 1 ? { chat: { turns: { mean: turns } } } : {}),
    },
    slo: { ttftSeconds: sizing.slo.ttftSeconds, tpotSeconds: sizing.slo.tpotSeconds },
    seed: w.seed ?? 1,
    planner: {
      maxAccelerators,
      modes: ['disaggregated'],
      targetShare: sizing.slo.targetShare ?? 0.9,
      requiredRatePerSecond: w.requestsPerSecond ?? 0,
    },
  }));
  const result = sizingError(where, () => planSync(config));
  const best = result.candidates.find(c => c.status === 'evaluated' && c.goodputRatePerSecond > 0 && c.meetsRequiredRate);
  if (!best) {
    throw new Error(`${where}: 'sizeFor': no split of at most ${maxAccelerators} accelerators meets the SLO for ${sizing.slo.targetShare ?? 0.9} of requests` +
      (w.requestsPerSecond ? ` at ${w.requestsPerSecond} requests/s` : '') + '; raise maxAccelerators, relax the SLO, or use faster instance types');
  }
  const pool = (role: string) => best.pools.find(p => p.role === role)!;
  return {
    prefill: { ...prefill, replicas: pool('prefill').replicas, tensorParallel: pool('prefill').tensorParallel },
    decode: { ...decode, replicas: pool('decode').replicas, tensorParallel: pool('decode').tensorParallel },
    goodputPerSecond: best.goodputRatePerSecond,
  };
}

/** The planner's tier sizes (GiB) for `sizeFor.kvCacheTiers`; undefined for none. */
function kvTierSizes(where: string, tiers: KvTier[]): KvTierSizes | undefined {
  if (tiers.length === 0) return undefined;
  const sizes: { hostGib?: number; diskGib?: number; remoteGib?: number } = {};
  for (const tier of tiers) {
    const field = tier.kind === 'host-memory' ? 'hostGib' : tier.kind === 'local-nvme' ? 'diskGib' : 'remoteGib';
    if (sizes[field] !== undefined) {
      throw new Error(`${where}: 'sizeFor.kvCacheTiers' lists ${tier.kind} twice; give each tier once`);
    }
    if (tier.sizeGib === undefined) {
      throw new Error(`${where}: 'sizeFor.kvCacheTiers' has a remote tier of unknown size (an existing Redis server); ` +
        'size it with KvStoreEndpoint.engineKvStore, or leave it out of the sizing');
    }
    sizes[field] = tier.sizeGib;
  }
  return sizes;
}

/** Runs `f`; an error it throws is re-thrown naming the construct and `sizeFor`. */
function sizingError<T>(where: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw new Error(`${where}: 'sizeFor': ${(e as Error).message}`);
  }
}

/** Seconds added to a Trainium worker's startup probe for vLLM Neuron's first compilation. */
const NEURON_COMPILE_SECONDS = 1200;

/**
 * Prefill and decode must run on one accelerator vendor: NIXL moves KV blocks between like devices and
 * vLLM's CUDA and Neuron builds lay them out differently (NixlConnector from Trainium to GPUs is an open
 * feature request: https://github.com/vllm-project/vllm-neuron/issues/26). On Neuron, only the
 * generations vLLM Neuron disaggregates.
 */
function checkVendors(where: string, sides: Record<'prefill' | 'decode', { type: AcceleratedInstanceType; field: string }>): void {
  const { prefill, decode } = sides;
  if (prefill.type.accelerator.vendor !== decode.type.accelerator.vendor) {
    const kind = (t: AcceleratedInstanceType) => (t.isNeuron ? `Neuron (${t.accelerator.name})` : `${t.accelerator.name} GPUs`);
    throw new Error(`${where}: '${prefill.field}.instanceType' (${prefill.type.name}, ${kind(prefill.type)}) and '${decode.field}.instanceType' ` +
      `(${decode.type.name}, ${kind(decode.type)}) are different accelerator vendors: KV cache cannot move between CUDA and Neuron vLLM; ` +
      `use ${prefill.type.name} or ${decode.type.name} for both pools`);
  }
  for (const side of [prefill, decode]) {
    const problem = neuronDisaggregationProblem(side.type, `${side.field}.instanceType`);
    if (problem !== undefined) {
      throw new Error(`${where}: ${problem}`);
    }
  }
}

/** One side as the props give it: a tensor-parallel pool's options or an expert-parallel pool's. */
type Side = { options?: InferencePoolOptions; ep?: ExpertParallelPoolOptions };
type Sides = Record<'prefill' | 'decode', Side>;
type PlannedSides = Record<'prefill' | 'decode', ReturnType<typeof planPool> | undefined>;
type Pools = Record<'prefill' | 'decode', WorkerPool | ExpertParallelPool>;

/** Exactly one pool kind per side. */
function sideOf(where: string, props: DisaggregatedInferenceProps, role: 'prefill' | 'decode'): Side {
  const options = props[role];
  const ep = role === 'prefill' ? props.prefillExpertParallel : props.decodeExpertParallel;
  if ((options === undefined) === (ep === undefined)) {
    throw new Error(`${where}: set exactly one of '${role}' (a tensor-parallel pool) and '${role}ExpertParallel' (an expert-parallel pool); ` +
      `${options === undefined ? 'neither' : 'both'} given`);
  }
  return { options, ep };
}

/** The deployment-wide props checked, with their defaults. */
function checkDeploymentProps(where: string, props: DisaggregatedInferenceProps, maxContext: number):
{ threshold: number; routerReplicas: number; maxOutputTokens?: number } {
  const threshold = props.disaggregationThresholdTokens ?? 512;
  if (!(Number.isInteger(threshold) && threshold >= 0)) {
    throw new Error(`${where}: 'disaggregationThresholdTokens' (${threshold}) must be an integer >= 0; 0 sends every request through prefill`);
  }
  const routerReplicas = props.routerReplicas ?? 2;
  if (!(Number.isInteger(routerReplicas) && routerReplicas >= 1)) {
    throw new Error(`${where}: 'routerReplicas' (${routerReplicas}) must be a positive integer; use 2 for availability`);
  }
  if (props.apiKeys !== undefined && !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(props.apiKeys.name)) {
    throw new Error(`${where}: 'apiKeys.name' ('${props.apiKeys.name}') must be a Kubernetes Secret name (lower case, digits, '-' and '.'), e.g. 'llm-api-keys'`);
  }
  if (props.apiKeys?.key !== undefined && !/^[-._a-zA-Z0-9]+$/.test(props.apiKeys.key)) {
    throw new Error(`${where}: 'apiKeys.key' ('${props.apiKeys.key}') must be a Secret data key (letters, digits, '-', '_' and '.'), e.g. 'keys'`);
  }
  const maxOutputTokens = props.maxOutputTokens;
  if (maxOutputTokens !== undefined && !(Number.isInteger(maxOutputTokens) && maxOutputTokens >= 1 && maxOutputTokens <= maxContext)) {
    throw new Error(`${where}: 'maxOutputTokens' (${maxOutputTokens}) must be a whole number from 1 to maxContext (${maxContext})`);
  }
  return { threshold, routerReplicas, maxOutputTokens };
}

/** A pool's plan, whichever kind it is. */
function planOf(pool: WorkerPool | ExpertParallelPool) {
  return pool instanceof ExpertParallelPool ? pool._plan : pool.plan;
}

/** Endpoints the router sees per replica: every rank of a per-rank expert-parallel group. */
function endpointsPerReplica(pool: WorkerPool | ExpertParallelPool): number {
  return pool instanceof ExpertParallelPool && pool.endpoints === DataParallelEndpoints.PER_RANK ? pool.dataParallel : 1;
}

/** A Service's name as the pods of `namespace` reach it. */
function dnsIn(namespace: string | undefined): (svc: string) => string {
  return svc => (namespace ? `${svc}.${namespace}.svc.cluster.local` : svc);
}

/** Object metadata in `namespace`, labelled as part of disagg. */
function metaIn(namespace: string | undefined) {
  return (objectName: string, labels: Record<string, string>, extra?: Partial<k8s.ObjectMeta>): k8s.ObjectMeta => strip({
    name: objectName, namespace, labels: { ...labels, [APP_PART_OF]: 'disagg' }, ...extra,
  });
}

/** The router Service's port (private/router.ts). */
const ROUTER_SERVICE_PORT = 80;
/** The router's default `requestTimeoutSeconds` (engine schema). */
const ROUTER_REQUEST_TIMEOUT_SECONDS = 600;
/** Seconds an accelerated node takes from launch to Ready (an estimate: EC2 boot, EKS join, device plugins). */
const NODE_START_SECONDS = 180;

/**
 * Checks the pools' `autoscaling` against the rest of the props and resolves it (before sizing: the
 * user's own `replicas` must be unset).
 */
function resolvePoolScaling(
  where: string, props: DisaggregatedInferenceProps,
  sides: Record<'prefill' | 'decode', { options?: InferencePoolOptions; ep?: ExpertParallelPoolOptions }>, namespace: string | undefined,
): Partial<Record<'prefill' | 'decode', ResolvedAutoscaling>> {
  if (props.slo) {
    checkSlo(where, props.slo);
  }
  const kind = props.autoscaler ?? Autoscaler.KEDA;
  const out: Partial<Record<'prefill' | 'decode', ResolvedAutoscaling>> = {};
  for (const role of ['prefill', 'decode'] as const) {
    const { options, ep } = sides[role];
    const field = options ? role : `${role}ExpertParallel`;
    const autoscaling: PoolAutoscaling | undefined = options?.autoscaling ?? ep?.autoscaling;
    if (autoscaling === undefined) continue;
    if (props.slo === undefined) {
      throw new Error(`${where}: '${field}.autoscaling' scales on the pool's SLO pressure, which the router computes against 'slo'; ` +
        "set 'slo: { ttftSeconds, tpotSeconds }' (e.g. { ttftSeconds: 2, tpotSeconds: 0.05 })");
    }
    const replicas = options?.replicas ?? ep?.replicas;
    if (replicas !== undefined) {
      throw new Error(`${where}: '${field}.replicas' (${replicas}) and '${field}.autoscaling' both set the pool's size; the autoscaler owns it, ` +
        "so remove 'replicas' (the pool starts at autoscaling.minReplicas)");
    }
    const resolved = resolveAutoscaling(where, `${field}.autoscaling`, autoscaling, kind);
    if (role === 'decode' && resolved.scaleToZero && props.gateway?.kind === 'inference-pool') {
      throw new Error(`${where}: '${field}.autoscaling.scaleToZero' with GatewayExposure.inferencePool: the gateway sends requests to the ` +
        'decode pods directly, so with none running it fails them instead of holding them while one starts; expose the router ' +
        "(GatewayExposure.gateway() or existingGateway()) or keep 'scaleToZero: false' on the decode pool");
    }
    if (kind === Autoscaler.KEDA && namespace === undefined) {
      throw new Error(`${where}: '${field}.autoscaling' with Autoscaler.KEDA needs a namespace: KEDA polls the router's /scaling from its own ` +
        "namespace by the Service's full DNS name; set 'namespace' or give the chart a namespace");
    }
    out[role] = resolved;
  }
  return out;
}
