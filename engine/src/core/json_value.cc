#include "disagg/json_value.h"

#include "disagg/json_parse.h"

#include <charconv>
#include <cmath>

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

// Builds JsonValues for json_parse.h's parser: numbers as doubles, a repeated key refused.
class JsonValueBuilder {
 public:
  using Value = JsonValue;
  static constexpr bool kNulEndsInput = false;

  void null(JsonValue& v) { v = JsonValue(); }
  void boolean(JsonValue& v, bool b) { v = JsonValue::make_bool(b); }
  bool number(JsonValue& v, const JsonNumberText& n) {
    double d = 0;
    if (!json_number_value(n.text, d)) return false;
    v = JsonValue::make_number(d);
    return true;
  }
  std::string& string(JsonValue& v) {
    v = JsonValue::make_string(std::string());
    return v.string_;
  }
  void object(JsonValue& v) { v = JsonValue::make_object({}); }
  JsonValue* member(JsonValue& object, const std::string& key) {
    for (const JsonValue::Member& m : object.members_) {
      if (m.first == key) {
        duplicate_ = key;
        return nullptr;
      }
    }
    return &object.members_.emplace_back(key, JsonValue()).second;
  }
  void array(JsonValue& v) { v = JsonValue::make_array({}); }
  JsonValue& element(JsonValue& array) { return array.items_.emplace_back(); }

  const std::string& duplicate() const { return duplicate_; }

 private:
  std::string duplicate_;  // the key member() refused
};

namespace {

// What went wrong, in words, with what stands at the offset where that helps.
std::string describe(JsonErrc code, std::string_view text, std::size_t at, const JsonValueBuilder& builder) {
  const bool at_end = at >= text.size();
  const auto byte_there = [&] {
    return at_end ? std::string("end of input") : std::string("'").append(1, text[at]).append("'");
  };
  switch (code) {
    case JsonErrc::none: break;
    case JsonErrc::partial_bom: return "a partial UTF-8 byte order mark";
    case JsonErrc::expected_value:
      return at_end ? "unexpected end of input; expected a value"
                    : std::string("unexpected character ") + byte_there() + "; expected a value";
    case JsonErrc::invalid_literal: return "invalid literal; expected true, false or null";
    case JsonErrc::invalid_number: return "invalid number";
    case JsonErrc::invalid_fraction: return "invalid number: digits expected after '.'";
    case JsonErrc::invalid_exponent: return "invalid number: digits expected in the exponent";
    case JsonErrc::number_out_of_range: return "number out of range";
    case JsonErrc::unterminated_string: return "unterminated string";
    case JsonErrc::control_in_string: return "control character in a string; escape it";
    case JsonErrc::invalid_escape: return std::string("invalid escape '\\").append(1, text[at]).append("'");
    case JsonErrc::invalid_unicode_escape: return "invalid \\u escape; four hex digits expected";
    case JsonErrc::lone_high_surrogate: return "lone high surrogate in a \\u escape";
    case JsonErrc::lone_low_surrogate: return "lone low surrogate in a \\u escape";
    case JsonErrc::invalid_utf8: return "a string is not valid UTF-8";
    case JsonErrc::expected_key: return "expected a string key in an object";
    case JsonErrc::expected_colon: return "expected ':' after an object key";
    case JsonErrc::expected_array_separator:
      return at_end ? "unterminated array; expected ',' or ']'" : "expected ',' or ']' in an array";
    case JsonErrc::expected_object_separator:
      return at_end ? "unterminated object; expected ',' or '}'" : "expected ',' or '}' in an object";
    case JsonErrc::too_deep: return std::string("nesting deeper than ") + std::to_string(kMaxJsonDepth) + " levels";
    case JsonErrc::trailing_text: return "unexpected text after the JSON value";
    case JsonErrc::duplicate_key: return std::string("duplicate key ") + json_quote(builder.duplicate());
  }
  return "invalid JSON";
}

}  // namespace

Expected<JsonValue, std::string> parse_json(std::string_view text) {
  if (text.size() > kMaxJsonBytes) {
    return unexpected("the document has " + std::to_string(text.size()) + " bytes; at most " +
                      std::to_string(kMaxJsonBytes) + " are accepted");
  }
  JsonValueBuilder builder;
  JsonValue out;
  JsonParseError error;
  if (parse_json_with(text, builder, out, static_cast<int>(kMaxJsonDepth), &error)) return out;
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < error.offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return unexpected(std::string("line ") + std::to_string(line) + ", column " + std::to_string(col) + ": " +
                    describe(error.code, text, error.offset, builder));
}

}  // namespace disagg
