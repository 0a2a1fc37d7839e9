// disagg/route_plan.h — the one routing sequence of the router and the simulator: plan, then apply.
//
// A RoutePlanner holds the routing policy, the prefill/decode decider and the session table. For
// each request the caller (the router on the real clock, the simulator on a virtual one):
//   1. fills one EndpointState per endpoint (its last load report, plus routed_requests: the legs
//      the caller has in flight there, counted by the caller from dispatch to the leg's end);
//   2. calls plan_route() — const, never allocates, never throws — which
//        a. projects each endpoint's load: legs routed there that its load report does not show yet
//           (routed_requests - running - waiting, when positive) count as waiting, so a burst that
//           arrives between two reports spreads instead of following one stale report;
//        b. picks the decode endpoint (P/D) or the aggregated one with the policy;
//        c. keeps a session on the endpoint it used last (session affinity, when configured) while
//           that endpoint is eligible, has the same generation and its load is at most
//           guard_ratio x least load + guard_slack (the "disagg" policy's guard);
//        d. P/D: asks the PdDecider with the tokens the decode endpoint holds; if it says so, picks
//           the prefill endpoint with the same policy (in the prefill role's own state);
//   3. calls apply_route() with the same request, endpoints and plan, with no other apply_route()
//      in between: the policy learns each leg (decode or aggregated first, then prefill), and the
//      session table remembers the decode or aggregated endpoint;
//   4. dispatches, counting each leg in routed_requests until it ends, calls on_failed() for a leg
//      that failed before its worker answered, and on_finished() for each leg's end when the policy
//      tracks_finished().
// Neither the router nor the simulator keeps a routing sequence of its own, so a simulated policy
// is the deployed one, decision for decision (engine/tests/servers/router/route_plan_differential_test.cc).
//
// Positions in the span are what RouteDecision::index reports; endpoint ids are what the policy's
// state and the session table key on. Preconditions: those of RoutingPolicy (routing.h): at most
// kMaxRoutingEndpoints endpoints, ids unique and below it.
//
// Thread-safety: plan_route() may run concurrently with other plan_route() calls, but not with
// apply_route(), on_failed(), on_finished() or writes to the KvBlockIndex the policy reads (the router holds
// one lock across plan_route() and apply_route()).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "disagg/expected.h"
#include "disagg/routing.h"

namespace disagg {

/// How requests are routed, besides the policy's own options.
struct RoutePlanConfig {
  /// Prefill + decode endpoints (requests go to decode endpoints, prefill ones on the decider's
  /// word); false: aggregated endpoints serve whole requests.
  bool disaggregated = false;
  /// The prefill/decode decision (disaggregated only).
  PdDeciderConfig decider;
  /// Keep a request with a session key on the endpoint its session used last (see the file
  /// comment for when it is not kept). The router turns it on with --session-header.
  bool session_affinity = false;
  /// Sessions remembered (a direct-mapped table: a newer session may take an older one's entry).
  /// Range [1, 1 << 22].
  std::int32_t session_slots = 1 << 14;
};

/// One request's route, as plan_route() found it.
struct RoutePlan {
  /// Decode endpoint (P/D) or aggregated endpoint; index -1 when none is eligible.
  RouteDecision main;
  /// Prefill endpoint when the request is disaggregated; index -1 otherwise.
  RouteDecision prefill;
  /// Whether the PdDecider was asked (P/D with allow_pd, and a main endpoint found).
  bool pd_evaluated = false;
  /// Its answer (no_prefill_endpoint also when it said disaggregate but no prefill endpoint was
  /// eligible).
  PdReason reason = PdReason::below_threshold;
  /// Session affinity kept the request on an endpoint the policy did not pick.
  bool session_kept = false;
  /// Uncached prompt tokens the prefilling endpoint (prefill, or main when not disaggregated) must
  /// compute: prompt_tokens - its cached blocks x block_size, at least 0.
  std::int64_t prefill_tokens = 0;

  bool ok() const { return main.ok(); }
  bool disaggregated() const { return prefill.ok(); }
};

/// One endpoint as the policy saw it in a decision (RoutePlanner::explain_route()): why a request
/// went where it went, for the router's decision header and log.
struct CandidateView {
  EndpointId endpoint = 0;
  EndpointRole role = EndpointRole::aggregated;
  /// Healthy and of a role the request's legs use.
  bool eligible = false;
  /// Leading prompt blocks the policy believes the endpoint holds (RoutingPolicy::cached_prefix()).
  std::int32_t cached_blocks = 0;
  /// The policy's cost for the leg of the endpoint's role (lower is better); kIneligible when not
  /// eligible.
  double cost = kIneligible;
  /// Projected load (running + waiting, with the legs its report does not show yet), as plan_route()
  /// saw it.
  std::int64_t load = 0;
  double kv_usage = 0;
};

class RoutePlanner {
 public:
  /// The policy `policy_name` (make_routing_policy()) with `options`, and `config`. Failure modes:
  /// those of make_routing_policy(); invalid_option for session_slots out of range.
  static Expected<RoutePlanner, RoutingError> create(std::string_view policy_name, const PolicyOptions& options,
                                                     const RoutePlanConfig& config);

  /// Plans the route of `request` (its role is set here from the configuration) over `endpoints`.
  /// `allow_pd` false keeps a P/D request on its decode endpoint (the router's retries).
  RoutePlan plan_route(const RouteRequest& request, std::span<const EndpointState> endpoints,
                       bool allow_pd = true) const noexcept;

  /// Commits `plan` (see the file comment). Precondition: plan_route(request, endpoints) returned
  /// it and nothing changed in between. Allocates nothing beyond the policy's create-time bounds.
  void apply_route(const RouteRequest& request, std::span<const EndpointState> endpoints, const RoutePlan& plan);

  /// What plan_route() weighed, per endpoint: for each of the first out.size() endpoints, its cost
  /// for the leg of its role (decode or aggregated; prefill endpoints for the prefill leg, when
  /// disaggregated) and the prefix blocks the policy believes it holds, over the same projected
  /// loads. Call with the same arguments as plan_route(), before apply_route(). Returns the number
  /// written. Costs one more scoring pass per role: for requests that ask why, not for every one.
  /// Never allocates.
  std::size_t explain_route(const RouteRequest& request, std::span<const EndpointState> endpoints,
                            std::span<CandidateView> out) const noexcept;

  /// The `leg` (prefill, or the main leg: decode or aggregated) of a request applied with
  /// apply_route() failed on `endpoint` before the worker answered: the policy forgets what it
  /// learnt of that leg (RoutingPolicy::on_failed). `request` as given to apply_route(). Same lock
  /// as apply_route(). Never allocates.
  void on_failed(const RouteRequest& request, bool prefill_leg, EndpointId endpoint) noexcept {
    RouteRequest rq = request;
    rq.role = prefill_leg ? EndpointRole::prefill : main_role();
    policy_->on_failed(rq, endpoint);
  }

  /// A leg of `request_id` ended on `endpoint`. Cheap to skip when !tracks_finished().
  void on_finished(std::uint64_t request_id, EndpointId endpoint) { policy_->on_finished(request_id, endpoint); }
  bool tracks_finished() const noexcept { return policy_->tracks_finished(); }

  const RoutingPolicy& policy() const { return *policy_; }
  const RoutePlanConfig& config() const { return config_; }

  /// The role of the endpoint a request goes to first: decode (P/D) or aggregated.
  EndpointRole main_role() const { return config_.disaggregated ? EndpointRole::decode : EndpointRole::aggregated; }

 private:
  struct Session {
    std::uint64_t key = 0;
    std::uint32_t generation = 0;
    std::int32_t id = -1;
  };

  RoutePlanner(std::unique_ptr<RoutingPolicy> policy, const PolicyOptions& options, const RoutePlanConfig& config);

  std::unique_ptr<RoutingPolicy> policy_;
  PdDecider decider_;
  RoutePlanConfig config_;
  double guard_ratio_;
  double guard_slack_;
  std::vector<Session> sessions_;  // empty without session affinity
};

}  // namespace disagg
