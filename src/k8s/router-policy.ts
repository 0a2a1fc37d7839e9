/**
 * Weights of the KV-aware routing score.
 */
export interface KvAwarePolicyOptions {
  /**
   * Weight of the prefix-cache overlap (cached prompt blocks on the candidate pod).
   * @default 3 (llm-d's endpoint-picker default)
   */
  readonly prefixWeight?: number;
  /**
   * Weight of the queue length (waiting requests).
   * @default 2 (llm-d's default)
   */
  readonly queueWeight?: number;
  /**
   * Weight of the KV cache utilization.
   * @default 2 (llm-d's default)
   */
  readonly kvUsageWeight?: number;
  /**
   * How long, in milliseconds, a prompt the router routed counts as cached on its endpoint before
   * the endpoint's KV events confirm it (precise prefix routing only). It keeps a burst of requests
   * that share a prefix together in the second or so before the first one's prefill publishes its
   * blocks; 0 routes on the events alone.
   * @default 2000 (the engine's default; not written to the router config)
   */
  readonly pendingBlocksMs?: number;
}

/**
 * How the router picks a decode (and prefill) endpoint for each request.
 *
 * An enum-like class: the static members, or `RouterPolicy.kvAware({...})` for other weights.
 */
export class RouterPolicy {
  /**
   * Score endpoints by prefix-cache overlap, queue length and KV utilization, with llm-d's default
   * weights (prefix 3, queue 2, KV usage 2).
   */
  public static readonly KV_AWARE = RouterPolicy.kvAware({});

  /** Send each request to the endpoint with the fewest requests in flight. */
  public static readonly LEAST_LOADED = new RouterPolicy('least-loaded', {});

  /** Rotate over endpoints; a baseline that ignores cache and load. */
  public static readonly ROUND_ROBIN = new RouterPolicy('round-robin', {});

  /**
   * The KV-aware policy with custom weights.
   *
   * @throws when a weight is negative or every weight is 0
   */
  public static kvAware(options: KvAwarePolicyOptions): RouterPolicy {
    const weights = {
      prefix: options.prefixWeight ?? 3,
      queue: options.queueWeight ?? 2,
      kvUsage: options.kvUsageWeight ?? 2,
    };
    for (const [field, value] of Object.entries(weights)) {
      if (!(Number.isFinite(value) && value >= 0)) {
        throw new Error(`'${field}Weight' (${value}) must be a number >= 0`);
      }
    }
    if (weights.prefix + weights.queue + weights.kvUsage === 0) {
      throw new Error("'routerPolicy' weights are all 0; give at least one of prefixWeight, queueWeight, kvUsageWeight a positive value");
    }
    const pending = options.pendingBlocksMs;
    // The engine's bound (engine/src/core/routing_policy.cc, pendingBlocksMs).
    if (pending !== undefined && !(Number.isInteger(pending) && pending >= 0 && pending <= 600_000)) {
      throw new Error(`'pendingBlocksMs' (${pending}) must be a whole number of milliseconds from 0 to 600000; ` +
        'about the time from routing a request to its prefill publishing KV events (2000 by default), or 0 for the events alone');
    }
    return new RouterPolicy('kv-aware', weights, pending === undefined ? {} : { pendingBlocksMs: pending });
  }

  /** The policy name the engine reads: 'kv-aware', 'least-loaded' or 'round-robin'. */
  public readonly name: string;
  /** Score weights by term (empty for policies without a score). */
  public readonly weights: { [term: string]: number };
  /** Further policy knobs by the engine's name (`policy.options`), only those given explicitly. */
  public readonly options: { [name: string]: number };

  private constructor(name: string, weights: { [term: string]: number }, options: { [name: string]: number } = {}) {
    this.name = name;
    this.weights = weights;
    this.options = options;
  }
}
