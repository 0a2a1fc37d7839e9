// disagg/json_value.h — a small, strict, bounded JSON reader for configuration documents.
//
// Core code has no third-party dependencies (the addon builds with nothing but a compiler), yet the
// simulator and planner read nested configuration documents. This is the one JSON reader they share:
// `disagg-engine simulate|plan --config` read the file with it, the addon reads the text that
// JSON.stringify produced with it, so both apply exactly the same field mapping
// (disagg/simulation_config.h).
//
// The grammar is the engine's one JSON parser (json_parse.h: RFC 8259, well-formed UTF-8, nesting
// at most kMaxJsonDepth, numbers as strtod reads them, not finite refused), built by
// JsonValueBuilder, which refuses a repeated object key and keeps numbers as IEEE doubles.
// Documents are at most kMaxJsonBytes. Object members keep their order. Not for hot paths: every
// value owns its children.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "disagg/expected.h"
#include "disagg/json_depth.h"

namespace disagg {

inline constexpr std::size_t kMaxJsonBytes = 64u << 20;

class JsonValueBuilder;

/// One parsed JSON value.
class JsonValue {
 public:
  enum class Type : std::uint8_t { null, boolean, number, string, array, object };
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;
  static JsonValue make_bool(bool b);
  static JsonValue make_number(double d);
  static JsonValue make_string(std::string s);
  static JsonValue make_array(std::vector<JsonValue> items);
  static JsonValue make_object(std::vector<Member> members);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::null; }
  bool is_bool() const { return type_ == Type::boolean; }
  bool is_number() const { return type_ == Type::number; }
  bool is_string() const { return type_ == Type::string; }
  bool is_array() const { return type_ == Type::array; }
  bool is_object() const { return type_ == Type::object; }

  /// Preconditions: the matching type.
  bool as_bool() const { return bool_; }
  double as_number() const { return number_; }
  const std::string& as_string() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<Member>& members() const { return members_; }

  /// The member `key` of an object, or nullptr (also for non-objects). O(members).
  const JsonValue* find(std::string_view key) const;

  /// Compact JSON text (for error messages and tests); doubles shortest round-trip.
  std::string dump() const;

 private:
  friend class JsonValueBuilder;  // builds values in place as the parser reads them

  Type type_ = Type::null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<Member> members_;
};

/// Parses `text` as one JSON document (whitespace around it allowed), json_parse.h's grammar.
/// Failure: a message with the line and column, e.g. "line 3, column 7: expected ':' after an object key".
Expected<JsonValue, std::string> parse_json(std::string_view text);

/// Shortest round-trip text of a double ("1e-05", "0.1", "17638426624"); non-finite values as null.
std::string json_number(double v);

/// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

}  // namespace disagg
