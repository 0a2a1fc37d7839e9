// sim_worker_main.h — entry point of `disagg-engine sim-worker` (see sim_worker.h for the flags).
#pragma once

namespace disagg::sim_worker {

/// Runs the sim-worker until SIGTERM/SIGINT (graceful drain) or a fatal error. argv[0] is the
/// role name. Returns the process exit code (0 after a drain, 2 for bad flags, 1 otherwise).
int run(int argc, char** argv);

}  // namespace disagg::sim_worker
