// disagg/utf8.h — the UTF-8 reading and writing the engine shares: the tokenizer and the chat
// template, the JSON readers (json_parse.h, json_value.cc) and the router's fast request scan.
//
// Validity is Unicode's (and Rust's and the WHATWG decoder's): no overlongs, no surrogates, nothing
// above U+10FFFF. utf8_prefix() also gives the "maximal subpart" of an invalid sequence, the unit
// that lossy decoding replaces by one U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace disagg {

/// The bytes at s[i] that a valid sequence could start with (at least 1); `complete` tells whether
/// they are a whole valid sequence. Precondition: i < s.size().
inline std::size_t utf8_prefix(std::string_view s, std::size_t i, bool& complete) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  complete = b0 < 0x80;
  if (complete) return 1;
  std::size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  std::size_t k = 1;
  for (; k <= need && i + k < s.size(); ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
  }
  complete = k == need + 1;
  return k;
}

/// Whether `s` is valid UTF-8 (eight ASCII bytes at a time: most prompts are mostly ASCII).
inline bool is_valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 8 <= s.size()) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    bool complete = false;
    i += utf8_prefix(s, i, complete);
    if (!complete) return false;
  }
  return true;
}

/// Decodes the valid UTF-8 code point at s[i] and advances i. Precondition: one is there.
inline char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const std::size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t cp = b0 & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

/// Appends the UTF-8 encoding of `cp` (a scalar value) to `out`.
inline void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace disagg
