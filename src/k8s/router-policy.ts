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
    return new RouterPolicy('kv-aware', weights);
  }

  /** The policy name the engine reads: 'kv-aware', 'least-loaded' or 'round-robin'. */
  public readonly name: string;
  /** Score weights by term (empty for policies without a score). */
  public readonly weights: { [term: string]: number };

  private constructor(name: string, weights: { [term: string]: number }) {
    this.name = name;
    this.weights = weights;
  }
}
