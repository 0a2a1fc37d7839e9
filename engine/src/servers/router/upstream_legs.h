// upstream_legs.h — a request's upstream legs, once it is admitted: the decision (EndpointTable),
// the P/D prefill leg, the main leg with retries on another endpoint while nothing was relayed
// (connect failure, 5xx, first-byte timeout; never after the first byte), and the relay of the
// answer to the client: streamed as it arrives (SSE), or whole. A client that leaves cancels the
// leg in flight; a worker that breaks mid-stream ends the client's stream with an OpenAI error
// event. Each leg is counted in the table from the decision to its end.
//
// A draining endpoint (answers 503: scaled down, finishing its requests in flight): the request is
// sent to another endpoint at once (prefill legs too), the endpoint gets no new request, and none
// of it counts as a failure or against max_retries (drained_endpoint_retries_total). Legs in flight
// on an endpoint that drains or leaves the table (DNS) are never cancelled for it: they run to their
// end. With the `autoscaling` block, a request that finds no ready endpoint waits for one up to
// queue_timeout_ms (the pool's queued_requests signal), so that a pool scaled to zero comes back.
//
// A failed KV pull (vLLM's kv_load_failure_policy 'fail'): a decode leg that carried the prefill's
// kv_transfer_params and failed before anything was relayed (5xx, a stream that opens with an error
// event, a connection that broke after the request was sent) is retried decode-only, without the
// parameters, so the worker prefills the prompt itself; a 5xx or an error event then does not count
// against the decode endpoint. Under 'recompute' vLLM does that itself and the router sees none.
// Such a stream's header therefore goes to the client with its first word, not before it.
//
// A request served records where its time went (request_phases.h): the instants of its last
// attempt's legs, split into phases after the relay.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "disagg/routing.h"
#include "endpoint_table.h"
#include "request_phases.h"
#include "lib/http/http_client.h"
#include "lib/http/http_server.h"
#include "lib/openai/request_parse.h"
#include "router_config.h"
#include "router_metrics.h"
#include "upstream_clients.h"

namespace disagg::router {

/// How a proxied request ended (the requests_total outcome).
enum class ProxyOutcome : int { ok = 0, error = 1, client_gone = 2 };

class UpstreamLegs {
 public:
  /// All must outlive this object.
  UpstreamLegs(EndpointTable& table, const UpstreamClients& clients, RouterMetrics& metrics,
               RequestPhaseMetrics& phases, const RouterConfig& config)
      : table_(table), clients_(clients), metrics_(metrics), phases_(phases), config_(config) {}

  /// Routes and proxies the request `req` (parsed as `g`; `body` is its document when P/D needs
  /// one, else null) and answers the client on `w`. `t0`: when the request arrived; `queued`: the
  /// seconds it waited for admission (excluded from the overhead metric).
  http::Task<ProxyOutcome> proxy(http::Request& req, http::ResponseWriter& w, const RequestJson& body,
                                 const GenerateRequest& g, const RouteRequest& rq, Clock::time_point t0, double queued);

 private:
  http::Task<nlohmann::json> run_prefill(http::net::any_io_executor ex, Pick& p, const RequestJson& body,
                                         std::string target, std::string request_id, Clock::time_point deadline,
                                         http::ClientCancel* cancel, bool* drained);
  /// Relays the answer; fills `clock`'s first_byte, end, inter_token_seconds and streamed.
  http::Task<ProxyOutcome> relay(http::ResponseWriter& w, http::ClientStream& up, Pick& pick, const GenerateRequest& g,
                                 Clock::time_point t0, const std::string& prefill_label, const std::string& decision,
                                 PhaseClock& clock, std::string head = {});

  EndpointTable& table_;
  const UpstreamClients& clients_;
  RouterMetrics& metrics_;
  RequestPhaseMetrics& phases_;
  const RouterConfig& config_;
};

}  // namespace disagg::router
