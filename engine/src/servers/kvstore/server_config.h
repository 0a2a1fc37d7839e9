// Flags of `disagg-engine kvstore` and their parsing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "resp_parser.h"
#include "tiered_store.h"

namespace disagg::kvstore {

struct ServerConfig {
  std::string bind = "127.0.0.1";  ///< Loopback by default; the pod IP (or 0.0.0.0) in a cluster.
  int port = 6379;                 ///< 0 picks a free port (tests).
  int metrics_port = 0;            ///< Prometheus /metrics; 0 = disabled.
  std::string requirepass;         ///< Empty: no AUTH needed.
  std::size_t max_clients = 10000;
  /// Replies a connection may have queued and unwritten before the server stops reading from it.
  std::size_t max_pipeline = 1024;
  StoreConfig store;
  /// Tests only: runs on the disk-read I/O thread before each read (e.g. to hold a read back).
  std::function<void(std::string_view key)> disk_read_hook;
  /// Request bounds; arguments of 32 KiB or more are received straight into their stored Blob, and
  /// commands of more than 32 KiB reserve their bytes in the memory tier while they arrive.
  ParserLimits parser = [] {
    ParserLimits limits;
    limits.direct_bulk_bytes = 32u << 10;
    limits.admit_above = 32u << 10;
    return limits;
  }();
};

/// Parses `--flag value` / `--flag=value` arguments (argv[0] is skipped). Sizes accept a suffix:
/// k, m, g, t (powers of 1024; "kb", "mib" etc. also), e.g. `--memory-bytes 64g`.
/// Returns false with a message naming the flag, the value and the fix; `help` is set by --help.
bool parse_server_flags(int argc, char** argv, ServerConfig* config, bool* help, std::string* error);

/// The --help text.
std::string server_usage();

/// Parses "512", "64k", "1.5g", "2GiB" into bytes; false when malformed.
bool parse_size(const std::string& text, std::uint64_t* bytes);

}  // namespace disagg::kvstore
