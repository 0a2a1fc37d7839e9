// sim_routing.h — the simulator's side of the one routing sequence (disagg/route_plan.h), kept
// apart from the event loop so that a test can drive it beside the router's (the differential test
// in engine/tests/servers/router/route_plan_differential_test.cc).
//
// It owns one EndpointState per worker (position = worker index = endpoint id) and the legs in
// flight per worker (EndpointState::routed_requests): a request's main leg from apply() until its
// worker reports it done, a prefill leg until its prefill finishes, as the router counts them.
// The simulator refreshes the load fields of endpoints() (running, waiting, KV) from its schedulers
// before each plan(); it never writes routed_requests.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "disagg/route_plan.h"

namespace disagg::sim {

class SimRouting {
 public:
  /// `endpoints[i].id` must be i.
  SimRouting(RoutePlanner planner, std::vector<EndpointState> endpoints)
      : planner_(std::move(planner)), endpoints_(std::move(endpoints)) {}

  std::span<EndpointState> endpoints() { return endpoints_; }
  std::span<const EndpointState> endpoints() const { return endpoints_; }

  /// plan_route() over the workers as they are now.
  RoutePlan plan(const RouteRequest& request) const { return planner_.plan_route(request, endpoints_); }

  /// apply_route(), and the plan's legs start counting. Precondition: `plan` came from plan()
  /// with this request and nothing changed in between.
  void apply(const RouteRequest& request, const RoutePlan& plan) {
    planner_.apply_route(request, endpoints_, plan);
    ++endpoints_[static_cast<std::size_t>(plan.main.index)].routed_requests;
    if (plan.prefill.ok()) ++endpoints_[static_cast<std::size_t>(plan.prefill.index)].routed_requests;
  }

  /// A leg of `request_id` on `worker` ended (finished, failed or refused).
  void leg_done(std::uint64_t request_id, std::int32_t worker) {
    --endpoints_[static_cast<std::size_t>(worker)].routed_requests;
    if (planner_.tracks_finished()) planner_.on_finished(request_id, static_cast<EndpointId>(worker));
  }

  const RoutePlanner& planner() const { return planner_; }

 private:
  RoutePlanner planner_;
  std::vector<EndpointState> endpoints_;
};

}  // namespace disagg::sim
