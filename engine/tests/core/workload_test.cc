// Workload generators: rates, lengths, sharing structure, determinism; trace parsing.
#include "disagg/workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

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
    for (auto& p : prompts) ASSERT_TRUE(std::equal(prompts[0].begin(), prompts[0].begin() + static_cast<std::ptrdiff_t>(shared), p.begin()));
  }
  EXPECT_GT(tenant_count[0], tenant_count[1]);  // Zipf: tenant 0 is the most popular
}

TEST(Workload, TraceReplaySharesBlocksByHashId) {
  const std::string text =
      "{\"timestamp\": 1000, \"input_length\": 20, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n"
      "\n"
      "{\"timestamp_ms\": 1500, \"input_length\": 12, \"output_length\": 2, \"hash_ids\": [1, 9], \"session_id\": \"abc\", \"extra\": [1, 2]}\n";
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
    if (!fresh) {
      EXPECT_EQ(it->second, prefix);
    }
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
  EXPECT_FALSE(parse_trace_line("{\"timestamp_ms\": 1, \"input_length\": 2, \"output_length\": 3, \"x\": {}}").has_value());
  EXPECT_FALSE(parse_trace_line("{\"timestamp_ms\": 1, \"input_length\": 2.5, \"output_length\": 3}").has_value());
  EXPECT_FALSE(parse_trace_line("{\"timestamp_ms\": 1, \"input_length\": 2, \"output_length\": 3} x").has_value());
  EXPECT_FALSE(Workload::from_trace("{\"timestamp_ms\": 5, \"input_length\": 2, \"output_length\": 3}\n"
                                    "{\"timestamp_ms\": 4, \"input_length\": 2, \"output_length\": 3}\n", {}).has_value());
  WorkloadSpec spec;
  spec.arrival.rate_per_second = 0;
  auto e = Workload::create(spec);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find("ratePerSecond"), std::string::npos);
}

}  // namespace
}  // namespace disagg
