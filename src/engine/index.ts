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
