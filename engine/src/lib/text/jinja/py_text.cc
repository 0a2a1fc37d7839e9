// py_text.cc — Python 3.11's str semantics on UTF-8 text: code point properties and case mapping
// (utf8proc plus exception tables generated from Python), and the helpers behind str's methods
// (strip, split, replace, ...). Apart from the engine because it knows nothing of templates: it is
// Python's str, and most of it is data.
#include "jinja_internal.h"

#include <utf8proc.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::text::jinja_detail {

// ---------------------------------------------------------------------------------------------
// UTF-8 and Unicode (Python 3.11's str semantics)

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
std::string from_u32(const std::u32string& s) {
  return from_u32(s.data(), s.data() + s.size());
}

namespace {

// Generated from Python 3.11 (Unicode 14) and utf8proc 2.8: where Python's str.upper/lower/title
// of one code point differ from utf8proc's simple mappings (SpecialCasing.txt).
struct SpecialCase {
  char32_t cp;
  const char* upper;
  const char* lower;
  const char* title;
};
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
struct CpRange {
  char32_t lo;
  char32_t hi;
  bool value;
};
// Where str.isprintable() differs from 'not Cc/Cf/Cs/Co/Cn/Zl/Zp/Zs (space excepted)'.
constexpr CpRange kPrintableExceptions[] = {
    {0x0CF3, 0x0CF3, false},   {0x0ECE, 0x0ECE, false},   {0x10EFD, 0x10EFF, false}, {0x1123F, 0x11241, false},
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
    {0x00AA, 0x00AA, true},    {0x00BA, 0x00BA, true},   {0x02B0, 0x02B8, true},   {0x02C0, 0x02C1, true},
    {0x02E0, 0x02E4, true},    {0x0345, 0x0345, true},   {0x037A, 0x037A, true},   {0x1D2C, 0x1D6A, true},
    {0x1D78, 0x1D78, true},    {0x1D9B, 0x1DBF, true},   {0x2071, 0x2071, true},   {0x207F, 0x207F, true},
    {0x2090, 0x209C, true},    {0x2170, 0x217F, true},   {0x24D0, 0x24E9, true},   {0x2C7C, 0x2C7D, true},
    {0xA69C, 0xA69D, true},    {0xA770, 0xA770, true},   {0xA7F8, 0xA7F9, true},   {0xAB5C, 0xAB5F, true},
    {0x10780, 0x10780, true},  {0x10783, 0x10785, true}, {0x10787, 0x107B0, true}, {0x107B2, 0x107BA, true},
    {0x1DF25, 0x1DF2A, false},
};
// Where str.isupper() of one code point differs from category Lu.
constexpr CpRange kUppercaseExceptions[] = {
    {0x2160, 0x216F, true},   {0x24B6, 0x24CF, true},   {0x1F130, 0x1F149, true},
    {0x1F150, 0x1F169, true}, {0x1F170, 0x1F189, true},
};
// Where str.isdigit() of one code point differs from category Nd.
constexpr CpRange kDigitExceptions[] = {
    {0x00B2, 0x00B3, true},    {0x00B9, 0x00B9, true},   {0x1369, 0x1371, true},   {0x19DA, 0x19DA, true},
    {0x2070, 0x2070, true},    {0x2074, 0x2079, true},   {0x2080, 0x2089, true},   {0x2460, 0x2468, true},
    {0x2474, 0x247C, true},    {0x2488, 0x2490, true},   {0x24EA, 0x24EA, true},   {0x24F5, 0x24FD, true},
    {0x24FF, 0x24FF, true},    {0x2776, 0x277E, true},   {0x2780, 0x2788, true},   {0x278A, 0x2792, true},
    {0x10A40, 0x10A43, true},  {0x10E60, 0x10E68, true}, {0x11052, 0x1105A, true}, {0x11F50, 0x11F59, false},
    {0x1E4F0, 0x1E4F9, false}, {0x1F100, 0x1F10A, true},
};
// Where str.isnumeric() of one code point differs from categories Nd/Nl/No.
constexpr CpRange kNumericExceptions[] = {
    {0x3405, 0x3405, true},    {0x3483, 0x3483, true},    {0x382A, 0x382A, true},    {0x3B4D, 0x3B4D, true},
    {0x4E00, 0x4E00, true},    {0x4E03, 0x4E03, true},    {0x4E07, 0x4E07, true},    {0x4E09, 0x4E09, true},
    {0x4E5D, 0x4E5D, true},    {0x4E8C, 0x4E8C, true},    {0x4E94, 0x4E94, true},    {0x4E96, 0x4E96, true},
    {0x4EBF, 0x4EC0, true},    {0x4EDF, 0x4EDF, true},    {0x4EE8, 0x4EE8, true},    {0x4F0D, 0x4F0D, true},
    {0x4F70, 0x4F70, true},    {0x5104, 0x5104, true},    {0x5146, 0x5146, true},    {0x5169, 0x5169, true},
    {0x516B, 0x516B, true},    {0x516D, 0x516D, true},    {0x5341, 0x5341, true},    {0x5343, 0x5345, true},
    {0x534C, 0x534C, true},    {0x53C1, 0x53C4, true},    {0x56DB, 0x56DB, true},    {0x58F1, 0x58F1, true},
    {0x58F9, 0x58F9, true},    {0x5E7A, 0x5E7A, true},    {0x5EFE, 0x5EFF, true},    {0x5F0C, 0x5F0E, true},
    {0x5F10, 0x5F10, true},    {0x62FE, 0x62FE, true},    {0x634C, 0x634C, true},    {0x67D2, 0x67D2, true},
    {0x6F06, 0x6F06, true},    {0x7396, 0x7396, true},    {0x767E, 0x767E, true},    {0x8086, 0x8086, true},
    {0x842C, 0x842C, true},    {0x8CAE, 0x8CAE, true},    {0x8CB3, 0x8CB3, true},    {0x8D30, 0x8D30, true},
    {0x9621, 0x9621, true},    {0x9646, 0x9646, true},    {0x964C, 0x964C, true},    {0x9678, 0x9678, true},
    {0x96F6, 0x96F6, true},    {0xF96B, 0xF96B, true},    {0xF973, 0xF973, true},    {0xF978, 0xF978, true},
    {0xF9B2, 0xF9B2, true},    {0xF9D1, 0xF9D1, true},    {0xF9D3, 0xF9D3, true},    {0xF9FD, 0xF9FD, true},
    {0x11F50, 0x11F59, false}, {0x1D2C0, 0x1D2D3, false}, {0x1E4F0, 0x1E4F9, false}, {0x20001, 0x20001, true},
    {0x20064, 0x20064, true},  {0x200E2, 0x200E2, true},  {0x20121, 0x20121, true},  {0x2092A, 0x2092A, true},
    {0x20983, 0x20983, true},  {0x2098C, 0x2098C, true},  {0x2099C, 0x2099C, true},  {0x20AEA, 0x20AEA, true},
    {0x20AFD, 0x20AFD, true},  {0x20B19, 0x20B19, true},  {0x22390, 0x22390, true},  {0x22998, 0x22998, true},
    {0x23B1B, 0x23B1B, true},  {0x2626D, 0x2626D, true},  {0x2F890, 0x2F890, true},
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
    {0x11F50, 0x11F59, false},
    {0x1E4F0, 0x1E4F9, false},
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

// Case mapping helpers: the public str methods below build on them.

bool py_iscased(char32_t c) {
  return py_islower_cp(c) || py_isupper_cp(c) || py_istitle_cp(c);
}

const SpecialCase* special_case(char32_t c) {
  if (c < 0xDF) return nullptr;
  const auto* first = std::begin(kSpecialCases);
  const auto* last = std::end(kSpecialCases);
  const auto* it = std::lower_bound(first, last, c, [](const SpecialCase& s, char32_t v) { return s.cp < v; });
  return it != last && it->cp == c ? it : nullptr;
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
    case 0x27:
    case 0x2E:
    case 0x3A:
    case 0x5E:
    case 0x60:
    case 0xA8:
    case 0xAD:
    case 0xAF:
    case 0xB4:
    case 0xB7:
    case 0xB8:
    case 0x2018:
    case 0x2019:
    case 0x2024:
    case 0x2027: return true;
    default: break;
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

}  // namespace

int category(char32_t c) {
  return static_cast<int>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}

bool py_isprintable(char32_t c) {
  if (c >= 0x20 && c < 0x7F) return true;
  if (c < 0xA0) return false;
  if (auto e = range_lookup(kPrintableExceptions, c)) return *e;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
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
bool py_istitle_cp(char32_t c) {
  return c >= 0x80 && category(c) == UTF8PROC_CATEGORY_LT;
}
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

void append_upper(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c));
  } else if (const SpecialCase* s = special_case(c)) {
    out += s->upper;
  } else {
    put_cp(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
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

// ---- Python str methods on UTF-8 text

namespace {

/// Line boundaries of str.splitlines().
bool py_linebreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

std::u32string cp_set(std::string_view chars) {
  return to_u32(chars);
}

}  // namespace

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
    if (j < u.size()) { eol = (u[j] == '\r' && j + 1 < u.size() && u[j + 1] == '\n') ? j + 2 : j + 1; }
    out.push_back(from_u32(u.data() + i, u.data() + (keepends ? eol : j)));
    i = eol;
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count,
                       std::size_t limit) {
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

}  // namespace disagg::text::jinja_detail
