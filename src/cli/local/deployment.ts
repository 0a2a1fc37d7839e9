import * as cdk8s from 'cdk8s';
import type { EngineCostConfig } from '../../engine/engine-config';
import { DisaggregatedInference } from '../../k8s';
import { RoutedPool, RouterConfigFile, StaticRouterEndpoint, withStaticEndpoints } from '../../k8s/private/router-config';
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

/** One pool of sim-workers: a pool the construct's router routes to, one sim-worker per replica. */
export type LocalPool = RoutedPool;

/** The resolved deployment. */
export interface LocalDeployment {
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
export function localDeployment(pd: { prefill: number; decode: number } | undefined, workers: number): LocalDeployment {
  const spec = defaultDeploymentSpec();
  const chart = new cdk8s.Chart(new cdk8s.App(), 'disagg', { namespace: 'inference' });
  const inference = new DisaggregatedInference(chart, 'Inference', workloadProps({
    ...spec,
    prefillReplicas: pd?.prefill ?? spec.prefillReplicas,
    decodeReplicas: pd?.decode ?? spec.decodeReplicas,
  }, 'disagg-local'));
  let { config, pools } = inference._router;
  if (!pd) {
    // Aggregated: whole requests on one pool of the decode pool's shape.
    const decode = pools.find(p => p.role === 'decode')!;
    const entry = config.pools.find(p => p.role === 'decode')!;
    pools = [{ ...decode, name: 'aggregated', role: 'both', replicas: workers }];
    config = { ...config, pools: [{ ...entry, name: 'aggregated', role: 'both' }] };
  }
  const tp = inference.decodeTensorParallel;
  return {
    config,
    pools,
    servedModelName: config.router.servedModelName,
    kvBlockSize: config.router.kvBlockSize ?? ServingPlan.DEFAULT_KV_BLOCK_SIZE,
    policy: config.policy.name,
    description: `${spec.model.name} ${spec.weights.name.toUpperCase()} TP${tp} on ${spec.instanceType.name}`,
  };
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
  const config = withStaticEndpoints(d.config, endpoints);
  // Sim-workers tokenize and hash prompts with the engine's own functions, so (unlike vLLM pods) their
  // KV events name the hashes the router computes: the precise, event-fed index works here.
  // The tokenizer, if any, is `disagg local --tokenizer`'s folder (a flag), not the pod's mount.
  const { tokenizer: _podMount, ...router } = config.router;
  return { ...config, router, policy: { ...config.policy, prefixSource } };
}
