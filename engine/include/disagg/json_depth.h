// json_depth.h — the nesting bound that the servers check before they parse a request body.
//
// nlohmann::json parses nesting of any depth, one heap node per level: a 4 MB body of `[` built a
// 4,000,000-level document and about 250 MB of heap per request. The router and the sim-worker
// call json_depth_within() on every body before a full parse and answer 400 beyond
// kMaxRequestJsonDepth, the bound of the engine's one parser (json_parse.h) and of the router's
// fast scan (request_scan.h). One pass, no allocation, header-only so that every server and fuzz
// target shares it without another library.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace disagg {

/// Deepest nesting of arrays and objects of any JSON document the engine reads (json_parse.h's
/// parser, for requests and configuration alike); the outermost array or object is level 1.
inline constexpr std::size_t kMaxJsonDepth = 64;

/// The same bound for request bodies, checked by this scan before any parse. OpenAI requests need
/// 5 (messages -> message -> content parts -> part -> value).
inline constexpr std::size_t kMaxRequestJsonDepth = kMaxJsonDepth;

/// Whether no array or object in `text`, read as JSON, is nested deeper than `max_depth` levels.
/// Brackets inside strings do not count (a backslash escapes the next byte there, as in JSON). The
/// text need not be valid JSON: a closing bracket with nothing open ends the scan (a parser refuses
/// the text there), and an unterminated string hides the rest, as it would from a parser.
/// Guarantee: a parser that accepts `text`, or refuses it at some byte, never nests deeper than
/// this scan counted before that byte, so `true` bounds the document it builds. O(size), stops at
/// the first level past `max_depth`; no allocation; never throws.
inline bool json_depth_within(std::string_view text, std::size_t max_depth) noexcept {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped byte, whatever it is, does not end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > max_depth) return false;
        break;
      case ']':
      case '}':
        if (depth == 0) return true;  // unbalanced: a parser stops here
        --depth;
        break;
      default: break;
    }
  }
  return true;
}

/// The message of the 400 answer to a body over `max_depth`: names the limit and the fix.
inline std::string json_depth_error(std::size_t max_depth) {
  return "the request body nests arrays and objects more than " + std::to_string(max_depth) +
         " levels deep, the limit; flatten the JSON (OpenAI requests need at most 5 levels)";
}

}  // namespace disagg
