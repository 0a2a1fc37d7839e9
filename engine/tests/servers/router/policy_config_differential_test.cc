// The router process and the simulator read the same configuration's `policy` section alike: the
// same policy, the same options, the same disaggregation threshold and the same prefix source, or
// the same refusal (disagg/routing_policy_config.h is their one reader; this test keeps it so).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "disagg/json_value.h"
#include "disagg/simulation_config.h"
#include "router_config.h"

namespace disagg {
namespace {

// A simulation document the simulator accepts, with the sections under test added.
std::string simulation_doc(const std::string& sections) {
  return R"({
    "model": {"weightBytesPerRank": 16e9, "kvBytesPerToken": 131072, "activeParameters": 8e9, "layers": 32, "hiddenSize": 4096},
    "hardware": {"peakFlopsPerSecond": 9.89e14, "hbmBytesPerSecond": 3.35e12, "fabricBytesPerSecond": 4e10},
    "pools": [{"name": "w", "role": "both", "replicas": 1, "kvTokensPerReplica": 200000}],
    "workload": {"requests": 10})" +
         (sections.empty() ? "" : ", " + sections) + "}";
}

// Every PolicyOptions field the configuration can set, by its option key.
std::vector<std::pair<std::string, double>> options_of(const PolicyOptions& o) {
  return {{"maxEndpoints", o.max_endpoints},
          {"historyBlocksPerEndpoint", static_cast<double>(o.history_blocks_per_endpoint)},
          {"pendingBlocksMs", o.pending_blocks_ms},
          {"queueWeight", o.queue_weight},
          {"kvUtilizationWeight", o.kv_utilization_weight},
          {"prefixWeight", o.prefix_weight},
          {"cacheThreshold", o.cache_threshold},
          {"balanceAbsThreshold", o.balance_abs_threshold},
          {"balanceRelThreshold", o.balance_rel_threshold},
          {"overlapCredit", o.overlap_credit},
          {"cpuTierCredit", o.cpu_tier_credit},
          {"diskTierCredit", o.disk_tier_credit},
          {"remoteTierCredit", o.remote_tier_credit},
          {"prefillTokensPerSecond", o.prefill_tokens_per_second},
          {"requestQueueSeconds", o.request_queue_seconds},
          {"kvPressureKnee", o.kv_pressure_knee},
          {"kvPressureSeconds", o.kv_pressure_seconds},
          {"guardRatio", o.guard_ratio},
          {"guardSlack", o.guard_slack}};
}

struct Case {
  const char* what;
  std::string sections;  // the policy (and router) sections of the file
  bool accepted;
};

TEST(PolicyConfigDifferential, TheRouterAndTheSimulatorReadOneFileAlike) {
  const std::vector<Case> cases = {
      {"names the constructs write", R"("policy": {"name": "kv-aware"})", true},
      {"the engine's own name", R"("policy": {"name": "dynamo", "options": {"overlapCredit": 2}})", true},
      {"least-loaded alias", R"("policy": {"name": "least-loaded"})", true},
      {"weights", R"("policy": {"name": "llm-d", "weights": {"prefix": 5, "queue": 1, "kvUsage": 0}})", true},
      {"options and threshold",
       R"("policy": {"name": "disagg", "options": {"guardRatio": 2, "maxEndpoints": 32}, "disaggregation": {"minUncachedPromptTokens": 2048}})",
       true},
      {"history", R"("policy": {"name": "sglang", "prefixSource": "history"})", true},
      {"index", R"("policy": {"name": "sglang", "prefixSource": "index"})", true},
      {"auto with a tokenizer",
       R"("policy": {"name": "llm-d", "prefixSource": "auto"}, "router": {"tokenizer": "/models/qwen3"})", true},
      {"auto without one", R"("policy": {"name": "llm-d", "prefixSource": "auto"})", true},
      {"no name: the schema's default", R"("policy": {"weights": {"prefix": 1}})", true},
      {"a comment", R"("policy": {"$comment": "tuned for chat", "name": "round-robin"})", true},
      {"unknown policy", R"("policy": {"name": "random"})", false},
      {"empty name", R"("policy": {"name": ""})", false},
      {"negative weight", R"("policy": {"name": "llm-d", "weights": {"prefix": -1}})", false},
      {"unknown weight", R"("policy": {"name": "llm-d", "weights": {"latency": 1}})", false},
      {"unknown option", R"("policy": {"name": "llm-d", "options": {"prefixWieght": 1}})", false},
      {"option out of range", R"("policy": {"name": "llm-d", "options": {"maxEndpoints": 0}})", false},
      {"option not a number", R"("policy": {"name": "llm-d", "options": {"guardRatio": "2"}})", false},
      {"fractional threshold", R"("policy": {"name": "disagg", "disaggregation": {"minUncachedPromptTokens": 1.5}})",
       false},
      {"unknown disaggregation key", R"("policy": {"name": "disagg", "disaggregation": {"minTokens": 1}})", false},
      {"unknown prefix source", R"("policy": {"name": "llm-d", "prefixSource": "exact"})", false},
      {"unknown policy key", R"("policy": {"name": "llm-d", "weight": {"prefix": 1}})", false},
      {"policy not an object", R"("policy": "llm-d")", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    // WHEN the router process reads the file
    router::RouterConfig routed;
    auto r = router::apply_config_json(nlohmann::json::parse("{" + c.sections + "}"), routed);
    // AND the simulator reads it
    auto doc = parse_json(simulation_doc(c.sections));
    ASSERT_TRUE(doc) << doc.error();
    auto simulated = read_simulation(*doc);
    // THEN both accept it or both refuse it, with the same words
    ASSERT_EQ(static_cast<bool>(r), c.accepted) << (r ? std::string("accepted") : r.error());
    ASSERT_EQ(static_cast<bool>(simulated), c.accepted) << (simulated ? std::string("accepted") : simulated.error());
    if (!c.accepted) {
      EXPECT_EQ(r.error(), simulated.error());
      EXPECT_NE(r.error().find("'policy"), std::string::npos) << r.error();
      continue;
    }
    // AND the same policy, options, threshold and prefix source
    const RouterSpec& sim = simulated->config.router;
    EXPECT_EQ(routed.policy, sim.policy);
    EXPECT_EQ(options_of(routed.options), options_of(sim.options));
    EXPECT_EQ(routed.decider.min_uncached_tokens, sim.decider.min_uncached_tokens);
    // (the router resolves auto at start: the index when its tokenizer loads; unset: the index)
    const bool router_index = routed.prefix_auto ? !routed.tokenizer_dir.empty() : routed.precise_prefix.value_or(true);
    EXPECT_EQ(router_index, sim.precise_prefix);
  }
}

}  // namespace
}  // namespace disagg
