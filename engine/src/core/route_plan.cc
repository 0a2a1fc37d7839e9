// route_plan.cc — plan_route() / apply_route(): the one routing sequence (disagg/route_plan.h).
#include "disagg/route_plan.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "routing_internal.h"

namespace disagg {

using routing_detail::considered;

Expected<RoutePlanner, RoutingError> RoutePlanner::create(std::string_view policy_name, const PolicyOptions& options,
                                                          const RoutePlanConfig& config) {
  if (config.session_slots < 1 || config.session_slots > (1 << 22)) {
    return unexpected(RoutingError{
        RoutingErrc::invalid_option,
        "'sessionSlots' (" + std::to_string(config.session_slots) + ") must be in [1, 4194304]; e.g. 16384"});
  }
  auto policy = make_routing_policy(policy_name, options);
  if (!policy) return unexpected(std::move(policy).error());
  return RoutePlanner(std::move(*policy), options, config);
}

RoutePlanner::RoutePlanner(std::unique_ptr<RoutingPolicy> policy, const PolicyOptions& options,
                           const RoutePlanConfig& config)
    : policy_(std::move(policy)),
      decider_(config.decider),
      config_(config),
      guard_ratio_(options.guard_ratio),
      guard_slack_(options.guard_slack) {
  if (config_.session_affinity) sessions_.resize(static_cast<std::size_t>(config_.session_slots));
}

namespace {

// plan_route()'s step (a): legs routed to an endpoint that its load report does not show yet
// count as waiting. Writes the first considered(endpoints) entries of `projected`.
std::span<const EndpointState> project(std::span<const EndpointState> endpoints,
                                       std::array<EndpointState, kMaxRoutingEndpoints>& projected) {
  const std::size_t n = considered(endpoints);
  for (std::size_t i = 0; i < n; ++i) {
    EndpointState& e = projected[i];
    e = endpoints[i];
    const std::int64_t unseen = std::int64_t{e.routed_requests} - e.load();
    if (unseen > 0) e.waiting_requests += static_cast<std::int32_t>(unseen);
  }
  return {projected.data(), n};
}

}  // namespace

RoutePlan RoutePlanner::plan_route(const RouteRequest& request, std::span<const EndpointState> endpoints,
                                   bool allow_pd) const noexcept {
  RoutePlan plan;
  // (a) The projected snapshot: on the stack, as choose() never allocates.
  std::array<EndpointState, kMaxRoutingEndpoints> projected;
  const std::span<const EndpointState> st = project(endpoints, projected);
  const std::size_t n = st.size();

  // (b) The main leg.
  RouteRequest rq = request;
  rq.role = main_role();
  plan.main = policy_->choose(rq, st);
  if (!plan.main.ok()) return plan;

  // (c) Session affinity.
  if (!sessions_.empty() && rq.session_key != 0) {
    const Session& s = sessions_[rq.session_key % sessions_.size()];
    if (s.key == rq.session_key && s.id >= 0 && s.id != plan.main.endpoint) {
      std::int64_t min_load = INT64_MAX;
      std::int32_t pos = -1;
      for (std::size_t i = 0; i < n; ++i) {
        if (!eligible(st[i], rq)) continue;
        min_load = std::min(min_load, st[i].load());
        if (st[i].id == s.id && st[i].generation == s.generation) pos = static_cast<std::int32_t>(i);
      }
      if (pos >= 0 && static_cast<double>(st[static_cast<std::size_t>(pos)].load()) <=
                          guard_ratio_ * static_cast<double>(min_load) + guard_slack_) {
        const EndpointState& kept = st[static_cast<std::size_t>(pos)];
        plan.main.index = pos;
        plan.main.endpoint = kept.id;
        plan.main.cached_blocks = policy_->cached_prefix(rq, kept);
        plan.session_kept = true;
      }
    }
  }

  // (d) Disaggregate or not, and the prefill leg.
  const std::int64_t block_size = rq.block_size > 0 ? rq.block_size : 1;
  std::int64_t cached_tokens = std::int64_t{plan.main.cached_blocks} * block_size;
  if (config_.disaggregated && allow_pd) {
    plan.pd_evaluated = true;
    plan.reason = decider_.decide(rq.prompt_tokens, cached_tokens, st);
    if (plan.reason == PdReason::disaggregate) {
      RouteRequest pr = rq;
      pr.role = EndpointRole::prefill;
      plan.prefill = policy_->choose(pr, st);
      if (plan.prefill.ok()) {
        cached_tokens = std::int64_t{plan.prefill.cached_blocks} * block_size;
      } else {
        plan.reason = PdReason::no_prefill_endpoint;
      }
    }
  }
  plan.prefill_tokens = std::max<std::int64_t>(0, rq.prompt_tokens - cached_tokens);
  return plan;
}

std::size_t RoutePlanner::explain_route(const RouteRequest& request, std::span<const EndpointState> endpoints,
                                        std::span<CandidateView> out) const noexcept {
  std::array<EndpointState, kMaxRoutingEndpoints> projected;
  const std::span<const EndpointState> st = project(endpoints, projected);
  const std::size_t n = std::min(st.size(), out.size());
  std::array<double, kMaxRoutingEndpoints> costs;
  const auto pass = [&](EndpointRole role) {
    RouteRequest rq = request;
    rq.role = role;
    policy_->score(rq, st, std::span<double>(costs.data(), st.size()));
    for (std::size_t i = 0; i < n; ++i) {
      if (st[i].role != role) continue;
      CandidateView& c = out[i];
      c.eligible = eligible(st[i], rq) && costs[i] != kIneligible;
      c.cost = c.eligible ? costs[i] : kIneligible;
      c.cached_blocks = policy_->cached_prefix(rq, st[i]);
    }
  };
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = CandidateView{};
    out[i].endpoint = st[i].id;
    out[i].role = st[i].role;
    out[i].load = st[i].load();
    out[i].kv_usage = st[i].kv_usage;
  }
  pass(main_role());
  if (config_.disaggregated) pass(EndpointRole::prefill);
  return n;
}

void RoutePlanner::apply_route(const RouteRequest& request, std::span<const EndpointState> endpoints,
                               const RoutePlan& plan) {
  if (!plan.main.ok()) return;
  RouteRequest rq = request;
  rq.role = main_role();
  policy_->on_routed(rq, endpoints[static_cast<std::size_t>(plan.main.index)]);
  if (plan.prefill.ok()) {
    rq.role = EndpointRole::prefill;
    policy_->on_routed(rq, endpoints[static_cast<std::size_t>(plan.prefill.index)]);
  }
  if (!sessions_.empty() && request.session_key != 0) {
    const EndpointState& e = endpoints[static_cast<std::size_t>(plan.main.index)];
    sessions_[request.session_key % sessions_.size()] = Session{request.session_key, e.generation, e.id};
  }
}

}  // namespace disagg
