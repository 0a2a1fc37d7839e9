// disagg::parse_json_into (json_parse.h) against nlohmann's own parser, the reference it must
// equal: the same verdict on every input and, where both accept, the same document (member order
// and number types included). Hand-picked edge cases, then generated documents, then those
// documents mutated byte by byte and cut short. Then the parser's two builders against each other:
// a configuration document (JsonValue) and a request body (nlohmann) read from the same bytes are
// the same document, or differ only where json_parse.h says the builders differ.
#include "disagg/json_parse.h"

#include "disagg/json_value.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

template <class Json>
::testing::AssertionResult same_as_nlohmann(const std::string& text) {
  const Json want = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  Json got;
  const bool ok = disagg::parse_json_into(text, got);
  if (ok != !want.is_discarded()) {
    return ::testing::AssertionFailure() << "verdict differs on " << ::testing::PrintToString(text) << ": parse_json "
                                         << (ok ? "accepts" : "refuses") << ", nlohmann "
                                         << (want.is_discarded() ? "refuses" : "accepts");
  }
  if (!ok) return ::testing::AssertionSuccess();
  // dump() shows member order and number types (1 vs 1.0, -0 vs 0); == alone would not.
  const std::string a = got.dump(), b = want.dump();
  if (got != want || a != b) {
    return ::testing::AssertionFailure() << "documents differ on " << ::testing::PrintToString(text) << ": " << a
                                         << " vs " << b;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same(const std::string& text) {
  auto r = same_as_nlohmann<nlohmann::ordered_json>(text);
  if (!r) return r;
  return same_as_nlohmann<nlohmann::json>(text);
}

TEST(JsonParse, AgreesOnEdgeCases) {
  const std::vector<std::string> cases = {
      "",
      " ",
      "{}",
      "[]",
      "{ }",
      "[ ]",
      "null",
      "true",
      "false",
      "nul",
      "tru",
      "falsey",
      "0",
      "-0",
      "-0.0",
      "01",
      "-",
      "1.",
      ".5",
      "+1",
      "1e",
      "1e+",
      "1E-2",
      "1e400",
      "-1e400",
      "1e-400",
      "2.5e-324",
      "18446744073709551615",
      "18446744073709551616",
      "-9223372036854775808",
      "-9223372036854775809",
      "123456789012345678901234567890",
      "0.1",
      "3.141592653589793238462643383279",
      "1.7976931348623157e308",
      "[1,]",
      "[,1]",
      "{\"a\":1,}",
      "{\"a\" 1}",
      "{a:1}",
      "{\"a\":1 \"b\":2}",
      "[1 2]",
      "\"abc",
      "\"a\\\"b\"",
      "\"\\/\\b\\f\\n\\r\\t\"",
      "\"\\x\"",
      "\"\\u00e9\"",
      "\"\\u00E9\"",
      "\"\\u0000\"",
      "\"\\ud83d\\ude00\"",
      "\"\\ud83d\"",
      "\"\\ud83dx\"",
      "\"\\ude00\"",
      "\"\\ud83d\\u0041\"",
      "\"\\u12\"",
      "\"\\u12g4\"",
      "\"\t\"",
      "\"\x01\"",
      "\"\x7f\"",
      "\"\xc3\xa9\"",
      "\"\xc0\xaf\"",
      "\"\xc1\xbf\"",
      "\"\xe0\x80\xaf\"",
      "\"\xe0\xa0\x80\"",
      "\"\xed\xa0\x80\"",
      "\"\xed\x9f\xbf\"",
      "\"\xf0\x8f\xbf\xbf\"",
      "\"\xf0\x90\x80\x80\"",
      "\"\xf4\x8f\xbf\xbf\"",
      "\"\xf4\x90\x80\x80\"",
      "\"\xf5\x80\x80\x80\"",
      "\"\xff\"",
      "\"\xe2\x82\"",
      "\"\xe2\x82\xac\"",
      "\xef\xbb\xbf{}",
      "\xef\xbb{}",
      "\xef{}",
      " \xef\xbb\xbf{}",
      "{} ",
      "{} x",
      "{}{}",
      "\n\r\t [1] \n",
      "[1]\x0b",
      "{\"a\":1,\"b\":2,\"a\":3}",
      "{\"b\":1,\"a\":2}",
      "{\"a\":{\"a\":{}}}",
      "[[[[[]]]]]",
      "/* c */ {}",
      "{} // c",
      std::string("[1]\0", 4),
      std::string("\"a\0b\"", 5),
      "[\"12345678\\\"\"]",
      "\"0123456789abcdef0123456789abcdef\"",
      "\"0123456789\\nabcdef0123456789abcdef\xc3\xa9tail\"",
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,\"max_tokens\":5}",
  };
  for (const std::string& text : cases) EXPECT_TRUE(same(text));
}

// Random JSON documents with the strings a chat body carries: escapes, every UTF-8 length,
// surrogate pairs, long plain runs (the eight-byte path) and numbers of every kind.
class Generator {
 public:
  explicit Generator(std::uint32_t seed) : rng_(seed) {}

  std::string document() {
    std::string out;
    value(out, 0);
    return out;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  void ws(std::string& out) {
    static const char* kWs[] = {"", "", "", " ", "\n", "\t", "\r\n  "};
    out += kWs[pick(7)];
  }

  void string(std::string& out) {
    out += '"';
    const int parts = pick(12);
    for (int i = 0; i < parts; ++i) {
      switch (pick(10)) {
        case 0: out += std::string(static_cast<std::size_t>(pick(40)), static_cast<char>('a' + pick(26))); break;
        case 1: out += "\\n"; break;
        case 2: out += "\\\""; break;
        case 3: out += "\\\\"; break;
        case 4: out += "\\u00e9\\u4e2d"; break;
        case 5: out += "\\ud83d\\ude00"; break;
        case 6: out += "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"; break;  // é 中 😀
        case 7: out += "# Title\\n\\n```ts\\nconst x = 1;\\n```"; break;
        case 8: out += "\\t\\/\\b\\f\\r"; break;
        default: out += "plain text, with words."; break;
      }
    }
    out += '"';
  }

  void number(std::string& out) {
    static const char* kNumbers[] = {"0",
                                     "-0",
                                     "7",
                                     "-12",
                                     "3.5",
                                     "-0.25",
                                     "1e3",
                                     "2E-7",
                                     "6.02e+23",
                                     "18446744073709551615",
                                     "18446744073709551616",
                                     "-9223372036854775808",
                                     "-9223372036854775809",
                                     "0.1",
                                     "123456789.987654321"};
    out += kNumbers[pick(15)];
  }

  void value(std::string& out, int depth) {
    const int kind = depth > 5 ? pick(4) : pick(6);
    switch (kind) {
      case 0: string(out); break;
      case 1: number(out); break;
      case 2: out += pick(2) ? "true" : (pick(2) ? "false" : "null"); break;
      case 3: string(out); break;
      case 4: {
        out += '{';
        const int n = pick(5);
        for (int i = 0; i < n; ++i) {
          if (i) out += ',';
          ws(out);
          // Few distinct keys, so some repeat.
          out += "\"k" + std::to_string(pick(4)) + "\"";
          ws(out);
          out += ':';
          ws(out);
          value(out, depth + 1);
          ws(out);
        }
        out += '}';
        break;
      }
      default: {
        out += '[';
        const int n = pick(5);
        for (int i = 0; i < n; ++i) {
          if (i) out += ',';
          ws(out);
          value(out, depth + 1);
          ws(out);
        }
        out += ']';
        break;
      }
    }
  }

  std::mt19937 rng_;
};

TEST(JsonParse, AgreesOnGeneratedDocuments) {
  Generator gen(20261202);
  for (int i = 0; i < 3000; ++i) {
    const std::string doc = gen.document();
    ASSERT_TRUE(same(doc));
  }
}

TEST(JsonParse, AgreesOnMutatedAndTruncatedDocuments) {
  Generator gen(7);
  std::mt19937 rng(11);
  // Bytes that matter to a JSON lexer, and some that do not.
  const std::string alphabet = std::string("\"\\{}[]:,.-+eE0123456789 \t\n\rtrufalsn/u") +
                               "\x00\x01\x1f\x7f\x80\xbf\xc2\xe0\xed\xef\xf0\xf4\xf5\xff";
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string doc = gen.document();
    if (doc.empty()) continue;
    std::uniform_int_distribution<std::size_t> at(0, doc.size() - 1);
    switch (i % 4) {
      case 0: doc[at(rng)] = alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)]; break;
      case 1: doc.resize(at(rng)); break;
      case 2:
        doc.insert(at(rng), 1, alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)]);
        break;
      default: doc.erase(at(rng), 1); break;
    }
    ASSERT_TRUE(same(doc));
    accepted += nlohmann::json::accept(doc) ? 1 : 0;
  }
  // Both verdicts are exercised.
  EXPECT_GT(accepted, 200);
  EXPECT_LT(accepted, 3800);
}

// Whether the JsonValue and the nlohmann document hold the same values (numbers as doubles, which
// is all a JsonValue keeps), members in the same order.
bool same_document(const disagg::JsonValue& v, const nlohmann::ordered_json& n) {
  using T = disagg::JsonValue::Type;
  switch (v.type()) {
    case T::null: return n.is_null();
    case T::boolean: return n.is_boolean() && n.get<bool>() == v.as_bool();
    case T::number: return n.is_number() && n.get<double>() == v.as_number();
    case T::string: return n.is_string() && n.get_ref<const std::string&>() == v.as_string();
    case T::array: {
      if (!n.is_array() || n.size() != v.items().size()) return false;
      for (std::size_t i = 0; i < n.size(); ++i) {
        if (!same_document(v.items()[i], n[i])) return false;
      }
      return true;
    }
    case T::object: {
      if (!n.is_object() || n.size() != v.members().size()) return false;
      std::size_t i = 0;
      for (const auto& [key, value] : n.items()) {
        if (v.members()[i].first != key || !same_document(v.members()[i].second, value)) return false;
        ++i;
      }
      return true;
    }
  }
  return false;
}

TEST(JsonParse, TheTwoBuildersReadTheSameBytesAlike) {
  Generator gen(20261207);
  std::mt19937 rng(5);
  const std::string alphabet = std::string("\"\\{}[]:,.-+eE0123456789 \t\nu") + "\x00\x01\x80\xc2\xed\xef\xff";
  int both = 0, neither = 0, duplicates = 0, nul_ends = 0;
  std::vector<std::string> docs = {
      std::string("[1]\0", 4), std::string("{}\0x", 4), "{\"a\":1,\"a\":2}", "\xef\xbb\xbf[2]", "1e-400", "1e400",
      "\"\xc0\xaf\""};
  for (int i = 0; i < 6000; ++i) {
    std::string doc = gen.document();
    if (i % 2 == 1 && !doc.empty()) {
      std::uniform_int_distribution<std::size_t> at(0, doc.size() - 1);
      doc[at(rng)] = alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)];
    }
    docs.push_back(std::move(doc));
  }
  for (const std::string& doc : docs) {
    const auto config = disagg::parse_json(doc);
    nlohmann::ordered_json request;
    const bool request_ok = disagg::parse_json_into(doc, request);
    if (config && request_ok) {
      ++both;
      ASSERT_TRUE(same_document(*config, request))
          << ::testing::PrintToString(doc) << ": " << config->dump() << " vs " << request.dump();
      continue;
    }
    if (!config && !request_ok) {
      ++neither;
      continue;
    }
    // THEN where only one accepts, it is the nlohmann builder, for one of the two documented reasons
    ASSERT_TRUE(request_ok) << "only the JsonValue builder accepts " << ::testing::PrintToString(doc);
    if (config.error().find("duplicate key") != std::string::npos) {
      ++duplicates;
    } else {
      ASSERT_NE(config.error().find("unexpected text after"), std::string::npos) << config.error();
      // (a NUL byte after the value: what precedes it is a document the JsonValue builder takes)
      ASSERT_NE(doc.find('\0'), std::string::npos) << ::testing::PrintToString(doc);
      ASSERT_TRUE(disagg::parse_json(doc.substr(0, doc.find('\0')))) << ::testing::PrintToString(doc);
      ++nul_ends;
    }
  }
  // Every outcome is exercised.
  EXPECT_GT(both, 1000);
  EXPECT_GT(neither, 500);
  EXPECT_GT(duplicates, 100);
  EXPECT_GE(nul_ends, 2);
}

TEST(JsonParse, ReportsWhereAndWhyItStopped) {
  struct Case {
    std::string text;
    disagg::JsonErrc code;
    std::size_t offset;
  };
  const std::vector<Case> cases = {
      {"{\"a\" 1}", disagg::JsonErrc::expected_colon, 5},
      {"[1, 2", disagg::JsonErrc::expected_array_separator, 5},
      {"[1 2]", disagg::JsonErrc::expected_array_separator, 3},
      {"{\"a\":1 \"b\":2}", disagg::JsonErrc::expected_object_separator, 7},
      {"{1:2}", disagg::JsonErrc::expected_key, 1},
      {"01", disagg::JsonErrc::trailing_text, 1},
      {"  1e999", disagg::JsonErrc::number_out_of_range, 2},
      {"-x", disagg::JsonErrc::invalid_number, 1},
      {"1.e5", disagg::JsonErrc::invalid_fraction, 2},
      {"1e+", disagg::JsonErrc::invalid_exponent, 3},
      {"[tru]", disagg::JsonErrc::invalid_literal, 1},
      {"", disagg::JsonErrc::expected_value, 0},
      {"[?]", disagg::JsonErrc::expected_value, 1},
      {"\"abc", disagg::JsonErrc::unterminated_string, 4},
      {"\"a\tb\"", disagg::JsonErrc::control_in_string, 2},
      {"\"\\x\"", disagg::JsonErrc::invalid_escape, 2},
      {"\"\\u12g4\"", disagg::JsonErrc::invalid_unicode_escape, 3},
      {"\"\\ud800\"", disagg::JsonErrc::lone_high_surrogate, 7},
      {"\"\\udc00\"", disagg::JsonErrc::lone_low_surrogate, 7},
      {"\"\xc0\xaf\"", disagg::JsonErrc::invalid_utf8, 1},
      {"\xef\xbb{}", disagg::JsonErrc::partial_bom, 0},
      {std::string(65, '[') + std::string(65, ']'), disagg::JsonErrc::too_deep, 64},
      {"{\"a\":1,\n \"a\":2}", disagg::JsonErrc::duplicate_key, 9},
  };
  for (const Case& c : cases) {
    const auto config = disagg::parse_json(c.text);
    ASSERT_FALSE(config) << ::testing::PrintToString(c.text);
    nlohmann::ordered_json request;
    disagg::NlohmannBuilder<nlohmann::ordered_json> builder;
    disagg::JsonParseError error;
    const bool ok = disagg::parse_json_with(c.text, builder, request, static_cast<int>(disagg::kMaxJsonDepth), &error);
    if (c.code == disagg::JsonErrc::duplicate_key) {
      EXPECT_TRUE(ok) << "nlohmann's builder keeps the last value";
      continue;
    }
    ASSERT_FALSE(ok) << ::testing::PrintToString(c.text);
    EXPECT_EQ(static_cast<int>(error.code), static_cast<int>(c.code)) << ::testing::PrintToString(c.text);
    EXPECT_EQ(error.offset, c.offset) << ::testing::PrintToString(c.text);
  }
}

TEST(JsonParse, RefusesNestingPastItsBound) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  nlohmann::ordered_json out;
  EXPECT_TRUE(disagg::parse_json_into(deep, out, 100));
  EXPECT_FALSE(disagg::parse_json_into(deep, out, 99));
}

}  // namespace
