/**
 * Loader of the native engine addon (engine/src/addon/addon.cc) and the calls into it.
 *
 * Internal: not exported from src/index.ts, so importing the construct library never needs the
 * addon. The addon is loaded on first use by loadEngine(); build it with `npx projen engine`.
 */
import * as fs from 'fs';
import * as path from 'path';
import type { EngineCostConfig, SimulationConfig } from './engine-config';
import type { CostModelField, CostProbes, EngineProgress, PlanResult, SimulationResult, StepTimes, SweepPoint } from './results';

/** Environment variable that points at a prebuilt `disagg_engine.node` elsewhere. */
export const ENGINE_ADDON_ENV = 'DISAGG_ENGINE_ADDON';

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

/** Simulator and planner entry points of the native module (see engine/src/addon/simulation_binding.cc). */
export interface NativeSimulation {
  simulate(configJson: string, onProgress?: (p: EngineProgress) => void): Promise<string>;
  simulateSweep(configJson: string, rates: number[], onProgress?: (p: EngineProgress) => void): Promise<string>;
  plan(configJson: string, onProgress?: (p: EngineProgress) => void): Promise<string>;
  planSync(configJson: string): string;
  probeWindowSeconds(minSeconds: number, ttftSeconds: number, tpotSeconds: number, meanOutputTokens: number): number;
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
 * How long a run's arrivals must span to judge a deployment at steady state: `minSeconds` or four
 * request lifetimes at the SLO's edge (TTFT + mean output x TPOT), whichever is longer, at most
 * 600 s (the planner's probe window, engine/include/disagg/planner.h). 0 when `minSeconds` is 0.
 */
export function probeWindowSeconds(minSeconds: number, slo: { ttftSeconds: number; tpotSeconds: number }, meanOutputTokens: number): number {
  return native().probeWindowSeconds(minSeconds, slo.ttftSeconds, slo.tpotSeconds, meanOutputTokens);
}

/**
 * The planner on the calling thread: blocks until the search ends (seconds to tens of seconds).
 * Only for synchronous callers such as construct constructors at synth time.
 * @throws Error when the addon is missing or the configuration is invalid
 */
export function planSync(config: SimulationConfig): PlanResult {
  return JSON.parse(native().planSync(JSON.stringify(config))) as PlanResult;
}


/**
 * One pool's scaling limits and windows, in the simulator's `pools[i].autoscaling` names
 * (engine/include/disagg/autoscaler.h, AutoscalePolicy); absent fields take the engine's defaults.
 */
export interface AutoscalePolicyInput {
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly target?: number;
  readonly tolerance?: number;
  readonly scaleUpStabilizationSeconds?: number;
  readonly scaleDownStabilizationSeconds?: number;
  readonly scaleToZero?: boolean;
  readonly idleSecondsBeforeZero?: number;
}

/** The engine's scaling rule for one pool (disagg::PoolAutoscaler), live in this process. */
export interface PoolAutoscalerRule {
  /**
   * The replica count the pool should have now (PoolAutoscaler::evaluate): `now` in seconds,
   * non-decreasing; `ready` the replicas the pressure was measured over; `requested` the replicas
   * asked for (ready + starting, draining ones excluded); `lastRequest` when the pool last got a
   * request (-Infinity: never).
   */
  evaluate(now: number, ready: number, requested: number, pressure: number, lastRequest: number): number;
  /** The raw recommendation of the last evaluate(), before the stabilization windows. */
  lastRecommendation(): number;
}

interface NativeAutoscaler {
  PoolAutoscaler: new (policy: AutoscalePolicyInput, intervalSeconds: number, field: string) => PoolAutoscalerRule;
}

/**
 * The scaling rule the simulator and the cluster's KEDA/HPA apply (engine/src/addon/autoscaler_binding.cc),
 * evaluated every `intervalSeconds`.
 * @throws Error when the addon is missing or lacks the rule (rebuild it), or the policy is invalid
 * (the message names `field` + the key, the value and the fix)
 */
export function poolAutoscaler(policy: AutoscalePolicyInput, intervalSeconds: number, field: string): PoolAutoscalerRule {
  const engine = loadEngine() as unknown as Partial<NativeAutoscaler>;
  if (typeof engine.PoolAutoscaler !== 'function') {
    throw new Error(`The disagg engine addon at ${engineAddonPath()} predates the scaling rule binding; rebuild it with \`npx projen engine\``);
  }
  return new engine.PoolAutoscaler(policy, intervalSeconds, field);
}
