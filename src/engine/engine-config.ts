/**
 * Names for the sections of the engine's JSON configuration. Every type here is a part of
 * `DisaggEngineConfiguration`, which is generated from engine/schema/engine-config.schema.json
 * (src/engine/engine-config.generated.ts, `npx projen engine:schema-types`): no field is written
 * twice, so the TypeScript side cannot drift from the schema the C++ engine is tested against.
 *
 * Internal: not exported from src/index.ts.
 */
import type { DisaggEngineConfiguration, KvTiers, LengthDistribution } from './engine-config.generated';

/** The whole engine configuration (engine/schema/engine-config.schema.json). */
export type EngineConfig = DisaggEngineConfiguration;

/** The `model` section: resolved numbers of the served model. */
export type EngineModelConfig = EngineConfig['model'];
/** The `hardware` section: one accelerator and its links. */
export type EngineHardwareConfig = EngineConfig['hardware'];
/** The `parallel` section. */
export type EngineParallelConfig = NonNullable<EngineConfig['parallel']>;
/** The `efficiency` section: fractions of peak a real step reaches. */
export type EngineEfficiencyConfig = NonNullable<EngineConfig['efficiency']>;

/** The parts of the engine configuration that the cost model reads. */
export type EngineCostConfig = Pick<EngineConfig, 'model' | 'hardware' | 'parallel' | 'efficiency'>;

/** The `router` section, read by `disagg-engine router`. */
export type EngineRouterSection = NonNullable<EngineConfig['router']>;
/** The `policy` section: routing policy, weights, disaggregation threshold (router and simulator). */
export type SimulationPolicyConfig = NonNullable<EngineConfig['policy']>;
/** One entry of `pools[]`: a router's pool (name, role, discovery) or a simulated pool of replicas. */
export type SimulationPoolConfig = NonNullable<EngineConfig['pools']>[number];
/** One entry of `endpoints[]`: a static endpoint of the router. */
export type EngineEndpointConfig = NonNullable<EngineConfig['endpoints']>[number];

/** A distribution of token counts (`$defs/lengthDistribution`). */
export type LengthDistributionConfig = LengthDistribution;
/** One KV tier below a replica's HBM prefix cache (`$defs/kvTiers`). */
export type KvTierConfig = KvTiers[number];
/** The traffic a simulation runs (engine/include/disagg/workload.h). */
export type WorkloadConfig = NonNullable<EngineConfig['workload']>;
/** Latency targets of goodput. */
export type SloConfig = NonNullable<EngineConfig['slo']>;
/** The `planner` section (engine/README.md, Planner). */
export type PlannerSectionConfig = NonNullable<EngineConfig['planner']>;
/** One tensor-parallel choice of the planner: a pool template the planner replicates. */
export type PlannerOptionConfig = PlannerSectionConfig['tensorParallelOptions'][number];

/** A simulation (and planner) configuration: `workload` is required by simulate() and plan(). */
export type SimulationConfig = EngineConfig & Required<Pick<EngineConfig, 'workload'>>;
