// Routing policies on crafted cases where the right choice is known, properties shared by every
// policy (never an ineligible endpoint, score() agrees with choose()), the factory and options,
// and the P/D decider.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "disagg/routing.h"

namespace disagg {
namespace {

std::vector<BlockHash> chain(BlockHash first, int n) {
  std::vector<BlockHash> v;
  for (int i = 0; i < n; ++i) v.push_back(first + static_cast<BlockHash>(i));
  return v;
}

std::vector<EndpointState> pool(int n, EndpointRole role = EndpointRole::aggregated) {
  std::vector<EndpointState> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    v[static_cast<std::size_t>(i)].id = static_cast<EndpointId>(i);
    v[static_cast<std::size_t>(i)].role = role;
    v[static_cast<std::size_t>(i)].kv_usage = 0.3;
  }
  return v;
}

RouteRequest request_for(const std::vector<BlockHash>& hashes, std::uint64_t id = 1, std::int32_t block_size = 16) {
  RouteRequest r;
  r.request_id = id;
  r.block_hashes = hashes;
  r.block_size = block_size;
  r.prompt_tokens = static_cast<std::int64_t>(hashes.size()) * block_size;
  return r;
}

KvBlockIndex make_index() {
  KvIndexConfig c;
  c.max_entries = 1 << 12;
  return std::move(KvBlockIndex::create(c)).value();
}

std::unique_ptr<RoutingPolicy> make(std::string_view name, const PolicyOptions& options = {}) {
  auto p = make_routing_policy(name, options);
  EXPECT_TRUE(p.has_value()) << name << ": " << (p.has_value() ? "" : p.error().message);
  return std::move(p).value();
}

const std::vector<std::string_view> kPrefixPolicies = {"llm-d", "sglang", "dynamo", "disagg"};

// ---- properties of every policy -----------------------------------------------------------------

TEST(RoutingPolicies, EveryNameIsCreatableAndNamesItself) {
  for (const auto name : routing_policy_names()) {
    auto p = make(name);
    EXPECT_EQ(p->name(), name);
  }
  EXPECT_EQ(routing_policy_names().size(), 6u);
}

TEST(RoutingPolicies, TheConfigurationsNamesMapOntoTheEnginesOnce) {
  // The constructs' RoutingPolicy names; the router's and the simulator's readers both map them here.
  EXPECT_EQ(routing_policy_engine_name("kv-aware"), "llm-d");
  EXPECT_EQ(routing_policy_engine_name("least-loaded"), "least-load");
  // Every engine name passes unchanged and is creatable after the mapping.
  for (const auto name : routing_policy_names()) EXPECT_EQ(routing_policy_engine_name(name), name);
  for (const auto alias : {"kv-aware", "least-loaded"}) {
    EXPECT_TRUE(make_routing_policy(routing_policy_engine_name(alias), PolicyOptions{}).has_value()) << alias;
  }
  // An unknown name stays itself, so the reader's error names what the user wrote.
  EXPECT_EQ(routing_policy_engine_name("fastest"), "fastest");
  // Known: exactly the engine's names (an alias only after the mapping); listed in one sentence.
  for (const auto name : routing_policy_names()) EXPECT_TRUE(routing_policy_known(name)) << name;
  EXPECT_FALSE(routing_policy_known("kv-aware"));
  EXPECT_FALSE(routing_policy_known("fastest"));
  const std::string text = routing_policy_names_text();
  EXPECT_EQ(text.find(std::string(routing_policy_names().front())), 0u);
  EXPECT_NE(text.find(" or " + std::string(routing_policy_names().back())), std::string::npos);
}

TEST(RoutingPolicies, NeverChooseUnhealthyOrOtherRoleAndAgreeWithScore) {
  // GIVEN random pools (mixed roles, health, loads, KV use) and random prefixes in the index
  KvBlockIndex index = make_index();
  std::mt19937_64 rng(42);
  for (const bool precise : {false, true}) {
    for (const auto name : routing_policy_names()) {
      PolicyOptions o;
      o.index = precise ? &index : nullptr;
      auto policy = make(name, o);
      for (int trial = 0; trial < 300; ++trial) {
        const int n = static_cast<int>(rng() % 12) + 1;
        auto eps = pool(n);
        for (auto& e : eps) {
          e.healthy = rng() % 4 != 0;
          e.role = static_cast<EndpointRole>(rng() % 3);
          e.running_requests = static_cast<std::int32_t>(rng() % 50);
          e.waiting_requests = static_cast<std::int32_t>(rng() % 150);
          e.kv_usage = static_cast<double>(rng() % 101) / 100.0;
          e.inflight_prefill_tokens = static_cast<std::int64_t>(rng() % 20000);
          e.total_kv_blocks = rng() % 2 == 0 ? 1000 : 0;
          e.free_kv_blocks = static_cast<std::int64_t>(rng() % 1000);
          if (precise && rng() % 2 == 0) {
            (void)index.apply_stored(e.id, static_cast<KvTier>(rng() % 4), chain(500, static_cast<int>(rng() % 40)));
          }
        }
        const auto hashes = chain(500, static_cast<int>(rng() % 64));
        RouteRequest r = request_for(hashes, rng());
        r.role = static_cast<EndpointRole>(rng() % 3);
        // WHEN choosing
        const RouteDecision d = policy->choose(r, eps);
        std::vector<double> scores(eps.size());
        policy->score(r, eps, scores);
        // THEN the choice is eligible and of least cost; none when nobody is eligible
        bool any = false;
        double least = kIneligible;
        for (std::size_t i = 0; i < eps.size(); ++i) {
          if (eligible(eps[i], r)) {
            any = true;
            least = std::min(least, scores[i]);
          } else {
            EXPECT_EQ(scores[i], kIneligible);
          }
        }
        ASSERT_EQ(d.ok(), any) << name;
        if (d.ok()) {
          const auto& chosen = eps[static_cast<std::size_t>(d.index)];
          ASSERT_TRUE(eligible(chosen, r)) << name;
          EXPECT_EQ(d.endpoint, chosen.id);
          EXPECT_EQ(d.score, scores[static_cast<std::size_t>(d.index)]) << name;
          EXPECT_EQ(d.score, least) << name;
          policy->on_routed(r, chosen);
        }
      }
      index.clear(0);
      for (EndpointId e = 0; e < 12; ++e) index.clear(e);
    }
  }
}

TEST(RoutingPolicies, PrefixLocalityWinsWhenLoadsAreEqual) {
  // GIVEN four equal endpoints; endpoint 2 holds the request's 32-block prefix (precise index;
  // "sglang" keeps its own tree: it routed the prefix there)
  KvBlockIndex index = make_index();
  const auto hashes = chain(1000, 32);
  ASSERT_TRUE(index.apply_stored(2, KvTier::gpu, hashes).has_value());
  auto eps = pool(4);
  for (const auto name : kPrefixPolicies) {
    PolicyOptions o;
    o.index = &index;
    auto policy = make(name, o);
    if (name == "sglang") policy->on_routed(request_for(hashes, 99), eps[2]);
    // WHEN routing requests with different ids (different tie seeds)
    for (std::uint64_t id = 1; id <= 8; ++id) {
      const RouteDecision d = policy->choose(request_for(hashes, id), eps);
      // THEN endpoint 2 wins every time and reports its cached blocks
      ASSERT_EQ(d.index, 2) << name << " request " << id;
      EXPECT_EQ(d.cached_blocks, 32) << name;
    }
  }
}

TEST(RoutingPolicies, ApproximateHistoryLearnsFromRouting) {
  // GIVEN no index: each prefix-aware policy learns from its own routing history
  const auto first = chain(1000, 20);
  auto follow_up = chain(1000, 24);  // same conversation, 4 more blocks
  auto eps = pool(4);
  for (const auto name : kPrefixPolicies) {
    auto policy = make(name);
    const RouteDecision d1 = policy->choose(request_for(first, 7), eps);
    ASSERT_TRUE(d1.ok());
    EXPECT_EQ(d1.cached_blocks, 0);
    policy->on_routed(request_for(first, 7), eps[static_cast<std::size_t>(d1.index)]);
    // WHEN the follow-up comes with another request id (another tie seed)
    const RouteDecision d2 = policy->choose(request_for(follow_up, 12345), eps);
    // THEN it goes where the first turn went, with 20 blocks believed cached
    EXPECT_EQ(d2.index, d1.index) << name;
    EXPECT_EQ(d2.cached_blocks, 20) << name;
  }
}

TEST(RoutingPolicies, ApproximateHistoryCoversEveryEndpointId) {
  // GIVEN 40 endpoints (ids up to 39, as a router assigns them) and the default history, which is
  // sized for 16 endpoints' blocks
  auto eps = pool(40);
  for (const auto name : kPrefixPolicies) {
    auto policy = make(name);
    for (const std::size_t at : {3u, 18u, 39u}) {
      const auto prompt = chain(5000 + 100 * at, 8);
      const auto next = chain(5000 + 100 * at, 10);
      // WHEN a conversation was routed to endpoint `at`
      policy->on_routed(request_for(prompt, 7), eps[at]);
      // THEN its follow-up goes there too, with its 8 blocks believed cached
      const RouteDecision d = policy->choose(request_for(next, 4242), eps);
      EXPECT_EQ(d.index, static_cast<std::int32_t>(at)) << name;
      EXPECT_EQ(d.cached_blocks, 8) << name << " endpoint " << at;
    }
  }
}

TEST(RoutingPolicies, LoadGuardOverridesPrefixWhenOneEndpointIsOverloaded) {
  // GIVEN endpoint 1 holds the prefix but is swamped (200 waiting), the others idle
  KvBlockIndex index = make_index();
  const auto hashes = chain(1000, 32);
  ASSERT_TRUE(index.apply_stored(1, KvTier::gpu, hashes).has_value());
  auto eps = pool(3);
  eps[1].waiting_requests = 200;
  eps[1].running_requests = 64;
  eps[1].inflight_prefill_tokens = 200 * 512;
  for (const auto name : {"sglang", "disagg", "least-load"}) {
    PolicyOptions o;
    o.index = &index;
    auto policy = make(name, o);
    // WHEN routing THEN never to the overloaded endpoint
    for (std::uint64_t id = 1; id <= 6; ++id) {
      const RouteDecision d = policy->choose(request_for(hashes, id), eps);
      EXPECT_NE(d.index, 1) << name;
    }
  }
}

// ---- round robin and least load -----------------------------------------------------------------

TEST(RoundRobin, CyclesThroughHealthyEndpointsEvenly) {
  auto policy = make("round-robin");
  auto eps = pool(4);
  eps[2].healthy = false;
  const auto hashes = chain(1, 4);
  std::map<int, int> counts;
  std::vector<int> order;
  for (std::uint64_t id = 0; id < 30; ++id) {
    const RouteDecision d = policy->choose(request_for(hashes, id), eps);
    ASSERT_TRUE(d.ok());
    order.push_back(d.index);
    ++counts[d.index];
    policy->on_routed(request_for(hashes, id), eps[static_cast<std::size_t>(d.index)]);
  }
  EXPECT_EQ((std::vector<int>{order.begin(), order.begin() + 6}), (std::vector<int>{0, 1, 3, 0, 1, 3}));
  EXPECT_EQ(counts[0], 10);
  EXPECT_EQ(counts[1], 10);
  EXPECT_EQ(counts[3], 10);
  EXPECT_EQ(counts.count(2), 0u);
}

TEST(LeastLoad, FewestRequestsThenLowerKvUsage) {
  auto policy = make("least-load");
  auto eps = pool(3);
  eps[0].running_requests = 5;
  eps[1].running_requests = 3;
  eps[1].waiting_requests = 1;
  eps[1].kv_usage = 0.9;
  eps[2].running_requests = 4;
  eps[2].kv_usage = 0.1;
  const auto hashes = chain(1, 4);
  // loads 5, 4, 4: endpoints 1 and 2 tie on load; 2 has the lower KV usage
  EXPECT_EQ(policy->choose(request_for(hashes), eps).index, 2);
  // one request more on 2 makes 1 the least loaded despite its KV usage
  eps[2].waiting_requests = 1;
  EXPECT_EQ(policy->choose(request_for(hashes), eps).index, 1);
}

TEST(LeastLoad, TiesAreSpreadByRequestIdAndStickBySession) {
  auto policy = make("least-load");
  auto eps = pool(4);
  const auto hashes = chain(1, 4);
  std::map<int, int> counts;
  for (std::uint64_t id = 0; id < 40; ++id) ++counts[policy->choose(request_for(hashes, id), eps).index];
  EXPECT_EQ(counts.size(), 4u);
  // A session key overrides the request id as the tie seed.
  RouteRequest a = request_for(hashes, 1);
  RouteRequest b = request_for(hashes, 2);
  a.session_key = b.session_key = 77;
  EXPECT_EQ(policy->choose(a, eps).index, policy->choose(b, eps).index);
}

TEST(LeastLoad, AnEndpointThatLosesOnCostDoesNotHandItsShareToItsNeighbour) {
  // GIVEN three endpoints, the middle one busier; the others tie
  auto policy = make("least-load");
  auto eps = pool(3);
  eps[1].running_requests = 5;
  const auto hashes = chain(1, 4);
  // WHEN 60 requests with consecutive ids are scored against the same states
  std::map<int, int> counts;
  for (std::uint64_t id = 0; id < 60; ++id) ++counts[policy->choose(request_for(hashes, id), eps).index];
  // THEN the tied endpoints share them evenly (a rotation from seed mod 3 gave 20 / 0 / 40)
  EXPECT_EQ(counts[0], 30);
  EXPECT_EQ(counts[2], 30);
  EXPECT_EQ(counts.count(1), 0u);
}

// ---- llm-d --------------------------------------------------------------------------------------

TEST(LlmdWeighted, QueueAndKvScorersDecideWithoutPrefix) {
  // GIVEN no cached prefix anywhere; endpoint 0 has the shortest queue, endpoint 1 the lowest KV use
  auto policy = make("llm-d");
  auto eps = pool(3);
  eps[0].waiting_requests = 0;
  eps[0].kv_usage = 0.5;
  eps[1].waiting_requests = 10;
  eps[1].kv_usage = 0.0;
  eps[2].waiting_requests = 10;
  eps[2].kv_usage = 0.6;
  const auto hashes = chain(1, 4);
  // queue 2 x 1 + kv 2 x 0.5 = 3 beats queue 0 + kv 2 x 1 = 2
  EXPECT_EQ(policy->choose(request_for(hashes), eps).index, 0);
  // WHEN the queue weight is 0 THEN KV utilization alone decides
  PolicyOptions o;
  o.queue_weight = 0;
  EXPECT_EQ(make("llm-d", o)->choose(request_for(hashes), eps).index, 1);
}

TEST(LlmdWeighted, PrefixWeightOutweighsModestQueueDifference) {
  // GIVEN endpoint 1 holds the whole prefix and has a slightly longer queue
  KvBlockIndex index = make_index();
  const auto hashes = chain(1000, 16);
  ASSERT_TRUE(index.apply_stored(1, KvTier::gpu, hashes).has_value());
  auto eps = pool(2);
  eps[1].waiting_requests = 2;
  PolicyOptions o;
  o.index = &index;
  // prefix 3 x 1 + queue 0 vs queue 2 x 1: the prefix wins
  EXPECT_EQ(make("llm-d", o)->choose(request_for(hashes), eps).index, 1);
}

// ---- SGLang -------------------------------------------------------------------------------------

// Teaches `policy` that requests of `hashes` went to `e` (SGLang's tree grows when it routes).
void routed(RoutingPolicy& policy, const EndpointState& e, const std::vector<BlockHash>& hashes) {
  policy.on_routed(request_for(hashes, 99), e);
}

TEST(SglangCacheAware, LowMatchGoesToTheSmallestTree) {
  // GIVEN endpoint 0's tree holds 100 unrelated blocks, endpoint 1's 10 blocks of which the
  // request matches 2 of 20 (ratio 0.1 <= 0.3), endpoint 2's 30 unrelated blocks
  auto policy = make("sglang");
  auto eps = pool(3);
  routed(*policy, eps[0], chain(50'000, 100));
  const auto hashes = chain(1000, 20);
  routed(*policy, eps[1], chain(1000, 2));
  routed(*policy, eps[1], chain(9000, 8));
  routed(*policy, eps[2], chain(70'000, 30));
  // THEN the smallest tree (endpoint 1, 10 entries) wins
  EXPECT_EQ(policy->choose(request_for(hashes), eps).index, 1);
  // WHEN endpoint 2 matches 7 of 20 blocks (ratio 0.35 > 0.3) THEN the best match wins
  routed(*policy, eps[2], chain(1000, 7));
  EXPECT_EQ(policy->choose(request_for(hashes), eps).index, 2);
}

TEST(SglangCacheAware, GrowsItsTreeWhenItRoutesEvenWithAnIndex) {
  // GIVEN an event-fed index whose sizes went stale during a burst (endpoint 0 the smallest)
  KvBlockIndex index = make_index();
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, chain(50'000, 5)).has_value());
  ASSERT_TRUE(index.apply_stored(1, KvTier::gpu, chain(60'000, 10)).has_value());
  ASSERT_TRUE(index.apply_stored(2, KvTier::gpu, chain(70'000, 10)).has_value());
  PolicyOptions o;
  o.index = &index;
  auto policy = make("sglang", o);
  auto eps = pool(3);
  // WHEN 30 unrelated prompts are routed before any event arrives
  std::map<int, int> counts;
  for (std::uint64_t id = 1; id <= 30; ++id) {
    const auto hashes = chain(1'000'000 * id, 10);
    const RouteDecision d = policy->choose(request_for(hashes, id), eps);
    ++counts[d.index];
    policy->on_routed(request_for(hashes, id), eps[static_cast<std::size_t>(d.index)]);
  }
  // THEN its own tree, grown at each pick, spreads them (the index's stale sizes sent all 30 to 0)
  EXPECT_EQ(counts[0], 10);
  EXPECT_EQ(counts[1], 10);
  EXPECT_EQ(counts[2], 10);
}

TEST(SglangCacheAware, ImbalanceSwitchesToShortestQueue) {
  const auto hashes = chain(1000, 20);
  auto eps = pool(3);
  eps[0].running_requests = 100;  // holds the prefix, load 100
  eps[1].running_requests = 40;
  eps[2].running_requests = 30;
  auto policy = make("sglang");
  routed(*policy, eps[0], hashes);
  // max - min = 70 > 64 and 100 > 1.5 x 30: shortest queue
  EXPECT_EQ(policy->choose(request_for(hashes), eps).index, 2);
  // WHEN the gap is 64 (not > 64) THEN the prefix wins again
  eps[0].running_requests = 94;
  EXPECT_EQ(policy->choose(request_for(hashes), eps).index, 0);
}

// ---- Dynamo -------------------------------------------------------------------------------------

TEST(DynamoCost, GpuBeatsHostBeatsNothingAndBusyKvLoses) {
  KvBlockIndex index = make_index();
  const auto hashes = chain(1000, 40);
  ASSERT_TRUE(index.apply_stored(0, KvTier::cpu, hashes).has_value());
  ASSERT_TRUE(index.apply_stored(1, KvTier::gpu, hashes).has_value());
  auto eps = pool(3);
  for (auto& e : eps) {
    e.total_kv_blocks = 1000;
    e.free_kv_blocks = 500;
  }
  PolicyOptions o;
  o.index = &index;
  auto policy = make("dynamo", o);
  std::vector<double> s(3);
  policy->score(request_for(hashes), eps, s);
  // cost = 40 - credit x cached + 500 used blocks
  EXPECT_DOUBLE_EQ(s[0], 40 - 0.8 * 40 + 500);
  EXPECT_DOUBLE_EQ(s[1], 40 - 40 + 500);
  EXPECT_DOUBLE_EQ(s[2], 40 + 500);
  EXPECT_EQ(policy->choose(request_for(hashes), eps).index, 1);
  // WHEN the GPU holder has 100 more blocks in use THEN the host-tier holder wins
  eps[1].free_kv_blocks = 400;
  EXPECT_EQ(policy->choose(request_for(hashes), eps).index, 0);
}

// ---- ours ---------------------------------------------------------------------------------------

TEST(ExpectedTtft, CostIsQueuePlusUncachedPrefillPlusPressure) {
  KvBlockIndex index = make_index();
  const auto hashes = chain(1000, 64);  // 1,024 tokens
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, std::span(hashes).first(32)).has_value());
  ASSERT_TRUE(index.apply_stored(1, KvTier::cpu, hashes).has_value());
  auto eps = pool(3);
  eps[0].inflight_prefill_tokens = 2000;
  eps[0].running_requests = 3;
  eps[2].kv_usage = 0.9;
  PolicyOptions o;
  o.index = &index;
  auto policy = make("disagg", o);
  std::vector<double> s(3);
  policy->score(request_for(hashes), eps, s);
  const double rate = o.prefill_tokens_per_second;
  EXPECT_DOUBLE_EQ(s[0], 2000 / rate + 0.002 * 3 + (1024 - 512) / rate);
  EXPECT_DOUBLE_EQ(s[1], (1024 - 0.8 * 1024) / rate);
  EXPECT_DOUBLE_EQ(s[2], 1024 / rate + 1.0 * 0.25);  // ((0.9 - 0.8) / 0.2)^2 = 0.25 s
  EXPECT_EQ(policy->choose(request_for(hashes), eps).index, 1);
}

TEST(ExpectedTtft, AvoidsEndpointWhereTheRequestWouldNotFit) {
  KvBlockIndex index = make_index();
  const auto hashes = chain(1000, 64);
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, std::span(hashes).first(8)).has_value());
  auto eps = pool(2);
  for (auto& e : eps) e.total_kv_blocks = 10'000;
  eps[0].free_kv_blocks = 20;  // 56 new blocks needed
  eps[1].free_kv_blocks = 5000;
  PolicyOptions o;
  o.index = &index;
  EXPECT_EQ(make("disagg", o)->choose(request_for(hashes), eps).index, 1);
}

TEST(ExpectedTtft, UsesReportedPrefillSpeed) {
  // GIVEN equal queues, no cache; endpoint 1 prefills twice as fast THEN it wins
  auto eps = pool(2);
  eps[0].prefill_tokens_per_second = 5000;
  eps[1].prefill_tokens_per_second = 10000;
  eps[0].inflight_prefill_tokens = eps[1].inflight_prefill_tokens = 4000;
  const auto hashes = chain(1, 64);
  EXPECT_EQ(make("disagg")->choose(request_for(hashes), eps).index, 1);
}

TEST(ExpectedTtft, DiscountsTheQueueOfAnEndpointWhosePromptsAreMostlyCached) {
  // GIVEN an endpoint that has been serving fully cached turns (its in-flight prompt tokens cost
  // little prefill) and one with no history, with equal in-flight prompt tokens and no cache for
  // the new request on either
  KvBlockIndex index = make_index();
  const auto session = chain(1000, 64);
  ASSERT_TRUE(index.apply_stored(0, KvTier::gpu, session).has_value());
  auto eps = pool(2);
  PolicyOptions o;
  o.index = &index;
  auto policy = make("disagg", o);
  for (std::uint64_t id = 1; id <= 32; ++id) policy->on_routed(request_for(session, id), eps[0]);
  eps[0].inflight_prefill_tokens = eps[1].inflight_prefill_tokens = 8000;
  const auto fresh = chain(5000, 8);
  std::vector<double> s(2);
  // WHEN both are scored
  policy->score(request_for(fresh, 99), eps, s);
  // THEN endpoint 0's queue counts for less: most of what it has in flight is cached
  EXPECT_LT(s[0], s[1]);
  EXPECT_EQ(policy->choose(request_for(fresh, 99), eps).index, 0);
}

// ---- factory and options ------------------------------------------------------------------------

TEST(RoutingFactory, PrefixReadersAreTheFourPrefixAwarePolicies) {
  for (const std::string_view name : routing_policy_names()) {
    const bool prefix_aware = std::find(kPrefixPolicies.begin(), kPrefixPolicies.end(), name) != kPrefixPolicies.end();
    EXPECT_EQ(routing_policy_reads_prefixes(name), prefix_aware) << name;
  }
  EXPECT_EQ(routing_policy_names().size(), kPrefixPolicies.size() + 2);  // round-robin, least-load
}

TEST(RoutingFactory, UnknownPolicyNamesTheChoices) {
  auto p = make_routing_policy("random");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code, RoutingErrc::unknown_policy);
  EXPECT_NE(p.error().message.find("'random'"), std::string::npos);
  EXPECT_NE(p.error().message.find("llm-d"), std::string::npos);
}

TEST(RoutingFactory, OptionsBySetterAndValidation) {
  PolicyOptions o;
  ASSERT_TRUE(set_policy_option(o, "prefixWeight", 5).has_value());
  EXPECT_EQ(o.prefix_weight, 5);
  ASSERT_TRUE(set_policy_option(o, "maxEndpoints", 32).has_value());
  EXPECT_EQ(o.max_endpoints, 32);
  // Unknown keys and out-of-range values are refused and leave the options unchanged.
  auto unknown = set_policy_option(o, "prefix_weight", 1);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, RoutingErrc::unknown_option);
  EXPECT_NE(unknown.error().message.find("prefixWeight"), std::string::npos);
  auto bad = set_policy_option(o, "cacheThreshold", 1.5);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, RoutingErrc::invalid_option);
  EXPECT_EQ(bad.error().message.rfind("'cacheThreshold' (1.5) must be in [0, 1]", 0), 0u) << bad.error().message;
  EXPECT_EQ(o.cache_threshold, 0.3);
  EXPECT_FALSE(set_policy_option(o, "maxEndpoints", 65).has_value());
  EXPECT_FALSE(set_policy_option(o, "historyBlocksPerEndpoint", 2.5).has_value());
  // The factory validates too.
  PolicyOptions direct;
  direct.guard_ratio = 0.5;
  auto p = make_routing_policy("disagg", direct);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code, RoutingErrc::invalid_option);
  EXPECT_NE(p.error().message.find("guardRatio"), std::string::npos);
}

// ---- P/D decider --------------------------------------------------------------------------------

TEST(PdDecider, ThresholdSaturationAndAvailability) {
  PdDeciderConfig c;
  c.min_uncached_tokens = 1000;
  c.saturation_prefill_tokens = 50'000;
  const PdDecider decider(c);
  auto eps = pool(3, EndpointRole::prefill);
  eps[2].role = EndpointRole::decode;
  // 4,000-token prompt with 3,200 cached on the decode endpoint: 800 uncached < 1,000
  EXPECT_EQ(decider.decide(4000, 3200, eps), PdReason::below_threshold);
  EXPECT_EQ(decider.decide(4000, 3000, eps), PdReason::disaggregate);  // exactly the threshold
  eps[0].inflight_prefill_tokens = 60'000;
  EXPECT_EQ(decider.decide(4000, 0, eps), PdReason::disaggregate);  // endpoint 1 has room
  eps[1].inflight_prefill_tokens = 50'000;
  EXPECT_EQ(decider.decide(4000, 0, eps), PdReason::prefill_saturated);
  eps[0].healthy = eps[1].healthy = false;
  EXPECT_EQ(decider.decide(4000, 0, eps), PdReason::no_prefill_endpoint);
  EXPECT_EQ(to_string(PdReason::prefill_saturated), "prefill_saturated");
}

TEST(PdDecider, RoutingThenDecidingEndToEnd) {
  // GIVEN a P/D pool: decode endpoint 3 caches the prompt's first 48 of 64 blocks
  KvBlockIndex index = make_index();
  const auto hashes = chain(1000, 64);
  ASSERT_TRUE(index.apply_stored(3, KvTier::gpu, std::span(hashes).first(48)).has_value());
  auto eps = pool(4, EndpointRole::decode);
  eps[0].role = eps[1].role = EndpointRole::prefill;
  PolicyOptions o;
  o.index = &index;
  auto policy = make("disagg", o);
  RouteRequest r = request_for(hashes);
  r.role = EndpointRole::decode;
  const RouteDecision d = policy->choose(r, eps);
  ASSERT_EQ(d.index, 3);
  const PdDecider decider(PdDeciderConfig{512, 0, 0});
  // 1,024 - 768 = 256 uncached tokens: keep it whole on the decode endpoint
  EXPECT_EQ(decider.decide(r.prompt_tokens, d.cached_blocks * r.block_size, eps), PdReason::below_threshold);
  // A fresh prompt: disaggregate, and the prefill choice is a prefill endpoint
  const auto fresh = chain(99'000, 64);
  RouteRequest f = request_for(fresh);
  f.role = EndpointRole::decode;
  const RouteDecision fd = policy->choose(f, eps);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(decider.decide(f.prompt_tokens, fd.cached_blocks * f.block_size, eps), PdReason::disaggregate);
  f.role = EndpointRole::prefill;
  const RouteDecision pd = policy->choose(f, eps);
  ASSERT_TRUE(pd.ok());
  EXPECT_EQ(eps[static_cast<std::size_t>(pd.index)].role, EndpointRole::prefill);
}

}  // namespace
}  // namespace disagg
