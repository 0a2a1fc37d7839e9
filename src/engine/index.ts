/**
 * TypeScript face of the native engine addon (engine/src/addon/addon.cc).
 *
 * Internal: not exported from src/index.ts, so importing the construct library never needs the
 * addon. The addon is loaded on first use by loadEngine(); build it with `npx projen engine`.
 */
import * as fs from 'fs';
import * as path from 'path';

/** Environment variable that points at a prebuilt `disagg_engine.node` elsewhere. */
export const ENGINE_ADDON_ENV = 'DISAGG_ENGINE_ADDON';

/** The `model` section of the engine configuration (engine/schema/engine-config.schema.json). */
export interface EngineModelConfig {
  /** Model name, for reports only. @default - none */
  readonly name?: string;
  /** Weight bytes one tensor-parallel rank holds. */
  readonly weightBytesPerRank: number;
  /** KV-cache bytes of one token for the whole model. */
  readonly kvBytesPerToken: number;
  /** KV bytes of one token on one rank. @default - kvBytesPerToken / tensorParallel */
  readonly kvBytesPerTokenPerRank?: number;
  /** Parameters one token passes through (MoE: the active ones). */
  readonly activeParameters: number;
  /** Transformer layers. */
  readonly layers: number;
  /** Hidden size. */
  readonly hiddenSize: number;
  /** Query heads x head dim. @default - hiddenSize */
  readonly attentionWidth?: number;
  /** Bytes of one activation element in all-reduces. @default 2 */
  readonly activationBytes?: number;
}

/** The `hardware` section: one accelerator and its links. */
export interface EngineHardwareConfig {
  /** Dense peak FLOP/s at the compute precision. */
  readonly peakFlopsPerSecond: number;
  /** HBM bandwidth in bytes/s. */
  readonly hbmBytesPerSecond: number;
  /** Per-accelerator, one-direction intra-node link bandwidth; required when tensorParallel > 1. @default 0 */
  readonly interconnectBytesPerSecond?: number;
  /** Fixed latency of one all-reduce, in seconds. @default 8e-6 */
  readonly interconnectLatencySeconds?: number;
  /** Bandwidth one pod gets for a KV transfer, in bytes/s. */
  readonly fabricBytesPerSecond: number;
  /** Fixed latency of one KV transfer, in seconds. @default 3e-5 */
  readonly fabricLatencySeconds?: number;
}

/** The `parallel` section. */
export interface EngineParallelConfig {
  /** Ranks that split every layer. @default 1 */
  readonly tensorParallel?: number;
}

/** The `efficiency` section: fractions of peak a real step reaches. */
export interface EngineEfficiencyConfig {
  /** Fraction of peak FLOP/s. @default 0.5 */
  readonly compute?: number;
  /** Fraction of HBM bandwidth. @default 0.7 */
  readonly memory?: number;
  /** Fraction of interconnect bandwidth. @default 0.7 */
  readonly interconnect?: number;
  /** Fraction of fabric bandwidth. @default 0.7 */
  readonly fabric?: number;
  /** Fixed cost of every non-empty step, in seconds. @default 0 */
  readonly stepOverheadSeconds?: number;
}

/** The parts of the engine configuration that the cost model reads. */
export interface EngineCostConfig {
  /** Resolved model numbers. */
  readonly model: EngineModelConfig;
  /** Resolved hardware numbers. */
  readonly hardware: EngineHardwareConfig;
  /** Parallelism of one replica. @default - tensorParallel 1 */
  readonly parallel?: EngineParallelConfig;
  /** Efficiency factors. @default - the defaults of each field */
  readonly efficiency?: EngineEfficiencyConfig;
}

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
  readonly communicationSeconds: number;
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
  readonly constraint: 'positive' | 'nonNegative' | 'fraction' | 'positiveInteger';
}

/** What the native module exports. */
export interface NativeEngine {
  version(): string;
  /** Resolves to the report as JSON text. */
  costModel(config: unknown, probes?: unknown): Promise<string>;
  costModelFields(): CostModelField[];
}

let cached: NativeEngine | undefined;

/**
 * Where the addon is expected: $DISAGG_ENGINE_ADDON, else
 * <package root>/engine/build-addon/Release/disagg_engine.node. The package root is two levels up
 * from this file, which lives in src/engine (ts-jest) or lib/engine (compiled).
 */
export function engineAddonPath(): string {
  const fromEnv = process.env[ENGINE_ADDON_ENV];
  if (fromEnv) {
    return path.resolve(fromEnv);
  }
  return path.resolve(__dirname, '..', '..', 'engine', 'build-addon', 'Release', 'disagg_engine.node');
}

/**
 * Loads the native addon once and caches it.
 * @throws Error naming the path and how to build the addon when it is missing or cannot load.
 */
export function loadEngine(): NativeEngine {
  if (cached) {
    return cached;
  }
  const file = engineAddonPath();
  if (!fs.existsSync(file)) {
    throw new Error(
      `The disagg engine addon is not built: ${file} does not exist. ` +
      'Run `npx projen engine` at the repository root (needs cmake and a C++20 compiler; see engine/README.md), ' +
      `or set ${ENGINE_ADDON_ENV} to a built disagg_engine.node.`,
    );
  }
  try {
    // A runtime path: the addon is optional and must not load when the library is imported.
    // eslint-disable-next-line @typescript-eslint/no-require-imports, import/no-dynamic-require
    cached = require(file) as NativeEngine;
  } catch (err) {
    throw new Error(
      `The disagg engine addon at ${file} failed to load (${(err as Error).message}). ` +
      'Rebuild it with `npx projen engine` for this Node.js version and platform.',
    );
  }
  return cached;
}

/** The engine version, e.g. "0.1.0". @throws when the addon is not built. */
export function engineVersion(): string {
  return loadEngine().version();
}

/**
 * Step times of the cost model for `config`, computed on a worker thread.
 * Rejects (never throws) when the addon is missing or the configuration or probes are invalid;
 * the message names the field, the value received and the fix.
 */
export async function costModel(config: EngineCostConfig, probes?: CostProbes): Promise<StepTimes> {
  const json = await loadEngine().costModel(config, probes);
  return JSON.parse(json) as StepTimes;
}

/** Every configuration field the cost model reads, with its default and rule (for schema checks). */
export function costModelFields(): CostModelField[] {
  return loadEngine().costModelFields();
}

// ---- simulator and planner ------------------------------------------------------------------------

/** A distribution of token counts: fixed (mean), uniform [min, max], or lognormal (mean, stddev), clamped to [min, max]. */
export interface LengthDistributionConfig {
  /** @default 'fixed' */
  readonly distribution?: 'fixed' | 'uniform' | 'lognormal';
  readonly mean?: number;
  /** @default 0 */
  readonly stddev?: number;
  /** @default 1 */
  readonly min?: number;
  /** @default 1048576 */
  readonly max?: number;
}

/** The traffic a simulation runs (engine/include/disagg/workload.h). */
export interface WorkloadConfig {
  /** @default 'single' */
  readonly kind?: 'single' | 'chat' | 'agentic' | 'trace';
  /** Stop after this many requests (0: no limit). @default 1000 */
  readonly requests?: number;
  /** No request arrives later (0: no limit). @default 0 */
  readonly durationSeconds?: number;
  /** @default 32000 */
  readonly vocab?: number;
  /** Arrivals (of requests, chat sessions or agentic tasks). @default - poisson at 1/s */
  readonly arrival?: {
    readonly process?: 'poisson' | 'gamma' | 'mmpp';
    readonly ratePerSecond?: number;
    readonly cv?: number;
    readonly burstFactor?: number;
    readonly burstShare?: number;
    readonly meanBurstSeconds?: number;
  };
  readonly inputTokens?: LengthDistributionConfig;
  readonly outputTokens?: LengthDistributionConfig;
  /** Shared system prompts, tenants drawn by Zipf popularity. @default - none */
  readonly tenants?: { readonly count?: number; readonly systemPromptTokens?: number; readonly zipfExponent?: number };
  /** Multi-turn sessions (kind chat). */
  readonly chat?: {
    readonly turns?: LengthDistributionConfig;
    readonly followupInputTokens?: LengthDistributionConfig;
    readonly thinkTimeSeconds?: number;
    readonly maxContextTokens?: number;
  };
  /** Fan-out tool calls sharing a context (kind agentic). */
  readonly agentic?: {
    readonly fanout?: number;
    readonly depth?: number;
    readonly toolOutputTokens?: LengthDistributionConfig;
    readonly stepGapSeconds?: number;
  };
  /** JSONL trace replay (kind trace). */
  readonly trace?: { readonly path: string; readonly blockTokens?: number; readonly timeScale?: number; readonly maxRecords?: number };
}

/** Latency targets of goodput: a request is good when it meets both. */
export interface SloConfig {
  /** @default 2 */
  readonly ttftSeconds?: number;
  /** @default 0.1 */
  readonly tpotSeconds?: number;
}

/** Routing policy of a simulation. */
export interface SimulationPolicyConfig {
  /** kv-aware (= llm-d), least-loaded, round-robin, sglang, dynamo, disagg. @default 'round-robin' */
  readonly name: string;
  readonly weights?: { readonly prefix?: number; readonly queue?: number; readonly kvUsage?: number };
  readonly disaggregation?: { readonly minUncachedPromptTokens?: number };
  /** Further PolicyOptions knobs by name (engine/include/disagg/routing.h). */
  readonly options?: Record<string, number>;
  /** @default 'index' */
  readonly prefixSource?: 'index' | 'history';
}

/** A pool template: cost-model overrides and scheduler limits of one replica. */
/**
 * One KV tier below a replica's HBM prefix cache (engine/schema/engine-config.schema.json
 * `$defs/kvTiers`): blocks computed on the GPU are written through to it, and a later prompt's blocks
 * found there are loaded instead of recomputed.
 */
export interface KvTierConfig {
  /** host (CPU memory), disk (local NVMe) or remote (one store shared by every replica that lists it). */
  readonly tier: 'host' | 'disk' | 'remote';
  /** Per replica for host and disk; the store's total for remote (the same in every pool). */
  readonly capacityBytes: number;
  readonly readBytesPerSecond: number;
  readonly writeBytesPerSecond: number;
  /** @default 0 */
  readonly latencySeconds?: number;
  /** Offloads are skipped while the write link is further behind than this. @default 1 */
  readonly maxWriteBacklogSeconds?: number;
}

export interface PoolTemplateConfig {
  readonly tensorParallel?: number;
  readonly weightBytesPerRank?: number;
  readonly model?: Partial<EngineModelConfig>;
  readonly hardware?: Partial<EngineHardwareConfig>;
  readonly parallel?: EngineParallelConfig;
  readonly efficiency?: EngineEfficiencyConfig;
  readonly kvTokensPerReplica?: number;
  readonly kvCacheBytesPerRank?: number;
  /** vLLM --max-num-seqs. @default 256 */
  readonly maxConcurrencyPerReplica?: number;
  /** vLLM --max-num-batched-tokens. @default 8192 */
  readonly maxBatchedTokens?: number;
  /** @default 4096 */
  readonly maxWaitingRequests?: number;
  /** @default true */
  readonly prefixCaching?: boolean;
  /** Mix prompt chunks and decodes in one step (vLLM V1); false = vLLM V0's prefill-first steps. @default true */
  readonly chunkedPrefill?: boolean;
  /** Lower KV tiers, fastest first. @default - none (HBM only) */
  readonly kvTiers?: KvTierConfig[];
}

/** One simulated pool of identical replicas. */
export interface SimulationPoolConfig extends PoolTemplateConfig {
  readonly name: string;
  /** 'both' = aggregated serving. */
  readonly role: 'both' | 'prefill' | 'decode';
  /** @default 1 */
  readonly replicas?: number;
}

/** One tensor-parallel choice of the planner (a pool template the planner replicates). */
export interface PlannerOptionConfig extends PoolTemplateConfig {
  /** For reports, e.g. "p5en.48xlarge tp4". @default - "tp<N>" */
  readonly label?: string;
  /** Which pools it may serve. @default 'any' */
  readonly role?: 'any' | 'prefill' | 'decode' | 'both';
  /** @default - tensorParallel */
  readonly acceleratorsPerReplica?: number;
  /** @default - planner.pricePerAcceleratorHour */
  readonly pricePerAcceleratorHour?: number;
}

/** The `planner` section (engine/README.md, Planner). */
export interface PlannerSectionConfig {
  /** Accelerators the deployment may use in all. */
  readonly maxAccelerators: number;
  /** @default 1 */
  readonly minAccelerators?: number;
  /** @default ['aggregated', 'disaggregated'] */
  readonly modes?: Array<'aggregated' | 'disaggregated'>;
  /** Share of requests that must meet both SLOs. @default 0.9 */
  readonly targetShare?: number;
  /** Lowest rate of the search grid. @default 0.05 */
  readonly minRatePerSecond?: number;
  /** Relative step of the rate grid. @default 0.05 */
  readonly rateResolution?: number;
  /** Search cap = boundSlack x roofline bound. @default 1.5 */
  readonly boundSlack?: number;
  /** Candidates below this goodput rank last. @default 0 */
  readonly requiredRatePerSecond?: number;
  /** @default 1 */
  readonly pricePerAcceleratorHour?: number;
  /** @default true */
  readonly prune?: boolean;
  /** Candidates in the result (0: all). @default 0 */
  readonly keep?: number;
  /** Minimum arrival window of each probe. @default 30 */
  readonly probeSeconds?: number;
  /** How many of the best candidates get exact goodputs. @default 3 */
  readonly rankDepth?: number;
  readonly tensorParallelOptions: PlannerOptionConfig[];
}

/** A simulation (and planner) configuration: the cost-model sections plus the simulation keys. */
export interface SimulationConfig extends EngineCostConfig {
  readonly $comment?: string;
  readonly router?: { readonly servedModelName?: string; readonly kvBlockSize?: number };
  readonly policy?: SimulationPolicyConfig;
  /** Required by simulate(); plan() makes its own. */
  readonly pools?: SimulationPoolConfig[];
  readonly workload: WorkloadConfig;
  readonly slo?: SloConfig;
  /** @default 1 */
  readonly seed?: number;
  /** Required by plan(). */
  readonly planner?: PlannerSectionConfig;
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

/** Simulator and planner entry points of the native module (see engine/src/addon/simulation_binding.cc). */
export interface NativeSimulation {
  simulate(configJson: string, onProgress?: (p: EngineProgress) => void): Promise<string>;
  simulateSweep(configJson: string, rates: number[], onProgress?: (p: EngineProgress) => void): Promise<string>;
  plan(configJson: string, onProgress?: (p: EngineProgress) => void): Promise<string>;
  planSync(configJson: string): string;
}

function native(): NativeSimulation {
  return loadEngine() as unknown as NativeSimulation;
}

/**
 * Simulates `config` on a virtual clock, on a worker thread. Rejects (never throws) when the addon
 * is missing or the configuration is invalid; the message names the field, the value and the fix.
 */
export async function simulate(config: SimulationConfig, onProgress?: (p: EngineProgress) => void): Promise<SimulationResult> {
  const json = await native().simulate(JSON.stringify(config), onProgress);
  return JSON.parse(json) as SimulationResult;
}

/** Simulates `config` once per arrival rate (the workload's arrival rate replaced), in order. */
export async function simulateSweep(config: SimulationConfig, rates: number[], onProgress?: (p: EngineProgress) => void): Promise<SweepPoint[]> {
  const json = await native().simulateSweep(JSON.stringify(config), rates, onProgress);
  return JSON.parse(json) as SweepPoint[];
}

/** Runs the planner over `config.planner` on a worker thread; progress per candidate. */
export async function plan(config: SimulationConfig, onProgress?: (p: EngineProgress) => void): Promise<PlanResult> {
  const json = await native().plan(JSON.stringify(config), onProgress);
  return JSON.parse(json) as PlanResult;
}

/**
 * The planner on the calling thread: blocks until the search ends (seconds to tens of seconds).
 * Only for synchronous callers such as construct constructors at synth time.
 * @throws Error when the addon is missing or the configuration is invalid
 */
export function planSync(config: SimulationConfig): PlanResult {
  return JSON.parse(native().planSync(JSON.stringify(config))) as PlanResult;
}

export * from './engine-config-builder';
