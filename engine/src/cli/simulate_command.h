// The `disagg-engine simulate` subcommand: runs the discrete-event simulator on a JSON config.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "disagg/expected.h"
#include "disagg/simulator.h"
#include "disagg/workload.h"

namespace disagg::cli {

/// A simulation read from the configuration document (see engine/README.md, "Simulation").
struct SimulationSetup {
  SimulationConfig config;
  WorkloadSpec workload;
  bool from_trace = false;
  std::string trace_path;
  TraceSpec trace;
};

/// Reads pools (with per-pool cost-model overrides), policy, router.kvBlockSize, workload, slo and
/// seed from `doc`. Failure: one message naming the field, the value and the fix.
Expected<SimulationSetup, std::string> read_simulation(const nlohmann::json& doc);

/// Runs `simulate --config FILE.json`; argv[0] is "simulate". Prints the summary JSON and returns 0;
/// bad flags: 2; unreadable or invalid configuration or a failed run: 1 (reason on stderr).
int run_simulate_command(int argc, char** argv);

}  // namespace disagg::cli
