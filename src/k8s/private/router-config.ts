import { Precision } from '../../catalog';
import type { EngineCostConfig, EngineEndpointConfig, EngineRouterSection, SimulationPolicyConfig, SimulationPoolConfig } from '../../engine/engine-config';
import { costSections } from '../../engine/engine-config-builder';
import { RouterPolicy } from '../router-policy';
import { RouterAutoscaling } from './autoscaling';
import { PORTS } from './labels';
import { PoolPlan } from './pool-plan';

/**
 * The `router` keys `disagg-engine router` reads (engine/src/servers/router/router_config.cc,
 * apply_config_json).
 */
export type RouterSection = Pick<EngineRouterSection, 'listenPort' | 'servedModelName' | 'kvBlockSize' | 'maxModelLen' | 'requestTimeoutSeconds' | 'queueTimeoutSeconds'
  | 'tokenizer' | 'peerPort' | 'peers' | 'kvTransfer'>;

/** Where the router's pod mounts the served model's tokenizer files (RouterTokenizer). */
export const ROUTER_TOKENIZER_DIR = '/var/lib/disagg/tokenizer';

/** Where the router's API-key Secret is mounted (a directory, so that the kubelet's updates reach it). */
export const ROUTER_API_KEYS_DIR = '/etc/disagg/api-keys';

/**
 * The keys of a `pools[]` entry the router reads. The schema's sizing keys (replicas, tensorParallel,
 * KV tokens, ...) belong to the simulator's pools and are never written for the router.
 */
export type RouterPool = Pick<SimulationPoolConfig, 'name' | 'role' | 'discovery' | 'kvEvents'>;

/**
 * The router's configuration file: the sections of the engine configuration (engine/schema) that
 * `disagg-engine router` reads, and nothing else. The router ignores the cost-model sections, so they
 * are not written: a ConfigMap that only changes when routing changes rolls the router only then.
 */
export interface RouterConfigFile {
  readonly router: RouterSection;
  readonly policy: SimulationPolicyConfig;
  readonly pools: RouterPool[];
  /** A static endpoint list instead of DNS discovery (`disagg local`). @default - none */
  readonly endpoints?: EngineEndpointConfig[];
  /**
   * The SLO and the pools' capacity the router computes SLO pressure from (issue 24 contract, section 2).
   * @default - none: the router's defaults (2 s TTFT, 0.1 s TPOT)
   */
  readonly autoscaling?: RouterAutoscaling;
}

/**
 * A pool the router sends requests to, with the numbers one of its replicas was resolved to (internal).
 * `disagg local` reads these to start a sim-worker per replica; the router file carries none of them.
 */
export interface RoutedPool {
  /** `pools[].name` in the router file. */
  readonly name: string;
  /** 'both' only for `disagg local`'s aggregated run. */
  readonly role: 'prefill' | 'decode' | 'both';
  readonly replicas: number;
  readonly tensorParallel: number;
  /** KV-cache tokens one replica holds. */
  readonly kvTokensPerReplica: number;
  /** Sequences one replica runs at once (vLLM --max-num-seqs). */
  readonly maxConcurrencyPerReplica: number;
  /** The cost-model sections (`model`, `hardware`, `parallel`) of one replica. */
  readonly cost: EngineCostConfig;
}

/** What the router is configured with, and what it routes to (internal). */
export interface RouterPlan {
  /** The file written into the router's ConfigMap. */
  readonly config: RouterConfigFile;
  /** Prefill, then decode. */
  readonly pools: RoutedPool[];
}

/** Inputs of the router's plan (internal). */
export interface RouterConfigInputs {
  readonly servedModelName: string;
  readonly weightPrecision: Precision;
  readonly kvBlockSize: number;
  /** The workers' --max-model-len (what the router's /tokenize reports). */
  readonly maxModelLen: number;
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
  /**
   * The router's pod has the served model's tokenizer files at ROUTER_TOKENIZER_DIR.
   * @default false
   */
  readonly tokenizer?: boolean;
  /**
   * The `autoscaling` block.
   * @default - none
   */
  readonly autoscaling?: RouterAutoscaling;
  /**
   * How long the router holds a request that finds no ready endpoint (a pool coming back from zero)
   * or no free slot.
   * @default - the router's (10 s)
   */
  readonly queueTimeoutSeconds?: number;
  /**
   * DNS name of the headless Service over the router's own pods: with it, each router serves its
   * KV-block index on PORTS.routerPeer and a starting one loads a running peer's.
   * @default - none (one router, or no sharing)
   */
  readonly peersHost?: string;
  /**
   * The router's pod has its API keys in this file (a mounted Secret): clients must present one.
   * @default - no keys asked for
   */
  readonly apiKeysFile?: string;
  /**
   * The pools' NIXL backend ('LIBFABRIC' or 'UCX'): the router reports it as its KV transport and counts
   * the KV bytes each prefill/decode pair moves (`router.kvTransfer`).
   * @default - not reported
   */
  readonly nixlBackend?: string;
}

/**
 * The router's configuration (the `router`, `policy` and `pools` sections of
 * engine/schema/engine-config.schema.json) and the pools it routes to, as sized by src/sizing.
 */
export function planRouter(inputs: RouterConfigInputs): RouterPlan {
  const config: RouterConfigFile = {
    router: {
      listenPort: PORTS.router,
      servedModelName: inputs.servedModelName,
      kvBlockSize: inputs.kvBlockSize,
      maxModelLen: inputs.maxModelLen,
      ...(inputs.peersHost !== undefined ? { peerPort: PORTS.routerPeer, peers: { host: inputs.peersHost, port: PORTS.routerPeer } } : {}),
      ...(inputs.tokenizer ? { tokenizer: ROUTER_TOKENIZER_DIR } : {}),
      ...(inputs.queueTimeoutSeconds !== undefined ? { queueTimeoutSeconds: inputs.queueTimeoutSeconds } : {}),
      ...(inputs.apiKeysFile !== undefined ? { apiKeys: { file: inputs.apiKeysFile } } : {}),
      ...(inputs.nixlBackend === 'LIBFABRIC' || inputs.nixlBackend === 'UCX'
        ? { kvTransfer: { backend: inputs.nixlBackend, bytesPerToken: transferBytesPerToken(inputs.decode) } } : {}),
    },
    policy: {
      name: policyName(inputs.policy),
      weights: { ...inputs.policy.weights },
      ...(Object.keys(inputs.policy.options).length > 0 ? { options: { ...inputs.policy.options } } : {}),
      disaggregation: { minUncachedPromptTokens: inputs.disaggregationThresholdTokens },
      // vLLM's KV events carry each block's token ids: with the served model's tokenizer and chat
      // template the router computes a request's token ids as vLLM does and keys both by its own hash
      // of them (vLLM's hash function, seed and block size need not match). 'auto' routes precisely
      // when the files loaded and on the router's own routing history (approximate, as llm-d's
      // approximate scorer) when they did not, saying so in its log and metrics.
      prefixSource: inputs.tokenizer ? 'auto' : 'history',
    },
    pools: [
      routerPool(inputs.prefill, inputs.prefillHost, inputs.prefillPorts),
      routerPool(inputs.decode, inputs.decodeHost, inputs.decodePorts),
    ],
    ...(inputs.autoscaling ? { autoscaling: inputs.autoscaling } : {}),
  };
  return { config, pools: [routedPool(inputs.prefill, inputs.weightPrecision), routedPool(inputs.decode, inputs.weightPrecision)] };
}

/**
 * KV bytes one token moves from prefill to decode: every decode rank reads its own copy (vLLM's NIXL),
 * so heads replicated over the ranks move once per rank, as the engine's kv_transfer_bytes counts them.
 */
function transferBytesPerToken(decode: PoolPlan): number {
  const p = decode.parallelism;
  const kv = decode.plan.kvCache;
  return Math.round(kv.bytesPerToken * kv.rankShare(p.tensorParallel, p.pipelineParallel) * p.tensorParallel * p.pipelineParallel);
}

function routerPool(pool: PoolPlan, host: string, ports: number[] = [PORTS.http]): RouterPool {
  return {
    name: pool.role,
    role: poolRole(pool),
    // Several ports: the router makes each address x port an endpoint, and subscribes the one on
    // ports[j] to KV events on kvEvents.port + j (vLLM offsets the KV-events port by the rank; the
    // expert-parallel pool's script lines that up per pod).
    discovery: ports.length === 1 ? { type: 'dns', host, port: ports[0] } : { type: 'dns', host, ports: [...ports] },
    // The replay socket too (ports[j] -> replayPort + j): a restarting router rebuilds its index from it.
    kvEvents: { port: PORTS.kvEvents, replayPort: PORTS.kvEventsReplay, topicPrefix: 'kv@' },
  };
}

function routedPool(pool: PoolPlan, weightPrecision: Precision): RoutedPool {
  return {
    name: pool.role,
    role: poolRole(pool),
    replicas: pool.replicas,
    tensorParallel: pool.parallelism.tensorParallel,
    kvTokensPerReplica: pool.plan.kvTokens,
    maxConcurrencyPerReplica: pool.plan.maxConcurrency,
    // The engine-config builder's sections, shared with the CLI's simulations and `sizeFor`.
    cost: costSections(pool.plan, weightPrecision),
  };
}

function poolRole(pool: PoolPlan): 'prefill' | 'decode' {
  if (pool.role === 'serve') {
    throw new Error(`a '${pool.role}' pool has no place behind the prefill/decode router; give it the prefill or decode role`);
  }
  return pool.role;
}

/** RouterPolicy's name, which its private constructor limits to names the engine knows. */
function policyName(policy: RouterPolicy): SimulationPolicyConfig['name'] {
  const known: ReadonlyArray<SimulationPolicyConfig['name']> = ['kv-aware', 'least-loaded', 'round-robin'];
  const found = known.find(n => n === policy.name);
  if (!found) {
    throw new Error(`'routerPolicy' (${policy.name}) is not a policy the router knows; use RouterPolicy.KV_AWARE, LEAST_LOADED or ROUND_ROBIN`);
  }
  return found;
}

/**
 * The configuration without what only exists on the cluster's pod network: the pod's tokenizer mount,
 * the peer routers' Service and peer port, and the workers' replay port (local sim-workers are
 * subscribed at their own addresses).
 */
export function withoutClusterNetwork(config: RouterConfigFile): RouterConfigFile {
  const { tokenizer: _mount, peers: _peers, peerPort: _peerPort, ...router } = config.router;
  return {
    ...config,
    router,
    pools: config.pools.map((p) => {
      if (p.kvEvents === undefined) return p;
      const { replayPort: _replay, ...kvEvents } = p.kvEvents;
      return { ...p, kvEvents };
    }),
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
  /**
   * The data-parallel rank of the engine behind it (vLLM --data-parallel-rank): KV-event batches
   * naming another rank are dropped. @default - none: learned from its KV events
   */
  readonly dataParallelRank?: number;
}

/**
 * A router configuration with a static endpoint list instead of DNS discovery: the same pools and
 * policy, for processes that are not behind a headless Service (`disagg local`). Pools keep their
 * `kvEvents` (topic prefix); the endpoints carry their own KV-event addresses.
 *
 * @throws when an endpoint names a pool the configuration lacks
 */
export function withStaticEndpoints(config: RouterConfigFile, endpoints: StaticRouterEndpoint[]): RouterConfigFile {
  const pools = config.pools.map(({ discovery: _dns, ...rest }) => rest);
  for (const e of endpoints) {
    if (!pools.some(p => p.name === e.pool)) {
      throw new Error(`endpoint ${e.url} names pool '${e.pool}', which the configuration lacks; use one of ${pools.map(p => p.name).join(', ')}`);
    }
  }
  return {
    ...config,
    pools,
    endpoints: endpoints.map(e => ({
      pool: e.pool,
      url: e.url,
      ...(e.kvEventsEndpoint ? { kvEventsEndpoint: e.kvEventsEndpoint } : {}),
      ...(e.dataParallelRank !== undefined ? { dataParallelRank: e.dataParallelRank } : {}),
    })),
  };
}
