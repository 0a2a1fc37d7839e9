#include "simulate_command.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "disagg/simulation_config.h"

namespace disagg::cli {

namespace {

constexpr std::string_view kSimulateUsage =
    "usage: disagg-engine simulate --config FILE.json\n"
    "Simulates the deployment in FILE.json (pools, policy, workload, slo, seed; see engine/README.md)\n"
    "on a virtual clock and prints a JSON summary: TTFT/TPOT/ITL/E2E percentiles, goodput, throughput,\n"
    "prefix-cache hit rate, utilization, KV transfer bytes.\n";

constexpr std::string_view kPlanUsage =
    "usage: disagg-engine plan --config FILE.json [--progress]\n"
    "Searches prefill/decode replica counts and tensor-parallel sizes (and aggregated serving) within\n"
    "planner.maxAccelerators for the highest goodput per accelerator-dollar under the slo, simulating\n"
    "the workload (see engine/README.md, Planner). Prints the ranked candidates as JSON.\n"
    "  --progress   print 'candidates D/T' lines on stderr as the search advances\n";

int usage_error(std::string_view role, std::string_view usage, const std::string& why) {
  std::cerr << "disagg-engine " << role << ": " << why << "\n" << usage;
  return 2;
}

// Parses the flags shared by both commands; returns -1 to continue, else the exit code.
int parse_flags(int argc, char** argv, std::string_view role, std::string_view usage, std::string* config_path,
                bool* progress) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << usage;
      return 0;
    }
    if (progress && flag == "--progress") {
      *progress = true;
      continue;
    }
    if (flag != "--config") return usage_error(role, usage, "unknown flag '" + std::string(flag) + "'");
    if (i + 1 >= argc) return usage_error(role, usage, "'--config' needs a value");
    *config_path = argv[++i];
  }
  if (config_path->empty()) return usage_error(role, usage, "--config FILE.json is required");
  return -1;
}

// Reads and parses the file; on failure prints the reason and returns nullopt-like false.
bool load(std::string_view role, const std::string& path, JsonValue* doc) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "disagg-engine " << role << ": cannot read '" << path << "': " << std::strerror(errno) << "\n";
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto parsed = parse_json(text.str());
  if (!parsed) {
    std::cerr << "disagg-engine " << role << ": '" << path << "' is not valid JSON: " << parsed.error() << "\n";
    return false;
  }
  *doc = std::move(*parsed);
  return true;
}

}  // namespace

int run_simulate_command(int argc, char** argv) {
  std::string config_path;
  if (int rc = parse_flags(argc, argv, "simulate", kSimulateUsage, &config_path, nullptr); rc >= 0) return rc;
  JsonValue doc;
  if (!load("simulate", config_path, &doc)) return 1;
  auto setup = read_simulation(doc);
  if (!setup) {
    std::cerr << "disagg-engine simulate: " << setup.error() << "\n";
    return 1;
  }
  auto json = simulate_to_json(*setup);
  if (!json) {
    std::cerr << "disagg-engine simulate: " << json.error() << "\n";
    return 1;
  }
  std::cout << *json << "\n";
  return 0;
}

int run_plan_command(int argc, char** argv) {
  std::string config_path;
  bool progress = false;
  if (int rc = parse_flags(argc, argv, "plan", kPlanUsage, &config_path, &progress); rc >= 0) return rc;
  JsonValue doc;
  if (!load("plan", config_path, &doc)) return 1;
  auto setup = read_simulation_base(doc);
  if (!setup) {
    std::cerr << "disagg-engine plan: " << setup.error() << "\n";
    return 1;
  }
  auto spec = read_planner(doc);
  if (!spec) {
    std::cerr << "disagg-engine plan: " << spec.error() << "\n";
    return 1;
  }
  PlanProgressFn on_progress;
  if (progress) {
    on_progress = [](const PlanProgress& p) {
      std::cerr << "candidates " << p.candidates_done << "/" << p.candidates_total << " simulations " << p.simulations
                << "\n";
    };
  }
  auto result = plan_setup(*spec, *setup, on_progress);
  if (!result) {
    std::cerr << "disagg-engine plan: " << result.error().message << "\n";
    return 1;
  }
  std::cout << to_json(*result, *spec) << "\n";
  return 0;
}

}  // namespace disagg::cli
