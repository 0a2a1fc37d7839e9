// disagg/simulation_config.h — the one mapping from the engine's JSON configuration to the
// simulator's and planner's structs.
//
// `disagg-engine simulate|plan --config FILE.json` and the addon's simulate()/plan() all read the
// document with parse_json (disagg/json_value.h) and these functions, so the keys, defaults and
// error messages are the same everywhere. Keys are documented in engine/README.md ("Simulation",
// "Planner") and engine/schema/engine-config.schema.json. Every failure is one message naming the
// field, the value received and the fix.
#pragma once

#include <string>

#include "disagg/expected.h"
#include "disagg/json_value.h"
#include "disagg/planner.h"
#include "disagg/simulator.h"
#include "disagg/workload.h"

namespace disagg {

/// A simulation read from the configuration document.
struct SimulationSetup {
  SimulationConfig config;
  WorkloadSpec workload;
  bool from_trace = false;
  std::string trace_path;
  TraceSpec trace;
};

/// Reads pools (with per-pool cost-model overrides), policy, router.kvBlockSize, workload, slo and
/// seed. Failure: one message naming the field, the value and the fix.
Expected<SimulationSetup, std::string> read_simulation(const JsonValue& doc);

/// Like read_simulation, but `pools` is optional (the planner makes its own pools).
Expected<SimulationSetup, std::string> read_simulation_base(const JsonValue& doc);

/// Reads the `planner` section (its tensorParallelOptions are pool templates, read like pools,
/// with the top-level cost-model sections as defaults).
Expected<PlannerSpec, std::string> read_planner(const JsonValue& doc);

/// The workload of a setup: the generator, or the trace file replay.
Expected<Workload, std::string> make_workload(const SimulationSetup& setup);

/// The planner for `setup`: its generated workload, or its trace read from trace_path
/// (load_plan_trace) when from_trace. Failure: that of load_plan_trace or run_planner.
Expected<PlanResult, PlanError> plan_setup(const PlannerSpec& spec, const SimulationSetup& setup,
                                           const PlanProgressFn& progress = {});

/// Runs one simulation of `setup` and returns the summary JSON of disagg/metrics.h to_json; with an
/// `autoscaling` section it gains "scaling" (scaling_to_json). `progress` gets the virtual time.
Expected<std::string, std::string> simulate_to_json(const SimulationSetup& setup, const SimProgressFn& progress = {});

/// A scaling report as JSON: horizonSeconds, windowSeconds, pools [{name, role, gpusPerReplica,
/// gpuHours, peakReplicas, scaleUps, scaleDowns, provisionSeconds, drainedRequests, lostOnScaleDown}],
/// gpuHours, lostOnScaleDown, heldForCapacity, goodRequests, goodPerGpuHour, and windows as columns
/// {count, startSeconds, arrivals, good, promptTokens, ttftP90, tpotP90 (seconds; null for a window
/// none of whose arrivals completed), replicas[pool][window], readyReplicas[pool][window]}.
std::string scaling_to_json(const ScalingReport& report, const MetricsSummary& summary);

/// Provisioning defaults of an autoscaled pool (engine/README.md, "Autoscaling"): a new GPU node
/// through Karpenter and the EKS bootstrap, the serving image, the engine's start (compile, graphs).
inline constexpr double kDefaultNodeStartSeconds = 240;
inline constexpr double kDefaultImagePullSeconds = 120;
inline constexpr double kDefaultEngineStartSeconds = 60;

}  // namespace disagg
