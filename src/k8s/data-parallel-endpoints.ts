/**
 * How the data-parallel ranks of an {@link ExpertParallelPool} take HTTP requests.
 *
 * An enum-like class. vLLM offers both: one API server per rank ("external load balancing", each
 * `vllm serve` started with `--data-parallel-rank` on its own port), or one API server on the group's
 * first node that balances over every rank ("internal load balancing", the other nodes `--headless`).
 *
 * @see https://docs.vllm.ai/en/latest/serving/data_parallel_deployment.html
 */
export class DataParallelEndpoints {
  /**
   * One vLLM API server per local rank, on ports 8000, 8001, ... of every pod; the Service and the
   * InferencePool list every port (`targetPorts`, at most 8 per pod). Each rank keeps its own KV cache,
   * so a KV-aware endpoint picker sees and routes to each rank's cache. Behind a
   * `DisaggregatedInference` the router discovers every rank's port of every pod, and subscribes local
   * rank j to KV events on port 5557 + j. The default, standalone or inside a `DisaggregatedInference`.
   */
  public static readonly PER_RANK = new DataParallelEndpoints('per-rank');

  /**
   * One vLLM API server on the leader pod (port 8000) that spreads requests over every rank by queue
   * length; the other pods run `--headless`. One endpoint per group, so a KV-aware router sees one
   * endpoint (and only the rank-0 KV events, on 5557) for all the group's caches.
   */
  public static readonly SINGLE = new DataParallelEndpoints('single');

  /** 'per-rank' or 'single'. */
  public readonly name: string;

  private constructor(name: string) {
    this.name = name;
  }
}
