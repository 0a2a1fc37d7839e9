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
  /**
   * HTTP ports of each pool's pods: one per local data-parallel rank for an expert-parallel pool with
   * per-rank endpoints (8000, 8001, ...).
   * @default [8000]
   */
  readonly prefillPorts?: number[];
  readonly decodePorts?: number[];
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
      // vLLM hashes token ids (sha256 of the chat-templated, tokenized prompt, seeded per process unless
      // PYTHONHASHSEED is fixed); the router has neither the model's tokenizer nor its chat template, so
      // its hashes of a request never equal the block hashes in vLLM's KV events. The prefix scorer
      // therefore runs on the router's own routing history (llm-d's approximate prefix scorer works the
      // same way). `disagg local` switches to 'index': its sim-workers hash prompts exactly as the
      // router does.
      prefixSource: 'history',
    },
    pools: [
      poolEntry(inputs.prefill, inputs.prefillHost, inputs.prefillPorts),
      poolEntry(decode, inputs.decodeHost, inputs.decodePorts),
    ],
  };
}

function poolEntry(pool: PoolPlan, host: string, ports: number[] = [PORTS.http]): Record<string, unknown> {
  const p = pool.parallelism;
  return {
    name: pool.role,
    role: pool.role,
    // Several ports: the router makes each address x port an endpoint, and subscribes the one on
    // ports[j] to KV events on kvEvents.port + j (vLLM offsets the KV-events port by the rank; the
    // expert-parallel pool's script lines that up per pod).
    discovery: ports.length === 1 ? { type: 'dns', host, port: ports[0] } : { type: 'dns', host, ports: [...ports] },
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

/** One endpoint of a static list (the schema's `endpoints[]`), e.g. a local sim-worker. */
export interface StaticRouterEndpoint {
  /** Name of the pool (`pools[].name`) it belongs to. */
  readonly pool: string;
  /** Base URL of its OpenAI-compatible server, e.g. `http://127.0.0.1:8101`. */
  readonly url: string;
  /** ZMQ endpoint of its KV events, e.g. `tcp://127.0.0.1:5601`. @default - none */
  readonly kvEventsEndpoint?: string;
}

/**
 * A router configuration (as `routerConfig` wrote it) with a static endpoint list instead of DNS
 * discovery: the same pools, policy and resolved numbers, for processes that are not behind a
 * headless Service (`disagg local`). Pools keep their `kvEvents` (topic prefix); the endpoints
 * carry their own KV-event addresses.
 *
 * @throws when an endpoint names a pool the configuration lacks
 */
export function withStaticEndpoints(config: Record<string, unknown>, endpoints: StaticRouterEndpoint[]): Record<string, unknown> {
  const pools = (config.pools as Array<Record<string, unknown>>).map(({ discovery: _dns, ...rest }) => rest);
  for (const e of endpoints) {
    if (!pools.some(p => p.name === e.pool)) {
      throw new Error(`endpoint ${e.url} names pool '${e.pool}', which the configuration lacks; use one of ${pools.map(p => p.name).join(', ')}`);
    }
  }
  return {
    ...config,
    pools,
    endpoints: endpoints.map(e => ({ pool: e.pool, url: e.url, ...(e.kvEventsEndpoint ? { kvEventsEndpoint: e.kvEventsEndpoint } : {}) })),
  };
}
