// The fast request scan (request_scan.h) against the slow path (json::parse +
// parse_generate_request): whenever the scan accepts a body, the slow path accepts it too, with the
// same model, stream flag, max_tokens and prompt tokens. Seeded mutations of a corpus look for
// bodies where the two disagree; fixed cases check that common requests do take the fast path.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "request_parse.h"
#include "request_scan.h"

namespace disagg::router {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kModels = {"llama", "llama-alias"};

struct Result {
  bool ok = false;
  GenerateRequest g;
  std::vector<TokenId> tokens;
};

Result slow(const std::string& body, bool chat) {
  Result r;
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded()) return r;
  std::string scratch;
  r.ok = static_cast<bool>(parse_generate_request(doc, chat, kModels, r.g, r.tokens, scratch));
  return r;
}

Result fast(const std::string& body, bool chat) {
  Result r;
  std::string scratch = "left over";
  r.tokens = {7, 7};  // the scan appends, and restores these when it declines
  r.ok = scan_generate_request(body, chat, kModels, r.g, r.tokens, scratch);
  if (r.ok) {
    r.tokens.erase(r.tokens.begin(), r.tokens.begin() + 2);
  } else {
    EXPECT_EQ(r.tokens, (std::vector<TokenId>{7, 7})) << body;
  }
  return r;
}

// The contract: the scan accepts only what the slow path accepts, with the same result.
void expect_agree(const std::string& body, bool chat) {
  const Result f = fast(body, chat);
  if (!f.ok) return;
  const Result s = slow(body, chat);
  ASSERT_TRUE(s.ok) << "scan accepted what the slow path refuses: " << body;
  EXPECT_EQ(f.g.model, s.g.model) << body;
  EXPECT_EQ(f.g.stream, s.g.stream) << body;
  EXPECT_EQ(f.g.max_tokens, s.g.max_tokens) << body;
  EXPECT_EQ(f.tokens, s.tokens) << body;
}

const std::vector<std::pair<std::string, bool>>& corpus() {
  static const std::vector<std::pair<std::string, bool>> c = {
      {R"({"model":"llama","prompt":"w0 w1 w2 w3 w4","max_tokens":4,"stream":false})", false},
      {R"({"model": "llama", "prompt": "line one\nline \"two\"\t\\ end", "stream": true, "temperature": 0.7,
          "stop": ["\n\n", null], "logit_bias": {"50256": -100}, "n": 1, "seed": -3, "top_p": 1e-2})",
       false},
      {R"({"model":"llama-alias","prompt":[1,2,3,2147483647],"max_completion_tokens":9,"max_tokens":3})", false},
      {R"({"model":"llama","prompt":[[5,6],[7]],"max_tokens":null,"stream":null})", false},
      {R"({"model":"llama","prompt":["first prompt","second"]})", false},
      {"{\"model\":\"llama\",\"prompt\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 na\xc3\xafve\"}", false},
      {R"({"model":"llama","messages":[{"role":"system","content":"You are terse."},
          {"role":"user","content":"Hi\nthere"},{"role":"assistant","content":null},
          {"role":"user","content":[{"type":"text","text":"part one"},{"type":"image_url","image_url":{"url":"x"}},
          "stray",{"type":"text","text":"part two"},{"text":"no type"}]}],"stream":true,
          "stream_options":{"include_usage":true},"max_completion_tokens":16})",
       true},
      {R"(  {"messages":[{"content":"only","role":"user","name":"x"}],"model":"llama"}  )", true},
  };
  return c;
}

TEST(RequestScan, CommonRequestsTakeTheFastPathAndAgree) {
  // GIVEN typical completions and chat bodies (escapes, UTF-8, batches, token ids, content parts)
  for (const auto& [body, chat] : corpus()) {
    // WHEN both paths read them THEN the scan accepts and agrees with the slow path
    const Result f = fast(body, chat);
    EXPECT_TRUE(f.ok) << body;
    expect_agree(body, chat);
  }
}

TEST(RequestScan, DeclinesWhatItDoesNotHandle) {
  // GIVEN bodies that are invalid, or valid in ways the scan leaves to the slow path
  const std::vector<std::pair<std::string, bool>> cases = {
      {R"({"model":"llama","prompt":"x",})", false},                  // trailing comma
      {R"({"model":"llama","prompt":"x"} x)", false},                 // trailing bytes
      {R"({"model":"llama","prompt":"a\u0062c"})", false},            // \u escape in the prompt
      {R"({"model":"llama","model":"llama","prompt":"x"})", false},   // repeated key
      {R"({"mod\u0065l":"llama","prompt":"x"})", false},              // escaped key
      {"\xef\xbb\xbf{\"model\":\"llama\",\"prompt\":\"x\"}", false},  // byte-order mark
      {R"({"model":"llama","prompt":"x","t":1e999})", false},         // overflows a double
      {R"({"model":"llama","prompt":"x","t":01})", false},            // leading zero
      {"{\"model\":\"llama\",\"prompt\":\"\xc0\xaf\"}", false},       // overlong UTF-8
      {"{\"model\":\"llama\",\"prompt\":\"\xed\xa0\x80\"}", false},   // UTF-8 surrogate
      {"{\"model\":\"llama\",\"prompt\":\"a\tb\"}", false},           // raw control character
      {R"({"model":"gpt-4","prompt":"x"})", false},                   // unknown model (404)
      {R"({"model":"llama","prompt":"x","max_tokens":1.0})", false},  // not an integer
      {R"({"model":"llama","prompt":"x","max_tokens":0})", false},
      {R"({"model":"llama","prompt":[1,-2]})", false},
      {R"({"model":"llama","prompt":"   "})", false},  // no tokens
      {R"({"model":"llama","prompt":"x","stream":"yes"})", false},
      {R"({"model":"llama","messages":[]})", true},
      {R"({"model":"llama","messages":[{"role":"user","role":"user","content":"x"}]})", true},
      {R"({"model":"llama","messages":[{"role":"user","content":7}]})", true},
      {R"([{"model":"llama","prompt":"x"}])", false},  // not an object
      {"", false},
  };
  for (const auto& [body, chat] : cases) {
    // WHEN the scan reads them THEN it declines (the slow path decides)
    EXPECT_FALSE(fast(body, chat).ok) << body;
  }
}

TEST(RequestScan, RandomMutationsNeverMakeThePathsDisagree) {
  // GIVEN the corpus, mutated at random (seeded): bytes replaced by JSON-significant ones, cut,
  // duplicated or deleted
  static const std::string kBytes = "{}[]\",:\\ntu0-.eE1 \x01\x7f\xc3\xa9\xe2\x82\xff";
  std::mt19937_64 rng(20261130);
  int accepted = 0;
  for (int i = 0; i < 40000; ++i) {
    const auto& [seed, chat] = corpus()[rng() % corpus().size()];
    std::string body = seed;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      const std::size_t at = rng() % body.size();
      switch (rng() % 4) {
        case 0: body[at] = kBytes[rng() % kBytes.size()]; break;
        case 1: body.insert(at, 1, kBytes[rng() % kBytes.size()]); break;
        case 2: body.erase(at, 1 + rng() % 4); break;
        default: body.insert(at, body.substr(at, rng() % 12)); break;
      }
    }
    // WHEN both paths read the mutant THEN they agree whenever the scan accepts
    expect_agree(body, chat);
    if (HasFatalFailure()) return;
    accepted += fast(body, chat).ok ? 1 : 0;
  }
  // AND enough mutants were accepted for the comparison to mean something
  EXPECT_GT(accepted, 1000);
}

TEST(RequestScan, RandomDocumentsAgree) {
  // GIVEN random request documents serialized by nlohmann (random field types, nesting, escapes)
  std::mt19937_64 rng(7);
  const auto random_string = [&rng] {
    static const std::string alphabet = "ab c\n\"\\/\t\x01\xc3\xa9xyz";
    std::string s(rng() % 12, ' ');
    for (char& ch : s) ch = alphabet[rng() % alphabet.size()];
    return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace));
  };
  std::function<json(int)> random_value = [&](int depth) -> json {
    switch (rng() % (depth > 2 ? 5 : 7)) {
      case 0: return nullptr;
      case 1: return (rng() % 2) != 0;
      case 2: return static_cast<std::int64_t>(rng() % 200) - 20;
      case 3: return 0.5 * static_cast<double>(rng() % 9);
      case 4: return random_string();
      case 5: {
        json a = json::array();
        for (std::uint64_t n = rng() % 4; n > 0; --n) a.push_back(random_value(depth + 1));
        return a;
      }
      default: {
        json o = json::object();
        static const std::vector<std::string> keys = {"role", "content", "type", "text", "x"};
        for (std::uint64_t n = rng() % 4; n > 0; --n) o[keys[rng() % keys.size()]] = random_value(depth + 1);
        return o;
      }
    }
  };
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    const bool chat = (rng() % 2) != 0;
    json doc = json::object();
    doc["model"] = (rng() % 4) != 0 ? json("llama") : random_value(2);
    if ((rng() % 3) != 0) doc["stream"] = (rng() % 3) != 0 ? json((rng() % 2) != 0) : random_value(2);
    if ((rng() % 2) != 0) doc["max_tokens"] = (rng() % 3) != 0 ? json(1 + rng() % 50) : random_value(2);
    if (chat) {
      json msgs = json::array();
      for (std::uint64_t n = 1 + rng() % 3; n > 0; --n) {
        json m = (rng() % 5) != 0 ? json{{"role", "user"}} : random_value(1);
        if (m.is_object() && (rng() % 5) != 0) m["content"] = (rng() % 2) != 0 ? random_string() : random_value(1);
        msgs.push_back(m);
      }
      doc["messages"] = (rng() % 8) != 0 ? msgs : random_value(1);
    } else {
      doc["prompt"] = (rng() % 2) != 0 ? random_string() : random_value(1);
    }
    // WHEN both paths read it THEN they agree whenever the scan accepts
    const std::string body = doc.dump(-1, ' ', false, json::error_handler_t::replace);
    expect_agree(body, chat);
    if (HasFatalFailure()) return;
    accepted += fast(body, chat).ok ? 1 : 0;
  }
  EXPECT_GT(accepted, 1000);
}

}  // namespace
}  // namespace disagg::router
