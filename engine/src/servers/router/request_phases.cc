// request_phases.cc — see request_phases.h.
#include "request_phases.h"

#include <algorithm>
#include <chrono>

namespace disagg::router {

namespace {

// From a route's tenth of a millisecond to a long answer's minute.
constexpr std::array<double, 18> kPhaseBounds = {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05,
                                                 0.1,  0.25,   0.5,  1,    2.5,    5,    10,   30,    60};
// A pair's KV transfer: vLLM's NIXL buckets (vllm:nixl_xfer_time_seconds, 5 ms to 5 s) widened by one
// bucket each way.
constexpr std::array<double, 13> kTransferBounds = {1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1,
                                                    0.25, 0.5,    1,    2.5,  5,     10};

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::max(0.0, std::chrono::duration<double>(to - from).count());
}

std::string escaped(std::string_view label) {
  std::string out;
  out.reserve(label.size());
  for (char c : label) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out.append("\\n");
      continue;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string_view to_string(Phase phase) {
  switch (phase) {
    case Phase::queue: return "queue";
    case Phase::route: return "route";
    case Phase::prefill: return "prefill";
    case Phase::kv_transfer: return "kv_transfer";
    case Phase::first_token: return "first_token";
    case Phase::decode: return "decode";
  }
  return "unknown";
}

std::string_view to_string(RequestPath path) {
  return path == RequestPath::pd ? "pd" : "aggregated";
}

PhaseSplit split_phases(const PhaseClock& c) {
  PhaseSplit s;
  auto set = [&s](Phase p, double v) {
    s.seconds[static_cast<std::size_t>(p)] = std::max(0.0, v);
    s.observed[static_cast<std::size_t>(p)] = true;
  };
  const double queued = std::max(0.0, c.queued);
  const auto admitted = c.arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(queued));
  // Later instants never before earlier ones: each phase starts where the previous one ended.
  const auto at_least = [](Clock::time_point t, Clock::time_point floor) { return t < floor ? floor : t; };
  set(Phase::queue, queued);
  const auto end = at_least(c.end, admitted);
  if (c.transferred) {
    s.path = RequestPath::pd;
    const auto prefill_sent = std::min(at_least(c.prefill_sent, admitted), end);
    const auto prefill_done = std::min(at_least(c.prefill_done, prefill_sent), end);
    set(Phase::route, seconds(admitted, prefill_sent));
    set(Phase::prefill, seconds(prefill_sent, prefill_done));
    if (c.streamed) {
      const auto first = std::min(at_least(c.first_byte, prefill_done), end);
      const double gap = seconds(prefill_done, first);
      const double first_token = std::min(gap, std::max(0.0, c.inter_token_seconds));
      set(Phase::kv_transfer, gap - first_token);
      set(Phase::first_token, first_token);
      set(Phase::decode, seconds(first, end));
    } else {
      set(Phase::decode, seconds(prefill_done, end));
    }
    return s;
  }
  const auto sent = std::min(at_least(c.main_sent, admitted), end);
  set(Phase::route, seconds(admitted, sent));
  if (c.streamed) {
    const auto first = std::min(at_least(c.first_byte, sent), end);
    set(Phase::prefill, seconds(sent, first));
    set(Phase::decode, seconds(first, end));
  } else {
    set(Phase::decode, seconds(sent, end));
  }
  return s;
}

std::int64_t transferred_kv_tokens(std::int64_t prompt_tokens, std::int32_t block_size, std::int32_t cached_blocks) {
  if (block_size <= 0 || prompt_tokens <= 0) return 0;
  const std::int64_t full = prompt_tokens / block_size;
  return std::max<std::int64_t>(0, full - std::max<std::int64_t>(0, cached_blocks)) * block_size;
}

RequestPhaseMetrics::PairSeries::PairSeries() : seconds(kTransferBounds) {}

RequestPhaseMetrics::RequestPhaseMetrics(KvTransferInfo transfer, SloTargets slo)
    : transfer_(std::move(transfer)), slo_(slo), other_(std::make_unique<PairSeries>()) {
  for (auto& path : phases_) {
    for (auto& h : path) h = std::make_unique<Histogram>(kPhaseBounds);
  }
}

RequestPhaseMetrics::PairSeries& RequestPhaseMetrics::pair(std::string_view prefill, std::string_view decode) {
  std::lock_guard lock(pairs_mu_);
  // Heterogeneous lookups (std::less<>): a pair seen before builds no key.
  auto by_prefill = pairs_.find(prefill);
  if (by_prefill != pairs_.end()) {
    if (auto it = by_prefill->second.find(decode); it != by_prefill->second.end()) return *it->second;
  }
  if (pair_count_ >= kMaxPairs) return *other_;
  if (by_prefill == pairs_.end()) by_prefill = pairs_.emplace(std::string(prefill), PairsOf{}).first;
  ++pair_count_;
  return *by_prefill->second.emplace(std::string(decode), std::make_unique<PairSeries>()).first->second;
}

PhaseSplit RequestPhaseMetrics::observe(const PhaseClock& c, std::string_view prefill, std::string_view decode,
                                        std::int64_t transferred_tokens) {
  const PhaseSplit s = split_phases(c);
  auto& hs = phases_[static_cast<std::size_t>(s.path)];
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    if (s.observed[p]) hs[p]->observe(s.seconds[p]);
  }
  if (s.path == RequestPath::pd && s.observed[static_cast<std::size_t>(Phase::kv_transfer)]) {
    PairSeries& ps = pair(prefill, decode);
    ps.seconds.observe(s.seconds[static_cast<std::size_t>(Phase::kv_transfer)]);
    if (transfer_.bytes_per_token > 0 && transferred_tokens > 0) {
      ps.bytes.fetch_add(
          static_cast<std::uint64_t>(static_cast<double>(transferred_tokens) * transfer_.bytes_per_token));
    }
  }
  if (slo_.ttft_seconds > 0 && c.streamed) {
    const double ttft = seconds(c.arrived, c.first_byte);
    slo_requests_[0][ttft <= slo_.ttft_seconds ? 0 : 1].fetch_add(1);
    if (c.inter_token_seconds > 0) slo_requests_[1][c.inter_token_seconds <= slo_.tpot_seconds ? 0 : 1].fetch_add(1);
  }
  return s;
}

void RequestPhaseMetrics::write(std::string& out) const {
  out.append(
      "# HELP disagg_router_request_phase_seconds Where served requests' time went: queue, route, prefill, "
      "kv_transfer, first_token, decode (they add up to TTFT and E2E; engine/src/servers/router/request_phases.h).\n"
      "# TYPE disagg_router_request_phase_seconds histogram\n");
  for (int path = 0; path < kRequestPathCount; ++path) {
    for (int p = 0; p < kPhaseCount; ++p) {
      const auto ph = static_cast<Phase>(p);
      const auto rp = static_cast<RequestPath>(path);
      // Phases a path never has are not exported (an aggregated request moves no KV).
      if (rp == RequestPath::aggregated && (ph == Phase::kv_transfer || ph == Phase::first_token)) continue;
      phases_[path][p]->write_series(
          out, "disagg_router_request_phase_seconds",
          std::string("path=\"").append(to_string(rp)).append("\",phase=\"").append(to_string(ph)).append("\""));
    }
  }
  {
    std::lock_guard lock(pairs_mu_);
    out.append(
        "# HELP disagg_router_kv_transfer_seconds KV transfer time per prefill/decode endpoint pair (streamed P/D "
        "requests: the prefill's answer to the first byte, less one inter-token interval).\n"
        "# TYPE disagg_router_kv_transfer_seconds histogram\n");
    const auto labels = [](std::string_view p, std::string_view d) {
      return std::string("prefill=\"").append(escaped(p)).append("\",decode=\"").append(escaped(d)).append("\"");
    };
    for (const auto& [p, decodes] : pairs_) {
      for (const auto& [d, ps] : decodes)
        ps->seconds.write_series(out, "disagg_router_kv_transfer_seconds", labels(p, d));
    }
    if (other_->seconds.count() > 0)
      other_->seconds.write_series(out, "disagg_router_kv_transfer_seconds", labels("other", "other"));
    if (transfer_.bytes_per_token > 0) {
      out.append(
          "# HELP disagg_router_kv_transfer_bytes_total KV bytes moved per prefill/decode endpoint pair (the full "
          "prompt "
          "blocks the decode endpoint did not hold, times router.kvTransfer.bytesPerToken).\n"
          "# TYPE disagg_router_kv_transfer_bytes_total counter\n");
      for (const auto& [p, decodes] : pairs_) {
        for (const auto& [d, ps] : decodes)
          write_sample(out, "disagg_router_kv_transfer_bytes_total", labels(p, d),
                       static_cast<double>(ps->bytes.load()));
      }
      if (other_->seconds.count() > 0)
        write_sample(out, "disagg_router_kv_transfer_bytes_total", labels("other", "other"),
                     static_cast<double>(other_->bytes.load()));
    }
  }
  if (!transfer_.backend.empty()) {
    write_metric(out, "disagg_router_kv_transport_info", "gauge",
                 "How KV moves from prefill to decode as configured: the NIXL backend and its provider (efa for "
                 "LIBFABRIC, tcp for UCX on AWS).",
                 std::string("backend=\"")
                     .append(escaped(transfer_.backend))
                     .append("\",provider=\"")
                     .append(transfer_.provider())
                     .append("\""),
                 1);
  }
  if (slo_.ttft_seconds > 0) {
    out.append(
        "# HELP disagg_router_slo_requests_total Streamed requests that met or missed the deployment's SLO, per "
        "objective (ttft: time to first byte; tpot: mean gap between tokens).\n"
        "# TYPE disagg_router_slo_requests_total counter\n");
    constexpr std::array<std::string_view, 2> objectives = {"ttft", "tpot"};
    constexpr std::array<std::string_view, 2> results = {"met", "missed"};
    for (int o = 0; o < 2; ++o) {
      for (int r = 0; r < 2; ++r) {
        write_sample(
            out, "disagg_router_slo_requests_total",
            std::string("objective=\"").append(objectives[o]).append("\",result=\"").append(results[r]).append("\""),
            static_cast<double>(slo_requests_[o][r].load()));
      }
    }
    out.append(
        "# HELP disagg_router_slo_target_seconds The deployment's SLO per objective.\n"
        "# TYPE disagg_router_slo_target_seconds gauge\n");
    write_sample(out, "disagg_router_slo_target_seconds", "objective=\"ttft\"", slo_.ttft_seconds);
    write_sample(out, "disagg_router_slo_target_seconds", "objective=\"tpot\"", slo_.tpot_seconds);
  }
}

}  // namespace disagg::router
