// chat_template.cc — the Jinja subset of Hugging Face chat templates, with Python's semantics.
//
// Layout: Unicode and number helpers; values (Python objects); the lexer and parser (jinja2's
// grammar, its whitespace rules under trim_blocks + lstrip_blocks); the renderer (scopes,
// statements, expressions); filters, tests, methods and globals; the public API.
//
// Internally failures are C++ exceptions (PyError, SyntaxFailure); the public API catches them all
// and returns TemplateError, so none crosses the boundary.
#include "chat_template.h"

#include "disagg/utf8.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace disagg::text {
namespace {

// ---------------------------------------------------------------------------------------------
// Errors

/// A Python-level exception raised while rendering (TypeError, UndefinedError, ...).
struct PyError {
  std::string type;
  std::string message;
};

[[noreturn]] void raise(std::string type, std::string message) {
  throw PyError{std::move(type), std::move(message)};
}
[[noreturn]] void type_error(std::string message) { raise("TypeError", std::move(message)); }
[[noreturn]] void unsupported(std::string message) {
  raise("Unsupported", std::move(message) + " (outside the supported Jinja subset)");
}

/// A compile-time failure with its location.
struct SyntaxFailure {
  std::string message;
  int line;
  int column;
};

// ---------------------------------------------------------------------------------------------
// UTF-8 and Unicode (Python 3.11's str semantics)

// UTF-8 reading and writing: utf8.h, shared with the tokenizer.
bool valid_utf8(std::string_view s) { return is_valid_utf8(s); }
char32_t next_cp(std::string_view s, std::size_t& i) { return next_code_point(s, i); }

void put_cp(std::string& out, char32_t cp) { append_utf8(cp, out); }

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) out.push_back(next_cp(s, i));
  return out;
}

std::string from_u32(const char32_t* first, const char32_t* last) {
  std::string out;
  out.reserve(static_cast<std::size_t>(last - first));
  for (; first != last; ++first) put_cp(out, *first);
  return out;
}
std::string from_u32(const std::u32string& s) { return from_u32(s.data(), s.data() + s.size()); }

/// len() of a Python str: code points.
std::size_t cp_count(std::string_view s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

/// str.isspace() of one code point (also Python's `\s` and the default of strip/split).
bool py_isspace(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Line boundaries of str.splitlines().
bool py_linebreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

// Generated from Python 3.11 (Unicode 14) and utf8proc 2.8: where Python's str.upper/lower/title
// of one code point differ from utf8proc's simple mappings (SpecialCasing.txt).
struct SpecialCase { char32_t cp; const char* upper; const char* lower; const char* title; };
constexpr SpecialCase kSpecialCases[] = {
    {0x00DF, "SS", "\u00DF", "Ss"},
    {0x0130, "\u0130", "i\u0307", "\u0130"},
    {0x0149, "\u02BCN", "\u0149", "\u02BCN"},
    {0x01F0, "J\u030C", "\u01F0", "J\u030C"},
    {0x0390, "\u0399\u0308\u0301", "\u0390", "\u0399\u0308\u0301"},
    {0x03B0, "\u03A5\u0308\u0301", "\u03B0", "\u03A5\u0308\u0301"},
    {0x0587, "\u0535\u0552", "\u0587", "\u0535\u0582"},
    {0x1E96, "H\u0331", "\u1E96", "H\u0331"},
    {0x1E97, "T\u0308", "\u1E97", "T\u0308"},
    {0x1E98, "W\u030A", "\u1E98", "W\u030A"},
    {0x1E99, "Y\u030A", "\u1E99", "Y\u030A"},
    {0x1E9A, "A\u02BE", "\u1E9A", "A\u02BE"},
    {0x1F50, "\u03A5\u0313", "\u1F50", "\u03A5\u0313"},
    {0x1F52, "\u03A5\u0313\u0300", "\u1F52", "\u03A5\u0313\u0300"},
    {0x1F54, "\u03A5\u0313\u0301", "\u1F54", "\u03A5\u0313\u0301"},
    {0x1F56, "\u03A5\u0313\u0342", "\u1F56", "\u03A5\u0313\u0342"},
    {0x1F80, "\u1F08\u0399", "\u1F80", "\u1F88"},
    {0x1F81, "\u1F09\u0399", "\u1F81", "\u1F89"},
    {0x1F82, "\u1F0A\u0399", "\u1F82", "\u1F8A"},
    {0x1F83, "\u1F0B\u0399", "\u1F83", "\u1F8B"},
    {0x1F84, "\u1F0C\u0399", "\u1F84", "\u1F8C"},
    {0x1F85, "\u1F0D\u0399", "\u1F85", "\u1F8D"},
    {0x1F86, "\u1F0E\u0399", "\u1F86", "\u1F8E"},
    {0x1F87, "\u1F0F\u0399", "\u1F87", "\u1F8F"},
    {0x1F88, "\u1F08\u0399", "\u1F80", "\u1F88"},
    {0x1F89, "\u1F09\u0399", "\u1F81", "\u1F89"},
    {0x1F8A, "\u1F0A\u0399", "\u1F82", "\u1F8A"},
    {0x1F8B, "\u1F0B\u0399", "\u1F83", "\u1F8B"},
    {0x1F8C, "\u1F0C\u0399", "\u1F84", "\u1F8C"},
    {0x1F8D, "\u1F0D\u0399", "\u1F85", "\u1F8D"},
    {0x1F8E, "\u1F0E\u0399", "\u1F86", "\u1F8E"},
    {0x1F8F, "\u1F0F\u0399", "\u1F87", "\u1F8F"},
    {0x1F90, "\u1F28\u0399", "\u1F90", "\u1F98"},
    {0x1F91, "\u1F29\u0399", "\u1F91", "\u1F99"},
    {0x1F92, "\u1F2A\u0399", "\u1F92", "\u1F9A"},
    {0x1F93, "\u1F2B\u0399", "\u1F93", "\u1F9B"},
    {0x1F94, "\u1F2C\u0399", "\u1F94", "\u1F9C"},
    {0x1F95, "\u1F2D\u0399", "\u1F95", "\u1F9D"},
    {0x1F96, "\u1F2E\u0399", "\u1F96", "\u1F9E"},
    {0x1F97, "\u1F2F\u0399", "\u1F97", "\u1F9F"},
    {0x1F98, "\u1F28\u0399", "\u1F90", "\u1F98"},
    {0x1F99, "\u1F29\u0399", "\u1F91", "\u1F99"},
    {0x1F9A, "\u1F2A\u0399", "\u1F92", "\u1F9A"},
    {0x1F9B, "\u1F2B\u0399", "\u1F93", "\u1F9B"},
    {0x1F9C, "\u1F2C\u0399", "\u1F94", "\u1F9C"},
    {0x1F9D, "\u1F2D\u0399", "\u1F95", "\u1F9D"},
    {0x1F9E, "\u1F2E\u0399", "\u1F96", "\u1F9E"},
    {0x1F9F, "\u1F2F\u0399", "\u1F97", "\u1F9F"},
    {0x1FA0, "\u1F68\u0399", "\u1FA0", "\u1FA8"},
    {0x1FA1, "\u1F69\u0399", "\u1FA1", "\u1FA9"},
    {0x1FA2, "\u1F6A\u0399", "\u1FA2", "\u1FAA"},
    {0x1FA3, "\u1F6B\u0399", "\u1FA3", "\u1FAB"},
    {0x1FA4, "\u1F6C\u0399", "\u1FA4", "\u1FAC"},
    {0x1FA5, "\u1F6D\u0399", "\u1FA5", "\u1FAD"},
    {0x1FA6, "\u1F6E\u0399", "\u1FA6", "\u1FAE"},
    {0x1FA7, "\u1F6F\u0399", "\u1FA7", "\u1FAF"},
    {0x1FA8, "\u1F68\u0399", "\u1FA0", "\u1FA8"},
    {0x1FA9, "\u1F69\u0399", "\u1FA1", "\u1FA9"},
    {0x1FAA, "\u1F6A\u0399", "\u1FA2", "\u1FAA"},
    {0x1FAB, "\u1F6B\u0399", "\u1FA3", "\u1FAB"},
    {0x1FAC, "\u1F6C\u0399", "\u1FA4", "\u1FAC"},
    {0x1FAD, "\u1F6D\u0399", "\u1FA5", "\u1FAD"},
    {0x1FAE, "\u1F6E\u0399", "\u1FA6", "\u1FAE"},
    {0x1FAF, "\u1F6F\u0399", "\u1FA7", "\u1FAF"},
    {0x1FB2, "\u1FBA\u0399", "\u1FB2", "\u1FBA\u0345"},
    {0x1FB3, "\u0391\u0399", "\u1FB3", "\u1FBC"},
    {0x1FB4, "\u0386\u0399", "\u1FB4", "\u0386\u0345"},
    {0x1FB6, "\u0391\u0342", "\u1FB6", "\u0391\u0342"},
    {0x1FB7, "\u0391\u0342\u0399", "\u1FB7", "\u0391\u0342\u0345"},
    {0x1FBC, "\u0391\u0399", "\u1FB3", "\u1FBC"},
    {0x1FC2, "\u1FCA\u0399", "\u1FC2", "\u1FCA\u0345"},
    {0x1FC3, "\u0397\u0399", "\u1FC3", "\u1FCC"},
    {0x1FC4, "\u0389\u0399", "\u1FC4", "\u0389\u0345"},
    {0x1FC6, "\u0397\u0342", "\u1FC6", "\u0397\u0342"},
    {0x1FC7, "\u0397\u0342\u0399", "\u1FC7", "\u0397\u0342\u0345"},
    {0x1FCC, "\u0397\u0399", "\u1FC3", "\u1FCC"},
    {0x1FD2, "\u0399\u0308\u0300", "\u1FD2", "\u0399\u0308\u0300"},
    {0x1FD3, "\u0399\u0308\u0301", "\u1FD3", "\u0399\u0308\u0301"},
    {0x1FD6, "\u0399\u0342", "\u1FD6", "\u0399\u0342"},
    {0x1FD7, "\u0399\u0308\u0342", "\u1FD7", "\u0399\u0308\u0342"},
    {0x1FE2, "\u03A5\u0308\u0300", "\u1FE2", "\u03A5\u0308\u0300"},
    {0x1FE3, "\u03A5\u0308\u0301", "\u1FE3", "\u03A5\u0308\u0301"},
    {0x1FE4, "\u03A1\u0313", "\u1FE4", "\u03A1\u0313"},
    {0x1FE6, "\u03A5\u0342", "\u1FE6", "\u03A5\u0342"},
    {0x1FE7, "\u03A5\u0308\u0342", "\u1FE7", "\u03A5\u0308\u0342"},
    {0x1FF2, "\u1FFA\u0399", "\u1FF2", "\u1FFA\u0345"},
    {0x1FF3, "\u03A9\u0399", "\u1FF3", "\u1FFC"},
    {0x1FF4, "\u038F\u0399", "\u1FF4", "\u038F\u0345"},
    {0x1FF6, "\u03A9\u0342", "\u1FF6", "\u03A9\u0342"},
    {0x1FF7, "\u03A9\u0342\u0399", "\u1FF7", "\u03A9\u0342\u0345"},
    {0x1FFC, "\u03A9\u0399", "\u1FF3", "\u1FFC"},
    {0xFB00, "FF", "\uFB00", "Ff"},
    {0xFB01, "FI", "\uFB01", "Fi"},
    {0xFB02, "FL", "\uFB02", "Fl"},
    {0xFB03, "FFI", "\uFB03", "Ffi"},
    {0xFB04, "FFL", "\uFB04", "Ffl"},
    {0xFB05, "ST", "\uFB05", "St"},
    {0xFB06, "ST", "\uFB06", "St"},
    {0xFB13, "\u0544\u0546", "\uFB13", "\u0544\u0576"},
    {0xFB14, "\u0544\u0535", "\uFB14", "\u0544\u0565"},
    {0xFB15, "\u0544\u053B", "\uFB15", "\u0544\u056B"},
    {0xFB16, "\u054E\u0546", "\uFB16", "\u054E\u0576"},
    {0xFB17, "\u0544\u053D", "\uFB17", "\u0544\u056D"},
};
struct CpRange { char32_t lo; char32_t hi; bool value; };
// Where str.isprintable() differs from 'not Cc/Cf/Cs/Co/Cn/Zl/Zp/Zs (space excepted)'.
constexpr CpRange kPrintableExceptions[] = {
    {0x0CF3, 0x0CF3, false}, {0x0ECE, 0x0ECE, false}, {0x10EFD, 0x10EFF, false}, {0x1123F, 0x11241, false},
    {0x11B00, 0x11B09, false}, {0x11F00, 0x11F10, false}, {0x11F12, 0x11F3A, false}, {0x11F3E, 0x11F59, false},
    {0x1342F, 0x1342F, false}, {0x13440, 0x13455, false}, {0x1B132, 0x1B132, false}, {0x1B155, 0x1B155, false},
    {0x1D2C0, 0x1D2D3, false}, {0x1DF25, 0x1DF2A, false}, {0x1E030, 0x1E06D, false}, {0x1E08F, 0x1E08F, false},
    {0x1E4D0, 0x1E4F9, false}, {0x1F6DC, 0x1F6DC, false}, {0x1F774, 0x1F776, false}, {0x1F77B, 0x1F77F, false},
    {0x1F7D9, 0x1F7D9, false}, {0x1FA75, 0x1FA77, false}, {0x1FA87, 0x1FA88, false}, {0x1FAAD, 0x1FAAF, false},
    {0x1FABB, 0x1FABD, false}, {0x1FABF, 0x1FABF, false}, {0x1FACE, 0x1FACF, false}, {0x1FADA, 0x1FADB, false},
    {0x1FAE8, 0x1FAE8, false}, {0x1FAF7, 0x1FAF8, false}, {0x2B739, 0x2B739, false}, {0x31350, 0x323AF, false},
};
// Where str.islower() of one code point differs from category Ll.
constexpr CpRange kLowercaseExceptions[] = {
    {0x00AA, 0x00AA, true}, {0x00BA, 0x00BA, true}, {0x02B0, 0x02B8, true}, {0x02C0, 0x02C1, true},
    {0x02E0, 0x02E4, true}, {0x0345, 0x0345, true}, {0x037A, 0x037A, true}, {0x1D2C, 0x1D6A, true},
    {0x1D78, 0x1D78, true}, {0x1D9B, 0x1DBF, true}, {0x2071, 0x2071, true}, {0x207F, 0x207F, true},
    {0x2090, 0x209C, true}, {0x2170, 0x217F, true}, {0x24D0, 0x24E9, true}, {0x2C7C, 0x2C7D, true},
    {0xA69C, 0xA69D, true}, {0xA770, 0xA770, true}, {0xA7F8, 0xA7F9, true}, {0xAB5C, 0xAB5F, true},
    {0x10780, 0x10780, true}, {0x10783, 0x10785, true}, {0x10787, 0x107B0, true}, {0x107B2, 0x107BA, true},
    {0x1DF25, 0x1DF2A, false},
};
// Where str.isupper() of one code point differs from category Lu.
constexpr CpRange kUppercaseExceptions[] = {
    {0x2160, 0x216F, true}, {0x24B6, 0x24CF, true}, {0x1F130, 0x1F149, true}, {0x1F150, 0x1F169, true},
    {0x1F170, 0x1F189, true},
};
// Where str.isdigit() of one code point differs from category Nd.
constexpr CpRange kDigitExceptions[] = {
    {0x00B2, 0x00B3, true}, {0x00B9, 0x00B9, true}, {0x1369, 0x1371, true}, {0x19DA, 0x19DA, true},
    {0x2070, 0x2070, true}, {0x2074, 0x2079, true}, {0x2080, 0x2089, true}, {0x2460, 0x2468, true},
    {0x2474, 0x247C, true}, {0x2488, 0x2490, true}, {0x24EA, 0x24EA, true}, {0x24F5, 0x24FD, true},
    {0x24FF, 0x24FF, true}, {0x2776, 0x277E, true}, {0x2780, 0x2788, true}, {0x278A, 0x2792, true},
    {0x10A40, 0x10A43, true}, {0x10E60, 0x10E68, true}, {0x11052, 0x1105A, true}, {0x11F50, 0x11F59, false},
    {0x1E4F0, 0x1E4F9, false}, {0x1F100, 0x1F10A, true},
};
// Where str.isnumeric() of one code point differs from categories Nd/Nl/No.
constexpr CpRange kNumericExceptions[] = {
    {0x3405, 0x3405, true}, {0x3483, 0x3483, true}, {0x382A, 0x382A, true}, {0x3B4D, 0x3B4D, true},
    {0x4E00, 0x4E00, true}, {0x4E03, 0x4E03, true}, {0x4E07, 0x4E07, true}, {0x4E09, 0x4E09, true},
    {0x4E5D, 0x4E5D, true}, {0x4E8C, 0x4E8C, true}, {0x4E94, 0x4E94, true}, {0x4E96, 0x4E96, true},
    {0x4EBF, 0x4EC0, true}, {0x4EDF, 0x4EDF, true}, {0x4EE8, 0x4EE8, true}, {0x4F0D, 0x4F0D, true},
    {0x4F70, 0x4F70, true}, {0x5104, 0x5104, true}, {0x5146, 0x5146, true}, {0x5169, 0x5169, true},
    {0x516B, 0x516B, true}, {0x516D, 0x516D, true}, {0x5341, 0x5341, true}, {0x5343, 0x5345, true},
    {0x534C, 0x534C, true}, {0x53C1, 0x53C4, true}, {0x56DB, 0x56DB, true}, {0x58F1, 0x58F1, true},
    {0x58F9, 0x58F9, true}, {0x5E7A, 0x5E7A, true}, {0x5EFE, 0x5EFF, true}, {0x5F0C, 0x5F0E, true},
    {0x5F10, 0x5F10, true}, {0x62FE, 0x62FE, true}, {0x634C, 0x634C, true}, {0x67D2, 0x67D2, true},
    {0x6F06, 0x6F06, true}, {0x7396, 0x7396, true}, {0x767E, 0x767E, true}, {0x8086, 0x8086, true},
    {0x842C, 0x842C, true}, {0x8CAE, 0x8CAE, true}, {0x8CB3, 0x8CB3, true}, {0x8D30, 0x8D30, true},
    {0x9621, 0x9621, true}, {0x9646, 0x9646, true}, {0x964C, 0x964C, true}, {0x9678, 0x9678, true},
    {0x96F6, 0x96F6, true}, {0xF96B, 0xF96B, true}, {0xF973, 0xF973, true}, {0xF978, 0xF978, true},
    {0xF9B2, 0xF9B2, true}, {0xF9D1, 0xF9D1, true}, {0xF9D3, 0xF9D3, true}, {0xF9FD, 0xF9FD, true},
    {0x11F50, 0x11F59, false}, {0x1D2C0, 0x1D2D3, false}, {0x1E4F0, 0x1E4F9, false}, {0x20001, 0x20001, true},
    {0x20064, 0x20064, true}, {0x200E2, 0x200E2, true}, {0x20121, 0x20121, true}, {0x2092A, 0x2092A, true},
    {0x20983, 0x20983, true}, {0x2098C, 0x2098C, true}, {0x2099C, 0x2099C, true}, {0x20AEA, 0x20AEA, true},
    {0x20AFD, 0x20AFD, true}, {0x20B19, 0x20B19, true}, {0x22390, 0x22390, true}, {0x22998, 0x22998, true},
    {0x23B1B, 0x23B1B, true}, {0x2626D, 0x2626D, true}, {0x2F890, 0x2F890, true},
};
// Where str.isalpha() of one code point differs from categories L*.
constexpr CpRange kAlphaExceptions[] = {
    {0x1123F, 0x11240, false}, {0x11F02, 0x11F02, false}, {0x11F04, 0x11F10, false}, {0x11F12, 0x11F33, false},
    {0x1342F, 0x1342F, false}, {0x13441, 0x13446, false}, {0x1B132, 0x1B132, false}, {0x1B155, 0x1B155, false},
    {0x1DF25, 0x1DF2A, false}, {0x1E030, 0x1E06D, false}, {0x1E4D0, 0x1E4EB, false}, {0x2B739, 0x2B739, false},
    {0x31350, 0x323AF, false},
};
// Where str.isdecimal() of one code point differs from category Nd.
constexpr CpRange kDecimalExceptions[] = {
    {0x11F50, 0x11F59, false}, {0x1E4F0, 0x1E4F9, false},
};

std::optional<bool> range_lookup(const CpRange* first, const CpRange* last, char32_t c) {
  const CpRange* it = std::upper_bound(first, last, c, [](char32_t v, const CpRange& r) { return v < r.lo; });
  if (it == first) return std::nullopt;
  --it;
  if (c <= it->hi) return it->value;
  return std::nullopt;
}
template <std::size_t N>
std::optional<bool> range_lookup(const CpRange (&table)[N], char32_t c) {
  return range_lookup(table, table + N, c);
}

int category(char32_t c) { return static_cast<int>(utf8proc_category(static_cast<utf8proc_int32_t>(c))); }

bool py_isprintable(char32_t c) {
  if (c >= 0x20 && c < 0x7F) return true;
  if (c < 0xA0) return false;
  if (auto e = range_lookup(kPrintableExceptions, c)) return *e;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}
bool py_islower_cp(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  if (auto e = range_lookup(kLowercaseExceptions, c)) return *e;
  return category(c) == UTF8PROC_CATEGORY_LL;
}
bool py_isupper_cp(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  if (auto e = range_lookup(kUppercaseExceptions, c)) return *e;
  return category(c) == UTF8PROC_CATEGORY_LU;
}
bool py_istitle_cp(char32_t c) { return c >= 0x80 && category(c) == UTF8PROC_CATEGORY_LT; }
bool py_iscased(char32_t c) { return py_islower_cp(c) || py_isupper_cp(c) || py_istitle_cp(c); }
bool py_isalpha_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (auto e = range_lookup(kAlphaExceptions, c)) return *e;
  const int k = category(c);
  return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
bool py_isdecimal_cp(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  if (auto e = range_lookup(kDecimalExceptions, c)) return *e;
  return category(c) == UTF8PROC_CATEGORY_ND;
}
bool py_isdigit_cp(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  if (auto e = range_lookup(kDigitExceptions, c)) return *e;
  return category(c) == UTF8PROC_CATEGORY_ND;
}
bool py_isnumeric_cp(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  if (auto e = range_lookup(kNumericExceptions, c)) return *e;
  const int k = category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}
bool py_isalnum_cp(char32_t c) {
  return py_isalpha_cp(c) || py_isdecimal_cp(c) || py_isdigit_cp(c) || py_isnumeric_cp(c);
}
/// The digit value of a decimal code point: decimal digits come in runs of ten from zero.
int decimal_value(char32_t c) {
  if (c < 0x80) return static_cast<int>(c - '0');
  int k = 0;
  while (c - static_cast<char32_t>(k) > 0 && py_isdecimal_cp(c - static_cast<char32_t>(k) - 1)) ++k;
  return k % 10;
}

const SpecialCase* special_case(char32_t c) {
  if (c < 0xDF) return nullptr;
  const auto* first = std::begin(kSpecialCases);
  const auto* last = std::end(kSpecialCases);
  const auto* it = std::lower_bound(first, last, c, [](const SpecialCase& s, char32_t v) { return s.cp < v; });
  return it != last && it->cp == c ? it : nullptr;
}

void append_upper(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c));
  } else if (const SpecialCase* s = special_case(c)) {
    out += s->upper;
  } else {
    put_cp(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
  }
}
void append_title(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c));
  } else if (const SpecialCase* s = special_case(c)) {
    out += s->title;
  } else {
    put_cp(out, static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
  }
}

/// Approximates Unicode's Case_Ignorable property (used only for the final-sigma rule).
bool case_ignorable(char32_t c) {
  switch (c) {
    case 0x27: case 0x2E: case 0x3A: case 0x5E: case 0x60: case 0xA8: case 0xAD: case 0xAF:
    case 0xB4: case 0xB7: case 0xB8: case 0x2018: case 0x2019: case 0x2024: case 0x2027:
      return true;
    default:
      break;
  }
  if (c < 0x80) return false;
  const int k = category(c);
  return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK;
}

/// Lowercases s[i] into out, with Python's final-sigma rule for U+03A3.
void append_lower_at(std::string& out, const std::u32string& s, std::size_t i) {
  const char32_t c = s[i];
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    return;
  }
  if (c == 0x3A3) {
    std::size_t j = i;
    while (j > 0 && case_ignorable(s[j - 1])) --j;
    bool final_sigma = j > 0 && py_iscased(s[j - 1]);
    if (final_sigma) {
      std::size_t k = i + 1;
      while (k < s.size() && case_ignorable(s[k])) ++k;
      final_sigma = k == s.size() || !py_iscased(s[k]);
    }
    put_cp(out, final_sigma ? 0x3C2 : 0x3C3);
    return;
  }
  if (const SpecialCase* sc = special_case(c)) {
    out += sc->lower;
  } else {
    put_cp(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
}

bool is_ascii(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) append_upper(out, next_cp(s, i));
  return out;
}
std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (const char c : s) out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c);
    return out;
  }
  const std::u32string u = to_u32(s);
  for (std::size_t i = 0; i < u.size(); ++i) append_lower_at(out, u, i);
  return out;
}
/// str.title(): a cased character after a cased one is lowercased, any other is titlecased.
std::string py_title(std::string_view s) {
  const std::u32string u = to_u32(s);
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for (std::size_t i = 0; i < u.size(); ++i) {
    if (previous_cased) {
      append_lower_at(out, u, i);
    } else {
      append_title(out, u[i]);
    }
    previous_cased = py_iscased(u[i]);
  }
  return out;
}
/// str.capitalize() (Python >= 3.8): titlecase the first character, lowercase the rest.
std::string py_capitalize(std::string_view s) {
  const std::u32string u = to_u32(s);
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < u.size(); ++i) {
    if (i == 0) {
      append_title(out, u[i]);
    } else {
      append_lower_at(out, u, i);
    }
  }
  return out;
}
std::string py_swapcase(std::string_view s) {
  const std::u32string u = to_u32(s);
  std::string out;
  for (std::size_t i = 0; i < u.size(); ++i) {
    if (py_isupper_cp(u[i])) {
      append_lower_at(out, u, i);
    } else if (py_islower_cp(u[i])) {
      append_upper(out, u[i]);
    } else {
      put_cp(out, u[i]);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Numbers as Python prints and parses them

/// repr(float): the shortest round-trip digits, positional for exponents -4..15, else exponent
/// notation with at least two exponent digits.
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const std::size_t e = sci.find('e');
  std::string digits;
  for (const char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp);
  const int n = static_cast<int>(digits.size());
  if (exp >= -5 + 1 && exp < 16) {
    if (exp >= 0) {
      if (n <= exp + 1) {
        out += digits;
        out.append(static_cast<std::size_t>(exp + 1 - n), '0');
        out += ".0";
      } else {
        out += digits.substr(0, static_cast<std::size_t>(exp + 1));
        out.push_back('.');
        out += digits.substr(static_cast<std::size_t>(exp + 1));
      }
    } else {
      out += "0.";
      out.append(static_cast<std::size_t>(-exp - 1), '0');
      out += digits;
    }
  } else {
    out.push_back(digits[0]);
    if (n > 1) {
      out.push_back('.');
      out += digits.substr(1);
    }
    out.push_back('e');
    out.push_back(exp < 0 ? '-' : '+');
    const int a = exp < 0 ? -exp : exp;
    if (a < 10) out.push_back('0');
    out += std::to_string(a);
  }
  return out;
}

/// Python's int(text, base) for base 0 or 2..36: surrounding whitespace, a sign, a base prefix,
/// single underscores between digits, Unicode decimal digits. nullopt when Python would raise
/// ValueError; PyError when the value does not fit 64 bits.
std::optional<int64_t> parse_py_int(std::string_view text, int base) {
  std::u32string u = to_u32(text);
  std::size_t b = 0;
  std::size_t e = u.size();
  while (b < e && py_isspace(u[b])) ++b;
  while (e > b && py_isspace(u[e - 1])) --e;
  bool negative = false;
  if (b < e && (u[b] == '+' || u[b] == '-')) {
    negative = u[b] == '-';
    ++b;
  }
  auto lower = [](char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; };
  bool prefixed = false;
  if (e - b >= 2 && u[b] == '0') {
    const char32_t p = lower(u[b + 1]);
    const int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb != 0 && (base == 0 || base == pb)) {
      base = pb;
      b += 2;
      prefixed = true;
    }
  }
  if (base == 0) {
    base = 10;
    // base 0 forbids leading zeros in a nonzero decimal
    std::size_t k = b;
    while (k < e && (u[k] == '0' || u[k] == '_')) ++k;
    if (b < e && u[b] == '0' && k < e) return std::nullopt;
  }
  if (b == e) return std::nullopt;
  uint64_t value = 0;
  bool need_digit = !prefixed;  // after a prefix an underscore may come first
  bool any = false;
  for (std::size_t i = b; i < e; ++i) {
    const char32_t c = u[i];
    if (c == '_') {
      if (need_digit) return std::nullopt;
      need_digit = true;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') {
      d = static_cast<int>(c - '0');
    } else if (lower(c) >= 'a' && lower(c) <= 'z') {
      d = static_cast<int>(lower(c) - 'a') + 10;
    } else if (py_isdecimal_cp(c)) {
      d = decimal_value(c);
    }
    if (d < 0 || d >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, static_cast<uint64_t>(base), &value) ||
        __builtin_add_overflow(value, static_cast<uint64_t>(d), &value)) {
      unsupported("an integer beyond 64 bits");
    }
    need_digit = false;
    any = true;
  }
  if (!any || need_digit) return std::nullopt;
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (negative) {
    if (value > kMax + 1) unsupported("an integer beyond 64 bits");
    return value == kMax + 1 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(value);
  }
  if (value > kMax) unsupported("an integer beyond 64 bits");
  return static_cast<int64_t>(value);
}

/// Python's float(text): whitespace, sign, digits with single underscores, '.', exponent,
/// inf/infinity/nan in any case. nullopt when Python would raise ValueError.
std::optional<double> parse_py_float(std::string_view text) {
  std::u32string u = to_u32(text);
  std::size_t b = 0;
  std::size_t e = u.size();
  while (b < e && py_isspace(u[b])) ++b;
  while (e > b && py_isspace(u[e - 1])) --e;
  std::string ascii;
  for (std::size_t i = b; i < e; ++i) {
    const char32_t c = u[i];
    if (c < 0x80) {
      ascii.push_back(static_cast<char>(c));
    } else if (py_isdecimal_cp(c)) {
      ascii.push_back(static_cast<char>('0' + decimal_value(c)));
    } else {
      return std::nullopt;
    }
  }
  bool negative = false;
  std::string_view v = ascii;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    negative = v[0] == '-';
    v.remove_prefix(1);
  }
  std::string lower;
  for (const char c : v) lower.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c);
  if (lower == "inf" || lower == "infinity") return negative ? -HUGE_VAL : HUGE_VAL;
  if (lower == "nan") return std::nan("");
  // digits [. digits] [e [sign] digits], underscores only between digits
  std::string clean;
  std::size_t i = 0;
  auto digits = [&](bool required) {
    const std::size_t start = i;
    while (i < lower.size()) {
      if (lower[i] >= '0' && lower[i] <= '9') {
        clean.push_back(lower[i++]);
      } else if (lower[i] == '_' && i > start && i + 1 < lower.size() && lower[i - 1] != '_' &&
                 lower[i + 1] >= '0' && lower[i + 1] <= '9') {
        ++i;
      } else {
        break;
      }
    }
    return !required || i > start;
  };
  const std::size_t int_start = i;
  digits(false);
  const bool int_digits = i > int_start;
  bool frac_digits = false;
  if (i < lower.size() && lower[i] == '.') {
    clean.push_back('.');
    ++i;
    const std::size_t fs = i;
    digits(false);
    frac_digits = i > fs;
  }
  if (!int_digits && !frac_digits) return std::nullopt;
  if (i < lower.size() && lower[i] == 'e') {
    clean.push_back('e');
    ++i;
    if (i < lower.size() && (lower[i] == '+' || lower[i] == '-')) clean.push_back(lower[i++]);
    if (!digits(true)) return std::nullopt;
  }
  if (i != lower.size()) return std::nullopt;
  double d = 0;
  const auto r = std::from_chars(clean.data(), clean.data() + clean.size(), d, std::chars_format::general);
  if (r.ec == std::errc::result_out_of_range) {
    // from_chars reports overflow and underflow; Python rounds to inf or 0.
    d = std::strtod(clean.c_str(), nullptr);
  } else if (r.ec != std::errc() || r.ptr != clean.data() + clean.size()) {
    return std::nullopt;
  }
  return negative ? -d : d;
}

// ---------------------------------------------------------------------------------------------
// Values: the Python objects a template sees

class Renderer;
struct Frame;
struct Stmt;
using FramePtr = std::shared_ptr<Frame>;

enum class VT : uint8_t {
  kUndefined, kNone, kBool, kInt, kFloat, kStr, kList, kDict, kNamespace, kFunc, kLoop, kIter, kView
};

struct Obj {
  virtual ~Obj() = default;
};

struct Value {
  VT t = VT::kUndefined;
  bool markup = false;  // kStr: a markupsafe.Markup (from |safe, |escape)
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<const std::string> s;  // kStr: the text; kUndefined: the error hint
  std::shared_ptr<Obj> o;                // containers and objects

  static Value undefined(std::string hint) {
    Value v;
    v.s = std::make_shared<const std::string>(std::move(hint));
    return v;
  }
  static Value none() {
    Value v;
    v.t = VT::kNone;
    return v;
  }
  static Value boolean(bool x) {
    Value v;
    v.t = VT::kBool;
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v;
    v.t = VT::kInt;
    v.i = x;
    return v;
  }
  static Value number(double x) {
    Value v;
    v.t = VT::kFloat;
    v.f = x;
    return v;
  }
  static Value str(std::string text, bool markup = false) {
    Value v;
    v.t = VT::kStr;
    v.markup = markup;
    v.s = std::make_shared<const std::string>(std::move(text));
    return v;
  }
  static Value object(VT t, std::shared_ptr<Obj> o) {
    Value v;
    v.t = t;
    v.o = std::move(o);
    return v;
  }

  bool is_undefined() const { return t == VT::kUndefined; }
  bool is_str() const { return t == VT::kStr; }
  bool is_number() const { return t == VT::kInt || t == VT::kFloat || t == VT::kBool; }
  bool is_intlike() const { return t == VT::kInt || t == VT::kBool; }
  int64_t as_int() const { return t == VT::kBool ? (b ? 1 : 0) : i; }
  double as_double() const { return t == VT::kFloat ? f : static_cast<double>(as_int()); }
  const std::string& text() const { return *s; }
};

enum class SeqKind : uint8_t { kList, kTuple, kRange };

struct ListObj : Obj {
  SeqKind kind = SeqKind::kList;
  std::vector<Value> items;
  int64_t start = 0, stop = 0, step = 1;  // kRange: the range's arguments, for its repr
};

struct StrHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

bool py_eq(const Value& a, const Value& b);

/// An insertion-ordered dict (Python 3.7+), indexed by its str keys.
struct DictObj : Obj {
  std::vector<std::pair<Value, Value>> entries;
  std::unordered_map<std::string, std::size_t, StrHash, std::equal_to<>> str_index;

  const Value* get_str(std::string_view key) const {
    const auto it = str_index.find(key);
    return it == str_index.end() ? nullptr : &entries[it->second].second;
  }
  /// Precondition: key is hashable (check_hashable).
  const Value* get(const Value& key) const {
    if (key.t == VT::kStr) return get_str(key.text());
    for (const auto& [k, v] : entries) {
      if (k.t != VT::kStr && py_eq(k, key)) return &v;
    }
    return nullptr;
  }
  void set(const Value& key, Value value) {
    if (key.t == VT::kStr) {
      const auto it = str_index.find(key.text());
      if (it != str_index.end()) {
        entries[it->second].second = std::move(value);
        return;
      }
      str_index.emplace(key.text(), entries.size());
    } else {
      for (auto& [k, v] : entries) {
        if (k.t != VT::kStr && py_eq(k, key)) {
          v = std::move(value);
          return;
        }
      }
    }
    entries.emplace_back(key, std::move(value));
  }
};

/// jinja2's namespace(): the one object a template may mutate.
struct NamespaceObj : Obj {
  DictObj attrs;
};

enum class FnKind : uint8_t { kMacro, kGlobal, kStrMethod, kDictMethod, kListMethod, kLoopMethod, kJoiner, kStub };

struct FuncObj : Obj {
  FnKind kind = FnKind::kGlobal;
  int id = 0;             // which global or method
  std::string name;       // for messages
  Value self;             // the bound object of a method
  const Stmt* macro = nullptr;
  std::weak_ptr<Frame> closure;  // the scope a macro was defined in (weak: a scope holds its macros)
  bool joiner_used = false;
  std::string joiner_sep;
};

/// A lazy iterator (generator, reversed(), ...): pulled on demand like Python's, and exhausted once.
struct IterObj : Obj {
  std::string type_name;
  std::function<bool(Renderer&, Value&)> pull;
  int chain = 0;  // how many lazy iterators feed this one (bounded to keep pulls shallow)
  bool done = false;
  bool next(Renderer& r, Value& out) {
    if (done) return false;
    if (!pull(r, out)) {
      done = true;
      pull = nullptr;
      return false;
    }
    return true;
  }
};

enum class ViewKind : uint8_t { kKeys, kValues, kItems };
struct ViewObj : Obj {
  ViewKind kind = ViewKind::kKeys;
  std::shared_ptr<DictObj> dict;
};

Value make_list(std::vector<Value> items, SeqKind kind = SeqKind::kList) {
  auto l = std::make_shared<ListObj>();
  l->kind = kind;
  l->items = std::move(items);
  return Value::object(VT::kList, std::move(l));
}
Value make_tuple(std::vector<Value> items) { return make_list(std::move(items), SeqKind::kTuple); }
const ListObj& as_list(const Value& v) { return static_cast<const ListObj&>(*v.o); }
const DictObj& as_dict(const Value& v) { return static_cast<const DictObj&>(*v.o); }
std::shared_ptr<DictObj> dict_ptr(const Value& v) { return std::static_pointer_cast<DictObj>(v.o); }
NamespaceObj& as_ns(const Value& v) { return static_cast<NamespaceObj&>(*v.o); }
FuncObj& as_func(const Value& v) { return static_cast<FuncObj&>(*v.o); }
IterObj& as_iter(const Value& v) { return static_cast<IterObj&>(*v.o); }
const ViewObj& as_view(const Value& v) { return static_cast<const ViewObj&>(*v.o); }
Value make_dict(std::shared_ptr<DictObj> d) { return Value::object(VT::kDict, std::move(d)); }

std::string type_name(const Value& v);

std::string iter_type_name(const Value& v) { return as_iter(v).type_name; }

std::string type_name(const Value& v) {
  switch (v.t) {
    case VT::kUndefined: return "Undefined";
    case VT::kNone: return "NoneType";
    case VT::kBool: return "bool";
    case VT::kInt: return "int";
    case VT::kFloat: return "float";
    case VT::kStr: return v.markup ? "Markup" : "str";
    case VT::kList:
      switch (as_list(v).kind) {
        case SeqKind::kList: return "list";
        case SeqKind::kTuple: return "tuple";
        case SeqKind::kRange: return "range";
      }
      return "list";
    case VT::kDict: return "dict";
    case VT::kNamespace: return "Namespace";
    case VT::kFunc:
      return as_func(v).kind == FnKind::kMacro ? "Macro" : "builtin_function_or_method";
    case VT::kLoop: return "LoopContext";
    case VT::kIter: return iter_type_name(v);
    case VT::kView: {
      const auto k = as_view(v).kind;
      return k == ViewKind::kKeys ? "dict_keys" : k == ViewKind::kValues ? "dict_values" : "dict_items";
    }
  }
  return "object";
}

/// jinja2's object_type_repr, for undefined-value messages.
std::string object_type_repr(const Value& v) {
  if (v.t == VT::kNone) return "None";
  if (v.t == VT::kNamespace) return "jinja2.utils.Namespace object";
  if (v.t == VT::kLoop) return "jinja2.runtime.LoopContext object";
  return type_name(v) + " object";
}

bool is_hashable(const Value& v) {
  switch (v.t) {
    case VT::kList: return as_list(v).kind != SeqKind::kList;
    case VT::kDict: case VT::kView: return false;
    default: return true;
  }
}
/// Raises TypeError for unhashable keys, as Python does; other objects are refused as unsupported.
void check_hashable(const Value& v) {
  if (!is_hashable(v)) type_error("unhashable type: '" + type_name(v) + "'");
  switch (v.t) {
    case VT::kNone: case VT::kBool: case VT::kInt: case VT::kFloat: case VT::kStr: case VT::kUndefined:
      return;
    default:
      unsupported("a " + type_name(v) + " as a dict key");
  }
}

std::shared_ptr<DictObj> new_dict() { return std::make_shared<DictObj>(); }

// ---- str() and repr()

/// The longest text str()/repr()/json.dumps may build: the render's byte limit. Thread-local so
/// that these free helpers see the limit of the render running on their thread (set by Renderer).
thread_local std::size_t t_text_limit = std::size_t{64} << 20;

void check_text_size(std::size_t bytes) {
  if (bytes > t_text_limit) {
    raise("LimitError", "a string grew past the render limit of " + std::to_string(t_text_limit) + " bytes");
  }
}

void repr_into(std::string& out, const Value& v, int depth);

/// repr(str): Python's quote choice and escapes; printable non-ASCII stays as is.
void str_repr_into(std::string& out, std::string_view s) {
  check_text_size(out.size() + s.size());
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out.push_back(quote);
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < s.size();) {
    const char32_t c = next_cp(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else if (c < 0x7F || py_isprintable(c)) {
      put_cp(out, c);
    } else if (c <= 0xFF) {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else if (c <= 0xFFFF) {
      out += "\\u";
      for (int k = 12; k >= 0; k -= 4) out.push_back(kHex[(c >> k) & 15]);
    } else {
      out += "\\U";
      for (int k = 28; k >= 0; k -= 4) out.push_back(kHex[(c >> k) & 15]);
    }
  }
  out.push_back(quote);
}

constexpr int kMaxReprDepth = 200;

/// Recursion and size guard of the text builders (a list can hold one big string a million times).
void check_repr_depth(int depth, const std::string& out) {
  if (depth > kMaxReprDepth) raise("RecursionError", "maximum recursion depth exceeded while getting the repr of an object");
  check_text_size(out.size());
}

void dict_repr_into(std::string& out, const DictObj& d, int depth) {
  out.push_back('{');
  bool first = true;
  for (const auto& [k, val] : d.entries) {
    if (!first) out += ", ";
    first = false;
    repr_into(out, k, depth + 1);
    out += ": ";
    repr_into(out, val, depth + 1);
  }
  out.push_back('}');
}

/// str(v) into out. Objects that Python prints with a memory address are refused.
void str_into(std::string& out, const Value& v, int depth) {
  check_repr_depth(depth, out);
  switch (v.t) {
    case VT::kUndefined: return;
    case VT::kNone: out += "None"; return;
    case VT::kBool: out += v.b ? "True" : "False"; return;
    case VT::kInt: out += std::to_string(v.i); return;
    case VT::kFloat: out += float_repr(v.f); return;
    case VT::kStr:
      check_text_size(out.size() + v.text().size());
      out += v.text();
      return;
    case VT::kList: {
      const ListObj& l = as_list(v);
      if (l.kind == SeqKind::kRange) {
        out += "range(" + std::to_string(l.start) + ", " + std::to_string(l.stop);
        if (l.step != 1) out += ", " + std::to_string(l.step);
        out.push_back(')');
        return;
      }
      out.push_back(l.kind == SeqKind::kTuple ? '(' : '[');
      for (std::size_t k = 0; k < l.items.size(); ++k) {
        if (k != 0) out += ", ";
        repr_into(out, l.items[k], depth + 1);
      }
      if (l.kind == SeqKind::kTuple && l.items.size() == 1) out.push_back(',');
      out.push_back(l.kind == SeqKind::kTuple ? ')' : ']');
      return;
    }
    case VT::kDict: dict_repr_into(out, as_dict(v), depth); return;
    case VT::kNamespace:
      out += "<Namespace ";
      dict_repr_into(out, as_ns(v).attrs, depth);
      out.push_back('>');
      return;
    case VT::kView: {
      const ViewObj& w = as_view(v);
      out += type_name(v) + "([";
      bool first = true;
      for (const auto& [k, val] : w.dict->entries) {
        if (!first) out += ", ";
        first = false;
        if (w.kind == ViewKind::kKeys) {
          repr_into(out, k, depth + 1);
        } else if (w.kind == ViewKind::kValues) {
          repr_into(out, val, depth + 1);
        } else {
          out.push_back('(');
          repr_into(out, k, depth + 1);
          out += ", ";
          repr_into(out, val, depth + 1);
          out.push_back(')');
        }
      }
      out += "])";
      return;
    }
    case VT::kLoop:
      break;  // handled by the renderer (needs the loop's length)
    case VT::kFunc:
    case VT::kIter:
      break;
  }
  unsupported("converting a " + type_name(v) + " to a string (Python prints its memory address)");
}

void repr_into(std::string& out, const Value& v, int depth) {
  check_repr_depth(depth, out);
  if (v.t == VT::kStr) {
    if (v.markup) out += "Markup(";
    str_repr_into(out, v.text());
    if (v.markup) out.push_back(')');
  } else if (v.t == VT::kUndefined) {
    out += "Undefined";
  } else {
    str_into(out, v, depth);
  }
}

// ---- truthiness, equality, ordering

bool truthy(const Value& v) {
  switch (v.t) {
    case VT::kUndefined: case VT::kNone: return false;
    case VT::kBool: return v.b;
    case VT::kInt: return v.i != 0;
    case VT::kFloat: return v.f != 0;
    case VT::kStr: return !v.text().empty();
    case VT::kList: return !as_list(v).items.empty();
    case VT::kDict: return !as_dict(v).entries.empty();
    case VT::kView: return !as_view(v).dict->entries.empty();
    default: return true;
  }
}

bool int_float_eq(int64_t a, double b) {
  if (std::isnan(b) || std::trunc(b) != b) return false;
  if (b < -9223372036854775808.0 || b >= 9223372036854775808.0) return false;
  return static_cast<int64_t>(b) == a;
}

bool py_eq(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.t == VT::kFloat && b.t == VT::kFloat) return a.f == b.f;
    if (a.t == VT::kFloat) return int_float_eq(b.as_int(), a.f);
    if (b.t == VT::kFloat) return int_float_eq(a.as_int(), b.f);
    return a.as_int() == b.as_int();
  }
  if (a.t != b.t) return false;
  switch (a.t) {
    case VT::kUndefined: case VT::kNone: return true;
    case VT::kStr: return a.text() == b.text();
    case VT::kList: {
      const ListObj& x = as_list(a);
      const ListObj& y = as_list(b);
      if (x.kind != y.kind) return false;
      if (x.items.size() != y.items.size()) return false;
      for (std::size_t k = 0; k < x.items.size(); ++k) {
        if (!py_eq(x.items[k], y.items[k])) return false;
      }
      return true;
    }
    case VT::kDict: {
      const DictObj& x = as_dict(a);
      const DictObj& y = as_dict(b);
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* w = y.get(k);
        if (w == nullptr || !py_eq(v, *w)) return false;
      }
      return true;
    }
    default:
      return a.o == b.o;
  }
}

[[noreturn]] void undefined_error(const Value& v) {
  raise("UndefinedError", v.s ? *v.s : std::string("undefined value"));
}

/// Python's three-way ordering for <, <=, >, >=; TypeError for unorderable operands.
int py_compare(const Value& a, const Value& b, const char* op) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (a.is_number() && b.is_number()) {
    if (a.t != VT::kFloat && b.t != VT::kFloat) {
      const int64_t x = a.as_int();
      const int64_t y = b.as_int();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.t == VT::kFloat && b.t == VT::kFloat) {
      if (std::isnan(a.f) || std::isnan(b.f)) return 2;  // every comparison false
      return a.f < b.f ? -1 : a.f > b.f ? 1 : 0;
    }
    // An int against a float compares exactly, as Python does (no rounding of the int).
    const bool int_left = a.t != VT::kFloat;
    const int64_t i = int_left ? a.as_int() : b.as_int();
    const double d = int_left ? b.f : a.f;
    if (std::isnan(d)) return 2;
    int c = 0;  // sign of i - d
    if (d >= 9223372036854775808.0) {
      c = -1;
    } else if (d < -9223372036854775808.0) {
      c = 1;
    } else {
      const double t = std::trunc(d);
      const auto ti = static_cast<int64_t>(t);
      c = i < ti ? -1 : i > ti ? 1 : d > t ? -1 : d < t ? 1 : 0;
    }
    return int_left ? c : -c;
  }
  if (a.t == VT::kStr && b.t == VT::kStr) {
    const int c = a.text().compare(b.text());  // byte order of UTF-8 is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.t == VT::kList && b.t == VT::kList && as_list(a).kind == as_list(b).kind &&
      as_list(a).kind != SeqKind::kRange) {
    const auto& x = as_list(a).items;
    const auto& y = as_list(b).items;
    for (std::size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!py_eq(x[k], y[k])) return py_compare(x[k], y[k], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  type_error(std::string("'") + op + "' not supported between instances of '" + type_name(a) + "' and '" +
             type_name(b) + "'");
}

bool py_lt(const Value& a, const Value& b) {
  const int c = py_compare(a, b, "<");
  return c == -1;
}

// ---- conversion from JSON (the render context)

Value from_json(const nlohmann::ordered_json& j, int depth, int max_depth) {
  if (depth > max_depth) {
    raise("LimitError", "the context nests arrays and objects more than " + std::to_string(max_depth) + " levels");
  }
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) unsupported("an integer beyond 64 bits in the context");
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      if (!valid_utf8(s)) raise("ValueError", "the context has a string that is not valid UTF-8");
      return Value::str(s);
    }
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, depth + 1, max_depth));
      return make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = new_dict();
      d->entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) {
        if (!valid_utf8(k)) raise("ValueError", "the context has a key that is not valid UTF-8");
        d->set(Value::str(k), from_json(e, depth + 1, max_depth));
      }
      return make_dict(std::move(d));
    }
    default:
      raise("TypeError", "the context holds a value JSON cannot express");
  }
}

// ---- json.dumps, as transformers' tojson calls it

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};

void json_string_into(std::string& out, std::string_view s, bool ensure_ascii) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto u4 = [&](unsigned c) {
    out += "\\u";
    for (int k = 12; k >= 0; k -= 4) out.push_back(kHex[(c >> k) & 15]);
  };
  check_text_size(out.size() + s.size());
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const auto byte = static_cast<unsigned char>(s[i]);
    if (byte >= 0x80 && !ensure_ascii) {
      // Copy the whole code point untouched.
      const std::size_t start = i;
      next_cp(s, i);
      out.append(s.substr(start, i - start));
      continue;
    }
    const char32_t c = next_cp(s, i);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            u4(static_cast<unsigned>(0xD800 | (v >> 10)));
            u4(static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
          } else {
            u4(static_cast<unsigned>(c));
          }
        } else {
          put_cp(out, c);
        }
    }
  }
  out.push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

void json_into(std::string& out, const Value& v, const JsonOptions& o, int level, int depth);

void json_newline(std::string& out, const JsonOptions& o, int level) {
  out.push_back('\n');
  for (int k = 0; k < level; ++k) out += *o.indent;
}

void json_into(std::string& out, const Value& v, const JsonOptions& o, int level, int depth) {
  if (depth > kMaxReprDepth) raise("RecursionError", "maximum recursion depth exceeded while encoding a JSON object");
  check_repr_depth(0, out);
  switch (v.t) {
    case VT::kNone: out += "null"; return;
    case VT::kBool: out += v.b ? "true" : "false"; return;
    case VT::kInt: out += std::to_string(v.i); return;
    case VT::kFloat: out += json_float(v.f); return;
    case VT::kStr: json_string_into(out, v.text(), o.ensure_ascii); return;
    case VT::kList: {
      const ListObj& l = as_list(v);
      if (l.kind == SeqKind::kRange) break;
      if (l.items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (std::size_t k = 0; k < l.items.size(); ++k) {
        if (k != 0) out += o.item_sep;
        if (o.indent) json_newline(out, o, level + 1);
        json_into(out, l.items[k], o, level + 1, depth + 1);
      }
      if (o.indent) json_newline(out, o, level);
      out.push_back(']');
      return;
    }
    case VT::kDict: {
      const DictObj& d = as_dict(v);
      if (d.entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> items;
      items.reserve(d.entries.size());
      for (const auto& e : d.entries) items.push_back(&e);
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](const auto* x, const auto* y) { return py_lt(x->first, y->first); });
      }
      out.push_back('{');
      bool first = true;
      for (const auto* e : items) {
        if (!first) out += o.item_sep;
        first = false;
        if (o.indent) json_newline(out, o, level + 1);
        const Value& k = e->first;
        switch (k.t) {
          case VT::kStr: json_string_into(out, k.text(), o.ensure_ascii); break;
          case VT::kFloat: out += '"' + json_float(k.f) + '"'; break;
          case VT::kBool: out += k.b ? "\"true\"" : "\"false\""; break;
          case VT::kInt: out += '"' + std::to_string(k.i) + '"'; break;
          case VT::kNone: out += "\"null\""; break;
          default:
            type_error("keys must be str, int, float, bool or None, not " + type_name(k));
        }
        out += o.key_sep;
        json_into(out, e->second, o, level + 1, depth + 1);
      }
      if (o.indent) json_newline(out, o, level);
      out.push_back('}');
      return;
    }
    default:
      break;
  }
  type_error("Object of type " + type_name(v) + " is not JSON serializable");
}

// ---------------------------------------------------------------------------------------------
// Lexer: jinja2's, configured with trim_blocks=True, lstrip_blocks=True and the default
// delimiters; the source's newlines are normalized to \n and one trailing newline is dropped
// (keep_trailing_newline=False).

enum class Tok : uint8_t { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type = Tok::kEof;
  std::string text;  // data, name, operator, or the decoded string literal
  int64_t ival = 0;
  double fval = 0;
  std::size_t pos = 0;  // byte offset in the normalized source
};

class Lexer {
 public:
  explicit Lexer(std::string_view raw) {
    // Newlines: \r\n, \r and \n all become \n; a final newline is dropped.
    src_.reserve(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      } else {
        src_.push_back(raw[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    // Line starts for locations.
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    std::size_t pos = 0;
    bool line_starting = true;  // did the previous match end with a newline?
    const std::size_t n = src_.size();
    while (pos < n) {
      // Root state: the earliest tag start.
      std::size_t p = pos;
      char kind = 0;
      while (true) {
        p = src_.find('{', p);
        if (p == std::string::npos || p + 1 >= n) break;
        const char c = src_[p + 1];
        if (c == '{' || c == '%' || c == '#') {
          kind = c;
          break;
        }
        ++p;
      }
      if (kind == 0) {
        emit_data(src_.substr(pos), pos);
        break;
      }
      const char sign = p + 2 < n && (src_[p + 2] == '-' || src_[p + 2] == '+') ? src_[p + 2] : 0;
      std::size_t raw_end = 0;
      const bool raw = kind == '%' && match_raw_begin(p, raw_end);
      std::string text = src_.substr(pos, p - pos);
      apply_strip(text, sign, kind != '{', line_starting);
      emit_data(std::move(text), pos);
      if (raw) {
        line_starting = src_[raw_end - 1] == '\n';
        pos = lex_raw_body(raw_end, line_starting);
        continue;
      }
      std::size_t q = p + 2 + (sign != 0 ? 1 : 0);
      if (kind == '#') {
        pos = lex_comment(q, p, line_starting);
        continue;
      }
      tokens_.push_back(Token{kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, {}, 0, 0, p});
      pos = lex_tag(q, kind == '%', line_starting);
    }
    tokens_.push_back(Token{Tok::kEof, {}, 0, 0, src_.size()});
    return std::move(tokens_);
  }

  /// 1-based line and column of a byte offset.
  std::pair<int, int> location(std::size_t pos) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
    const std::size_t start = line_starts_[line - 1];
    const std::size_t end = std::min(pos, src_.size());
    return {static_cast<int>(line), static_cast<int>(cp_count(std::string_view(src_).substr(start, end - start)) + 1)};
  }

 private:
  [[noreturn]] void fail(std::size_t pos, std::string message) const {
    const auto [line, col] = location(pos);
    throw SyntaxFailure{std::move(message), line, col};
  }

  void emit_data(std::string text, std::size_t pos) {
    if (!text.empty()) tokens_.push_back(Token{Tok::kData, std::move(text), 0, 0, pos});
  }

  /// Whitespace control before a tag: '-' strips all whitespace; otherwise lstrip_blocks strips
  /// the spaces that alone precede a block or comment tag on its line (not for '{{' or '+').
  static void apply_strip(std::string& text, char sign, bool lstrip_applies, bool line_starting) {
    if (sign == '-') {
      rstrip_ws(text);
    } else if (sign != '+' && lstrip_applies) {
      const std::size_t nl = text.rfind('\n');
      const std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size() && all_ws(std::string_view(text).substr(l_pos))) {
        text.resize(l_pos);
      }
    }
  }

  static bool all_ws(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
      if (!py_isspace(next_cp(s, i))) return false;
    }
    return true;
  }
  static void rstrip_ws(std::string& s) {
    std::size_t keep = 0;
    for (std::size_t i = 0; i < s.size();) {
      const char32_t c = next_cp(s, i);
      if (!py_isspace(c)) keep = i;
    }
    s.resize(keep);
  }
  /// Length of the run of whitespace code points at pos.
  std::size_t ws_run(std::size_t pos) const {
    std::size_t i = pos;
    while (i < src_.size()) {
      std::size_t j = i;
      if (!py_isspace(next_cp(src_, j))) break;
      i = j;
    }
    return i - pos;
  }
  bool at(std::size_t pos, std::string_view s) const {
    return pos <= src_.size() && src_.compare(pos, s.size(), s) == 0;
  }

  /// `{%[-+]?\s*raw\s*(-%}\s*|%})` at p; sets end past it.
  bool match_raw_begin(std::size_t p, std::size_t& end) const {
    std::size_t i = p + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i += ws_run(i);
    if (!at(i, "raw")) return false;
    i += 3;
    i += ws_run(i);
    if (at(i, "-%}")) {
      i += 3;
      end = i + ws_run(i);
      return true;
    }
    if (at(i, "%}")) {
      end = i + 2;  // no trim_blocks newline after a raw opening tag
      return true;
    }
    return false;
  }

  /// The raw body up to `{%[-+]? endraw %}`, with the same whitespace rules as a tag start.
  std::size_t lex_raw_body(std::size_t pos, bool& line_starting) {
    std::size_t p = pos;
    while (true) {
      p = src_.find("{%", p);
      if (p == std::string::npos) fail(pos, "Missing end of raw directive");
      std::size_t i = p + 2;
      const char sign = i < src_.size() && (src_[i] == '-' || src_[i] == '+') ? src_[i] : 0;
      if (sign != 0) ++i;
      i += ws_run(i);
      if (at(i, "endraw")) {
        i += 6;
        i += ws_run(i);
        std::size_t end = 0;
        if (at(i, "+%}")) {
          end = i + 3;
        } else if (at(i, "-%}")) {
          end = i + 3 + ws_run(i + 3);
        } else if (at(i, "%}")) {
          end = i + 2 + (at(i + 2, "\n") ? 1 : 0);
        }
        if (end != 0) {
          std::string text = src_.substr(pos, p - pos);
          apply_strip(text, sign, true, line_starting);
          emit_data(std::move(text), pos);
          line_starting = src_[end - 1] == '\n';
          return end;
        }
      }
      ++p;
    }
  }

  /// A comment: up to the first `+#}`, `-#}` (strips what follows) or `#}` (trims one newline).
  std::size_t lex_comment(std::size_t q, std::size_t start, bool& line_starting) {
    for (std::size_t i = q; i + 1 < src_.size() + 1; ++i) {
      std::size_t end = 0;
      if (at(i, "+#}")) {
        end = i + 3;
      } else if (at(i, "-#}")) {
        end = i + 3 + ws_run(i + 3);
      } else if (at(i, "#}")) {
        end = i + 2 + (at(i + 2, "\n") ? 1 : 0);
      }
      if (end != 0) {
        line_starting = src_[end - 1] == '\n';
        return end;
      }
    }
    fail(start, "Missing end of comment tag");
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }

  /// `(\d+_)*\d+` at i: the end, or npos.
  std::size_t digits_us(std::size_t i, bool (*digit)(char) = is_digit) const {
    if (i >= src_.size() || !digit(src_[i])) return std::string::npos;
    while (i < src_.size() && digit(src_[i])) ++i;
    while (i + 1 < src_.size() && src_[i] == '_' && digit(src_[i + 1])) {
      ++i;
      while (i < src_.size() && digit(src_[i])) ++i;
    }
    return i;
  }

  /// jinja2's float rule at i (not right after a '.'): the end, or npos.
  std::size_t match_float(std::size_t i) const {
    if (i > 0 && src_[i - 1] == '.') return std::string::npos;
    const std::size_t a = digits_us(i);
    if (a == std::string::npos) return std::string::npos;
    std::size_t j = a;
    if (j < src_.size() && src_[j] == '.') {
      const std::size_t fr = digits_us(j + 1);
      if (fr != std::string::npos) j = fr;
    }
    if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
      std::size_t k = j + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      const std::size_t ex = digits_us(k);
      if (ex != std::string::npos) return ex;
    }
    if (a < src_.size() && src_[a] == '.') {
      const std::size_t fr = digits_us(a + 1);
      if (fr != std::string::npos) return fr;
    }
    return std::string::npos;
  }

  /// jinja2's integer rule at i: the end, or npos; sets the value.
  std::size_t match_int(std::size_t i, int64_t& value) const {
    const std::size_t n = src_.size();
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (src_[i] == '0' && i + 1 < n) {
      const char p = lower(src_[i + 1]);
      int base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 0;
      if (base != 0) {
        auto ok = [&](char c) {
          c = lower(c);
          if (base == 16) return is_digit(c) || (c >= 'a' && c <= 'f');
          return c >= '0' && c < static_cast<char>('0' + base);
        };
        std::size_t j = i + 2;
        std::size_t end = std::string::npos;
        while (true) {
          std::size_t k = j;
          if (k < n && src_[k] == '_') ++k;
          if (k < n && ok(src_[k])) {
            j = k + 1;
            end = j;
          } else {
            break;
          }
        }
        if (end != std::string::npos) {
          value = int_value(src_.substr(i + 2, end - i - 2), base, i);
          return end;
        }
      }
    }
    if (src_[i] >= '1' && src_[i] <= '9') {
      std::size_t j = i + 1;
      while (true) {
        std::size_t k = j;
        if (k < n && src_[k] == '_') ++k;
        if (k < n && is_digit(src_[k])) {
          j = k + 1;
        } else {
          break;
        }
      }
      value = int_value(src_.substr(i, j - i), 10, i);
      return j;
    }
    if (src_[i] == '0') {
      std::size_t j = i + 1;
      while (true) {
        std::size_t k = j;
        if (k < n && src_[k] == '_') ++k;
        if (k < n && src_[k] == '0') {
          j = k + 1;
        } else {
          break;
        }
      }
      value = 0;
      return j;
    }
    return std::string::npos;
  }

  int64_t int_value(const std::string& digits, int base, std::size_t pos) const {
    uint64_t v = 0;
    for (const char ch : digits) {
      if (ch == '_') continue;
      const char c = ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch + 32) : ch;
      const int d = is_digit(c) ? c - '0' : c - 'a' + 10;
      if (__builtin_mul_overflow(v, static_cast<uint64_t>(base), &v) || __builtin_add_overflow(v, static_cast<uint64_t>(d), &v) ||
          v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(pos, "integer literal beyond 64 bits is not supported");
      }
    }
    return static_cast<int64_t>(v);
  }

  /// Decodes a string literal body as jinja2 does: the text's non-ASCII characters become
  /// backslash escapes ('ascii', 'backslashreplace'), then Python's 'unicode-escape' decodes it.
  std::string decode_string(std::string_view body, std::size_t pos) const {
    std::string ascii;
    ascii.reserve(body.size());
    static constexpr char kHex[] = "0123456789abcdef";
    for (std::size_t i = 0; i < body.size();) {
      const char32_t c = next_cp(body, i);
      if (c < 0x80) {
        ascii.push_back(static_cast<char>(c));
      } else if (c <= 0xFF) {
        ascii += "\\x";
        ascii.push_back(kHex[c >> 4]);
        ascii.push_back(kHex[c & 15]);
      } else if (c <= 0xFFFF) {
        ascii += "\\u";
        for (int k = 12; k >= 0; k -= 4) ascii.push_back(kHex[(c >> k) & 15]);
      } else {
        ascii += "\\U";
        for (int k = 28; k >= 0; k -= 4) ascii.push_back(kHex[(c >> k) & 15]);
      }
    }
    std::string out;
    out.reserve(ascii.size());
    auto hexval = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    for (std::size_t i = 0; i < ascii.size(); ++i) {
      const char c = ascii[i];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i + 1 >= ascii.size()) fail(pos, "\\ at end of string");
      const char e = ascii[++i];
      switch (e) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x': case 'u': case 'U': {
          const int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t cp = 0;
          for (int k = 0; k < len; ++k) {
            const std::size_t at_k = i + 1 + static_cast<std::size_t>(k);
            const int h = at_k < ascii.size() ? hexval(ascii[at_k]) : -1;
            if (h < 0) fail(pos, std::string("truncated \\") + e + " escape in a string literal");
            cp = cp * 16 + static_cast<char32_t>(h);
          }
          i += static_cast<std::size_t>(len);
          if (cp > 0x10FFFF) fail(pos, "illegal Unicode character in a string literal");
          if (cp >= 0xD800 && cp <= 0xDFFF) fail(pos, "a surrogate escape in a string literal is not supported");
          put_cp(out, cp);
          break;
        }
        case 'N':
          fail(pos, "\\N{...} escapes in string literals are not supported");
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i + 1 < ascii.size() && ascii[i + 1] >= '0' && ascii[i + 1] <= '7'; ++k) {
              cp = cp * 8 + static_cast<char32_t>(ascii[++i] - '0');
            }
            put_cp(out, cp);
          } else {
            // Unknown escapes keep their backslash.
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  /// The tokens inside `{{ }}` or `{% %}` up to the closing delimiter.
  std::size_t lex_tag(std::size_t pos, bool block, bool& line_starting) {
    std::vector<char> balance;
    const std::size_t n = src_.size();
    while (pos < n) {
      // 1. the end of the tag, only with balanced brackets
      if (balance.empty()) {
        std::size_t end = 0;
        if (block) {
          if (at(pos, "+%}")) {
            end = pos + 3;
          } else if (at(pos, "-%}")) {
            end = pos + 3 + ws_run(pos + 3);
          } else if (at(pos, "%}")) {
            end = pos + 2 + (at(pos + 2, "\n") ? 1 : 0);
          }
        } else {
          if (at(pos, "-}}")) {
            end = pos + 3 + ws_run(pos + 3);
          } else if (at(pos, "}}")) {
            end = pos + 2;
          }
        }
        if (end != 0) {
          tokens_.push_back(Token{block ? Tok::kBlockEnd : Tok::kVarEnd, {}, 0, 0, pos});
          line_starting = src_[end - 1] == '\n';
          return end;
        }
      }
      // 2. whitespace
      if (const std::size_t w = ws_run(pos); w != 0) {
        pos += w;
        continue;
      }
      // 3. float, 4. integer
      if (const std::size_t fe = match_float(pos); fe != std::string::npos) {
        std::string lit;
        for (std::size_t k = pos; k < fe; ++k) {
          if (src_[k] != '_') lit.push_back(src_[k]);
        }
        double d = 0;
        const auto r = std::from_chars(lit.data(), lit.data() + lit.size(), d);
        if (r.ec == std::errc::result_out_of_range) d = std::strtod(lit.c_str(), nullptr);
        tokens_.push_back(Token{Tok::kFloat, {}, 0, d, pos});
        pos = fe;
        continue;
      }
      int64_t iv = 0;
      if (is_digit(src_[pos])) {
        const std::size_t ie = match_int(pos, iv);
        tokens_.push_back(Token{Tok::kInt, {}, iv, 0, pos});
        pos = ie;
        continue;
      }
      // 5. name
      if (is_name_char(src_[pos]) || static_cast<unsigned char>(src_[pos]) >= 0x80) {
        std::size_t e = pos;
        while (e < n && is_name_char(src_[e])) ++e;
        if (e < n && static_cast<unsigned char>(src_[e]) >= 0x80) {
          std::size_t k = e;
          const char32_t c = next_cp(src_, k);
          if (py_isalnum_cp(c) || category(c) == UTF8PROC_CATEGORY_MN || category(c) == UTF8PROC_CATEGORY_MC) {
            fail(pos, "non-ASCII identifiers are not supported");
          }
        }
        if (e > pos) {
          tokens_.push_back(Token{Tok::kName, src_.substr(pos, e - pos), 0, 0, pos});
          pos = e;
          continue;
        }
      }
      // 6. string
      if (src_[pos] == '\'' || src_[pos] == '"') {
        const char q = src_[pos];
        std::size_t e = pos + 1;
        while (e < n && src_[e] != q) e += src_[e] == '\\' ? 2 : 1;
        if (e < n) {
          tokens_.push_back(Token{Tok::kString, decode_string(std::string_view(src_).substr(pos + 1, e - pos - 1), pos), 0, 0, pos});
          pos = e + 1;
          continue;
        }
      }
      // 7. operator
      static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op;
      for (const auto t : kTwo) {
        if (at(pos, t)) op = t;
      }
      if (op.empty() && std::string_view("+-/*%~[](){}><=.:|,;").find(src_[pos]) != std::string_view::npos) {
        op = src_.substr(pos, 1);
      }
      if (op.empty()) {
        std::size_t k = pos;
        next_cp(src_, k);
        std::string shown;
        str_repr_into(shown, std::string_view(src_).substr(pos, k - pos));
        fail(pos, "unexpected char " + shown);
      }
      if (op == "{" || op == "(" || op == "[") {
        balance.push_back(op == "{" ? '}' : op == "(" ? ')' : ']');
      } else if (op == "}" || op == ")" || op == "]") {
        if (balance.empty()) fail(pos, "unexpected '" + op + "'");
        const char expected = balance.back();
        balance.pop_back();
        if (expected != op[0]) fail(pos, "unexpected '" + op + "', expected '" + std::string(1, expected) + "'");
      }
      tokens_.push_back(Token{Tok::kOp, op, 0, 0, pos});
      pos += op.size();
    }
    return pos;  // unterminated tag: the parser reports the missing end
  }

  std::string src_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> tokens_;
};

// ---------------------------------------------------------------------------------------------
// Syntax tree

enum class EK : uint8_t {
  kConst, kName, kGetattr, kGetitem, kSlice, kCall, kFilter, kTest, kNeg, kPos, kNot, kBin,
  kCompare, kAnd, kOr, kCond, kList, kTuple, kDict, kConcat
};
enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct Keyword {
  std::string name;
  ExprPtr value;
};

struct Expr {
  EK kind = EK::kConst;
  std::size_t pos = 0;        // source offset, for error locations
  std::string name;           // kName; kGetattr's attribute; kFilter/kTest's name
  Value value;                // kConst
  BinOp bin = BinOp::kAdd;    // kBin
  std::vector<CmpOp> ops;     // kCompare: args[0] op[0] args[1] op[1] args[2] ...
  ExprPtr node;               // the subject of getattr/getitem/call/filter/test/unary
  std::vector<ExprPtr> args;  // operands and positional arguments; kSlice/kCond may hold null
  std::vector<Keyword> kwargs;
  int fn = -1;                // resolved filter or test
  int depth = 1;              // height of this subtree (bounded by the parser)
};

struct Target {
  std::string name;           // a plain name when !tuple
  bool tuple = false;
  std::vector<Target> items;
};

enum class SK : uint8_t {
  kText, kPrint, kIf, kFor, kSet, kSetNs, kSetBlock, kMacro, kBreak, kContinue, kGeneration, kWith, kFilterBlock
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  SK kind = SK::kText;
  std::size_t pos = 0;
  std::string text;                 // kText; kMacro's name; kSetNs's attribute
  std::vector<ExprPtr> exprs;       // kPrint's items; kIf's tests, one per branch
  std::vector<Body> bodies;         // kIf's branch bodies (one more when there is an else)
  ExprPtr expr;                     // kFor's iterable; kSet's value; kSetNs's namespace
  ExprPtr cond;                     // kFor's `if` filter
  Target target;                    // kFor, kSet, kSetBlock
  Body body, else_body;
  std::vector<std::string> params;  // kMacro
  std::vector<ExprPtr> defaults;    // kMacro: defaults of the last params
  bool uses_varargs = false, uses_kwargs = false;
  std::vector<Target> targets;      // kWith
  std::vector<ExprPtr> values;      // kWith
  ExprPtr filter;                   // kSetBlock/kFilterBlock: a filter chain applied to the body
  bool ns_target = false;           // kSetBlock onto a namespace attribute (name in target.name)
};

// Filters and tests: jinja2's names, and which this renderer implements.
enum class F : int {
  kAbs, kAttr, kBatch, kCapitalize, kCenter, kCount, kD, kDefault, kDictsort, kE, kEscape, kFirst,
  kFloat, kForceescape, kFormat, kIndent, kInt, kJoin, kLast, kLength, kList, kLower, kItems, kMap,
  kMin, kMax, kReject, kRejectattr, kReplace, kReverse, kRound, kSafe, kSelect, kSelectattr, kSlice,
  kSort, kString, kSum, kTitle, kTrim, kTruncate, kUnique, kUpper, kTojson, kWordcount,
  // jinja2 has these; they need Python machinery this renderer does not carry.
  kFilesizeformat, kGroupby, kPprint, kRandom, kStriptags, kUrlencode, kUrlize, kWordwrap, kXmlattr,
  kCountOf
};
constexpr int kFirstUnsupportedFilter = static_cast<int>(F::kFilesizeformat);
constexpr std::array<std::string_view, static_cast<std::size_t>(F::kCountOf)> kFilterNames = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "first",
    "float", "forceescape", "format", "indent", "int", "join", "last", "length", "list", "lower", "items", "map",
    "min", "max", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "slice",
    "sort", "string", "sum", "title", "trim", "truncate", "unique", "upper", "tojson", "wordcount",
    "filesizeformat", "groupby", "pprint", "random", "striptags", "urlencode", "urlize", "wordwrap", "xmlattr"};

enum class T : int {
  kOdd, kEven, kDivisibleby, kDefined, kUndefined, kFilter, kTest, kNone, kBoolean, kFalse, kTrue, kInteger,
  kFloat, kLower, kUpper, kString, kMapping, kNumber, kSequence, kIterable, kCallable, kSameas, kEscaped, kIn,
  kEq, kEq2, kEqualto, kNe, kNe2, kGt, kGt2, kGreaterthan, kGe, kGe2, kLt, kLt2, kLessthan, kLe, kLe2,
  kCountOf
};
constexpr std::array<std::string_view, static_cast<std::size_t>(T::kCountOf)> kTestNames = {
    "odd", "even", "divisibleby", "defined", "undefined", "filter", "test", "none", "boolean", "false", "true",
    "integer", "float", "lower", "upper", "string", "mapping", "number", "sequence", "iterable", "callable",
    "sameas", "escaped", "in", "==", "eq", "equalto", "!=", "ne", ">", "gt", "greaterthan", "ge", ">=", "<",
    "lt", "lessthan", "<=", "le"};

template <std::size_t N>
int lookup_name(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::size_t k = 0; k < N; ++k) {
    if (names[k] == name) return static_cast<int>(k);
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Parser: jinja2's grammar and precedence (parser.py), statement by statement.

constexpr int kMaxParseDepth = 1000;
/// Blocks (if/for/macro/...) nested deeper than this are refused; real templates nest a handful.
constexpr int kMaxBlockDepth = 100;
/// Expression trees deeper than this are refused: evaluating and freeing them recurses.
constexpr int kMaxExprDepth = 256;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const Lexer& lexer) : toks_(std::move(tokens)), lexer_(lexer) {}

  Body parse() {
    Body body = subparse({});
    validate(body, false);
    return body;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) p_.fail("the template nests expressions or blocks more than " + std::to_string(kMaxParseDepth) + " levels");
    }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    Parser& p_;
  };

  const Token& cur() const { return toks_[i_]; }
  const Token& look() const { return toks_[std::min(i_ + 1, toks_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool is_name(const Token& t, std::string_view v) const { return t.type == Tok::kName && t.text == v; }
  bool is_op(const Token& t, std::string_view v) const { return t.type == Tok::kOp && t.text == v; }
  bool cur_name(std::string_view v) const { return is_name(cur(), v); }
  bool cur_op(std::string_view v) const { return is_op(cur(), v); }
  bool skip_name(std::string_view v) {
    if (!cur_name(v)) return false;
    advance();
    return true;
  }
  bool skip_op(std::string_view v) {
    if (!cur_op(v)) return false;
    advance();
    return true;
  }

  [[noreturn]] void fail(std::string message) const { fail_at(cur().pos, std::move(message)); }
  [[noreturn]] void fail_at(std::size_t pos, std::string message) const {
    const auto [line, col] = lexer_.location(pos);
    throw SyntaxFailure{std::move(message), line, col};
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kName: return t.text;
      case Tok::kOp: return t.text;
      case Tok::kString: return "string";
      case Tok::kInt: return "integer";
      case Tok::kFloat: return "float";
      case Tok::kData: return "template data / text";
      case Tok::kVarBegin: return "begin of print statement";
      case Tok::kVarEnd: return "end of print statement";
      case Tok::kBlockBegin: return "begin of statement block";
      case Tok::kBlockEnd: return "end of statement block";
      case Tok::kEof: return "end of template";
    }
    return "token";
  }

  void expect_type(Tok type, const char* what) {
    if (cur().type != type) fail(std::string("expected token '") + what + "', got '" + describe(cur()) + "'");
    advance();
  }
  void expect_op(std::string_view op) {
    if (!cur_op(op)) fail("expected token '" + std::string(op) + "', got '" + describe(cur()) + "'");
    advance();
  }
  std::string expect_name() {
    if (cur().type != Tok::kName) fail("expected token 'name', got '" + describe(cur()) + "'");
    std::string v = cur().text;
    advance();
    return v;
  }
  void expect_name(std::string_view v) {
    if (!cur_name(v)) fail("expected token '" + std::string(v) + "', got '" + describe(cur()) + "'");
    advance();
  }

  static ExprPtr make(EK kind, std::size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  /// Records the height of a finished node and refuses trees deeper than kMaxExprDepth.
  ExprPtr seal(ExprPtr e) const {
    int d = e->node ? e->node->depth : 0;
    for (const auto& a : e->args) {
      if (a) d = std::max(d, a->depth);
    }
    for (const auto& k : e->kwargs) d = std::max(d, k.value->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) {
      fail_at(e->pos, "the template nests an expression more than " + std::to_string(kMaxExprDepth) + " levels");
    }
    return e;
  }

  // ---- statements

  Body subparse(const std::vector<std::string_view>& end_tokens) {
    Body body;
    while (cur().type != Tok::kEof) {
      const Token& t = cur();
      if (t.type == Tok::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = SK::kText;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.type == Tok::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = SK::kPrint;
        s->pos = t.pos;
        advance();
        s->exprs.push_back(parse_tuple(false, true, {}, false));
        expect_type(Tok::kVarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == Tok::kBlockBegin) {
        advance();
        if (cur().type == Tok::kName) {
          for (const auto e : end_tokens) {
            if (cur().text == e) return body;
          }
        }
        body.push_back(parse_statement(end_tokens));
        expect_type(Tok::kBlockEnd, "end of statement block");
      } else {
        fail("unexpected '" + describe(t) + "'");
      }
    }
    return body;
  }

  /// Parses a body up to one of `end_tokens`; the end tag's name is current afterwards, or
  /// consumed when `drop_needle`.
  Body parse_statements(const std::vector<std::string_view>& end_tokens, bool drop_needle) {
    skip_op(":");
    expect_type(Tok::kBlockEnd, "end of statement block");
    Body body = subparse(end_tokens);
    if (cur().type == Tok::kEof) {
      std::string looking;
      for (const auto e : end_tokens) looking += (looking.empty() ? "'" : " or '") + std::string(e) + "'";
      fail("Unexpected end of template. Jinja was looking for the following tags: " + looking + ".");
    }
    if (drop_needle) advance();
    return body;
  }

  StmtPtr parse_statement(const std::vector<std::string_view>& end_tokens) {
    DepthGuard guard(*this);
    struct BlockGuard {
      explicit BlockGuard(Parser& p) : p_(p) {
        if (++p_.block_depth_ > kMaxBlockDepth) p_.fail("the template nests blocks more than " + std::to_string(kMaxBlockDepth) + " levels");
      }
      ~BlockGuard() { --p_.block_depth_; }
      BlockGuard(const BlockGuard&) = delete;
      BlockGuard& operator=(const BlockGuard&) = delete;
      Parser& p_;
    } block_guard(*this);
    const Token& t = cur();
    if (t.type != Tok::kName) fail("tag name expected");
    const std::string name = t.text;
    if (name == "for") return parse_for();
    if (name == "if") return parse_if();
    if (name == "set") return parse_set();
    if (name == "macro") return parse_macro();
    if (name == "with") return parse_with();
    if (name == "filter") return parse_filter_block();
    if (name == "print") return parse_print();
    if (name == "generation") return parse_generation();
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail("'" + name + "' outside loop");
      auto s = std::make_unique<Stmt>();
      s->kind = name == "break" ? SK::kBreak : SK::kContinue;
      s->pos = t.pos;
      advance();
      return s;
    }
    if (name == "block" || name == "extends" || name == "include" || name == "import" || name == "from" ||
        name == "autoescape" || name == "call") {
      fail("the '" + name + "' tag is not supported (outside the supported Jinja subset)");
    }
    std::string message = "Encountered unknown tag '" + name + "'.";
    if (!end_tokens.empty()) {
      std::string looking;
      for (const auto e : end_tokens) looking += (looking.empty() ? "'" : " or '") + std::string(e) + "'";
      message += " Jinja was looking for the following tags: " + looking + ".";
    }
    fail(message);
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<Stmt>();
    s->kind = SK::kFor;
    s->pos = cur().pos;
    advance();
    s->target = parse_assign_target({"in"});
    if (target_has(s->target, "loop")) fail("Can't assign to special loop variable in for-loop target");
    expect_name("in");
    s->expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (cur_name("recursive")) fail("recursive for loops are not supported (outside the supported Jinja subset)");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    const bool is_else = cur_name("else");
    advance();
    if (is_else) s->else_body = parse_statements({"endfor"}, true);
    return s;
  }

  static bool target_has(const Target& t, std::string_view name) {
    if (!t.tuple) return t.name == name;
    for (const auto& item : t.items) {
      if (target_has(item, name)) return true;
    }
    return false;
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<Stmt>();
    s->kind = SK::kIf;
    s->pos = cur().pos;
    advance();
    while (true) {
      s->exprs.push_back(parse_tuple(false, false, {}, false));
      s->bodies.push_back(parse_statements({"elif", "else", "endif"}, false));
      const std::string which = cur().text;
      advance();
      if (which == "elif") continue;
      if (which == "else") s->bodies.push_back(parse_statements({"endif"}, true));
      break;
    }
    return s;
  }

  StmtPtr parse_set() {
    auto s = std::make_unique<Stmt>();
    s->pos = cur().pos;
    advance();
    ExprPtr ns;
    std::string attr;
    if (cur().type == Tok::kName && look().type == Tok::kOp && look().text == ".") {
      ns = make(EK::kName, cur().pos);
      ns->name = expect_name();
      advance();
      attr = expect_name();
    } else {
      s->target = parse_assign_target({});
    }
    if (skip_op("=")) {
      if (ns) {
        s->kind = SK::kSetNs;
        s->text = attr;
        s->cond = std::move(ns);
      } else {
        s->kind = SK::kSet;
      }
      s->expr = parse_tuple(false, true, {}, false);
      return s;
    }
    s->kind = SK::kSetBlock;
    if (ns) {
      s->ns_target = true;
      s->text = attr;
      s->cond = std::move(ns);
    }
    s->filter = parse_filter(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  StmtPtr parse_macro() {
    auto s = std::make_unique<Stmt>();
    s->kind = SK::kMacro;
    s->pos = cur().pos;
    advance();
    s->text = expect_name();
    expect_op("(");
    while (!cur_op(")")) {
      if (!s->params.empty()) expect_op(",");
      const std::size_t param_pos = cur().pos;
      s->params.push_back(expect_name());
      if (std::count(s->params.begin(), s->params.end(), s->params.back()) > 1) {
        fail_at(param_pos, "duplicate argument '" + s->params.back() + "' in function definition");
      }
      if (skip_op("=")) {
        s->defaults.push_back(parse_expression(true));
      } else if (!s->defaults.empty()) {
        fail("non-default argument follows default argument");
      }
    }
    expect_op(")");
    const int saved = loop_depth_;
    loop_depth_ = 0;  // a macro body is a function: loop controls do not reach out of it
    s->body = parse_statements({"endmacro"}, true);
    loop_depth_ = saved;
    s->uses_varargs = body_loads(s->body, "varargs");
    s->uses_kwargs = body_loads(s->body, "kwargs");
    return s;
  }

  StmtPtr parse_with() {
    auto s = std::make_unique<Stmt>();
    s->kind = SK::kWith;
    s->pos = cur().pos;
    advance();
    while (cur().type != Tok::kBlockEnd) {
      if (!s->targets.empty()) expect_op(",");
      s->targets.push_back(parse_assign_target({}));
      expect_op("=");
      s->values.push_back(parse_expression(true));
    }
    s->body = parse_statements({"endwith"}, true);
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = std::make_unique<Stmt>();
    s->kind = SK::kFilterBlock;
    s->pos = cur().pos;
    advance();
    s->filter = parse_filter(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    return s;
  }

  StmtPtr parse_print() {
    auto s = std::make_unique<Stmt>();
    s->kind = SK::kPrint;
    s->pos = cur().pos;
    advance();
    while (cur().type != Tok::kBlockEnd) {
      if (!s->exprs.empty()) expect_op(",");
      s->exprs.push_back(parse_expression(true));
    }
    return s;
  }

  /// transformers' AssistantTracker tag: the body renders in a scope of its own, like a caller().
  StmtPtr parse_generation() {
    auto s = std::make_unique<Stmt>();
    s->kind = SK::kGeneration;
    s->pos = cur().pos;
    advance();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endgeneration"}, true);
    loop_depth_ = saved;
    return s;
  }

  Target parse_assign_target(const std::vector<std::string_view>& extra_end) {
    const std::size_t pos = cur().pos;
    ExprPtr e = parse_tuple(true, true, extra_end, false);
    Target t;
    if (!to_target(*e, t)) fail_at(pos, "can't assign to '" + std::string(e->kind == EK::kConst ? "const" : e->kind == EK::kList ? "list" : "expression") + "'");
    return t;
  }

  static bool to_target(const Expr& e, Target& t) {
    if (e.kind == EK::kName) {
      t.name = e.name;
      return true;
    }
    if (e.kind == EK::kTuple) {
      t.tuple = true;
      for (const auto& item : e.args) {
        Target sub;
        if (!to_target(*item, sub)) return false;
        t.items.push_back(std::move(sub));
      }
      return true;
    }
    return false;
  }

  // ---- expressions

  bool is_tuple_end(const std::vector<std::string_view>& extra_end) const {
    if (cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || cur_op(")")) return true;
    if (cur().type == Tok::kName) {
      for (const auto e : extra_end) {
        if (cur().text == e) return true;
      }
    }
    return false;
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string_view>& extra_end,
                      bool explicit_parentheses) {
    DepthGuard guard(*this);
    const std::size_t pos = cur().pos;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (cur_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parentheses) fail("Expected an expression, got '" + describe(cur()) + "'");
    }
    auto t = make(EK::kTuple, pos);
    t->args = std::move(args);
    return seal(std::move(t));
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    const std::size_t pos = cur().pos;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      ExprPtr expr2 = parse_or();
      ExprPtr expr3;
      if (skip_name("else")) expr3 = parse_condexpr();
      auto c = make(EK::kCond, pos);
      c->args.push_back(std::move(expr2));
      c->args.push_back(std::move(expr1));
      c->args.push_back(std::move(expr3));
      expr1 = seal(std::move(c));
    }
    return expr1;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (cur_name("or")) {
      const std::size_t pos = cur().pos;
      advance();
      auto e = make(EK::kOr, pos);
      e->args.push_back(std::move(left));
      e->args.push_back(parse_and());
      left = seal(std::move(e));
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (cur_name("and")) {
      const std::size_t pos = cur().pos;
      advance();
      auto e = make(EK::kAnd, pos);
      e->args.push_back(std::move(left));
      e->args.push_back(parse_not());
      left = seal(std::move(e));
    }
    return left;
  }

  ExprPtr parse_not() {
    if (cur_name("not")) {
      DepthGuard guard(*this);
      auto e = make(EK::kNot, cur().pos);
      advance();
      e->node = parse_not();
      return seal(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const std::size_t pos = cur().pos;
    ExprPtr expr = parse_math1();
    std::vector<CmpOp> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=")) {
        ops.push_back(t.text == "==" ? CmpOp::kEq : t.text == "!=" ? CmpOp::kNe : t.text == "<" ? CmpOp::kLt
                      : t.text == "<=" ? CmpOp::kLe : t.text == ">" ? CmpOp::kGt : CmpOp::kGe);
        advance();
      } else if (cur_name("in")) {
        ops.push_back(CmpOp::kIn);
        advance();
      } else if (cur_name("not") && is_name(look(), "in")) {
        ops.push_back(CmpOp::kNotIn);
        advance();
        advance();
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return expr;
    auto c = make(EK::kCompare, pos);
    c->args.push_back(std::move(expr));
    for (auto& o : operands) c->args.push_back(std::move(o));
    c->ops = std::move(ops);
    return seal(std::move(c));
  }

  ExprPtr binary(BinOp op, ExprPtr left, ExprPtr right, std::size_t pos) {
    auto e = make(EK::kBin, pos);
    e->bin = op;
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return seal(std::move(e));
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (cur_op("+") || cur_op("-")) {
      const std::size_t pos = cur().pos;
      const BinOp op = cur_op("+") ? BinOp::kAdd : BinOp::kSub;
      advance();
      left = binary(op, std::move(left), parse_concat(), pos);
    }
    return left;
  }

  ExprPtr parse_concat() {
    const std::size_t pos = cur().pos;
    std::vector<ExprPtr> args;
    args.push_back(parse_math2());
    while (cur_op("~")) {
      advance();
      args.push_back(parse_math2());
    }
    if (args.size() == 1) return std::move(args[0]);
    auto e = make(EK::kConcat, pos);
    e->args = std::move(args);
    return seal(std::move(e));
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (cur_op("*") || cur_op("/") || cur_op("//") || cur_op("%")) {
      const std::size_t pos = cur().pos;
      const BinOp op = cur_op("*") ? BinOp::kMul : cur_op("/") ? BinOp::kDiv : cur_op("//") ? BinOp::kFloorDiv : BinOp::kMod;
      advance();
      left = binary(op, std::move(left), parse_pow(), pos);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (cur_op("**")) {
      const std::size_t pos = cur().pos;
      advance();
      left = binary(BinOp::kPow, std::move(left), parse_unary(true), pos);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (cur_op("-") || cur_op("+")) {
      node = make(cur_op("-") ? EK::kNeg : EK::kPos, cur().pos);
      advance();
      node->node = parse_unary(false);
      node = seal(std::move(node));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& t = cur();
    const std::size_t pos = t.pos;
    if (t.type == Tok::kName) {
      ExprPtr e = make(EK::kConst, pos);
      if (t.text == "true" || t.text == "True") {
        e->value = Value::boolean(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value::boolean(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::none();
      } else {
        e->kind = EK::kName;
        e->name = t.text;
      }
      advance();
      return e;
    }
    if (t.type == Tok::kString) {
      std::string text;
      while (cur().type == Tok::kString) {
        text += cur().text;
        advance();
      }
      ExprPtr e = make(EK::kConst, pos);
      e->value = Value::str(std::move(text));
      return e;
    }
    if (t.type == Tok::kInt || t.type == Tok::kFloat) {
      ExprPtr e = make(EK::kConst, pos);
      e->value = t.type == Tok::kInt ? Value::integer(t.ival) : Value::number(t.fval);
      advance();
      return e;
    }
    if (is_op(t, "(")) {
      advance();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op(t, "[")) {
      advance();
      ExprPtr e = make(EK::kList, pos);
      while (!cur_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (cur_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      expect_op("]");
      return seal(std::move(e));
    }
    if (is_op(t, "{")) {
      advance();
      ExprPtr e = make(EK::kDict, pos);
      while (!cur_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (cur_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      expect_op("}");
      return seal(std::move(e));
    }
    fail("unexpected '" + describe(t) + "'");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (cur_op(".") || cur_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (cur_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (cur_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (cur_name("is")) {
        node = parse_test(std::move(node));
      } else if (cur_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    DepthGuard guard(*this);
    const std::size_t pos = cur().pos;
    const bool dot = cur_op(".");
    advance();
    if (dot) {
      const Token& a = cur();
      if (a.type == Tok::kName) {
        auto e = make(EK::kGetattr, pos);
        e->name = a.text;
        e->node = std::move(node);
        advance();
        return seal(std::move(e));
      }
      if (a.type != Tok::kInt) fail("expected name or number");
      auto e = make(EK::kGetitem, pos);
      e->node = std::move(node);
      auto k = make(EK::kConst, a.pos);
      k->value = Value::integer(a.ival);
      e->args.push_back(std::move(k));
      advance();
      return seal(std::move(e));
    }
    std::vector<ExprPtr> args;
    while (!cur_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = make(EK::kGetitem, pos);
    e->node = std::move(node);
    if (args.size() == 1) {
      e->args.push_back(std::move(args[0]));
    } else {
      auto t = make(EK::kTuple, pos);
      t->args = std::move(args);
      e->args.push_back(seal(std::move(t)));
    }
    return seal(std::move(e));
  }

  ExprPtr parse_subscribed() {
    const std::size_t pos = cur().pos;
    std::vector<ExprPtr> args;
    if (cur_op(":")) {
      advance();
      args.push_back(nullptr);
    } else {
      ExprPtr node = parse_expression(true);
      if (!cur_op(":")) return node;
      advance();
      args.push_back(std::move(node));
    }
    if (cur_op(":")) {
      args.push_back(nullptr);
    } else if (!cur_op("]") && !cur_op(",")) {
      args.push_back(parse_expression(true));
    } else {
      args.push_back(nullptr);
    }
    if (cur_op(":")) {
      advance();
      if (!cur_op("]") && !cur_op(",")) {
        args.push_back(parse_expression(true));
      } else {
        args.push_back(nullptr);
      }
    } else {
      args.push_back(nullptr);
    }
    auto e = make(EK::kSlice, pos);
    e->args = std::move(args);
    return seal(std::move(e));
  }

  void parse_call_args(Expr& e) {
    const std::size_t pos = cur().pos;
    expect_op("(");
    bool require_comma = false;
    while (!cur_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (cur_op(")")) break;
      }
      if (cur_op("*") || cur_op("**")) fail("*args and **kwargs in calls are not supported (outside the supported Jinja subset)");
      if (cur().type == Tok::kName && is_op(look(), "=")) {
        Keyword k;
        k.name = cur().text;
        advance();
        advance();
        k.value = parse_expression(true);
        e.kwargs.push_back(std::move(k));
      } else {
        if (!e.kwargs.empty()) fail_at(pos, "invalid syntax for function call expression");
        e.args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    DepthGuard guard(*this);
    auto e = make(EK::kCall, cur().pos);
    e->node = std::move(node);
    parse_call_args(*e);
    return seal(std::move(e));
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (cur_op("|") || start_inline) {
      DepthGuard guard(*this);
      if (!start_inline) advance();
      const std::size_t pos = cur().pos;
      std::string name = expect_name();
      while (cur_op(".")) {
        advance();
        name.push_back('.');
        name += expect_name();
      }
      auto e = make(EK::kFilter, pos);
      e->name = name;
      e->fn = lookup_name(kFilterNames, name);  // unknown (-1): see validate()
      if (e->fn >= kFirstUnsupportedFilter) fail_at(pos, "the '" + name + "' filter is not supported (outside the supported Jinja subset)");
      e->node = std::move(node);
      if (cur_op("(")) parse_call_args(*e);
      node = seal(std::move(e));
      start_inline = false;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    DepthGuard guard(*this);
    const std::size_t pos = cur().pos;
    advance();  // is
    const bool negated = skip_name("not");
    std::string name = expect_name();
    while (cur_op(".")) {
      advance();
      name.push_back('.');
      name += expect_name();
    }
    auto e = make(EK::kTest, pos);
    e->name = name;
    e->fn = lookup_name(kTestNames, name);  // unknown (-1): see validate()
    e->node = std::move(node);
    const Token& t = cur();
    if (cur_op("(")) {
      parse_call_args(*e);
    } else if ((t.type == Tok::kName || t.type == Tok::kString || t.type == Tok::kInt || t.type == Tok::kFloat ||
                is_op(t, "[") || is_op(t, "{")) &&
               !cur_name("else") && !cur_name("or") && !cur_name("and")) {
      if (cur_name("is")) fail("You cannot chain multiple tests with is");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    e = seal(std::move(e));
    if (!negated) return e;
    auto n = make(EK::kNot, pos);
    n->node = std::move(e);
    return seal(std::move(n));
  }

  // ---- unknown filters and tests

  /// jinja2 refuses an unknown filter or test at compile time, except in a "soft" frame (an if
  /// statement's test and bodies, a conditional expression, a for loop's iterable and else), where
  /// the error waits until the filter runs. Loop bodies, macros and captured blocks are hard again.
  void validate(const Body& body, bool soft) const {
    for (const auto& st : body) {
      const Stmt& s = *st;
      switch (s.kind) {
        case SK::kIf:
          for (const auto& e : s.exprs) validate(e.get(), true);
          for (const auto& b : s.bodies) validate(b, true);
          break;
        case SK::kFor:
          validate(s.expr.get(), soft);
          validate(s.cond.get(), false);
          validate(s.body, false);
          validate(s.else_body, soft);
          break;
        case SK::kSetBlock:
        case SK::kFilterBlock:
          validate(s.filter.get(), false);
          validate(s.cond.get(), soft);
          validate(s.body, false);
          break;
        case SK::kMacro:
          for (const auto& e : s.defaults) validate(e.get(), false);
          validate(s.body, false);
          break;
        case SK::kWith:
          for (const auto& e : s.values) validate(e.get(), soft);
          validate(s.body, false);
          break;
        case SK::kGeneration:
          validate(s.body, false);
          break;
        default:
          for (const auto& e : s.exprs) validate(e.get(), soft);
          validate(s.expr.get(), soft);
          validate(s.cond.get(), soft);
          break;
      }
    }
  }
  void validate(const Expr* e, bool soft) const {
    if (e == nullptr) return;
    if (e->kind == EK::kCond) soft = true;
    if ((e->kind == EK::kFilter || e->kind == EK::kTest) && e->fn < 0 && !soft) {
      fail_at(e->pos, std::string("No ") + (e->kind == EK::kFilter ? "filter" : "test") + " named '" + e->name + "'.");
    }
    validate(e->node.get(), soft);
    for (const auto& a : e->args) validate(a.get(), soft);
    for (const auto& k : e->kwargs) validate(k.value.get(), soft);
  }

  // ---- macro helpers

  static bool expr_loads(const Expr* e, std::string_view name) {
    if (e == nullptr) return false;
    if (e->kind == EK::kName && e->name == name) return true;
    if (expr_loads(e->node.get(), name)) return true;
    for (const auto& a : e->args) {
      if (expr_loads(a.get(), name)) return true;
    }
    for (const auto& k : e->kwargs) {
      if (expr_loads(k.value.get(), name)) return true;
    }
    return false;
  }
  static bool body_loads(const Body& body, std::string_view name) {
    for (const auto& s : body) {
      if (expr_loads(s->expr.get(), name) || expr_loads(s->cond.get(), name) || expr_loads(s->filter.get(), name)) return true;
      for (const auto& e : s->exprs) {
        if (expr_loads(e.get(), name)) return true;
      }
      for (const auto& e : s->defaults) {
        if (expr_loads(e.get(), name)) return true;
      }
      for (const auto& e : s->values) {
        if (expr_loads(e.get(), name)) return true;
      }
      for (const auto& b : s->bodies) {
        if (body_loads(b, name)) return true;
      }
      if (body_loads(s->body, name) || body_loads(s->else_body, name)) return true;
    }
    return false;
  }

  std::vector<Token> toks_;
  const Lexer& lexer_;
  std::size_t i_ = 0;
  int depth_ = 0;
  int block_depth_ = 0;
  int loop_depth_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Runtime support

/// A scope. jinja2's scoping is reproduced as a chain: the template's top level, then one scope
/// per loop iteration, macro call, with block, generation block and captured block. `set` writes
/// to the innermost scope; reads walk outwards, then the context, then the globals.
struct Frame {
  FramePtr parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const {
    for (const auto& [k, v] : vars) {
      if (k == name) return &v;
    }
    return nullptr;
  }
  void set(std::string_view name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(std::string(name), std::move(v));
  }
};

FramePtr child_frame(const FramePtr& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

/// Arguments of a call, filter, test or method.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

struct Param {
  std::string_view name;
  std::optional<Value> dflt;  // nullopt: required
};

/// Binds `a` to a Python signature of positional-or-keyword parameters, with Python's errors.
std::vector<Value> bind(std::string_view fname, const Args& a, std::initializer_list<Param> params) {
  std::vector<std::optional<Value>> out(params.size());
  if (a.pos.size() > params.size()) {
    type_error(std::string(fname) + "() takes at most " + std::to_string(params.size()) + " arguments (" +
               std::to_string(a.pos.size()) + " given)");
  }
  for (std::size_t k = 0; k < a.pos.size(); ++k) out[k] = a.pos[k];
  for (const auto& [name, v] : a.kw) {
    std::size_t k = 0;
    for (const Param& p : params) {
      if (p.name == name) break;
      ++k;
    }
    if (k == params.size()) type_error(std::string(fname) + "() got an unexpected keyword argument '" + name + "'");
    if (out[k]) type_error(std::string(fname) + "() got multiple values for argument '" + name + "'");
    out[k] = v;
  }
  std::vector<Value> result;
  result.reserve(params.size());
  std::size_t k = 0;
  for (const Param& p : params) {
    if (out[k]) {
      result.push_back(std::move(*out[k]));
    } else if (p.dflt) {
      result.push_back(*p.dflt);
    } else {
      type_error(std::string(fname) + "() missing required argument: '" + std::string(p.name) + "'");
    }
    ++k;
  }
  return result;
}

/// Counts `units` of work against the render's step budget (defined after Renderer).
void charge(Renderer& r, uint64_t units);

/// Iterates any iterable the way Python's iter() does.
class Cursor {
 public:
  Cursor() = default;

  static Cursor over(const Value& v) {
    Cursor c;
    c.holder_ = v;
    switch (v.t) {
      case VT::kUndefined: c.mode_ = Mode::kEmpty; break;
      case VT::kStr: c.mode_ = Mode::kStr; break;
      case VT::kList: c.mode_ = Mode::kSeq; break;
      case VT::kDict: c.mode_ = Mode::kKeys; break;
      case VT::kView: {
        const ViewKind k = as_view(v).kind;
        c.mode_ = k == ViewKind::kKeys ? Mode::kKeys : k == ViewKind::kValues ? Mode::kValues : Mode::kItems;
        c.holder_ = make_dict(as_view(v).dict);
        break;
      }
      case VT::kIter: c.mode_ = Mode::kIter; break;
      case VT::kLoop: unsupported("iterating over a loop object");
      default: type_error("'" + type_name(v) + "' object is not iterable");
    }
    return c;
  }

  bool next(Renderer& r, Value& out) {
    charge(r, 1);
    switch (mode_) {
      case Mode::kEmpty: return false;
      case Mode::kStr: {
        const std::string& s = holder_.text();
        if (i_ >= s.size()) return false;
        const std::size_t start = i_;
        next_cp(s, i_);
        out = Value::str(s.substr(start, i_ - start));
        return true;
      }
      case Mode::kSeq: {
        const auto& items = as_list(holder_).items;
        if (i_ >= items.size()) return false;
        out = items[i_++];
        return true;
      }
      case Mode::kKeys: case Mode::kValues: case Mode::kItems: {
        const auto& entries = as_dict(holder_).entries;
        if (i_ >= entries.size()) return false;
        const auto& e = entries[i_++];
        out = mode_ == Mode::kKeys ? e.first : mode_ == Mode::kValues ? e.second : make_tuple({e.first, e.second});
        return true;
      }
      case Mode::kIter: return as_iter(holder_).next(r, out);
    }
    return false;
  }

 private:
  enum class Mode : uint8_t { kEmpty, kStr, kSeq, kKeys, kValues, kItems, kIter };
  Mode mode_ = Mode::kEmpty;
  Value holder_;
  std::size_t i_ = 0;
};

std::vector<Value> collect(Renderer& r, const Value& v) {
  if (v.t == VT::kList) return as_list(v).items;
  std::vector<Value> out;
  Cursor c = Cursor::over(v);
  Value item;
  while (c.next(r, item)) out.push_back(std::move(item));
  return out;
}

Value make_iter(std::string type_name, std::function<bool(Renderer&, Value&)> pull, int chain = 0) {
  auto it = std::make_shared<IterObj>();
  it->type_name = std::move(type_name);
  it->pull = std::move(pull);
  it->chain = chain;
  return Value::object(VT::kIter, std::move(it));
}

/// A lazy iterator over the items of a vector (reversed(), generators built from lists).
Value iter_of(std::string type_name, std::vector<Value> items) {
  auto data = std::make_shared<std::vector<Value>>(std::move(items));
  auto i = std::make_shared<std::size_t>(0);
  return make_iter(std::move(type_name), [data, i](Renderer&, Value& out) {
    if (*i >= data->size()) return false;
    out = (*data)[(*i)++];
    return true;
  });
}

/// jinja2's LoopContext: index/first/last/length/previtem/nextitem/cycle/changed, pulling the
/// iterable lazily (through the loop's `if` filter) and looking ahead only when asked.
struct LoopObj : Obj {
  Cursor src;
  std::function<bool(Renderer&, const Value&)> accept;  // the loop filter, if any
  std::vector<Value> ahead;  // pulled but not yet reached (front = next)
  std::size_t ahead_pos = 0;
  int64_t index0 = -1;
  Value current, before;
  bool has_before = false;
  std::optional<int64_t> length;
  bool has_changed = false;
  std::vector<Value> last_changed;

  bool pull(Renderer& r, Value& out) {
    while (src.next(r, out)) {
      if (!accept || accept(r, out)) return true;
    }
    return false;
  }
  bool advance(Renderer& r, Value& out) {
    if (ahead_pos < ahead.size()) {
      out = ahead[ahead_pos++];
      if (ahead_pos == ahead.size()) {
        ahead.clear();
        ahead_pos = 0;
      }
    } else if (!pull(r, out)) {
      return false;
    }
    ++index0;
    has_before = index0 > 0;
    before = current;
    current = out;
    return true;
  }
  const Value* peek(Renderer& r) {
    if (ahead_pos < ahead.size()) return &ahead[ahead_pos];
    Value v;
    if (!pull(r, v)) return nullptr;
    ahead.push_back(std::move(v));
    return &ahead.back();
  }
  int64_t len(Renderer& r) {
    if (!length) {
      Value v;
      while (pull(r, v)) ahead.push_back(std::move(v));
      length = index0 + 1 + static_cast<int64_t>(ahead.size() - ahead_pos);
    }
    return *length;
  }
};
LoopObj& as_loop(const Value& v) { return static_cast<LoopObj&>(*v.o); }

// ---- arithmetic

[[noreturn]] void big_int() { unsupported("an integer beyond 64 bits (Python would use a big int)"); }
int64_t add_i(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) big_int();
  return r;
}
int64_t sub_i(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) big_int();
  return r;
}
int64_t mul_i(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) big_int();
  return r;
}

void check_size(std::size_t bytes, std::size_t limit) {
  if (bytes > limit) raise("LimitError", "a string or list grew past the render limit of " + std::to_string(limit) + " bytes");
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '>': out += "&gt;"; break;
      case '<': out += "&lt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

/// Python's float divmod (floor division and modulo with the divisor's sign).
std::pair<double, double> float_divmod(double vx, double wx) {
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv = 0;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return {floordiv, mod};
}

std::string py_str_value(const Value& v) {
  std::string out;
  str_into(out, v, 0);
  return out;
}

/// Pads `body` to `width` code points: left-aligned with '-', else right-aligned.
std::string pad_field(std::string body, int64_t width, bool left) {
  const auto len = static_cast<int64_t>(cp_count(body));
  if (width <= len) return body;
  const std::string fill(static_cast<std::size_t>(width - len), ' ');
  return left ? body + fill : fill + body;
}

/// printf-style formatting (`str % args`, `|format`), as Python's: flags -+ 0#, width,
/// precision, and the conversions s r d i u o x X e E f F g G c %. Mapping keys `%(name)s` and
/// `*` widths are refused as unsupported.
std::string percent_format(const std::string& fmt, const Value& rhs) {
  std::vector<Value> args;
  const bool tuple = rhs.t == VT::kList && as_list(rhs).kind == SeqKind::kTuple;
  // Python takes any non-tuple with __getitem__ (dict, list, Undefined) as a possible mapping:
  // then unused arguments are not an error.
  const bool mapping = !tuple && (rhs.t == VT::kDict || rhs.t == VT::kList || rhs.t == VT::kUndefined);
  if (tuple) {
    args = as_list(rhs).items;
  } else {
    args.push_back(rhs);
  }
  std::string out;
  std::size_t next = 0;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) raise("ValueError", "incomplete format");
    if (fmt[i] == '(') unsupported("%(name)-formatting");
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) flags.push_back(fmt[i++]);
    int64_t width = 0;
    if (i < fmt.size() && fmt[i] == '*') unsupported("a '*' width in %-formatting");
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') width = std::min<int64_t>(width * 10 + (fmt[i++] - '0'), 1 << 20);
    int64_t precision = -1;
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      if (i < fmt.size() && fmt[i] == '*') unsupported("a '*' precision in %-formatting");
      precision = 0;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') precision = std::min<int64_t>(precision * 10 + (fmt[i++] - '0'), 1 << 20);
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) raise("ValueError", "incomplete format");
    const char c = fmt[i];
    const bool left = flags.find('-') != std::string::npos;
    if (c == '%') {
      out.push_back('%');
      continue;
    }
    if (std::string_view("srdiuoxXeEfFgGc").find(c) == std::string_view::npos) {
      raise("ValueError", std::string("unsupported format character '") + c + "'");
    }
    if (next >= args.size()) type_error("not enough arguments for format string");
    const Value& a = args[next++];
    if (c == 's' || c == 'r') {
      std::string body;
      if (c == 's') {
        str_into(body, a, 0);
      } else {
        repr_into(body, a, 0);
      }
      if (precision >= 0) {
        const std::u32string u = to_u32(body);
        if (static_cast<int64_t>(u.size()) > precision) body = from_u32(u.data(), u.data() + precision);
      }
      out += pad_field(std::move(body), width, left);
      continue;
    }
    if (c == 'c') {
      std::string body;
      if (a.is_intlike()) {
        const int64_t cp = a.as_int();
        if (cp < 0 || cp > 0x10FFFF) raise("OverflowError", "%c arg not in range(0x110000)");
        if (cp >= 0xD800 && cp <= 0xDFFF) unsupported("a surrogate code point");
        put_cp(body, static_cast<char32_t>(cp));
      } else if (a.t == VT::kStr && cp_count(a.text()) == 1) {
        body = a.text();
      } else {
        type_error("%c requires int or char");
      }
      out += pad_field(std::move(body), width, left);
      continue;
    }
    // Numbers: C's printf formats them as Python does.
    std::string spec = "%" + flags;
    if (width > 0) spec += std::to_string(width);
    if (precision >= 0) spec += "." + std::to_string(precision);
    char buf[512];
    const bool integral = c == 'd' || c == 'i' || c == 'u' || c == 'o' || c == 'x' || c == 'X';
    if (integral) {
      long long v = 0;
      if (a.is_intlike()) {
        v = a.as_int();
      } else if (a.t == VT::kFloat && (c == 'd' || c == 'i' || c == 'u')) {
        if (std::isnan(a.f)) raise("ValueError", "cannot convert float NaN to integer");
        if (std::isinf(a.f)) raise("OverflowError", "cannot convert float infinity to integer");
        const double t = std::trunc(a.f);
        if (t < -9.2e18 || t > 9.2e18) unsupported("an integer beyond 64 bits");
        v = static_cast<long long>(t);
      } else {
        type_error(std::string("%") + c + " format: " + (c == 'd' || c == 'i' || c == 'u' ? "a real number" : "an integer") +
                   " is required, not " + type_name(a));
      }
      const char conv = c == 'i' || c == 'u' ? 'd' : c;
      if (conv == 'd') {
        spec += "lld";
        std::snprintf(buf, sizeof buf, spec.c_str(), v);
      } else {
        // Python prints negative hex/octal with a sign; C would print two's complement.
        const bool neg = v < 0;
        const unsigned long long mag = neg ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
        std::string digits_spec = "%";
        if (flags.find('#') != std::string::npos) digits_spec += "#";
        if (precision >= 0) digits_spec += "." + std::to_string(precision);
        digits_spec += std::string("ll") + conv;
        std::snprintf(buf, sizeof buf, digits_spec.c_str(), mag);
        std::string body = buf;
        if (conv == 'o' && flags.find('#') != std::string::npos) {
          // Python's alternate octal prefix is 0o, C's a lone 0.
          body = "0o" + (body.size() > 1 ? body.substr(1) : std::string("0"));
        }
        const std::string sign = neg ? "-" : flags.find('+') != std::string::npos ? "+" : flags.find(' ') != std::string::npos ? " " : "";
        const auto len = static_cast<int64_t>(sign.size() + body.size());
        if (width > len && !left && flags.find('0') != std::string::npos) {
          const std::size_t prefix = (flags.find('#') != std::string::npos) ? 2 : 0;
          body.insert(std::min(prefix, body.size()), static_cast<std::size_t>(width - len), '0');
          out += sign + body;
        } else {
          out += pad_field(sign + body, width, left);
        }
        continue;
      }
    } else {
      if (!a.is_number()) type_error("must be real number, not " + type_name(a));
      spec.push_back(c);
      if (precision > 400) unsupported("a %-format precision above 400");
      std::snprintf(buf, sizeof buf, spec.c_str(), a.as_double());
    }
    out += buf;
  }
  if (next < args.size() && !mapping) type_error("not all arguments converted during string formatting");
  return out;
}

Value binop(BinOp op, const Value& a, const Value& b, std::size_t limit) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  static constexpr const char* kSym[] = {"+", "-", "*", "/", "//", "%", "**"};
  auto bad = [&]() -> Value {
    type_error(std::string("unsupported operand type(s) for ") + kSym[static_cast<int>(op)] + ": '" + type_name(a) +
               "' and '" + type_name(b) + "'");
  };
  const bool ints = a.is_intlike() && b.is_intlike();
  const bool nums = a.is_number() && b.is_number();
  switch (op) {
    case BinOp::kAdd: {
      if (ints) {
        return Value::integer(add_i(a.as_int(), b.as_int()));
      }
      if (nums) return Value::number(a.as_double() + b.as_double());
      if (a.t == VT::kStr && b.t == VT::kStr) {
        check_size(a.text().size() + b.text().size(), limit);
        if (a.markup || b.markup) {
          return Value::str((a.markup ? a.text() : html_escape(a.text())) + (b.markup ? b.text() : html_escape(b.text())), true);
        }
        return Value::str(a.text() + b.text());
      }
      if (a.t == VT::kList && b.t == VT::kList && as_list(a).kind == as_list(b).kind && as_list(a).kind != SeqKind::kRange) {
        std::vector<Value> items = as_list(a).items;
        check_size((items.size() + as_list(b).items.size()) * sizeof(Value), limit);
        items.insert(items.end(), as_list(b).items.begin(), as_list(b).items.end());
        return make_list(std::move(items), as_list(a).kind);
      }
      if (a.t == VT::kStr) type_error("can only concatenate str (not \"" + type_name(b) + "\") to str");
      if (a.t == VT::kList && as_list(a).kind == SeqKind::kList) type_error("can only concatenate list (not \"" + type_name(b) + "\") to list");
      return bad();
    }
    case BinOp::kSub: {
      if (ints) {
        return Value::integer(sub_i(a.as_int(), b.as_int()));
      }
      if (nums) return Value::number(a.as_double() - b.as_double());
      return bad();
    }
    case BinOp::kMul: {
      if (ints) {
        return Value::integer(mul_i(a.as_int(), b.as_int()));
      }
      if (nums) return Value::number(a.as_double() * b.as_double());
      const Value* seq = a.is_intlike() ? &b : b.is_intlike() ? &a : nullptr;
      const Value* count = a.is_intlike() ? &a : &b;
      if (seq != nullptr && (seq->t == VT::kStr || (seq->t == VT::kList && as_list(*seq).kind != SeqKind::kRange))) {
        const int64_t n = std::max<int64_t>(0, count->as_int());
        if (seq->t == VT::kStr) {
          check_size(seq->text().size() * static_cast<std::size_t>(n), limit);
          std::string out;
          out.reserve(seq->text().size() * static_cast<std::size_t>(n));
          for (int64_t k = 0; k < n; ++k) out += seq->text();
          return Value::str(std::move(out), seq->markup);
        }
        const auto& items = as_list(*seq).items;
        check_size(items.size() * static_cast<std::size_t>(n) * sizeof(Value), limit);
        std::vector<Value> out;
        for (int64_t k = 0; k < n; ++k) out.insert(out.end(), items.begin(), items.end());
        return make_list(std::move(out), as_list(*seq).kind);
      }
      if ((a.t == VT::kStr || a.t == VT::kList) && (b.t == VT::kStr || b.t == VT::kList || b.t == VT::kFloat)) {
        type_error("can't multiply sequence by non-int of type '" + type_name(b) + "'");
      }
      return bad();
    }
    case BinOp::kDiv: {
      if (!nums) return bad();
      const double y = b.as_double();
      if (y == 0) raise("ZeroDivisionError", ints ? "division by zero" : "float division by zero");
      return Value::number(a.as_double() / y);
    }
    case BinOp::kFloorDiv:
    case BinOp::kMod: {
      if (op == BinOp::kMod && a.t == VT::kStr) {
        if (a.markup) unsupported("%-formatting a Markup string");
        std::string s = percent_format(a.text(), b);
        check_size(s.size(), limit);
        return Value::str(std::move(s));
      }
      if (ints) {
        const int64_t x = a.as_int();
        const int64_t y = b.as_int();
        if (y == 0) raise("ZeroDivisionError", "integer division or modulo by zero");
        if (x == std::numeric_limits<int64_t>::min() && y == -1) {
          if (op == BinOp::kMod) return Value::integer(0);
          unsupported("an integer beyond 64 bits (Python would use a big int)");
        }
        int64_t q = x / y;
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          --q;
        }
        return Value::integer(op == BinOp::kFloorDiv ? q : m);
      }
      if (nums) {
        const double y = b.as_double();
        if (y == 0) raise("ZeroDivisionError", op == BinOp::kFloorDiv ? "float floor division by zero" : "float modulo");
        const auto [q, m] = float_divmod(a.as_double(), y);
        return Value::number(op == BinOp::kFloorDiv ? q : m);
      }
      return bad();
    }
    case BinOp::kPow: {
      if (ints) {
        int64_t base = a.as_int();
        int64_t e = b.as_int();
        if (e < 0) {
          if (base == 0) raise("ZeroDivisionError", "0.0 cannot be raised to a negative power");
          return Value::number(std::pow(static_cast<double>(base), static_cast<double>(e)));
        }
        int64_t r = 1;
        while (e > 0) {
          if ((e & 1) != 0) r = mul_i(r, base);
          e >>= 1;
          if (e > 0) base = mul_i(base, base);
        }
        return Value::integer(r);
      }
      if (nums) {
        const double x = a.as_double();
        const double y = b.as_double();
        if (x == 0 && y < 0) raise("ZeroDivisionError", "0.0 cannot be raised to a negative power");
        if (x < 0 && std::trunc(y) != y && std::isfinite(y)) unsupported("a complex result of **");
        const double r = std::pow(x, y);
        if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) raise("OverflowError", "(34, 'Numerical result out of range')");
        return Value::number(r);
      }
      return bad();
    }
  }
  return bad();
}

// ---- Python str methods on UTF-8 text

/// Python slice bounds for a sequence of `len` items (PySlice_AdjustIndices).
struct SliceIdx {
  int64_t start, stop, step, count;
};
SliceIdx slice_indices(int64_t len, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
                       const std::optional<int64_t>& step_opt) {
  const int64_t step = step_opt.value_or(1);
  if (step == 0) raise("ValueError", "slice step cannot be zero");
  int64_t s = 0;
  int64_t e = 0;
  if (!start) {
    s = step < 0 ? len - 1 : 0;
  } else {
    s = *start;
    if (s < 0) {
      s += len;
      if (s < 0) s = step < 0 ? -1 : 0;
    } else if (s >= len) {
      s = step < 0 ? len - 1 : len;
    }
  }
  if (!stop) {
    e = step < 0 ? -1 : len;
  } else {
    e = *stop;
    if (e < 0) {
      e += len;
      if (e < 0) e = step < 0 ? -1 : 0;
    } else if (e >= len) {
      e = step < 0 ? len - 1 : len;
    }
  }
  int64_t count = 0;
  if (step < 0) {
    if (e < s) count = (s - e - 1) / (-step) + 1;
  } else if (s < e) {
    count = (e - s - 1) / step + 1;
  }
  return {s, e, step, count};
}

/// The start/end arguments of find/count/startswith, as code point offsets clamped like Python.
std::pair<int64_t, int64_t> span_args(int64_t len, const Value& start, const Value& end) {
  auto idx = [&](const Value& v, int64_t dflt) -> int64_t {
    if (v.t == VT::kNone) return dflt;
    if (!v.is_intlike()) type_error("slice indices must be integers or None or have an __index__ method");
    int64_t x = v.as_int();
    if (x < 0) x = std::max<int64_t>(0, x + len);
    return std::min(x, len);
  };
  return {idx(start, 0), idx(end, len)};
}

std::u32string cp_set(std::string_view chars) { return to_u32(chars); }

std::string py_strip(std::string_view s, const Value& chars, bool left, bool right) {
  std::u32string set;
  const bool ws = chars.t == VT::kNone || chars.t == VT::kUndefined;
  if (!ws) {
    if (chars.t != VT::kStr) type_error("strip arg must be None or str");
    set = cp_set(chars.text());
  }
  auto strip_it = [&](char32_t c) { return ws ? py_isspace(c) : set.find(c) != std::u32string::npos; };
  std::size_t b = 0;
  std::size_t e = s.size();
  if (left) {
    while (b < e) {
      std::size_t j = b;
      if (!strip_it(next_cp(s, j))) break;
      b = j;
    }
  }
  if (right) {
    while (e > b) {
      std::size_t j = e - 1;
      while (j > b && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
      std::size_t k = j;
      if (!strip_it(next_cp(s, k))) break;
      e = j;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> py_split_ws(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> out;
  std::size_t i = 0;
  const std::size_t n = s.size();
  auto skip_ws = [&]() {
    while (i < n) {
      std::size_t j = i;
      if (!py_isspace(next_cp(s, j))) break;
      i = j;
    }
  };
  skip_ws();
  while (i < n) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.emplace_back(s.substr(i));  // the rest, as is
      return out;
    }
    const std::size_t start = i;
    while (i < n) {
      std::size_t j = i;
      if (py_isspace(next_cp(s, j))) break;
      i = j;
    }
    out.emplace_back(s.substr(start, i - start));
    skip_ws();
  }
  return out;
}

std::vector<std::string> py_rsplit_ws(std::string_view s, int64_t maxsplit) {
  const std::u32string u = to_u32(s);
  std::vector<std::string> out;
  std::size_t e = u.size();
  auto skip_ws = [&]() {
    while (e > 0 && py_isspace(u[e - 1])) --e;
  };
  skip_ws();
  while (e > 0) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(from_u32(u.data(), u.data() + e));  // the rest, as is
      break;
    }
    std::size_t b = e;
    while (b > 0 && !py_isspace(u[b - 1])) --b;
    out.push_back(from_u32(u.data() + b, u.data() + e));
    e = b;
    skip_ws();
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_split_sep(std::string_view s, std::string_view sep, int64_t maxsplit) {
  if (sep.empty()) raise("ValueError", "empty separator");
  std::vector<std::string> out;
  std::size_t i = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const std::size_t k = s.find(sep, i);
    if (k == std::string_view::npos) break;
    out.emplace_back(s.substr(i, k - i));
    i = k + sep.size();
  }
  out.emplace_back(s.substr(i));
  return out;
}

std::vector<std::string> py_rsplit_sep(std::string_view s, std::string_view sep, int64_t maxsplit) {
  if (sep.empty()) raise("ValueError", "empty separator");
  std::vector<std::string> out;
  std::size_t e = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (e < sep.size()) break;
    const std::size_t k = s.rfind(sep, e - sep.size());
    if (k == std::string_view::npos) break;
    out.emplace_back(s.substr(k + sep.size(), e - k - sep.size()));
    e = k;
  }
  out.emplace_back(s.substr(0, e));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  const std::u32string u = to_u32(s);
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < u.size()) {
    std::size_t j = i;
    while (j < u.size() && !py_linebreak(u[j])) ++j;
    std::size_t eol = j;
    if (j < u.size()) {
      eol = (u[j] == '\r' && j + 1 < u.size() && u[j + 1] == '\n') ? j + 2 : j + 1;
    }
    out.push_back(from_u32(u.data() + i, u.data() + (keepends ? eol : j)));
    i = eol;
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count, std::size_t limit) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    // Inserts `repl` before every code point and at the end.
    std::size_t i = 0;
    while (i < s.size()) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      const std::size_t start = i;
      next_cp(s, i);
      out.append(s.substr(start, i - start));
      check_size(out.size(), limit);
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  std::size_t i = 0;
  while (count < 0 || done < count) {
    const std::size_t k = s.find(old, i);
    if (k == std::string_view::npos) break;
    out.append(s.substr(i, k - i));
    out += repl;
    i = k + old.size();
    ++done;
    check_size(out.size(), limit);
  }
  out.append(s.substr(i));
  check_size(out.size(), limit);
  return out;
}

/// str.center/ljust/rjust with a one-code-point fill.
std::string py_pad(std::string_view s, int64_t width, std::string_view fill, int mode) {
  const auto len = static_cast<int64_t>(cp_count(s));
  if (width <= len) return std::string(s);
  const int64_t marg = width - len;
  int64_t left = 0;
  if (mode == 0) {
    left = marg / 2 + (marg & width & 1);
  } else if (mode == 2) {
    left = marg;
  }
  std::string out;
  for (int64_t k = 0; k < left; ++k) out += fill;
  out += s;
  for (int64_t k = 0; k < marg - left; ++k) out += fill;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Methods and globals by name

enum class G : int { kRange, kDict, kNamespace, kJoiner, kCycler, kLipsum, kRaiseException, kStrftimeNow, kCountOf };
constexpr std::array<std::string_view, static_cast<std::size_t>(G::kCountOf)> kGlobalNames = {
    "range", "dict", "namespace", "joiner", "cycler", "lipsum", "raise_exception", "strftime_now"};

enum class SM : int {
  kStrip, kLstrip, kRstrip, kSplit, kRsplit, kSplitlines, kStartswith, kEndswith, kUpper, kLower, kTitle,
  kCapitalize, kSwapcase, kReplace, kFind, kRfind, kIndex, kRindex, kCount, kJoin, kIsdigit, kIsalpha, kIsalnum,
  kIsspace, kIsupper, kIslower, kIsdecimal, kIsnumeric, kIstitle, kIsascii, kIsprintable, kCenter, kLjust, kRjust,
  kZfill, kPartition, kRpartition, kRemoveprefix, kRemovesuffix, kFormat,
  // str methods Python has and this renderer does not implement: defined, but an error when called
  kCasefold, kEncode, kExpandtabs, kFormatMap, kIsidentifier, kMaketrans, kTranslate,
  kCountOf
};
constexpr int kFirstStubStrMethod = static_cast<int>(SM::kCasefold);
constexpr std::array<std::string_view, static_cast<std::size_t>(SM::kCountOf)> kStrMethodNames = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper", "lower", "title",
    "capitalize", "swapcase", "replace", "find", "rfind", "index", "rindex", "count", "join", "isdigit", "isalpha",
    "isalnum", "isspace", "isupper", "islower", "isdecimal", "isnumeric", "istitle", "isascii", "isprintable",
    "center", "ljust", "rjust", "zfill", "partition", "rpartition", "removeprefix", "removesuffix", "format",
    "casefold", "encode", "expandtabs", "format_map", "isidentifier", "maketrans", "translate"};

enum class DM : int { kGet, kItems, kKeys, kValues, kCopy, kFromkeys, kCountOf };
constexpr std::array<std::string_view, static_cast<std::size_t>(DM::kCountOf)> kDictMethodNames = {
    "get", "items", "keys", "values", "copy", "fromkeys"};
/// Mutating dict/list methods: ImmutableSandboxedEnvironment answers an unsafe Undefined.
constexpr std::string_view kUnsafeDictMethods[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kUnsafeListMethods[] = {"append", "reverse", "insert", "sort", "extend", "remove"};

enum class LM : int { kIndex, kCount, kCopy, kPop, kClear, kCountOf };
constexpr std::array<std::string_view, static_cast<std::size_t>(LM::kCountOf)> kListMethodNames = {
    "index", "count", "copy", "pop", "clear"};

enum class LoopM : int { kCycle, kChanged };

Value make_func(FnKind kind, int id, std::string name, Value self = {}) {
  auto f = std::make_shared<FuncObj>();
  f->kind = kind;
  f->id = id;
  f->name = std::move(name);
  f->self = std::move(self);
  return Value::object(VT::kFunc, std::move(f));
}

Value unsafe_attr(const Value& obj, std::string_view name) {
  return Value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(obj) + "' object is unsafe.");
}
Value missing_attr(const Value& obj, std::string_view name) {
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + std::string(name) + "'");
}

/// Python's attribute lookup on our objects: methods first (what getattr() finds).
std::optional<Value> python_attr(const Value& obj, std::string_view name) {
  if (name.size() > 1 && name[0] == '_' && name[1] == '_') return unsafe_attr(obj, name);
  switch (obj.t) {
    case VT::kStr: {
      const int m = lookup_name(kStrMethodNames, name);
      if (m >= 0) return make_func(m >= kFirstStubStrMethod ? FnKind::kStub : FnKind::kStrMethod, m, "str." + std::string(name), obj);
      return std::nullopt;
    }
    case VT::kDict: {
      const int m = lookup_name(kDictMethodNames, name);
      if (m >= 0) return make_func(m == static_cast<int>(DM::kFromkeys) ? FnKind::kStub : FnKind::kDictMethod, m, "dict." + std::string(name), obj);
      for (const auto u : kUnsafeDictMethods) {
        if (u == name) return unsafe_attr(obj, name);
      }
      return std::nullopt;
    }
    case VT::kList: {
      const auto kind = as_list(obj).kind;
      if (kind == SeqKind::kList) {
        for (const auto u : kUnsafeListMethods) {
          if (u == name) return unsafe_attr(obj, name);
        }
      }
      const int m = lookup_name(kListMethodNames, name);
      if (m < 0) return std::nullopt;
      if (kind != SeqKind::kList && m > static_cast<int>(LM::kCount)) return std::nullopt;
      const bool stub = m >= static_cast<int>(LM::kPop);
      return make_func(stub ? FnKind::kStub : FnKind::kListMethod, m, type_name(obj) + "." + std::string(name), obj);
    }
    case VT::kBool:
    case VT::kInt:
      if (name == "real" || name == "numerator") return Value::integer(obj.as_int());
      if (name == "imag") return Value::integer(0);
      if (name == "denominator") return Value::integer(1);
      return std::nullopt;
    case VT::kFloat:
      if (name == "real") return obj;
      if (name == "imag") return Value::number(0.0);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// ---------------------------------------------------------------------------------------------
// The renderer: one per render() call; everything it mutates is its own.

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const Lexer& lexer, const RenderLimits& limits, Value context)
      : lexer_(lexer), limits_(limits), context_(std::move(context)), saved_text_limit_(t_text_limit) {
    t_text_limit = limits.max_output_bytes;
  }

  /// Values form reference cycles only through the mutable objects (a namespace that holds itself,
  /// a loop object stored in a namespace); clearing those that outlive the render frees them all.
  ~Renderer() {
    t_text_limit = saved_text_limit_;
    for (const auto& w : namespaces_) {
      if (auto ns = w.lock()) ns->attrs = DictObj{};
    }
    for (const auto& w : loops_) {
      if (auto l = w.lock()) {
        l->src = Cursor();
        l->accept = nullptr;
        l->ahead.clear();
        l->current = Value();
        l->before = Value();
        l->last_changed.clear();
      }
    }
  }
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  std::string run(const Body& body) {
    root_ = std::make_shared<Frame>();
    std::string out;
    exec(body, root_, out);
    return out;
  }

  std::size_t pos() const { return pos_; }

  /// Work proportional to data (copies, scans, sorts) counts against the step budget too, so a
  /// template cannot loop over copies of a huge list within a few "steps".
  void charge(uint64_t units) {
    steps_ += units;
    if (steps_ > limits_.max_steps) {
      raise("LimitError", "the render took more than " + std::to_string(limits_.max_steps) + " steps");
    }
  }
  static uint64_t weight(const Value& v) {
    switch (v.t) {
      case VT::kStr: return v.text().size() / 16;
      case VT::kList: return as_list(v).items.size();
      case VT::kDict: return as_dict(v).entries.size();
      default: return 0;
    }
  }

  // ---- used by lazy iterators

  Value call_filter_by_name(const Value& name, const Value& v, const Args& a) {
    if (name.t != VT::kStr) type_error("filter name must be a string");
    const int id = lookup_name(kFilterNames, name.text());
    if (id < 0) raise("TemplateRuntimeError", "No filter named '" + name.text() + "'.");
    if (id >= kFirstUnsupportedFilter) unsupported("the '" + name.text() + "' filter");
    return filter(id, v, a);
  }
  bool call_test_by_name(const Value& name, const Value& v, const Args& a) {
    if (name.t != VT::kStr) type_error("test name must be a string");
    const int id = lookup_name(kTestNames, name.text());
    if (id < 0) raise("TemplateRuntimeError", "No test named '" + name.text() + "'.");
    return test(id, v, a);
  }
  Value getitem(const Value& obj, const Value& key);

 private:
  struct CallGuard {
    explicit CallGuard(Renderer& r) : r_(r) {
      if (++r_.call_depth_ > r_.limits_.max_call_depth) {
        raise("LimitError", "macro calls nest more than " + std::to_string(r_.limits_.max_call_depth) + " levels");
      }
    }
    ~CallGuard() { --r_.call_depth_; }
    CallGuard(const CallGuard&) = delete;
    CallGuard& operator=(const CallGuard&) = delete;
    Renderer& r_;
  };

  void tick(std::size_t pos) {
    pos_ = pos;
    if (++steps_ > limits_.max_steps) {
      raise("LimitError", "the render took more than " + std::to_string(limits_.max_steps) + " steps");
    }
  }

  void append(std::string& out, std::string_view s) {
    if (out.size() + s.size() > limits_.max_output_bytes) {
      raise("LimitError", "the rendered text grew past " + std::to_string(limits_.max_output_bytes) + " bytes");
    }
    out.append(s);
  }

  std::string to_str(const Value& v) {
    if (v.t == VT::kStr) return v.text();
    if (v.t == VT::kLoop) {
      LoopObj& l = as_loop(v);
      return "<LoopContext " + std::to_string(l.index0 + 1) + "/" + std::to_string(l.len(*this)) + ">";
    }
    return py_str_value(v);
  }
  Value soft_str(const Value& v) { return v.t == VT::kStr ? v : Value::str(to_str(v)); }

  // ---- statements

  Flow exec(const Body& body, const FramePtr& frame, std::string& out) {
    for (const auto& s : body) {
      const Flow flow = exec_stmt(*s, frame, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec_stmt(const Stmt& s, const FramePtr& frame, std::string& out) {
    tick(s.pos);
    switch (s.kind) {
      case SK::kText:
        append(out, s.text);
        return Flow::kNormal;
      case SK::kPrint:
        for (const auto& e : s.exprs) {
          const Value v = eval(*e, frame);
          pos_ = e->pos;
          append(out, to_str(v));
        }
        return Flow::kNormal;
      case SK::kIf:
        for (std::size_t k = 0; k < s.exprs.size(); ++k) {
          if (truthy(eval(*s.exprs[k], frame))) return exec(s.bodies[k], frame, out);
        }
        if (s.bodies.size() > s.exprs.size()) return exec(s.bodies.back(), frame, out);
        return Flow::kNormal;
      case SK::kFor:
        return exec_for(s, frame, out);
      case SK::kSet: {
        Value v = eval(*s.expr, frame);
        pos_ = s.pos;
        assign(s.target, v, frame);
        return Flow::kNormal;
      }
      case SK::kSetNs: {
        Value v = eval(*s.expr, frame);
        const Value ns = eval(*s.cond, frame);
        pos_ = s.pos;
        if (ns.t != VT::kNamespace) raise("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
        as_ns(ns).attrs.set(Value::str(s.text), std::move(v));
        return Flow::kNormal;
      }
      case SK::kSetBlock: {
        std::string captured;
        const Flow flow = exec(s.body, child_frame(frame), captured);
        if (flow != Flow::kNormal) return flow;
        Value v = Value::str(std::move(captured));
        if (s.filter) v = apply_filter_chain(*s.filter, v, frame);
        pos_ = s.pos;
        if (s.ns_target) {
          const Value ns = eval(*s.cond, frame);
          if (ns.t != VT::kNamespace) raise("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
          as_ns(ns).attrs.set(Value::str(s.text), std::move(v));
        } else {
          assign(s.target, v, frame);
        }
        return Flow::kNormal;
      }
      case SK::kMacro: {
        Value fn = make_func(FnKind::kMacro, 0, s.text);
        as_func(fn).macro = &s;
        as_func(fn).closure = frame;
        frame->set(s.text, std::move(fn));
        return Flow::kNormal;
      }
      case SK::kBreak:
        return Flow::kBreak;
      case SK::kContinue:
        return Flow::kContinue;
      case SK::kGeneration: {
        CallGuard guard(*this);
        std::string captured;
        exec(s.body, child_frame(frame), captured);
        append(out, captured);
        return Flow::kNormal;
      }
      case SK::kWith: {
        std::vector<Value> values;
        for (const auto& e : s.values) values.push_back(eval(*e, frame));
        FramePtr inner = child_frame(frame);
        for (std::size_t k = 0; k < s.targets.size(); ++k) assign(s.targets[k], values[k], inner);
        return exec(s.body, inner, out);
      }
      case SK::kFilterBlock: {
        std::string captured;
        const Flow flow = exec(s.body, child_frame(frame), captured);
        if (flow != Flow::kNormal) return flow;
        const Value v = apply_filter_chain(*s.filter, Value::str(std::move(captured)), frame);
        append(out, to_str(v));
        return Flow::kNormal;
      }
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Stmt& s, const FramePtr& frame, std::string& out) {
    const Value iterable = eval(*s.expr, frame);
    pos_ = s.pos;
    auto loop = std::make_shared<LoopObj>();
    track(loops_, loop);
    loop->src = Cursor::over(iterable);
    if (s.cond) {
      const Stmt* stmt = &s;
      FramePtr outer = frame;
      loop->accept = [stmt, outer](Renderer& r, const Value& item) {
        FramePtr test_frame = child_frame(outer);
        r.assign(stmt->target, item, test_frame);
        return truthy(r.eval(*stmt->cond, test_frame));
      };
    }
    const Value loop_value = Value::object(VT::kLoop, loop);
    bool any = false;
    Value item;
    while (loop->advance(*this, item)) {
      tick(s.pos);
      any = true;
      FramePtr inner = child_frame(frame);
      assign(s.target, item, inner);
      inner->set("loop", loop_value);
      if (exec(s.body, inner, out) == Flow::kBreak) break;
    }
    if (!any && !s.else_body.empty()) return exec(s.else_body, child_frame(frame), out);
    return Flow::kNormal;
  }

  void assign(const Target& t, const Value& v, const FramePtr& frame) {
    if (!t.tuple) {
      frame->set(t.name, v);
      return;
    }
    if (v.is_undefined()) undefined_error(v);  // unpacking iterates, and Undefined iterates empty
    if (!(v.t == VT::kStr || v.t == VT::kList || v.t == VT::kDict || v.t == VT::kView || v.t == VT::kIter)) {
      type_error("cannot unpack non-iterable " + type_name(v) + " object");
    }
    std::vector<Value> items = collect(*this, v);
    const std::size_t want = t.items.size();
    if (items.size() > want) raise("ValueError", "too many values to unpack (expected " + std::to_string(want) + ")");
    if (items.size() < want) {
      raise("ValueError", "not enough values to unpack (expected " + std::to_string(want) + ", got " + std::to_string(items.size()) + ")");
    }
    for (std::size_t k = 0; k < want; ++k) assign(t.items[k], items[k], frame);
  }

  // ---- expressions

  Value lookup(const std::string& name, const FramePtr& frame) {
    for (const Frame* f = frame.get(); f != nullptr; f = f->parent.get()) {
      if (const Value* v = f->find(name)) return *v;
    }
    if (const Value* v = as_dict(context_).get_str(name)) return *v;
    const int g = lookup_name(kGlobalNames, name);
    if (g >= 0) return make_func(FnKind::kGlobal, g, name);
    return Value::undefined("'" + name + "' is undefined");
  }

  Value eval(const Expr& e, const FramePtr& frame) {
    tick(e.pos);
    switch (e.kind) {
      case EK::kConst:
        return e.value;
      case EK::kName:
        return lookup(e.name, frame);
      case EK::kGetattr: {
        const Value obj = eval(*e.node, frame);
        pos_ = e.pos;
        return getattr(obj, e.name);
      }
      case EK::kGetitem: {
        const Value obj = eval(*e.node, frame);
        const Expr& k = *e.args[0];
        if (k.kind == EK::kSlice) return slice(obj, k, frame);
        const Value key = eval(k, frame);
        pos_ = e.pos;
        return getitem(obj, key);
      }
      case EK::kSlice:
        unsupported("a slice outside a subscript");
      case EK::kCall: {
        const Value callee = eval(*e.node, frame);
        Args a = eval_args(e, frame);
        pos_ = e.pos;
        Value r = invoke(callee, a);
        charge(weight(r));
        return r;
      }
      case EK::kFilter: {
        const Value v = eval(*e.node, frame);
        Value r = apply_filter(e, v, frame);
        charge(weight(r) + weight(v));
        return r;
      }
      case EK::kTest: {
        const Value v = eval(*e.node, frame);
        Args a = eval_args(e, frame);
        pos_ = e.pos;
        if (e.fn < 0) raise("TemplateRuntimeError", "No test named '" + e.name + "' found.");
        return Value::boolean(test(e.fn, v, a));
      }
      case EK::kNot:
        return Value::boolean(!truthy(eval(*e.node, frame)));
      case EK::kNeg:
      case EK::kPos: {
        const Value v = eval(*e.node, frame);
        pos_ = e.pos;
        if (v.is_undefined()) undefined_error(v);
        if (e.kind == EK::kPos) {
          if (v.is_intlike()) return Value::integer(v.as_int());
          if (v.t == VT::kFloat) return v;
          type_error("bad operand type for unary +: '" + type_name(v) + "'");
        }
        if (v.is_intlike()) {
          if (v.as_int() == std::numeric_limits<int64_t>::min()) unsupported("an integer beyond 64 bits (Python would use a big int)");
          return Value::integer(-v.as_int());
        }
        if (v.t == VT::kFloat) return Value::number(-v.f);
        type_error("bad operand type for unary -: '" + type_name(v) + "'");
      }
      case EK::kBin: {
        const Value a = eval(*e.args[0], frame);
        const Value b = eval(*e.args[1], frame);
        pos_ = e.pos;
        Value r = binop(e.bin, a, b, limits_.max_output_bytes);
        charge(weight(r));
        return r;
      }
      case EK::kCompare: {
        Value left = eval(*e.args[0], frame);
        for (std::size_t k = 0; k < e.ops.size(); ++k) {
          Value right = eval(*e.args[k + 1], frame);
          pos_ = e.pos;
          charge(weight(left) + weight(right));
          if (!compare(e.ops[k], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case EK::kAnd: {
        Value left = eval(*e.args[0], frame);
        if (!truthy(left)) return left;
        return eval(*e.args[1], frame);
      }
      case EK::kOr: {
        Value left = eval(*e.args[0], frame);
        if (truthy(left)) return left;
        return eval(*e.args[1], frame);
      }
      case EK::kCond: {
        if (truthy(eval(*e.args[0], frame))) return eval(*e.args[1], frame);
        if (e.args[2]) return eval(*e.args[2], frame);
        return Value::undefined("the inline if-expression on line " + std::to_string(lexer_.location(e.pos).first) +
                                " evaluated to false and no else section was defined.");
      }
      case EK::kList:
      case EK::kTuple: {
        std::vector<Value> items;
        items.reserve(e.args.size());
        for (const auto& a : e.args) items.push_back(eval(*a, frame));
        return make_list(std::move(items), e.kind == EK::kList ? SeqKind::kList : SeqKind::kTuple);
      }
      case EK::kDict: {
        auto d = new_dict();
        for (std::size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = eval(*e.args[k], frame);
          Value val = eval(*e.args[k + 1], frame);
          pos_ = e.args[k]->pos;
          check_hashable(key);
          d->set(key, std::move(val));
        }
        return make_dict(std::move(d));
      }
      case EK::kConcat: {
        std::string out;
        for (const auto& a : e.args) {
          const Value v = eval(*a, frame);
          pos_ = e.pos;
          out += to_str(v);
          check_size(out.size(), limits_.max_output_bytes);
        }
        return Value::str(std::move(out));
      }
    }
    unsupported("an expression");
  }

  Args eval_args(const Expr& e, const FramePtr& frame) {
    Args a;
    a.pos.reserve(e.args.size());
    for (const auto& x : e.args) a.pos.push_back(eval(*x, frame));
    for (const auto& k : e.kwargs) a.kw.emplace_back(k.name, eval(*k.value, frame));
    return a;
  }

  Value apply_filter(const Expr& e, const Value& v, const FramePtr& frame) {
    Args a = eval_args(e, frame);
    pos_ = e.pos;
    if (e.fn < 0) raise("TemplateRuntimeError", "No filter named '" + e.name + "' found.");
    return filter(e.fn, v, a);
  }

  /// A filter chain whose innermost subject is missing (filter blocks, `set x | f`).
  Value apply_filter_chain(const Expr& e, const Value& v, const FramePtr& frame) {
    const Value inner = e.node ? apply_filter_chain(*e.node, v, frame) : v;
    return apply_filter(e, inner, frame);
  }

  bool compare(CmpOp op, const Value& a, const Value& b) {
    switch (op) {
      case CmpOp::kEq: return py_eq(a, b);
      case CmpOp::kNe: return !py_eq(a, b);
      case CmpOp::kLt: return py_compare(a, b, "<") == -1;
      case CmpOp::kLe: { const int c = py_compare(a, b, "<="); return c == -1 || c == 0; }
      case CmpOp::kGt: return py_compare(a, b, ">") == 1;
      case CmpOp::kGe: { const int c = py_compare(a, b, ">="); return c == 1 || c == 0; }
      case CmpOp::kIn: return contains(b, a);
      case CmpOp::kNotIn: return !contains(b, a);
    }
    return false;
  }

  /// `item in container`.
  bool contains(const Value& container, const Value& item) {
    switch (container.t) {
      case VT::kStr:
        if (item.t != VT::kStr) type_error("'in <string>' requires string as left operand, not " + type_name(item));
        return container.text().find(item.text()) != std::string::npos;
      case VT::kDict:
        check_hashable(item);
        return as_dict(container).get(item) != nullptr;
      case VT::kView:
        if (as_view(container).kind == ViewKind::kKeys) {
          check_hashable(item);
          return as_view(container).dict->get(item) != nullptr;
        }
        break;
      case VT::kList:
        for (const auto& x : as_list(container).items) {
          if (py_eq(x, item)) return true;
        }
        return false;
      case VT::kUndefined:
      case VT::kIter:
        break;
      default:
        type_error("argument of type '" + type_name(container) + "' is not iterable");
    }
    Cursor c = Cursor::over(container);
    Value x;
    while (c.next(*this, x)) {
      if (py_eq(x, item)) return true;
    }
    return false;
  }

  // ---- attribute and item access (the sandbox's getattr/getitem)

  Value getattr(const Value& obj, const std::string& name) {
    if (obj.is_undefined()) undefined_error(obj);
    if (auto m = python_attr(obj, name)) return *m;
    switch (obj.t) {
      case VT::kDict:
        if (const Value* v = as_dict(obj).get_str(name)) return *v;
        break;
      case VT::kNamespace:
        if (const Value* v = as_ns(obj).attrs.get_str(name)) return *v;
        break;
      case VT::kLoop:
        return loop_attr(obj, name);
      default:
        break;
    }
    return missing_attr(obj, name);
  }

  Value loop_attr(const Value& obj, std::string_view name) {
    LoopObj& l = as_loop(obj);
    if (name == "index") return Value::integer(l.index0 + 1);
    if (name == "index0") return Value::integer(l.index0);
    if (name == "first") return Value::boolean(l.index0 == 0);
    if (name == "last") return Value::boolean(l.peek(*this) == nullptr);
    if (name == "length") return Value::integer(l.len(*this));
    if (name == "revindex") return Value::integer(l.len(*this) - l.index0);
    if (name == "revindex0") return Value::integer(l.len(*this) - l.index0 - 1);
    if (name == "depth") return Value::integer(1);
    if (name == "depth0") return Value::integer(0);
    if (name == "previtem") return l.has_before ? l.before : Value::undefined("there is no previous item");
    if (name == "nextitem") {
      const Value* n = l.peek(*this);
      return n != nullptr ? *n : Value::undefined("there is no next item");
    }
    if (name == "cycle") return make_func(FnKind::kLoopMethod, static_cast<int>(LoopM::kCycle), "loop.cycle", obj);
    if (name == "changed") return make_func(FnKind::kLoopMethod, static_cast<int>(LoopM::kChanged), "loop.changed", obj);
    return missing_attr(obj, name);
  }

  Value slice(const Value& obj, const Expr& sl, const FramePtr& frame) {
    std::array<Value, 3> parts;
    for (std::size_t k = 0; k < 3; ++k) parts[k] = sl.args[k] ? eval(*sl.args[k], frame) : Value::none();
    pos_ = sl.pos;
    // jinja2 compiles a slice to a plain Python subscript (not the sandbox's getitem), so its
    // errors propagate instead of becoming Undefined.
    if (obj.is_undefined()) undefined_error(obj);
    if (obj.t == VT::kDict) type_error("unhashable type: 'slice'");
    if (obj.t != VT::kStr && obj.t != VT::kList) type_error("'" + type_name(obj) + "' object is not subscriptable");
    std::array<std::optional<int64_t>, 3> idx;
    for (std::size_t k = 0; k < 3; ++k) {
      if (parts[k].t == VT::kNone) continue;
      if (!parts[k].is_intlike()) type_error("slice indices must be integers or None or have an __index__ method");
      idx[k] = parts[k].as_int();
    }
    if (obj.t == VT::kStr) {
      const std::u32string u = to_u32(obj.text());
      const SliceIdx si = slice_indices(static_cast<int64_t>(u.size()), idx[0], idx[1], idx[2]);
      std::u32string r;
      r.reserve(static_cast<std::size_t>(si.count));
      for (int64_t k = 0, j = si.start; k < si.count; ++k, j += si.step) r.push_back(u[static_cast<std::size_t>(j)]);
      return Value::str(from_u32(r), obj.markup);
    }
    if (obj.t == VT::kList) {
      const ListObj& l = as_list(obj);
      const SliceIdx si = slice_indices(static_cast<int64_t>(l.items.size()), idx[0], idx[1], idx[2]);
      std::vector<Value> r;
      r.reserve(static_cast<std::size_t>(si.count));
      for (int64_t k = 0, j = si.start; k < si.count; ++k, j += si.step) r.push_back(l.items[static_cast<std::size_t>(j)]);
      Value out = make_list(std::move(r), l.kind);
      if (l.kind == SeqKind::kRange) {
        auto& ol = static_cast<ListObj&>(*out.o);
        ol.start = l.start + si.start * l.step;
        ol.stop = l.start + si.stop * l.step;
        ol.step = l.step * si.step;
      }
      return out;
    }
    type_error("'" + type_name(obj) + "' object is not subscriptable");
  }

  // ---- calls

  Value invoke(const Value& callee, Args& a) {
    if (callee.is_undefined()) undefined_error(callee);
    if (callee.t == VT::kLoop) unsupported("calling loop() (recursive loops)");
    if (callee.t != VT::kFunc) type_error("'" + type_name(callee) + "' object is not callable");
    FuncObj& fn = as_func(callee);
    switch (fn.kind) {
      case FnKind::kMacro: return call_macro(fn, a);
      case FnKind::kGlobal: return call_global(fn, a);
      case FnKind::kStrMethod: return str_method(fn, a);
      case FnKind::kDictMethod: return dict_method(fn, a);
      case FnKind::kListMethod: return list_method(fn, a);
      case FnKind::kLoopMethod: return loop_method(fn, a);
      case FnKind::kJoiner: {
        if (!a.pos.empty() || !a.kw.empty()) type_error("joiner takes no arguments");
        if (!fn.joiner_used) {
          fn.joiner_used = true;
          return Value::str("");
        }
        return Value::str(fn.joiner_sep);
      }
      case FnKind::kStub: unsupported("calling " + fn.name + "()");
    }
    unsupported("this call");
  }

  Value call_macro(FuncObj& fn, Args& a) {
    const Stmt& m = *fn.macro;
    CallGuard guard(*this);
    const FramePtr closure = fn.closure.lock();
    if (!closure) unsupported("calling macro '" + m.text + "' after the scope that defined it has ended");
    FramePtr frame = child_frame(closure);
    const std::size_t np = m.params.size();
    if (a.pos.size() > np && !m.uses_varargs) {
      type_error("macro '" + m.text + "' takes not more than " + std::to_string(np) + " argument(s)");
    }
    std::vector<bool> given(np, false);
    for (std::size_t k = 0; k < std::min(np, a.pos.size()); ++k) {
      frame->set(m.params[k], a.pos[k]);
      given[k] = true;
    }
    auto extra_kw = new_dict();
    for (auto& [name, v] : a.kw) {
      std::size_t k = 0;
      while (k < np && m.params[k] != name) ++k;
      if (k < np) {
        if (given[k]) type_error("macro '" + m.text + "' got multiple values for argument '" + name + "'");
        frame->set(name, v);
        given[k] = true;
      } else if (m.uses_kwargs) {
        extra_kw->set(Value::str(name), v);
      } else {
        type_error("macro '" + m.text + "' takes no keyword argument '" + name + "'");
      }
    }
    const std::size_t first_default = np - m.defaults.size();
    for (std::size_t k = 0; k < np; ++k) {
      if (given[k]) continue;
      if (k >= first_default) {
        frame->set(m.params[k], eval(*m.defaults[k - first_default], frame));
      } else {
        frame->set(m.params[k], Value::undefined("parameter '" + m.params[k] + "' was not provided"));
      }
    }
    if (m.uses_varargs) {
      std::vector<Value> rest;
      for (std::size_t k = np; k < a.pos.size(); ++k) rest.push_back(a.pos[k]);
      frame->set("varargs", make_tuple(std::move(rest)));
    }
    if (m.uses_kwargs) frame->set("kwargs", make_dict(std::move(extra_kw)));
    std::string out;
    exec(m.body, frame, out);
    return Value::str(std::move(out));
  }

  static Value dict_from_args(std::string_view fname, const Args& a) {
    auto d = new_dict();
    if (a.pos.size() > 1) type_error(std::string(fname) + " expected at most 1 argument, got " + std::to_string(a.pos.size()));
    if (a.pos.size() == 1) {
      const Value& src = a.pos[0];
      if (src.t == VT::kDict) {
        for (const auto& [k, v] : as_dict(src).entries) d->set(k, v);
      } else if (src.t == VT::kNamespace) {
        type_error("'Namespace' object is not iterable");
      } else {
        unsupported(std::string(fname) + " from a " + type_name(src));
      }
    }
    for (const auto& [k, v] : a.kw) d->set(Value::str(k), v);
    return make_dict(std::move(d));
  }

  Value call_global(FuncObj& fn, Args& a) {
    switch (static_cast<G>(fn.id)) {
      case G::kRange: {
        if (!a.kw.empty()) type_error("range() takes no keyword arguments");
        if (a.pos.empty() || a.pos.size() > 3) type_error("range expected at least 1 argument, got " + std::to_string(a.pos.size()));
        int64_t v[3] = {0, 0, 1};
        for (std::size_t k = 0; k < a.pos.size(); ++k) {
          if (!a.pos[k].is_intlike()) type_error("'" + type_name(a.pos[k]) + "' object cannot be interpreted as an integer");
        }
        if (a.pos.size() == 1) {
          v[1] = a.pos[0].as_int();
        } else {
          v[0] = a.pos[0].as_int();
          v[1] = a.pos[1].as_int();
          if (a.pos.size() == 3) v[2] = a.pos[2].as_int();
        }
        if (v[2] == 0) raise("ValueError", "range() arg 3 must not be zero");
        int64_t n = 0;
        if (v[2] > 0 && v[0] < v[1]) n = (v[1] - v[0] - 1) / v[2] + 1;
        if (v[2] < 0 && v[0] > v[1]) n = (v[0] - v[1] - 1) / (-v[2]) + 1;
        if (n > 100000) raise("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        std::vector<Value> items;
        items.reserve(static_cast<std::size_t>(n));
        for (int64_t k = 0; k < n; ++k) items.push_back(Value::integer(v[0] + k * v[2]));
        Value out = make_list(std::move(items), SeqKind::kRange);
        auto& l = static_cast<ListObj&>(*out.o);
        l.start = v[0];
        l.stop = v[1];
        l.step = v[2];
        return out;
      }
      case G::kDict:
        return dict_from_args("dict", a);
      case G::kNamespace: {
        const Value d = dict_from_args("namespace", a);
        auto ns = std::make_shared<NamespaceObj>();
        ns->attrs = as_dict(d);
        track(namespaces_, ns);
        return Value::object(VT::kNamespace, std::move(ns));
      }
      case G::kJoiner: {
        const auto p = bind("joiner", a, {{"sep", Value::str(", ")}});
        Value j = make_func(FnKind::kJoiner, 0, "joiner");
        as_func(j).joiner_sep = to_str(p[0]);
        return j;
      }
      case G::kCycler:
      case G::kLipsum:
        unsupported("calling " + fn.name + "()");
      case G::kRaiseException: {
        const auto p = bind("raise_exception", a, {{"message", std::nullopt}});
        raise("TemplateError", to_str(p[0]));
      }
      case G::kStrftimeNow: {
        const auto p = bind("strftime_now", a, {{"format", std::nullopt}});
        if (p[0].t != VT::kStr) type_error("strftime() argument 1 must be str, not " + type_name(p[0]));
        return Value::str(strftime_now(p[0].text()));
      }
      case G::kCountOf:
        break;
    }
    unsupported("this global");
  }

  /// datetime.now().strftime(format): local time; %f is microseconds and %z/%Z are empty for
  /// the naive datetime Python uses.
  static std::string strftime_now(const std::string& format) {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
    std::tm tm{};
    localtime_r(&t, &tm);
    std::string fmt;
    for (std::size_t i = 0; i < format.size(); ++i) {
      if (format[i] == '%' && i + 1 < format.size()) {
        const char c = format[i + 1];
        if (c == 'f') {
          char buf[8];
          std::snprintf(buf, sizeof buf, "%06lld", static_cast<long long>(micros));
          fmt += buf;
          ++i;
          continue;
        }
        if (c == 'z' || c == 'Z') {
          ++i;
          continue;
        }
        fmt += format.substr(i, 2);
        ++i;
        continue;
      }
      fmt.push_back(format[i]);
    }
    if (fmt.empty()) return "";
    std::string out(256 + fmt.size() * 8, '\0');
    const std::size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
    out.resize(n);
    return out;
  }

  Value loop_method(FuncObj& fn, Args& a) {
    LoopObj& l = as_loop(fn.self);
    if (!a.kw.empty()) type_error("loop." + fn.name + "() takes no keyword arguments");
    if (fn.id == static_cast<int>(LoopM::kCycle)) {
      if (a.pos.empty()) type_error("no items for cycling given");
      return a.pos[static_cast<std::size_t>(l.index0 % static_cast<int64_t>(a.pos.size()))];
    }
    bool same = l.has_changed && l.last_changed.size() == a.pos.size();
    for (std::size_t k = 0; same && k < a.pos.size(); ++k) same = py_eq(l.last_changed[k], a.pos[k]);
    if (same) return Value::boolean(false);
    l.has_changed = true;
    l.last_changed = a.pos;
    return Value::boolean(true);
  }

  Value dict_method(FuncObj& fn, Args& a) {
    const Value& self = fn.self;
    switch (static_cast<DM>(fn.id)) {
      case DM::kGet: {
        if (!a.kw.empty()) type_error("get() takes no keyword arguments");
        if (a.pos.empty() || a.pos.size() > 2) type_error("get expected at least 1 argument, got " + std::to_string(a.pos.size()));
        check_hashable(a.pos[0]);
        if (const Value* v = as_dict(self).get(a.pos[0])) return *v;
        return a.pos.size() == 2 ? a.pos[1] : Value::none();
      }
      case DM::kItems:
      case DM::kKeys:
      case DM::kValues: {
        if (!a.pos.empty() || !a.kw.empty()) type_error(fn.name + "() takes no arguments");
        auto w = std::make_shared<ViewObj>();
        w->kind = fn.id == static_cast<int>(DM::kItems) ? ViewKind::kItems : fn.id == static_cast<int>(DM::kKeys) ? ViewKind::kKeys : ViewKind::kValues;
        w->dict = dict_ptr(self);
        return Value::object(VT::kView, std::move(w));
      }
      case DM::kCopy: {
        if (!a.pos.empty() || !a.kw.empty()) type_error("copy() takes no arguments");
        return make_dict(std::make_shared<DictObj>(as_dict(self)));
      }
      default:
        break;
    }
    unsupported("calling " + fn.name + "()");
  }

  Value list_method(FuncObj& fn, Args& a) {
    const auto& items = as_list(fn.self).items;
    if (!a.kw.empty()) type_error(fn.name + "() takes no keyword arguments");
    switch (static_cast<LM>(fn.id)) {
      case LM::kCount: {
        if (a.pos.size() != 1) type_error("count() takes exactly one argument (" + std::to_string(a.pos.size()) + " given)");
        int64_t n = 0;
        for (const auto& x : items) n += py_eq(x, a.pos[0]) ? 1 : 0;
        return Value::integer(n);
      }
      case LM::kIndex: {
        if (a.pos.empty() || a.pos.size() > 3) type_error("index expected at least 1 argument, got " + std::to_string(a.pos.size()));
        const auto len = static_cast<int64_t>(items.size());
        const auto [b, e] = span_args(len, a.pos.size() > 1 ? a.pos[1] : Value::none(), a.pos.size() > 2 ? a.pos[2] : Value::none());
        for (int64_t k = b; k < e; ++k) {
          if (py_eq(items[static_cast<std::size_t>(k)], a.pos[0])) return Value::integer(k);
        }
        raise("ValueError", "value is not in " + type_name(fn.self));
      }
      case LM::kCopy:
        if (!a.pos.empty()) type_error("copy() takes no arguments");
        return make_list(items);
      default:
        break;
    }
    unsupported("calling " + fn.name + "()");
  }

  Value str_method(FuncObj& fn, Args& a) {
    const std::string& s = fn.self.text();
    const bool mk = fn.self.markup;
    const auto m = static_cast<SM>(fn.id);
    const std::string fname(kStrMethodNames[static_cast<std::size_t>(fn.id)]);
    auto no_kw = [&]() {
      if (!a.kw.empty()) type_error(fname + "() takes no keyword arguments");
    };
    auto argc = [&](std::size_t lo, std::size_t hi) {
      no_kw();
      if (a.pos.size() < lo || a.pos.size() > hi) {
        type_error(fname + "() takes " + (lo == hi ? "exactly " + std::to_string(lo) : "at most " + std::to_string(hi)) +
                   " argument" + (hi == 1 ? "" : "s") + " (" + std::to_string(a.pos.size()) + " given)");
      }
    };
    auto str_arg = [&](std::size_t k) -> const std::string& {
      if (a.pos[k].t != VT::kStr) type_error("must be str, not " + type_name(a.pos[k]));
      return a.pos[k].text();
    };
    auto int_arg = [&](const Value& v) -> int64_t {
      if (!v.is_intlike()) type_error("'" + type_name(v) + "' object cannot be interpreted as an integer");
      return v.as_int();
    };
    auto markup_unsupported = [&]() {
      if (mk) unsupported("str." + fname + "() on a Markup string");
    };
    auto str_list = [&](std::vector<std::string> parts) {
      std::vector<Value> items;
      items.reserve(parts.size());
      for (auto& p : parts) items.push_back(Value::str(std::move(p)));
      return make_list(std::move(items));
    };
    auto predicate = [&](bool (*pred)(char32_t)) {
      argc(0, 0);
      if (s.empty()) return Value::boolean(false);
      for (std::size_t i = 0; i < s.size();) {
        if (!pred(next_cp(s, i))) return Value::boolean(false);
      }
      return Value::boolean(true);
    };
    switch (m) {
      case SM::kStrip: case SM::kLstrip: case SM::kRstrip: {
        argc(0, 1);
        const Value chars = a.pos.empty() ? Value::none() : a.pos[0];
        return Value::str(py_strip(s, chars, m != SM::kRstrip, m != SM::kLstrip), mk);
      }
      case SM::kSplit: case SM::kRsplit: {
        markup_unsupported();
        const auto p = bind(fname, a, {{"sep", Value::none()}, {"maxsplit", Value::integer(-1)}});
        const int64_t maxsplit = int_arg(p[1]);
        if (p[0].t == VT::kNone) return str_list(m == SM::kSplit ? py_split_ws(s, maxsplit) : py_rsplit_ws(s, maxsplit));
        if (p[0].t != VT::kStr) type_error("must be str or None, not " + type_name(p[0]));
        return str_list(m == SM::kSplit ? py_split_sep(s, p[0].text(), maxsplit) : py_rsplit_sep(s, p[0].text(), maxsplit));
      }
      case SM::kSplitlines: {
        markup_unsupported();
        const auto p = bind(fname, a, {{"keepends", Value::boolean(false)}});
        return str_list(py_splitlines(s, truthy(p[0])));
      }
      case SM::kStartswith: case SM::kEndswith: {
        argc(1, 3);
        const std::u32string u = to_u32(s);
        const auto [b, e] = span_args(static_cast<int64_t>(u.size()), a.pos.size() > 1 ? a.pos[1] : Value::none(),
                                      a.pos.size() > 2 ? a.pos[2] : Value::none());
        std::vector<Value> prefixes;
        if (a.pos[0].t == VT::kList && as_list(a.pos[0]).kind == SeqKind::kTuple) {
          prefixes = as_list(a.pos[0]).items;
        } else if (a.pos[0].t == VT::kStr) {
          prefixes.push_back(a.pos[0]);
        } else {
          type_error(fname + " first arg must be str or a tuple of str, not " + type_name(a.pos[0]));
        }
        for (const auto& p : prefixes) {
          if (p.t != VT::kStr) type_error("tuple for " + fname + " must only contain str, not " + type_name(p));
          const std::u32string x = to_u32(p.text());
          const auto xl = static_cast<int64_t>(x.size());
          if (b > static_cast<int64_t>(u.size())) continue;
          if (e - b < xl) continue;
          const int64_t at = m == SM::kStartswith ? b : e - xl;
          if (u.compare(static_cast<std::size_t>(at), x.size(), x) == 0) return Value::boolean(true);
        }
        return Value::boolean(false);
      }
      case SM::kUpper: argc(0, 0); return Value::str(py_upper(s), mk);
      case SM::kLower: argc(0, 0); return Value::str(py_lower(s), mk);
      case SM::kTitle: argc(0, 0); return Value::str(py_title(s), mk);
      case SM::kCapitalize: argc(0, 0); return Value::str(py_capitalize(s), mk);
      case SM::kSwapcase: argc(0, 0); return Value::str(py_swapcase(s), mk);
      case SM::kReplace: {
        markup_unsupported();
        argc(2, 3);
        const int64_t count = a.pos.size() > 2 ? int_arg(a.pos[2]) : -1;
        return Value::str(py_replace(s, str_arg(0), str_arg(1), count, limits_.max_output_bytes));
      }
      case SM::kFind: case SM::kRfind: case SM::kIndex: case SM::kRindex: case SM::kCount: {
        argc(1, 3);
        const std::u32string u = to_u32(s);
        const std::u32string x = to_u32(str_arg(0));
        const auto [b, e] = span_args(static_cast<int64_t>(u.size()), a.pos.size() > 1 ? a.pos[1] : Value::none(),
                                      a.pos.size() > 2 ? a.pos[2] : Value::none());
        const auto xl = static_cast<int64_t>(x.size());
        if (m == SM::kCount) {
          if (b > e || b > static_cast<int64_t>(u.size())) return Value::integer(0);
          if (xl == 0) return Value::integer(e - b + 1);
          int64_t n = 0;
          for (int64_t k = b; k + xl <= e;) {
            if (u.compare(static_cast<std::size_t>(k), x.size(), x) == 0) {
              ++n;
              k += xl;
            } else {
              ++k;
            }
          }
          return Value::integer(n);
        }
        int64_t found = -1;
        if (b <= e && e - b >= xl) {
          if (m == SM::kFind || m == SM::kIndex) {
            for (int64_t k = b; k + xl <= e; ++k) {
              if (u.compare(static_cast<std::size_t>(k), x.size(), x) == 0) {
                found = k;
                break;
              }
            }
          } else {
            for (int64_t k = e - xl; k >= b; --k) {
              if (u.compare(static_cast<std::size_t>(k), x.size(), x) == 0) {
                found = k;
                break;
              }
            }
          }
        }
        if (found < 0 && (m == SM::kIndex || m == SM::kRindex)) raise("ValueError", "substring not found");
        return Value::integer(found);
      }
      case SM::kJoin: {
        markup_unsupported();
        argc(1, 1);
        std::string out;
        Cursor c = Cursor::over(a.pos[0]);
        Value item;
        std::size_t k = 0;
        while (c.next(*this, item)) {
          if (item.t != VT::kStr) type_error("sequence item " + std::to_string(k) + ": expected str instance, " + type_name(item) + " found");
          if (k++ != 0) out += s;
          out += item.text();
          check_size(out.size(), limits_.max_output_bytes);
        }
        return Value::str(std::move(out));
      }
      case SM::kIsdigit: return predicate(py_isdigit_cp);
      case SM::kIsalpha: return predicate(py_isalpha_cp);
      case SM::kIsalnum: return predicate(py_isalnum_cp);
      case SM::kIsspace: return predicate(py_isspace);
      case SM::kIsdecimal: return predicate(py_isdecimal_cp);
      case SM::kIsnumeric: return predicate(py_isnumeric_cp);
      case SM::kIsascii: {
        argc(0, 0);
        return Value::boolean(is_ascii(s));
      }
      case SM::kIsprintable: {
        argc(0, 0);
        for (std::size_t i = 0; i < s.size();) {
          if (!py_isprintable(next_cp(s, i))) return Value::boolean(false);
        }
        return Value::boolean(true);
      }
      case SM::kIsupper: case SM::kIslower: {
        argc(0, 0);
        bool cased = false;
        for (std::size_t i = 0; i < s.size();) {
          const char32_t c = next_cp(s, i);
          const bool wrong = m == SM::kIsupper ? (py_islower_cp(c) || py_istitle_cp(c)) : (py_isupper_cp(c) || py_istitle_cp(c));
          if (wrong) return Value::boolean(false);
          if (m == SM::kIsupper ? py_isupper_cp(c) : py_islower_cp(c)) cased = true;
        }
        return Value::boolean(cased);
      }
      case SM::kIstitle: {
        argc(0, 0);
        bool cased = false;
        bool previous_cased = false;
        for (std::size_t i = 0; i < s.size();) {
          const char32_t c = next_cp(s, i);
          if (py_isupper_cp(c) || py_istitle_cp(c)) {
            if (previous_cased) return Value::boolean(false);
            previous_cased = true;
            cased = true;
          } else if (py_islower_cp(c)) {
            if (!previous_cased) return Value::boolean(false);
            previous_cased = true;
            cased = true;
          } else {
            previous_cased = false;
          }
        }
        return Value::boolean(cased);
      }
      case SM::kCenter: case SM::kLjust: case SM::kRjust: {
        argc(1, 2);
        std::string fill = " ";
        if (a.pos.size() == 2) {
          fill = str_arg(1);
          if (cp_count(fill) != 1) type_error("The fill character must be exactly one character long");
        }
        const int64_t width = int_arg(a.pos[0]);
        check_size(static_cast<std::size_t>(std::max<int64_t>(0, width)) * fill.size(), limits_.max_output_bytes);
        return Value::str(py_pad(s, width, fill, m == SM::kCenter ? 0 : m == SM::kLjust ? 1 : 2), mk);
      }
      case SM::kZfill: {
        argc(1, 1);
        const int64_t width = int_arg(a.pos[0]);
        const auto len = static_cast<int64_t>(cp_count(s));
        if (width <= len) return Value::str(s, mk);
        check_size(static_cast<std::size_t>(width), limits_.max_output_bytes);
        std::string out = s;
        const std::size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
        out.insert(sign, static_cast<std::size_t>(width - len), '0');
        return Value::str(std::move(out), mk);
      }
      case SM::kPartition: case SM::kRpartition: {
        markup_unsupported();
        argc(1, 1);
        const std::string& sep = str_arg(0);
        if (sep.empty()) raise("ValueError", "empty separator");
        const std::size_t k = m == SM::kPartition ? s.find(sep) : s.rfind(sep);
        if (k == std::string::npos) {
          return m == SM::kPartition ? make_tuple({Value::str(s), Value::str(""), Value::str("")})
                                     : make_tuple({Value::str(""), Value::str(""), Value::str(s)});
        }
        return make_tuple({Value::str(s.substr(0, k)), Value::str(sep), Value::str(s.substr(k + sep.size()))});
      }
      case SM::kRemoveprefix: case SM::kRemovesuffix: {
        argc(1, 1);
        const std::string& x = str_arg(0);
        if (m == SM::kRemoveprefix) {
          return Value::str(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s, mk);
        }
        const bool ends = s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
        return Value::str(ends && !x.empty() ? s.substr(0, s.size() - x.size()) : s, mk);
      }
      case SM::kFormat:
        if (mk) unsupported("str.format() on a Markup string");
        return Value::str(str_format(s, a));
      default:
        break;
    }
    unsupported("calling str." + fname + "()");
  }

  /// str.format() through the sandbox: {}, {0}, {name}, .attr and [key] lookups, !s and !r;
  /// a non-empty format spec is refused as unsupported.
  std::string str_format(const std::string& fmt, const Args& a) {
    std::string out;
    int auto_index = 0;
    bool manual = false;
    for (std::size_t i = 0; i < fmt.size(); ++i) {
      const char c = fmt[i];
      if (c == '}') {
        if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
          out.push_back('}');
          ++i;
          continue;
        }
        raise("ValueError", "Single '}' encountered in format string");
      }
      if (c != '{') {
        out.push_back(c);
        continue;
      }
      if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
        out.push_back('{');
        ++i;
        continue;
      }
      const std::size_t close = fmt.find('}', i + 1);
      if (close == std::string::npos) raise("ValueError", "Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, close - i - 1);
      i = close;
      if (field.find('{') != std::string::npos) unsupported("nested fields in str.format()");
      char conversion = 0;
      const std::size_t colon = field.find(':');
      if (colon != std::string::npos) {
        if (colon + 1 < field.size()) unsupported("a format spec in str.format()");
        field.resize(colon);
      }
      const std::size_t bang = field.find('!');
      if (bang != std::string::npos) {
        if (bang + 2 != field.size() || (field[bang + 1] != 's' && field[bang + 1] != 'r')) {
          unsupported("this conversion in str.format()");
        }
        conversion = field[bang + 1];
        field.resize(bang);
      }
      std::size_t k = 0;
      while (k < field.size() && field[k] != '.' && field[k] != '[') ++k;
      const std::string first = field.substr(0, k);
      Value v;
      if (first.empty() || std::all_of(first.begin(), first.end(), [](char d) { return d >= '0' && d <= '9'; })) {
        int64_t index = 0;
        if (first.empty()) {
          if (manual) raise("ValueError", "cannot switch from manual field specification to automatic field numbering");
          index = auto_index++;
        } else {
          if (auto_index > 0) raise("ValueError", "cannot switch from automatic field numbering to manual field specification");
          manual = true;
          if (first.size() > 9) unsupported("a huge field index");
          index = std::stoll(first);
        }
        if (index >= static_cast<int64_t>(a.pos.size())) {
          raise("IndexError", "Replacement index " + std::to_string(index) + " out of range for positional args tuple");
        }
        v = a.pos[static_cast<std::size_t>(index)];
      } else {
        const auto it = std::find_if(a.kw.begin(), a.kw.end(), [&](const auto& kv) { return kv.first == first; });
        if (it == a.kw.end()) raise("KeyError", "'" + first + "'");
        v = it->second;
      }
      while (k < field.size()) {
        if (field[k] == '.') {
          std::size_t e = k + 1;
          while (e < field.size() && field[e] != '.' && field[e] != '[') ++e;
          v = getattr(v, field.substr(k + 1, e - k - 1));
          k = e;
        } else {
          const std::size_t e = field.find(']', k);
          if (e == std::string::npos) raise("ValueError", "Missing ']' in format string");
          const std::string key = field.substr(k + 1, e - k - 1);
          const bool digits = !key.empty() && key.size() < 10 && std::all_of(key.begin(), key.end(), [](char d) { return d >= '0' && d <= '9'; });
          v = getitem(v, digits ? Value::integer(std::stoll(key)) : Value::str(key));
          k = e + 1;
        }
      }
      if (conversion == 'r') {
        repr_into(out, v, 0);
      } else {
        out += to_str(v);
      }
      check_size(out.size(), limits_.max_output_bytes);
    }
    return out;
  }

  // ---- filters

  Value attr_getter_item(const Value& item, const std::vector<Value>& parts) {
    Value v = item;
    for (const Value& p : parts) v = getitem(v, p);
    return v;
  }
  /// jinja2's _prepare_attribute_parts: "a.0.b" -> ["a", 0, "b"].
  static std::vector<Value> attribute_parts(const Value& attribute) {
    std::vector<Value> parts;
    if (attribute.t == VT::kNone) return parts;
    if (attribute.t != VT::kStr) {
      parts.push_back(attribute);
      return parts;
    }
    for (auto& piece : py_split_sep(attribute.text(), ".", -1)) {
      bool digits = !piece.empty();
      for (std::size_t i = 0; i < piece.size();) {
        if (!py_isdigit_cp(next_cp(piece, i))) digits = false;
      }
      if (digits && is_ascii(piece) && piece.size() < 19) {
        parts.push_back(Value::integer(std::stoll(piece)));
      } else if (digits) {
        unsupported("a non-ASCII or huge digit attribute part");
      } else {
        parts.push_back(Value::str(piece));
      }
    }
    return parts;
  }
  static Value ignore_case(const Value& v) { return v.t == VT::kStr ? Value::str(py_lower(v.text())) : v; }

  int64_t length(const Value& v) {
    switch (v.t) {
      case VT::kUndefined: return 0;
      case VT::kStr: return static_cast<int64_t>(cp_count(v.text()));
      case VT::kList: return static_cast<int64_t>(as_list(v).items.size());
      case VT::kDict: return static_cast<int64_t>(as_dict(v).entries.size());
      case VT::kView: return static_cast<int64_t>(as_view(v).dict->entries.size());
      case VT::kNamespace: return static_cast<int64_t>(as_ns(v).attrs.entries.size());
      case VT::kLoop: return as_loop(v).len(*this);
      default: type_error("object of type '" + type_name(v) + "' has no len()");
    }
  }

  /// A lazy generator that applies `fn` to each item of `src` (None from fn: skip the item).
  Value lazy_map(const Value& src, std::function<std::optional<Value>(Renderer&, const Value&)> fn) {
    Value source = src;
    int chain = 0;
    if (source.t == VT::kIter) {
      chain = as_iter(source).chain + 1;
      if (chain > 32) {  // keep pulls shallow: materialize a long chain's source
        source = make_list(collect(*this, source));
        chain = 0;
      }
    }
    auto cursor = std::make_shared<std::optional<Cursor>>();
    return make_iter("generator", [cursor, source, fn](Renderer& r, Value& out) {
      if (!*cursor) *cursor = Cursor::over(source);
      Value item;
      while ((*cursor)->next(r, item)) {
        if (std::optional<Value> v = fn(r, item)) {
          out = std::move(*v);
          return true;
        }
      }
      return false;
    }, chain);
  }

  Value select_or_reject(const Value& v, const Args& a, bool select, bool lookup_attr) {
    if (!truthy(v)) return iter_of("generator", {});
    const Args args = a;
    return lazy_map(v, [args, select, lookup_attr, prepared = std::make_shared<bool>(false)](Renderer& r, const Value& item) -> std::optional<Value> {
      std::size_t off = 0;
      Value x = item;
      if (lookup_attr) {
        if (args.pos.empty()) raise("FilterArgumentError", "Missing parameter for attribute name");
        x = r.attr_getter_item(item, attribute_parts(args.pos[0]));
        off = 1;
      }
      bool ok = false;
      if (args.pos.size() > off) {
        Args targs;
        targs.pos.assign(args.pos.begin() + static_cast<std::ptrdiff_t>(off) + 1, args.pos.end());
        targs.kw = args.kw;
        ok = r.call_test_by_name(args.pos[off], x, targs);
      } else {
        ok = truthy(x);
      }
      if (ok == select) return item;
      return std::nullopt;
    });
  }

  Value map_filter(const Value& v, const Args& a) {
    if (!truthy(v)) return iter_of("generator", {});
    const Args args = a;
    return lazy_map(v, [args](Renderer& r, const Value& item) -> std::optional<Value> {
      if (args.pos.empty()) {
        const Value* attribute = nullptr;
        const Value* dflt = nullptr;
        for (const auto& [k, val] : args.kw) {
          if (k == "attribute") {
            attribute = &val;
          } else if (k == "default") {
            dflt = &val;
          } else {
            raise("FilterArgumentError", "Unexpected keyword argument '" + k + "'");
          }
        }
        if (attribute == nullptr) {
          if (dflt != nullptr) raise("FilterArgumentError", "Unexpected keyword argument 'default'");
          raise("FilterArgumentError", "map requires a filter argument");
        }
        Value x = item;
        for (const Value& p : attribute_parts(*attribute)) {
          x = r.getitem(x, p);
          if (dflt != nullptr && dflt->t != VT::kNone && x.is_undefined()) x = *dflt;
        }
        return x;
      }
      Args fargs;
      fargs.pos.assign(args.pos.begin() + 1, args.pos.end());
      fargs.kw = args.kw;
      return r.call_filter_by_name(args.pos[0], item, fargs);
    });
  }

  std::vector<Value> sorted_values(std::vector<Value> items, bool reverse, const std::function<Value(const Value&)>& key) {
    charge(items.size() * (1 + static_cast<uint64_t>(std::log2(static_cast<double>(items.size()) + 1))));
    std::vector<std::pair<Value, Value>> keyed;
    keyed.reserve(items.size());
    for (auto& it : items) keyed.emplace_back(key(it), std::move(it));
    std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
      return reverse ? py_lt(y.first, x.first) : py_lt(x.first, y.first);
    });
    std::vector<Value> out;
    out.reserve(keyed.size());
    for (auto& kv : keyed) out.push_back(std::move(kv.second));
    return out;
  }

  /// Python's round(x, ndigits) for floats: exact decimal expansion, half to even.
  static double round_float(double x, int64_t ndigits) {
    if (!std::isfinite(x) || x == 0) return x;
    if (ndigits > 22) return x;
    if (ndigits < -308) return 0.0 * x;
    char buf[1200];
    std::snprintf(buf, sizeof buf, "%.1100f", std::fabs(x));
    std::string digits(buf);
    const std::size_t dot = digits.find('.');
    std::string int_part = digits.substr(0, dot);
    std::string frac = digits.substr(dot + 1);
    std::string all = int_part + frac;  // decimal digits, point after int_part.size()
    const int64_t keep = static_cast<int64_t>(int_part.size()) + ndigits;  // digits kept
    std::string kept;
    bool round_up = false;
    if (keep < 0) {
      kept = "";
    } else if (keep >= static_cast<int64_t>(all.size())) {
      return x;
    } else {
      kept = all.substr(0, static_cast<std::size_t>(keep));
      const char next = all[static_cast<std::size_t>(keep)];
      const bool rest_nonzero = all.find_first_not_of('0', static_cast<std::size_t>(keep) + 1) != std::string::npos;
      if (next > '5' || (next == '5' && rest_nonzero)) {
        round_up = true;
      } else if (next == '5') {
        const int last = kept.empty() ? 0 : kept.back() - '0';
        round_up = (last % 2) == 1;
      }
    }
    if (keep < 0) return std::copysign(0.0, x);
    if (round_up) {
      int k = static_cast<int>(kept.size()) - 1;
      while (k >= 0 && kept[static_cast<std::size_t>(k)] == '9') kept[static_cast<std::size_t>(k--)] = '0';
      if (k >= 0) {
        kept[static_cast<std::size_t>(k)]++;
      } else {
        kept.insert(kept.begin(), '1');  // 9.96 -> "99" -> "100": one more digit, same exponent
      }
    }
    // Rebuild "<digits>e<exp>" where the value is kept * 10^(-ndigits).
    std::string text = (kept.empty() ? "0" : kept) + "e" + std::to_string(-ndigits);
    const double r = std::strtod(text.c_str(), nullptr);
    return std::copysign(r, x);
  }

  Value filter(int id, const Value& v, const Args& a) {
    const auto f = static_cast<F>(id);
    const std::string fname(kFilterNames[static_cast<std::size_t>(id)]);
    switch (f) {
      case F::kAbs: {
        bind("abs", a, {});
        if (v.is_intlike()) {
          if (v.as_int() == std::numeric_limits<int64_t>::min()) unsupported("an integer beyond 64 bits");
          return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
        }
        if (v.t == VT::kFloat) return Value::number(std::fabs(v.f));
        type_error("bad operand type for abs(): '" + type_name(v) + "'");
      }
      case F::kAttr: {
        const auto p = bind("attr", a, {{"name", std::nullopt}});
        if (p[0].t != VT::kStr) type_error("attribute name must be string");
        if (v.is_undefined()) undefined_error(v);
        if (auto m = python_attr(v, p[0].text())) return *m;
        if (v.t == VT::kNamespace) {
          if (const Value* x = as_ns(v).attrs.get_str(p[0].text())) return *x;
        }
        if (v.t == VT::kLoop) return loop_attr(v, p[0].text());
        return missing_attr(v, p[0].text());
      }
      case F::kBatch: {
        const auto p = bind("batch", a, {{"linecount", std::nullopt}, {"fill_with", Value::none()}});
        if (!p[0].is_intlike()) unsupported("a non-integer batch size");
        const int64_t n = p[0].as_int();
        std::vector<Value> out;
        std::vector<Value> tmp;
        for (auto& item : collect(*this, v)) {
          if (static_cast<int64_t>(tmp.size()) == n) {
            out.push_back(make_list(std::move(tmp)));
            tmp.clear();
          }
          tmp.push_back(std::move(item));
        }
        if (!tmp.empty()) {
          if (p[1].t != VT::kNone) {
            while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(p[1]);
          }
          out.push_back(make_list(std::move(tmp)));
        }
        return iter_of("generator", std::move(out));
      }
      case F::kCapitalize: {
        bind(fname, a, {});
        const Value s = soft_str(v);
        return Value::str(py_capitalize(s.text()), s.markup);
      }
      case F::kCenter: {
        const auto p = bind("center", a, {{"width", Value::integer(80)}});
        const Value s = soft_str(v);
        if (!p[0].is_intlike()) type_error("'" + type_name(p[0]) + "' object cannot be interpreted as an integer");
        check_size(static_cast<std::size_t>(std::max<int64_t>(0, p[0].as_int())), limits_.max_output_bytes);
        return Value::str(py_pad(s.text(), p[0].as_int(), " ", 0), s.markup);
      }
      case F::kCount:
      case F::kLength:
        bind("len", a, {});
        return Value::integer(length(v));
      case F::kD:
      case F::kDefault: {
        const auto p = bind("default", a, {{"default_value", Value::str("")}, {"boolean", Value::boolean(false)}});
        if (v.is_undefined() || (truthy(p[1]) && !truthy(v))) return p[0];
        return v;
      }
      case F::kDictsort: {
        const auto p = bind("dictsort", a, {{"case_sensitive", Value::boolean(false)}, {"by", Value::str("key")}, {"reverse", Value::boolean(false)}});
        std::size_t pos = 0;
        if (p[1].t == VT::kStr && p[1].text() == "key") {
          pos = 0;
        } else if (p[1].t == VT::kStr && p[1].text() == "value") {
          pos = 1;
        } else {
          raise("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
        }
        if (v.t != VT::kDict) {
          if (v.is_undefined()) undefined_error(v);
          type_error("'" + type_name(v) + "' object has no attribute 'items'");
        }
        std::vector<Value> items;
        for (const auto& [k, val] : as_dict(v).entries) items.push_back(make_tuple({k, val}));
        const bool cs = truthy(p[0]);
        return make_list(sorted_values(std::move(items), truthy(p[2]), [pos, cs](const Value& it) {
          const Value& x = as_list(it).items[pos];
          return cs ? x : ignore_case(x);
        }));
      }
      case F::kE:
      case F::kEscape:
        bind("escape", a, {});
        if (v.t == VT::kStr && v.markup) return v;
        return Value::str(html_escape(to_str(v)), true);
      case F::kForceescape:
        bind("forceescape", a, {});
        return Value::str(html_escape(to_str(v)), true);
      case F::kFirst: {
        bind("first", a, {});
        Cursor c = Cursor::over(v);
        Value item;
        if (c.next(*this, item)) return item;
        return Value::undefined("No first item, sequence was empty.");
      }
      case F::kLast: {
        bind("last", a, {});
        switch (v.t) {
          case VT::kUndefined: return Value::undefined("No last item, sequence was empty.");
          case VT::kStr: case VT::kList: case VT::kDict: case VT::kView: {
            std::vector<Value> items = collect(*this, v);
            if (items.empty()) return Value::undefined("No last item, sequence was empty.");
            return items.back();
          }
          default:
            type_error("'" + type_name(v) + "' object is not reversible");
        }
      }
      case F::kFloat: {
        const auto p = bind("float", a, {{"default", Value::number(0.0)}});
        if (v.t == VT::kFloat) return v;
        if (v.is_intlike()) return Value::number(static_cast<double>(v.as_int()));
        if (v.t == VT::kStr) {
          if (auto d = parse_py_float(v.text())) return Value::number(*d);
          return p[0];
        }
        if (v.is_undefined()) undefined_error(v);
        return p[0];
      }
      case F::kFormat: {
        if (!a.pos.empty() && !a.kw.empty()) raise("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
        if (!a.kw.empty()) unsupported("|format with keyword arguments");
        const Value s = soft_str(v);
        if (s.markup) unsupported("|format on a Markup string");
        std::string out = percent_format(s.text(), make_tuple(a.pos));
        check_size(out.size(), limits_.max_output_bytes);
        return Value::str(std::move(out));
      }
      case F::kIndent: {
        const auto p = bind("indent", a, {{"width", Value::integer(4)}, {"first", Value::boolean(false)}, {"blank", Value::boolean(false)}});
        if (v.t != VT::kStr) type_error("unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
        std::string indention;
        if (p[0].t == VT::kStr) {
          indention = p[0].text();
        } else if (p[0].is_intlike()) {
          check_size(static_cast<std::size_t>(std::max<int64_t>(0, p[0].as_int())), limits_.max_output_bytes);
          indention.assign(static_cast<std::size_t>(std::max<int64_t>(0, p[0].as_int())), ' ');
        } else {
          type_error("can't multiply sequence by non-int of type '" + type_name(p[0]) + "'");
        }
        const std::vector<std::string> lines = py_splitlines(v.text() + "\n", false);
        std::string rv;
        if (truthy(p[2])) {
          for (std::size_t k = 0; k < lines.size(); ++k) {
            if (k != 0) rv += "\n" + indention;
            rv += lines[k];
          }
        } else {
          rv = lines.empty() ? std::string() : lines[0];
          if (lines.size() > 1) {
            rv += "\n";
            for (std::size_t k = 1; k < lines.size(); ++k) {
              if (k != 1) rv += "\n";
              if (!lines[k].empty()) rv += indention;
              rv += lines[k];
            }
          }
        }
        if (truthy(p[1])) rv = indention + rv;
        check_size(rv.size(), limits_.max_output_bytes);
        return Value::str(std::move(rv), v.markup);
      }
      case F::kInt: {
        const auto p = bind("int", a, {{"default", Value::integer(0)}, {"base", Value::integer(10)}});
        if (v.is_intlike()) return Value::integer(v.as_int());
        if (v.t == VT::kFloat) {
          if (std::isnan(v.f)) return p[0];
          if (std::isinf(v.f)) raise("OverflowError", "cannot convert float infinity to integer");
          const double t = std::trunc(v.f);
          if (t < -9.2e18 || t > 9.2e18) unsupported("an integer beyond 64 bits");
          return Value::integer(static_cast<int64_t>(t));
        }
        if (v.t == VT::kStr) {
          if (!p[1].is_intlike()) type_error("'" + type_name(p[1]) + "' object cannot be interpreted as an integer");
          const int64_t base = p[1].as_int();
          if (base != 0 && (base < 2 || base > 36)) raise("ValueError", "int() base must be >= 2 and <= 36, or 0");
          if (auto i = parse_py_int(v.text(), static_cast<int>(base))) return Value::integer(*i);
          if (auto d = parse_py_float(v.text())) {
            if (std::isnan(*d)) return p[0];
            if (std::isinf(*d)) raise("OverflowError", "cannot convert float infinity to integer");
            const double t = std::trunc(*d);
            if (t < -9.2e18 || t > 9.2e18) unsupported("an integer beyond 64 bits");
            return Value::integer(static_cast<int64_t>(t));
          }
          return p[0];
        }
        if (v.is_undefined()) undefined_error(v);
        return p[0];
      }
      case F::kJoin: {
        const auto p = bind("join", a, {{"d", Value::str("")}, {"attribute", Value::none()}});
        const std::string sep = to_str(p[0]);
        const std::vector<Value> parts = p[1].t == VT::kNone ? std::vector<Value>{} : attribute_parts(p[1]);
        std::string out;
        Cursor c = Cursor::over(v);
        Value item;
        bool first = true;
        while (c.next(*this, item)) {
          if (!first) out += sep;
          first = false;
          out += to_str(p[1].t == VT::kNone ? item : attr_getter_item(item, parts));
          check_size(out.size(), limits_.max_output_bytes);
        }
        return Value::str(std::move(out));
      }
      case F::kList:
        bind("list", a, {});
        return make_list(collect(*this, v));
      case F::kLower:
      case F::kUpper: {
        bind(fname, a, {});
        const Value s = soft_str(v);
        return Value::str(f == F::kLower ? py_lower(s.text()) : py_upper(s.text()), s.markup);
      }
      case F::kItems: {
        bind("items", a, {});
        if (v.is_undefined()) return iter_of("generator", {});
        if (v.t != VT::kDict) {
          // A generator: the TypeError comes when it is first pulled.
          return make_iter("generator", [](Renderer&, Value&) -> bool { type_error("Can only get item pairs from a mapping."); });
        }
        std::vector<Value> items;
        for (const auto& [k, val] : as_dict(v).entries) items.push_back(make_tuple({k, val}));
        return iter_of("generator", std::move(items));
      }
      case F::kMap:
        return map_filter(v, a);
      case F::kMin:
      case F::kMax: {
        const auto p = bind(fname, a, {{"case_sensitive", Value::boolean(false)}, {"attribute", Value::none()}});
        std::vector<Value> items = collect(*this, v);
        if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
        const std::vector<Value> parts = attribute_parts(p[1]);
        const bool cs = truthy(p[0]);
        auto key = [&](const Value& it) {
          const Value x = attr_getter_item(it, parts);
          return cs ? x : ignore_case(x);
        };
        std::size_t best = 0;
        Value best_key = key(items[0]);
        for (std::size_t k = 1; k < items.size(); ++k) {
          Value kk = key(items[k]);
          if (f == F::kMin ? py_lt(kk, best_key) : py_lt(best_key, kk)) {
            best = k;
            best_key = std::move(kk);
          }
        }
        return items[best];
      }
      case F::kReject: return select_or_reject(v, a, false, false);
      case F::kRejectattr: return select_or_reject(v, a, false, true);
      case F::kSelect: return select_or_reject(v, a, true, false);
      case F::kSelectattr: return select_or_reject(v, a, true, true);
      case F::kReplace: {
        const auto p = bind("replace", a, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::none()}});
        int64_t count = -1;
        if (p[2].t != VT::kNone) {
          if (!p[2].is_intlike()) type_error("'" + type_name(p[2]) + "' object cannot be interpreted as an integer");
          count = p[2].as_int();
        }
        return Value::str(py_replace(to_str(v), to_str(p[0]), to_str(p[1]), count, limits_.max_output_bytes));
      }
      case F::kReverse: {
        bind("reverse", a, {});
        if (v.t == VT::kStr) {
          std::u32string u = to_u32(v.text());
          std::reverse(u.begin(), u.end());
          return Value::str(from_u32(u), v.markup);
        }
        if (v.t == VT::kList || v.t == VT::kDict || v.t == VT::kView) {
          std::vector<Value> items = collect(*this, v);
          std::reverse(items.begin(), items.end());
          return iter_of(v.t == VT::kList ? as_list(v).kind == SeqKind::kList ? "list_reverseiterator" : "reversed" : "dict_reversekeyiterator", std::move(items));
        }
        if (v.is_undefined()) return iter_of("reversed", {});
        if (v.t == VT::kIter) {
          std::vector<Value> items = collect(*this, v);
          std::reverse(items.begin(), items.end());
          return make_list(std::move(items));
        }
        raise("FilterArgumentError", "argument must be iterable");
      }
      case F::kRound: {
        const auto p = bind("round", a, {{"precision", Value::integer(0)}, {"method", Value::str("common")}});
        const std::string method = p[1].t == VT::kStr ? p[1].text() : "";
        if (method != "common" && method != "ceil" && method != "floor") raise("FilterArgumentError", "method must be common, ceil or floor");
        if (!v.is_number()) {
          if (v.is_undefined()) undefined_error(v);
          type_error("type " + type_name(v) + " doesn't define __round__ method");
        }
        if (!p[0].is_intlike()) type_error("'" + type_name(p[0]) + "' object cannot be interpreted as an integer");
        const int64_t nd = p[0].as_int();
        if (method == "common") {
          if (v.t == VT::kFloat) return Value::number(round_float(v.f, nd));
          const int64_t x = v.as_int();
          if (nd >= 0) return Value::integer(x);
          if (nd < -18) return Value::integer(0);
          int64_t pw = 1;
          for (int64_t k = 0; k < -nd; ++k) pw *= 10;
          int64_t q = x / pw;
          int64_t r = x % pw;
          if (r < 0) {
            r += pw;
            --q;
          }
          if (2 * r > pw || (2 * r == pw && (q % 2) != 0)) ++q;
          return Value::integer(mul_i(q, pw));
        }
        if (nd < -300 || nd > 300) unsupported("round() with a huge precision");
        const double scale = std::pow(10.0, static_cast<double>(nd));
        const double scaled = v.as_double() * scale;
        const double r = method == "ceil" ? std::ceil(scaled) : std::floor(scaled);
        return Value::number(r / scale);
      }
      case F::kSafe:
        bind("safe", a, {});
        return Value::str(to_str(v), true);
      case F::kSlice: {
        const auto p = bind("slice", a, {{"slices", std::nullopt}, {"fill_with", Value::none()}});
        if (!p[0].is_intlike()) type_error("'" + type_name(p[0]) + "' object cannot be interpreted as an integer");
        const int64_t slices = p[0].as_int();
        if (slices == 0) raise("ZeroDivisionError", "integer division or modulo by zero");
        const std::vector<Value> seq = collect(*this, v);
        const auto len = static_cast<int64_t>(seq.size());
        const int64_t per = len / slices;
        const int64_t extra = len % slices;
        int64_t offset = 0;
        std::vector<Value> out;
        for (int64_t k = 0; k < slices; ++k) {
          const int64_t start = offset + k * per;
          if (k < extra) ++offset;
          const int64_t end = offset + (k + 1) * per;
          std::vector<Value> tmp;
          for (int64_t j = std::max<int64_t>(0, start); j < std::min(end, len); ++j) tmp.push_back(seq[static_cast<std::size_t>(j)]);
          if (p[1].t != VT::kNone && k >= extra) tmp.push_back(p[1]);
          out.push_back(make_list(std::move(tmp)));
        }
        return iter_of("generator", std::move(out));
      }
      case F::kSort: {
        const auto p = bind("sort", a, {{"reverse", Value::boolean(false)}, {"case_sensitive", Value::boolean(false)}, {"attribute", Value::none()}});
        std::vector<std::vector<Value>> attrs;
        if (p[2].t == VT::kStr) {
          for (const auto& piece : py_split_sep(p[2].text(), ",", -1)) attrs.push_back(attribute_parts(Value::str(piece)));
        } else {
          attrs.push_back(attribute_parts(p[2]));
        }
        const bool cs = truthy(p[1]);
        return make_list(sorted_values(collect(*this, v), truthy(p[0]), [&](const Value& it) {
          std::vector<Value> keys;
          for (const auto& parts : attrs) {
            const Value x = attr_getter_item(it, parts);
            keys.push_back(cs ? x : ignore_case(x));
          }
          return make_list(std::move(keys));
        }));
      }
      case F::kString:
        bind("string", a, {});
        return soft_str(v);
      case F::kSum: {
        const auto p = bind("sum", a, {{"attribute", Value::none()}, {"start", Value::integer(0)}});
        if (p[1].t == VT::kStr) type_error("sum() can't sum strings [use ''.join(seq) instead]");
        const std::vector<Value> parts = attribute_parts(p[0]);
        Value total = p[1];
        Cursor c = Cursor::over(v);
        Value item;
        while (c.next(*this, item)) {
          total = binop(BinOp::kAdd, total, p[0].t == VT::kNone ? item : attr_getter_item(item, parts), limits_.max_output_bytes);
        }
        return total;
      }
      case F::kTitle: {
        bind("title", a, {});
        const std::string s = to_str(v);
        // jinja2's title: split on runs of [-\s({[<] and capitalize every piece.
        auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
        std::string out;
        std::size_t i = 0;
        while (i < s.size()) {
          std::size_t j = i;
          std::size_t k = i;
          const bool sep = is_sep(next_cp(s, k));
          while (j < s.size()) {
            std::size_t t = j;
            if (is_sep(next_cp(s, t)) != sep) break;
            j = t;
          }
          const std::string_view piece = std::string_view(s).substr(i, j - i);
          std::size_t first_end = 0;
          const char32_t first = next_cp(piece, first_end);
          append_upper(out, first);
          out += py_lower(piece.substr(first_end));
          i = j;
        }
        return Value::str(std::move(out));
      }
      case F::kTrim: {
        const auto p = bind("trim", a, {{"chars", Value::none()}});
        const Value s = soft_str(v);
        return Value::str(py_strip(s.text(), p[0], true, true), s.markup);
      }
      case F::kTruncate: {
        const auto p = bind("truncate", a, {{"length", Value::integer(255)}, {"killwords", Value::boolean(false)}, {"end", Value::str("...")}, {"leeway", Value::none()}});
        if (v.t != VT::kStr || !p[0].is_intlike() || p[2].t != VT::kStr) unsupported("|truncate on other than strings");
        const int64_t length = p[0].as_int();
        const int64_t leeway = p[3].t == VT::kNone ? 5 : p[3].as_int();
        const std::u32string u = to_u32(v.text());
        const auto end_len = static_cast<int64_t>(cp_count(p[2].text()));
        if (length < end_len) raise("AssertionError", "expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
        if (leeway < 0) raise("AssertionError", "expected leeway >= 0, got " + std::to_string(leeway));
        if (static_cast<int64_t>(u.size()) <= length + leeway) return v;
        const std::size_t cut = static_cast<std::size_t>(std::clamp<int64_t>(length - end_len, 0, static_cast<int64_t>(u.size())));
        std::string head = from_u32(u.data(), u.data() + cut);
        if (truthy(p[1])) return Value::str(head + p[2].text());
        return Value::str(py_rsplit_sep(head, " ", 1)[0] + p[2].text());
      }
      case F::kUnique: {
        const auto p = bind("unique", a, {{"case_sensitive", Value::boolean(false)}, {"attribute", Value::none()}});
        const std::vector<Value> parts = attribute_parts(p[1]);
        const bool cs = truthy(p[0]);
        auto seen = std::make_shared<std::vector<Value>>();
        return lazy_map(v, [parts, cs, seen](Renderer& r, const Value& item) -> std::optional<Value> {
          Value key = r.attr_getter_item(item, parts);
          if (!cs) key = ignore_case(key);
          check_hashable(key);
          for (const auto& s : *seen) {
            if (py_eq(s, key)) return std::nullopt;
          }
          seen->push_back(key);
          return item;
        });
      }
      case F::kTojson: {
        const auto p = bind("tojson", a, {{"ensure_ascii", Value::boolean(false)}, {"indent", Value::none()}, {"separators", Value::none()}, {"sort_keys", Value::boolean(false)}});
        JsonOptions o;
        o.ensure_ascii = truthy(p[0]);
        if (p[1].t == VT::kStr) {
          o.indent = p[1].text();
        } else if (p[1].is_intlike()) {
          o.indent = std::string(static_cast<std::size_t>(std::clamp<int64_t>(p[1].as_int(), 0, 1024)), ' ');
        } else if (p[1].t != VT::kNone) {
          type_error("can't multiply sequence by non-int of type '" + type_name(p[1]) + "'");
        }
        if (o.indent) o.item_sep = ",";
        if (p[2].t != VT::kNone) {
          std::vector<Value> seps;
          if (p[2].t == VT::kList || p[2].t == VT::kStr) seps = collect(*this, p[2]);
          if (seps.size() != 2 || seps[0].t != VT::kStr || seps[1].t != VT::kStr) unsupported("these tojson separators");
          o.item_sep = seps[0].text();
          o.key_sep = seps[1].text();
        }
        o.sort_keys = truthy(p[3]);
        std::string out;
        json_into(out, v, o, 0, 0);
        check_size(out.size(), limits_.max_output_bytes);
        return Value::str(std::move(out));
      }
      case F::kWordcount: {
        // len(re.findall(r"\w+", str(s))): Python's \w is str.isalnum() or '_'.
        bind("wordcount", a, {});
        const std::string text = to_str(v);
        int64_t words = 0;
        bool in_word = false;
        for (std::size_t i = 0; i < text.size();) {
          const char32_t c = next_cp(text, i);
          const bool w = c == '_' || py_isalnum_cp(c);
          if (w && !in_word) ++words;
          in_word = w;
        }
        return Value::integer(words);
      }
      default:
        break;
    }
    unsupported("the '" + fname + "' filter");
  }

  // ---- tests

  bool test(int id, const Value& v, const Args& a) {
    const auto t = static_cast<T>(id);
    const std::string tname(kTestNames[static_cast<std::size_t>(id)]);
    auto one = [&]() -> Value { return bind("test_" + tname, a, {{"other", std::nullopt}})[0]; };
    auto none = [&]() { bind("test_" + tname, a, {}); };
    switch (t) {
      case T::kOdd:
      case T::kEven: {
        none();
        const Value r = binop(BinOp::kMod, v, Value::integer(2), limits_.max_output_bytes);
        return py_eq(r, Value::integer(t == T::kOdd ? 1 : 0));
      }
      case T::kDivisibleby: {
        const Value n = one();
        return py_eq(binop(BinOp::kMod, v, n, limits_.max_output_bytes), Value::integer(0));
      }
      case T::kDefined: none(); return !v.is_undefined();
      case T::kUndefined: none(); return v.is_undefined();
      case T::kFilter: none(); check_hashable(v); return v.t == VT::kStr && lookup_name(kFilterNames, v.text()) >= 0;
      case T::kTest: none(); check_hashable(v); return v.t == VT::kStr && lookup_name(kTestNames, v.text()) >= 0;
      case T::kNone: none(); return v.t == VT::kNone;
      case T::kBoolean: none(); return v.t == VT::kBool;
      case T::kFalse: none(); return v.t == VT::kBool && !v.b;
      case T::kTrue: none(); return v.t == VT::kBool && v.b;
      case T::kInteger: none(); return v.t == VT::kInt;
      case T::kFloat: none(); return v.t == VT::kFloat;
      case T::kLower: case T::kUpper: {
        none();
        FuncObj fn;
        fn.kind = FnKind::kStrMethod;
        fn.id = static_cast<int>(t == T::kLower ? SM::kIslower : SM::kIsupper);
        fn.self = Value::str(to_str(v));
        Args no;
        return truthy(str_method(fn, no));
      }
      case T::kString: none(); return v.t == VT::kStr;
      case T::kMapping: none(); return v.t == VT::kDict;
      case T::kNumber: none(); return v.is_number();
      case T::kSequence:  // len() and __getitem__: jinja2's Undefined defines both
        none();
        return v.t == VT::kStr || v.t == VT::kList || v.t == VT::kDict || v.t == VT::kUndefined;
      case T::kIterable:
        none();
        return v.t == VT::kStr || v.t == VT::kList || v.t == VT::kDict || v.t == VT::kView || v.t == VT::kIter ||
               v.t == VT::kUndefined || v.t == VT::kLoop;
      case T::kCallable:
        none();
        return v.t == VT::kFunc || v.t == VT::kUndefined || v.t == VT::kLoop;
      case T::kSameas: {
        const Value o = one();
        if (v.t == VT::kNone || v.t == VT::kBool || o.t == VT::kNone || o.t == VT::kBool) {
          return v.t == o.t && (v.t == VT::kNone || v.b == o.b);
        }
        if (v.o && o.o) return v.o == o.o;
        // CPython caches the small ints, so identity is equality there.
        auto small = [](const Value& x) { return x.t == VT::kInt && x.i >= -5 && x.i <= 256; };
        if (small(v) && small(o)) return v.i == o.i;
        if (v.t != o.t && !(v.o && o.o) && (v.t == VT::kUndefined || o.t == VT::kUndefined)) return false;
        unsupported("'sameas' on " + type_name(v) + " values (Python identity)");
      }
      case T::kEscaped: none(); return v.t == VT::kStr && v.markup;
      case T::kIn: return contains(one(), v);
      case T::kEq: case T::kEq2: case T::kEqualto: return py_eq(v, one());
      case T::kNe: case T::kNe2: return !py_eq(v, one());
      case T::kGt: case T::kGt2: case T::kGreaterthan: return py_compare(v, one(), ">") == 1;
      case T::kGe: case T::kGe2: { const int c = py_compare(v, one(), ">="); return c == 1 || c == 0; }
      case T::kLt: case T::kLt2: case T::kLessthan: return py_compare(v, one(), "<") == -1;
      case T::kLe: case T::kLe2: { const int c = py_compare(v, one(), "<="); return c == -1 || c == 0; }
      case T::kCountOf: break;
    }
    unsupported("the '" + tname + "' test");
  }

  /// Remembers a mutable object for the destructor, dropping the entries already freed.
  template <class T>
  static void track(std::vector<std::weak_ptr<T>>& list, const std::shared_ptr<T>& obj) {
    if (list.size() >= 64 && list.size() == list.capacity()) {
      list.erase(std::remove_if(list.begin(), list.end(), [](const auto& w) { return w.expired(); }), list.end());
    }
    list.push_back(obj);
  }

  const Lexer& lexer_;
  RenderLimits limits_;
  Value context_;
  std::size_t saved_text_limit_;
  std::vector<std::weak_ptr<NamespaceObj>> namespaces_;
  std::vector<std::weak_ptr<LoopObj>> loops_;
  FramePtr root_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  std::size_t pos_ = 0;
};

Value Renderer::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  auto missing = [&]() {
    if (key.t == VT::kStr) return missing_attr(obj, key.text());
    std::string k;
    repr_into(k, key, 0);
    return Value::undefined(object_type_repr(obj) + " has no element " + k);
  };
  // obj[key] first; on TypeError/LookupError a str key falls back to the attribute.
  switch (obj.t) {
    case VT::kDict:
      if (is_hashable(key) && key.t != VT::kList && key.t != VT::kNamespace && key.t != VT::kFunc &&
          key.t != VT::kLoop && key.t != VT::kIter) {
        if (const Value* v = as_dict(obj).get(key)) return *v;
      }
      break;
    case VT::kList:
    case VT::kStr:
      if (key.is_intlike()) {
        const int64_t i = key.as_int();
        if (obj.t == VT::kList) {
          const auto& items = as_list(obj).items;
          const auto n = static_cast<int64_t>(items.size());
          const int64_t j = i < 0 ? i + n : i;
          if (j >= 0 && j < n) return items[static_cast<std::size_t>(j)];
        } else {
          const std::string& s = obj.text();
          const auto n = static_cast<int64_t>(cp_count(s));
          int64_t j = i < 0 ? i + n : i;
          if (j >= 0 && j < n) {
            std::size_t b = 0;
            while (j-- > 0) next_cp(s, b);
            std::size_t e = b;
            next_cp(s, e);
            return Value::str(s.substr(b, e - b), obj.markup);
          }
        }
      }
      break;
    default:
      break;
  }
  if (key.t == VT::kStr) {
    if (auto m = python_attr(obj, key.text())) return *m;
    if (obj.t == VT::kNamespace) {
      if (const Value* v = as_ns(obj).attrs.get_str(key.text())) return *v;
    }
    if (obj.t == VT::kLoop) return loop_attr(obj, key.text());
  }
  return missing();
}

void charge(Renderer& r, uint64_t units) { r.charge(units); }

// ---------------------------------------------------------------------------------------------
// Formatting errors

std::string where(const Lexer& lexer, std::size_t pos, int& line, int& col) {
  const auto lc = lexer.location(pos);
  line = lc.first;
  col = lc.second;
  return "line " + std::to_string(line) + ":" + std::to_string(col) + ": ";
}

// ---------------------------------------------------------------------------------------------
// Content format detection: vLLM's `_detect_content_format` (vllm/renderers/hf.py, checked at
// vllm-project/vllm 02e64f58 and e7ad92e5; the functions are the same in both) run on this
// parser's AST instead of jinja2's. jinja2 node kinds map one to one: Name (always a load in an
// expression), Getattr, Getitem (a Const or a Slice argument), Filter, Test, Assign (`set` with
// `=`; a block set is an AssignBlock, which vLLM does not look at), For. vLLM walks nodes with
// jinja2's find_all, a pre-order walk that visits a statement before its bodies, bodies in
// source order, and a for loop's body before its else; the walk below does the same, so the
// first content loop it meets is the one vLLM meets.

class ContentFormatDetector {
 public:
  explicit ContentFormatDetector(const Body& root) {
    collect(root);
  }

  ContentFormat detect() const {
    // Names bound to `messages` (or a filtered, tested or sliced `messages`) by `set`, transitively.
    std::vector<std::string> message_lists{"messages"};
    for (std::size_t k = 0; k < message_lists.size(); ++k) {
      for (const Stmt* s : assigns_) {
        if (!refers_to(s->expr.get(), message_lists[k], nullptr)) continue;
        // vLLM asserts the target is a plain name; the failed assertion makes it fall back.
        if (s->kind != SK::kSet || s->target.tuple) return ContentFormat::kString;
        // vLLM's breadth-first search can revisit a name forever (a = b, b = a); it ends here.
        if (std::find(message_lists.begin(), message_lists.end(), s->target.name) == message_lists.end()) {
          message_lists.push_back(s->target.name);
        }
      }
    }
    // Targets of loops over those lists: the names a message goes by.
    std::vector<std::string> messages;
    for (const Stmt* loop : loops_) {
      for (const auto& list : message_lists) {
        if (!refers_to(loop->expr.get(), list, nullptr)) continue;
        if (loop->target.tuple) return ContentFormat::kString;
        messages.push_back(loop->target.name);
        break;
      }
    }
    // The first loop over a message's content decides.
    static const std::string content = "content";
    for (const Stmt* loop : loops_) {
      for (const auto& message : messages) {
        if (!refers_to(loop->expr.get(), message, &content)) continue;
        return loop->target.tuple ? ContentFormat::kString : ContentFormat::kOpenAI;
      }
    }
    return ContentFormat::kString;
  }

 private:
  // vLLM's _is_var_or_elems_access: `name` (key null) or `name[key]` / `name.key`, possibly
  // under filters, tests and slices.
  static bool refers_to(const Expr* e, const std::string& name, const std::string* key) {
    while (e != nullptr) {
      if (e->kind == EK::kFilter || e->kind == EK::kTest ||
          (e->kind == EK::kGetitem && !e->args.empty() && e->args[0] && e->args[0]->kind == EK::kSlice)) {
        e = e->node.get();
        continue;
      }
      if (key == nullptr) return e->kind == EK::kName && e->name == name;
      const Expr* subject = e->node.get();
      if (subject == nullptr || subject->kind != EK::kName || subject->name != name) return false;
      if (e->kind == EK::kGetattr) return e->name == *key;
      if (e->kind == EK::kGetitem && !e->args.empty() && e->args[0] && e->args[0]->kind == EK::kConst) {
        const Value& v = e->args[0]->value;
        return v.t == VT::kStr && v.s && *v.s == *key;
      }
      return false;
    }
    return false;
  }

  void collect(const Body& body) {
    for (const auto& st : body) {
      const Stmt& s = *st;
      switch (s.kind) {
        case SK::kSet:
        case SK::kSetNs:
          assigns_.push_back(&s);
          break;
        case SK::kFor:
          loops_.push_back(&s);
          collect(s.body);
          collect(s.else_body);
          break;
        case SK::kIf:
          for (const auto& b : s.bodies) collect(b);
          break;
        case SK::kSetBlock:
        case SK::kFilterBlock:
        case SK::kMacro:
        case SK::kWith:
        case SK::kGeneration:
          collect(s.body);
          break;
        default:
          break;
      }
    }
  }

  std::vector<const Stmt*> assigns_;  // `set` statements, in jinja2's find_all order
  std::vector<const Stmt*> loops_;    // `for` statements, in jinja2's find_all order
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API

struct ChatTemplate::Program {
  std::unique_ptr<Lexer> lexer;
  Body body;
  ContentFormat content_format = ContentFormat::kString;
};

Expected<ChatTemplate, TemplateError> ChatTemplate::compile(std::string_view source) {
  try {
    if (!valid_utf8(source)) return unexpected(TemplateError{"TemplateSyntaxError: the template is not valid UTF-8", 0, 0});
    auto program = std::make_shared<Program>();
    program->lexer = std::make_unique<Lexer>(source);
    std::vector<Token> tokens = program->lexer->run();
    Parser parser(std::move(tokens), *program->lexer);
    program->body = parser.parse();
    program->content_format = ContentFormatDetector(program->body).detect();
    return ChatTemplate(std::move(program));
  } catch (const SyntaxFailure& f) {
    return unexpected(TemplateError{"line " + std::to_string(f.line) + ":" + std::to_string(f.column) +
                                        ": TemplateSyntaxError: " + f.message,
                                    f.line, f.column});
  } catch (const PyError& e) {
    return unexpected(TemplateError{e.type + ": " + e.message, 0, 0});
  } catch (const std::bad_alloc&) {
    return unexpected(TemplateError{"MemoryError: out of memory while compiling the template", 0, 0});
  } catch (const std::exception& e) {
    return unexpected(TemplateError{std::string("InternalError: ") + e.what(), 0, 0});
  }
}

Expected<std::string, TemplateError> ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render(context, RenderLimits{});
}

ContentFormat ChatTemplate::content_format() const {
  return program_ ? program_->content_format : ContentFormat::kString;
}

Expected<std::string, TemplateError> ChatTemplate::render(const nlohmann::ordered_json& context,
                                                         const RenderLimits& limits) const {
  if (!program_) return unexpected(TemplateError{"InternalError: an empty ChatTemplate", 0, 0});
  const Program& program = *program_;
  std::optional<Renderer> renderer;
  try {
    if (!context.is_object()) return unexpected(TemplateError{"TypeError: the render context must be a JSON object", 0, 0});
    Value ctx = from_json(context, 1, limits.max_context_depth);
    renderer.emplace(*program.lexer, limits, std::move(ctx));
    return renderer->run(program.body);
  } catch (const PyError& e) {
    TemplateError err;
    std::string prefix;
    if (renderer) prefix = where(*program.lexer, renderer->pos(), err.line, err.column);
    err.message = prefix + e.type + ": " + e.message;
    return unexpected(std::move(err));
  } catch (const std::bad_alloc&) {
    return unexpected(TemplateError{"MemoryError: out of memory while rendering", 0, 0});
  } catch (const std::exception& e) {
    return unexpected(TemplateError{std::string("InternalError: ") + e.what(), 0, 0});
  }
}

}  // namespace disagg::text
