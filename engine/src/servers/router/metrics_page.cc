// metrics_page.cc — the router's /metrics text (metrics_page.h).
#include "metrics_page.h"

#include <algorithm>
#include <chrono>

namespace disagg::router {

void compute_pool_signals(const RouterMetrics& metrics, EndpointTable& table, const AutoscalingSignalsConfig& config,
                          MeanPromptTracker& prefill_mean, PoolSignals& prefill, PoolSignals& decode) {
  PoolObservation p, d;
  table.observe_pools(p, d);
  p.queued_requests = static_cast<double>(std::max<std::int64_t>(0, metrics.waiting_for_prefill.load()));
  d.queued_requests = static_cast<double>(std::max<std::int64_t>(0, metrics.waiting_for_endpoint.load()));
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const MeanPromptTracker::Reading flow =
      prefill_mean.update(p.routed_prompt_tokens_total, p.routed_requests_total, now, p.routed_prompt_squares_total);
  prefill = prefill_pool_signals(p, flow.mean_prompt_tokens, flow.prompt_tokens_per_second, config, flow.prompt_cv2);
  decode = decode_pool_signals(d, config);
}

std::string render_metrics_page(const RouterMetrics& metrics, const RequestPhaseMetrics& phases,
                                const Admission& admission, const UpstreamClients& clients, EndpointTable& table,
                                const PoolSignals& prefill, const PoolSignals& decode) {
  std::string out;
  out.reserve(16 << 10);
  metrics.write(out);
  phases.write(out);
  write_pool_signals(out, prefill, decode);
  write_metric(out, "disagg_router_inflight_requests", "gauge", "Requests being proxied now.", "", admission.active());
  write_metric(out, "disagg_router_queued_requests", "gauge", "Requests waiting for an admission slot.", "",
               admission.queued());
  write_metric(out, "disagg_router_upstream_connections_reused_total", "counter",
               "Upstream requests sent over a kept-alive connection.", "", clients.reused());
  write_metric(out, "disagg_router_upstream_idle_connections", "gauge",
               "Kept-alive upstream connections waiting for a request.", "", clients.idle());
  write_metric(
      out, "disagg_router_routing_lock_sleeps_total", "counter",
      "Times a thread slept waiting for the routing lock (scoring is serialized; spinning covers short waits).", "",
      static_cast<double>(table.lock_sleeps()));
  table.write_metrics(out);
  return out;
}

}  // namespace disagg::router
