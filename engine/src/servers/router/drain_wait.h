// drain_wait.h — `disagg-engine drain-wait`: waits until a worker (vLLM or the sim-worker) has no
// request left, for a Kubernetes preStop hook (issue 24, "scale-down that loses nothing").
//
//   disagg-engine drain-wait --metrics-url http://127.0.0.1:8000/metrics --timeout-s N [--quiet-s 2]
//                            [--poll-s 0.5] [--held-kv]
//
// Polls the worker's Prometheus page and returns once vllm:num_requests_running +
// vllm:num_requests_waiting + disagg:sim_worker_pending_kv_transfers (when exported) has read 0 for
// quiet-s seconds, once the worker no longer listens (nothing left to wait for), or when timeout-s
// passes; it prints which. With --held-kv (prefill pods) KV blocks still in use while no request
// runs or waits count as busy too: vLLM keeps a finished prompt's blocks (ref-counted, so not free
// in vllm:kv_cache_usage_perc, which counts cached free blocks as free) until the decode pod has
// read them over NIXL or VLLM_NIXL_ABORT_REQUEST_TIMEOUT passes, and exports no gauge of those
// transfers itself. The gauge is the scheduler's at its last step: should vLLM not step again once
// the reads complete, it stays above 0 and the wait ends at timeout-s (sized for that hold), never
// before the blocks were read. Exit status 0 in all three (a preStop hook that fails only delays the
// kill), 2 for bad flags. A page that cannot be read or lacks the gauges counts as busy.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "disagg/expected.h"

namespace disagg::router {

struct DrainWaitOptions {
  std::string host;
  std::uint16_t port = 0;
  std::string path = "/metrics";
  double timeout_s = 0;
  double quiet_s = 2;
  double poll_s = 0.5;
  /// --held-kv: KV blocks in use with no request running or waiting count as busy (see above).
  bool held_kv = false;
};

/// Parses the flags (argv[0] = "drain-wait"). `help` is set for --help. Error: names the flag, the
/// value and the fix.
Expected<DrainWaitOptions, std::string> parse_drain_wait_args(int argc, char** argv, bool* help);

/// How drain_wait() ended.
enum class DrainWaitEnd : std::uint8_t { quiet, gone, timed_out };

/// One reading of the worker: its requests in flight (running + waiting + held KV transfers), or
/// nullopt when the page could not be read or lacked the gauges; `gone` when nothing listens.
struct DrainReading {
  std::optional<double> busy;
  bool gone = false;
  /// busy counts only KV blocks held for transfers (--held-kv; no request running or waiting).
  bool held_kv_only = false;
};

/// Polls `read` every poll_s until the end (see the file comment); `say` gets one line per change.
/// Blocks. `read` is the HTTP GET in production and a fake in tests.
DrainWaitEnd drain_wait(const DrainWaitOptions& options, const std::function<DrainReading()>& read,
                        const std::function<void(const std::string&)>& say);

/// GET options.path from the worker once (HTTP/1.0, timeouts of poll_s + 1 s).
DrainReading read_worker(const DrainWaitOptions& options);

/// Requests in flight on a worker's Prometheus page: running + waiting + held KV transfers (the
/// sim-worker's gauge); nullopt when none of the vLLM gauges is on the page. With `held_kv`, a page
/// with none of those but vllm:kv_cache_usage_perc > 0 reads 1 and sets *held_kv_only.
std::optional<double> busy_requests(std::string_view metrics_text, bool held_kv = false, bool* held_kv_only = nullptr);

/// The subcommand; returns the exit status.
int run_drain_wait(int argc, char** argv);

}  // namespace disagg::router
