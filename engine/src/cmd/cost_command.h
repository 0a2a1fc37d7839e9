// The `disagg-engine cost` subcommand: prints the cost model's step times for a configuration.
#pragma once

namespace disagg::cli {

/// Runs `cost --config FILE.json [probe flags]`; argv[0] is "cost". Writes the report JSON to
/// stdout and returns 0; on a bad flag returns 2, on an unreadable or invalid configuration
/// returns 1, with the reason on stderr. Never throws.
int run_cost_command(int argc, char** argv);

}  // namespace disagg::cli
