// Planner: the knee search on synthetic attainment, exactness of pruning against exhaustive
// search, and the simulator-backed search on a crafted case with a known best.
#include "disagg/planner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>

#include <cmath>
#include <map>
#include <set>

#include "disagg/simulation_config.h"
#include "disagg/workload.h"

namespace disagg {
namespace {

TEST(RateGrid, IndexAtMostInvertsRate) {
  RateGrid g{0.1, 1.07};
  EXPECT_EQ(g.index_at_most(0.05), -1);
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(g.index_at_most(g.rate(i)), i);
    EXPECT_EQ(g.index_at_most(g.rate(i) * 1.0001), i);
    if (i > 0) { EXPECT_EQ(g.index_at_most(g.rate(i) * 0.9999), i - 1); }
  }
}

TEST(FindKnee, FindsEveryKneeFromEveryStartProbingEachIndexOnce) {
  // GIVEN monotone attainment functions: pass up to the knee, fail after it
  for (int hi : {0, 1, 2, 7, 64, 200}) {
    for (int knee = -1; knee <= hi; ++knee) {
      for (int start : {0, hi / 3, hi / 2, hi, hi + 5, -3}) {
        std::set<int> probed;
        int probes = 0;
        auto passes = [&](int i) {
          EXPECT_GE(i, 0);
          EXPECT_LE(i, hi);
          EXPECT_TRUE(probed.insert(i).second) << "index " << i << " probed twice";
          ++probes;
          return i <= knee;
        };
        // WHEN the knee is searched THEN it is found exactly, in O(log hi) probes
        EXPECT_EQ(find_knee(start, hi, passes), knee) << "hi " << hi << " start " << start;
        EXPECT_LE(probes, 2 * static_cast<int>(std::ceil(std::log2(hi + 2))) + 3);
      }
    }
  }
  EXPECT_EQ(find_knee(3, -1, [](int) { return true; }), -1);
}

// A valid pool whose numbers the synthetic evaluator ignores.
PoolSpec dummy_pool(int tp) {
  PoolSpec p;
  p.cost.weight_bytes_per_rank = 1e10 / tp;
  p.cost.kv_bytes_per_token = 1e5;
  p.cost.active_parameters = 1e10;
  p.cost.layers = 32;
  p.cost.hidden_size = 4096;
  p.cost.peak_flops_per_second = 1e15;
  p.cost.hbm_bytes_per_second = 3e12;
  p.cost.interconnect_bytes_per_second = 4e11;
  p.cost.fabric_bytes_per_second = 1e11;
  p.cost.tensor_parallel = tp;
  p.scheduler.num_blocks = 10000;
  return p;
}

// Goodput is a deterministic, irregular function of the candidate; the bound over-estimates it
// for most candidates and under-estimates it (so the search caps) for some.
class SyntheticEvaluator final : public CandidateEvaluator {
 public:
  double true_goodput(const PlanCandidate& c) const {
    const std::uint64_t h = (static_cast<std::uint64_t>(c.order) * 0x9E3779B97F4A7C15ull) >> 40;
    const double factor = 0.3 + static_cast<double>(h % 1000) / 1000.0;  // 0.3 .. 1.3 of the bound
    return factor * raw_bound(c);
  }
  static double raw_bound(const PlanCandidate& c) {
    const double dec = c.decode_replicas * (3.0 + c.decode_option);
    if (c.mode == PlanMode::aggregated) return 0.6 * dec;
    return std::min(dec, 4.0 * c.prefill_replicas * (1 + c.prefill_option));
  }
  double bound_rate(const PlanCandidate& c) override { return raw_bound(c); }
  Expected<bool, PlanError> passes(const PlanCandidate& c, double rate, MetricsSummary* s) override {
    ++probes;
    s->submitted = 100;
    return rate <= true_goodput(c);
  }
  int probes = 0;
};

// TP 1, 2 and 4 (the TP 4 option cheaper per accelerator), both modes, `budget` accelerators.
PlannerSpec small_space(int budget, double required) {
  PlannerSpec spec;
  for (int tp : {1, 2, 4}) {
    PlanOption o;
    o.pool = dummy_pool(tp);
    o.accelerators_per_replica = tp;
    o.label = "tp" + std::to_string(tp);
    spec.options.push_back(o);
  }
  spec.options[2].price_per_accelerator_hour = 0.8;
  spec.max_accelerators = budget;
  spec.required_rate = required;
  spec.grid = RateGrid{0.1, 1.03};
  return spec;
}

TEST(PlannerSearch, PruningGivesTheSameBestAsExhaustiveSearch) {
  int runs_that_pruned = 0;
  for (int budget : {4, 8, 12}) {
    for (double required : {0.0, 20.0}) {
      // GIVEN a small search space: TP 1, 2 and 4, both modes, a budget of `budget` accelerators
      PlannerSpec spec = small_space(budget, required);
      // WHEN the search runs with and without pruning
      SyntheticEvaluator pruned_eval, full_eval;
      spec.prune = true;
      auto pruned = search_plan(spec, pruned_eval);
      spec.prune = false;
      auto full = search_plan(spec, full_eval);
      ASSERT_TRUE(pruned && full);
      ASSERT_EQ(full->evaluated, full->total);
      const PlanCandidate& b = full->candidates.front();
      // THEN the top rank_depth candidates, their order and goodputs are the same
      for (std::size_t k = 0; k < static_cast<std::size_t>(spec.rank_depth); ++k) {
        const PlanCandidate& x = pruned->candidates[k];
        const PlanCandidate& y = full->candidates[k];
        EXPECT_EQ(x.order, y.order) << "budget " << budget << " rank " << k;
        EXPECT_EQ(x.knee_index, y.knee_index);
        EXPECT_EQ(x.score, y.score);
        EXPECT_EQ(x.status, CandidateStatus::evaluated);
      }
      // AND every candidate the pruned search evaluated has the exhaustive search's goodput
      std::map<int, int> knees;
      for (const auto& c : full->candidates) knees[c.order] = c.knee_index;
      for (const auto& c : pruned->candidates) {
        if (c.status == CandidateStatus::evaluated) { EXPECT_EQ(c.knee_index, knees[c.order]); }
      }
      // AND pruning saved probes, and the exhaustive best really is the maximum score
      // (pruning needs a candidate that reaches the required rate to compare against)
      int meeting = 0;
      for (const auto& c : full->candidates) meeting += c.meets_required ? 1 : 0;
      if (meeting > spec.rank_depth) {
        EXPECT_GT(pruned->pruned, 0) << "budget " << budget << " required " << required;
        EXPECT_LT(pruned_eval.probes, full_eval.probes);
        ++runs_that_pruned;
      }
      for (const auto& c : full->candidates) {
        if (c.meets_required == b.meets_required) { EXPECT_LE(c.score, b.score); }
      }
    }
  }
  EXPECT_GE(runs_that_pruned, 3);
}

// The synthetic evaluator made thread-safe: an atomic probe count, nothing else shared.
class ThreadSafeEvaluator final : public CandidateEvaluator {
 public:
  double bound_rate(const PlanCandidate& c) override { return inner_.bound_rate(c); }
  Expected<bool, PlanError> passes(const PlanCandidate& c, double rate, MetricsSummary* s) override {
    probes.fetch_add(1);
    s->submitted = 100;
    s->goodput_rate = rate;
    return rate <= inner_.true_goodput(c);
  }
  bool thread_safe() const override { return true; }
  std::atomic<int> probes{0};

 private:
  SyntheticEvaluator inner_;  // only its const true_goodput is used from several threads
};

TEST(PlannerSearch, ParallelSpeculationGivesTheSequentialResultToTheDigit) {
  int wasted = 0;  // speculative probes a moved top made useless: the re-check did happen
  for (int budget : {4, 8, 12}) {
    for (double required : {0.0, 20.0}) {
      // GIVEN the search space above, searched one candidate at a time and 2 or 4 at once
      PlannerSpec spec = small_space(budget, required);
      spec.threads = 1;
      ThreadSafeEvaluator one;
      auto sequential = search_plan(spec, one);
      ASSERT_TRUE(sequential);
      for (int threads : {2, 4}) {
        spec.threads = threads;
        ThreadSafeEvaluator many;
        auto parallel = search_plan(spec, many);
        ASSERT_TRUE(parallel);
        // THEN every candidate, status, knee, probe count and summary is the same
        EXPECT_EQ(to_json(*parallel, spec), to_json(*sequential, spec))
            << "budget " << budget << ", " << threads << " threads";
        EXPECT_EQ(parallel->simulations, sequential->simulations);
        // AND speculation probes at least what the sequential search did (more when a top moved)
        EXPECT_GE(many.probes.load(), one.probes.load());
        wasted += many.probes.load() - one.probes.load();
      }
    }
  }
  EXPECT_GT(wasted, 0);
}

TEST(PlannerSearch, EnumeratesEverySplitWithinTheBudget) {
  PlannerSpec spec;
  for (int tp : {1, 2}) {
    PlanOption o;
    o.pool = dummy_pool(tp);
    o.accelerators_per_replica = tp;
    spec.options.push_back(o);
  }
  spec.max_accelerators = 4;
  const auto all = enumerate_candidates(spec);
  int aggregated = 0, disaggregated = 0;
  for (const auto& c : all) {
    EXPECT_LE(c.accelerators, 4);
    (c.mode == PlanMode::aggregated ? aggregated : disaggregated)++;
  }
  // TP1 x 1..4 and TP2 x 1..2; (p, d) splits: 1/1: 6, 1/2: 2 (p 1..2 with d 1), 2/1: 2, 2/2: 1
  EXPECT_EQ(aggregated, 6);
  EXPECT_EQ(disaggregated, 6 + 2 + 2 + 1);
}

// A small Llama-8B-like model on H100-like numbers; `hbm` varies the accelerator.
std::string option_json(const char* label, double hbm, int tp) {
  return std::string("{\"label\": \"") + label + "\", \"tensorParallel\": " + std::to_string(tp) +
         ", \"weightBytesPerRank\": " + std::to_string(16e9 / tp) +
         ", \"hardware\": {\"hbmBytesPerSecond\": " + std::to_string(hbm) +
         "}, \"kvTokensPerReplica\": 200000, \"maxConcurrencyPerReplica\": 128}";
}

std::string planner_doc(const std::string& options, int max_acc, const char* modes) {
  return std::string(R"({
    "model": {"weightBytesPerRank": 16e9, "kvBytesPerToken": 131072, "activeParameters": 8e9, "layers": 32, "hiddenSize": 4096},
    "hardware": {"peakFlopsPerSecond": 9.89e14, "hbmBytesPerSecond": 3.35e12, "interconnectBytesPerSecond": 4.5e11, "fabricBytesPerSecond": 4e10},
    "efficiency": {"stepOverheadSeconds": 0.002},
    "policy": {"name": "least-load"},
    "workload": {"kind": "single", "requests": 150, "inputTokens": {"mean": 1024}, "outputTokens": {"mean": 64}},
    "slo": {"ttftSeconds": 1, "tpotSeconds": 0.03},
    "seed": 3,
    "planner": {"maxAccelerators": )") +
         std::to_string(max_acc) + ", \"modes\": " + modes + ", \"rateResolution\": 0.1, \"tensorParallelOptions\": [" +
         options + "]}}";
}

TEST(Planner, PicksTheFasterAcceleratorAtTheSamePrice) {
  // GIVEN two options at the same price, the second with twice the HBM bandwidth
  auto doc = parse_json(
      planner_doc(option_json("slow", 3.35e12, 1) + ", " + option_json("fast", 6.7e12, 1), 2, R"(["aggregated"])"));
  ASSERT_TRUE(doc) << doc.error();
  auto setup = read_simulation_base(*doc);
  ASSERT_TRUE(setup) << setup.error();
  auto spec = read_planner(*doc);
  ASSERT_TRUE(spec) << spec.error();
  int calls = 0;
  // WHEN the planner runs
  auto result = run_planner(*spec, setup->config, setup->workload, [&](const PlanProgress& p) {
    ++calls;
    EXPECT_EQ(p.candidates_done, calls);
    EXPECT_EQ(p.candidates_total, 4);
  });
  ASSERT_TRUE(result) << result.error().message;
  // THEN the best candidate runs on the fast option, with a positive goodput and its summary
  const PlanCandidate& best = result->candidates.front();
  EXPECT_EQ(spec->options[static_cast<std::size_t>(best.decode_option)].label, "fast");
  EXPECT_GT(best.goodput_rate, 0);
  EXPECT_TRUE(best.has_summary);
  EXPECT_GE(best.summary.goodput_share, spec->target_share);
  EXPECT_EQ(calls, 4);
  // AND its probes spanned the spec's 30 s (four 2.9 s lifetimes of a 64-token request are shorter)
  EXPECT_EQ(result->probe_seconds, 30);
  // AND the run is a pure function of the configuration
  auto again = run_planner(*spec, setup->config, setup->workload);
  ASSERT_TRUE(again);
  EXPECT_EQ(to_json(*again, *spec), to_json(*result, *spec));
}

TEST(PlannerProbeWindow, SpansFourLifetimesAtTheSloEdgeWithinItsBounds) {
  const Slo slo{0.25, 0.1};
  // A 190-token request at TPOT 100 ms lives 19.25 s at the SLO's edge: four of them, not 30 s
  EXPECT_DOUBLE_EQ(probe_window_seconds(30, slo, 190), 4 * (0.25 + 19.0));
  // Short requests keep the spec's window
  EXPECT_DOUBLE_EQ(probe_window_seconds(30, slo, 10), 30);
  // Very long outputs stop at the cap, unless the spec asks for more
  EXPECT_DOUBLE_EQ(probe_window_seconds(30, slo, 100000), kMaxProbeSeconds);
  EXPECT_DOUBLE_EQ(probe_window_seconds(900, slo, 100000), 900);
  // 0 keeps meaning no window
  EXPECT_DOUBLE_EQ(probe_window_seconds(0, slo, 190), 0);
  // A mean under one token counts as one
  EXPECT_DOUBLE_EQ(probe_window_seconds(1, Slo{1, 0.5}, 0), 4 * 1.5);
}

TEST(PlannerTrace, ATraceIsPlannedAtItsOwnRateAndScaledForTheProbes) {
  // GIVEN a trace of 400 requests at 2 req/s, 1k-token prompts sharing a 4-block prefix
  const std::string path = ::testing::TempDir() + "/planner-trace.jsonl";
  {
    std::ofstream out(path);
    for (int i = 0; i < 400; ++i) {
      out << "{\"timestamp_ms\": " << i * 500
          << ", \"input_length\": 1024, \"output_length\": 64, \"hash_ids\": [1, 2, 3, 4, " << 100 + i << "]}\n";
    }
  }
  std::string text = planner_doc(option_json("tp1", 3.35e12, 1), 2, R"(["aggregated"])");
  const std::string single =
      R"({"kind": "single", "requests": 150, "inputTokens": {"mean": 1024}, "outputTokens": {"mean": 64}})";
  text.replace(text.find(single), single.size(),
               R"({"kind": "trace", "trace": {"path": ")" + path + R"(", "blockTokens": 16}})");
  auto doc = parse_json(text);
  ASSERT_TRUE(doc) << doc.error();
  auto setup = read_simulation_base(*doc);
  ASSERT_TRUE(setup) << setup.error();
  auto spec = read_planner(*doc);
  ASSERT_TRUE(spec) << spec.error();
  // WHEN planned from the file
  auto trace = load_plan_trace(setup->trace_path, setup->trace);
  ASSERT_TRUE(trace) << trace.error().message;
  auto result = plan_setup(*spec, *setup);
  ASSERT_TRUE(result) << result.error().message;
  // THEN the trace's rate and shape are measured (the shared prefix counts as cached after the first)
  EXPECT_EQ(trace->records, 400);
  EXPECT_NEAR(trace->rate_per_second, 2.0, 1e-9);
  EXPECT_NEAR(trace->mean_fresh_tokens, 1024 - 4 * 16 * 399.0 / 400, 1e-6);
  EXPECT_EQ(result->trace_records, 400);
  // AND every candidate is held to the trace's rate: the best carries more than it
  const PlanCandidate& best = result->candidates.front();
  EXPECT_TRUE(best.meets_required);
  EXPECT_GE(best.goodput_rate, 2.0);
  const std::string json = to_json(*result, *spec);
  EXPECT_NE(json.find("\"trace\":{\"records\":400,\"ratePerSecond\":2"), std::string::npos) << json.substr(0, 300);
  // AND a trace workload without its file, or one of a single instant, is refused by name
  EXPECT_FALSE(run_planner(*spec, setup->config, setup->workload));
  {
    std::ofstream out(path);
    out << "{\"timestamp_ms\": 0, \"input_length\": 10, \"output_length\": 5}\n";
  }
  auto one = load_plan_trace(path, setup->trace);
  ASSERT_FALSE(one);
  EXPECT_NE(one.error().message.find("at least two records at different times"), std::string::npos)
      << one.error().message;
}

TEST(Planner, RefusesBadSpecsNamingTheField) {
  auto read = [](const std::string& text) {
    auto doc = parse_json(text);
    EXPECT_TRUE(doc) << doc.error();
    return read_planner(*doc);
  };
  const std::string ok = option_json("tp1", 3.35e12, 1);
  auto r = read(planner_doc(ok, 1, R"(["disaggregated"])"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("'planner.maxAccelerators' (1) is below the smallest deployment (2"), std::string::npos)
      << r.error();
  r = read(planner_doc(ok, 4, R"(["both"])"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("'planner.modes' holds \"both\""), std::string::npos) << r.error();
  r = read(planner_doc("{\"tensorParallel\": 2, \"kvTokensPerReplica\": 1000, \"colour\": 1}", 4, R"(["aggregated"])"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("'planner.tensorParallelOptions[0].colour' is not a known key"), std::string::npos)
      << r.error();
  r = read(planner_doc("{\"tensorParallel\": 2}", 4, R"(["aggregated"])"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("'planner.tensorParallelOptions[0].kvTokensPerReplica' (0) must hold at least one block"),
            std::string::npos)
      << r.error();
}

}  // namespace
}  // namespace disagg
