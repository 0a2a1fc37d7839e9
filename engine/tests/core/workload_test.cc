// Workload generators: rates, lengths, sharing structure, determinism; trace parsing.
#include "disagg/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace disagg {
namespace {

struct Stats {
  double mean_gap = 0, cv = 0, mean_out = 0;
  std::int64_t n = 0;
};

Stats gaps(WorkloadSpec spec) {
  auto w = Workload::create(spec).value();
  WorkloadRequest r;
  std::vector<double> t;
  double out = 0;
  while (w.next(r)) {
    t.push_back(r.arrival_seconds);
    out += r.output_tokens;
  }
  Stats s;
  s.n = static_cast<std::int64_t>(t.size());
  double sum = 0, sq = 0;
  for (std::size_t i = 1; i < t.size(); ++i) {
    EXPECT_GE(t[i], t[i - 1]);
    sum += t[i] - t[i - 1];
    sq += (t[i] - t[i - 1]) * (t[i] - t[i - 1]);
  }
  const double m = sum / static_cast<double>(t.size() - 1);
  s.mean_gap = m;
  s.cv = std::sqrt(sq / static_cast<double>(t.size() - 1) - m * m) / m;
  s.mean_out = out / static_cast<double>(t.size());
  return s;
}

TEST(Workload, PoissonGammaAndMmppKeepTheMeanRate) {
  WorkloadSpec spec;
  spec.max_requests = 40000;
  spec.arrival.rate_per_second = 50;
  spec.input = {LengthDist::Kind::fixed, 8, 0, 1, 100};
  spec.output = {LengthDist::Kind::lognormal, 200, 100, 1, 1 << 20};
  const Stats p = gaps(spec);
  EXPECT_NEAR(1 / p.mean_gap, 50, 50 * 0.03);
  EXPECT_NEAR(p.cv, 1.0, 0.05);
  EXPECT_NEAR(p.mean_out, 200, 200 * 0.03);
  spec.arrival.kind = ArrivalProcess::Kind::gamma;
  spec.arrival.cv = 3;
  const Stats g = gaps(spec);
  EXPECT_NEAR(1 / g.mean_gap, 50, 50 * 0.06);
  EXPECT_NEAR(g.cv, 3.0, 0.3);
  spec.arrival.kind = ArrivalProcess::Kind::mmpp;
  spec.max_requests = 200000;
  const Stats m = gaps(spec);
  EXPECT_NEAR(1 / m.mean_gap, 50, 50 * 0.08);
  EXPECT_GT(m.cv, 1.1);  // bursty
}

TEST(Workload, SameSeedSameStreamOtherSeedOther) {
  WorkloadSpec spec;
  spec.kind = WorkloadKind::chat;
  spec.max_requests = 300;
  spec.arrival.rate_per_second = 5;
  spec.input = {LengthDist::Kind::uniform, 0, 0, 10, 50};
  spec.output = {LengthDist::Kind::fixed, 20, 0, 1, 100};
  auto a = Workload::create(spec).value(), b = Workload::create(spec).value();
  spec.seed = 2;
  auto c = Workload::create(spec).value();
  WorkloadRequest ra, rb, rc;
  bool differs = false;
  while (a.next(ra)) {
    ASSERT_TRUE(b.next(rb));
    ASSERT_TRUE(c.next(rc));
    ASSERT_EQ(ra.arrival_seconds, rb.arrival_seconds);
    ASSERT_EQ(ra.prompt, rb.prompt);
    differs = differs || ra.prompt != rc.prompt;
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(a.emitted(), 300u);
}

TEST(Workload, WithoutFreshTextOnlyTheFreshTokensDiffer) {
  // GIVEN single-turn prompts behind tenants' system prompts, drawn with and without fresh text
  WorkloadSpec spec;
  spec.max_requests = 200;
  spec.input = {LengthDist::Kind::uniform, 0, 0, 10, 3000};
  spec.tenants = 3;
  spec.system_prompt_tokens = 64;
  auto drawn = Workload::create(spec).value();
  spec.fresh_text = false;
  auto lean = Workload::create(spec).value();
  WorkloadRequest a, b;
  int with_fresh = 0;
  while (drawn.next(a)) {
    // WHEN both streams are read THEN arrivals, lengths, tenants and shared prefixes agree
    ASSERT_TRUE(lean.next(b));
    ASSERT_EQ(a.arrival_seconds, b.arrival_seconds);
    ASSERT_EQ(a.prompt.size(), b.prompt.size());
    ASSERT_EQ(a.output_tokens, b.output_tokens);
    ASSERT_EQ(a.tenant, b.tenant);
    ASSERT_EQ(a.shared_prefix_tokens, b.shared_prefix_tokens);
    const auto shared = static_cast<std::ptrdiff_t>(a.shared_prefix_tokens);
    ASSERT_TRUE(std::equal(a.prompt.begin(), a.prompt.begin() + shared, b.prompt.begin()));
    // AND the fresh text is left 0 (the drawn stream has random tokens there)
    const auto fresh_end = b.prompt.begin() + shared + (b.prompt.size() > static_cast<std::size_t>(shared) + 8 ? 8 : 0);
    EXPECT_TRUE(std::all_of(b.prompt.begin() + shared, fresh_end, [](TokenId t) { return t == 0; }));
    with_fresh +=
        std::any_of(a.prompt.begin() + shared, a.prompt.begin() + shared + 8, [](TokenId t) { return t != 0; });
  }
  EXPECT_FALSE(lean.next(b));
  EXPECT_GT(with_fresh, 190);
}

TEST(Workload, ChatTurnExtendsPreviousPromptAndAnswer) {
  WorkloadSpec spec;
  spec.kind = WorkloadKind::chat;
  spec.max_requests = 500;
  spec.arrival.rate_per_second = 2;
  spec.tenants = 3;
  spec.system_prompt_tokens = 16;
  auto w = Workload::create(spec).value();
  std::map<std::uint64_t, std::vector<TokenId>> last;
  WorkloadRequest r;
  int followups = 0;
  while (w.next(r)) {
    auto it = last.find(r.session_id);
    if (it != last.end()) {
      ASSERT_GT(r.prompt.size(), it->second.size());
      ASSERT_TRUE(std::equal(it->second.begin(), it->second.end(), r.prompt.begin()));
      ++followups;
    }
    std::vector<TokenId> ctx = r.prompt;
    ctx.insert(ctx.end(), r.answer.begin(), r.answer.end());
    ASSERT_EQ(static_cast<std::int32_t>(r.answer.size()), r.output_tokens);
    last[r.session_id] = ctx;
  }
  EXPECT_GT(followups, 100);
}

TEST(Workload, AgenticBranchesShareTheContextAndTenantsShareSystemPrompts) {
  WorkloadSpec spec;
  spec.kind = WorkloadKind::agentic;
  spec.max_requests = 200;
  spec.arrival.rate_per_second = 1;
  spec.fanout = 4;
  spec.depth = 2;
  spec.tenants = 2;
  spec.system_prompt_tokens = 8;
  spec.zipf_exponent = 1.0;
  auto w = Workload::create(spec).value();
  std::map<std::pair<std::uint64_t, int>, std::vector<std::vector<TokenId>>> rounds;
  std::map<int, int> tenant_count;
  WorkloadRequest r;
  while (w.next(r)) {
    rounds[{r.session_id, r.turn}].push_back(r.prompt);
    ++tenant_count[r.tenant];
  }
  for (auto& [key, prompts] : rounds) {
    if (prompts.size() < 2) continue;
    // Branches of one round share everything but the tool output (fixed at 256 tokens).
    const std::size_t shared = prompts[0].size() - 256;
    for (auto& p : prompts)
      ASSERT_TRUE(std::equal(prompts[0].begin(), prompts[0].begin() + static_cast<std::ptrdiff_t>(shared), p.begin()));
  }
  EXPECT_GT(tenant_count[0], tenant_count[1]);  // Zipf: tenant 0 is the most popular
}

TEST(Workload, TraceReplaySharesBlocksByHashId) {
  const std::string text =
      "{\"timestamp\": 1000, \"input_length\": 20, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n"
      "\n"
      "{\"timestamp_ms\": 1500, \"input_length\": 12, \"output_length\": 2, \"hash_ids\": [1, 9], \"session_id\": "
      "\"abc\", \"extra\": [1, 2]}\n";
  TraceSpec ts;
  ts.trace_block_tokens = 8;
  auto w = Workload::from_trace(text, ts).value();
  WorkloadRequest a, b;
  ASSERT_TRUE(w.next(a));
  ASSERT_TRUE(w.next(b));
  EXPECT_FALSE(w.next(a));
  EXPECT_EQ(b.arrival_seconds, 0.5);
  EXPECT_EQ(a.prompt.size(), 20u);
  EXPECT_EQ(b.prompt.size(), 12u);
  EXPECT_TRUE(std::equal(a.prompt.begin(), a.prompt.begin() + 8, b.prompt.begin()));
  EXPECT_FALSE(std::equal(a.prompt.begin() + 8, a.prompt.begin() + 12, b.prompt.begin() + 8));
}

TEST(Workload, SharedPrefixIsTheSystemPromptForOneShotRequests) {
  // GIVEN one-shot requests behind 3 tenants' 64-token system prompts
  WorkloadSpec spec;
  spec.max_requests = 50;
  spec.input = {LengthDist::Kind::fixed, 100, 0, 1, 1 << 20};
  spec.tenants = 3;
  spec.system_prompt_tokens = 64;
  auto w = Workload::create(spec).value();
  WorkloadRequest r;
  std::map<std::int32_t, std::vector<TokenId>> seen;
  while (w.next(r)) {
    // THEN the shared prefix is exactly the system prompt, equal across a tenant's requests
    ASSERT_EQ(r.shared_prefix_tokens, 64);
    const std::vector<TokenId> prefix(r.prompt.begin(), r.prompt.begin() + 64);
    auto [it, fresh] = seen.emplace(r.tenant, prefix);
    if (!fresh) { EXPECT_EQ(it->second, prefix); }
  }
  // AND a chat turn shares its whole prompt (the next turn extends it)
  spec.kind = WorkloadKind::chat;
  auto c = Workload::create(spec).value();
  ASSERT_TRUE(c.next(r));
  EXPECT_EQ(r.shared_prefix_tokens, static_cast<std::int32_t>(r.prompt.size()));
}

TEST(Workload, ClosedLoopSendsTheNextRequestWhenOneEnds) {
  // GIVEN a closed loop of 3 clients and 5 requests in all
  WorkloadSpec spec;
  spec.concurrency = 3;
  spec.max_requests = 5;
  auto w = Workload::create(spec).value();
  EXPECT_TRUE(w.closed_loop());
  WorkloadRequest r;
  // THEN 3 requests are ready at time 0, then nothing until one ends
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(w.next(r));
    EXPECT_EQ(r.arrival_seconds, 0);
  }
  EXPECT_FALSE(w.next(r));
  // WHEN requests end at 1.5 s and 2 s, each client sends its next one then
  w.complete(1.5);
  ASSERT_TRUE(w.next(r));
  EXPECT_EQ(r.arrival_seconds, 1.5);
  w.complete(2.0);
  ASSERT_TRUE(w.next(r));
  EXPECT_EQ(r.arrival_seconds, 2.0);
  // AND the request limit stops the loop
  w.complete(3.0);
  EXPECT_FALSE(w.next(r));
  EXPECT_EQ(w.emitted(), 5u);
  // AND a closed loop needs a request bound and a one-shot kind
  spec.max_requests = 0;
  spec.duration_seconds = 10;
  EXPECT_FALSE(Workload::create(spec).has_value());
  spec.max_requests = 5;
  spec.kind = WorkloadKind::chat;
  auto bad = Workload::create(spec);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("workload.concurrency"), std::string::npos);
}

TEST(Workload, TraceAndSpecErrorsNameTheField) {
  auto bad = Workload::from_trace("{\"timestamp_ms\": 1, \"input_length\": 2}\n", {});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("line 1"), std::string::npos);
  EXPECT_NE(bad.error().message.find("output_length"), std::string::npos);
  EXPECT_FALSE(
      parse_trace_line("{\"timestamp_ms\": 1, \"input_length\": 2, \"output_length\": 3, \"x\": {}}").has_value());
  EXPECT_FALSE(parse_trace_line("{\"timestamp_ms\": 1, \"input_length\": 2.5, \"output_length\": 3}").has_value());
  EXPECT_FALSE(parse_trace_line("{\"timestamp_ms\": 1, \"input_length\": 2, \"output_length\": 3} x").has_value());
  EXPECT_FALSE(Workload::from_trace("{\"timestamp_ms\": 5, \"input_length\": 2, \"output_length\": 3}\n"
                                    "{\"timestamp_ms\": 4, \"input_length\": 2, \"output_length\": 3}\n",
                                    {})
                   .has_value());
  WorkloadSpec spec;
  spec.arrival.rate_per_second = 0;
  auto e = Workload::create(spec);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("ratePerSecond"), std::string::npos);
}

// ---- constant arrivals, stages, shared prompts, api --------------------------------------------

std::vector<WorkloadRequest> all_of(const WorkloadSpec& spec) {
  auto w = Workload::create(spec);
  EXPECT_TRUE(w.has_value()) << (w ? "" : w.error().message);
  std::vector<WorkloadRequest> out;
  WorkloadRequest r;
  while (w && w->next(r)) out.push_back(r);
  return out;
}

TEST(Workload, ConstantArrivalsAreEvenlySpacedExactly) {
  // GIVEN constant arrivals at 8/s
  WorkloadSpec spec;
  spec.max_requests = 1000;
  spec.arrival.kind = ArrivalProcess::Kind::constant;
  spec.arrival.rate_per_second = 8;
  const auto rs = all_of(spec);
  // THEN arrival i is at exactly i / 8 s: no drift however many came before
  ASSERT_EQ(rs.size(), 1000u);
  for (std::size_t i = 0; i < rs.size(); ++i) ASSERT_EQ(rs[i].arrival_seconds, static_cast<double>(i) / 8.0) << i;
  // AND a rate whose period is not a binary fraction keeps i / rate too (computed, not summed)
  spec.arrival.rate_per_second = 3;
  const auto thirds = all_of(spec);
  EXPECT_EQ(thirds[999].arrival_seconds, 999.0 / 3.0);
}

TEST(Workload, StagesSwitchTheRateWhereTheyMeetAndEndTheRun) {
  // GIVEN constant stages of 8/s for 10 s then 20/s for 5 s, and no request limit
  WorkloadSpec spec;
  spec.max_requests = 0;
  spec.input = {LengthDist::Kind::fixed, 8, 0, 1, 1 << 20};
  spec.arrival.kind = ArrivalProcess::Kind::constant;
  spec.arrival.stages = {{8, 10}, {20, 5}};
  const auto rs = all_of(spec);
  // THEN each stage sends rate x duration requests, the first at its start, evenly spaced
  ASSERT_EQ(rs.size(), 80u + 100u);
  for (std::size_t i = 0; i < 80; ++i) ASSERT_EQ(rs[i].arrival_seconds, static_cast<double>(i) / 8.0);
  for (std::size_t i = 0; i < 100; ++i) ASSERT_EQ(rs[80 + i].arrival_seconds, 10.0 + static_cast<double>(i) / 20.0);
  EXPECT_LT(rs.back().arrival_seconds, 15.0);
  // AND a stage of 8/s for 600 s is 4,800 requests, not one more (the README's validation stages)
  spec.arrival.stages = {{8, 600}, {20, 600}};
  EXPECT_EQ(all_of(spec).size(), 4800u + 12000u);
  // AND a request limit still cuts the run
  spec.max_requests = 100;
  EXPECT_EQ(all_of(spec).size(), 100u);
  // AND Poisson stages keep each stage's own rate and stop at the end of the last
  spec.max_requests = 0;
  spec.arrival.kind = ArrivalProcess::Kind::poisson;
  spec.arrival.stages = {{50, 200}, {200, 100}};
  const auto ps = all_of(spec);
  const auto in_first =
      std::count_if(ps.begin(), ps.end(), [](const WorkloadRequest& r) { return r.arrival_seconds < 200; });
  EXPECT_NEAR(static_cast<double>(in_first) / 200, 50, 50 * 0.03);
  EXPECT_NEAR(static_cast<double>(ps.size() - static_cast<std::size_t>(in_first)) / 100, 200, 200 * 0.03);
  EXPECT_LT(ps.back().arrival_seconds, 300.0);
  // AND without stages nothing changed: the same spec at one rate gives the stream it always gave
  WorkloadSpec plain;
  plain.max_requests = 50;
  plain.arrival.rate_per_second = 5;
  const auto a = all_of(plain);
  plain.arrival.stages = {{5, 1e6}};
  const auto b = all_of(plain);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].arrival_seconds, b[i].arrival_seconds);
}

TEST(Workload, EqualPopularityTakesEveryTenantAndUserInTurn) {
  // GIVEN 7 shared prompts of equal popularity, then 7 x 3 users
  WorkloadSpec spec;
  spec.tenants = 7;
  spec.system_prompt_tokens = 32;
  spec.input = {LengthDist::Kind::fixed, 20, 0, 1, 1 << 20};
  spec.popularity = TenantPopularity::equal;
  spec.max_requests = 7 * 30;
  std::map<std::int32_t, int> per_tenant;
  for (const auto& r : all_of(spec)) ++per_tenant[r.tenant];
  // THEN each is taken exactly as often
  ASSERT_EQ(per_tenant.size(), 7u);
  for (const auto& [t, n] : per_tenant) EXPECT_EQ(n, 30) << "tenant " << t;
  spec.users_per_tenant = 3;
  spec.max_requests = 21 * 10;
  const auto rs = all_of(spec);
  std::map<std::pair<std::int32_t, std::int32_t>, int> per_slot;
  for (std::size_t i = 0; i < rs.size(); ++i) {
    ++per_slot[{rs[i].tenant, rs[i].user}];
    // AND every whole cycle of 21 requests holds every (tenant, user) once
    if ((i + 1) % 21 == 0) {
      for (const auto& [slot, n] : per_slot) ASSERT_EQ(n, static_cast<int>((i + 1) / 21));
    }
  }
  EXPECT_EQ(per_slot.size(), 21u);
}

TEST(Workload, ZipfPopularityFollowsOneOverKToTheS) {
  // GIVEN 5 shared prompts with Zipf(1.2) popularity and 4 users each
  WorkloadSpec spec;
  spec.tenants = 5;
  spec.system_prompt_tokens = 8;
  spec.zipf_exponent = 1.2;
  spec.users_per_tenant = 4;
  spec.input = {LengthDist::Kind::fixed, 8, 0, 1, 1 << 20};
  spec.max_requests = 60000;
  std::map<std::int32_t, int> per_tenant;
  std::map<std::int32_t, int> per_user;
  for (const auto& r : all_of(spec)) {
    ++per_tenant[r.tenant];
    ++per_user[r.user];
  }
  // THEN tenant k's share is (1/k^1.2) / sum, within 3%, and users are even within a tenant
  double total = 0;
  for (int k = 1; k <= 5; ++k) total += 1 / std::pow(k, 1.2);
  for (int k = 1; k <= 5; ++k) {
    const double want = 1 / std::pow(k, 1.2) / total;
    EXPECT_NEAR(per_tenant[k - 1] / 60000.0, want, want * 0.03) << "tenant " << k;
  }
  for (int u = 0; u < 4; ++u) EXPECT_NEAR(per_user[u] / 60000.0, 0.25, 0.25 * 0.03);
}

TEST(Workload, SharedTokensAreEqualWithinAGroupAndUniqueTokensNeverShared) {
  // GIVEN 3 groups with 40-token system prompts and 64-token fresh questions
  WorkloadSpec spec;
  spec.tenants = 3;
  spec.system_prompt_tokens = 40;
  spec.input = {LengthDist::Kind::fixed, 64, 0, 1, 1 << 20};
  spec.popularity = TenantPopularity::equal;
  spec.max_requests = 300;
  std::map<std::int32_t, std::vector<TokenId>> system;
  std::set<std::vector<TokenId>> questions;
  for (const auto& r : all_of(spec)) {
    // THEN a request is its group's system prompt, then its own question
    ASSERT_EQ(r.prompt.size(), 104u);
    ASSERT_EQ(r.shared_prefix_tokens, 40);
    const std::vector<TokenId> head(r.prompt.begin(), r.prompt.begin() + 40);
    auto [it, fresh] = system.emplace(r.tenant, head);
    if (!fresh) { EXPECT_EQ(it->second, head); }
    // AND no other request holds its question (compared a 16-token block at a time: what a cache sees)
    for (std::size_t b = 40; b + 16 <= r.prompt.size(); b += 16) {
      EXPECT_TRUE(questions
                      .insert({r.prompt.begin() + static_cast<std::ptrdiff_t>(b),
                               r.prompt.begin() + static_cast<std::ptrdiff_t>(b) + 16})
                      .second);
    }
  }
  EXPECT_NE(system[0], system[1]);
  EXPECT_NE(system[1], system[2]);
  // WHEN each group has 2 users with fixed questions
  spec.users_per_tenant = 2;
  std::map<std::pair<std::int32_t, std::int32_t>, std::vector<TokenId>> prompt_of;
  std::set<std::vector<TokenId>> distinct;
  for (const auto& r : all_of(spec)) {
    // THEN a user's whole prompt repeats (and may be shared), and users never share a question
    EXPECT_EQ(r.shared_prefix_tokens, static_cast<std::int32_t>(r.prompt.size()));
    EXPECT_EQ(std::vector<TokenId>(r.prompt.begin(), r.prompt.begin() + 40), system[r.tenant]);
    auto [it, fresh] = prompt_of.emplace(std::pair{r.tenant, r.user}, r.prompt);
    if (!fresh) { EXPECT_EQ(it->second, r.prompt); }
    distinct.insert(std::vector<TokenId>(r.prompt.begin() + 40, r.prompt.end()));
  }
  EXPECT_EQ(prompt_of.size(), 6u);
  EXPECT_EQ(distinct.size(), 6u);
}

TEST(Workload, ChatApiAddsTheSimWorkersTemplateTokensAndCompletionsNone) {
  // GIVEN one-shot requests behind a 40-token system prompt with 64 tokens of question
  WorkloadSpec spec;
  spec.tenants = 1;
  spec.system_prompt_tokens = 40;
  spec.input = {LengthDist::Kind::fixed, 64, 0, 1, 1 << 20};
  spec.max_requests = 5;
  // THEN completions sends exactly the given tokens
  const auto plain = all_of(spec);
  EXPECT_EQ(plain[0].prompt.size(), 104u);
  // AND chat adds "<|system|>" (3 tokens), "<|user|>" (2) and "<|assistant|>" (4), as the
  // sim-worker's template renders them; the headers before the question are shared
  spec.api = PromptApi::chat;
  const auto chat = all_of(spec);
  EXPECT_EQ(chat[0].prompt.size(), 104u + 9u);
  EXPECT_EQ(chat[0].shared_prefix_tokens, 3 + 40 + 2);
  EXPECT_EQ(std::vector<TokenId>(chat[0].prompt.begin() + 3, chat[0].prompt.begin() + 43),
            std::vector<TokenId>(plain[0].prompt.begin(), plain[0].prompt.begin() + 40));
  // AND multi-turn chat wraps every turn: turn 2 = turn 1 + answer + user header + followup + assistant header
  spec.kind = WorkloadKind::chat;
  spec.turns = {LengthDist::Kind::fixed, 2, 0, 1, 10};
  spec.followup_input = {LengthDist::Kind::fixed, 10, 0, 1, 100};
  spec.output = {LengthDist::Kind::fixed, 7, 0, 1, 100};
  spec.max_requests = 2;
  spec.arrival.kind = ArrivalProcess::Kind::constant;
  spec.arrival.rate_per_second = 1e-3;  // the next session 1,000 s later
  const auto turns = all_of(spec);
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_EQ(turns[1].prompt.size(), turns[0].prompt.size() + 7 + 2 + 10 + 4);
}

TEST(Workload, StageUserAndApiErrorsNameTheFieldAndTheFix) {
  auto error = [](const WorkloadSpec& spec) {
    auto w = Workload::create(spec);
    return w ? std::string() : w.error().message;
  };
  WorkloadSpec spec;
  spec.arrival.stages = {{8, 600}, {0, 600}};
  EXPECT_EQ(error(spec), "'workload.arrival.stages[1].ratePerSecond' (0) must be > 0 requests/s");
  spec.arrival.stages = {{8, 600}, {20, -1}};
  EXPECT_EQ(error(spec), "'workload.arrival.stages[1].durationSeconds' (-1) must be > 0 seconds");
  spec.arrival.stages = {{8, 600}};
  spec.duration_seconds = 60;
  EXPECT_NE(error(spec).find(
                "'workload.durationSeconds' (60) and 'workload.arrival.stages' both end the run; drop durationSeconds"),
            std::string::npos);
  spec.duration_seconds = 0;
  spec.concurrency = 4;
  EXPECT_NE(error(spec).find("drop 'workload.arrival.stages' or the concurrency"), std::string::npos);
  spec.concurrency = 0;
  spec.arrival.stages.clear();
  spec.users_per_tenant = 5;
  EXPECT_NE(
      error(spec).find("'workload.tenants.usersPerTenant' (5) must be 0, or > 0 with 'workload.tenants.count' >= 1"),
      std::string::npos);
  spec.tenants = 2;
  spec.system_prompt_tokens = 10;
  spec.kind = WorkloadKind::chat;
  EXPECT_NE(error(spec).find("kind single"), std::string::npos);
  spec.kind = WorkloadKind::single;
  spec.users_per_tenant = 1 << 20;
  EXPECT_NE(error(spec).find("exceeds 1,048,576 prompts"), std::string::npos);
  spec.users_per_tenant = 1000;
  spec.input = {LengthDist::Kind::fixed, 100000, 0, 1, 1 << 20};
  EXPECT_NE(error(spec).find("exceed 67,108,864 stored tokens"), std::string::npos);
}

}  // namespace
}  // namespace disagg
