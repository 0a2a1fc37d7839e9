// GET /v1/models on a real Router (loopback): the served model, then each LoRA adapter
// (router.loraAdapters / --lora-adapter NAME[=PATH]) as vLLM lists it: id = the adapter's name,
// object "model", owned_by "vllm", root = its path (null when not given), parent = the base model.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "router_config_detail.h"
#include "router_loopback.h"

namespace disagg::router {
namespace {

using json = nlohmann::json;
using namespace testing;

TEST(RouterModels, ListsTheServedModelThenEachLoraAdapterAsVllmDoes) {
  // GIVEN a router serving model m with two adapters, one with its path
  Upstream up;
  RouterConfig c = config_for(up.port());
  ASSERT_TRUE(config_detail::add_lora_adapter(c, "--lora-adapter", "sql-lora=/adapters/sql"));
  ASSERT_TRUE(config_detail::add_lora_adapter(c, "--lora-adapter", "chat-lora"));
  RunningRouter router(std::move(c));
  // WHEN /v1/models is read
  const Reply r = call(router.port(), "GET", "/v1/models", "");
  // THEN it lists the base model first, then the adapters in order
  ASSERT_EQ(r.status, 200) << r.head;
  const json page = json::parse(r.body);
  EXPECT_EQ(page["object"], "list");
  const json& data = page["data"];
  ASSERT_EQ(data.size(), 3U) << r.body;
  EXPECT_EQ(data[0]["id"], "m");
  EXPECT_EQ(data[0]["root"], "m");
  EXPECT_EQ(data[1]["id"], "sql-lora");
  EXPECT_EQ(data[1]["object"], "model");
  EXPECT_EQ(data[1]["owned_by"], "vllm");
  EXPECT_EQ(data[1]["root"], "/adapters/sql");
  EXPECT_EQ(data[1]["parent"], "m");
  EXPECT_EQ(data[1]["created"], data[0]["created"]);
  EXPECT_EQ(data[2]["id"], "chat-lora");
  EXPECT_TRUE(data[2]["root"].is_null());
  EXPECT_EQ(data[2]["parent"], "m");
  // AND a request may name an adapter (its name, not NAME=PATH)
  const Reply ok =
      call(router.port(), "POST", "/v1/completions", "", R"({"model":"sql-lora","prompt":"hi","max_tokens":1})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  const Reply unknown =
      call(router.port(), "POST", "/v1/completions", "", R"({"model":"sql-lora=/adapters/sql","prompt":"hi"})");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
}

}  // namespace
}  // namespace disagg::router
