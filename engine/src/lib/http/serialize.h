// serialize.h — appending message heads without per-piece overhead.
//
// A head is a dozen short pieces. std::string::append(const char*) is an out-of-line call that also
// runs strlen, and each append checks capacity; in the router's profile the appends for one request
// and its response cost more than parsing both heads. append_pieces() grows the string once and
// copies each piece.
#pragma once

#include <charconv>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>

namespace disagg::http {

/// Appends `pieces` to `out` in order, growing it once.
inline void append_pieces(std::string& out, std::initializer_list<std::string_view> pieces) {
  std::size_t total = 0;
  for (const std::string_view p : pieces) total += p.size();
  const std::size_t at = out.size();
  out.resize(at + total);
  char* dst = out.data() + at;
  for (const std::string_view p : pieces) {
    std::memcpy(dst, p.data(), p.size());
    dst += p.size();
  }
}

/// Appends "name: value\r\n".
inline void append_field(std::string& out, std::string_view name, std::string_view value) {
  append_pieces(out, {name, ": ", value, "\r\n"});
}

/// The decimal digits of `n` in `buf` (at least 20 bytes), as a view of it.
inline std::string_view decimal(char (&buf)[24], std::size_t n) {
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  return {buf, static_cast<std::size_t>(r.ptr - buf)};
}

}  // namespace disagg::http
