// libFuzzer target for the request-body depth check (disagg/json_depth.h), which the router and
// the sim-worker run before any full parse. Built with clang and -DDISAGG_FUZZ=ON (engine/fuzz.sh).
// The first byte picks the limit (0..15); the rest is the body. Invariants, against nlohmann's own
// parser (SAX, so that no document is built):
//   - bound: when the check passes, the parser never opens a container deeper than the limit,
//     whether it accepts the text or refuses it part-way;
//   - exact on valid JSON: a text the parser accepts passes at its own maximum depth and fails one
//     level below it (up to the first NUL byte, where nlohmann's lexer stops).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "disagg/json_depth.h"

namespace {

using json = nlohmann::json;

// Tracks the nesting depth the parser reaches; never stops it.
struct DepthSax {
  std::size_t depth = 0;
  std::size_t max_depth = 0;
  bool error = false;
  bool open() {
    if (++depth > max_depth) max_depth = depth;
    return true;
  }
  bool close() {
    --depth;
    return true;
  }
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return open(); }
  bool key(std::string&) { return true; }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    error = true;
    return false;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t limit = data[0] & 15u;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool within = disagg::json_depth_within(text, limit);
  DepthSax sax;
  const bool parsed = json::sax_parse(text, &sax, json::input_format_t::json, /*strict=*/true) && !sax.error;
  if (within && sax.max_depth > limit) __builtin_trap();  // the check let a deeper parse through
  if (parsed) {
    // nlohmann's lexer takes a NUL byte for the end of the input, so it parsed the text up to the
    // first one (the scan reads on, and may refuse more: safe).
    const std::string_view read = text.substr(0, text.find('\0'));
    if (!disagg::json_depth_within(read, sax.max_depth)) __builtin_trap();  // refused valid JSON at its depth
    if (sax.max_depth > 0 && disagg::json_depth_within(read, sax.max_depth - 1)) __builtin_trap();
  }
  return 0;
}
