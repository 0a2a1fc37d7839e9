#include "kvstore_main.h"

#include <csignal>
#include <cstdio>
#include <string>

#include "server.h"
#include "server_config.h"

namespace disagg::kvstore {
namespace {

Server* g_server = nullptr;

void on_signal(int) {
  if (g_server != nullptr) g_server->stop();
}

}  // namespace

int run(int argc, char** argv) {
  ServerConfig config;
  bool help = false;
  std::string error;
  if (!parse_server_flags(argc, argv, &config, &help, &error)) {
    std::fprintf(stderr, "kvstore: %s\n", error.c_str());
    return 2;
  }
  if (help) {
    std::fputs(server_usage().c_str(), stdout);
    return 0;
  }
  std::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<Server> server = Server::create(config, &error);
  if (!server) {
    std::fprintf(stderr, "kvstore: %s\n", error.c_str());
    return 1;
  }
  const TieredStore& store = server->store();
  std::fprintf(stderr,
               "kvstore: listening on %s:%d (metrics %d); memory budget %llu bytes; disk %s (%llu bytes, "
               "%zu keys recovered, %llu torn bytes cut, %llu corrupt bytes skipped)\n",
               config.bind.c_str(), server->port(), server->metrics_port(),
               static_cast<unsigned long long>(store.memory_budget()),
               config.store.disk_dir.empty() ? "off" : config.store.disk_dir.c_str(),
               static_cast<unsigned long long>(store.disk_budget()), store.key_count(),
               static_cast<unsigned long long>(store.stats().recovery_cut_bytes),
               static_cast<unsigned long long>(store.stats().recovery_skipped_bytes));
  g_server = server.get();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const int rc = server->run();
  g_server = nullptr;
  std::fprintf(stderr, "kvstore: stopped\n");
  return rc;
}

}  // namespace disagg::kvstore
