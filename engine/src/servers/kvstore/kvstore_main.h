// Entry point of `disagg-engine kvstore`.
#pragma once

namespace disagg::kvstore {

/// Parses flags (argv[0] is "kvstore"), opens the store (recovering the disk tier), serves until
/// SIGINT/SIGTERM. Returns the process exit code: 0 after a clean stop, 2 for bad flags, 1 when
/// the store or the sockets cannot be opened. Run with --help for the flags.
int run(int argc, char** argv);

}  // namespace disagg::kvstore
