// RoutePlanner: the one routing sequence of router and simulator (disagg/route_plan.h). Bursts
// between load reports, per-role state under P/D, ties, session affinity, the P/D decision.
#include "disagg/route_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "disagg/block_hash.h"

namespace disagg {
namespace {

RoutePlanner make(std::string_view policy, RoutePlanConfig config = {}, PolicyOptions options = {}) {
  auto p = RoutePlanner::create(policy, options, config);
  EXPECT_TRUE(p.has_value()) << policy;
  return std::move(p).value();
}

std::vector<EndpointState> endpoints(const std::vector<EndpointRole>& roles) {
  std::vector<EndpointState> v(roles.size());
  for (std::size_t i = 0; i < roles.size(); ++i) {
    v[i].id = static_cast<EndpointId>(i);
    v[i].role = roles[i];
    v[i].total_kv_blocks = 1000;
    v[i].free_kv_blocks = 1000;
  }
  return v;
}

// A prompt of its own (nothing to share) of `tokens` tokens, hashed in blocks of 16.
struct Prompt {
  std::vector<TokenId> tokens;
  std::vector<BlockHash> hashes;
};
Prompt unique_prompt(std::uint64_t seed, std::size_t tokens) {
  Prompt p;
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < tokens; ++i) p.tokens.push_back(static_cast<TokenId>(rng() % 100'000));
  p.hashes.resize(tokens / 16);
  p.hashes.resize(hash_blocks(p.tokens, 16, kRootBlockHash, p.hashes));
  return p;
}

RouteRequest request(std::uint64_t id, const Prompt& p) {
  RouteRequest r;
  r.request_id = id;
  r.prompt_tokens = static_cast<std::int64_t>(p.tokens.size());
  r.block_hashes = p.hashes;
  r.block_size = 16;
  return r;
}

// Routes `count` requests back to back, with no load report in between: only the legs the caller
// counts (routed_requests, queued prefill tokens) change, as the router and the simulator count them.
std::map<int, int> burst(RoutePlanner& planner, std::vector<EndpointState>& eps, int count, std::uint64_t first_id) {
  std::map<int, int> by_endpoint;
  for (int k = 0; k < count; ++k) {
    const Prompt p = unique_prompt(first_id + static_cast<std::uint64_t>(k), 512);
    const RouteRequest r = request(first_id + static_cast<std::uint64_t>(k), p);
    const RoutePlan plan = planner.plan_route(r, eps);
    EXPECT_TRUE(plan.ok());
    if (!plan.ok()) break;
    planner.apply_route(r, eps, plan);
    EndpointState& main = eps[static_cast<std::size_t>(plan.main.index)];
    ++main.routed_requests;
    if (plan.disaggregated()) {
      EndpointState& pre = eps[static_cast<std::size_t>(plan.prefill.index)];
      ++pre.routed_requests;
      pre.inflight_prefill_tokens += plan.prefill_tokens;
      ++by_endpoint[plan.prefill.index];
    } else {
      main.inflight_prefill_tokens += plan.prefill_tokens;
    }
    ++by_endpoint[plan.main.index];
  }
  return by_endpoint;
}

TEST(RoutePlanner, BurstBetweenLoadReportsSpreadsOverIdleEndpointsForEveryPolicy) {
  // Found with the llm-d policy: one of three workers busy, 60 requests at once split 20 / 0 / 40:
  // it ignored the requests it had routed since the last scrape, and a tie skipped by the busy
  // worker handed its share to the next one.
  for (const std::string_view name : routing_policy_names()) {
    SCOPED_TRACE(std::string(name));
    // GIVEN three aggregated endpoints, the middle one busy in its last load report
    RoutePlanner planner = make(name);
    auto eps = endpoints({EndpointRole::aggregated, EndpointRole::aggregated, EndpointRole::aggregated});
    eps[1].running_requests = 10;
    eps[1].waiting_requests = 5;
    eps[1].kv_usage = 0.8;
    eps[1].free_kv_blocks = 200;
    eps[1].inflight_prefill_tokens = 5 * 512;
    eps[1].routed_requests = 15;  // this router sent them
    // WHEN 60 requests arrive before the next report
    std::map<int, int> n = burst(planner, eps, 60, 1);
    // THEN the idle endpoints share them evenly
    EXPECT_LE(std::abs(n[0] - n[2]), 2) << n[0] << " / " << n[1] << " / " << n[2];
    EXPECT_EQ(n[0] + n[1] + n[2], 60);
    // AND a policy that weighs all of an endpoint's load sends the busy one no more than either
    // idle one (llm-d weighs the waiting queue and KV use only, SGLang the load only when loads
    // differ by more than 64, and round robin none)
    if (name == "least-load" || name == "dynamo" || name == "disagg") {
      EXPECT_LE(n[1], std::min(n[0], n[2])) << n[0] << " / " << n[1] << " / " << n[2];
    }
  }
}

TEST(RoutePlanner, RoutedLegsTheReportDoesNotShowCountAsWaiting) {
  // GIVEN two idle endpoints per their reports, one with 6 legs of this router in flight
  RoutePlanner planner = make("least-load");
  auto eps = endpoints({EndpointRole::aggregated, EndpointRole::aggregated});
  eps[0].routed_requests = 6;
  eps[1].running_requests = 4;  // reported: 4 running, none from this router yet
  const Prompt p = unique_prompt(1, 64);
  // THEN endpoint 1 (load 4) wins over endpoint 0 (load 0 reported + 6 unseen)
  EXPECT_EQ(planner.plan_route(request(1, p), eps).main.index, 1);
  // AND once endpoint 0's report shows its legs, they are not counted twice
  eps[0].running_requests = 3;
  eps[0].waiting_requests = 0;
  eps[0].routed_requests = 3;
  EXPECT_EQ(planner.plan_route(request(2, p), eps).main.index, 0);
}

TEST(RoutePlanner, EveryPolicyUsesEveryEndpointOfEachRoleUnderPd) {
  // Found with round robin: one cursor for both roles, moved by the decode pick before the prefill
  // pick, sent all 40 requests of `disagg local --prefill 2 --decode 2` to one prefill endpoint.
  for (const std::string_view name : routing_policy_names()) {
    SCOPED_TRACE(std::string(name));
    RoutePlanConfig c;
    c.disaggregated = true;
    c.decider.min_uncached_tokens = 1;
    RoutePlanner planner = make(name, c);
    auto eps = endpoints({EndpointRole::prefill, EndpointRole::prefill, EndpointRole::prefill, EndpointRole::prefill,
                          EndpointRole::decode, EndpointRole::decode});
    std::map<int, int> n = burst(planner, eps, 40, 100);
    for (int i = 0; i < 6; ++i) EXPECT_GE(n[i], 40 / 4 / 2) << "endpoint " << i;
    EXPECT_EQ(n[0] + n[1] + n[2] + n[3], 40);  // every request disaggregated
    EXPECT_EQ(n[4] + n[5], 40);
  }
}

TEST(RoutePlanner, RoundRobinRotatesEachRoleOnItsOwn) {
  RoutePlanConfig c;
  c.disaggregated = true;
  c.decider.min_uncached_tokens = 1;
  RoutePlanner planner = make("round-robin", c);
  auto eps = endpoints({EndpointRole::prefill, EndpointRole::prefill, EndpointRole::decode, EndpointRole::decode});
  std::vector<std::pair<int, int>> picks;
  for (std::uint64_t id = 1; id <= 4; ++id) {
    const Prompt p = unique_prompt(id, 64);
    const RouteRequest r = request(id, p);
    const RoutePlan plan = planner.plan_route(r, eps);
    planner.apply_route(r, eps, plan);
    picks.emplace_back(plan.prefill.index, plan.main.index);
  }
  EXPECT_EQ(picks, (std::vector<std::pair<int, int>>{{0, 2}, {1, 3}, {0, 2}, {1, 3}}));
}

TEST(RoutePlanner, SessionStaysWhileItsEndpointIsNotOverloaded) {
  RoutePlanConfig c;
  c.session_affinity = true;
  RoutePlanner planner = make("least-load", c);
  auto eps = endpoints({EndpointRole::aggregated, EndpointRole::aggregated});
  const Prompt p = unique_prompt(3, 64);
  RouteRequest r = request(1, p);
  r.session_key = 42;
  // GIVEN a session's first request on endpoint 1 (endpoint 0 was busier)
  eps[0].running_requests = 2;
  RoutePlan plan = planner.plan_route(r, eps);
  ASSERT_EQ(plan.main.index, 1);
  planner.apply_route(r, eps, plan);
  // WHEN endpoint 1 becomes the busier, within the guard (<= 1.5 x 2 + 8)
  eps[0].running_requests = 2;
  eps[1].running_requests = 10;
  r.request_id = 2;
  plan = planner.plan_route(r, eps);
  // THEN the session stays there
  EXPECT_EQ(plan.main.index, 1);
  EXPECT_TRUE(plan.session_kept);
  planner.apply_route(r, eps, plan);
  // AND a request of another session goes by load
  RouteRequest other = r;
  other.session_key = 43;
  EXPECT_EQ(planner.plan_route(other, eps).main.index, 0);
  // WHEN endpoint 1 passes the guard THEN the session moves
  eps[1].running_requests = 12;
  r.request_id = 3;
  plan = planner.plan_route(r, eps);
  EXPECT_EQ(plan.main.index, 0);
  EXPECT_FALSE(plan.session_kept);
  planner.apply_route(r, eps, plan);
  // WHEN endpoint 0 (the session's now) is the busier, within the guard THEN it stays
  eps[0].running_requests = 5;
  eps[1].running_requests = 2;
  r.request_id = 4;
  plan = planner.plan_route(r, eps);
  EXPECT_EQ(plan.main.index, 0);
  EXPECT_TRUE(plan.session_kept);
  // WHEN its endpoint id goes to another endpoint (a new generation) THEN the session is not kept
  eps[0].generation = 7;
  plan = planner.plan_route(r, eps);
  EXPECT_EQ(plan.main.index, 1);
  EXPECT_FALSE(plan.session_kept);
}

TEST(RoutePlanner, PdDecisionUsesTheDecodeEndpointsCacheAndCountsPrefillTokens) {
  KvIndexConfig ic;
  ic.max_entries = 1 << 12;
  auto index = KvBlockIndex::create(ic);
  ASSERT_TRUE(index.has_value());
  PolicyOptions o;
  o.index = &*index;
  RoutePlanConfig c;
  c.disaggregated = true;
  c.decider.min_uncached_tokens = 256;
  RoutePlanner planner = make("llm-d", c, o);
  auto eps = endpoints({EndpointRole::prefill, EndpointRole::decode});
  const Prompt p = unique_prompt(9, 1024);  // 64 blocks
  // GIVEN the decode endpoint holds 56 of the 64 blocks: 128 tokens uncached
  ASSERT_TRUE(index->apply_stored(1, KvTier::gpu, std::span(p.hashes).first(56)).has_value());
  RoutePlan plan = planner.plan_route(request(1, p), eps);
  // THEN it is served whole on decode, which prefills the 128 uncached tokens
  EXPECT_TRUE(plan.pd_evaluated);
  EXPECT_EQ(plan.reason, PdReason::below_threshold);
  EXPECT_FALSE(plan.disaggregated());
  EXPECT_EQ(plan.main.index, 1);
  EXPECT_EQ(plan.prefill_tokens, 128);
  // WHEN it holds 8 THEN the prefill endpoint prefills all 1024 (it holds none)
  ASSERT_TRUE(index->clear(1) > 0);
  ASSERT_TRUE(index->apply_stored(1, KvTier::gpu, std::span(p.hashes).first(8)).has_value());
  plan = planner.plan_route(request(2, p), eps);
  EXPECT_EQ(plan.reason, PdReason::disaggregate);
  EXPECT_EQ(plan.prefill.index, 0);
  EXPECT_EQ(plan.prefill_tokens, 1024);
  // AND retries do not disaggregate
  plan = planner.plan_route(request(3, p), eps, /*allow_pd=*/false);
  EXPECT_FALSE(plan.pd_evaluated);
  EXPECT_FALSE(plan.disaggregated());
  // AND with no healthy prefill endpoint it stays on decode
  eps[0].healthy = false;
  plan = planner.plan_route(request(4, p), eps);
  EXPECT_EQ(plan.reason, PdReason::no_prefill_endpoint);
  EXPECT_FALSE(plan.disaggregated());
  EXPECT_EQ(plan.prefill_tokens, 1024 - 8 * 16);
}

TEST(RoutePlanner, RefusesSessionTablesOutOfRange) {
  RoutePlanConfig c;
  c.session_slots = 0;
  auto p = RoutePlanner::create("llm-d", {}, c);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().message.find("sessionSlots"), std::string::npos);
  EXPECT_FALSE(RoutePlanner::create("no-such-policy", {}, {}).has_value());
}

// explain_route() reports what plan_route() weighed: per endpoint, the cost of its role's leg over
// the same projected loads, and the prefix the policy believes it holds; the pick is the eligible
// endpoint of least cost.
TEST(RoutePlanner, ExplainRouteShowsWhatThePlanWeighed) {
  PolicyOptions options;
  options.max_endpoints = 4;
  RoutePlanner planner = make("llm-d", {}, options);
  std::vector<EndpointState> eps =
      endpoints({EndpointRole::aggregated, EndpointRole::aggregated, EndpointRole::aggregated});
  eps[2].healthy = false;
  // GIVEN a prompt routed once (the history now places it on one endpoint)
  const Prompt p = unique_prompt(7, 512);
  const RoutePlan first = planner.plan_route(request(1, p), eps);
  ASSERT_TRUE(first.ok());
  planner.apply_route(request(1, p), eps, first);
  eps[static_cast<std::size_t>(first.main.index)].routed_requests = 1;
  // WHEN the same prompt is planned and explained
  const RouteRequest again = request(2, p);
  const RoutePlan plan = planner.plan_route(again, eps);
  std::array<CandidateView, kMaxRoutingEndpoints> views;
  ASSERT_EQ(planner.explain_route(again, eps, views), 3u);
  // THEN the pick holds all 32 blocks, the other none; the unhealthy one is ineligible; the pick
  // is the eligible endpoint of least cost, and the views match the plan
  const CandidateView& picked = views[static_cast<std::size_t>(plan.main.index)];
  EXPECT_EQ(plan.main.index, first.main.index);
  EXPECT_EQ(picked.cached_blocks, 32);
  EXPECT_EQ(picked.cached_blocks, plan.main.cached_blocks);
  EXPECT_DOUBLE_EQ(picked.cost, plan.main.score);
  EXPECT_EQ(picked.load, 1);  // the leg its report does not show yet counts as waiting
  EXPECT_FALSE(views[2].eligible);
  EXPECT_EQ(views[2].cost, kIneligible);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(views[i].eligible);
    EXPECT_EQ(views[i].endpoint, eps[i].id);
    if (static_cast<std::int32_t>(i) != plan.main.index) {
      EXPECT_EQ(views[i].cached_blocks, 0);
      EXPECT_GT(views[i].cost, picked.cost);
    }
  }
  // AND under P/D, prefill endpoints are explained with the prefill leg's cost
  RoutePlanConfig pd;
  pd.disaggregated = true;
  RoutePlanner pd_planner = make("llm-d", pd, options);
  std::vector<EndpointState> pd_eps = endpoints({EndpointRole::prefill, EndpointRole::decode});
  ASSERT_EQ(pd_planner.explain_route(request(3, p), pd_eps, views), 2u);
  EXPECT_TRUE(views[0].eligible);
  EXPECT_EQ(views[0].role, EndpointRole::prefill);
  EXPECT_TRUE(views[1].eligible);
  EXPECT_EQ(views[1].role, EndpointRole::decode);
}

}  // namespace
}  // namespace disagg
