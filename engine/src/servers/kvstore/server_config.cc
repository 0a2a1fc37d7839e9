#include "server_config.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace disagg::kvstore {

bool parse_size(const std::string& text, std::uint64_t* bytes) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(number >= 0) || !std::isfinite(number)) return false;
  std::string suffix(end);
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 1;
  if (suffix.empty() || suffix == "b") scale = 1;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib") scale = 1024.0;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib") scale = 1024.0 * 1024;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else return false;
  const double value = number * scale;
  if (value > 9.0e18) return false;
  *bytes = static_cast<std::uint64_t>(value);
  return true;
}

std::string server_usage() {
  return "usage: disagg-engine kvstore [flags]\n"
         "  A tiered (memory + disk) key-value store speaking the Redis protocol (RESP2).\n"
         "  --bind ADDR             listen address (default 127.0.0.1; use the pod IP in a cluster)\n"
         "  --port N                RESP port (default 6379; 0 = any free port)\n"
         "  --metrics-port N        Prometheus /metrics port (default 0 = off)\n"
         "  --memory-bytes SIZE     memory tier budget, values still arriving included (default 1g)\n"
         "  --disk-dir DIR          disk tier directory (default: no disk tier)\n"
         "  --disk-bytes SIZE       disk tier budget (required with --disk-dir)\n"
         "  --segment-bytes SIZE    disk segment size (default: disk-bytes/256, 1m..4g)\n"
         "  --demote-min-reads N    reads before an entry is demoted instead of evicted (default 2)\n"
         "  --max-value-bytes SIZE  largest value (default 512m); a longer declared length closes the connection\n"
         "  --max-request-bytes SIZE largest command (default 1g); likewise\n"
         "  --max-clients N         connections (default 10000)\n"
         "  --max-pipeline N        unanswered commands per connection before reading pauses (default 1024)\n"
         "  --requirepass PASS      require AUTH PASS (default: none)\n";
}

namespace {

bool parse_uint(const std::string& text, std::uint64_t max, std::uint64_t* out) {
  if (text.empty() || text.size() > 19) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  *out = std::strtoull(text.c_str(), nullptr, 10);
  return *out <= max;
}

}  // namespace

bool parse_server_flags(int argc, char** argv, ServerConfig* config, bool* help, std::string* error) {
  *help = false;
  bool disk_bytes_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return true;
    }
    if (arg.rfind("--", 0) != 0) {
      *error = "unexpected argument '" + arg + "'; flags look like --port 6379 (see --help)";
      return false;
    }
    std::string value;
    const auto eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      *error = "flag '" + arg + "' needs a value (see --help)";
      return false;
    }
    std::uint64_t n = 0;
    const auto bad = [&](const std::string& what) {
      *error = "'" + arg + "' (" + value + ") " + what;
      return false;
    };
    if (arg == "--bind") {
      config->bind = value;
    } else if (arg == "--port" || arg == "--metrics-port") {
      if (!parse_uint(value, 65535, &n)) return bad("must be a port number 0-65535");
      (arg == "--port" ? config->port : config->metrics_port) = static_cast<int>(n);
    } else if (arg == "--memory-bytes") {
      if (!parse_size(value, &n) || n < (1u << 20)) return bad("must be a size of at least 1m, e.g. 64g");
      config->store.memory_bytes = n;
    } else if (arg == "--disk-dir") {
      config->store.disk_dir = value;
    } else if (arg == "--disk-bytes") {
      if (!parse_size(value, &n)) return bad("must be a size, e.g. 1t");
      config->store.disk_bytes = n;
      disk_bytes_set = true;
    } else if (arg == "--segment-bytes") {
      if (!parse_size(value, &n) || n < 4096) return bad("must be a size of at least 4k, e.g. 256m");
      config->store.segment_bytes = n;
    } else if (arg == "--demote-min-reads") {
      if (!parse_uint(value, 1000000, &n)) return bad("must be a count 0-1000000");
      config->store.demote_min_reads = static_cast<std::uint32_t>(n);
    } else if (arg == "--max-value-bytes") {
      if (!parse_size(value, &n) || n < 1 || n > (2ull << 30)) return bad("must be a size between 1 and 2g");
      config->store.max_value_bytes = n;
      config->parser.max_bulk_bytes = n;
    } else if (arg == "--max-request-bytes") {
      if (!parse_size(value, &n) || n < 1024) return bad("must be a size of at least 1k");
      config->parser.max_request_bytes = n;
    } else if (arg == "--max-clients") {
      if (!parse_uint(value, 1000000, &n) || n < 1) return bad("must be a count 1-1000000");
      config->max_clients = n;
    } else if (arg == "--max-pipeline") {
      if (!parse_uint(value, 1000000, &n) || n < 1) return bad("must be a count 1-1000000");
      config->max_pipeline = n;
    } else if (arg == "--requirepass") {
      config->requirepass = value;
    } else {
      *error = "unknown flag '" + arg + "' (see --help)";
      return false;
    }
  }
  if (!config->store.disk_dir.empty() && !disk_bytes_set) {
    *error = "'--disk-dir' (" + config->store.disk_dir + ") needs '--disk-bytes', e.g. --disk-bytes 1t";
    return false;
  }
  if (config->parser.max_request_bytes < config->parser.max_bulk_bytes) {
    config->parser.max_request_bytes = config->parser.max_bulk_bytes + (1u << 20);
  }
  return true;
}

}  // namespace disagg::kvstore
