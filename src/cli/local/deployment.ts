import * as cdk8s from 'cdk8s';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../../catalog';
import type { EngineCostConfig } from '../../engine/engine-config';
import { Autoscaler, DataParallelEndpoints, DisaggregatedInference, DisaggregatedInferenceProps, ExpertParallelPool, ModelSource, RouterPolicy } from '../../k8s';
import type { ResolvedAutoscaling, RouterAutoscaling } from '../../k8s/private/autoscaling';
import { RoutedPool, RouterConfigFile, StaticRouterEndpoint, withoutClusterNetwork, withStaticEndpoints } from '../../k8s/private/router-config';
import { ServingPlan } from '../../sizing';
import { defaultDeploymentSpec, workloadProps } from '../default-deployment';

/**
 * The default deployment as `disagg local` runs it: the router configuration the
 * `DisaggregatedInference` construct writes into its ConfigMap, unchanged except that endpoints are
 * the local sim-workers (static list) instead of headless-Service DNS, and, for an aggregated run,
 * one pool of role `both` sized like the decode pool. Every number comes from the construct's typed
 * router plan (`_router`): the sim-workers' cost-model sections (`model`, `hardware`, `parallel`) are
 * what the catalog and sizing resolved for their pool, which the router's file does not carry.
 */

/**
 * How `disagg local --expert-parallel` lays out one side, as its `ExpertParallelPool` does: groups
 * (LeaderWorkerSet replicas) of pods (nodes), each pod serving one API server per local
 * data-parallel rank on `httpPorts`, the rank on httpPorts[j] publishing KV events on
 * kvEventsPort + j.
 */
export interface LocalRankLayout {
  /** Groups (the pool's `replicas`), each a full copy of the model. */
  readonly groups: number;
  /** Pods (nodes) per group (`nodesPerGroup`). */
  readonly podsPerGroup: number;
  /** Data-parallel ranks per pod (`dataParallelLocal`). */
  readonly ranksPerPod: number;
  /** Data-parallel ranks per group (`dataParallel`, vLLM --data-parallel-size). */
  readonly ranksPerGroup: number;
  readonly tensorParallel: number;
  /** dataParallel x tensorParallel. */
  readonly expertParallel: number;
  /** The pool's HTTP ports in the construct's router configuration (`discovery.ports`). */
  readonly httpPorts: number[];
  /** The pool's KV-events base port in the construct's router configuration (`kvEvents.port`). */
  readonly kvEventsPort: number;
}

/**
 * One pool of sim-workers: a pool the construct's router routes to, one sim-worker per replica, or
 * with `ranks` one per data-parallel rank (`kvTokensPerReplica` and `maxConcurrencyPerReplica` are
 * then a whole group's).
 */
export interface LocalPool extends RoutedPool {
  /** The expert-parallel layout. @default - none: one sim-worker per replica */
  readonly ranks?: LocalRankLayout;
}

/** The resolved deployment. */
export interface LocalDeployment {
  /** The DisaggregatedInference's name: the `deployment` label of --scrape-targets. */
  readonly name: string;
  /** The namespace its chart is synthesized in (LOCAL_NAMESPACE). */
  readonly namespace: string;
  /** The router configuration with DNS discovery (pools as sized). */
  readonly config: RouterConfigFile;
  readonly pools: LocalPool[];
  readonly servedModelName: string;
  readonly kvBlockSize: number;
  /** The construct's policy name, e.g. 'kv-aware'. */
  readonly policy: string;
  /** e.g. 'llama-3.3-70b FP8 TP4 on p5en.48xlarge'. */
  readonly description: string;
}

/**
 * Synthesizes the default deployment's router configuration.
 * @param pd prefill and decode sim-workers, or undefined for an aggregated run of `workers`
 */
/** The namespace of the chart the local deployments are synthesized in (their dashboards filter on it). */
export const LOCAL_NAMESPACE = 'inference';

export function localDeployment(pd: { prefill: number; decode: number } | undefined, workers: number): LocalDeployment {
  const spec = defaultDeploymentSpec();
  const chart = new cdk8s.Chart(new cdk8s.App(), 'disagg', { namespace: LOCAL_NAMESPACE });
  const inference = new DisaggregatedInference(chart, 'Inference', workloadProps({
    ...spec,
    prefillReplicas: pd?.prefill ?? spec.prefillReplicas,
    decodeReplicas: pd?.decode ?? spec.decodeReplicas,
  }, 'disagg-local', 'disagg-local'));
  let { config, pools } = inference._router;
  if (!pd) {
    // Aggregated: whole requests on one pool of the decode pool's shape.
    const decode = pools.find(p => p.role === 'decode')!;
    const entry = config.pools.find(p => p.role === 'decode')!;
    pools = [{ ...decode, name: 'aggregated', role: 'both', replicas: workers }];
    config = { ...config, pools: [{ ...entry, name: 'aggregated', role: 'both' }] };
  }
  return localDeploymentOf(config, pools, `${spec.model.name} ${spec.weights.name.toUpperCase()} TP${inference.decodeTensorParallel} on ${spec.instanceType.name}`, inference);
}

/** A LocalDeployment of a router configuration and its pools: the names and numbers the configuration carries. */
function localDeploymentOf(config: RouterConfigFile, pools: LocalPool[], description: string, inference: DisaggregatedInference): LocalDeployment {
  return {
    name: inference.name,
    namespace: LOCAL_NAMESPACE,
    config,
    pools,
    servedModelName: config.router.servedModelName,
    kvBlockSize: config.router.kvBlockSize ?? ServingPlan.DEFAULT_KV_BLOCK_SIZE,
    policy: config.policy.name,
    description,
  };
}

/** How `disagg local --autoscale` scales the default deployment's pools (each pool the same). */
export interface LocalAutoscaleSpec {
  readonly minReplicas: number;
  readonly maxReplicas: number;
  /** Scale-down stabilization, whole seconds (the construct's limit: 0 to 3600). */
  readonly scaleDownWindowSeconds: number;
  /** The deployment's `slo`, in model seconds. */
  readonly ttftSeconds: number;
  readonly tpotSeconds: number;
}

/** The default deployment with both pools autoscaled, as the construct resolves it. */
export interface LocalAutoscaleDeployment extends LocalDeployment {
  /** Each pool's rule with the construct's defaults applied (what its ScaledObject carries). */
  readonly rules: Record<'prefill' | 'decode', ResolvedAutoscaling>;
  /** The router configuration's `autoscaling` block (SLO and the pools' capacity, model seconds). */
  readonly autoscaling: RouterAutoscaling;
}

/**
 * The props of `disagg local --autoscale`'s deployment: the default deployment with `slo` and
 * `autoscaling` on both pools (KEDA). A test adds `monitoring` to read a local run with its dashboards.
 */
export function localAutoscaleProps(a: LocalAutoscaleSpec): DisaggregatedInferenceProps {
  const spec = defaultDeploymentSpec();
  const autoscaling = {
    minReplicas: a.minReplicas,
    maxReplicas: a.maxReplicas,
    scaleDownStabilizationSeconds: a.scaleDownWindowSeconds,
  };
  const pool = { instanceType: spec.instanceType, tensorParallel: spec.tensorParallel, autoscaling };
  return {
    ...workloadProps(spec, 'disagg-local', 'disagg-local'),
    prefill: pool,
    decode: pool,
    slo: { ttftSeconds: a.ttftSeconds, tpotSeconds: a.tpotSeconds },
    autoscaler: Autoscaler.KEDA,
  };
}

/**
 * The default deployment with `slo` and `autoscaling` on both pools (KEDA): the router configuration
 * and the rules its ScaledObjects carry, for `disagg local --autoscale`.
 * @throws the construct's error when the SLO cannot be met or a bound is invalid
 */
export function localAutoscaleDeployment(a: LocalAutoscaleSpec): LocalAutoscaleDeployment {
  const spec = defaultDeploymentSpec();
  const chart = new cdk8s.Chart(new cdk8s.App(), 'disagg', { namespace: LOCAL_NAMESPACE });
  const inference = new DisaggregatedInference(chart, 'Inference', localAutoscaleProps(a));
  const { config, pools } = inference._router;
  const rules = inference._autoscaling;
  if (!rules.prefill || !rules.decode || !config.autoscaling) {
    throw new Error('the construct resolved no autoscaling for the local deployment');
  }
  return {
    ...localDeploymentOf(config, pools,
      `${spec.model.name} ${spec.weights.name.toUpperCase()} TP${inference.decodeTensorParallel} on ${spec.instanceType.name}`, inference),
    rules: { prefill: rules.prefill, decode: rules.decode },
    autoscaling: config.autoscaling,
  };
}

/** The expert-parallel shape `disagg local --expert-parallel` runs: data-parallel ranks and groups per side. */
export interface ExpertParallelShape {
  readonly prefillRanks: number;
  readonly decodeRanks: number;
  readonly prefillGroups: number;
  readonly decodeGroups: number;
}

/** The expert-parallel deployment: the wide-EP P/D shape of the issue, on the instance's whole nodes. */
export const EXPERT_PARALLEL_DEPLOYMENT = {
  model: ModelArchitecture.DEEPSEEK_V3,
  instanceType: AcceleratedInstanceType.P5EN_48XLARGE,
  weights: Precision.FP8,
  kv: Precision.FP8,
  context: 8192,
} as const;

/**
 * Why `ranks` data-parallel ranks cannot make a group on `perNode` accelerators, or undefined: up to
 * a node, the ranks split its accelerators (tensor parallel perNode / ranks each); beyond, whole
 * nodes of one rank per accelerator.
 */
export function expertParallelRanksProblem(ranks: number,
  perNode: number = EXPERT_PARALLEL_DEPLOYMENT.instanceType.acceleratorCount): string | undefined {
  if (ranks <= perNode ? perNode % ranks === 0 : ranks % perNode === 0) return undefined;
  const divisors = Array.from({ length: perNode }, (_, i) => i + 1).filter(d => perNode % d === 0);
  return `${ranks} ranks do not fill whole ${EXPERT_PARALLEL_DEPLOYMENT.instanceType.name} nodes of ${perNode} accelerators; ` +
    `use ${divisors.join(', ')} (one node) or a multiple of ${perNode}`;
}

/**
 * The expert-parallel deployment's router configuration, from a `DisaggregatedInference` with
 * `ExpertParallelPool` sides and per-rank endpoints: the router file lists each pod's per-rank ports,
 * which `disagg local` maps onto the sim-workers of each pod (see rankEndpoints).
 * @throws when a rank count does not fill whole nodes (expertParallelRanksProblem)
 */
export function localExpertParallelDeployment(shape: ExpertParallelShape): LocalDeployment {
  const e = EXPERT_PARALLEL_DEPLOYMENT;
  const perNode = e.instanceType.acceleratorCount;
  const side = (ranks: number, groups: number) => {
    const problem = expertParallelRanksProblem(ranks, perNode);
    if (problem) throw new Error(problem);
    return {
      instanceType: e.instanceType,
      nodesPerGroup: Math.max(1, ranks / perNode),
      tensorParallel: Math.max(1, perNode / ranks),
      replicas: groups,
      endpoints: DataParallelEndpoints.PER_RANK,
    };
  };
  const chart = new cdk8s.Chart(new cdk8s.App(), 'disagg', { namespace: LOCAL_NAMESPACE });
  const inference = new DisaggregatedInference(chart, 'Inference', {
    model: e.model,
    modelSource: ModelSource.huggingFace(e.model.huggingFaceId),
    image: 'disagg-local',
    weightPrecision: e.weights,
    kvCachePrecision: e.kv,
    maxContext: e.context,
    prefillExpertParallel: side(shape.prefillRanks, shape.prefillGroups),
    decodeExpertParallel: side(shape.decodeRanks, shape.decodeGroups),
    routerPolicy: RouterPolicy.KV_AWARE,
  });
  const { config, pools } = inference._router;
  const layouts: LocalPool[] = pools.map(p => {
    const ep = (p.role === 'prefill' ? inference.prefill : inference.decode) as ExpertParallelPool;
    const entry = config.pools.find(c => c.name === p.name)!;
    const discovery = entry.discovery as { ports?: number[]; port?: number };
    return {
      ...p,
      ranks: {
        groups: p.replicas,
        podsPerGroup: ep.nodesPerGroup,
        ranksPerPod: ep.dataParallelLocal,
        ranksPerGroup: ep.dataParallel,
        tensorParallel: p.tensorParallel,
        expertParallel: ep.expertParallelSize,
        httpPorts: discovery.ports ?? [discovery.port!],
        kvEventsPort: entry.kvEvents!.port!,
      },
    };
  });
  const shapeOf = (p: LocalPool) => `${p.name} EP${p.ranks!.expertParallel} (DP${p.ranks!.ranksPerGroup} x TP${p.ranks!.tensorParallel})`;
  return localDeploymentOf(config, layouts, `${e.model.name} ${e.weights.name.toUpperCase()} ${layouts.map(shapeOf).join(', ')} on ${e.instanceType.name}`, inference);
}

/** One rank of a pod: where its sim-worker listens and publishes, as the router finds it. */
export interface RankEndpoint extends StaticRouterEndpoint {
  /** Its HTTP port. */
  readonly port: number;
  /** The port its sim-worker is told (vLLM's configured KV-events port): it binds this + its rank. */
  readonly kvEventsConfiguredPort: number;
  readonly dataParallelRank: number;
  /** The local rank (index into the pod's ports). */
  readonly localRank: number;
}

/**
 * The endpoints of one pod of an expert-parallel pool, as the router derives them from the pool's
 * `discovery.ports` and `kvEvents.port` (engine/src/servers/router/router_config.h,
 * dns_kv_events_port): the rank on ports[j] is an endpoint, publishing KV events on
 * kvEvents.port + j. Locally each pod's ports are moved as a block to `httpBase` (ports[j] - ports[0]
 * above it) and its KV-event ports to `kvBase`. As the pool's pod script does, the rank is
 * firstRank + j and its sim-worker is configured with kvBase - firstRank, so that vLLM's rank offset
 * lands it on kvBase + j.
 */
export function rankEndpoints(pool: LocalPool, httpBase: number, kvBase: number, podInGroup: number): RankEndpoint[] {
  const r = pool.ranks!;
  const firstRank = podInGroup * r.ranksPerPod;
  return r.httpPorts.map((p, j) => ({
    pool: pool.name,
    port: httpBase + (p - r.httpPorts[0]),
    url: `http://127.0.0.1:${httpBase + (p - r.httpPorts[0])}`,
    kvEventsEndpoint: `tcp://127.0.0.1:${kvBase + j}`,
    kvEventsConfiguredPort: kvBase - firstRank,
    dataParallelRank: firstRank + j,
    localRank: j,
  }));
}

/**
 * The configuration one sim-worker of `pool` reads: the cost-model sections of one of the pool's
 * replicas (its own tensor parallelism, weights per rank and hardware).
 */
export function workerConfig(pool: LocalPool): EngineCostConfig {
  return pool.cost;
}

/** Where prefix-aware policies find cached prefixes: 'index' (precise) or 'history' (approximate). */
export type LocalPrefixSource = 'index' | 'history';

/**
 * The router's configuration for the local endpoints.
 * @param prefixSource the policy's prefix source: 'index', the event-fed KV block index, or 'history',
 * the router's own record of what it routed (approximate)
 * @default 'index'
 */
export function routerConfigFor(d: LocalDeployment, endpoints: StaticRouterEndpoint[], prefixSource: LocalPrefixSource = 'index'): RouterConfigFile {
  const config = withStaticEndpoints(withoutClusterNetwork(d.config), endpoints);
  // Sim-workers tokenize and hash prompts with the engine's own functions, so (unlike vLLM pods) their
  // KV events name the hashes the router computes: the precise, event-fed index works here.
  // The tokenizer, if any, is `disagg local --tokenizer`'s folder (a flag), not the pod's mount.
  return { ...config, policy: { ...config.policy, prefixSource } };
}
