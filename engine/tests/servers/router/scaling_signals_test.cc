// Scaling signals (issue 24): the autoscaling block of the router configuration and its refusals,
// the per-pool pressure as the contract defines it, the JSON and Prometheus forms, the draining
// state of an endpoint (no strike, no routing, cleared by a later passing check), and drain-wait.
#include <gtest/gtest.h>

#include <cmath>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "drain_wait.h"
#include "endpoint_health.h"
#include "router_config.h"
#include "router_metrics.h"
#include "disagg/autoscaler.h"
#include "disagg/pool_pressure.h"
#include "../../core/test_fixtures.h"
#include "scaling_signals.h"

namespace disagg::router {
namespace {

using json = nlohmann::json;

// ---- configuration -------------------------------------------------------------------------------

TEST(AutoscalingConfig, AbsentKeepsTheDefaultsAndHoldsNothing) {
  RouterConfig c;
  ASSERT_TRUE(apply_config_json(json::parse(R"({"router": {"listenPort": 8000}})"), c));
  EXPECT_FALSE(c.autoscaling.configured);
  EXPECT_DOUBLE_EQ(c.autoscaling.ttft_slo_seconds, 2.0);
  EXPECT_DOUBLE_EQ(c.autoscaling.tpot_slo_seconds, 0.1);
}

TEST(AutoscalingConfig, ReadsTheContractsBlock) {
  RouterConfig c;
  auto r = apply_config_json(json::parse(R"({"autoscaling": {
      "slo": {"ttftSeconds": 1.5, "tpotSeconds": 0.05},
      "prefill": {"tokensPerSecond": 12000, "fixedSeconds": 0},
      "decode": {"stepSecondsBase": 0.01, "stepSecondsPerSequence": 0.0003, "maxSequences": 128},
      "minReplicas": 1}})"),
                             c);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(c.autoscaling.configured);
  EXPECT_DOUBLE_EQ(c.autoscaling.ttft_slo_seconds, 1.5);
  EXPECT_DOUBLE_EQ(c.autoscaling.tpot_slo_seconds, 0.05);
  EXPECT_DOUBLE_EQ(c.autoscaling.prefill_tokens_per_second, 12000);
  EXPECT_DOUBLE_EQ(c.autoscaling.prefill_fixed_seconds, 0);
  EXPECT_DOUBLE_EQ(c.autoscaling.decode_step_seconds_base, 0.01);
  EXPECT_DOUBLE_EQ(c.autoscaling.decode_step_seconds_per_sequence, 0.0003);
  EXPECT_DOUBLE_EQ(c.autoscaling.decode_max_sequences, 128);
}

TEST(AutoscalingConfig, RefusalsNameTheFieldTheValueAndTheFix) {
  struct Case {
    const char* doc;
    std::vector<std::string> says;
  };
  const Case cases[] = {
      {R"({"autoscaling": 3})", {"'autoscaling'", "(3)", "must be an object"}},
      {R"({"autoscaling": {"slo": []}})", {"'autoscaling.slo'", "must be an object", "ttftSeconds"}},
      {R"({"autoscaling": {"slo": {"ttftSeconds": 0}}})", {"'autoscaling.slo.ttftSeconds'", "(0)", "> 0", "e.g. 2"}},
      {R"({"autoscaling": {"slo": {"tpotSeconds": "fast"}}})", {"'autoscaling.slo.tpotSeconds'", "\"fast\"", "> 0"}},
      {R"({"autoscaling": {"prefill": {"tokensPerSecond": -5}}})", {"'autoscaling.prefill.tokensPerSecond'", "(-5)"}},
      {R"({"autoscaling": {"prefill": {"fixedSeconds": -0.1}}})", {"'autoscaling.prefill.fixedSeconds'", ">= 0"}},
      {R"({"autoscaling": {"decode": {"stepSecondsBase": -1}}})", {"'autoscaling.decode.stepSecondsBase'", ">= 0"}},
      {R"({"autoscaling": {"decode": {"stepSecondsPerSequence": -1}}})",
       {"'autoscaling.decode.stepSecondsPerSequence'", ">= 0"}},
      {R"({"autoscaling": {"decode": {"maxSequences": -2}}})",
       {"'autoscaling.decode.maxSequences'", "(-2)", ">= 0", "e.g. 256"}},
      {R"({"autoscaling": {"slo": {"ttft": 2}}})", {"'autoscaling.slo.ttft'", "use ttftSeconds, tpotSeconds"}},
      {R"({"autoscaling": {"decode": {"slots": 2}}})", {"'autoscaling.decode.slots'", "maxSequences"}},
  };
  for (const Case& k : cases) {
    RouterConfig c;
    auto r = apply_config_json(json::parse(k.doc), c);
    ASSERT_FALSE(r) << k.doc;
    for (const std::string& s : k.says) EXPECT_NE(r.error().find(s), std::string::npos) << k.doc << " -> " << r.error();
  }
}

// ---- the pressure ----------------------------------------------------------------------------------

AutoscalingSignalsConfig contract_example() {
  AutoscalingSignalsConfig c;
  c.ttft_slo_seconds = 2.0;
  c.tpot_slo_seconds = 0.05;
  c.prefill_tokens_per_second = 20000;
  c.prefill_fixed_seconds = 0.02;
  c.decode_step_seconds_base = 0.012;
  c.decode_step_seconds_per_sequence = 0.0002;
  return c;
}

TEST(ScalingSignals, PrefillPressureIsPredictedTtftOverTheSlo) {
  const auto c = contract_example();
  PoolObservation o;
  o.ready_endpoints = 2;
  o.waiting_prompt_tokens = 38000;
  // (38000 + 2000) / (20000 x 2) + 0.02 = 1.02 s; / 2 s
  const PoolSignals s = prefill_pool_signals(o, 2000, 0, c);
  EXPECT_DOUBLE_EQ(s.predicted_ttft_seconds, 1.02);
  EXPECT_DOUBLE_EQ(s.pressure, 0.51);
  EXPECT_EQ(s.ready_endpoints, 2);
  EXPECT_DOUBLE_EQ(s.predicted_tpot_seconds, 0);
  // More waiting tokens: more pressure; another endpoint: less.
  o.waiting_prompt_tokens = 78000;
  EXPECT_GT(prefill_pool_signals(o, 2000, 0, c).pressure, s.pressure);
  o.ready_endpoints = 4;
  EXPECT_LT(prefill_pool_signals(o, 2000, 0, c).pressure, s.pressure * 2);
}

TEST(ScalingSignals, DecodePressureIsTheWorseOfTpotAndKv) {
  const auto c = contract_example();
  PoolObservation o;
  o.ready_endpoints = 2;
  o.running_sequences = 198;   // 99 per endpoint: 0.012 + 0.0002 x 100 = 0.032 s
  o.kv_utilization_sum = 0.9;  // mean 0.45
  PoolSignals s = decode_pool_signals(o, c);
  EXPECT_NEAR(s.predicted_tpot_seconds, 0.032, 1e-12);
  EXPECT_NEAR(s.pressure, 0.64, 1e-12);  // 0.032 / 0.05 > 0.45 / 0.9
  EXPECT_DOUBLE_EQ(s.kv_utilization, 0.45);
  EXPECT_DOUBLE_EQ(s.predicted_ttft_seconds, 0);
  // KV nearly full dominates.
  o.kv_utilization_sum = 1.8;
  s = decode_pool_signals(o, c);
  EXPECT_NEAR(s.pressure, 1.0, 1e-12);
}

TEST(ScalingSignals, WithoutReadyEndpointsQueuedRequestsForceScaleFromZero) {
  const auto c = contract_example();
  PoolObservation o;
  o.draining_endpoints = 1;
  EXPECT_DOUBLE_EQ(prefill_pool_signals(o, 1000, 0, c).pressure, 0);
  EXPECT_DOUBLE_EQ(decode_pool_signals(o, c).pressure, 0);
  o.queued_requests = 3;
  EXPECT_DOUBLE_EQ(prefill_pool_signals(o, 1000, 0, c).pressure, 4);
  const PoolSignals d = decode_pool_signals(o, c);
  EXPECT_DOUBLE_EQ(d.pressure, 4);
  EXPECT_EQ(d.draining_endpoints, 1);
  EXPECT_DOUBLE_EQ(d.predicted_tpot_seconds, 0);
}

TEST(ScalingSignals, JsonAndPrometheusCarryTheContractsNames) {
  const auto c = contract_example();
  PoolObservation p;
  p.ready_endpoints = 1;
  p.waiting_prompt_tokens = 100;
  PoolObservation d;
  d.ready_endpoints = 3;
  d.running_sequences = 30;
  d.queued_requests = 0;
  const PoolSignals ps = prefill_pool_signals(p, 50, 0, c), ds = decode_pool_signals(d, c);
  const json doc = json::parse(pool_signals_json(ps, ds));
  for (const char* pool : {"prefill", "decode"}) {
    const json& j = doc.at("pools").at(pool);
    for (const char* key : {"pressure", "readyEndpoints", "drainingEndpoints", "waitingPromptTokens",
                            "predictedTtftSeconds", "runningSequences", "kvUtilization", "predictedTpotSeconds",
                            "queuedRequests", "promptTokensPerSecond", "waitingSequences", "sustainableUtilization"}) {
      EXPECT_TRUE(j.contains(key)) << pool << "." << key;
    }
  }
  EXPECT_DOUBLE_EQ(doc["pools"]["prefill"]["pressure"].get<double>(), ps.pressure);
  EXPECT_EQ(doc["pools"]["decode"]["readyEndpoints"].get<int>(), 3);
  std::string text;
  write_pool_signals(text, ps, ds);
  for (const char* name : {"disagg_router_pool_slo_pressure", "disagg_router_pool_ready_endpoints",
                           "disagg_router_pool_draining_endpoints", "disagg_router_pool_waiting_prompt_tokens",
                           "disagg_router_pool_predicted_ttft_seconds", "disagg_router_pool_running_sequences",
                           "disagg_router_pool_kv_utilization", "disagg_router_pool_predicted_tpot_seconds",
                           "disagg_router_pool_queued_requests", "disagg_router_pool_prompt_tokens_per_second",
                           "disagg_router_pool_waiting_sequences", "disagg_router_pool_sustainable_utilization"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + name + " gauge"), std::string::npos) << name;
    EXPECT_NE(text.find(std::string(name) + "{pool=\"prefill\"} "), std::string::npos) << name;
    EXPECT_NE(text.find(std::string(name) + "{pool=\"decode\"} "), std::string::npos) << name;
  }
  EXPECT_NE(text.find("disagg_router_pool_ready_endpoints{pool=\"decode\"} 3\n"), std::string::npos);
}

TEST(ScalingSignals, MeanPromptIsTakenBetweenReads) {
  MeanPromptTracker t;
  const auto mean = [&t](double tokens, double requests) { return t.update(tokens, requests, 0).mean_prompt_tokens; };
  EXPECT_DOUBLE_EQ(mean(0, 0), 0);
  EXPECT_DOUBLE_EQ(mean(1000, 10), 100);    // everything so far
  EXPECT_DOUBLE_EQ(mean(1000, 10), 100);    // nothing new: the last mean
  EXPECT_DOUBLE_EQ(mean(21000, 20), 2000);  // only the ten new ones
  EXPECT_DOUBLE_EQ(mean(500, 5), 2000);     // an endpoint left: start over, keep the mean
  EXPECT_DOUBLE_EQ(mean(800, 8), 100);
}

TEST(ScalingSignals, PromptSpreadIsTakenBetweenReadsAndSetsWhatAPoolSustains) {
  // GIVEN no squares counted: the exponential's spread
  EXPECT_DOUBLE_EQ(MeanPromptTracker{}.update(1000, 10, 0).prompt_cv2, 1);
  // WHEN ten prompts of 100 tokens, then ten of 1,000 and ten of 3,000 (mean 2,000, sd 1,000: cv² 0.25)
  MeanPromptTracker t;
  EXPECT_NEAR(t.update(1000, 10, 0, 10 * 100.0 * 100).prompt_cv2, 0, 1e-12);
  const double squares = 10 * 1000.0 * 1000 + 10 * 3000.0 * 3000;
  const MeanPromptTracker::Reading r = t.update(1000 + 40000, 10 + 20, 1, 10 * 100.0 * 100 + squares);
  EXPECT_DOUBLE_EQ(r.mean_prompt_tokens, 2000);
  EXPECT_NEAR(r.prompt_cv2, 0.25, 1e-12);
  // AND then twenty prompts of 2,000 exactly: cv² 0
  EXPECT_NEAR(t.update(41000 + 40000, 50, 2, 10 * 100.0 * 100 + squares + 20 * 2000.0 * 2000).prompt_cv2, 0, 1e-12);
  // THEN steadier prompts let the same endpoints carry more within the SLO, so the same load reads
  // a lower pressure; a single endpoint sustains less than two
  const auto c = contract_example();
  PoolObservation o;
  o.ready_endpoints = 1;
  const PoolSignals spread = prefill_pool_signals(o, 2000, 16000, c, 1),
                    steady = prefill_pool_signals(o, 2000, 16000, c, 0);
  EXPECT_GT(steady.sustainable_utilization, spread.sustainable_utilization);
  EXPECT_LT(steady.pressure, spread.pressure);
  o.ready_endpoints = 2;
  EXPECT_GT(prefill_pool_signals(o, 2000, 16000, c, 1).sustainable_utilization, spread.sustainable_utilization);
}

TEST(ScalingSignals, PromptRateIsSmoothedOverAboutAMinuteWhateverTheReadInterval) {
  // GIVEN prompt tokens arriving at 1,000/s, read every 15 s (KEDA) or every 1 s (a scraper)
  for (const double every : {15.0, 1.0}) {
    MeanPromptTracker t;
    double rate = 0;
    for (double now = 0; now <= 600; now += every) rate = t.update(1000 * now, now, now).prompt_tokens_per_second;
    // THEN after ten minutes the rate is the arrival rate
    EXPECT_NEAR(rate, 1000, 1) << every;
    // AND a minute after the arrivals stop it has fallen by about e (the time constant)
    for (double now = 600 + every; now <= 660 + 1e-9; now += every)
      rate = t.update(600'000, 600, now).prompt_tokens_per_second;
    EXPECT_NEAR(rate, 1000 / std::exp(1.0), 5) << every;
  }
}

TEST(ScalingSignals, ABusyPoolIsUnderPressureBeforeAnyQueueBuilds) {
  const auto c = contract_example();
  // GIVEN a prefill pool of 2 x 20,000 tokens/s with nothing waiting (TTFT at its floor)
  PoolObservation o;
  o.ready_endpoints = 2;
  // WHEN 32,000 prompt tokens arrive per second THEN its pressure is the utilization, 0.8, over what
  // 2 endpoints sustain within the SLO's tail (prompts as spread as an exponential's: cv² 1)
  const PoolSignals p = prefill_pool_signals(o, 2000, 32000, c);
  const double sustained = prefill_sustainable_utilization(2, 0.1, 1, 0.02, 2);
  EXPECT_DOUBLE_EQ(p.sustainable_utilization, sustained);
  EXPECT_GT(sustained, 0.85);
  EXPECT_LT(sustained, 0.95);
  EXPECT_NEAR(p.pressure, 0.8 / sustained, 1e-12);
  EXPECT_DOUBLE_EQ(p.prompt_tokens_per_second, 32000);
  EXPECT_LT(p.predicted_ttft_seconds / c.ttft_slo_seconds, 0.1);
  // GIVEN a decode pool of 2 endpoints holding 256 sequences each, whose steps stay fast
  auto d = c;
  d.decode_step_seconds_per_sequence = 0.00005;  // 230 a step: 0.012 + 0.00005 x 231 = 23.6 ms, 0.47 of the SLO
  d.decode_max_sequences = 256;
  o = PoolObservation{};
  o.ready_endpoints = 2;
  o.running_sequences = 460;  // 460 of 512 slots, stepping at 230 a step where 256 would take 24.8 ms
  o.kv_utilization_sum = 0.6;
  const PoolSignals s = decode_pool_signals(o, d);
  EXPECT_NEAR(s.pressure, 460.0 / 512 * (0.012 + 0.00005 * 256) / (0.012 + 0.00005 * 230) / 0.9, 1e-12);
  // AND sequences waiting behind them are a backlog, not a rate: reported, but the pressure is the
  // same (counting them sent decode to its maximum while prefill flushed a surge's backlog into it)
  o.waiting_sequences = 600;
  const PoolSignals q = decode_pool_signals(o, d);
  EXPECT_DOUBLE_EQ(q.pressure, s.pressure);
  EXPECT_DOUBLE_EQ(q.waiting_sequences, 600);
  // AND without maxSequences the slot term is off: the TPOT's 0.47 and KV's 0.3 / 0.9 remain
  d.decode_max_sequences = 0;
  EXPECT_NEAR(decode_pool_signals(o, d).pressure, (0.012 + 0.00005 * 231) / 0.05, 1e-12);
}

TEST(ScalingSignals, TheDecodeSlotTermIsProportionalToTheLoadWhateverTheReplicas) {
  // GIVEN requests asking for 5,000 output tokens per second of a decode pool whose step is
  // 12 ms + 0.05 ms a sequence, 256 sequences at most per endpoint (a full endpoint: 24.8 ms a step)
  auto d = contract_example();
  d.decode_step_seconds_per_sequence = 0.00005;
  d.decode_max_sequences = 256;
  const double full_step = 0.012 + 0.00005 * 256;
  // Little's law: an endpoint stepping b sequences makes b / step(b) tokens/s, so 2 endpoints hold
  // b = 2,500 x step(b), i.e. 240 / 7 each, and 1 endpoint b = 5,000 x step(b) = 80
  PoolObservation two;
  two.ready_endpoints = 2;
  two.running_sequences = 2 * 240.0 / 7;
  PoolObservation one;
  one.ready_endpoints = 1;
  one.running_sequences = 80;
  // WHEN the pool measures itself on 2 endpoints and on 1
  const double p1 = decode_pool_signals(one, d).pressure;
  const double slots2 = two.running_sequences / 512 * full_step / (0.012 + 0.00005 * 240.0 / 7) / 0.9;
  // THEN the slot term is the same load over each pool's capacity: twice as high on one endpoint
  // (5,000 tokens/s of 256 / 24.8 ms = 10,323 per endpoint, / 0.9), as the HPA formula assumes; a
  // count of sequences (80 / 256 against 68.6 / 512) would say 2.33 times, and shrinking to one
  // endpoint would then look fuller than the formula promised
  EXPECT_NEAR(p1, 5000 / (256 / full_step) / 0.9, 1e-9);
  EXPECT_NEAR(slots2 * 2, p1, 1e-9);
  EXPECT_GT(p1, (0.012 + 0.00005 * 81) / 0.05);  // the slot term is the one measured at 1 endpoint
}

// ---- draining endpoints ---------------------------------------------------------------------------

// ---- the router and the simulator on the same load -----------------------------------------------

// The differential test of the one pressure rule: a decode pool the simulator steps with the cost
// model, and the router with the line the constructs fit through that model's steps at 1 and 64
// sequences (src/k8s/private/autoscaling.ts, decodeCapacity), read the same load. The rule is one
// function; what may differ is the step model, and only by the line's error above 64 sequences.
TEST(ScalingSignals, TheRouterReadsADecodeLoadAsTheSimulatorDoes) {
  const CostModel cm = test::cost_model();  // 8B-class on one H100
  const double context = 2000;
  const double max_sequences = 256;
  const auto sim_step = [&cm, context](double b) { return decode_step_seconds(cm, b, context); };
  AutoscalingSignalsConfig c;
  c.tpot_slo_seconds = 0.03;
  const double n = 64;
  c.decode_step_seconds_per_sequence = (sim_step(n) - sim_step(1)) / (n - 1);
  c.decode_step_seconds_base = sim_step(1) - c.decode_step_seconds_per_sequence;
  c.decode_max_sequences = max_sequences;
  double worst = 0;
  int compared = 0;
  for (std::int32_t ready = 1; ready <= 4; ++ready) {
    for (double per_replica = 0; per_replica <= max_sequences; per_replica += 16) {
      for (double kv : {0.0, 0.3, 0.7}) {
        PoolObservation o;
        o.ready_endpoints = ready;
        o.running_sequences = per_replica * ready;
        o.kv_utilization_sum = kv * ready;
        const double router = decode_pool_signals(o, c).pressure;
        DecodeLoad l;
        l.ready_replicas = ready;
        l.running_sequences = o.running_sequences;
        l.kv_utilization = kv;
        l.max_sequences = max_sequences;
        l.tpot_slo_seconds = c.tpot_slo_seconds;
        const double sim = decode_pressure(l, sim_step).pressure;
        ASSERT_GT(sim, 0) << "ready " << ready << " per replica " << per_replica;
        worst = std::max(worst, std::abs(router / sim - 1));
        ++compared;
      }
    }
  }
  // Decode is memory-bound at every batch here, where the cost model's step is linear in the batch
  // (weights plus each sequence's KV): the line through two of its steps is the same model, and the
  // two read every load alike to rounding. A rule written twice drifted by whole terms (the slot
  // term's batch was rounded down on one side only).
  EXPECT_EQ(compared, 4 * 17 * 3);
  EXPECT_LT(worst, 1e-9) << "the router's decode pressure is " << worst * 100 << "% off the simulator's";
}

TEST(EndpointDraining, A503StopsRoutingWithoutAStrikeAndALaterPassingCheckClearsIt) {
  EndpointSlot s;
  const HealthPolicy policy{3, 1000};
  record_health(s, true, 0, policy, 0);
  ASSERT_TRUE(routable(s, 1));
  // WHEN it answers a request 503
  EXPECT_TRUE(record_draining(s, 100));
  EXPECT_FALSE(record_draining(s, 101));  // news once
  // THEN it gets no request, and it was no failure
  EXPECT_FALSE(routable(s, 102));
  EXPECT_EQ(s.failures.load(), 0);
  EXPECT_EQ(s.ejections.load(), 0u);
  // AND a check sent before the drain began does not clear it
  record_health(s, true, 150, policy, /*started_ms=*/90);
  EXPECT_FALSE(routable(s, 151));
  // AND a check sent after it that passes does (an overloaded worker that recovered)
  EXPECT_TRUE(record_health(s, true, 250, policy, /*started_ms=*/200));
  EXPECT_TRUE(routable(s, 251));
}

// ---- drain-wait -----------------------------------------------------------------------------------

TEST(DrainWait, ParsesFlagsAndRefusesBadOnes) {
  const char* good[] = {
      "drain-wait", "--metrics-url", "http://127.0.0.1:8001/metrics", "--timeout-s", "90", "--quiet-s", "1.5"};
  bool help = false;
  auto o = parse_drain_wait_args(7, const_cast<char**>(good), &help);
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->host, "127.0.0.1");
  EXPECT_EQ(o->port, 8001);
  EXPECT_EQ(o->path, "/metrics");
  EXPECT_DOUBLE_EQ(o->timeout_s, 90);
  EXPECT_DOUBLE_EQ(o->quiet_s, 1.5);
  const char* no_timeout[] = {"drain-wait", "--metrics-url", "http://h:1/metrics"};
  auto e1 = parse_drain_wait_args(3, const_cast<char**>(no_timeout), &help);
  ASSERT_FALSE(e1);
  EXPECT_NE(e1.error().find("'--timeout-s' is required"), std::string::npos);
  const char* bad_url[] = {"drain-wait", "--metrics-url", "https://h/metrics", "--timeout-s", "1"};
  auto e2 = parse_drain_wait_args(5, const_cast<char**>(bad_url), &help);
  ASSERT_FALSE(e2);
  EXPECT_NE(e2.error().find("https://h/metrics"), std::string::npos);
  const char* bad_quiet[] = {"drain-wait", "--metrics-url", "http://h:1/", "--timeout-s", "1", "--quiet-s", "-2"};
  auto e3 = parse_drain_wait_args(7, const_cast<char**>(bad_quiet), &help);
  ASSERT_FALSE(e3);
  EXPECT_NE(e3.error().find("'--quiet-s' (-2)"), std::string::npos);
}

TEST(DrainWait, CountsRunningWaitingAndHeldTransfers) {
  EXPECT_FALSE(busy_requests("# nothing here\nother_metric 3\n").has_value());
  const std::string page =
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2\n"
      "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1\n"
      "disagg:sim_worker_pending_kv_transfers{engine=\"0\",model_name=\"m\"} 4\n";
  ASSERT_TRUE(busy_requests(page).has_value());
  EXPECT_DOUBLE_EQ(*busy_requests(page), 7);
  EXPECT_DOUBLE_EQ(parse_vllm_load(page).pending_transfers, 4);
}

TEST(DrainWait, HeldKvCountsBlocksInUseWithNoRequestAsBusy) {
  // vLLM's prefill pod after its last prompt: no request, but the prompt's blocks held for the
  // decode pod's NIXL read (vLLM exports no transfer gauge; the blocks are not free in its usage)
  const std::string held =
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 0\n"
      "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0\n"
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.031\n";
  bool only = true;
  EXPECT_DOUBLE_EQ(*busy_requests(held, false, &only), 0);  // without --held-kv: idle
  EXPECT_FALSE(only);
  EXPECT_DOUBLE_EQ(*busy_requests(held, true, &only), 1);  // with it: busy, and says why
  EXPECT_TRUE(only);
  // the blocks read and freed (cached blocks count as free): idle
  const std::string freed =
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 0\n"
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0\n";
  EXPECT_DOUBLE_EQ(*busy_requests(freed, true, &only), 0);
  EXPECT_FALSE(only);
  // requests running: counted as requests, not as held blocks
  const std::string running =
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n"
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n";
  EXPECT_DOUBLE_EQ(*busy_requests(running, true, &only), 3);
  EXPECT_FALSE(only);
  // the flag parses, takes no value, and the wait ends only once the blocks are free
  const char* argv[] = {"drain-wait",  "--held-kv", "--metrics-url", "http://127.0.0.1:8000/metrics",
                        "--timeout-s", "30"};
  bool help = false;
  auto o = parse_drain_wait_args(6, const_cast<char**>(argv), &help);
  ASSERT_TRUE(o) << o.error();
  EXPECT_TRUE(o->held_kv);
  o->quiet_s = 0.02;
  o->poll_s = 0.01;
  int reads = 0;
  std::vector<std::string> said;
  EXPECT_EQ(drain_wait(
                *o,
                [&] {
                  DrainReading r;
                  r.busy = busy_requests(reads++ < 3 ? held : freed, true, &r.held_kv_only);
                  return r;
                },
                [&](const std::string& line) { said.push_back(line); }),
            DrainWaitEnd::quiet);
  EXPECT_GT(reads, 3);
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said.front().find("KV blocks held for a transfer"), std::string::npos);
}

TEST(DrainWait, EndsWhenQuietWhenGoneOrAtTheTimeout) {
  DrainWaitOptions o;
  o.quiet_s = 0.05;
  o.poll_s = 0.01;
  o.timeout_s = 30;
  std::vector<std::string> said;
  const auto say = [&](const std::string& line) { said.push_back(line); };
  // Busy three times, then idle: quiet (not before it read 0).
  int reads = 0;
  EXPECT_EQ(drain_wait(
                o,
                [&] {
                  return DrainReading{reads++ < 3 ? 2.0 : 0.0, false};
                },
                say),
            DrainWaitEnd::quiet);
  EXPECT_GT(reads, 3);
  // An unreadable page counts busy; a worker that stopped listening ends the wait.
  reads = 0;
  EXPECT_EQ(drain_wait(
                o,
                [&] {
                  return reads++ < 2 ? DrainReading{std::nullopt, false} : DrainReading{std::nullopt, true};
                },
                say),
            DrainWaitEnd::gone);
  // Always busy: the timeout.
  o.timeout_s = 0.05;
  EXPECT_EQ(drain_wait(
                o,
                [] {
                  return DrainReading{1.0, false};
                },
                say),
            DrainWaitEnd::timed_out);
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said.back().find("timed out"), std::string::npos);
}

}  // namespace
}  // namespace disagg::router
