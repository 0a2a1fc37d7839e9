// json_parse.h — the engine's one JSON grammar, with a builder per document type.
//
// Every JSON document the engine reads goes through this parser: request bodies into nlohmann
// documents (the router and the sim-worker, NlohmannBuilder below), configuration documents into
// JsonValue (`disagg-engine simulate|plan --config` and the addon, json_value.h). So the grammar,
// the UTF-8 rule, the number rule and the nesting bound are written once; what a builder decides is
// only what its document type cannot hold alike (a repeated key) and the one nlohmann quirk that
// request bodies keep.
//
// The grammar is RFC 8259 with nlohmann's choices, which are:
//   - a UTF-8 byte order mark is skipped at the very start (and a partial one is an error);
//   - strings must be well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF),
//     with no raw control bytes; `\u` escapes must pair surrogates;
//   - a number is read as strtod reads it (correctly rounded; underflow gives a finite value), and
//     one that is not finite (1e400) is an error; an integer without fraction or exponent is handed
//     to the builder as such, which may keep it exactly;
//   - arrays and objects nest at most `max_depth` levels (default kMaxJsonDepth, json_depth.h; the
//     outermost is level 1), so the parser's stack is bounded;
//   - nothing but whitespace (space, tab, CR, LF) may follow the value; no comments.
// What each builder decides:
//   - a repeated object key: NlohmannBuilder keeps the first key's position and the last value (as
//     nlohmann's DOM builder does); JsonValueBuilder refuses it (a configuration document with two
//     values for one field is a mistake to report, not to resolve);
//   - NlohmannBuilder reads a NUL byte after the value as the end of the input, as nlohmann's lexer
//     does (for C strings); for JsonValueBuilder it is text after the value.
// Contract for NlohmannBuilder: for every input, parse_json_into(text, out) succeeds exactly when
// `BasicJson::parse(text, nullptr, false)` gives a document nested at most `max_depth` levels, and
// then `out` equals it, member order and number types included (nlohmann::ordered_json keeps the
// order). engine/tests/core/json_parse_test.cc and the request fuzz target check it against
// nlohmann, and check the two builders against each other.
//
// Why not nlohmann's parser for requests: its lexer reads one byte at a time and copies each into
// two buffers; on the router's chat path (13 KB bodies of escaped markdown) parsing was a fifth of
// its CPU (bench/notes/router-precise.md). Here strings are copied in runs found eight bytes at a
// time and numbers are converted once.
//
// Failure reports a JsonErrc and the byte offset it was found at (no text is built: the servers
// answer "not valid JSON" either way; json_value.cc turns it into "line L, column C: ..."). The
// first error found wins. Header-only (templated on the builder); no state; never throws except
// std::bad_alloc from the builder.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <charconv>
#include <string>
#include <string_view>
#include <type_traits>

#include "disagg/json_depth.h"
#include "disagg/utf8.h"

namespace disagg {

/// Why a parse failed, at JsonParseError::offset.
enum class JsonErrc : std::uint8_t {
  none,
  partial_bom,                // EF not followed by BB BF at the start
  expected_value,             // a byte (or the end) where a value must start
  invalid_literal,            // t/f/n not spelling true, false or null
  invalid_number,             // a sign without digits, "01" style leftovers are trailing_text
  invalid_fraction,           // no digit after '.'
  invalid_exponent,           // no digit in the exponent
  number_out_of_range,        // not finite as a double (the offset is the number's first byte)
  unterminated_string,        // the end inside a string
  control_in_string,          // a raw byte below 0x20 inside a string
  invalid_escape,             // '\' followed by anything but " \ / b f n r t u (the offset is the byte after '\')
  invalid_unicode_escape,     // \u not followed by four hex digits
  lone_high_surrogate,        // \uD800-\uDBFF not followed by \uDC00-\uDFFF
  lone_low_surrogate,         // \uDC00-\uDFFF first
  invalid_utf8,               // a byte sequence that is not well-formed UTF-8
  expected_key,               // an object member not starting with '"'
  expected_colon,             // no ':' after a key
  expected_array_separator,   // neither ',' nor ']' after an element
  expected_object_separator,  // neither ',' nor '}' after a member
  too_deep,                   // an array or object past max_depth (the offset is its bracket)
  trailing_text,              // something other than whitespace after the value
  duplicate_key,              // the builder refused a repeated key (the offset is the key's quote)
};

/// Where and why a parse failed.
struct JsonParseError {
  JsonErrc code = JsonErrc::none;
  std::size_t offset = 0;
};

/// A number's text as the grammar read it, for the builder to convert.
struct JsonNumberText {
  std::string_view text;
  bool integer = false;  // no fraction, no exponent
  bool negative = false;
};

/// The number rule: `text` (a JSON number) as strtod reads it; false when that is not finite.
/// The engine never changes the C locale, so '.' is the decimal point.
inline bool json_number_value(std::string_view text, double& out) {
  char small[64];
  std::string large;
  const char* s = small;
  if (text.size() < sizeof small) {
    std::memcpy(small, text.data(), text.size());
    small[text.size()] = '\0';
  } else {
    large.assign(text);
    s = large.c_str();
  }
  out = std::strtod(s, nullptr);
  return std::isfinite(out);
}

namespace json_parse_detail {

// Recursive descent; the builder makes each value in place (Builder below states its interface).
template <class Builder>
class Parser {
 public:
  using Value = typename Builder::Value;

  Parser(std::string_view text, Builder& builder, int max_depth)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), b_(builder), max_depth_(max_depth) {}

  bool document(Value& out) {
    if (p_ != end_ && byte(*p_) == 0xEF) {
      if (end_ - p_ < 3 || byte(p_[1]) != 0xBB || byte(p_[2]) != 0xBF) return fail(JsonErrc::partial_bom);
      p_ += 3;
    }
    skip_ws();
    if (!value(out, 0)) return false;
    skip_ws();
    if (p_ == end_ || (Builder::kNulEndsInput && *p_ == '\0')) return true;
    return fail(JsonErrc::trailing_text);
  }

  JsonParseError error() const { return error_; }

 private:
  static unsigned byte(char c) { return static_cast<unsigned char>(c); }

  bool fail(JsonErrc code) { return fail_at(code, p_); }
  bool fail_at(JsonErrc code, const char* at) {
    error_ = JsonParseError{code, static_cast<std::size_t>(at - begin_)};
    return false;
  }

  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool value(Value& out, int depth) {
    if (p_ == end_) return fail(JsonErrc::expected_value);
    switch (*p_) {
      case '{': return object(out, depth + 1);
      case '[': return array(out, depth + 1);
      case '"': return string(b_.string(out));
      case 't': return literal("true", 4) && (b_.boolean(out, true), true);
      case 'f': return literal("false", 5) && (b_.boolean(out, false), true);
      case 'n': return literal("null", 4) && (b_.null(out), true);
      default: return number(out);
    }
  }

  bool literal(const char* word, std::ptrdiff_t n) {
    if (end_ - p_ < n || std::memcmp(p_, word, static_cast<std::size_t>(n)) != 0)
      return fail(JsonErrc::invalid_literal);
    p_ += n;
    return true;
  }

  bool object(Value& out, int depth) {
    if (depth > max_depth_) return fail(JsonErrc::too_deep);
    ++p_;  // '{'
    b_.object(out);
    skip_ws();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    std::string& key = key_;
    for (;;) {
      if (p_ == end_ || *p_ != '"') return fail(JsonErrc::expected_key);
      const char* key_at = p_;
      key.clear();
      if (!string(key)) return false;
      skip_ws();
      if (p_ == end_ || *p_ != ':') return fail(JsonErrc::expected_colon);
      ++p_;
      skip_ws();
      Value* slot = b_.member(out, key);
      if (slot == nullptr) return fail_at(JsonErrc::duplicate_key, key_at);
      if (!value(*slot, depth)) return false;
      skip_ws();
      if (p_ != end_ && *p_ == '}') {
        ++p_;
        return true;
      }
      if (p_ == end_ || *p_ != ',') return fail(JsonErrc::expected_object_separator);
      ++p_;
      skip_ws();
    }
  }

  bool array(Value& out, int depth) {
    if (depth > max_depth_) return fail(JsonErrc::too_deep);
    ++p_;  // '['
    b_.array(out);
    skip_ws();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      if (!value(b_.element(out), depth)) return false;
      skip_ws();
      if (p_ != end_ && *p_ == ']') {
        ++p_;
        return true;
      }
      if (p_ == end_ || *p_ != ',') return fail(JsonErrc::expected_array_separator);
      ++p_;
      skip_ws();
    }
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  bool number(Value& out) {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_) return fail(JsonErrc::invalid_number);
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ != end_ && digit(*p_)) ++p_;
    } else {
      return negative ? fail(JsonErrc::invalid_number) : fail(JsonErrc::expected_value);
    }
    bool integer = true;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || !digit(*p_)) return fail(JsonErrc::invalid_fraction);
      while (p_ != end_ && digit(*p_)) ++p_;
      integer = false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !digit(*p_)) return fail(JsonErrc::invalid_exponent);
      while (p_ != end_ && digit(*p_)) ++p_;
      integer = false;
    }
    const JsonNumberText text{std::string_view(start, static_cast<std::size_t>(p_ - start)), integer, negative};
    return b_.number(out, text) || fail_at(JsonErrc::number_out_of_range, start);
  }

  // Whether any of the 8 bytes in `w` ends a plain run: below 0x20, '"', '\\' or 0x80 and above.
  static bool special_in(std::uint64_t w) {
    constexpr std::uint64_t ones = 0x0101010101010101ULL;
    constexpr std::uint64_t highs = 0x8080808080808080ULL;
    const auto zero_in = [](std::uint64_t x) { return ((x - ones) & ~x & highs) != 0; };
    // Below 0x20 (exact for bytes under 0x80; bytes at 0x80 and above are caught by `w & highs`).
    const bool low = ((w - ones * 0x20) & ~w & highs) != 0;
    return low || (w & highs) != 0 || zero_in(w ^ (ones * '"')) || zero_in(w ^ (ones * '\\'));
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Four hex digits after "\u"; -1 when they are not.
  int code_unit() {
    if (end_ - p_ < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = hex(p_[i]);
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    p_ += 4;
    return v;
  }

  bool escape(std::string& s) {
    ++p_;  // '\\'
    if (p_ == end_) return fail(JsonErrc::unterminated_string);
    const char c = *p_;
    switch (c) {
      case '"': s.push_back('"'); break;
      case '\\': s.push_back('\\'); break;
      case '/': s.push_back('/'); break;
      case 'b': s.push_back('\b'); break;
      case 'f': s.push_back('\f'); break;
      case 'n': s.push_back('\n'); break;
      case 'r': s.push_back('\r'); break;
      case 't': s.push_back('\t'); break;
      case 'u': break;
      default: return fail(JsonErrc::invalid_escape);
    }
    ++p_;
    if (c != 'u') return true;
    const int u = code_unit();
    if (u < 0) return fail(JsonErrc::invalid_unicode_escape);
    std::uint32_t cp = static_cast<std::uint32_t>(u);
    if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(JsonErrc::lone_low_surrogate);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return fail(JsonErrc::lone_high_surrogate);
      p_ += 2;
      const int low = code_unit();
      if (low < 0) return fail(JsonErrc::invalid_unicode_escape);
      if (low < 0xDC00 || low > 0xDFFF) return fail(JsonErrc::lone_high_surrogate);
      cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<std::uint32_t>(low) - 0xDC00);
    }
    append_utf8(static_cast<char32_t>(cp), s);
    return true;
  }

  // One UTF-8 sequence of 2 to 4 bytes, well-formed as RFC 3629 (and nlohmann) define it.
  bool utf8(std::string& s) {
    bool complete = false;
    const std::size_t n = utf8_prefix(std::string_view(p_, static_cast<std::size_t>(end_ - p_)), 0, complete);
    if (!complete) return fail(JsonErrc::invalid_utf8);
    s.append(p_, n);
    p_ += n;
    return true;
  }

  bool string(std::string& s) {
    ++p_;  // '"'
    for (;;) {
      const char* run = p_;
      while (end_ - p_ >= 8) {
        std::uint64_t w;
        std::memcpy(&w, p_, 8);
        if (special_in(w)) break;
        p_ += 8;
      }
      while (p_ != end_) {
        const unsigned c = byte(*p_);
        if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
        ++p_;
      }
      s.append(run, static_cast<std::size_t>(p_ - run));
      if (p_ == end_) return fail(JsonErrc::unterminated_string);
      const unsigned c = byte(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return fail(JsonErrc::control_in_string);
      if (c == '\\') {
        if (!escape(s)) return false;
      } else if (!utf8(s)) {
        return false;
      }
    }
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  Builder& b_;
  int max_depth_;
  std::string key_;  // one buffer for every key of the document
  JsonParseError error_;
};

}  // namespace json_parse_detail

// A Builder makes its document type's values in place, as the parser reads them:
//   using Value = ...;                      the document type
//   static constexpr bool kNulEndsInput;    whether a NUL byte after the value ends the input
//   void null(Value&);  void boolean(Value&, bool);
//   bool number(Value&, const JsonNumberText&);   false: not representable (number_out_of_range)
//   std::string& string(Value&);             makes it an empty string; the parser appends to it
//   void object(Value&);  Value* member(Value& object, const std::string& key);  nullptr refuses
//   void array(Value&);   Value& element(Value& array);   a new last element
// A reference the builder returns is written before the next call on the same container.

/// Parses `text` into `out` with `builder` (the grammar above); on failure returns false, fills
/// `*error` when given, and leaves `out` unspecified.
template <class Builder>
bool parse_json_with(std::string_view text, Builder& builder, typename Builder::Value& out,
                     int max_depth = static_cast<int>(kMaxJsonDepth), JsonParseError* error = nullptr) {
  json_parse_detail::Parser<Builder> parser(text, builder, max_depth);
  if (parser.document(out)) return true;
  if (error != nullptr) *error = parser.error();
  return false;
}

/// The builder of an nlohmann::basic_json document (nlohmann::json, nlohmann::ordered_json), as
/// nlohmann's own parser builds it: integers as int64 when negative, uint64 otherwise, a double
/// when they do not fit; a repeated key keeps its first position and the last value.
template <class Json>
struct NlohmannBuilder {
  using Value = Json;
  static_assert(std::is_same_v<typename Json::string_t, std::string>, "the parser appends to std::string");
  static constexpr bool kNulEndsInput = true;

  void null(Json& v) { v = nullptr; }
  void boolean(Json& v, bool b) { v = b; }
  bool number(Json& v, const JsonNumberText& n) {
    const char* first = n.text.data();
    const char* last = first + n.text.size();
    if (n.integer) {
      if (n.negative) {
        std::int64_t i = 0;
        const auto r = std::from_chars(first, last, i);
        if (r.ec == std::errc() && r.ptr == last) {
          v = static_cast<typename Json::number_integer_t>(i);
          return true;
        }
      } else {
        std::uint64_t u = 0;
        const auto r = std::from_chars(first, last, u);
        if (r.ec == std::errc() && r.ptr == last) {
          v = static_cast<typename Json::number_unsigned_t>(u);
          return true;
        }
      }
      // Out of the integer's range: a double, as nlohmann falls back to strtod.
    }
    double d = 0;
    if (!json_number_value(n.text, d)) return false;
    v = static_cast<typename Json::number_float_t>(d);
    return true;
  }
  std::string& string(Json& v) {
    v = std::string();
    return v.template get_ref<std::string&>();
  }
  void object(Json& v) { v = Json::object(); }
  Json* member(Json& object, const std::string& key) {
    // operator[] keeps a repeated key's first position; the value parsed into it replaces the last.
    return &object.template get_ref<typename Json::object_t&>()[key];
  }
  void array(Json& v) { v = Json::array(); }
  Json& element(Json& array) { return array.template get_ref<typename Json::array_t&>().emplace_back(); }
};

/// Parses `text` into an nlohmann document `out` as `Json::parse(text, nullptr, false)` would (see
/// the contract above); false where that would give a discarded value, or nesting passes
/// `max_depth` levels (`out` is then unspecified).
template <class Json>
bool parse_json_into(std::string_view text, Json& out, int max_depth = static_cast<int>(kMaxJsonDepth)) {
  NlohmannBuilder<Json> builder;
  return parse_json_with(text, builder, out, max_depth);
}

}  // namespace disagg
