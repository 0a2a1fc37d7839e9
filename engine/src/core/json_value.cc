#include "disagg/json_value.h"

#include "disagg/utf8.h"

#include <charconv>
#include <cmath>
#include <system_error>

namespace disagg {

JsonValue JsonValue::make_bool(bool b) {
  JsonValue v;
  v.type_ = Type::boolean;
  v.bool_ = b;
  return v;
}
JsonValue JsonValue::make_number(double d) {
  JsonValue v;
  v.type_ = Type::number;
  v.number_ = d;
  return v;
}
JsonValue JsonValue::make_string(std::string s) {
  JsonValue v;
  v.type_ = Type::string;
  v.string_ = std::move(s);
  return v;
}
JsonValue JsonValue::make_array(std::vector<JsonValue> items) {
  JsonValue v;
  v.type_ = Type::array;
  v.items_ = std::move(items);
  return v;
}
JsonValue JsonValue::make_object(std::vector<Member> members) {
  JsonValue v;
  v.type_ = Type::object;
  v.members_ = std::move(members);
  return v;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  if (type_ != Type::object) return nullptr;
  for (const Member& m : members_) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[(c >> 4) & 0xf];
          out += hex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string JsonValue::dump() const {
  switch (type_) {
    case Type::null: return "null";
    case Type::boolean: return bool_ ? "true" : "false";
    case Type::number: return json_number(number_);
    case Type::string: return json_quote(string_);
    case Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < items_.size(); ++i) {
        if (i) out += ',';
        out += items_[i].dump();
      }
      return out + "]";
    }
    case Type::object: {
      std::string out = "{";
      for (std::size_t i = 0; i < members_.size(); ++i) {
        if (i) out += ',';
        out += json_quote(members_[i].first);
        out += ':';
        out += members_[i].second.dump();
      }
      return out + "}";
    }
  }
  return "null";
}

namespace {

// Recursive descent over the text; the first error wins and stops the parse.
class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Expected<JsonValue, std::string> document() {
    skip_ws();
    JsonValue v;
    if (!value(v, 0)) return unexpected(error_);
    skip_ws();
    if (pos_ != s_.size()) {
      fail("unexpected text after the JSON value");
      return unexpected(error_);
    }
    return v;
  }

 private:
  bool fail(std::string_view what) {
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    error_ = "line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + std::string(what);
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("invalid literal; expected true, false or null");
    pos_ += word.size();
    return true;
  }

  bool value(JsonValue& out, std::size_t depth) {
    if (depth > kMaxJsonDepth) return fail("nesting deeper than 64 levels");
    if (pos_ >= s_.size()) return fail("unexpected end of input; expected a value");
    const char c = s_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      std::string str;
      if (!string(str)) return false;
      out = JsonValue::make_string(std::move(str));
      return true;
    }
    if (c == 't') {
      if (!literal("true")) return false;
      out = JsonValue::make_bool(true);
      return true;
    }
    if (c == 'f') {
      if (!literal("false")) return false;
      out = JsonValue::make_bool(false);
      return true;
    }
    if (c == 'n') {
      if (!literal("null")) return false;
      out = JsonValue();
      return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    return fail(std::string("unexpected character '") + c + "'; expected a value");
  }

  bool number(JsonValue& out) {
    const std::size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const std::size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - d;
    };
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return fail("invalid number");
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return fail("invalid number: digits expected after '.'");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) return fail("invalid number: digits expected in the exponent");
    }
    double d = 0;
    const auto res = std::from_chars(s_.data() + start, s_.data() + pos_, d);
    if (res.ec != std::errc() || !std::isfinite(d)) {
      pos_ = start;
      return fail("number out of range");
    }
    out = JsonValue::make_number(d);
    return true;
  }

  bool hex4(std::uint32_t& out) {
    if (pos_ + 4 > s_.size()) return fail("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      out <<= 4;
      if (h >= '0' && h <= '9') out |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') out |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') out |= static_cast<std::uint32_t>(h - 'A' + 10);
      else return fail("invalid hex digit in a \\u escape");
    }
    return true;
  }

  bool string(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= s_.size()) return fail("unterminated string");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string; escape it");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      if (++pos_ >= s_.size()) return fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            std::uint32_t lo = 0;
            if (s_.substr(pos_, 2) != "\\u") return fail("lone high surrogate in a \\u escape");
            pos_ += 2;
            if (!hex4(lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF) return fail("invalid low surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return fail("lone low surrogate in a \\u escape");
          }
          append_utf8(static_cast<char32_t>(cp), out);
          break;
        }
        default: return fail(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  bool array(JsonValue& out, std::size_t depth) {
    ++pos_;
    std::vector<JsonValue> items;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      out = JsonValue::make_array(std::move(items));
      return true;
    }
    while (true) {
      skip_ws();
      JsonValue v;
      if (!value(v, depth + 1)) return false;
      items.push_back(std::move(v));
      skip_ws();
      if (pos_ >= s_.size()) return fail("unterminated array; expected ',' or ']'");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        out = JsonValue::make_array(std::move(items));
        return true;
      }
      return fail("expected ',' or ']' in an array");
    }
  }

  bool object(JsonValue& out, std::size_t depth) {
    ++pos_;
    std::vector<JsonValue::Member> members;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      out = JsonValue::make_object(std::move(members));
      return true;
    }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a string key in an object");
      const std::size_t key_pos = pos_;
      std::string key;
      if (!string(key)) return false;
      for (const auto& m : members) {
        if (m.first == key) {
          pos_ = key_pos;
          return fail("duplicate key \"" + key + "\"");
        }
      }
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':' after an object key");
      ++pos_;
      skip_ws();
      JsonValue v;
      if (!value(v, depth + 1)) return false;
      members.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (pos_ >= s_.size()) return fail("unterminated object; expected ',' or '}'");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        out = JsonValue::make_object(std::move(members));
        return true;
      }
      return fail("expected ',' or '}' in an object");
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::string error_;
};

}  // namespace

Expected<JsonValue, std::string> parse_json(std::string_view text) {
  if (text.size() > kMaxJsonBytes) {
    return unexpected("the document has " + std::to_string(text.size()) + " bytes; at most " +
                      std::to_string(kMaxJsonBytes) + " are accepted");
  }
  return Parser(text).document();
}

}  // namespace disagg
