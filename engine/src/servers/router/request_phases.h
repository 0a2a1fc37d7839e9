// request_phases.h — where a request's time went, measured by the router where it happens, and the
// KV moved between each prefill and decode endpoint pair.
//
// A served request's time from arrival to its last byte is split into phases that add up to it
// exactly (split_phases), so that per-phase means add up to the mean TTFT and E2E the router
// reports (disagg_router_ttft_seconds, disagg_router_e2e_seconds):
//   queue        waiting for an admission slot
//   route        admitted -> the first leg of the attempt that served it was sent: tokenize, hash,
//                decide, connect, and any attempt that failed before (retries, a drained endpoint)
//   prefill      P/D: the prefill leg (sent -> its answer with kv_transfer_params);
//                aggregated: sent -> first byte (the worker queues and prefills)
//   kv_transfer  P/D, streamed: the prefill's answer -> first byte, less one inter-token interval:
//                building the decode request, the NIXL handshake and pull, the decode worker's
//                admission of the pulled request. vLLM reports the pull alone on the decode pods
//                (vllm:nixl_xfer_time_seconds); the difference is handshake and admission.
//   first_token  P/D, streamed: the decode worker's first step, taken as this stream's mean gap
//                between tokens (capped at what is left)
//   decode       first byte -> last byte
// TTFT = queue + route + prefill + kv_transfer + first_token (aggregated: queue + route + prefill);
// E2E = TTFT + decode. A non-streamed answer has no first token: its worker time after the prefill
// leg (after the send, aggregated) counts as decode, and it observes no kv_transfer.
//
// Exposed (disagg_router_ prefix): request_phase_seconds{path="pd|aggregated", phase} histograms;
// kv_transfer_seconds{prefill, decode} (the kv_transfer phase per endpoint pair) and
// kv_transfer_bytes_total{prefill, decode} (the full prompt blocks the decode endpoint did not hold,
// times router.kvTransfer.bytesPerToken); kv_transport_info{backend, provider} as configured;
// slo_requests_total{objective="ttft|tpot", result="met|missed"} and slo_target_seconds{objective}
// for streamed requests when the deployment has an SLO (the `autoscaling` block's).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "router_log.h"
#include "router_metrics.h"

namespace disagg::router {

/// Whether a request went through a prefill endpoint and took its KV (label `path`).
enum class RequestPath : std::uint8_t { aggregated = 0, pd = 1 };
inline constexpr int kRequestPathCount = 2;

/// The phases of a served request (label `phase`), in the order they happen.
enum class Phase : std::uint8_t { queue = 0, route, prefill, kv_transfer, first_token, decode };
inline constexpr int kPhaseCount = 6;
std::string_view to_string(Phase phase);
std::string_view to_string(RequestPath path);

/// The instants of a served request as the router saw them (its last, successful attempt).
struct PhaseClock {
  Clock::time_point arrived;       ///< the request was received
  double queued = 0;               ///< seconds waiting for admission (from `arrived`)
  Clock::time_point prefill_sent;  ///< P/D: the prefill leg sent (set when `transferred`)
  Clock::time_point prefill_done;  ///< P/D: its answer received
  Clock::time_point main_sent;     ///< the decode (or aggregated) leg sent
  Clock::time_point first_byte;    ///< the first byte relayed (a whole answer: its arrival)
  Clock::time_point end;           ///< the last byte relayed
  double inter_token_seconds = 0;  ///< the stream's mean gap between tokens; 0 when unknown
  bool transferred = false;        ///< the decode leg carried the prefill's kv_transfer_params
  bool streamed = false;           ///< an SSE stream relayed as it came
};

/// A request's phases in seconds (>= 0), indexed by Phase; `observed[p]` says which apply.
struct PhaseSplit {
  RequestPath path = RequestPath::aggregated;
  std::array<double, kPhaseCount> seconds{};
  std::array<bool, kPhaseCount> observed{};
};

/// Splits `c` as the header says. Instants out of order (a clock step cannot happen on the steady
/// clock, but a leg's instant may be unset by a caller) give 0-second phases, never negative ones.
PhaseSplit split_phases(const PhaseClock& c);

/// How KV moves between the pools, as configured (router.kvTransfer): labels of kv_transport_info and
/// the bytes one token's KV takes, for kv_transfer_bytes_total.
struct KvTransferInfo {
  std::string backend;         ///< NIXL backend: "LIBFABRIC" or "UCX"; empty: not configured
  double bytes_per_token = 0;  ///< KV bytes of one token moved from prefill to decode; 0: unknown
  /// libfabric's provider for LIBFABRIC (the constructs set FI_PROVIDER=efa), "tcp" for UCX on AWS.
  std::string_view provider() const { return backend == "LIBFABRIC" ? "efa" : backend.empty() ? "" : "tcp"; }
};

/// The SLO the router counts streamed requests against; ttft <= 0: none.
struct SloTargets {
  double ttft_seconds = 0;
  double tpot_seconds = 0;
};

/// The phase histograms, the per-pair KV transfer series and the SLO counters. observe() is safe
/// from every HTTP thread: histograms and counters are lock-free; a P/D pair's series are found
/// under a mutex (one short lookup per streamed P/D request).
class RequestPhaseMetrics {
 public:
  /// At most this many endpoint pairs get series of their own; later pairs are counted under
  /// prefill="other", decode="other" (a pool of churning endpoints cannot grow the page unbounded).
  static constexpr std::size_t kMaxPairs = 256;

  RequestPhaseMetrics(KvTransferInfo transfer, SloTargets slo);

  /// Records a served request: its phases, and for a streamed P/D request its pair's transfer
  /// (`transferred_tokens` of KV moved from `prefill` to `decode`). Returns the split.
  PhaseSplit observe(const PhaseClock& c, std::string_view prefill, std::string_view decode,
                     std::int64_t transferred_tokens);

  /// Appends every series in Prometheus text format.
  void write(std::string& out) const;

 private:
  struct PairSeries {
    PairSeries();
    Histogram seconds;
    Counter bytes;
  };
  PairSeries& pair(std::string_view prefill, std::string_view decode);

  KvTransferInfo transfer_;
  SloTargets slo_;
  std::array<std::array<std::unique_ptr<Histogram>, kPhaseCount>, kRequestPathCount> phases_;
  /// [objective 0 ttft / 1 tpot][0 met / 1 missed]
  std::array<std::array<Counter, 2>, 2> slo_requests_{};
  using PairsOf = std::map<std::string, std::unique_ptr<PairSeries>, std::less<>>;  // by decode label
  mutable std::mutex pairs_mu_;
  std::map<std::string, PairsOf, std::less<>> pairs_;  // by prefill label
  std::size_t pair_count_ = 0;
  std::unique_ptr<PairSeries> other_;
};

/// KV tokens a decode endpoint pulls for a prompt: the full blocks the prefill computed (vLLM hands
/// over full blocks only) less those the decode endpoint already holds. >= 0.
std::int64_t transferred_kv_tokens(std::int64_t prompt_tokens, std::int32_t block_size, std::int32_t cached_blocks);

}  // namespace disagg::router
