import { ModelArchitecture, Precision } from '../../catalog';
import { costSections } from '../../engine/engine-config-builder';
import { RouterPolicy } from '../router-policy';
import { PORTS } from './labels';
import { PoolPlan } from './pool-plan';

/** Inputs of the router's JSON configuration (internal). */
export interface RouterConfigInputs {
  readonly model: ModelArchitecture;
  readonly servedModelName: string;
  readonly weightPrecision: Precision;
  readonly kvBlockSize: number;
  readonly policy: RouterPolicy;
  readonly disaggregationThresholdTokens: number;
  readonly prefill: PoolPlan;
  readonly decode: PoolPlan;
  /** DNS name of each pool's headless Service. */
  readonly prefillHost: string;
  readonly decodeHost: string;
  readonly kvTransfer: string;
}

/**
 * The engine's configuration (engine/schema/engine-config.schema.json): the cost-model sections
 * (`model`, `hardware`, `parallel`) resolved for the decode pool, plus the router's `router`, `policy`
 * and `pools` sections. Every hardware and model number comes from src/catalog through src/sizing: the
 * engine keeps no table of its own.
 */
export function routerConfig(inputs: RouterConfigInputs): Record<string, unknown> {
  const decode = inputs.decode;
  return {
    // The cost-model sections come from the engine-config builder, shared with the CLI and `sizeFor`.
    ...costSections(decode.plan, inputs.weightPrecision),
    router: {
      listenPort: PORTS.router,
      servedModelName: inputs.servedModelName,
      kvBlockSize: inputs.kvBlockSize,
      kvTransfer: inputs.kvTransfer,
    },
    policy: {
      name: inputs.policy.name,
      weights: { ...inputs.policy.weights },
      disaggregation: { minUncachedPromptTokens: inputs.disaggregationThresholdTokens },
    },
    pools: [
      poolEntry(inputs.prefill, inputs.prefillHost),
      poolEntry(decode, inputs.decodeHost),
    ],
  };
}

function poolEntry(pool: PoolPlan, host: string): Record<string, unknown> {
  const p = pool.parallelism;
  return {
    name: pool.role,
    role: pool.role,
    discovery: { type: 'dns', host, port: PORTS.http },
    kvEvents: { port: PORTS.kvEvents, topicPrefix: 'kv@' },
    replicas: pool.replicas,
    instanceType: pool.options.instanceType.name,
    accelerator: pool.options.instanceType.accelerator.name,
    tensorParallel: p.tensorParallel,
    pipelineParallel: p.pipelineParallel,
    weightBytesPerRank: Math.round(pool.plan.weightBytesPerRank),
    kvCacheBytesPerRank: Math.round(pool.plan.kvCacheBytesPerRank),
    kvTokensPerReplica: pool.plan.kvTokens,
    maxConcurrencyPerReplica: pool.plan.maxConcurrency,
  };
}
