// The router's routing (EndpointTable: slots, scraped load, its own count of legs in flight,
// health, KV events) against the simulator's (SimRouting: worker states, its count of legs), fed
// the same request stream and the same endpoint states: every pick must be the same, for every
// policy, aggregated and P/D, with the approximate history and with an event-fed index. Both call
// the one RoutePlanner, so what this checks is that neither side adds, drops or reorders a step
// around it (the state each side hands it, and when legs start and end). The run also checks that
// under P/D every endpoint of each role receives work, for every policy.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "disagg/block_hash.h"
#include "disagg/route_plan.h"
#include "endpoint_table.h"
#include "sim/sim_routing.h"

namespace disagg::router {
namespace {

struct Shape {
  const char* name;
  std::vector<EndpointRole> roles;  // endpoint id i has roles[i]
};

const std::vector<Shape> kShapes = {
    {"aggregated", {EndpointRole::aggregated, EndpointRole::aggregated, EndpointRole::aggregated}},
    {"pd", {EndpointRole::prefill, EndpointRole::prefill, EndpointRole::decode, EndpointRole::decode}},
    {"pd-4p2d",
     {EndpointRole::prefill, EndpointRole::prefill, EndpointRole::prefill, EndpointRole::prefill, EndpointRole::decode,
      EndpointRole::decode}},
};

struct Leg {
  std::uint64_t request_id;
  Pick pick;                    // the router's
  std::int32_t worker;          // the simulator's
  std::int64_t prefill_tokens;  // the simulator's queued prefill on `worker` until the leg ends
};

// One request of the stream: a prompt that starts with one of a few shared prefixes (so that
// prefix-aware policies have something to find) and goes on with unique tokens.
struct StreamRequest {
  std::vector<TokenId> tokens;
  std::vector<BlockHash> hashes;
  std::uint64_t session = 0;
};

StreamRequest make_request(std::mt19937_64& rng, std::int32_t block_size) {
  StreamRequest r;
  const auto prefix = static_cast<TokenId>(rng() % 4);
  const std::size_t shared = 16 * static_cast<std::size_t>(block_size) * (1 + rng() % 3);
  const std::size_t unique = static_cast<std::size_t>(rng() % 1500);
  for (std::size_t i = 0; i < shared; ++i) r.tokens.push_back(static_cast<TokenId>(prefix * 100'000 + i));
  for (std::size_t i = 0; i < unique; ++i) r.tokens.push_back(static_cast<TokenId>(1'000'000 + rng() % 50'000));
  r.hashes.resize(r.tokens.size() / static_cast<std::size_t>(block_size));
  r.hashes.resize(hash_blocks(r.tokens, static_cast<std::size_t>(block_size), kRootBlockHash, r.hashes));
  r.session = rng() % 3 == 0 ? 0 : 1 + rng() % 20;
  return r;
}

void run_differential(const std::string& policy, const Shape& shape, bool precise, bool sessions) {
  SCOPED_TRACE(policy + " / " + shape.name + (precise ? " / index" : " / history") + (sessions ? " / sessions" : ""));
  constexpr std::int32_t kBlockSize = 16;
  const bool pd = shape.roles.front() != EndpointRole::aggregated;
  const auto n = static_cast<int>(shape.roles.size());

  // GIVEN the router's table with static endpoints, healthy
  RouterConfig rc;
  rc.policy = policy;
  rc.block_size = kBlockSize;
  rc.precise_prefix = precise;
  rc.decider.min_uncached_tokens = 256;
  if (sessions) rc.session_header = "x-session-id";
  for (int i = 0; i < n; ++i) {
    EndpointSpec e;
    e.pool = shape.roles[static_cast<std::size_t>(i)] == EndpointRole::prefill ? "prefill" : "decode";
    e.role = shape.roles[static_cast<std::size_t>(i)];
    e.host = "127.0.0.1";
    e.port = static_cast<std::uint16_t>(9000 + i);
    rc.endpoints.push_back(e);
  }
  RouterMetrics metrics;
  auto table_or = EndpointTable::create(rc, metrics);
  ASSERT_TRUE(table_or.has_value()) << table_or.error();
  EndpointTable& table = **table_or;
  for (const EndpointSpec& e : rc.endpoints) ASSERT_GE(table.add(e, false, ""), 0);
  for (int i = 0; i < n; ++i) table.slot(i).up = true;

  // AND the simulator's routing with the same workers and the same options, its own index fed
  // the same events
  KvIndexConfig ic;
  ic.max_entries = rc.index_entries;
  auto sim_index = KvBlockIndex::create(ic);
  ASSERT_TRUE(sim_index.has_value());
  PolicyOptions options = rc.options;
  if (precise) {
    options.index = &*sim_index;
  } else {
    options.max_endpoints = n;  // as the router sizes the history for its static endpoints
  }
  RoutePlanConfig pc;
  pc.disaggregated = pd;
  pc.decider = rc.decider;
  pc.session_affinity = sessions;
  auto planner = RoutePlanner::create(policy, options, pc);
  ASSERT_TRUE(planner.has_value()) << planner.error().message;
  std::vector<EndpointState> workers(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    workers[static_cast<std::size_t>(i)].id = static_cast<EndpointId>(i);
    workers[static_cast<std::size_t>(i)].role = shape.roles[static_cast<std::size_t>(i)];
    workers[static_cast<std::size_t>(i)].generation = table.slot(i).generation;
  }
  sim::SimRouting sim(std::move(*planner), std::move(workers));

  std::mt19937_64 rng(0x5eed ^ std::hash<std::string>{}(policy + shape.name));
  std::vector<Leg> legs;
  std::map<std::pair<EndpointRole, int>, int> served;  // (role, endpoint) -> legs
  int disaggregated = 0;
  const auto start = Clock::now() + std::chrono::hours(1);  // past any ejection
  for (std::uint64_t step = 1; step <= 400; ++step) {
    // The clocks advance 37 ms a request, so the precise policies' pending routes (2 s by
    // default) expire along the way on both sides.
    const auto t = start + std::chrono::milliseconds(37 * step);
    // WHEN an endpoint reports its load (a scrape on the router, the schedulers in the simulator):
    // the legs it serves now, up to 6 running and the rest waiting, and any KV use; between
    // reports the numbers go stale
    if (rng() % 4 == 0) {
      const int id = static_cast<int>(rng() % static_cast<std::uint64_t>(n));
      int serving = 0;
      for (const Leg& leg : legs) serving += leg.worker == id ? 1 : 0;
      ScrapedLoad load;
      load.found = true;
      load.running = static_cast<double>(std::min(serving, 6));
      load.waiting = static_cast<double>(serving - std::min(serving, 6));
      load.kv_usage = static_cast<double>(rng() % 100) / 100.0;
      table.load_reported(id, table.slot(id).generation, load);
      EndpointState& e = sim.endpoints()[static_cast<std::size_t>(id)];
      e.running_requests = static_cast<std::int32_t>(load.running);
      e.waiting_requests = static_cast<std::int32_t>(load.waiting);
      e.kv_usage = load.kv_usage;
    }
    // AND store KV blocks (events on the router, the workers' pools in the simulator)
    if (precise && rng() % 3 == 0) {
      const StreamRequest r = make_request(rng, kBlockSize);
      const auto id = static_cast<EndpointId>(rng() % static_cast<std::uint64_t>(n));
      const std::size_t blocks = std::min<std::size_t>(r.hashes.size(), 8 + rng() % 40);
      KvEventBatch batch;
      batch.hashes.assign(r.hashes.begin(), r.hashes.begin() + static_cast<std::ptrdiff_t>(blocks));
      KvEventRecord rec;
      rec.hash_count = static_cast<std::uint32_t>(blocks);
      batch.events.push_back(rec);
      table.on_kv_batch(id, table.slot(id).generation, batch);
      ASSERT_TRUE(sim_index->apply_stored(id, KvTier::gpu, batch.hashes).has_value());
    }
    // AND an endpoint fails its health checks for a while, and comes back
    if (rng() % 50 == 0) {
      const int id = static_cast<int>(rng() % static_cast<std::uint64_t>(n));
      const bool up = rng() % 2 == 0;
      table.slot(id).up = up;
      sim.endpoints()[static_cast<std::size_t>(id)].healthy = up;
    }
    // AND legs end, oldest first mostly
    while (!legs.empty() && rng() % 3 != 0) {
      const std::size_t k = rng() % 4 == 0 ? rng() % legs.size() : 0;
      Leg leg = legs[k];
      legs.erase(legs.begin() + static_cast<std::ptrdiff_t>(k));
      table.finish(leg.pick, leg.request_id);
      sim.leg_done(leg.request_id, leg.worker);
      sim.endpoints()[static_cast<std::size_t>(leg.worker)].inflight_prefill_tokens -= leg.prefill_tokens;
    }
    // AND a request arrives
    const StreamRequest r = make_request(rng, kBlockSize);
    RouteRequest rq;
    rq.request_id = step;
    rq.prompt_tokens = static_cast<std::int64_t>(r.tokens.size());
    rq.block_hashes = r.hashes;
    rq.block_size = kBlockSize;
    rq.session_key = sessions ? r.session : 0;
    Plan rp = table.plan(rq, 0, true, t);  // the router sets now_ms from `t` itself
    // The simulator's caller sets it from its virtual clock.
    rq.now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    const RoutePlan sp = sim.plan(rq);
    // THEN both pick the same endpoints for the same reasons
    ASSERT_EQ(rp.main.ok(), sp.ok()) << "request " << step;
    if (!sp.ok()) continue;
    ASSERT_EQ(rp.main.slot, sp.main.index) << "request " << step;
    ASSERT_EQ(rp.main.cached_blocks, sp.main.cached_blocks) << "request " << step;
    ASSERT_EQ(rp.prefill.slot, sp.prefill.index) << "request " << step;
    ASSERT_EQ(rp.pd_evaluated, sp.pd_evaluated) << "request " << step;
    ASSERT_EQ(rp.reason, sp.reason) << "request " << step;
    ASSERT_EQ((rp.prefill.ok() ? rp.prefill : rp.main).prefill_tokens, sp.prefill_tokens) << "request " << step;
    sim.apply(rq, sp);
    // The simulator counts the prefilling leg's uncached tokens as queued prefill until its first
    // token (the router: until the leg's first byte, here its end).
    const std::int32_t prefiller = sp.disaggregated() ? sp.prefill.index : sp.main.index;
    sim.endpoints()[static_cast<std::size_t>(prefiller)].inflight_prefill_tokens += sp.prefill_tokens;
    ++served[{shape.roles[static_cast<std::size_t>(rp.main.slot)], rp.main.slot}];
    legs.push_back(Leg{rq.request_id, rp.main, sp.main.index, sp.disaggregated() ? 0 : sp.prefill_tokens});
    if (rp.prefill.ok()) {
      ++disaggregated;
      ++served[{EndpointRole::prefill, rp.prefill.slot}];
      legs.push_back(Leg{rq.request_id, rp.prefill, sp.prefill.index, sp.prefill_tokens});
    }
    // AND both count the same legs and the same queued prefill tokens on every endpoint
    for (int i = 0; i < n; ++i) {
      const EndpointState& e = sim.endpoints()[static_cast<std::size_t>(i)];
      ASSERT_EQ(table.slot(i).inflight.load(), e.routed_requests) << "endpoint " << i << " after request " << step;
      ASSERT_EQ(table.slot(i).inflight_prefill_tokens.load(), e.inflight_prefill_tokens)
          << "endpoint " << i << " after request " << step;
    }
  }
  // AND every endpoint of every role received work (round robin under P/D used one prefill
  // endpoint for all when the rotation was shared by the roles)
  if (!sessions) {
    for (int i = 0; i < n; ++i) {
      const EndpointRole role = shape.roles[static_cast<std::size_t>(i)];
      EXPECT_GT((served[{role, i}]), 0) << "endpoint " << i << " (" << to_string(role) << ") got no work";
    }
    if (pd) { EXPECT_GT(disaggregated, 0); }
  }
}

TEST(RoutePlanDifferential, RouterAndSimulatorPickAlikeForEveryPolicy) {
  for (const std::string_view policy : routing_policy_names()) {
    for (const Shape& shape : kShapes) {
      for (const bool precise : {false, true}) {
        if (precise && !routing_policy_reads_prefixes(policy)) continue;
        for (const bool sessions : {false, true}) {
          run_differential(std::string(policy), shape, precise, sessions);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

}  // namespace
}  // namespace disagg::router
