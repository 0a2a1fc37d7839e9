#include "router_metrics.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace disagg::router {

std::string_view to_string(ErrorCause cause) {
  switch (cause) {
    case ErrorCause::bad_request: return "bad_request";
    case ErrorCause::unknown_model: return "unknown_model";
    case ErrorCause::not_found: return "not_found";
    case ErrorCause::queue_full: return "queue_full";
    case ErrorCause::no_endpoint: return "no_endpoint";
    case ErrorCause::upstream_connect: return "upstream_connect";
    case ErrorCause::upstream_5xx: return "upstream_5xx";
    case ErrorCause::upstream_timeout: return "upstream_timeout";
    case ErrorCause::upstream_broken: return "upstream_broken";
    case ErrorCause::upstream_4xx: return "upstream_4xx";
    case ErrorCause::client_gone: return "client_gone";
    case ErrorCause::request_timeout: return "request_timeout";
    case ErrorCause::prefill_failed: return "prefill_failed";
    case ErrorCause::draining: return "draining";
    case ErrorCause::count_: break;
  }
  return "unknown";
}

namespace {

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

// Microseconds to tens of seconds: decision and overhead live in the first buckets, latencies
// seen by clients in the last ones.
constexpr std::array<double, 22> kLatencyBounds = {1e-6, 2.5e-6, 5e-6,   1e-5, 2.5e-5, 5e-5,   1e-4, 2.5e-4,
                                                   5e-4, 1e-3,   2.5e-3, 5e-3, 1e-2,   2.5e-2, 5e-2, 0.1,
                                                   0.25, 0.5,    1,      2.5,  5,      10};
constexpr std::array<double, 14> kClientBounds = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                  0.5,   1,     2.5,  5,     10,   30,  60};

}  // namespace

std::size_t metric_shard() {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t shard = next.fetch_add(1, std::memory_order_relaxed) % kMetricShards;
  return shard;
}

Histogram::Histogram(std::span<const double> bounds) : bounds_(bounds) {}

std::uint64_t Histogram::count() const {
  std::uint64_t total = 0;
  for (const Shard& s : shards_) total += s.count.load(std::memory_order_relaxed);
  return total;
}

void Histogram::observe(double v) {
  std::size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  Shard& s = shards_[metric_shard()];
  s.counts[i].fetch_add(1, std::memory_order_relaxed);
  s.count.fetch_add(1, std::memory_order_relaxed);
  const double micro = v > 0 ? v * 1e6 : 0;
  s.sum_micro.fetch_add(static_cast<std::uint64_t>(micro + 0.5), std::memory_order_relaxed);
}

void Histogram::write(std::string& out, std::string_view name, std::string_view help) const {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" histogram\n");
  write_series(out, name, "");
}

void Histogram::write_series(std::string& out, std::string_view name, std::string_view labels) const {
  std::uint64_t cumulative = 0;
  std::uint64_t sum_micro = 0;
  for (const Shard& s : shards_) sum_micro += s.sum_micro.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    for (const Shard& s : shards_) cumulative += s.counts[i].load(std::memory_order_relaxed);
    out.append(name).append("_bucket{");
    if (!labels.empty()) out.append(labels).append(",");
    out.append("le=\"")
        .append(i < bounds_.size() ? number(bounds_[i]) : "+Inf")
        .append("\"} ")
        .append(std::to_string(cumulative))
        .append("\n");
  }
  const auto tail = [&](std::string_view suffix, const std::string& value) {
    out.append(name).append(suffix);
    if (!labels.empty()) out.append("{").append(labels).append("}");
    out.append(" ").append(value).append("\n");
  };
  tail("_sum", number(static_cast<double>(sum_micro) * 1e-6));
  tail("_count", std::to_string(count()));
}

RouterMetrics::RouterMetrics()
    : decision_seconds(kLatencyBounds),
      overhead_seconds(kLatencyBounds),
      queue_seconds(kClientBounds),
      ttft_seconds(kClientBounds),
      tpot_seconds(kClientBounds),
      e2e_seconds(kClientBounds) {}

void write_metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
                  std::string_view labels, double value) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  write_sample(out, name, labels, value);
}

void write_sample(std::string& out, std::string_view name, std::string_view labels, double value) {
  out.append(name);
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out.append(" ").append(number(value)).append("\n");
}

void RouterMetrics::write(std::string& out) const {
  auto load = [](const auto& a) { return static_cast<double>(a.load(std::memory_order_relaxed)); };
  out.append(
      "# HELP disagg_router_requests_total Requests completed by the router.\n"
      "# TYPE disagg_router_requests_total counter\n");
  constexpr std::array<std::string_view, 2> routes = {"completions", "chat"};
  constexpr std::array<std::string_view, 3> outcomes = {"ok", "error", "client_gone"};
  for (int r = 0; r < 2; ++r) {
    for (int o = 0; o < 3; ++o) {
      write_sample(out, "disagg_router_requests_total",
                   "route=\"" + std::string(routes[r]) + "\",outcome=\"" + std::string(outcomes[o]) + "\"",
                   load(requests[r][o]));
    }
  }
  out.append(
      "# HELP disagg_router_errors_total Failed or degraded requests by cause.\n"
      "# TYPE disagg_router_errors_total counter\n");
  for (int c = 0; c < kErrorCauseCount; ++c) {
    write_sample(out, "disagg_router_errors_total",
                 "cause=\"" + std::string(to_string(static_cast<ErrorCause>(c))) + "\"", load(errors[c]));
  }
  write_metric(out, "disagg_router_retries_total", "counter",
               "Upstream attempts repeated on another endpoint (connect failure or 5xx before the first byte).", "",
               load(retries));
  write_metric(out, "disagg_router_drained_endpoint_retries_total", "counter",
               "Upstream attempts answered 503 by a draining endpoint and sent to another one (not failures).", "",
               load(drained_retries));
  out.append(
      "# HELP disagg_router_auth_rejected_total Requests refused 401 for want of an API key: none sent "
      "(missing) or none that matches (invalid).\n"
      "# TYPE disagg_router_auth_rejected_total counter\n");
  write_sample(out, "disagg_router_auth_rejected_total", "reason=\"missing\"", load(auth_rejected[0]));
  write_sample(out, "disagg_router_auth_rejected_total", "reason=\"invalid\"", load(auth_rejected[1]));
  out.append(
      "# HELP disagg_router_auth_key_reloads_total Re-reads of the API key file after it changed: loaded, "
      "or failed (the keys loaded before stay in use).\n"
      "# TYPE disagg_router_auth_key_reloads_total counter\n");
  write_sample(out, "disagg_router_auth_key_reloads_total", "outcome=\"loaded\"", load(auth_key_reloads[0]));
  write_sample(out, "disagg_router_auth_key_reloads_total", "outcome=\"failed\"", load(auth_key_reloads[1]));
  out.append(
      "# HELP disagg_router_pd_decisions_total Prefill/decode decisions by reason.\n"
      "# TYPE disagg_router_pd_decisions_total counter\n");
  constexpr std::array<std::string_view, 4> reasons = {"disaggregate", "below_threshold", "prefill_saturated",
                                                       "no_prefill_endpoint"};
  for (int i = 0; i < 4; ++i) {
    write_sample(out, "disagg_router_pd_decisions_total", "reason=\"" + std::string(reasons[i]) + "\"",
                 load(pd_decisions[i]));
  }
  write_metric(out, "disagg_router_prefill_fallbacks_total", "counter",
               "Disaggregated requests whose prefill leg failed and that were served decode-only.", "",
               load(prefill_fallbacks));
  write_metric(out, "disagg_router_kv_transfer_fallbacks_total", "counter",
               "Decode legs with the prefill's KV transfer parameters that failed before answering (a failed "
               "KV pull); the retry went decode-only, without them.",
               "", load(kv_transfer_fallbacks));
  write_metric(out, "disagg_router_prefix_query_blocks_total", "counter", "Full prompt blocks of routed requests.", "",
               load(prefix_query_blocks));
  write_metric(out, "disagg_router_prefix_hit_blocks_total", "counter",
               "Of those, blocks the index or history says the chosen endpoint holds.", "", load(prefix_hit_blocks));
  write_metric(out, "disagg_router_prefix_source_info", "gauge",
               "Where prefix scorers read cached prefixes: index (KV events, keyed by token ids) or history "
               "(the router's own routing history, approximate); and whether the served model's tokenizer loaded.",
               "source=\"" + std::string(prefix_source) + "\",tokenizer=\"" + std::string(tokenizer_state) + "\"", 1);
  write_metric(out, "disagg_router_kv_events_batches_total", "counter", "KV event batches applied.", "",
               load(kv_batches));
  out.append(
      "# HELP disagg_router_kv_events_total KV events applied by type.\n"
      "# TYPE disagg_router_kv_events_total counter\n");
  constexpr std::array<std::string_view, 3> types = {"block_stored", "block_removed", "all_blocks_cleared"};
  for (int i = 0; i < 3; ++i) {
    write_sample(out, "disagg_router_kv_events_total", "type=\"" + std::string(types[i]) + "\"", load(kv_events[i]));
  }
  write_metric(out, "disagg_router_kv_events_gaps_total", "counter", "Sequence gaps detected in KV event streams.", "",
               load(kv_gaps));
  write_metric(out, "disagg_router_kv_events_replays_total", "counter",
               "Gaps recovered by a replay from the publisher.", "", load(kv_replays));
  write_metric(out, "disagg_router_kv_events_restarts_total", "counter",
               "Publisher restarts detected (sequence went back).", "", load(kv_restarts));
  write_metric(out, "disagg_router_kv_events_decode_errors_total", "counter",
               "KV event messages that could not be decoded (dropped).", "", load(kv_decode_errors));
  write_metric(out, "disagg_router_kv_events_replay_malformed_total", "counter",
               "Replay answers of neither vLLM framing (skipped).", "", load(kv_replay_malformed));
  write_metric(out, "disagg_router_kv_events_replay_holes_total", "counter",
               "Replay answers that lacked batches asked for (the worker's buffer no longer reached back, or "
               "batches were lost on the way): the endpoint's entries were cleared, then the batches present applied.",
               "", load(kv_replay_holes));
  write_metric(out, "disagg_router_kv_warm_start_replays_total", "counter",
               "Replays asked when a KV-event subscription starts (from the start of the worker's buffer, or "
               "after a peer snapshot's sequence).",
               "", load(kv_warm_replays));
  out +=
      "# HELP disagg_router_kv_warm_start_blocks_total Blocks loaded at a subscription's start: stored by the "
      "replayed batches (source replay) or taken from a peer router's snapshot (source peer).\n"
      "# TYPE disagg_router_kv_warm_start_blocks_total counter\n";
  write_sample(out, "disagg_router_kv_warm_start_blocks_total", "source=\"replay\"", load(kv_warm_replay_blocks));
  write_sample(out, "disagg_router_kv_warm_start_blocks_total", "source=\"peer\"", load(kv_warm_peer_blocks));
  decision_seconds.write(out, "disagg_router_decision_seconds",
                         "Routing decision time: policy choice and P/D decision.");
  overhead_seconds.write(out, "disagg_router_overhead_seconds",
                         "Time from request received to upstream request sent, without queueing and prefill.");
  queue_seconds.write(out, "disagg_router_queue_seconds", "Time waiting for an admission slot.");
  ttft_seconds.write(out, "disagg_router_ttft_seconds", "Time to first token seen by streaming clients.");
  tpot_seconds.write(out, "disagg_router_tpot_seconds", "Time per output token seen by streaming clients.");
  e2e_seconds.write(out, "disagg_router_e2e_seconds", "End-to-end request latency seen by clients.");
}

ScrapedLoad parse_vllm_load(std::string_view text) {
  ScrapedLoad out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const std::size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, name_end);
    int which = -1;
    if (name == "vllm:num_requests_running") which = 0;
    else if (name == "vllm:num_requests_waiting") which = 1;
    else if (name == "vllm:kv_cache_usage_perc" || name == "vllm:gpu_cache_usage_perc") which = 2;
    else if (name == "vllm:prefix_cache_hits_total" || name == "vllm:gpu_prefix_cache_hits_total") which = 3;
    else if (name == "vllm:prefix_cache_queries_total" || name == "vllm:gpu_prefix_cache_queries_total") which = 4;
    else if (name == "disagg:sim_worker_pending_kv_transfers") which = 5;
    else if (name == "vllm:cache_config_info") which = 6;
    else continue;
    // The value follows the labels (which may contain spaces inside quotes) and precedes an
    // optional timestamp.
    std::size_t vstart = name_end;
    if (line[name_end] == '{') {
      bool quoted = false;
      std::size_t k = name_end + 1;
      for (; k < line.size(); ++k) {
        if (line[k] == '\\' && quoted) {
          ++k;
          continue;
        }
        if (line[k] == '"') quoted = !quoted;
        else if (line[k] == '}' && !quoted) break;
      }
      if (k >= line.size()) continue;
      vstart = k + 1;
      if (which == 6) {
        // The capacity is in the labels: num_gpu_blocks="N", block_size="B".
        const std::string_view labels = line.substr(name_end + 1, k - name_end - 1);
        const auto label = [&](std::string_view key) {
          double x = 0;
          for (std::size_t at = labels.find(key); at != std::string_view::npos; at = labels.find(key, at + 1)) {
            if (at != 0 && labels[at - 1] != ',') continue;
            const std::size_t q = at + key.size();
            if (labels.substr(q, 2) != "=\"") continue;
            const std::size_t close = labels.find('"', q + 2);
            if (close == std::string_view::npos) break;
            auto r = std::from_chars(labels.data() + q + 2, labels.data() + close, x);
            if (r.ec != std::errc() || !std::isfinite(x) || x < 0) x = 0;
            break;
          }
          return x;
        };
        out.num_gpu_blocks = label("num_gpu_blocks");
        out.gpu_block_size = label("block_size");
        continue;
      }
    }
    while (vstart < line.size() && line[vstart] == ' ') ++vstart;
    std::size_t vend = line.find(' ', vstart);
    if (vend == std::string_view::npos) vend = line.size();
    double v = 0;
    auto res = std::from_chars(line.data() + vstart, line.data() + vend, v);
    if (res.ec != std::errc() || !std::isfinite(v)) continue;
    if (which == 5) {
      out.pending_transfers += v;
      continue;
    }
    if (which >= 3) {
      out.prefix_found = true;
      (which == 3 ? out.prefix_hits : out.prefix_queries) += v;
      continue;
    }
    out.found = true;
    if (which == 0) out.running += v;
    else if (which == 1) out.waiting += v;
    else if (v > out.kv_usage) out.kv_usage = v;
  }
  return out;
}

}  // namespace disagg::router
