import * as cdk8s from 'cdk8s';
import { DisaggregatedInference } from '../../k8s';
import { withStaticEndpoints, StaticRouterEndpoint } from '../../k8s/private/router-config';
import { defaultDeploymentSpec, workloadProps } from '../default-deployment';

/**
 * The default deployment as `disagg local` runs it: the router configuration the
 * `DisaggregatedInference` construct writes into its ConfigMap, unchanged except that endpoints are
 * the local sim-workers (static list) instead of headless-Service DNS, and, for an aggregated run,
 * one pool of role `both` sized like the decode pool. The sim-workers read the same file: its
 * cost-model sections (`model`, `hardware`, `parallel`) are what the catalog and sizing resolved.
 */

/** One pool entry of the configuration (engine/schema/engine-config.schema.json `pools[]`). */
export interface LocalPool {
  readonly name: string;
  readonly role: 'prefill' | 'decode' | 'both';
  readonly replicas: number;
  readonly tensorParallel: number;
  readonly weightBytesPerRank: number;
  readonly kvTokensPerReplica: number;
  readonly maxConcurrencyPerReplica: number;
}

/** The resolved deployment. */
export interface LocalDeployment {
  /** The router configuration with DNS discovery (pools as sized). */
  readonly config: Record<string, unknown>;
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
  const config = JSON.parse(inference.routerConfig) as Record<string, any>;
  let pools = config.pools as Array<Record<string, any>>;
  if (!pd) {
    // Aggregated: whole requests on one pool of the decode pool's shape.
    const decode = pools.find(p => p.role === 'decode')!;
    pools = [{ ...decode, name: 'aggregated', role: 'both', replicas: workers }];
    config.pools = pools;
  }
  const tp = inference.decodeTensorParallel;
  return {
    config,
    pools: pools.map(p => ({
      name: p.name,
      role: p.role,
      replicas: p.replicas,
      tensorParallel: p.tensorParallel,
      weightBytesPerRank: p.weightBytesPerRank,
      kvTokensPerReplica: p.kvTokensPerReplica,
      maxConcurrencyPerReplica: p.maxConcurrencyPerReplica,
    })),
    servedModelName: config.router.servedModelName,
    kvBlockSize: config.router.kvBlockSize,
    policy: config.policy.name,
    description: `${spec.model.name} ${spec.weights.name.toUpperCase()} TP${tp} on ${spec.instanceType.name}`,
  };
}

/**
 * The configuration one sim-worker of `pool` reads: the shared file with the pool's own tensor
 * parallelism and weights per rank (the cost model's inputs that differ between pools).
 */
export function workerConfig(d: LocalDeployment, pool: LocalPool): Record<string, unknown> {
  const model = { ...(d.config.model as Record<string, unknown>) };
  const parallel = d.config.parallel as { tensorParallel: number };
  if (pool.tensorParallel !== parallel.tensorParallel) {
    model.weightBytesPerRank = pool.weightBytesPerRank;
    model.kvBytesPerTokenPerRank = 0; // derive from the pool's TP
  }
  return { ...d.config, model, parallel: { ...parallel, tensorParallel: pool.tensorParallel } };
}

/** The router's configuration for the local endpoints. */
export function routerConfigFor(d: LocalDeployment, endpoints: StaticRouterEndpoint[]): Record<string, unknown> {
  const config = withStaticEndpoints(d.config, endpoints);
  // Sim-workers tokenize and hash prompts with the engine's own functions, so (unlike vLLM pods) their
  // KV events name the hashes the router computes: the precise, event-fed index works here.
  return { ...config, policy: { ...(config.policy as Record<string, unknown>), prefixSource: 'index' } };
}
