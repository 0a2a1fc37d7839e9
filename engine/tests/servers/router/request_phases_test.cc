// request_phases_test.cc — the phase split adds up to TTFT and E2E exactly, on both paths and for
// streamed and whole answers; the exposition carries every series; the pair table is bounded.
#include "request_phases.h"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <string>

namespace disagg::router {
namespace {

using std::chrono::milliseconds;

double total(const PhaseSplit& s) {
  return std::accumulate(s.seconds.begin(), s.seconds.end(), 0.0);
}
double at(const PhaseSplit& s, Phase p) {
  return s.seconds[static_cast<std::size_t>(p)];
}
bool has(const PhaseSplit& s, Phase p) {
  return s.observed[static_cast<std::size_t>(p)];
}
double secs(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

PhaseClock pd_stream() {
  PhaseClock c;
  c.arrived = Clock::time_point(milliseconds(1000));
  c.queued = 0.010;
  c.prefill_sent = c.arrived + milliseconds(12);
  c.prefill_done = c.arrived + milliseconds(212);
  c.main_sent = c.arrived + milliseconds(213);
  c.first_byte = c.arrived + milliseconds(262);
  c.end = c.arrived + milliseconds(1262);
  c.inter_token_seconds = 0.020;
  c.transferred = true;
  c.streamed = true;
  return c;
}

TEST(RequestPhases, PdStreamSplitsIntoSixPhasesThatAddUpToTtftAndE2e) {
  // GIVEN a streamed P/D request: queued 10 ms, prefill leg 200 ms, first byte 50 ms after it, 20 ms ITL
  const PhaseClock c = pd_stream();
  // WHEN split
  const PhaseSplit s = split_phases(c);
  // THEN each phase is what happened, and the first five add up to TTFT, all six to E2E
  EXPECT_EQ(s.path, RequestPath::pd);
  EXPECT_NEAR(at(s, Phase::queue), 0.010, 1e-9);
  EXPECT_NEAR(at(s, Phase::route), 0.002, 1e-6);
  EXPECT_NEAR(at(s, Phase::prefill), 0.200, 1e-9);
  EXPECT_NEAR(at(s, Phase::kv_transfer), 0.030, 1e-9);
  EXPECT_NEAR(at(s, Phase::first_token), 0.020, 1e-9);
  EXPECT_NEAR(at(s, Phase::decode), 1.000, 1e-9);
  EXPECT_NEAR(total(s) - at(s, Phase::decode), secs(c.arrived, c.first_byte), 1e-6);
  EXPECT_NEAR(total(s), secs(c.arrived, c.end), 1e-6);
}

TEST(RequestPhases, FirstTokenIsCappedAtTheGapAndKvTransferNeverNegative) {
  // GIVEN a stream whose first byte came sooner after the prefill than one inter-token interval
  PhaseClock c = pd_stream();
  c.inter_token_seconds = 0.5;
  // WHEN split THEN the gap is all first token, no transfer time, and the sum still holds
  const PhaseSplit s = split_phases(c);
  EXPECT_NEAR(at(s, Phase::first_token), 0.050, 1e-9);
  EXPECT_EQ(at(s, Phase::kv_transfer), 0.0);
  EXPECT_NEAR(total(s), secs(c.arrived, c.end), 1e-6);
}

TEST(RequestPhases, AggregatedStreamHasNoTransferPhases) {
  // GIVEN a streamed request served on one worker
  PhaseClock c = pd_stream();
  c.transferred = false;
  // WHEN split THEN route ends at the send, prefill at the first byte; no kv_transfer or first_token
  const PhaseSplit s = split_phases(c);
  EXPECT_EQ(s.path, RequestPath::aggregated);
  EXPECT_NEAR(at(s, Phase::route), 0.203, 1e-6);
  EXPECT_NEAR(at(s, Phase::prefill), 0.049, 1e-9);
  EXPECT_FALSE(has(s, Phase::kv_transfer));
  EXPECT_FALSE(has(s, Phase::first_token));
  EXPECT_NEAR(total(s), secs(c.arrived, c.end), 1e-6);
}

TEST(RequestPhases, WholeAnswersCountTheWorkersTimeAfterThePrefillLegAsDecode) {
  // GIVEN a non-streamed P/D request and a non-streamed aggregated one
  PhaseClock pd = pd_stream();
  pd.streamed = false;
  PhaseClock agg = pd;
  agg.transferred = false;
  // WHEN split THEN neither observes a transfer; P/D keeps its prefill leg; both add up to E2E
  const PhaseSplit a = split_phases(pd);
  const PhaseSplit b = split_phases(agg);
  EXPECT_FALSE(has(a, Phase::kv_transfer));
  EXPECT_NEAR(at(a, Phase::prefill), 0.200, 1e-9);
  EXPECT_NEAR(at(a, Phase::decode), 1.050, 1e-9);
  EXPECT_FALSE(has(b, Phase::prefill));
  EXPECT_NEAR(at(b, Phase::decode), 1.049, 1e-9);
  EXPECT_NEAR(total(a), secs(pd.arrived, pd.end), 1e-6);
  EXPECT_NEAR(total(b), secs(agg.arrived, agg.end), 1e-6);
}

TEST(RequestPhases, InstantsOutOfOrderGiveZeroPhasesNotNegativeOnes) {
  // GIVEN a clock whose prefill instants were never set (a caller's slip)
  PhaseClock c = pd_stream();
  c.prefill_sent = Clock::time_point{};
  c.prefill_done = Clock::time_point{};
  // WHEN split THEN every phase is >= 0 and they still add up to the request's time
  const PhaseSplit s = split_phases(c);
  for (double v : s.seconds) EXPECT_GE(v, 0.0);
  EXPECT_NEAR(total(s), secs(c.arrived, c.end), 1e-6);
}

TEST(RequestPhases, TransferredTokensAreTheFullBlocksTheDecodeEndpointLacks) {
  EXPECT_EQ(transferred_kv_tokens(100, 16, 0), 96);  // 6 full blocks; the partial one is recomputed
  EXPECT_EQ(transferred_kv_tokens(100, 16, 2), 64);
  EXPECT_EQ(transferred_kv_tokens(100, 16, 9), 0);
  EXPECT_EQ(transferred_kv_tokens(0, 16, 0), 0);
  EXPECT_EQ(transferred_kv_tokens(100, 0, 0), 0);
}

TEST(RequestPhases, ExpositionHasThePhasesPairsTransportAndSlo) {
  // GIVEN metrics with a transport, a KV size and an SLO, after one P/D stream
  RequestPhaseMetrics m(KvTransferInfo{"LIBFABRIC", 1000}, SloTargets{0.25, 0.010});
  m.observe(pd_stream(), "10.0.0.1:8000", "10.0.0.2:8000", 96);
  // WHEN written
  std::string out;
  m.write(out);
  // THEN each family is there with its labels and values
  EXPECT_NE(out.find("disagg_router_request_phase_seconds_count{path=\"pd\",phase=\"kv_transfer\"} 1\n"),
            std::string::npos);
  EXPECT_NE(out.find("disagg_router_request_phase_seconds_count{path=\"aggregated\",phase=\"queue\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(out.find("path=\"aggregated\",phase=\"kv_transfer\""), std::string::npos);
  EXPECT_NE(out.find("disagg_router_kv_transfer_seconds_count{prefill=\"10.0.0.1:8000\",decode=\"10.0.0.2:8000\"} 1\n"),
            std::string::npos);
  EXPECT_NE(
      out.find("disagg_router_kv_transfer_bytes_total{prefill=\"10.0.0.1:8000\",decode=\"10.0.0.2:8000\"} 96000\n"),
      std::string::npos);
  EXPECT_NE(out.find("disagg_router_kv_transport_info{backend=\"LIBFABRIC\",provider=\"efa\"} 1\n"), std::string::npos);
  // TTFT 262 ms > 250 ms: missed; ITL 20 ms > 10 ms: missed
  EXPECT_NE(out.find("disagg_router_slo_requests_total{objective=\"ttft\",result=\"missed\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("disagg_router_slo_requests_total{objective=\"tpot\",result=\"missed\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("disagg_router_slo_target_seconds{objective=\"ttft\"} 0.25\n"), std::string::npos);
}

TEST(RequestPhases, NothingConfiguredExportsNoTransportBytesOrSlo) {
  RequestPhaseMetrics m(KvTransferInfo{}, SloTargets{});
  m.observe(pd_stream(), "p:1", "d:1", 96);
  std::string out;
  m.write(out);
  EXPECT_EQ(out.find("kv_transport_info"), std::string::npos);
  EXPECT_EQ(out.find("kv_transfer_bytes_total"), std::string::npos);
  EXPECT_EQ(out.find("slo_requests_total"), std::string::npos);
  EXPECT_NE(out.find("disagg_router_kv_transfer_seconds_count{prefill=\"p:1\",decode=\"d:1\"} 1\n"), std::string::npos);
}

TEST(RequestPhases, PairsBeyondTheBoundAreCountedUnderOther) {
  // GIVEN more endpoint pairs than the table keeps
  RequestPhaseMetrics m(KvTransferInfo{"UCX", 1}, SloTargets{});
  for (std::size_t i = 0; i < RequestPhaseMetrics::kMaxPairs + 10; ++i) {
    m.observe(pd_stream(), "p:" + std::to_string(i), "d:1", 16);
  }
  // WHEN written THEN the first kMaxPairs have series, the other 10 one shared series
  std::string out;
  m.write(out);
  EXPECT_NE(out.find("disagg_router_kv_transfer_seconds_count{prefill=\"other\",decode=\"other\"} 10\n"),
            std::string::npos);
  EXPECT_EQ(out.find("prefill=\"p:" + std::to_string(RequestPhaseMetrics::kMaxPairs) + "\""), std::string::npos);
  EXPECT_NE(out.find("disagg_router_kv_transport_info{backend=\"UCX\",provider=\"tcp\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace disagg::router
