import { KvTier } from './kv-tier';

/**
 * Latency targets of a deployment: a request is good when it meets both.
 */
export interface ServingSlo {
  /**
   * Time to first token, in seconds.
   */
  readonly ttftSeconds: number;
  /**
   * Time per output token after the first, in seconds.
   */
  readonly tpotSeconds: number;
  /**
   * Share of requests that must meet both targets.
   * @default 0.9
   */
  readonly targetShare?: number;
}

/**
 * The traffic a deployment must serve, as the planner simulates it (Poisson arrivals).
 */
export interface TrafficProfile {
  /**
   * Mean prompt tokens of a request (new text; a tenant's system prompt comes on top).
   */
  readonly inputTokens: number;
  /**
   * Mean output tokens of a request.
   */
  readonly outputTokens: number;
  /**
   * Requests per second the deployment must sustain within the SLO; deployments that cannot rank
   * after those that can.
   * @default 0 - rank by goodput per accelerator-dollar alone
   */
  readonly requestsPerSecond?: number;
  /**
   * Turns of a multi-turn chat session (each turn's prompt extends the previous one, so prefix
   * caching matters). 1 means independent requests.
   * @default 1
   */
  readonly conversationTurns?: number;
  /**
   * Tenants, each with its own system prompt of `systemPromptTokens` (Zipf popularity).
   * @default 0
   */
  readonly tenants?: number;
  /**
   * Tokens of each tenant's system prompt.
   * @default 1024
   */
  readonly systemPromptTokens?: number;
  /**
   * Requests in each simulation run (more: steadier estimates, slower synthesis).
   * @default 400
   */
  readonly simulatedRequests?: number;
  /**
   * Seed of the simulated traffic; the same seed gives the same sizing.
   * @default 1
   */
  readonly seed?: number;
}

/**
 * Size a deployment's pools with the simulation-based planner at synth time.
 *
 * The planner (the engine addon's `planSync`, the same search as `disagg plan --simulate`) tries
 * every split of at most `maxAccelerators` into prefill and decode replicas and tensor-parallel
 * sizes, finds each one's goodput (the highest request rate at which `slo.targetShare` of the
 * requests meet both targets) by simulating `workload`, and keeps the one with the highest goodput
 * per accelerator-dollar. It runs synchronously while the construct is built (seconds; tens of
 * seconds for large budgets), needs the engine addon (`npx projen engine`), and is deterministic
 * for a seed, so synthesis stays repeatable.
 */
export interface PoolSizing {
  /**
   * Latency targets.
   */
  readonly slo: ServingSlo;
  /**
   * The traffic to size for.
   */
  readonly workload: TrafficProfile;
  /**
   * Accelerators the prefill and decode pools may use together.
   * @default - two nodes of the decode pool's instance type
   */
  readonly maxAccelerators?: number;
  /**
   * Price of one instance-hour of the prefill pool's instance type (and of the decode pool's,
   * unless `decodePricePerInstanceHour` is set); only ratios matter.
   * @default - every accelerator-hour costs the same
   */
  readonly pricePerInstanceHour?: number;
  /**
   * Price of one instance-hour of the decode pool's instance type.
   * @default - `pricePerInstanceHour`
   */
  readonly decodePricePerInstanceHour?: number;
  /**
   * The KV tiers below HBM that the prefill replicas will have: the same `KvTier`s as the
   * `TieredKvCache` attached to the prefill pool, so that the planner counts the prefixes they keep
   * (a load from host memory or NVMe instead of a recompute). Link speeds are the engine's stated
   * assumptions: each accelerator's PCIe link for host memory, the replica's share of the
   * instance-store drives, a 100 Gbit/s connection to the remote store.
   * @default - HBM only
   */
  readonly kvCacheTiers?: KvTier[];
}
