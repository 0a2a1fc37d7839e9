/**
 * What the native engine addon answers (engine/src/addon): the cost model's step times, simulation
 * summaries and planner results, and its progress reports. These are the addon's outputs, not the
 * configuration: the configuration's types are generated from the schema (./engine-config.ts).
 *
 * Internal: not exported from src/index.ts.
 */

/** Step shapes to evaluate; each value is a whole number from 1 to 1e9, each list 1 to 64 long. */
export interface CostProbes {
  /** Prompt lengths prefilled from an empty cache. @default [128, 512, 2048, 8192] */
  readonly prefillTokens?: number[];
  /** Decode batch sizes. @default [1, 8, 32, 128] */
  readonly decodeBatches?: number[];
  /** Tokens in the KV cache of each decoding sequence. @default 4096 */
  readonly contextTokensPerSequence?: number;
  /** Prefill chunk added to each decode batch for the mixed points. @default 512 */
  readonly mixedChunkTokens?: number;
  /** Prompt lengths whose KV cache moves from prefill to decode. @default [1024, 8192, 32768] */
  readonly transferTokens?: number[];
}

/** Time of one step, by roofline term: total = max(compute, memory) + communication + overhead. */
export interface StepTime {
  readonly computeSeconds: number;
  readonly memorySeconds: number;
  /** All-reduces plus the charged expert-parallel all-to-all. */
  readonly communicationSeconds: number;
  /** The charged expert-parallel all-to-all alone (part of communicationSeconds); 0 without expert parallelism. */
  readonly allToAllSeconds: number;
  readonly overheadSeconds: number;
  readonly totalSeconds: number;
}

/** A prefill of `tokens` prompt tokens from an empty cache. */
export interface PrefillStepTime extends StepTime {
  readonly tokens: number;
}

/** A decode step of `sequences` sequences. */
export interface DecodeStepTime extends StepTime {
  readonly sequences: number;
  readonly contextTokensPerSequence: number;
}

/** A step with one prefill chunk and a decode batch. */
export interface MixedStepTime extends StepTime {
  readonly prefillTokens: number;
  readonly sequences: number;
  readonly contextTokensPerSequence: number;
}

/** Moving the KV cache of `tokens` tokens over the fabric. */
export interface KvTransferTime {
  readonly tokens: number;
  readonly bytes: number;
  readonly seconds: number;
}

/** The cost model's step times at every probe point (same JSON as `disagg-engine cost`). */
export interface StepTimes {
  readonly tensorParallel: number;
  readonly prefill: PrefillStepTime[];
  readonly decode: DecodeStepTime[];
  readonly mixed: MixedStepTime[];
  readonly kvTransfer: KvTransferTime[];
}

/** One configuration field as the engine reads it. */
export interface CostModelField {
  readonly section: string;
  readonly key: string;
  readonly required: boolean;
  /** Present when the field is optional. */
  readonly defaultValue?: number;
  readonly constraint: 'positive' | 'nonNegative' | 'fraction' | 'positiveInteger' | 'wholeNumber';
}


/** Distribution of one latency, in seconds. */
export interface LatencyStats {
  readonly count: number;
  readonly mean: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
}

/** Summary of one simulation (engine/include/disagg/metrics.h). */
export interface SimulationResult {
  readonly submitted: number;
  readonly completed: number;
  readonly rejected: number;
  readonly durationSeconds: number;
  readonly ttftSeconds: LatencyStats;
  readonly tpotSeconds: LatencyStats;
  readonly itlSeconds: LatencyStats;
  readonly e2eSeconds: LatencyStats;
  readonly goodRequests: number;
  readonly goodputShare: number;
  readonly goodputRequestsPerSecond: number;
  readonly requestsPerSecond: number;
  readonly outputTokensPerSecond: number;
  readonly inputTokensPerSecond: number;
  readonly prefixHitRate: { readonly gpu: number; readonly host: number; readonly disk: number; readonly remote: number };
  readonly preemptions: number;
  readonly disaggregatedRequests: number;
  readonly kvTransferBytes: number;
  /** Traffic per lower tier; present only when a pool has tiers. */
  readonly kvTiers?: { readonly [tier: string]: { readonly bytesLoaded: number; readonly bytesOffloaded: number; readonly offloadsSkipped: number } };
  readonly meanUtilization: number;
  readonly workerUtilization: number[];
}

/** One point of a rate sweep. */
export interface SweepPoint {
  readonly ratePerSecond: number;
  readonly summary: SimulationResult;
}

/** One pool of a planned deployment. */
export interface PlannedPool {
  readonly role: 'both' | 'prefill' | 'decode';
  /** The option's label. */
  readonly option: string;
  readonly tensorParallel: number;
  readonly acceleratorsPerReplica: number;
  readonly replicas: number;
}

/** One candidate deployment of the planner. */
export interface PlanCandidate {
  /** 1-based rank among evaluated candidates; null when pruned or infeasible. */
  readonly rank: number | null;
  readonly mode: 'aggregated' | 'disaggregated';
  readonly pools: PlannedPool[];
  readonly accelerators: number;
  readonly costPerHour: number;
  readonly status: 'evaluated' | 'pruned' | 'infeasible';
  /** Roofline bound of the arrival rate. */
  readonly boundRatePerSecond: number;
  /** Highest grid rate at which the target share meets both SLOs (0: none). */
  readonly goodputRatePerSecond: number;
  /** Passed at the search cap: the goodput may be higher. */
  readonly capped: boolean;
  /** goodput x 3600 / costPerHour: requests per dollar (or per accelerator-hour). */
  readonly score: number;
  readonly meetsRequiredRate: boolean;
  readonly simulations: number;
  /** The simulation at the goodput rate; null when none ran there. */
  readonly summary: SimulationResult | null;
}

/** The planner's answer. */
export interface PlanResult {
  readonly total: number;
  readonly evaluated: number;
  readonly pruned: number;
  readonly infeasible: number;
  readonly simulations: number;
  readonly targetShare: number;
  readonly probeSeconds: number;
  readonly grid: { readonly minRatePerSecond: number; readonly rateResolution: number };
  /** Planned for a trace: its records and own arrival rate, the rate required of every candidate. */
  readonly trace?: { readonly records: number; readonly ratePerSecond: number };
  /** Evaluated candidates by rank, then pruned, then infeasible ones. */
  readonly candidates: PlanCandidate[];
}

/** Progress of a long engine call: `done` of `total` steps (candidates, or sweep points). */
export interface EngineProgress {
  readonly done: number;
  readonly total: number;
  readonly simulations: number;
  /** Planner: the best score so far. */
  readonly bestScore: number;
}
