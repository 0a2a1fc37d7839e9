// The core's JSON reader: values, escapes, limits and error positions.
#include "disagg/json_value.h"

#include <gtest/gtest.h>

#include <string>

namespace disagg {
namespace {

TEST(JsonValue, ParsesNestedDocumentsInOrder) {
  auto v = parse_json(R"( {"a": [1, -2.5e3, true, false, null], "b": {"c": "x\"y\u00e9\ud83d\ude00"}} )");
  ASSERT_TRUE(v) << v.error();
  ASSERT_TRUE(v->is_object());
  ASSERT_EQ(v->members().size(), 2u);
  EXPECT_EQ(v->members()[0].first, "a");
  const JsonValue* a = v->find("a");
  ASSERT_TRUE(a && a->is_array());
  EXPECT_EQ(a->items()[1].as_number(), -2500);
  EXPECT_TRUE(a->items()[2].as_bool());
  EXPECT_TRUE(a->items()[4].is_null());
  EXPECT_EQ(v->find("b")->find("c")->as_string(), "x\"y\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(v->find("missing"), nullptr);
}

TEST(JsonValue, DumpRoundTrips) {
  const std::string text = R"({"k":[1,0.1,17638426624,"a\nb"],"e":{}})";
  auto v = parse_json(text);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->dump(), text);
}

TEST(JsonValue, RefusesMalformedInputWithPosition) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c :
       {Case{"{\"a\" 1}", "line 1, column 6: expected ':'"},
        Case{"{\"a\": 1,\n \"a\": 2}", "line 2, column 2: duplicate key \"a\""}, Case{"[1, 2", "unterminated array"},
        Case{"01", "unexpected text after"}, Case{"1e999", "number out of range"}, Case{"\"\\x\"", "invalid escape"},
        Case{"[tru]", "invalid literal"}, Case{"", "unexpected end of input"},
        Case{"\"\\ud800\"", "lone high surrogate"}, Case{"{} {}", "unexpected text after"}}) {
    auto v = parse_json(c.text);
    ASSERT_FALSE(v) << c.text;
    EXPECT_NE(v.error().find(c.message), std::string::npos) << c.text << " -> " << v.error();
  }
}

TEST(JsonValue, ReadsTheEnginesOneGrammar) {
  // GIVEN what json_parse.h's grammar decides for every document the engine reads
  // THEN a configuration file gets the same rules as a request body: UTF-8 checked, a byte order
  // mark skipped, numbers as strtod reads them (underflow is 0), nothing after the value
  auto bad_utf8 = parse_json("{\"model\": \"\xc0\xaf\"}");
  ASSERT_FALSE(bad_utf8);
  EXPECT_EQ(bad_utf8.error(), "line 1, column 12: a string is not valid UTF-8");
  auto bom = parse_json("\xef\xbb\xbf{\"a\": 1}");
  ASSERT_TRUE(bom) << bom.error();
  EXPECT_EQ(bom->dump(), "{\"a\":1}");
  auto tiny = parse_json("[1e-400, 2.5e-324]");
  ASSERT_TRUE(tiny) << tiny.error();
  EXPECT_EQ(tiny->items()[0].as_number(), 0.0);
  auto nul = parse_json(std::string("{}\0", 3));
  ASSERT_FALSE(nul);
  EXPECT_EQ(nul.error(), "line 1, column 3: unexpected text after the JSON value");
}

TEST(JsonValue, BoundsNesting) {
  std::string deep(100, '[');
  deep += std::string(100, ']');
  auto v = parse_json(deep);
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().find("nesting deeper than 64"), std::string::npos);
  // AND the bound is kMaxJsonDepth arrays or objects, the outermost level 1, as for requests
  EXPECT_TRUE(parse_json(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']')));
  auto one_more = parse_json(std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']'));
  ASSERT_FALSE(one_more);
  EXPECT_EQ(one_more.error(), "line 1, column 65: nesting deeper than 64 levels");
}

}  // namespace
}  // namespace disagg
