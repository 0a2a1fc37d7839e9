#include "router_main.h"

#include <csignal>
#include <iostream>

#include "router.h"
#include "router_config.h"

namespace disagg::router {

int run(int argc, char** argv) {
  bool help = false;
  auto config = parse_router_args(argc, argv, &help);
  if (help) {
    std::cout << router_usage();
    return 0;
  }
  if (!config) {
    std::cerr << "disagg-engine router: " << config.error() << "\n";
    return 2;
  }
  const RouterConfig c = *config;
  auto router = Router::create(*config);
  if (!router) {
    std::cerr << "disagg-engine router: " << router.error() << "\n";
    return 1;
  }
  std::signal(SIGPIPE, SIG_IGN);
  std::cout << "disagg-engine router: listening on http://" << c.host << ":" << (*router)->port()
            << " policy=" << c.policy << " endpoints=" << c.endpoints.size() << " dns-pools=" << c.dns_pools.size()
            << " model=" << c.served_models.front() << std::endl;
  (*router)->run();
  std::cout << "disagg-engine router: drained, exiting" << std::endl;
  return 0;
}

}  // namespace disagg::router
