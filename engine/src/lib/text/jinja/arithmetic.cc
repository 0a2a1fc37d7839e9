// arithmetic.cc — numbers as Python prints and parses them (float repr, int(), float()) and the
// binary operators with Python's semantics, %-formatting included. Apart from the renderer
// because it is pure value arithmetic: no scopes, no template state.
#include "jinja_internal.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::text::jinja_detail {

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
      } else if (lower[i] == '_' && i > start && i + 1 < lower.size() && lower[i - 1] != '_' && lower[i + 1] >= '0' &&
                 lower[i + 1] <= '9') {
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

// ---- arithmetic

namespace {

[[noreturn]] void big_int() {
  unsupported("an integer beyond 64 bits (Python would use a big int)");
}
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

/// Pads `body` to `width` code points: left-aligned with '-', else right-aligned.
std::string pad_field(std::string body, int64_t width, bool left) {
  const auto len = static_cast<int64_t>(cp_count(body));
  if (width <= len) return body;
  const std::string fill(static_cast<std::size_t>(width - len), ' ');
  return left ? body + fill : fill + body;
}

}  // namespace

int64_t mul_i(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) big_int();
  return r;
}

void check_size(std::size_t bytes, std::size_t limit) {
  if (bytes > limit)
    raise("LimitError", "a string or list grew past the render limit of " + std::to_string(limit) + " bytes");
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

std::string py_str_value(const Value& v) {
  std::string out;
  str_into(out, v, 0);
  return out;
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
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos)
      flags.push_back(fmt[i++]);
    int64_t width = 0;
    if (i < fmt.size() && fmt[i] == '*') unsupported("a '*' width in %-formatting");
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
      width = std::min<int64_t>(width * 10 + (fmt[i++] - '0'), 1 << 20);
    int64_t precision = -1;
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      if (i < fmt.size() && fmt[i] == '*') unsupported("a '*' precision in %-formatting");
      precision = 0;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
        precision = std::min<int64_t>(precision * 10 + (fmt[i++] - '0'), 1 << 20);
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
    if (precision >= 0) {
      spec += '.';  // two appends: GCC 12's -Wrestrict misfires on "." + std::to_string()
      spec += std::to_string(precision);
    }
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
        type_error(std::string("%") + c +
                   " format: " + (c == 'd' || c == 'i' || c == 'u' ? "a real number" : "an integer") +
                   " is required, not " + type_name(a));
      }
      const char conv = c == 'i' || c == 'u' ? 'd' : c;
      if (conv == 'd') {
        spec += "lld";
        std::snprintf(buf, sizeof buf, spec.c_str(), v);
      } else {
        // Python prints negative hex/octal with a sign; C would print two's complement.
        const bool neg = v < 0;
        const unsigned long long mag =
            neg ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
        std::string digits_spec = "%";
        if (flags.find('#') != std::string::npos) digits_spec += "#";
        if (precision >= 0) {
          digits_spec += '.';
          digits_spec += std::to_string(precision);
        }
        digits_spec += std::string("ll") + conv;
        std::snprintf(buf, sizeof buf, digits_spec.c_str(), mag);
        std::string body = buf;
        if (conv == 'o' && flags.find('#') != std::string::npos) {
          // Python's alternate octal prefix is 0o, C's a lone 0.
          body = "0o" + (body.size() > 1 ? body.substr(1) : std::string("0"));
        }
        const std::string sign = neg                                    ? "-"
                                 : flags.find('+') != std::string::npos ? "+"
                                 : flags.find(' ') != std::string::npos ? " "
                                                                        : "";
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
      if (ints) { return Value::integer(add_i(a.as_int(), b.as_int())); }
      if (nums) return Value::number(a.as_double() + b.as_double());
      if (a.t == VT::kStr && b.t == VT::kStr) {
        check_size(a.text().size() + b.text().size(), limit);
        if (a.markup || b.markup) {
          return Value::str(
              (a.markup ? a.text() : html_escape(a.text())) + (b.markup ? b.text() : html_escape(b.text())), true);
        }
        return Value::str(a.text() + b.text());
      }
      if (a.t == VT::kList && b.t == VT::kList && as_list(a).kind == as_list(b).kind &&
          as_list(a).kind != SeqKind::kRange) {
        std::vector<Value> items = as_list(a).items;
        check_size((items.size() + as_list(b).items.size()) * sizeof(Value), limit);
        items.insert(items.end(), as_list(b).items.begin(), as_list(b).items.end());
        return make_list(std::move(items), as_list(a).kind);
      }
      if (a.t == VT::kStr) type_error("can only concatenate str (not \"" + type_name(b) + "\") to str");
      if (a.t == VT::kList && as_list(a).kind == SeqKind::kList)
        type_error("can only concatenate list (not \"" + type_name(b) + "\") to list");
      return bad();
    }
    case BinOp::kSub: {
      if (ints) { return Value::integer(sub_i(a.as_int(), b.as_int())); }
      if (nums) return Value::number(a.as_double() - b.as_double());
      return bad();
    }
    case BinOp::kMul: {
      if (ints) { return Value::integer(mul_i(a.as_int(), b.as_int())); }
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
        if (y == 0)
          raise("ZeroDivisionError", op == BinOp::kFloorDiv ? "float floor division by zero" : "float modulo");
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
        if (std::isinf(r) && std::isfinite(x) && std::isfinite(y))
          raise("OverflowError", "(34, 'Numerical result out of range')");
        return Value::number(r);
      }
      return bad();
    }
  }
  return bad();
}

}  // namespace disagg::text::jinja_detail
