// Cost model: hand-computed cases, roofline properties, validation errors, config reading and the
// JSON report.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "disagg/cost_model.h"
#include "disagg/cost_model_config.h"
#include "disagg/cost_report.h"
#include "test_fixtures.h"

namespace disagg {
namespace {

// The round-numbers model (test_fixtures.h): every expected value below can be checked by hand.
CostModelParams simple_params() {
  return test::round_params();
}

CostModel make(const CostModelParams& p) {
  auto m = CostModel::create(p);
  EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().message());
  return *m;
}

void expect_rel(double actual, double expected) {
  EXPECT_NEAR(actual, expected, std::abs(expected) * 1e-12) << "expected " << expected;
}

TEST(CostModel, PrefillChunkIsComputeBoundByHand) {
  // GIVEN tp 1, 1e9 active parameters, 10 layers of width 1000, 1e12 FLOP/s at 0.5
  const CostModel m = make(simple_params());
  // WHEN 100 prompt tokens are prefilled from an empty cache
  const StepTime t = m.prefill_chunk_time(100, 0);
  // THEN flops = 2*1e9*100 + 4*10*1000*(100*101/2) = 2.00202e11 -> 0.400404 s of compute;
  //      bytes = 1e9 + 1e5*100 = 1.01e9 at 5e10 B/s -> 0.0202 s; compute bound
  expect_rel(t.compute_seconds, 0.400404);
  expect_rel(t.memory_seconds, 0.0202);
  EXPECT_EQ(t.communication_seconds, 0);
  expect_rel(t.total_seconds, 0.400404);
}

TEST(CostModel, AttentionRunsAtItsOwnRateByHand) {
  // GIVEN the prefill above with attention at half the peak (BF16 attention beside FP8 weights)
  CostModelParams p = simple_params();
  p.attention_flops_per_second = 0.5e12;
  const CostModel m = make(p);
  // WHEN 100 prompt tokens are prefilled
  const StepTime t = m.prefill_chunk_time(100, 0);
  // THEN the weights' 2e11 FLOPs take 0.4 s at 1e12 x 0.5 and attention's 2.02e8 take 0.000808 s at
  //      0.5e12 x 0.5, twice its time at the peak rate (0.000404 s, the test above)
  expect_rel(t.compute_seconds, 0.4 + 0.000808);
  // AND 0 means the peak rate
  expect_rel(make(simple_params()).prefill_chunk_time(100, 0).compute_seconds, 0.400404);
}

TEST(CostModel, PrefillAfterCachedPrefixReadsItsKv) {
  // GIVEN the simple model
  const CostModel m = make(simple_params());
  // WHEN 10 tokens are prefilled after 90 cached ones
  const StepTime t = m.prefill_chunk_time(10, 90);
  // THEN pairs = 10*90 + 10*11/2 = 955: flops = 2e10 + 4e4*955 = 2.00382e10 -> 0.0400764 s;
  //      bytes = 1e9 + 1e5*(90 + 10) = 1.01e9 -> 0.0202 s
  expect_rel(t.compute_seconds, 0.0400764);
  expect_rel(t.memory_seconds, 0.0202);
  expect_rel(t.total_seconds, 0.0400764);
}

TEST(CostModel, DecodeBatchIsMemoryBoundByHand) {
  // GIVEN the simple model
  const CostModel m = make(simple_params());
  // WHEN 4 sequences holding 1000 tokens in total decode one token each
  const StepTime t = m.decode_batch_time(4, 1000);
  // THEN flops = 2e9*4 + 4e4*(1000 + 4) = 8.04016e9 -> 0.01608032 s;
  //      bytes = 1e9 + 1e5*(1000 + 4) = 1.1004e9 -> 0.022008 s; memory bound
  expect_rel(t.compute_seconds, 0.01608032);
  expect_rel(t.memory_seconds, 0.022008);
  expect_rel(t.total_seconds, 0.022008);
}

TEST(CostModel, FixedCostsArePerStepAndPerLayerButNotPerRequest) {
  // GIVEN the simple model (10 layers) with 1 ms per step, 50 us per layer and 8 ms per request
  CostModelParams p = simple_params();
  p.step_overhead_seconds = 1e-3;
  p.layer_overhead_seconds = 5e-5;
  p.request_overhead_seconds = 8e-3;
  const CostModel m = make(p);
  // WHEN the decode step above is priced
  const StepTime t = m.decode_batch_time(4, 1000);
  // THEN it costs the roofline plus 1 ms + 10 x 50 us; the API server's time is no part of a step
  expect_rel(t.overhead_seconds, 1.5e-3);
  expect_rel(t.total_seconds, 0.022008 + 1.5e-3);
}

TEST(CostModel, SequenceOverheadIsChargedPerPrefillChunkAndDecodeSequence) {
  // GIVEN the simple model with 1 ms per step and 0.1 ms per sequence (vLLM V0's CPU time)
  CostModelParams p = simple_params();
  p.step_overhead_seconds = 1e-3;
  p.sequence_overhead_seconds = 1e-4;
  const CostModel m = make(p);
  const CostModel without = make(simple_params());
  // WHEN 4 sequences decode, one prompt is prefilled, and 2 chunks run beside 3 decodes
  const StepTime decode = m.decode_batch_time(4, 1000);
  const StepTime prefill = m.prefill_chunk_time(100, 0);
  StepBatch mixed;
  mixed.add_prefill_chunk(64, 0).add_prefill_chunk(32, 100).add_decodes(3, 3 * 500);
  // THEN each step costs 1 ms plus 0.1 ms per sequence in it, on top of the same roofline
  expect_rel(decode.overhead_seconds, 1e-3 + 4 * 1e-4);
  expect_rel(decode.total_seconds, without.decode_batch_time(4, 1000).total_seconds + 1e-3 + 4e-4);
  expect_rel(prefill.overhead_seconds, 1e-3 + 1e-4);
  expect_rel(prefill.total_seconds, without.prefill_chunk_time(100, 0).total_seconds + 1e-3 + 1e-4);
  EXPECT_EQ(mixed.sequences(), 5);
  expect_rel(m.step_time(mixed).overhead_seconds, 1e-3 + 5 * 1e-4);
  expect_rel(m.step_time(mixed).total_seconds, without.step_time(mixed).total_seconds + 1e-3 + 5e-4);
  // AND a chunk of no tokens is no sequence of the step
  StepBatch empty_chunk;
  empty_chunk.add_prefill_chunk(0, 10).add_decodes(2, 100);
  EXPECT_EQ(empty_chunk.sequences(), 2);
  // AND at the default 0 nothing changes (bit for bit)
  EXPECT_EQ(make(simple_params()).decode_batch_time(4, 1000).total_seconds,
            without.decode_batch_time(4, 1000).total_seconds);
  EXPECT_EQ(CostModelParams{}.sequence_overhead_seconds, 0);
}

TEST(CostModel, MoeStepsReadTheExpertsTheirTokensSelect) {
  // GIVEN the simple model made an MoE: 0.8 of its 1e9 weight bytes in 8 experts, 2 per token
  CostModelParams p = simple_params();
  p.expert_weight_bytes_per_rank = 0.8e9;
  p.experts = 8;
  p.experts_per_token = 2;
  const CostModel m = make(p);
  // WHEN one token decodes THEN it reads the dense 0.2e9 and 2 of 8 experts (1 - 0.75^1 = 0.25)
  const double kv1 = 1e5 * (1000 + 1);
  expect_rel(m.decode_batch_time(1, 1000).memory_seconds, (0.2e9 + 0.8e9 * 0.25 + kv1) / 5e10);
  // AND 40 tokens read all but 0.75^40 of them; a dense model of the same bytes reads all
  const double kv40 = 1e5 * (40000 + 40);
  expect_rel(m.decode_batch_time(40, 40000).memory_seconds, (1e9 - 0.8e9 * std::pow(0.75, 40) + kv40) / 5e10);
  EXPECT_LT(m.decode_batch_time(1, 1000).total_seconds, make(simple_params()).decode_batch_time(1, 1000).total_seconds);
  // AND inconsistent expert fields are refused by name
  p.experts_per_token = 9;
  auto bad = CostModel::create(p);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "model.expertsPerToken");
  EXPECT_EQ(bad.error().code, CostModelErrc::out_of_range);
  p.experts_per_token = 2;
  p.experts = 7.5;
  bad = CostModel::create(p);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "model.experts");
  EXPECT_EQ(bad.error().code, CostModelErrc::not_a_whole_number);
  EXPECT_NE(bad.error().message().find("must be a whole number >= 0"), std::string::npos) << bad.error().message();
}

// A wide expert-parallel MoE with round numbers: 64 experts (2 per token) in 10 MoE layers of width
// 1000, half of the 1e9 active parameters routed, one attention rank per accelerator (dp = ep).
CostModelParams expert_parallel_params(int ep) {
  CostModelParams p = simple_params();
  p.expert_weight_bytes_per_rank = 0.5e9;
  p.experts = 64;
  p.experts_per_token = 2;
  p.moe_layers = 10;
  p.routed_active_parameters = 0.5e9;
  p.data_parallel = ep;
  p.expert_parallel = ep;
  p.interconnect_bytes_per_second = 1e11;  // 7e10 at efficiency.interconnect 0.7
  p.scale_out_bytes_per_second = 1e10;     // 5e9 at efficiency.allToAll 0.5
  p.fabric_latency_seconds = 1e-5;
  p.interconnect_latency_seconds = 2e-6;
  p.expert_imbalance = 1;
  return p;
}

TEST(CostModel, ExpertParallelAllToAllByHand) {
  // GIVEN EP 16 over two scale-up domains of 8, balanced experts
  const CostModel m = make(expert_parallel_params(16));
  // WHEN 160 sequences decode (10 per rank)
  const StepTime t = m.decode_batch_time(160, 160 * 100);
  // THEN each rank sends 10 x 2 x 1000 elements per direction: dispatch 2e4 B (FP8), combine 4e4 B
  //      (BF16); half of the destinations are off the node (over 5e9 B/s), 7/16 on it (over 7e10 B/s)
  //      dispatch = max(1e4 / 5e9, 8750 / 7e10) + 1e-5 = 1.2e-5; combine = 4e-6 + 1e-5 = 1.4e-5
  //      all-to-all = 10 MoE layers x 2.6e-5 = 2.6e-4 s, not overlapped
  expect_rel(t.all_to_all_seconds, 2.6e-4);
  expect_rel(t.communication_seconds, 2.6e-4);
  // AND compute splits the dense half over the 16 attention ranks and the routed half over the 16
  //     expert ranks: 2 x 0.5e9 x 10 + 2 x 0.5e9 x 160 / 16 + 4 x 10 x 1000 x (160 x 101) / 16 FLOPs
  expect_rel(t.compute_seconds, (1e10 + 1e10 + 4.0 * 10 * 1000 * 160 * 101 / 16) / 5e11);
  // AND each rank reads the KV of its own 10 sequences only
  const double weights = 1e9 - 0.5e9 * std::pow(1.0 - 2.0 / 64, 160);
  expect_rel(t.memory_seconds, (weights + 1e5 * (160 * 100 + 160) / 16) / 5e10);
  expect_rel(t.total_seconds, std::max(t.compute_seconds, t.memory_seconds) + 2.6e-4);
}

TEST(CostModel, AllToAllIsZeroWithoutExpertParallelism) {
  // GIVEN a dense model, and the same MoE with its experts split by tensor parallelism (EP 1)
  CostModelParams moe = expert_parallel_params(16);
  moe.data_parallel = 1;
  moe.expert_parallel = 1;
  for (const CostModelParams& p : {simple_params(), moe}) {
    // WHEN a batch decodes THEN no all-to-all is charged and no imbalance applies
    const StepTime t = make(p).decode_batch_time(160, 16000);
    EXPECT_EQ(t.all_to_all_seconds, 0);
    EXPECT_EQ(t.communication_seconds, 0);
    expect_rel(t.compute_seconds, (2e9 * 160 + 4.0 * 10 * 1000 * 160 * 101) / 5e11);
  }
}

TEST(CostModel, AllToAllGrowsAsTheGroupSpansNodes) {
  // GIVEN the same tokens per rank (32) at EP 8 (one node), 16 and 32 (2 and 4 nodes)
  const auto a2a = [](int ep) {
    return make(expert_parallel_params(ep)).decode_batch_time(32 * ep, 32 * ep * 100).all_to_all_seconds;
  };
  // THEN inside one node only NVLink carries it; across nodes the EFA share grows with the nodes
  EXPECT_GT(a2a(8), 0);
  EXPECT_GT(a2a(16), 5 * a2a(8));
  EXPECT_GT(a2a(32), a2a(16));
  // AND inside one node it is the NVLink share plus the small in-node latency, by hand:
  //     32 x 2 x 1000 x (1 + 2) B x 7/8 / 7e10 + 2 x 2e-6, times 10 layers
  expect_rel(a2a(8), 10 * (32.0 * 2 * 1000 * 3 * 7 / 8 / 7e10 + 2 * 2e-6));
}

TEST(CostModel, MoreScaleOutBandwidthShortensTheAllToAll) {
  CostModelParams slow = expert_parallel_params(32);
  CostModelParams fast = slow;
  fast.scale_out_bytes_per_second = 4 * slow.scale_out_bytes_per_second;
  const double t_slow = make(slow).decode_batch_time(2048, 2048 * 100).all_to_all_seconds;
  const double t_fast = make(fast).decode_batch_time(2048, 2048 * 100).all_to_all_seconds;
  EXPECT_LT(t_fast, t_slow);
  // The bandwidth part shrinks 4x; the per-direction latency stays: 2 directions x 10 layers x 1e-5
  expect_rel(t_fast - 2e-4, (t_slow - 2e-4) / 4);
}

TEST(CostModel, ExpertImbalanceChargesTheBusiestRank) {
  // GIVEN the EP 16 model balanced and with the busiest rank at 1.5x the mean
  CostModelParams balanced = expert_parallel_params(16);
  balanced.routed_active_parameters = 1e9;  // all active parameters routed, so compute is expert work
  CostModelParams skewed = balanced;
  skewed.expert_imbalance = 1.5;
  const StepTime b = make(balanced).prefill_chunk_time(1600, 0);
  const StepTime s = make(skewed).prefill_chunk_time(1600, 0);
  // THEN the expert FLOPs and the all-to-all bytes grow 1.5x; latency does not
  const double attention = 4.0 * 10 * 1000 * (1600.0 * 1601 / 2) / 16 / 5e11;
  expect_rel(s.compute_seconds - attention, 1.5 * (b.compute_seconds - attention));
  const double latency = 10 * 2 * 1e-5;
  expect_rel(s.all_to_all_seconds - latency, 1.5 * (b.all_to_all_seconds - latency));
  // AND the default is 1.4, and 1.1 with EPLB's redundant experts, which makes the step shorter
  CostModelParams dflt = expert_parallel_params(16);
  dflt.expert_imbalance = 0;
  const CostModel without = make(dflt);
  EXPECT_EQ(without.params().expert_imbalance, kDefaultExpertImbalance);
  dflt.redundant_experts = 16;  // 80 physical experts, 5 per rank
  const CostModel eplb = make(dflt);
  EXPECT_EQ(eplb.params().expert_imbalance, kDefaultExpertImbalanceEplb);
  EXPECT_LT(eplb.prefill_chunk_time(1600, 0).total_seconds, without.prefill_chunk_time(1600, 0).total_seconds);
}

TEST(CostModel, OverlapHidesTheAllToAllUpToTheComputeTime) {
  CostModelParams p = expert_parallel_params(16);
  const StepTime plain = make(p).decode_batch_time(160, 16000);
  p.all_to_all_overlap = 0.5;
  const StepTime half = make(p).decode_batch_time(160, 16000);
  expect_rel(half.all_to_all_seconds, 0.5 * plain.all_to_all_seconds);
  // Fully overlapped, it cannot hide more than the step's max(compute, memory)
  p.all_to_all_overlap = 1;
  p.scale_out_bytes_per_second = 1e6;  // an all-to-all far longer than the step's math
  const StepTime full = make(p).decode_batch_time(160, 16000);
  const double roof = std::max(full.compute_seconds, full.memory_seconds);
  CostModelParams none = p;
  none.all_to_all_overlap = 0;
  expect_rel(full.all_to_all_seconds, make(none).decode_batch_time(160, 16000).all_to_all_seconds - roof);
}

TEST(CostModel, RefusesInconsistentExpertParallelism) {
  struct Case {
    void (*mutate)(CostModelParams&);
    CostModelErrc code;
    const char* field;
    const char* says;
  };
  const Case cases[] = {
      {[](CostModelParams& p) {
         p.expert_parallel = 12;
         p.data_parallel = 12;
       },
       CostModelErrc::out_of_range, "parallel.expertParallel", "whole number of experts"},
      {[](CostModelParams& p) { p.expert_parallel = 8; }, CostModelErrc::out_of_range, "parallel.expertParallel",
       "tensorParallel x dataParallel (16)"},
      {[](CostModelParams& p) { p.expert_parallel = 1; }, CostModelErrc::out_of_range, "parallel.dataParallel",
       "only with expert parallelism"},
      {[](CostModelParams& p) { p.scale_out_bytes_per_second = 0; }, CostModelErrc::out_of_range,
       "hardware.scaleOutBytesPerSecond", "spans scale-up domains of 8"},
      {[](CostModelParams& p) { p.interconnect_bytes_per_second = 0; }, CostModelErrc::interconnect_required,
       "hardware.interconnectBytesPerSecond", "inside a node"},
      {[](CostModelParams& p) {
         p.experts = 0;
         p.experts_per_token = 0;
         p.expert_weight_bytes_per_rank = 0;
       },
       CostModelErrc::out_of_range, "parallel.expertParallel", "dense model"},
      {[](CostModelParams& p) {
         p.expert_parallel = 1;
         p.data_parallel = 1;
         p.redundant_experts = 4;
       },
       CostModelErrc::out_of_range, "parallel.redundantExperts", "expertParallel > 1"},
      {[](CostModelParams& p) { p.expert_imbalance = 0.5; }, CostModelErrc::out_of_range, "efficiency.expertImbalance",
       ">= 1"},
      {[](CostModelParams& p) { p.all_to_all_overlap = 1.5; }, CostModelErrc::out_of_range,
       "efficiency.allToAllOverlap", "between 0"},
      {[](CostModelParams& p) { p.moe_layers = 11; }, CostModelErrc::out_of_range, "model.moeLayers", "at most"},
      {[](CostModelParams& p) { p.routed_active_parameters = 2e9; }, CostModelErrc::out_of_range,
       "model.routedActiveParameters", "not more"},
      {[](CostModelParams& p) { p.all_to_all_efficiency = 0; }, CostModelErrc::not_a_fraction, "efficiency.allToAll",
       "scale-out"},
      {[](CostModelParams& p) { p.scale_up_domain = 0; }, CostModelErrc::not_an_integer, "hardware.scaleUpDomain",
       "NVL72"},
  };
  for (const Case& c : cases) {
    CostModelParams p = expert_parallel_params(16);
    c.mutate(p);
    auto m = CostModel::create(p);
    ASSERT_FALSE(m.has_value()) << c.field;
    EXPECT_EQ(m.error().code, c.code) << c.field << ": " << m.error().message();
    EXPECT_EQ(m.error().field, c.field) << m.error().message();
    const std::string msg = m.error().message();
    EXPECT_NE(msg.find("; pass"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
  }
  // AND redundant experts can make an EP size valid: 64 + 8 = 72 physical experts, 6 per rank at EP 12
  CostModelParams p = expert_parallel_params(12);
  p.redundant_experts = 8;
  EXPECT_TRUE(CostModel::create(p).has_value());
}

TEST(CostModel, TensorParallelSplitsWorkAndAddsAllReducesByHand) {
  // GIVEN tp 2 with half the weights per rank and a 1e11 B/s link at 0.5 with 10 us latency
  CostModelParams p = simple_params();
  p.tensor_parallel = 2;
  p.weight_bytes_per_rank = 5e8;
  p.interconnect_bytes_per_second = 1e11;
  p.interconnect_efficiency = 0.5;
  p.interconnect_latency_seconds = 1e-5;
  p.step_overhead_seconds = 2e-3;
  const CostModel m = make(p);
  // WHEN 100 prompt tokens are prefilled
  const StepTime t = m.prefill_chunk_time(100, 0);
  // THEN compute halves: 0.200202 s; KV per rank defaults to 1e5/2: bytes = 5e8 + 5e4*100 = 5.05e8
  //      -> 0.0101 s; each all-reduce moves 2*(1/2)*100*1000*2 = 2e5 B at 5e10 B/s = 4e-6 s + 1e-5 s,
  //      times 2 per layer * 10 layers = 2.8e-4 s; plus 2e-3 s of overhead
  expect_rel(t.compute_seconds, 0.200202);
  expect_rel(t.memory_seconds, 0.0101);
  expect_rel(t.communication_seconds, 2.8e-4);
  expect_rel(t.overhead_seconds, 2e-3);
  expect_rel(t.total_seconds, 0.200202 + 2.8e-4 + 2e-3);
}

TEST(CostModel, ExplicitKvPerRankAndAttentionWidthAreUsed) {
  // GIVEN replicated KV heads (1e5 per rank at tp 2) and an attention width of 2000
  CostModelParams p = simple_params();
  p.tensor_parallel = 2;
  p.interconnect_bytes_per_second = 1e11;
  p.kv_bytes_per_token_per_rank = 1e5;
  p.attention_width = 2000;
  const CostModel m = make(p);
  // WHEN 4 sequences with 1000 context tokens decode
  const StepTime t = m.decode_batch_time(4, 1000);
  // THEN flops = (8e9 + 4*10*2000*1004) / 2 = (8e9 + 8.032e7) / 2 = 4.04016e9 -> 0.00808032 s;
  //      bytes = 1e9 + 1e5*1004 = 1.1004e9 -> 0.022008 s
  expect_rel(t.compute_seconds, 0.00808032);
  expect_rel(t.memory_seconds, 0.022008);
}

TEST(CostModel, KvTransferIsLatencyPlusBytesOverBandwidth) {
  // GIVEN a 1e10 B/s fabric at 0.5 with 1 ms latency and 1e5 KV bytes per token
  const CostModel m = make(simple_params());
  // WHEN the KV of 1000 tokens moves
  // THEN 1e8 bytes take 1e-3 + 1e8 / 5e9 = 0.021 s; nothing to move takes nothing
  expect_rel(m.kv_transfer_bytes(1000), 1e8);
  expect_rel(m.kv_transfer_seconds(1000), 0.021);
  EXPECT_EQ(m.kv_transfer_seconds(0), 0);
}

TEST(CostModel, MixedStepReadsWeightsOnce) {
  // GIVEN the simple model and a step with a 64-token chunk and 8 decodes
  const CostModel m = make(simple_params());
  StepBatch mixed;
  mixed.add_prefill_chunk(64, 0).add_decodes(8, 8 * 500);
  // WHEN it is timed against the two halves separately
  const StepTime both = m.step_time(mixed);
  const StepTime prefill = m.prefill_chunk_time(64, 0);
  const StepTime decode = m.decode_batch_time(8, 8 * 500);
  // THEN compute adds up, memory shares the weight read, and the total lies between max and sum
  expect_rel(both.compute_seconds, prefill.compute_seconds + decode.compute_seconds);
  expect_rel(both.memory_seconds, prefill.memory_seconds + decode.memory_seconds - 1e9 / (1e11 * 0.5));
  EXPECT_GE(both.total_seconds, std::max(prefill.total_seconds, decode.total_seconds));
  EXPECT_LE(both.total_seconds, prefill.total_seconds + decode.total_seconds);
}

TEST(CostModel, EmptyStepTakesNoTime) {
  CostModelParams p = simple_params();
  p.step_overhead_seconds = 1;
  EXPECT_EQ(make(p).step_time(StepBatch{}).total_seconds, 0);
}

TEST(CostModel, MoreWorkNeverTakesLessTime) {
  // GIVEN a tp-4 model with overhead
  CostModelParams p = simple_params();
  p.tensor_parallel = 4;
  p.interconnect_bytes_per_second = 4.5e11;
  p.step_overhead_seconds = 1e-3;
  const CostModel m = make(p);
  // WHEN tokens, context and batch grow THEN step time never falls
  double last = 0;
  for (std::int64_t n = 1; n <= 1 << 16; n *= 2) {
    const double t = m.prefill_chunk_time(n, 0).total_seconds;
    EXPECT_GE(t, last) << n;
    last = t;
  }
  last = 0;
  for (std::int64_t b = 1; b <= 1024; b *= 2) {
    const double t = m.decode_batch_time(b, b * 2048).total_seconds;
    EXPECT_GE(t, last) << b;
    last = t;
  }
  EXPECT_GE(m.prefill_chunk_time(512, 4096).total_seconds, m.prefill_chunk_time(512, 0).total_seconds);
}

TEST(CostModel, RooflineSwitchesFromMemoryToComputeAsBatchGrows) {
  const CostModel m = make(simple_params());
  const StepTime small = m.decode_batch_time(1, 100);
  const StepTime large = m.decode_batch_time(4096, 4096);
  EXPECT_GT(small.memory_seconds, small.compute_seconds);
  EXPECT_GT(large.compute_seconds, large.memory_seconds);
}

struct BadField {
  void (*mutate)(CostModelParams&);
  CostModelErrc code;
  const char* field;
};

TEST(CostModel, RefusesEachBadFieldByName) {
  const BadField cases[] = {
      {[](CostModelParams& p) { p.weight_bytes_per_rank = 0; }, CostModelErrc::not_positive,
       "model.weightBytesPerRank"},
      {[](CostModelParams& p) { p.kv_bytes_per_token = -1; }, CostModelErrc::not_positive, "model.kvBytesPerToken"},
      {[](CostModelParams& p) { p.kv_bytes_per_token_per_rank = -1; }, CostModelErrc::negative,
       "model.kvBytesPerTokenPerRank"},
      {[](CostModelParams& p) { p.layers = 2.5; }, CostModelErrc::not_an_integer, "model.layers"},
      {[](CostModelParams& p) { p.peak_flops_per_second = std::nan(""); }, CostModelErrc::not_positive,
       "hardware.peakFlopsPerSecond"},
      {[](CostModelParams& p) { p.hbm_bytes_per_second = std::numeric_limits<double>::infinity(); },
       CostModelErrc::not_positive, "hardware.hbmBytesPerSecond"},
      {[](CostModelParams& p) { p.fabric_latency_seconds = -1e-6; }, CostModelErrc::negative,
       "hardware.fabricLatencySeconds"},
      {[](CostModelParams& p) { p.tensor_parallel = 0; }, CostModelErrc::not_an_integer, "parallel.tensorParallel"},
      {[](CostModelParams& p) { p.compute_efficiency = 1.5; }, CostModelErrc::not_a_fraction, "efficiency.compute"},
      {[](CostModelParams& p) { p.memory_efficiency = 0; }, CostModelErrc::not_a_fraction, "efficiency.memory"},
      {[](CostModelParams& p) { p.tensor_parallel = 8; }, CostModelErrc::interconnect_required,
       "hardware.interconnectBytesPerSecond"},
  };
  for (const BadField& c : cases) {
    // GIVEN valid parameters with one field broken
    CostModelParams p = simple_params();
    c.mutate(p);
    // WHEN the model is created
    auto m = CostModel::create(p);
    // THEN it is refused with the code and the field's JSON path, and the message says how to fix
    ASSERT_FALSE(m.has_value()) << c.field;
    EXPECT_EQ(m.error().code, c.code) << c.field << ": " << to_string(m.error().code);
    EXPECT_EQ(m.error().field, c.field);
    const std::string msg = m.error().message();
    EXPECT_NE(msg.find(std::string("'") + c.field + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("; pass"), std::string::npos) << msg;
  }
}

TEST(CostModel, MessageNamesFieldValueAndFix) {
  CostModelParams p = simple_params();
  p.compute_efficiency = 1.5;
  auto m = CostModel::create(p);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message(),
            "'efficiency.compute' (1.5) must be in (0, 1]; pass the fraction of peak FLOP/s a step "
            "reaches, e.g. 0.5");
}

TEST(CostModelConfig, TableDefaultsMatchParamInitializers) {
  const CostModelParams defaults;
  for (const CostModelField& f : cost_model_fields()) {
    if (f.required) continue;
    EXPECT_EQ(f.get(defaults), f.default_value) << f.section << "." << f.key;
  }
}

TEST(CostModelConfig, EveryFieldRoundTripsThroughItsAccessors) {
  for (const CostModelField& f : cost_model_fields()) {
    CostModelParams p;
    f.set(p, 3);
    EXPECT_EQ(f.get(p), 3) << f.section << "." << f.key;
  }
}

// A ConfigSource over a flat map of "section.key" -> number, with sections implied.
class MapSource final : public ConfigSource {
 public:
  std::map<std::string, double> numbers;
  std::map<std::string, Lookup> overrides;  // forced lookups by path

  Lookup section(std::string_view s) const override {
    if (auto it = overrides.find(std::string(s)); it != overrides.end()) return it->second;
    return Lookup::found;
  }
  Lookup number(std::string_view s, std::string_view k, double* out) const override {
    const std::string path = std::string(s) + "." + std::string(k);
    if (auto it = overrides.find(path); it != overrides.end()) return it->second;
    auto it = numbers.find(path);
    if (it == numbers.end()) return Lookup::missing;
    *out = it->second;
    return Lookup::found;
  }
};

MapSource required_only() {
  MapSource s;
  s.numbers = {{"model.weightBytesPerRank", 1e9},    {"model.kvBytesPerToken", 1e5},
               {"model.activeParameters", 1e9},      {"model.layers", 10},
               {"model.hiddenSize", 1000},           {"hardware.peakFlopsPerSecond", 1e12},
               {"hardware.hbmBytesPerSecond", 1e11}, {"hardware.fabricBytesPerSecond", 1e10}};
  return s;
}

TEST(CostModelConfig, AbsentOptionalFieldsTakeDefaults) {
  // GIVEN only the required fields
  auto m = read_cost_model(required_only());
  // THEN the model builds with the documented defaults
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->params().tensor_parallel, 1);
  EXPECT_EQ(m->params().compute_efficiency, 0.5);
  EXPECT_EQ(m->params().activation_bytes, 2);
  EXPECT_EQ(m->params().attention_width, 1000);  // derived from hiddenSize
}

TEST(CostModelConfig, EachRequiredFieldIsReportedWhenMissing) {
  for (const CostModelField& f : cost_model_fields()) {
    if (!f.required) continue;
    MapSource s = required_only();
    const std::string path = std::string(f.section) + "." + std::string(f.key);
    ASSERT_EQ(s.numbers.erase(path), 1u) << path;
    auto m = read_cost_model(s);
    ASSERT_FALSE(m) << path;
    EXPECT_EQ(m.error().code, CostModelErrc::missing_field);
    EXPECT_EQ(m.error().field, path);
    EXPECT_NE(m.error().message().find("is required"), std::string::npos);
  }
}

TEST(CostModelConfig, WrongTypesAreReported) {
  MapSource s = required_only();
  s.overrides["hardware.hbmBytesPerSecond"] = Lookup::wrong_type;
  auto m = read_cost_model(s);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, CostModelErrc::wrong_type);
  EXPECT_EQ(m.error().field, "hardware.hbmBytesPerSecond");

  MapSource t = required_only();
  t.overrides["efficiency"] = Lookup::wrong_type;
  auto n = read_cost_model(t);
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().field, "efficiency");
}

TEST(CostModelConfig, FractionalTensorParallelIsRefusedBeforeNarrowing) {
  // GIVEN tensorParallel 2.5 (an int field would silently hold 2)
  MapSource s = required_only();
  s.numbers["parallel.tensorParallel"] = 2.5;
  s.numbers["hardware.interconnectBytesPerSecond"] = 1e11;
  auto m = read_cost_model(s);
  // THEN it is refused with the value received
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, CostModelErrc::not_an_integer);
  EXPECT_EQ(m.error().value, 2.5);
}

TEST(CostReport, JsonHoldsTheExactStepTimes) {
  // GIVEN a tp-2 model and custom probes
  CostModelParams p = simple_params();
  p.tensor_parallel = 2;
  p.interconnect_bytes_per_second = 1e11;
  const CostModel m = make(p);
  CostProbes probes;
  probes.prefill_tokens = {100, 1000};
  probes.decode_batches = {1, 16};
  probes.context_tokens_per_sequence = 500;
  probes.mixed_chunk_tokens = 64;
  probes.transfer_tokens = {1000};
  ASSERT_TRUE(validate(probes));
  // WHEN the report is written as JSON and parsed back
  const auto doc = nlohmann::json::parse(to_json(build_cost_report(m, probes)));
  // THEN every number equals the model's own result bit for bit
  EXPECT_EQ(doc["tensorParallel"], 2);
  ASSERT_EQ(doc["prefill"].size(), 2u);
  EXPECT_EQ(doc["prefill"][1]["tokens"], 1000);
  EXPECT_EQ(doc["prefill"][1]["totalSeconds"].get<double>(), m.prefill_chunk_time(1000, 0).total_seconds);
  EXPECT_EQ(doc["decode"][1]["sequences"], 16);
  EXPECT_EQ(doc["decode"][1]["contextTokensPerSequence"], 500);
  EXPECT_EQ(doc["decode"][1]["memorySeconds"].get<double>(), m.decode_batch_time(16, 16 * 500).memory_seconds);
  StepBatch mixed;
  mixed.add_prefill_chunk(64, 0).add_decodes(16, 16 * 500);
  EXPECT_EQ(doc["mixed"][1]["communicationSeconds"].get<double>(), m.step_time(mixed).communication_seconds);
  EXPECT_EQ(doc["mixed"][1]["allToAllSeconds"].get<double>(), 0);
  EXPECT_EQ(doc["kvTransfer"][0]["bytes"].get<double>(), 1e8);
  EXPECT_EQ(doc["kvTransfer"][0]["seconds"].get<double>(), m.kv_transfer_seconds(1000));
}

TEST(CostReport, ProbesOutsideTheLimitsAreRefused) {
  CostProbes empty;
  empty.decode_batches.clear();
  auto e = validate(empty);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().field, "probes.decodeBatches");

  CostProbes zero;
  zero.prefill_tokens = {128, 0};
  auto z = validate(zero);
  ASSERT_FALSE(z);
  EXPECT_EQ(z.error().code, CostModelErrc::not_positive);
  EXPECT_EQ(z.error().field, "probes.prefillTokens");

  CostProbes huge;
  huge.context_tokens_per_sequence = CostProbes::kMaxProbeValue + 1;
  EXPECT_FALSE(validate(huge));
}

}  // namespace
}  // namespace disagg
