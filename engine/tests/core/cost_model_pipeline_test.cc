// Cost model, pipeline parallelism (parallel.pipelineParallel): one sequence steps in about the whole
// model's time, a full batch spreads over the micro-batches in flight, the activation sends, the
// stages' KV, and the refused layouts. Hand-computed on round numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "disagg/cost_model.h"
#include "test_fixtures.h"

namespace disagg {
namespace {

// The whole model on one rank (tp 1, pp 1): 1e9 weight bytes, 1e5 KV bytes per token, 1e9
// parameters, 10 layers of width 1000; 1e12 FLOP/s and 1e11 B/s, both at 0.5.
CostModelParams one_stage() {
  CostModelParams p = test::round_params();
  p.interconnect_bytes_per_second = 1e11;
  p.interconnect_efficiency = 0.5;
  p.interconnect_latency_seconds = 1e-5;
  return p;
}

// The same model over 2 stages of 1 rank (TP1 PP2): each rank holds half the weights.
CostModelParams two_stages() {
  CostModelParams p = one_stage();
  p.pipeline_parallel = 2;
  p.weight_bytes_per_rank = 5e8;
  return p;
}

CostModel make(const CostModelParams& p) {
  auto m = CostModel::create(p);
  EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().message());
  return *m;
}

void expect_rel(double actual, double expected) {
  EXPECT_NEAR(actual, expected, std::abs(expected) * 1e-12) << "expected " << expected;
}

TEST(CostModelPipeline, OneSequenceStepsInTheWholeModelsTimeNotHalfOfIt) {
  // GIVEN TP1 and TP1 PP2 (half the weights per rank, NVLink at 5e10 B/s effective, 10 us)
  const CostModel tp1 = make(one_stage());
  const CostModel pp2 = make(two_stages());
  // WHEN one sequence with 1000 context tokens decodes
  const StepTime a = tp1.decode_batch_time(1, 1000);
  const StepTime b = pp2.decode_batch_time(1, 1000);
  // THEN both stages run it one after the other: flops = 2e9 + 4e4 x 1001 -> 0.00408008 s;
  //      each stage reads 5e8 + 5e4 x 1001 = 5.5005e8 B -> 0.011001 s, twice = 0.022002 s, the same
  //      as the one rank reading 1e9 + 1e5 x 1001; plus one activation send of 1 x 1000 x 2 B:
  //      1e-5 + 2000 / 5e10 = 1.004e-5 s
  expect_rel(b.compute_seconds, 0.00408008);
  expect_rel(b.memory_seconds, 0.022002);
  expect_rel(a.memory_seconds, 0.022002);
  expect_rel(b.communication_seconds, 1.004e-5);
  expect_rel(b.total_seconds, 0.022002 + 1.004e-5);
  // AND the per-token latency is TP1's (within the send), not half of it
  EXPECT_NEAR(b.total_seconds / a.total_seconds, 1.0, 1e-3);
}

TEST(CostModelPipeline, AFullBatchMovesTwoMicroBatchesInOneMicroBatchsTime) {
  // GIVEN the same two replicas
  const CostModel tp1 = make(one_stage());
  const CostModel pp2 = make(two_stages());
  // WHEN PP2 steps 8 sequences (8000 context tokens) and TP1 4 of them (4000)
  const StepTime b = pp2.decode_batch_time(8, 8000);
  const StepTime a = tp1.decode_batch_time(4, 4000);
  // THEN PP2's step is the latency of its larger micro-batch of 4 through both stages:
  //      flops = 8e9 + 4e4 x 4004 -> 0.01632032 s; each stage reads 5e8 + 5e4 x 4004 = 7.002e8 B
  //      -> 0.014004 s, twice 0.028008 s (TP1's 4 sequences: 1e9 + 1e5 x 4004 -> 0.028008 s);
  //      plus a send of 4 x 1000 x 2 B: 1e-5 + 8000 / 5e10 = 1.016e-5 s
  expect_rel(b.compute_seconds, 0.01632032);
  expect_rel(b.memory_seconds, 0.028008);
  expect_rel(b.total_seconds, a.total_seconds + 1.016e-5);
  // AND at saturation (each micro-batch as large as TP1's batch) PP2 moves about twice the tokens
  // per second of TP1, which is the same stage pair running one micro-batch at a time
  EXPECT_NEAR((8 / b.total_seconds) / (4 / a.total_seconds), 2.0, 0.01);
  // AND an odd batch is as slow as its larger micro-batch: 3 sequences step like 2
  expect_rel(pp2.decode_batch_time(3, 3000).compute_seconds, tp1.decode_batch_time(2, 2000).compute_seconds);
}

TEST(CostModelPipeline, APromptIsNeverSplitOverMicroBatches) {
  // GIVEN TP1 PP2
  const CostModel pp2 = make(two_stages());
  const CostModel tp1 = make(one_stage());
  // WHEN one prompt of 100 tokens is prefilled, then two in one step
  const StepTime one = pp2.prefill_chunk_time(100, 0);
  StepBatch both;
  both.add_prefill_chunk(100, 0).add_prefill_chunk(100, 0);
  const StepTime two = pp2.step_time(both);
  // THEN one prompt takes the whole model's compute (0.400404 s, compute bound) plus a send of
  //      1e-5 + 100 x 1000 x 2 / 5e10 = 1.4e-5 s; two prompts go one per micro-batch: no longer
  expect_rel(one.compute_seconds, tp1.prefill_chunk_time(100, 0).compute_seconds);
  expect_rel(one.total_seconds, 0.400404 + 1.4e-5);
  expect_rel(two.total_seconds, one.total_seconds);
  // AND a long chunk beside a few decodes keeps its micro-batch at least one chunk large: the
  //     share is max(ceil(11 / 2) / 11, 1000 / 1010) of the step
  StepBatch mixed;
  mixed.add_prefill_chunk(1000, 0).add_decodes(10, 10 * 100);
  expect_rel(pp2.step_time(mixed).compute_seconds, tp1.step_time(mixed).compute_seconds * 1000.0 / 1010.0);
}

TEST(CostModelPipeline, StagesSumTheirKvAndSendOverTheScaleOutLinkBeyondTheDomain) {
  // GIVEN TP2 PP2 with KV per rank left to derive
  CostModelParams p = two_stages();
  p.tensor_parallel = 2;
  p.weight_bytes_per_rank = 2.5e8;
  // THEN each rank holds a quarter of a token's KV, so the replica's KV tokens are the sum over stages
  expect_rel(make(p).params().kv_bytes_per_token_per_rank, 2.5e4);
  // GIVEN TP4 PP4 on 8-accelerator nodes: 16 ranks span two, stages send over EFA (5e10 B/s at 0.5)
  CostModelParams q = one_stage();
  q.tensor_parallel = 4;
  q.pipeline_parallel = 4;
  q.weight_bytes_per_rank = 1e9 / 16;
  q.scale_out_bytes_per_second = 5e10;
  const CostModel wide = make(q);
  q.scale_up_domain = 16;  // the same replica inside one NVLink domain
  const CostModel narrow = make(q);
  // WHEN one sequence decodes
  // THEN 3 sends of 1000 x 2 B each: over EFA 1e-3 + 2000 / 2.5e10, over NVLink 1e-5 + 2000 / 5e10
  const double all_reduces = narrow.decode_batch_time(1, 1000).communication_seconds - 3 * (1e-5 + 2000 / 5e10);
  expect_rel(wide.decode_batch_time(1, 1000).communication_seconds, all_reduces + 3 * (1e-3 + 2000 / 2.5e10));
}

TEST(CostModelPipeline, OneStageIsBitForBitTheModelWithoutPipelining) {
  // GIVEN the defaults (pipelineParallel 1)
  CostModelParams p = one_stage();
  EXPECT_EQ(CostModelParams{}.pipeline_parallel, 1);
  const CostModel m = make(p);
  // WHEN a mixed step is priced
  StepBatch mixed;
  mixed.add_prefill_chunk(300, 50).add_prefill_chunk(20, 0).add_decodes(7, 7 * 900);
  const StepTime t = m.step_time(mixed);
  // THEN it is the roofline of the whole batch, nothing sent
  const double flops = 2e9 * 327 + 4e4 * (300.0 * 50 + 300.0 * 301 / 2 + 20.0 * 21 / 2 + 7 * 900 + 7);
  const double bytes = 1e9 + 1e5 * (50.0 + 7 * 900 + 327);
  expect_rel(t.compute_seconds, flops / 5e11);
  expect_rel(t.memory_seconds, bytes / 5e10);
  EXPECT_EQ(t.communication_seconds, 0);
}

TEST(CostModelPipeline, RefusesLayoutsItCannotModel) {
  struct Case {
    void (*mutate)(CostModelParams&);
    CostModelErrc code;
    const char* field;
  };
  const Case cases[] = {
      // more stages than layers
      {[](CostModelParams& p) { p.pipeline_parallel = 11; }, CostModelErrc::out_of_range, "parallel.pipelineParallel"},
      // no link between the stages
      {[](CostModelParams& p) { p.interconnect_bytes_per_second = 0; }, CostModelErrc::interconnect_required,
       "hardware.interconnectBytesPerSecond"},
      // stages beyond the NVLink domain without the scale-out bandwidth
      {[](CostModelParams& p) {
         p.tensor_parallel = 8;
         p.weight_bytes_per_rank = 1e9 / 16;
       },
       CostModelErrc::out_of_range, "hardware.scaleOutBytesPerSecond"},
      // stages of an expert-parallel group
      {[](CostModelParams& p) {
         p.experts = 8;
         p.experts_per_token = 2;
         p.expert_weight_bytes_per_rank = 4e8;
         p.tensor_parallel = 2;
         p.expert_parallel = 2;
       },
       CostModelErrc::out_of_range, "parallel.pipelineParallel"},
  };
  for (const Case& c : cases) {
    // GIVEN TP1 PP2 with one thing broken
    CostModelParams p = two_stages();
    c.mutate(p);
    // WHEN the model is created
    auto m = CostModel::create(p);
    // THEN it is refused naming the field, and the message says how to fix it
    ASSERT_FALSE(m.has_value()) << c.field;
    EXPECT_EQ(m.error().code, c.code) << c.field << ": " << m.error().message();
    EXPECT_EQ(m.error().field, c.field) << m.error().message();
    EXPECT_NE(m.error().message().find("; pass"), std::string::npos) << m.error().message();
  }
}

}  // namespace
}  // namespace disagg
