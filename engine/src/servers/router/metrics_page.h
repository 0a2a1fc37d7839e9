// metrics_page.h — the text of the router's GET /metrics (Prometheus exposition 0.0.4): the
// request metrics (router_metrics.h), the request phases and KV transfer pairs (request_phases.h), the pools' scaling signals (scaling_signals.h), admission, upstream connections, the routing lock, and the
// index and per-endpoint families of the EndpointTable.
#pragma once

#include <string>

#include "admission.h"
#include "endpoint_table.h"
#include "request_phases.h"
#include "router_metrics.h"
#include "scaling_signals.h"
#include "upstream_clients.h"

namespace disagg::router {

/// Both pools' scaling signals now (scaling_signals.h): the table's endpoints, the request path's
/// queued-request gauges in `metrics`, and the prefill pool's mean prompt since the last call
/// (`prefill_mean`).
void compute_pool_signals(const RouterMetrics& metrics, EndpointTable& table, const AutoscalingSignalsConfig& config,
                          MeanPromptTracker& prefill_mean, PoolSignals& prefill, PoolSignals& decode);

/// The page, with the pool signals `prefill` and `decode`.
std::string render_metrics_page(const RouterMetrics& metrics, const RequestPhaseMetrics& phases,
                                const Admission& admission, const UpstreamClients& clients, EndpointTable& table,
                                const PoolSignals& prefill, const PoolSignals& decode);

}  // namespace disagg::router
