// disagg-engine: one binary, one role per invocation (see engine/README.md).
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string_view>

#include "cmd/cost_command.h"
#include "cmd/simulate_command.h"
#include "disagg/version.h"

#ifdef DISAGG_HAVE_KVSTORE
#include "servers/kvstore/kvstore_main.h"
#endif
#ifdef DISAGG_HAVE_SIM_WORKER
#include "sim_worker_main.h"
#endif
#ifdef DISAGG_HAVE_ROUTER
#include "drain_wait.h"
#include "router_main.h"
#endif
#ifdef DISAGG_HAVE_TEXT
#include "cmd/text_command.h"
#endif

namespace {

constexpr std::string_view kUsage =
    "usage: disagg-engine <role> [flags]\n"
    "roles:\n"
#ifdef DISAGG_HAVE_ROUTER
    "  router       KV-aware OpenAI-compatible router (policies, P/D, KV events, health)\n"
#else
    "  router       KV-aware request router (not built in this version)\n"
#endif
#ifdef DISAGG_HAVE_SIM_WORKER
    "  sim-worker   vLLM-compatible worker emulator (OpenAI API, metrics, KV events, P/D)\n"
#else
    "  sim-worker   vLLM-compatible worker emulator (not built in this version)\n"
#endif
    "  kvstore      shared KV-cache store speaking the Redis protocol\n"
#ifdef DISAGG_HAVE_ROUTER
    "  drain-wait   wait until a worker has no request in flight (preStop): drain-wait --metrics-url URL --timeout-s "
    "N\n"
#endif
    "  cost         print the cost model's step times: cost --config FILE.json\n"
    "  simulate     simulate a deployment on a virtual clock: simulate --config FILE.json\n"
    "  plan         search replica counts and TP sizes for the best goodput per dollar: plan --config FILE.json\n"
#ifdef DISAGG_HAVE_TEXT
    "  tokenize     tokenize NDJSON requests with a model's tokenizer.json: tokenize --tokenizer DIR\n"
    "  render-chat  render NDJSON chat requests with a model's chat template: render-chat --tokenizer DIR\n"
#endif
    "  version      print the engine version\n"
    "Run `disagg-engine <role> --help` for a role's flags.\n";

[[maybe_unused]] int not_built(std::string_view role) {
  std::cerr << "disagg-engine: role '" << role << "' is not built in this version; available: cost, simulate, version"
#ifdef DISAGG_HAVE_KVSTORE
            << ", kvstore"
#endif
#ifdef DISAGG_HAVE_SIM_WORKER
            << ", sim-worker"
#endif
#ifdef DISAGG_HAVE_ROUTER
            << ", router"
#endif
            << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string_view role = argv[1];
  // Each role sees its own name as argv[0].
  const int role_argc = argc - 1;
  char** role_argv = argv + 1;
  if (role == "--help" || role == "-h" || role == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (role == "version" || role == "--version") {
    std::cout << disagg::engine_version() << "\n";
    return 0;
  }
  if (role == "cost") return disagg::cli::run_cost_command(role_argc, role_argv);
  if (role == "simulate") return disagg::cli::run_simulate_command(role_argc, role_argv);
  if (role == "plan") return disagg::cli::run_plan_command(role_argc, role_argv);
  if (role == "kvstore") {
#ifdef DISAGG_HAVE_KVSTORE
    return disagg::kvstore::run(role_argc, role_argv);
#else
    return not_built(role);
#endif
  }
  if (role == "sim-worker") {
#ifdef DISAGG_HAVE_SIM_WORKER
    return disagg::sim_worker::run(role_argc, role_argv);
#else
    return not_built(role);
#endif
  }
  if (role == "router") {
#ifdef DISAGG_HAVE_ROUTER
    return disagg::router::run(role_argc, role_argv);
#else
    return not_built(role);
#endif
  }
  if (role == "drain-wait") {
#ifdef DISAGG_HAVE_ROUTER
    return disagg::router::run_drain_wait(role_argc, role_argv);
#else
    return not_built(role);
#endif
  }
  if (role == "tokenize" || role == "render-chat") {
#ifdef DISAGG_HAVE_TEXT
    return role == "tokenize" ? disagg::text::run_tokenize_command(role_argc, role_argv)
                              : disagg::text::run_render_chat_command(role_argc, role_argv);
#else
    return not_built(role);
#endif
  }
  std::cerr << "disagg-engine: unknown role '" << role << "'\n" << kUsage;
  return 2;
}
