/**
 * How one pool scales on its SLO pressure (the prefill pool on predicted time to first token, the
 * decode pool on predicted time per output token and KV cache use; see `DisaggregatedInference.slo`).
 *
 * The rule is the Kubernetes HPA algorithm, which KEDA also runs: `desired = ceil(current x pressure /
 * targetPressure)`, unchanged within 10% of the target (the HPA tolerance), clamped to
 * `[minReplicas, maxReplicas]`; scale-ups take the highest recommendation over
 * `scaleUpStabilizationSeconds`, scale-downs the highest over `scaleDownStabilizationSeconds`.
 * A replica is one vLLM server (a pod), or one LeaderWorkerSet group when a replica spans nodes.
 */
export interface PoolAutoscaling {
  /**
   * The most replicas. The accelerated node groups must hold this many (`InferenceCluster.addWorkload`
   * checks their `maxSize`, or a Karpenter NodePool's `maxNodes`).
   */
  readonly maxReplicas: number;
  /**
   * The fewest replicas while the pool is in use (at least 1; scale to zero with `scaleToZero`).
   * @default 1
   */
  readonly minReplicas?: number;
  /**
   * The SLO pressure the autoscaler aims at; 1.0 is the SLO. Prefill: the prompt tokens arriving over
   * what the pool's replicas sustain with 99% of requests within the TTFT SLO (queueing theory at the
   * pool's size and the prompts' spread: one replica sustains less of its rate than four), or the
   * predicted TTFT of the next request over the SLO. Decode: KV cache or sequence slots against 90%
   * full, or the predicted TPOT over the SLO. HPA's 10% tolerance scales up above 1.1 x the target.
   * In (0, 1].
   *
   * Measured in simulation on a day-shaped load (Llama 3.3 70B FP8 on p5, 7.3 minutes to start a
   * replica; bench/notes/autoscaling.md): 0.95 saves 31% of the GPU-hours of the smallest static
   * deployment meeting the SLO at TP4 (32% at TP2) with 1.000x its good requests; 0.9 saves 29%.
   * Take less where load can jump faster than a replica starts.
   * @default 0.95
   */
  readonly targetPressure?: number;
  /**
   * Seconds over which a scale-up takes the highest recommendation (0: at once). At most 3600.
   * @default 0
   */
  readonly scaleUpStabilizationSeconds?: number;
  /**
   * Seconds over which a scale-down takes the highest recommendation, so a short lull does not
   * release accelerators that take minutes to come back. At most 3600.
   * @default 300
   */
  readonly scaleDownStabilizationSeconds?: number;
  /**
   * Scale the pool to zero replicas after `idleSecondsBeforeZero` without a request for it, and back
   * to `minReplicas` when one arrives (the router holds it and reports pressure). Needs
   * `Autoscaler.KEDA`; not for a decode pool behind an InferencePool (the gateway, not the router,
   * picks its pods, so nothing would hold a request while it starts). The first request after an idle
   * period waits for a node and a model load.
   * @default false
   */
  readonly scaleToZero?: boolean;
  /**
   * With `scaleToZero`: seconds without a request before the pool goes to zero (KEDA's `cooldownPeriod`).
   * @default 600
   */
  readonly idleSecondsBeforeZero?: number;
}
