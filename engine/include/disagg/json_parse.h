// json_parse.h — a request body's JSON document, built as nlohmann::json would build it, faster.
//
// nlohmann's lexer reads one byte at a time and copies each into two buffers (the token and, for
// error messages, the token's text): on the router's chat path (13 KB bodies of escaped markdown)
// parsing was a fifth of its CPU (bench/notes/router-precise.md). parse_json() builds the same
// document from the same bytes: strings are copied in runs found eight bytes at a time, numbers
// are converted once, and there is no error text (the servers answer "not valid JSON" either way).
//
// Contract: for every input, parse_json(text, out) succeeds exactly when
// `BasicJson::parse(text, nullptr, false)` gives a document, and then `out` equals it, member order
// included (for nlohmann::ordered_json): RFC 8259 with nlohmann's choices, which are
//   - a UTF-8 byte order mark is skipped at the very start (and a partial one is an error);
//   - strings must be well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF),
//     with no raw control bytes; `\u` escapes must pair surrogates;
//   - an integer without fraction or exponent is an int64 when negative, a uint64 otherwise, and a
//     double when it does not fit; a double that is not finite (1e400) is an error;
//   - a repeated object key keeps the first key's position and the last value;
//   - nothing but whitespace (space, tab, CR, LF) may follow the value, up to the end or a NUL
//     byte (nlohmann's lexer reads NUL as the end of its input; what follows it is not read);
//     no comments.
// The differential test (engine/tests/router/json_parse_test.cc) and the request fuzz target check
// it against nlohmann. Nesting deeper than `max_depth` levels is refused (the stack is bounded);
// callers check kMaxRequestJsonDepth (json_depth.h) first, as before.
// Header-only (templated on the document type); no state; never throws except std::bad_alloc.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <charconv>
#include <string>
#include <string_view>

#include "disagg/utf8.h"

namespace disagg {

namespace json_parse_detail {

template <class Json>
class Parser {
 public:
  Parser(std::string_view text, int max_depth) : p_(text.data()), end_(text.data() + text.size()), max_depth_(max_depth) {}

  bool document(Json& out) {
    if (p_ != end_ && byte(*p_) == 0xEF) {
      if (end_ - p_ < 3 || byte(p_[1]) != 0xBB || byte(p_[2]) != 0xBF) return false;
      p_ += 3;
    }
    skip_ws();
    if (!value(out, 0)) return false;
    skip_ws();
    // nlohmann's lexer reads a NUL byte as the end of its input (for C strings), wherever it stands.
    return p_ == end_ || *p_ == '\0';
  }

 private:
  using String = typename Json::string_t;
  using Object = typename Json::object_t;
  using Array = typename Json::array_t;

  static unsigned byte(char c) { return static_cast<unsigned char>(c); }

  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool value(Json& out, int depth) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': return object(out, depth + 1);
      case '[': return array(out, depth + 1);
      case '"': {
        out = String();
        return string(out.template get_ref<String&>());
      }
      case 't': return literal("true", 4) && (out = true, true);
      case 'f': return literal("false", 5) && (out = false, true);
      case 'n': return literal("null", 4) && (out = nullptr, true);
      default: return number(out);
    }
  }

  bool literal(const char* word, std::ptrdiff_t n) {
    if (end_ - p_ < n || std::memcmp(p_, word, static_cast<std::size_t>(n)) != 0) return false;
    p_ += n;
    return true;
  }

  bool object(Json& out, int depth) {
    if (depth > max_depth_) return false;
    ++p_;  // '{'
    out = Json::object();
    Object& members = out.template get_ref<Object&>();
    skip_ws();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    String key;
    for (;;) {
      if (p_ == end_ || *p_ != '"') return false;
      key.clear();
      if (!string(key)) return false;
      skip_ws();
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      skip_ws();
      // As nlohmann's DOM builder does: operator[] keeps a repeated key's first position, and the
      // value parsed into it replaces the earlier one.
      if (!value(members[key], depth)) return false;
      skip_ws();
      if (p_ == end_) return false;
      if (*p_ == '}') {
        ++p_;
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
      skip_ws();
    }
  }

  bool array(Json& out, int depth) {
    if (depth > max_depth_) return false;
    ++p_;  // '['
    out = Json::array();
    Array& items = out.template get_ref<Array&>();
    skip_ws();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      items.emplace_back();
      if (!value(items.back(), depth)) return false;
      skip_ws();
      if (p_ == end_) return false;
      if (*p_ == ']') {
        ++p_;
        return true;
      }
      if (*p_ != ',') return false;
      ++p_;
      skip_ws();
    }
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  bool number(Json& out) {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ != end_ && digit(*p_)) ++p_;
    } else {
      return false;
    }
    bool integer = true;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || !digit(*p_)) return false;
      while (p_ != end_ && digit(*p_)) ++p_;
      integer = false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !digit(*p_)) return false;
      while (p_ != end_ && digit(*p_)) ++p_;
      integer = false;
    }
    if (integer) {
      if (negative) {
        std::int64_t v = 0;
        const auto r = std::from_chars(start, p_, v);
        if (r.ec == std::errc() && r.ptr == p_) {
          out = static_cast<typename Json::number_integer_t>(v);
          return true;
        }
      } else {
        std::uint64_t v = 0;
        const auto r = std::from_chars(start, p_, v);
        if (r.ec == std::errc() && r.ptr == p_) {
          out = static_cast<typename Json::number_unsigned_t>(v);
          return true;
        }
      }
      // Out of the integer's range: a double, as nlohmann falls back to strtod.
    }
    // strtod, as nlohmann converts (correctly rounded; underflow gives a finite value). The
    // engine never changes the C locale, so '.' is the decimal point.
    const auto n = static_cast<std::size_t>(p_ - start);
    char small[64];
    std::string large;
    const char* text = small;
    if (n < sizeof small) {
      std::memcpy(small, start, n);
      small[n] = '\0';
    } else {
      large.assign(start, n);
      text = large.c_str();
    }
    const double d = std::strtod(text, nullptr);
    if (!std::isfinite(d)) return false;
    out = static_cast<typename Json::number_float_t>(d);
    return true;
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

  bool escape(String& s) {
    ++p_;  // '\\'
    if (p_ == end_) return false;
    const char c = *p_++;
    switch (c) {
      case '"': s.push_back('"'); return true;
      case '\\': s.push_back('\\'); return true;
      case '/': s.push_back('/'); return true;
      case 'b': s.push_back('\b'); return true;
      case 'f': s.push_back('\f'); return true;
      case 'n': s.push_back('\n'); return true;
      case 'r': s.push_back('\r'); return true;
      case 't': s.push_back('\t'); return true;
      case 'u': break;
      default: return false;
    }
    const int u = code_unit();
    if (u < 0) return false;
    std::uint32_t cp = static_cast<std::uint32_t>(u);
    if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a low surrogate first
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
      p_ += 2;
      const int low = code_unit();
      if (low < 0xDC00 || low > 0xDFFF) return false;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<std::uint32_t>(low) - 0xDC00);
    }
    append_utf8(static_cast<char32_t>(cp), s);
    return true;
  }

  // One UTF-8 sequence of 2 to 4 bytes, well-formed as RFC 3629 (and nlohmann) define it.
  bool utf8(String& s) {
    bool complete = false;
    const std::size_t n = utf8_prefix(std::string_view(p_, static_cast<std::size_t>(end_ - p_)), 0, complete);
    if (!complete) return false;
    s.append(p_, n);
    p_ += n;
    return true;
  }

  bool string(String& s) {
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
      if (p_ == end_) return false;
      const unsigned c = byte(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        if (!escape(s)) return false;
      } else if (!utf8(s)) {
        return false;
      }
    }
  }

  const char* p_;
  const char* end_;
  int max_depth_;
};

}  // namespace json_parse_detail

/// Parses `text` into `out` as `Json::parse(text, nullptr, false)` would (see the contract above);
/// false where that would give a discarded value, or nesting passes `max_depth` levels (`out` is
/// then unspecified).
template <class Json>
bool parse_json(std::string_view text, Json& out, int max_depth = 1024) {
  return json_parse_detail::Parser<Json>(text, max_depth).document(out);
}

}  // namespace disagg
