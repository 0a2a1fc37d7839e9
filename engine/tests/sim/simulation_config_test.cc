// The configuration reader's workload keys for reproducing benchmark runs: constant arrivals,
// stages, shared prompts (popularity, users), the API; each field read, each error named.
#include "disagg/simulation_config.h"

#include <gtest/gtest.h>

#include <string>

#include "disagg/planner.h"

namespace disagg {
namespace {

std::string doc_with(const std::string& workload) {
  return R"({
    "model": {"weightBytesPerRank": 16e9, "kvBytesPerToken": 131072, "activeParameters": 8e9, "layers": 32, "hiddenSize": 4096},
    "hardware": {"peakFlopsPerSecond": 9.89e14, "hbmBytesPerSecond": 3.35e12, "fabricBytesPerSecond": 4e10},
    "pools": [{"name": "w", "role": "both", "replicas": 1, "kvTokensPerReplica": 200000}],
    "workload": )" +
         workload + "}";
}

Expected<SimulationSetup, std::string> read(const std::string& workload) {
  auto doc = parse_json(doc_with(workload));
  EXPECT_TRUE(doc) << doc.error();
  return read_simulation(*doc);
}

std::string error_of(const std::string& workload) {
  auto setup = read(workload);
  return setup ? std::string() : setup.error();
}

TEST(SimulationConfig, ReadsConstantStagesSharedPromptsAndApi) {
  // GIVEN a reproduction of a shared-prefix benchmark run in two constant-rate stages
  auto setup = read(R"({"kind": "single", "api": "chat",
    "arrival": {"process": "constant", "stages": [{"ratePerSecond": 8, "durationSeconds": 600}, {"ratePerSecond": 20, "durationSeconds": 600}]},
    "inputTokens": {"mean": 447}, "outputTokens": {"mean": 248},
    "tenants": {"count": 9, "systemPromptTokens": 100, "popularity": "equal", "usersPerTenant": 5}})");
  ASSERT_TRUE(setup) << setup.error();
  // THEN every field lands in the spec
  const WorkloadSpec& w = setup->workload;
  EXPECT_EQ(w.arrival.kind, ArrivalProcess::Kind::constant);
  ASSERT_EQ(w.arrival.stages.size(), 2u);
  EXPECT_EQ(w.arrival.stages[1].rate_per_second, 20);
  EXPECT_EQ(w.arrival.stages[1].duration_seconds, 600);
  EXPECT_EQ(w.tenants, 9);
  EXPECT_EQ(w.system_prompt_tokens, 100);
  EXPECT_EQ(w.popularity, TenantPopularity::equal);
  EXPECT_EQ(w.users_per_tenant, 5);
  EXPECT_EQ(w.api, PromptApi::chat);
  // AND without "requests" the stages alone bound the run (every stage's arrivals are sent)
  EXPECT_EQ(w.max_requests, 0);
  // AND an explicit request limit is kept
  auto capped = read(R"({"requests": 500, "arrival": {"stages": [{"ratePerSecond": 8, "durationSeconds": 600}]}})");
  ASSERT_TRUE(capped) << capped.error();
  EXPECT_EQ(capped->workload.max_requests, 500);
  // AND the defaults are those of every earlier configuration
  auto plain = read(R"({"tenants": {"count": 2, "systemPromptTokens": 10}})");
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_EQ(plain->workload.popularity, TenantPopularity::zipf);
  EXPECT_EQ(plain->workload.users_per_tenant, 0);
  EXPECT_EQ(plain->workload.api, PromptApi::completions);
  EXPECT_EQ(plain->workload.max_requests, 1000);
  EXPECT_TRUE(plain->workload.arrival.stages.empty());
}

TEST(SimulationConfig, StagedRunSimulatesEveryStagesRequests) {
  // GIVEN 2/s for 5 s then 4/s for 5 s, evenly spaced
  auto setup = read(
      R"({"arrival": {"process": "constant", "stages": [{"ratePerSecond": 2, "durationSeconds": 5}, {"ratePerSecond": 4, "durationSeconds": 5}]},
    "inputTokens": {"mean": 64}, "outputTokens": {"mean": 8}})");
  ASSERT_TRUE(setup) << setup.error();
  auto json = simulate_to_json(*setup);
  ASSERT_TRUE(json) << json.error();
  // THEN the summary covers all stages: 10 + 20 requests
  EXPECT_NE(json->find("\"submitted\":30,"), std::string::npos) << *json;
  EXPECT_NE(json->find("\"completed\":30,"), std::string::npos) << *json;
}

TEST(SimulationConfig, RefusesBadWorkloadKeysNamingTheFieldTheValueAndTheFix) {
  EXPECT_EQ(error_of(R"({"arrival": {"process": "uniform"}})"),
            "'workload.arrival.process' (\"uniform\") must be poisson, gamma, mmpp or constant");
  EXPECT_EQ(error_of(R"({"arrival": {"stages": {"ratePerSecond": 8}}})"),
            "'workload.arrival.stages' ({\"ratePerSecond\":8}) must be an array of 1 to 1024 stages, e.g. "
            "[{\"ratePerSecond\": 8, \"durationSeconds\": 600}, {\"ratePerSecond\": 20, \"durationSeconds\": 600}]");
  EXPECT_EQ(error_of(R"({"arrival": {"stages": []}})").substr(0, 55),
            "'workload.arrival.stages' ([]) must be an array of 1 to");
  EXPECT_EQ(error_of(R"({"arrival": {"stages": [{"ratePerSecond": 8}]}})"),
            "'workload.arrival.stages[0].durationSeconds' is required; give both ratePerSecond and durationSeconds");
  EXPECT_EQ(error_of(R"({"arrival": {"stages": [{"ratePerSecond": 0, "durationSeconds": 60}]}})"),
            "'workload.arrival.stages[0].ratePerSecond' (0) must be > 0");
  EXPECT_EQ(error_of(R"({"arrival": {"stages": [7]}})"),
            "'workload.arrival.stages[0]' (7) must be an object {\"ratePerSecond\": R, \"durationSeconds\": S}");
  EXPECT_NE(error_of(R"({"arrival": {"stages": [{"ratePerSecond": 1, "durationSeconds": 60, "rampSeconds": 5}]}})")
                .find("'workload.arrival.stages[0].rampSeconds' is not a known key"),
            std::string::npos);
  EXPECT_EQ(
      error_of(R"({"tenants": {"count": 3, "systemPromptTokens": 10, "popularity": "pareto"}})"),
      "'workload.tenants.popularity' (\"pareto\") must be zipf (weights 1/k^zipfExponent) or equal (tenants in turn)");
  EXPECT_EQ(error_of(R"({"tenants": {"count": 3, "systemPromptTokens": 10, "usersPerTenant": -1}})"),
            "'workload.tenants.usersPerTenant' (-1) must be >= 0");
  EXPECT_EQ(error_of(R"({"tenants": {"count": 3, "systemPromptTokens": 10, "usersPerTenant": 1e9}})"),
            "'workload.tenants.usersPerTenant' (1000000000) must be <= 1048576; use fewer users");
  EXPECT_EQ(error_of(R"({"api": "responses"})"),
            "'workload.api' (\"responses\") must be completions (the prompt as given) or chat (with the chat "
            "template's tokens)");
  EXPECT_EQ(error_of(R"({"kind": "trace", "api": "chat", "trace": {"path": "x.jsonl"}})"),
            "'workload.api' (\"chat\") does not apply to kind trace: a trace's input_length already counts every "
            "prompt token; drop api");
  // AND errors that need the whole spec come from the generator, at simulation time
  auto both = read(R"({"durationSeconds": 30, "arrival": {"stages": [{"ratePerSecond": 8, "durationSeconds": 600}]}})");
  ASSERT_TRUE(both) << both.error();
  auto run = simulate_to_json(*both);
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error(),
            "'workload.durationSeconds' (30) and 'workload.arrival.stages' both end the run; drop "
            "durationSeconds (the stages end at 600 s)");
}

TEST(SimulationConfig, PlannerRefusesStagesItCannotSearch) {
  // GIVEN a planner configuration whose workload runs in stages
  auto doc = parse_json(R"({
    "model": {"weightBytesPerRank": 16e9, "kvBytesPerToken": 131072, "activeParameters": 8e9, "layers": 32, "hiddenSize": 4096},
    "hardware": {"peakFlopsPerSecond": 9.89e14, "hbmBytesPerSecond": 3.35e12, "fabricBytesPerSecond": 4e10},
    "workload": {"arrival": {"process": "constant", "stages": [{"ratePerSecond": 8, "durationSeconds": 60}]}},
    "planner": {"maxAccelerators": 1, "tensorParallelOptions": [{"tensorParallel": 1, "kvTokensPerReplica": 200000}]}})");
  ASSERT_TRUE(doc) << doc.error();
  auto setup = read_simulation_base(*doc);
  ASSERT_TRUE(setup) << setup.error();
  auto spec = read_planner(*doc);
  ASSERT_TRUE(spec) << spec.error();
  // THEN the planner says why and what to do instead
  auto result = run_planner(*spec, setup->config, setup->workload, {});
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("'workload.arrival.stages' cannot be planned"), std::string::npos);
  EXPECT_NE(result.error().message.find("plan with one ratePerSecond"), std::string::npos);
}

}  // namespace
}  // namespace disagg
