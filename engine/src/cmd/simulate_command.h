// The `disagg-engine simulate` and `disagg-engine plan` subcommands. Both read the configuration
// with the core's JSON reader and field mapping (disagg/simulation_config.h), the same code the
// addon runs, so a file gives the same answer in both.
#pragma once

namespace disagg::cli {

/// Runs `simulate --config FILE.json`; argv[0] is "simulate". Prints the summary JSON and returns 0;
/// bad flags: 2; unreadable or invalid configuration or a failed run: 1 (reason on stderr).
int run_simulate_command(int argc, char** argv);

/// Runs `plan --config FILE.json [--progress]`; argv[0] is "plan". Prints the planner's JSON
/// (disagg/planner.h to_json) and returns 0; exit codes as for simulate. --progress writes
/// "candidates D/T" lines to stderr.
int run_plan_command(int argc, char** argv);

}  // namespace disagg::cli
