// Simulator: when the client sees a disaggregated request's first token (PoolSpec::first_token_at on
// the decode pool): the decode side's first step (vLLM), the KV transfer's completion (DistServe,
// SGLang) or the prefill step (TensorRT-LLM). One prefill and one decode replica, one request at a
// time, so that every time is a sum of step and transfer times computed by hand from the cost model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "disagg/simulation_config.h"
#include "disagg/simulator.h"
#include "../core/test_fixtures.h"

namespace disagg {
namespace {

constexpr int kPrompt = 1000;

// One prefill and one decode replica of the shared model; every request disaggregated.
SimulationConfig pd(FirstTokenAt at) {
  SimulationConfig c;
  c.pools.push_back(test::sim_pool(WorkerRole::prefill, 1, 4000));
  c.pools.push_back(test::sim_pool(WorkerRole::decode, 1, 4000));
  c.pools[1].first_token_at = at;
  c.router.policy = "round-robin";
  c.router.decider.min_uncached_tokens = 16;
  c.check_invariants = true;
  return c;
}

// One request of kPrompt fresh tokens and `output` tokens to generate.
WorkloadSpec one_request(int output) {
  WorkloadSpec w;
  w.max_requests = 1;
  w.arrival.rate_per_second = 1;
  w.input = {LengthDist::Kind::fixed, kPrompt, 0, 1, 1 << 20};
  w.output = {LengthDist::Kind::fixed, static_cast<double>(output), 0, 1, 1 << 20};
  return w;
}

// The times the cost model gives the shared pool: the whole prompt's prefill, its KV transfer, and
// a decode step of one sequence whose KV holds `context` tokens.
struct HandTimes {
  CostModel cm = *CostModel::create(test::sim_pool(WorkerRole::decode, 1, 1).cost);
  double prefill() const { return cm.prefill_chunk_time(kPrompt, 0).total_seconds; }
  double transfer() const { return cm.kv_transfer_seconds(kPrompt); }
  double decode(int context) const { return cm.decode_batch_time(1, context).total_seconds; }
  // Decode steps at contexts first, first + 1, ..., first + steps - 1.
  double decodes(int first, int steps) const {
    double s = 0;
    for (int k = 0; k < steps; ++k) s += decode(first + k);
    return s;
  }
};

void expect_times(const SimulationResult& r, double ttft, double e2e, int output) {
  ASSERT_EQ(r.summary.completed, 1);
  EXPECT_EQ(r.summary.disaggregated, 1);
  EXPECT_NEAR(r.summary.ttft.mean, ttft, 1e-9);
  EXPECT_NEAR(r.summary.e2e.mean, e2e, 1e-9);
  // Every token the client sees is counted once, and the gaps between them are the ITL samples.
  EXPECT_EQ(r.tokens_sampled, output);
  EXPECT_EQ(r.summary.itl.count, output - 1);
  if (output > 1) { EXPECT_NEAR(r.summary.tpot.mean, (e2e - ttft) / (output - 1), 1e-9); }
  EXPECT_EQ(r.blocks_in_use_at_end, 0);
}

TEST(SimulatorFirstToken, DecodeStepIsTheDecodeSidesFirstStepAfterTheTransfer) {
  // GIVEN the default (vLLM's NixlConnector P/D) and a request of 5 output tokens
  const HandTimes h;
  // WHEN it runs
  const SimulationResult r = test::run(pd(FirstTokenAt::decode_step), one_request(5));
  // THEN its first token comes from the decode side's first step (it recomputes the last prompt
  //      token, context 999) after the prefill and the transfer, and 4 more steps follow
  const double first = h.prefill() + h.transfer() + h.decode(kPrompt - 1);
  expect_times(r, first, first + h.decodes(kPrompt, 4), 5);
  EXPECT_EQ(r.summary.kv_transfer_bytes, kPrompt * 131072.0);
}

TEST(SimulatorFirstToken, TransferIsWhenTheKvAndThePrefillsTokenLand) {
  // GIVEN DistServe's or SGLang's P/D and a request of 5 output tokens
  const HandTimes h;
  // WHEN it runs
  const SimulationResult r = test::run(pd(FirstTokenAt::transfer), one_request(5));
  // THEN the first token is seen when the transfer of the prompt's KV completes; the decode side
  //      then computes that token's KV (context 1000) and generates the other 4 tokens
  const double first = h.prefill() + h.transfer();
  expect_times(r, first, first + h.decodes(kPrompt, 4), 5);
  // AND the transfer moved the prompt's KV, as with the default
  EXPECT_EQ(r.summary.kv_transfer_bytes, kPrompt * 131072.0);
  // AND the request ends one decode step (the default's first one) earlier than with the default
  const SimulationResult d = test::run(pd(FirstTokenAt::decode_step), one_request(5));
  EXPECT_NEAR(d.summary.e2e.mean - r.summary.e2e.mean, h.decode(kPrompt - 1), 1e-9);
}

TEST(SimulatorFirstToken, PrefillIsWhenThePrefillStepSamplesIt) {
  // GIVEN TensorRT-LLM's disaggregated server and a request of 5 output tokens
  const HandTimes h;
  // WHEN it runs
  const SimulationResult r = test::run(pd(FirstTokenAt::prefill), one_request(5));
  // THEN the first token is seen when the prefill step ends; the rest is as with `transfer`: the
  //      first ITL sample spans the transfer and the decode side's first step
  expect_times(r, h.prefill(), h.prefill() + h.transfer() + h.decodes(kPrompt, 4), 5);
  EXPECT_NEAR(r.summary.itl.max, h.transfer() + h.decode(kPrompt), 1e-9);
}

TEST(SimulatorFirstToken, OneTokenRequestsFinishAtTheirFirstToken) {
  const HandTimes h;
  // GIVEN requests of one output token
  // WHEN each mode runs one
  const SimulationResult step = test::run(pd(FirstTokenAt::decode_step), one_request(1));
  const SimulationResult transfer = test::run(pd(FirstTokenAt::transfer), one_request(1));
  const SimulationResult prefill = test::run(pd(FirstTokenAt::prefill), one_request(1));
  // THEN each finishes at its first token: after the decode side's step, at the transfer's end, or
  //      at the prefill's end without any transfer (no decode leg), and no block stays held
  const double after_transfer = h.prefill() + h.transfer();
  expect_times(step, after_transfer + h.decode(kPrompt - 1), after_transfer + h.decode(kPrompt - 1), 1);
  expect_times(transfer, after_transfer, after_transfer, 1);
  EXPECT_EQ(transfer.summary.kv_transfer_bytes, kPrompt * 131072.0);
  expect_times(prefill, h.prefill(), h.prefill(), 1);
  EXPECT_EQ(prefill.summary.kv_transfer_bytes, 0);
}

TEST(SimulatorFirstToken, EveryModeConservesRequestsTokensAndBlocksUnderLoad) {
  for (const FirstTokenAt at : {FirstTokenAt::decode_step, FirstTokenAt::transfer, FirstTokenAt::prefill}) {
    SCOPED_TRACE(std::string(to_string(at)));
    // GIVEN 2 prefill + 2 decode replicas small enough to preempt, and chat traffic with 1-token answers
    SimulationConfig c;
    c.pools.push_back(test::sim_pool(WorkerRole::prefill, 2, 2000));
    c.pools.push_back(test::sim_pool(WorkerRole::decode, 2, 700));
    c.pools[1].first_token_at = at;
    c.router.policy = "llm-d";
    c.router.decider.min_uncached_tokens = 300;
    c.check_invariants = true;
    WorkloadSpec w;
    w.kind = WorkloadKind::chat;
    w.seed = 8;
    w.max_requests = 300;
    w.arrival.rate_per_second = 20;
    w.input = {LengthDist::Kind::lognormal, 600, 300, 16, 3000};
    w.output = {LengthDist::Kind::uniform, 0, 0, 1, 120};
    w.tenants = 3;
    w.system_prompt_tokens = 128;
    // WHEN it runs
    const SimulationResult r = test::run(c, w);
    // THEN every request finished with exactly its output tokens, nothing leaked
    EXPECT_EQ(r.summary.completed, 300);
    EXPECT_GT(r.summary.disaggregated, 0);
    EXPECT_EQ(r.blocks_in_use_at_end, 0);
    const auto tokens =
        static_cast<std::int64_t>(std::llround(r.summary.output_token_throughput * r.summary.duration_seconds));
    EXPECT_EQ(r.tokens_sampled, tokens);
    EXPECT_LE(r.summary.ttft.p50, r.summary.e2e.p50);
  }
}

TEST(SimulatorFirstToken, ReadFromTheDecodePoolOfTheConfiguration) {
  const auto doc_with = [](const std::string& decode_extra) {
    return R"({
      "model": {"weightBytesPerRank": 16e9, "kvBytesPerToken": 131072, "activeParameters": 8e9, "layers": 32, "hiddenSize": 4096},
      "hardware": {"peakFlopsPerSecond": 9.89e14, "hbmBytesPerSecond": 3.35e12, "fabricBytesPerSecond": 4e10},
      "pools": [{"name": "p", "role": "prefill", "replicas": 1, "kvTokensPerReplica": 200000},
                {"name": "d", "role": "decode", "replicas": 1, "kvTokensPerReplica": 200000)" +
           decode_extra + R"(}],
      "workload": {"requests": 1}})";
  };
  // GIVEN each spelling, and none
  for (const auto& [text, at] : {std::pair<const char*, FirstTokenAt>{"", FirstTokenAt::decode_step},
                                 {R"(, "firstTokenAt": "decode-step")", FirstTokenAt::decode_step},
                                 {R"(, "firstTokenAt": "transfer")", FirstTokenAt::transfer},
                                 {R"(, "firstTokenAt": "prefill")", FirstTokenAt::prefill}}) {
    auto doc = parse_json(doc_with(text));
    ASSERT_TRUE(doc) << doc.error();
    auto setup = read_simulation(*doc);
    ASSERT_TRUE(setup) << setup.error();
    // THEN the decode pool carries it, the prefill pool the default
    EXPECT_EQ(setup->config.pools[1].first_token_at, at) << text;
    EXPECT_EQ(setup->config.pools[0].first_token_at, FirstTokenAt::decode_step);
  }
  // AND another value is refused, naming the field, the value and the choices
  auto bad = parse_json(doc_with(R"(, "firstTokenAt": "router")"));
  ASSERT_TRUE(bad) << bad.error();
  auto refused = read_simulation(*bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(),
            "'pools[1].firstTokenAt' (\"router\") must be decode-step (vLLM), transfer (DistServe, SGLang) or prefill "
            "(TensorRT-LLM)");
}

}  // namespace
}  // namespace disagg
