// values.cc — the Python objects a template sees, as text and as keys: type names, str() and
// repr(), truthiness, equality and ordering, conversion from the JSON context, and json.dumps as
// transformers' tojson calls it. Apart from the renderer because none of it depends on a render's
// state (only on the thread's text limit, t_text_limit).
#include "jinja_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::text::jinja_detail {

// ---------------------------------------------------------------------------------------------
// Values: the Python objects a template sees

namespace {

std::string iter_type_name(const Value& v) {
  return as_iter(v).type_name;
}

}  // namespace

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
    case VT::kFunc: return as_func(v).kind == FnKind::kMacro ? "Macro" : "builtin_function_or_method";
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
    case VT::kDict:
    case VT::kView: return false;
    default: return true;
  }
}
/// Raises TypeError for unhashable keys, as Python does; other objects are refused as unsupported.
void check_hashable(const Value& v) {
  if (!is_hashable(v)) type_error("unhashable type: '" + type_name(v) + "'");
  switch (v.t) {
    case VT::kNone:
    case VT::kBool:
    case VT::kInt:
    case VT::kFloat:
    case VT::kStr:
    case VT::kUndefined: return;
    default: unsupported("a " + type_name(v) + " as a dict key");
  }
}

// ---- str() and repr()

/// The longest text str()/repr()/json.dumps may build: the render's byte limit. Thread-local so
/// that these free helpers see the limit of the render running on their thread (set by Renderer).
constinit thread_local std::size_t t_text_limit = std::size_t{64} << 20;

namespace {

void check_text_size(std::size_t bytes) {
  if (bytes > t_text_limit) {
    raise("LimitError", "a string grew past the render limit of " + std::to_string(t_text_limit) + " bytes");
  }
}

constexpr int kMaxReprDepth = 200;

/// Recursion and size guard of the text builders (a list can hold one big string a million times).
void check_repr_depth(int depth, const std::string& out) {
  if (depth > kMaxReprDepth)
    raise("RecursionError", "maximum recursion depth exceeded while getting the repr of an object");
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

}  // namespace

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
    case VT::kLoop: break;  // handled by the renderer (needs the loop's length)
    case VT::kFunc:
    case VT::kIter: break;
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

namespace {

bool int_float_eq(int64_t a, double b) {
  if (std::isnan(b) || std::trunc(b) != b) return false;
  if (b < -9223372036854775808.0 || b >= 9223372036854775808.0) return false;
  return static_cast<int64_t>(b) == a;
}

}  // namespace

bool py_eq(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.t == VT::kFloat && b.t == VT::kFloat) return a.f == b.f;
    if (a.t == VT::kFloat) return int_float_eq(b.as_int(), a.f);
    if (b.t == VT::kFloat) return int_float_eq(a.as_int(), b.f);
    return a.as_int() == b.as_int();
  }
  if (a.t != b.t) return false;
  switch (a.t) {
    case VT::kUndefined:
    case VT::kNone: return true;
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
    default: return a.o == b.o;
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
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        unsupported("an integer beyond 64 bits in the context");
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
    default: raise("TypeError", "the context holds a value JSON cannot express");
  }
}

// ---- json.dumps, as transformers' tojson calls it

namespace {

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

void json_newline(std::string& out, const JsonOptions& o, int level) {
  out.push_back('\n');
  for (int k = 0; k < level; ++k) out += *o.indent;
}

}  // namespace

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
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* x, const auto* y) { return py_lt(x->first, y->first); });
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
          default: type_error("keys must be str, int, float, bool or None, not " + type_name(k));
        }
        out += o.key_sep;
        json_into(out, e->second, o, level + 1, depth + 1);
      }
      if (o.indent) json_newline(out, o, level);
      out.push_back('}');
      return;
    }
    default: break;
  }
  type_error("Object of type " + type_name(v) + " is not JSON serializable");
}

}  // namespace disagg::text::jinja_detail
