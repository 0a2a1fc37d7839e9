// Precise prefix routing with pending routes (PolicyOptions::pending_blocks_ms): the blocks a
// policy routed count as cached on their endpoint until the TTL passes, whether or not the KV-event
// index has heard of them yet; an endpoint's overlap is the longer of the index's and the pending
// one. Checked for the policies that read the index ("sglang" keeps its own tree, never the index).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string_view>
#include <vector>

#include "disagg/route_plan.h"
#include "disagg/routing.h"

namespace disagg {
namespace {

constexpr double kTtlMs = 2000;
constexpr std::size_t kPendingRoutes = 1024;  // routes the ring keeps (routing_internal.h)
const std::vector<std::string_view> kIndexPolicies = {"llm-d", "dynamo", "disagg"};

std::vector<BlockHash> chain(BlockHash first, int n) {
  std::vector<BlockHash> v;
  for (int i = 0; i < n; ++i) v.push_back(first + static_cast<BlockHash>(i));
  return v;
}

std::vector<EndpointState> pool(int n) {
  std::vector<EndpointState> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    v[static_cast<std::size_t>(i)].id = static_cast<EndpointId>(i);
    v[static_cast<std::size_t>(i)].kv_usage = 0.3;
  }
  return v;
}

RouteRequest request_for(const std::vector<BlockHash>& hashes, std::uint64_t id, std::int64_t now_ms) {
  RouteRequest r;
  r.request_id = id;
  r.block_hashes = hashes;
  r.prompt_tokens = static_cast<std::int64_t>(hashes.size()) * r.block_size;
  r.now_ms = now_ms;
  return r;
}

KvBlockIndex make_index() {
  KvIndexConfig c;
  c.max_entries = 1 << 12;
  return std::move(KvBlockIndex::create(c)).value();
}

std::unique_ptr<RoutingPolicy> make(std::string_view name, const KvBlockIndex& index, double pending_ms) {
  PolicyOptions o;
  o.index = &index;
  o.pending_blocks_ms = pending_ms;
  auto p = make_routing_policy(name, o);
  EXPECT_TRUE(p.has_value()) << name << ": " << (p.has_value() ? "" : p.error().message);
  return std::move(p).value();
}

// Routes `hashes` as request `id` at `now_ms` with `policy` and returns the decision; `twin`, when
// given, learns the same route (so that state other than the prefix source, such as "disagg"'s
// uncached share per endpoint, stays alike in both).
RouteDecision route(RoutingPolicy& policy, const std::vector<EndpointState>& eps, const std::vector<BlockHash>& hashes,
                    std::uint64_t id, std::int64_t now_ms, RoutingPolicy* twin = nullptr) {
  const RouteRequest r = request_for(hashes, id, now_ms);
  const RouteDecision d = policy.choose(r, eps);
  if (!d.ok()) return d;
  policy.on_routed(r, eps[static_cast<std::size_t>(d.index)]);
  if (twin != nullptr) twin->on_routed(r, eps[static_cast<std::size_t>(d.index)]);
  return d;
}

TEST(PendingRoutes, DefaultIsOnAndTheKnobIsSettable) {
  PolicyOptions o;
  EXPECT_EQ(o.pending_blocks_ms, kTtlMs);
  ASSERT_TRUE(set_policy_option(o, "pendingBlocksMs", 500).has_value());
  EXPECT_EQ(o.pending_blocks_ms, 500);
  ASSERT_TRUE(set_policy_option(o, "pendingBlocksMs", 0).has_value());
  auto negative = set_policy_option(o, "pendingBlocksMs", -1);
  ASSERT_FALSE(negative.has_value());
  EXPECT_EQ(negative.error().code, RoutingErrc::invalid_option);
  EXPECT_EQ(negative.error().message.rfind("'pendingBlocksMs' (-1) must be in [0, 600000]", 0), 0u)
      << negative.error().message;
  EXPECT_FALSE(set_policy_option(o, "pendingBlocksMs", 600'001).has_value());
  EXPECT_EQ(o.pending_blocks_ms, 0);
}

TEST(PendingRoutes, RoutedPromptIsPreferredWithinTheTtlBeforeAnyKvEvent) {
  // GIVEN an empty index (no KV event yet) and four equal endpoints
  const KvBlockIndex index = make_index();
  const auto eps = pool(4);
  const auto prompt = chain(1000, 32);
  for (const auto name : kIndexPolicies) {
    auto policy = make(name, index, kTtlMs);
    // WHEN a prompt is routed at t = 10 s
    const RouteDecision first = route(*policy, eps, prompt, 1, 10'000);
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first.cached_blocks, 0) << name;
    // THEN identical requests (other ids, so other tie seeds) follow it until just before the TTL,
    // with its 32 blocks believed cached
    for (std::uint64_t id = 2; id <= 9; ++id) {
      const RouteDecision d =
          policy->choose(request_for(prompt, id, 10'000 + 250 * static_cast<std::int64_t>(id - 2)), eps);
      EXPECT_EQ(d.index, first.index) << name << " request " << id;
      EXPECT_EQ(d.cached_blocks, 32) << name << " request " << id;
    }
    // AND a longer turn of the same conversation too, with the 32 blocks it shares
    const auto follow_up = chain(1000, 40);
    const RouteDecision next = policy->choose(request_for(follow_up, 77, 11'999), eps);
    EXPECT_EQ(next.index, first.index) << name;
    EXPECT_EQ(next.cached_blocks, 32) << name;
    // AND a shorter one with all of its blocks
    const RouteDecision shorter = policy->choose(request_for(chain(1000, 12), 78, 11'999), eps);
    EXPECT_EQ(shorter.cached_blocks, 12) << name;
  }
}

TEST(PendingRoutes, ForgottenOnceTheTtlHasPassed) {
  // GIVEN a prompt routed at t = 10 s, never confirmed by a KV event
  const KvBlockIndex index = make_index();
  const auto eps = pool(4);
  const auto prompt = chain(1000, 32);
  for (const auto name : kIndexPolicies) {
    auto policy = make(name, index, kTtlMs);
    auto plain = make(name, index, 0);
    const RouteDecision first = route(*policy, eps, prompt, 1, 10'000, plain.get());
    ASSERT_TRUE(first.ok());
    // WHEN the TTL has passed (t = 12 s)
    // THEN no endpoint is believed to hold it: every decision is plain precise routing's
    std::set<std::int32_t> picks;
    for (std::uint64_t id = 2; id <= 17; ++id) {
      const RouteRequest r = request_for(prompt, id, 12'000);
      const RouteDecision d = policy->choose(r, eps);
      const RouteDecision p = plain->choose(r, eps);
      EXPECT_EQ(d.cached_blocks, 0) << name;
      EXPECT_EQ(d.index, p.index) << name << " request " << id;
      EXPECT_EQ(d.score, p.score) << name << " request " << id;
      picks.insert(d.index);
    }
    // AND equal endpoints share the requests again (the tie rotation)
    EXPECT_GT(picks.size(), 1u) << name;
  }
}

TEST(PendingRoutes, OnceTheIndexHoldsTheBlocksDecisionsArePlainPrecise) {
  // GIVEN prompts routed (pending) and then confirmed by KV events, some in the CPU tier
  const auto eps = pool(4);
  std::vector<std::vector<BlockHash>> prompts;
  for (int p = 0; p < 6; ++p) prompts.push_back(chain(10'000 * (p + 1), 16 + 4 * p));
  for (const auto name : kIndexPolicies) {
    KvBlockIndex index = make_index();
    auto policy = make(name, index, kTtlMs);
    auto plain = make(name, index, 0);
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      const RouteDecision d = route(*policy, eps, prompts[p], 100 + p, 10'000, plain.get());
      ASSERT_TRUE(d.ok());
      const KvTier tier = p % 2 == 0 ? KvTier::gpu : KvTier::cpu;
      ASSERT_TRUE(index.apply_stored(d.endpoint, tier, prompts[p]).has_value());
    }
    // WHEN requests of those prompts (and of longer turns) come within the TTL
    std::mt19937_64 rng(3);
    for (std::uint64_t id = 1; id <= 60; ++id) {
      auto hashes = prompts[rng() % prompts.size()];
      const auto more = static_cast<BlockHash>(rng() % 8);
      for (BlockHash k = 0; k < more; ++k) hashes.push_back(900'000 + 100 * id + k);
      const RouteRequest r = request_for(hashes, id, 10'500);
      // THEN every decision is the one plain precise routing makes (cost included: the index's
      // tiers are kept where the pending route is no longer)
      const RouteDecision d = policy->choose(r, eps);
      const RouteDecision p = plain->choose(r, eps);
      ASSERT_EQ(d.index, p.index) << name << " request " << id;
      EXPECT_EQ(d.cached_blocks, p.cached_blocks) << name << " request " << id;
      EXPECT_EQ(d.score, p.score) << name << " request " << id;
    }
  }
}

TEST(PendingRoutes, OverlapIsTheLongerOfIndexAndPending) {
  // GIVEN endpoint 1 holds 8 blocks of the prompt by KV events, and 24 were just routed to 2
  KvBlockIndex index = make_index();
  const auto eps = pool(4);
  const auto prompt = chain(1000, 24);
  ASSERT_TRUE(index.apply_stored(1, KvTier::gpu, std::span(prompt).first(8)).has_value());
  for (const auto name : kIndexPolicies) {
    auto policy = make(name, index, kTtlMs);
    policy->on_routed(request_for(prompt, 1, 5'000), eps[2]);
    // WHEN the prompt comes again THEN endpoint 2 (24 pending) beats endpoint 1 (8 by the index)
    const RouteDecision d = policy->choose(request_for(prompt, 2, 5'100), eps);
    EXPECT_EQ(d.index, 2) << name;
    EXPECT_EQ(d.cached_blocks, 24) << name;
    EXPECT_EQ(policy->cached_prefix(request_for(prompt, 2, 5'100), eps[1]), 8) << name;
    // AND after the TTL endpoint 1's confirmed blocks win
    const RouteDecision later = policy->choose(request_for(prompt, 3, 7'000), eps);
    EXPECT_EQ(later.index, 1) << name;
    EXPECT_EQ(later.cached_blocks, 8) << name;
  }
}

TEST(PendingRoutes, ZeroTurnsThemOffAndRoutingTeachesNothing) {
  // GIVEN pendingBlocksMs 0: precise routing reads the index alone, as before the knob
  KvBlockIndex index = make_index();
  ASSERT_TRUE(index.apply_stored(3, KvTier::gpu, chain(1000, 10)).has_value());
  const auto eps = pool(4);
  std::mt19937_64 rng(11);
  for (const auto name : kIndexPolicies) {
    auto routed = make(name, index, 0);
    auto untouched = make(name, index, 0);
    // WHEN it routes prompts of three conversations, again and again, at one instant
    for (std::uint64_t id = 1; id <= 80; ++id) {
      const auto hashes = chain(1000 + 1000 * (rng() % 3), 4 + static_cast<int>(rng() % 20));
      const RouteRequest r = request_for(hashes, id, 10'000);
      const RouteDecision d = routed->choose(r, eps);
      ASSERT_TRUE(d.ok());
      // THEN every endpoint's cached prefix is the index's, never what was routed there
      std::vector<PrefixOverlap> by_index(eps.size());
      index.longest_prefix(hashes, by_index);
      for (const EndpointState& e : eps) {
        EXPECT_EQ(routed->cached_prefix(r, e), by_index[e.id].blocks) << name << " request " << id;
      }
      // AND "llm-d" and "dynamo", which learn nothing else from routing, decide as a policy that
      // was never told of a route
      if (name != "disagg") {
        const RouteDecision u = untouched->choose(r, eps);
        ASSERT_EQ(d.index, u.index) << name << " request " << id;
        EXPECT_EQ(d.score, u.score) << name << " request " << id;
      }
      routed->on_routed(r, eps[static_cast<std::size_t>(d.index)]);
    }
  }
}

TEST(PendingRoutes, ApproximateHistoryIsUnchanged) {
  // GIVEN no index: the history learns for good, whatever pendingBlocksMs and now_ms say
  const auto eps = pool(4);
  const auto prompt = chain(1000, 16);
  for (const auto name : kIndexPolicies) {
    PolicyOptions o;
    o.pending_blocks_ms = 1;
    auto policy = std::move(make_routing_policy(name, o)).value();
    const RouteDecision first = route(*policy, eps, prompt, 1, 0);
    const RouteDecision later = policy->choose(request_for(prompt, 2, 3'600'000), eps);
    EXPECT_EQ(later.index, first.index) << name;
    EXPECT_EQ(later.cached_blocks, 16) << name;
  }
}

TEST(PendingRoutes, BoundedToTheLastRoutes) {
  // GIVEN a prompt routed to some endpoint, then 1,024 unrelated prompts at the same time
  const KvBlockIndex index = make_index();
  const auto eps = pool(4);
  const auto prompt = chain(1000, 16);
  auto policy = make("llm-d", index, kTtlMs);
  const RouteDecision first = route(*policy, eps, prompt, 1, 0);
  ASSERT_TRUE(first.ok());
  for (std::uint64_t id = 2; id <= 1024; ++id) {
    policy->on_routed(request_for(chain(1'000'000 * id, 4), id, 0), eps[id % 4]);
  }
  // THEN the 1,024th route later it is still pending
  EXPECT_EQ(policy->cached_prefix(request_for(prompt, 5000, 0), eps[static_cast<std::size_t>(first.index)]), 16);
  // WHEN one more route comes THEN the oldest is forgotten (the ring holds the last 1,024)
  policy->on_routed(request_for(chain(7'000'000'000, 4), 6000, 0), eps[0]);
  EXPECT_EQ(policy->cached_prefix(request_for(prompt, 5001, 0), eps[static_cast<std::size_t>(first.index)]), 0);
}

TEST(PendingRoutes, LongPromptsForgetTheOldestWhenTheBlockRingIsFull) {
  // GIVEN a prompt routed, then 511 prompts of 512 blocks (the ring keeps 262,144 blocks)
  const KvBlockIndex index = make_index();
  const auto eps = pool(4);
  const auto prompt = chain(1000, 512);
  auto policy = make("dynamo", index, kTtlMs);
  policy->on_routed(request_for(prompt, 1, 0), eps[1]);
  for (std::uint64_t id = 2; id <= 512; ++id) {
    policy->on_routed(request_for(chain(1'000'000 * id, 512), id, 0), eps[2]);
  }
  // THEN all 512 routes fit and the first is still pending
  EXPECT_EQ(policy->cached_prefix(request_for(prompt, 9000, 0), eps[1]), 512);
  // WHEN one more block is routed THEN the first route's blocks are overwritten: it is forgotten
  policy->on_routed(request_for(chain(5'000'000'000, 1), 513, 0), eps[2]);
  EXPECT_EQ(policy->cached_prefix(request_for(prompt, 9001, 0), eps[1]), 0);
}

// Chained hashes of `tokens` (one token a block), as RouteRequest requires: equal hashes at block k
// mean equal prompts up to k.
std::vector<BlockHash> chained(const std::vector<std::uint32_t>& tokens) {
  std::vector<BlockHash> v;
  BlockHash h = 0x9e3779b97f4a7c15ULL;
  for (const std::uint32_t t : tokens) {
    h ^= t + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
    v.push_back(h);
  }
  return v;
}

TEST(PendingRoutes, MatchesAReferenceOverRandomBurstsAndExpiries) {
  // GIVEN llm-d on an empty index (its cached prefix is the pending one alone), and a reference:
  // every route kept in a list, an endpoint's overlap the longest common prefix with any of the
  // last 1,024 routes there younger than the TTL
  struct RefRoute {
    EndpointId endpoint;
    std::int64_t time_ms;
    std::vector<BlockHash> hashes;
    bool failed = false;
  };
  const KvBlockIndex index = make_index();
  const auto eps = pool(8);
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    auto policy = make("llm-d", index, kTtlMs);
    std::vector<RefRoute> routes;
    std::mt19937_64 rng(seed);
    // Prompts: one of 6 tenants' system prompts (4 to 12 blocks), then 0 to 30 blocks from a
    // small alphabet, so that prompts share prefixes of every length.
    const auto prompt = [&rng] {
      const auto tenant = static_cast<std::uint32_t>(rng() % 6);
      std::vector<std::uint32_t> tokens;
      for (std::uint32_t i = 0; i < 4 + 2 * tenant; ++i) tokens.push_back(1000 * tenant + i);
      const auto more = rng() % 31;
      for (std::uint64_t i = 0; i < more; ++i) tokens.push_back(static_cast<std::uint32_t>(rng() % 3));
      return chained(tokens);
    };
    std::int64_t now = 0;
    for (std::uint64_t step = 1; step <= 4000; ++step) {
      // WHEN the clock moves in bursts (about 1,000 routes a TTL: both bounds bite)
      if (rng() % 4 == 0) now += static_cast<std::int64_t>(rng() % 16);
      // AND a request is asked about on every endpoint
      const auto hashes = prompt();
      const RouteRequest r = request_for(hashes, step, now);
      for (const EndpointState& e : eps) {
        std::int32_t expected = 0;
        const std::size_t oldest = routes.size() > kPendingRoutes ? routes.size() - kPendingRoutes : 0;
        for (std::size_t k = oldest; k < routes.size(); ++k) {
          const RefRoute& rt = routes[k];
          if (rt.failed || rt.endpoint != e.id || static_cast<double>(now - rt.time_ms) >= kTtlMs) continue;
          std::int32_t common = 0;
          while (static_cast<std::size_t>(common) < std::min(rt.hashes.size(), hashes.size()) &&
                 rt.hashes[static_cast<std::size_t>(common)] == hashes[static_cast<std::size_t>(common)]) {
            ++common;
          }
          expected = std::max(expected, common);
        }
        // THEN the policy believes what the reference does
        ASSERT_EQ(policy->cached_prefix(r, e), expected) << "seed " << seed << " step " << step << " endpoint " << e.id;
      }
      // AND the request is routed to a random endpoint
      const auto to = static_cast<EndpointId>(rng() % eps.size());
      policy->on_routed(r, eps[to]);
      routes.push_back(RefRoute{to, now, hashes});
      // AND one route in ten, of the last eight, fails: the policy forgets the newest kept route of
      // that prompt to that endpoint still believed (on_failed's contract), the reference too
      if (rng() % 10 == 0) {
        const std::size_t back = std::min<std::size_t>(routes.size(), 1 + rng() % 8);
        const RefRoute victim = routes[routes.size() - back];
        policy->on_failed(request_for(victim.hashes, step, now), victim.endpoint);
        const std::size_t oldest = routes.size() > kPendingRoutes ? routes.size() - kPendingRoutes : 0;
        for (std::size_t k = routes.size(); k > oldest; --k) {
          RefRoute& rt = routes[k - 1];
          if (!rt.failed && rt.endpoint == victim.endpoint && rt.hashes == victim.hashes) {
            rt.failed = true;
            break;
          }
        }
      }
    }
  }
}

TEST(PendingRoutes, AFailedLegIsForgottenAndNothingElse) {
  // GIVEN a prompt routed twice to endpoint 1 and once to endpoint 2, and another prompt to 1
  const KvBlockIndex index = make_index();
  const auto eps = pool(4);
  const auto prompt = chain(1000, 24);
  const auto other = chain(5000, 8);
  for (const auto name : kIndexPolicies) {
    auto policy = make(name, index, kTtlMs);
    policy->on_routed(request_for(prompt, 1, 10'000), eps[1]);
    policy->on_routed(request_for(prompt, 2, 10'010), eps[1]);
    policy->on_routed(request_for(prompt, 3, 10'020), eps[2]);
    policy->on_routed(request_for(other, 4, 10'030), eps[1]);
    // WHEN the second route to 1 fails THEN the first still holds the prompt there
    policy->on_failed(request_for(prompt, 2, 10'040), 1);
    EXPECT_EQ(policy->cached_prefix(request_for(prompt, 9, 10'050), eps[1]), 24) << name;
    // WHEN the first fails too THEN endpoint 1 is not believed to hold it, 2 still is, and 1
    // still holds the other prompt
    policy->on_failed(request_for(prompt, 1, 10'060), 1);
    EXPECT_EQ(policy->cached_prefix(request_for(prompt, 9, 10'070), eps[1]), 0) << name;
    EXPECT_EQ(policy->cached_prefix(request_for(prompt, 9, 10'070), eps[2]), 24) << name;
    EXPECT_EQ(policy->cached_prefix(request_for(other, 9, 10'070), eps[1]), 8) << name;
    // AND a failure nothing matches (a shorter prompt of the same prefix) changes nothing
    policy->on_failed(request_for(chain(1000, 12), 5, 10'080), 2);
    EXPECT_EQ(policy->cached_prefix(request_for(prompt, 9, 10'090), eps[2]), 24) << name;
  }
}

TEST(PendingRoutes, APrefillLegFailureForgetsThePrefillRouteOnly) {
  // GIVEN a disaggregated planner: decode endpoints 0-1, prefill endpoints 2-3, a prompt routed
  // P/D (the decode and the prefill leg each learnt as a pending route)
  const KvBlockIndex index = make_index();
  auto eps = pool(4);
  eps[0].role = eps[1].role = EndpointRole::decode;
  eps[2].role = eps[3].role = EndpointRole::prefill;
  RoutePlanConfig config;
  config.disaggregated = true;
  config.decider.min_uncached_tokens = 1;
  auto planner = std::move(RoutePlanner::create(
                               "llm-d",
                               [&] {
                                 PolicyOptions o;
                                 o.index = &index;
                                 return o;
                               }(),
                               config))
                     .value();
  const auto prompt = chain(1000, 24);
  const RouteRequest r = request_for(prompt, 1, 10'000);
  const RoutePlan plan = planner.plan_route(r, eps);
  ASSERT_TRUE(plan.main.ok());
  ASSERT_TRUE(plan.prefill.ok());
  planner.apply_route(r, eps, plan);
  const auto& decode = eps[static_cast<std::size_t>(plan.main.index)];
  auto& prefill = eps[static_cast<std::size_t>(plan.prefill.index)];
  RouteRequest as_prefill = request_for(prompt, 2, 10'010);
  as_prefill.role = EndpointRole::prefill;
  ASSERT_EQ(planner.policy().cached_prefix(as_prefill, prefill), 24);
  // WHEN the prefill leg fails
  planner.on_failed(r, /*prefill_leg=*/true, prefill.id);
  // THEN the prefill endpoint is no longer believed to hold the prompt; the decode one still is
  EXPECT_EQ(planner.policy().cached_prefix(as_prefill, prefill), 0);
  EXPECT_EQ(planner.policy().cached_prefix(request_for(prompt, 3, 10'010), decode), 24);
  // WHEN the decode leg fails THEN neither is
  planner.on_failed(r, /*prefill_leg=*/false, decode.id);
  EXPECT_EQ(planner.policy().cached_prefix(request_for(prompt, 3, 10'010), decode), 0);
}

}  // namespace
}  // namespace disagg
