// Request validation (400 / 404 in OpenAI's shape) and tokenizer / block-hash parity with the
// sim-worker, so that the router's prefix scores match the hashes in the workers' KV events.
#include <gtest/gtest.h>

#include <random>

#include "disagg/block_hash.h"
#include "lib/openai/request_parse.h"

#ifdef DISAGG_HAVE_SIM_WORKER
#include "fake_tokenizer.h"
#endif

namespace disagg::router {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kModels = {"llama", "llama-alias"};

Expected<void, ApiError> parse(const json& body, bool chat, GenerateRequest& g, std::vector<TokenId>& tokens) {
  std::string scratch;
  tokens.clear();
  return parse_generate_request(body, chat, kModels, g, tokens, scratch);
}

TEST(RequestParse, AcceptsCompletionsAndChat) {
  GenerateRequest g;
  std::vector<TokenId> t;
  ASSERT_TRUE(
      parse(json{{"model", "llama"}, {"prompt", "hello world"}, {"stream", true}, {"max_tokens", 5}}, false, g, t));
  EXPECT_TRUE(g.stream);
  EXPECT_EQ(g.max_tokens, 5);
  EXPECT_EQ(t.size(), 4u);  // hell o worl d
}

TEST(RequestParse, ARequestWithoutAModelGoesToTheBaseModelAsVllmServesIt) {
  // GIVEN requests naming no model: absent, null or empty (vLLM serves its base model to each)
  for (const json& body :
       {json{{"prompt", "x"}}, json{{"model", nullptr}, {"prompt", "x"}}, json{{"model", ""}, {"prompt", "x"}}}) {
    GenerateRequest g;
    std::vector<TokenId> t;
    // WHEN the router reads one
    auto r = parse(body, false, g, t);
    // THEN it routes it as the first served name, the base model
    ASSERT_TRUE(r) << body.dump() << ": " << r.error().message;
    EXPECT_EQ(g.model, "llama") << body.dump();
  }
}

TEST(RequestParse, RefusesWithFieldAndStatus) {
  GenerateRequest g;
  std::vector<TokenId> t;
  struct Case {
    json body;
    bool chat;
    unsigned status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {json::array(), false, 400, ""},
      {json{{"model", 3}, {"prompt", "x"}}, false, 400, "model"},
      {json{{"model", "gpt-4"}, {"prompt", "x"}}, false, 404, "model"},
      {json{{"model", "llama"}}, false, 400, "prompt"},
      {json{{"model", "llama"}, {"prompt", 5}}, false, 400, "prompt"},
      {json{{"model", "llama"}, {"prompt", json::array({1, -2})}}, false, 400, "prompt"},
      {json{{"model", "llama"}, {"prompt", "   "}}, false, 400, "prompt"},
      {json{{"model", "llama"}, {"prompt", "x"}, {"stream", "yes"}}, false, 400, "stream"},
      {json{{"model", "llama"}, {"prompt", "x"}, {"max_tokens", 0}}, false, 400, "max_tokens"},
      {json{{"model", "llama"}, {"prompt", "x"}, {"max_tokens", 1.5}}, false, 400, "max_tokens"},
      {json{{"model", "llama"}}, true, 400, "messages"},
      {json{{"model", "llama"}, {"messages", json::array()}}, true, 400, "messages"},
      {json{{"model", "llama"}, {"messages", json::array({json{{"content", "hi"}}})}}, true, 400, "messages"},
      {json{{"model", "llama"}, {"messages", json::array({json{{"role", "user"}, {"content", 7}}})}}, true, 400,
       "messages"},
  };
  for (const Case& c : cases) {
    auto r = parse(c.body, c.chat, g, t);
    ASSERT_FALSE(r) << c.body.dump();
    EXPECT_EQ(r.error().status, c.status) << c.body.dump();
    EXPECT_EQ(r.error().param, c.param) << c.body.dump();
    EXPECT_FALSE(r.error().message.empty());
  }
  auto unknown = parse(json{{"model", "gpt-4"}, {"prompt", "x"}}, false, g, t);
  EXPECT_EQ(unknown.error().code, "model_not_found");
  EXPECT_NE(unknown.error().message.find("gpt-4"), std::string::npos);
  EXPECT_TRUE(parse(json{{"model", "llama-alias"}, {"prompt", json::array({1, 2, 3})}}, false, g, t));
  EXPECT_EQ(t, (std::vector<TokenId>{1, 2, 3}));
}

TEST(RequestParse, TokenizerRule) {
  // GIVEN the documented rule: whitespace splits, pieces of at most 4 bytes
  std::vector<TokenId> a, b;
  fake_tokenize("hello world", a);
  ASSERT_EQ(a.size(), 4u);  // hell o worl d
  EXPECT_EQ(a[0], fake_token_id("hell"));
  EXPECT_EQ(a[1], fake_token_id("o"));
  fake_tokenize("  hello\n\tworld  ", b);
  EXPECT_EQ(a, b);
  for (TokenId t : a) {
    EXPECT_GE(t, 256);
    EXPECT_LT(t, kFakeVocabSize);
  }
}

TEST(RequestParse, BodiesNestedDeeperThanTheLimitBuildNoDocument) {
  // GIVEN bodies nested exactly at the limit and one level past it
  const auto nested = [](std::size_t levels) {
    return "{\"model\":\"llama\",\"prompt\":\"x\",\"extra\":" + std::string(levels - 1, '[') +
           std::string(levels - 1, ']') + "}";
  };
  // THEN the limit parses, one level more is a 400 that names the limit
  EXPECT_TRUE(parse_request_json(nested(kMaxRequestJsonDepth)));
  const auto deep = parse_request_json(nested(kMaxRequestJsonDepth + 1));
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().status, 400u);
  EXPECT_EQ(deep.error().code, "json_too_deep");
  EXPECT_NE(deep.error().message.find(std::to_string(kMaxRequestJsonDepth)), std::string::npos);
  // AND 4 MB of '[' is refused the same way (it stops at level 65), not parsed
  const auto huge = parse_request_json(std::string(4'000'000, '['));
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().code, "json_too_deep");
  // AND invalid JSON within the limit is still a 400 of its own
  const auto bad = parse_request_json("{\"model\":");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().status, 400u);
  EXPECT_NE(bad.error().message.find("not valid JSON"), std::string::npos);
}

TEST(JsonDepth, CountsBracketsOutsideStringsOnly) {
  EXPECT_TRUE(json_depth_within("", 0));
  EXPECT_TRUE(json_depth_within("1", 0));
  EXPECT_FALSE(json_depth_within("[]", 0));
  EXPECT_TRUE(json_depth_within("[[]]", 2));
  EXPECT_FALSE(json_depth_within("[[[]]]", 2));
  EXPECT_TRUE(json_depth_within("[{},{},[]]", 2));  // siblings do not add up
  // Brackets in strings, escaped quotes included, do not count.
  EXPECT_TRUE(json_depth_within(R"(["[[[[", "\"[[[", "\\"])", 1));
  EXPECT_FALSE(json_depth_within(R"(["\\", [[]]])", 2));
  // An unbalanced closer ends the scan (a parser stops there); an open string hides the rest.
  EXPECT_TRUE(json_depth_within(std::string(100, '[').insert(0, 1, ']'), 2));
  EXPECT_TRUE(json_depth_within(std::string(100, '[').insert(0, 1, '"'), 2));
}

// The chat template as the header writes it, spelled out independently of FakeChatPrompt: the
// tokens of every chat must stay what they were (routers and workers of different builds agree).
std::string template_text(const std::vector<std::pair<std::string, std::string>>& messages) {
  std::string out;
  for (const auto& [role, content] : messages) out += "<|" + role + "|>\n" + content + "\n";
  return out + "<|assistant|>\n";
}

TEST(RequestParse, ChatRendersTheDocumentedTemplate) {
  std::string text;
  FakeChatPrompt p(text);
  p.message("system", "be brief");
  p.begin_message().append("user");
  p.add_part().append("first");
  p.add_part().append("second");
  p.end_message();
  p.begin_message().append("assistant");  // no content
  p.end_message();
  EXPECT_EQ(p.finish(), "<|system|>\nbe brief\n<|user|>\nfirst\nsecond\n<|assistant|>\n\n<|assistant|>\n");
}

#ifdef DISAGG_HAVE_SIM_WORKER
std::string random_text(std::mt19937_64& rng) {
  static const std::string alphabet = "abcdefghij klmn\t\nopq\r\f\vRSTUVWXYZ0123456789.,;<|>\xc3\xa9";
  std::string s(rng() % 300, ' ');
  for (char& c : s) c = alphabet[rng() % alphabet.size()];
  return s;
}

TEST(RequestParse, TokensAndBlockHashesEqualTheSimWorkers) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 500; ++i) {
    // GIVEN a random completion prompt and a random chat
    const std::string text = random_text(rng);
    std::vector<TokenId> ours, theirs;
    fake_tokenize(text, ours);
    sim_worker::fake_tokenize(text, theirs);
    ASSERT_EQ(ours, theirs) << text;

    json messages = json::array();
    std::vector<std::pair<std::string, std::string>> sim_messages;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) {
      const std::string role = k % 2 == 0 ? "user" : "assistant";
      const std::string content = random_text(rng);
      messages.push_back(json{{"role", role}, {"content", content}});
      sim_messages.emplace_back(role, content);
    }
    GenerateRequest g;
    std::vector<TokenId> chat_ours, chat_theirs;
    std::string scratch;
    auto r =
        parse_generate_request(json{{"model", "llama"}, {"messages", messages}}, true, kModels, g, chat_ours, scratch);
    ASSERT_TRUE(r);
    sim_worker::fake_tokenize(template_text(sim_messages), chat_theirs);
    // THEN tokens are equal, so chained block hashes (one function, kRootBlockHash) are equal too
    ASSERT_EQ(chat_ours, chat_theirs);
    std::vector<BlockHash> h1(chat_ours.size() / 16), h2(chat_theirs.size() / 16);
    hash_blocks(chat_ours, 16, kRootBlockHash, h1);
    hash_blocks(chat_theirs, 16, kRootBlockHash, h2);
    EXPECT_EQ(h1, h2);
  }
}

TEST(RequestParse, ChatContentPartsRenderLikeTheSimWorker) {
  const json parts =
      json::array({json{{"type", "text"}, {"text", "first part"}}, json{{"type", "image_url"}, {"image_url", "x"}},
                   json{{"type", "text"}, {"text", "second"}}});
  GenerateRequest g;
  std::vector<TokenId> ours, theirs;
  std::string scratch;
  ASSERT_TRUE(parse_generate_request(
      json{{"model", "llama"}, {"messages", json::array({json{{"role", "user"}, {"content", parts}}})}}, true, kModels,
      g, ours, scratch));
  sim_worker::fake_tokenize(template_text({{"user", "first part\nsecond"}}), theirs);
  EXPECT_EQ(ours, theirs);
}
#endif

}  // namespace
}  // namespace disagg::router
