// lexer.cc — jinja2's lexer, configured with trim_blocks=True, lstrip_blocks=True and the default
// delimiters; the source's newlines are normalized to \n and one trailing newline is dropped
// (keep_trailing_newline=False). Apart from the parser because whitespace control and literals
// are a concern of their own; the class is declared in jinja_internal.h.
#include "jinja_internal.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::text::jinja_detail {

Lexer::Lexer(std::string_view raw) {
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

std::vector<Token> Lexer::run() {
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
std::pair<int, int> Lexer::location(std::size_t pos) const {
  const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
  const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
  const std::size_t start = line_starts_[line - 1];
  const std::size_t end = std::min(pos, src_.size());
  return {static_cast<int>(line), static_cast<int>(cp_count(std::string_view(src_).substr(start, end - start)) + 1)};
}

[[noreturn]] void Lexer::fail(std::size_t pos, std::string message) const {
  const auto [line, col] = location(pos);
  throw SyntaxFailure{std::move(message), line, col};
}

void Lexer::emit_data(std::string text, std::size_t pos) {
  if (!text.empty()) tokens_.push_back(Token{Tok::kData, std::move(text), 0, 0, pos});
}

/// Whitespace control before a tag: '-' strips all whitespace; otherwise lstrip_blocks strips
/// the spaces that alone precede a block or comment tag on its line (not for '{{' or '+').
void Lexer::apply_strip(std::string& text, char sign, bool lstrip_applies, bool line_starting) {
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

bool Lexer::all_ws(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    if (!py_isspace(next_cp(s, i))) return false;
  }
  return true;
}

void Lexer::rstrip_ws(std::string& s) {
  std::size_t keep = 0;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t c = next_cp(s, i);
    if (!py_isspace(c)) keep = i;
  }
  s.resize(keep);
}

/// Length of the run of whitespace code points at pos.
std::size_t Lexer::ws_run(std::size_t pos) const {
  std::size_t i = pos;
  while (i < src_.size()) {
    std::size_t j = i;
    if (!py_isspace(next_cp(src_, j))) break;
    i = j;
  }
  return i - pos;
}

bool Lexer::at(std::size_t pos, std::string_view s) const {
  return pos <= src_.size() && src_.compare(pos, s.size(), s) == 0;
}

/// `{%[-+]?\s*raw\s*(-%}\s*|%})` at p; sets end past it.
bool Lexer::match_raw_begin(std::size_t p, std::size_t& end) const {
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
std::size_t Lexer::lex_raw_body(std::size_t pos, bool& line_starting) {
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
std::size_t Lexer::lex_comment(std::size_t q, std::size_t start, bool& line_starting) {
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

bool Lexer::is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool Lexer::is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/// `(\d+_)*\d+` at i: the end, or npos.
std::size_t Lexer::digits_us(std::size_t i, bool (*digit)(char)) const {
  if (i >= src_.size() || !digit(src_[i])) return std::string::npos;
  while (i < src_.size() && digit(src_[i])) ++i;
  while (i + 1 < src_.size() && src_[i] == '_' && digit(src_[i + 1])) {
    ++i;
    while (i < src_.size() && digit(src_[i])) ++i;
  }
  return i;
}

/// jinja2's float rule at i (not right after a '.'): the end, or npos.
std::size_t Lexer::match_float(std::size_t i) const {
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
std::size_t Lexer::match_int(std::size_t i, int64_t& value) const {
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

int64_t Lexer::int_value(const std::string& digits, int base, std::size_t pos) const {
  uint64_t v = 0;
  for (const char ch : digits) {
    if (ch == '_') continue;
    const char c = ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch + 32) : ch;
    const int d = is_digit(c) ? c - '0' : c - 'a' + 10;
    if (__builtin_mul_overflow(v, static_cast<uint64_t>(base), &v) ||
        __builtin_add_overflow(v, static_cast<uint64_t>(d), &v) ||
        v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(pos, "integer literal beyond 64 bits is not supported");
    }
  }
  return static_cast<int64_t>(v);
}

/// Decodes a string literal body as jinja2 does: the text's non-ASCII characters become
/// backslash escapes ('ascii', 'backslashreplace'), then Python's 'unicode-escape' decodes it.
std::string Lexer::decode_string(std::string_view body, std::size_t pos) const {
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
      case 'x':
      case 'u':
      case 'U': {
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
      case 'N': fail(pos, "\\N{...} escapes in string literals are not supported");
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
std::size_t Lexer::lex_tag(std::size_t pos, bool block, bool& line_starting) {
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
        tokens_.push_back(
            Token{Tok::kString, decode_string(std::string_view(src_).substr(pos + 1, e - pos - 1), pos), 0, 0, pos});
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

}  // namespace disagg::text::jinja_detail
