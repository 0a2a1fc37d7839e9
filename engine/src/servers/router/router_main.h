// router_main.h — entry point of `disagg-engine router` (flags: router_config.h, --help).
#pragma once

namespace disagg::router {

/// Runs the router until SIGTERM/SIGINT (graceful drain) or a fatal error. argv[0] is the role
/// name. Returns the process exit code: 0 after a drain, 2 for bad flags or configuration, 1 when
/// the server cannot start.
int run(int argc, char** argv);

}  // namespace disagg::router
