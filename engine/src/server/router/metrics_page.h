// metrics_page.h — the text of the router's GET /metrics (Prometheus exposition 0.0.4): the
// request metrics (router_metrics.h), admission, upstream connections, the routing lock, and the
// index and per-endpoint families of the EndpointTable.
#pragma once

#include <string>

#include "admission.h"
#include "endpoint_table.h"
#include "router_metrics.h"
#include "upstream_clients.h"

namespace disagg::router {

std::string render_metrics_page(const RouterMetrics& metrics, const Admission& admission,
                                const UpstreamClients& clients, EndpointTable& table);

}  // namespace disagg::router
