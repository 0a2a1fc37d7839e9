// filters.cc — jinja2's filters and tests, with their helpers (attribute paths, lazy generators,
// sorting, Python's round()). Apart from renderer.cc to keep each file readable; these are
// Renderer members, reached through filter() and test() by id.
#include "jinja_internal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::text::jinja_detail {

// ---------------------------------------------------------------------------------------------
// Filters and tests

namespace {

/// jinja2's _prepare_attribute_parts: "a.0.b" -> ["a", 0, "b"].
std::vector<Value> attribute_parts(const Value& attribute) {
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
Value ignore_case(const Value& v) {
  return v.t == VT::kStr ? Value::str(py_lower(v.text())) : v;
}

/// Python's round(x, ndigits) for floats: exact decimal expansion, half to even.
double round_float(double x, int64_t ndigits) {
  if (!std::isfinite(x) || x == 0) return x;
  if (ndigits > 22) return x;
  if (ndigits < -308) return 0.0 * x;
  char buf[1200];
  std::snprintf(buf, sizeof buf, "%.1100f", std::fabs(x));
  std::string digits(buf);
  const std::size_t dot = digits.find('.');
  std::string int_part = digits.substr(0, dot);
  std::string frac = digits.substr(dot + 1);
  std::string all = int_part + frac;                                     // decimal digits, point after int_part.size()
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

}  // namespace

// ---- used by lazy iterators

Value Renderer::call_filter_by_name(const Value& name, const Value& v, const Args& a) {
  if (name.t != VT::kStr) type_error("filter name must be a string");
  const int id = lookup_name(kFilterNames, name.text());
  if (id < 0) raise("TemplateRuntimeError", "No filter named '" + name.text() + "'.");
  if (id >= kFirstUnsupportedFilter) unsupported("the '" + name.text() + "' filter");
  return filter(id, v, a);
}

bool Renderer::call_test_by_name(const Value& name, const Value& v, const Args& a) {
  if (name.t != VT::kStr) type_error("test name must be a string");
  const int id = lookup_name(kTestNames, name.text());
  if (id < 0) raise("TemplateRuntimeError", "No test named '" + name.text() + "'.");
  return test(id, v, a);
}

// ---- filters

Value Renderer::attr_getter_item(const Value& item, const std::vector<Value>& parts) {
  Value v = item;
  for (const Value& p : parts) v = getitem(v, p);
  return v;
}

int64_t Renderer::length(const Value& v) {
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
Value Renderer::lazy_map(const Value& src, std::function<std::optional<Value>(Renderer&, const Value&)> fn) {
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
  return make_iter(
      "generator",
      [cursor, source, fn](Renderer& r, Value& out) {
        if (!*cursor) *cursor = Cursor::over(source);
        Value item;
        while ((*cursor)->next(r, item)) {
          if (std::optional<Value> v = fn(r, item)) {
            out = std::move(*v);
            return true;
          }
        }
        return false;
      },
      chain);
}

Value Renderer::select_or_reject(const Value& v, const Args& a, bool select, bool lookup_attr) {
  if (!truthy(v)) return iter_of("generator", {});
  const Args args = a;
  return lazy_map(v,
                  [args, select, lookup_attr, prepared = std::make_shared<bool>(false)](
                      Renderer& r, const Value& item) -> std::optional<Value> {
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

Value Renderer::map_filter(const Value& v, const Args& a) {
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

std::vector<Value> Renderer::sorted_values(std::vector<Value> items, bool reverse,
                                           const std::function<Value(const Value&)>& key) {
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

Value Renderer::filter(int id, const Value& v, const Args& a) {
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
    case F::kLength: bind("len", a, {}); return Value::integer(length(v));
    case F::kD:
    case F::kDefault: {
      const auto p = bind("default", a, {{"default_value", Value::str("")}, {"boolean", Value::boolean(false)}});
      if (v.is_undefined() || (truthy(p[1]) && !truthy(v))) return p[0];
      return v;
    }
    case F::kDictsort: {
      const auto p = bind(
          "dictsort", a,
          {{"case_sensitive", Value::boolean(false)}, {"by", Value::str("key")}, {"reverse", Value::boolean(false)}});
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
    case F::kForceescape: bind("forceescape", a, {}); return Value::str(html_escape(to_str(v)), true);
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
        case VT::kStr:
        case VT::kList:
        case VT::kDict:
        case VT::kView: {
          std::vector<Value> items = collect(*this, v);
          if (items.empty()) return Value::undefined("No last item, sequence was empty.");
          return items.back();
        }
        default: type_error("'" + type_name(v) + "' object is not reversible");
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
      if (!a.pos.empty() && !a.kw.empty())
        raise("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
      if (!a.kw.empty()) unsupported("|format with keyword arguments");
      const Value s = soft_str(v);
      if (s.markup) unsupported("|format on a Markup string");
      std::string out = percent_format(s.text(), make_tuple(a.pos));
      check_size(out.size(), limits_.max_output_bytes);
      return Value::str(std::move(out));
    }
    case F::kIndent: {
      const auto p =
          bind("indent", a,
               {{"width", Value::integer(4)}, {"first", Value::boolean(false)}, {"blank", Value::boolean(false)}});
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
    case F::kList: bind("list", a, {}); return make_list(collect(*this, v));
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
        return make_iter("generator",
                         [](Renderer&, Value&) -> bool { type_error("Can only get item pairs from a mapping."); });
      }
      std::vector<Value> items;
      for (const auto& [k, val] : as_dict(v).entries) items.push_back(make_tuple({k, val}));
      return iter_of("generator", std::move(items));
    }
    case F::kMap: return map_filter(v, a);
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
        return iter_of(v.t == VT::kList ? as_list(v).kind == SeqKind::kList ? "list_reverseiterator" : "reversed"
                                        : "dict_reversekeyiterator",
                       std::move(items));
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
      if (method != "common" && method != "ceil" && method != "floor")
        raise("FilterArgumentError", "method must be common, ceil or floor");
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
    case F::kSafe: bind("safe", a, {}); return Value::str(to_str(v), true);
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
        for (int64_t j = std::max<int64_t>(0, start); j < std::min(end, len); ++j)
          tmp.push_back(seq[static_cast<std::size_t>(j)]);
        if (p[1].t != VT::kNone && k >= extra) tmp.push_back(p[1]);
        out.push_back(make_list(std::move(tmp)));
      }
      return iter_of("generator", std::move(out));
    }
    case F::kSort: {
      const auto p = bind("sort", a,
                          {{"reverse", Value::boolean(false)},
                           {"case_sensitive", Value::boolean(false)},
                           {"attribute", Value::none()}});
      std::vector<std::vector<Value>> attrs;
      if (p[2].t == VT::kStr) {
        for (const auto& piece : py_split_sep(p[2].text(), ",", -1))
          attrs.push_back(attribute_parts(Value::str(piece)));
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
    case F::kString: bind("string", a, {}); return soft_str(v);
    case F::kSum: {
      const auto p = bind("sum", a, {{"attribute", Value::none()}, {"start", Value::integer(0)}});
      if (p[1].t == VT::kStr) type_error("sum() can't sum strings [use ''.join(seq) instead]");
      const std::vector<Value> parts = attribute_parts(p[0]);
      Value total = p[1];
      Cursor c = Cursor::over(v);
      Value item;
      while (c.next(*this, item)) {
        total = binop(BinOp::kAdd, total, p[0].t == VT::kNone ? item : attr_getter_item(item, parts),
                      limits_.max_output_bytes);
      }
      return total;
    }
    case F::kTitle: {
      bind("title", a, {});
      const std::string s = to_str(v);
      // jinja2's title: split on runs of [-\s({[<] and capitalize every piece.
      auto is_sep = [](char32_t c) {
        return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
      };
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
      const auto p = bind("truncate", a,
                          {{"length", Value::integer(255)},
                           {"killwords", Value::boolean(false)},
                           {"end", Value::str("...")},
                           {"leeway", Value::none()}});
      if (v.t != VT::kStr || !p[0].is_intlike() || p[2].t != VT::kStr) unsupported("|truncate on other than strings");
      const int64_t length = p[0].as_int();
      const int64_t leeway = p[3].t == VT::kNone ? 5 : p[3].as_int();
      const std::u32string u = to_u32(v.text());
      const auto end_len = static_cast<int64_t>(cp_count(p[2].text()));
      if (length < end_len)
        raise("AssertionError", "expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
      if (leeway < 0) raise("AssertionError", "expected leeway >= 0, got " + std::to_string(leeway));
      if (static_cast<int64_t>(u.size()) <= length + leeway) return v;
      const std::size_t cut =
          static_cast<std::size_t>(std::clamp<int64_t>(length - end_len, 0, static_cast<int64_t>(u.size())));
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
      const auto p = bind("tojson", a,
                          {{"ensure_ascii", Value::boolean(false)},
                           {"indent", Value::none()},
                           {"separators", Value::none()},
                           {"sort_keys", Value::boolean(false)}});
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
    default: break;
  }
  unsupported("the '" + fname + "' filter");
}

// ---- tests

bool Renderer::test(int id, const Value& v, const Args& a) {
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
    case T::kFilter:
      none();
      check_hashable(v);
      return v.t == VT::kStr && lookup_name(kFilterNames, v.text()) >= 0;
    case T::kTest:
      none();
      check_hashable(v);
      return v.t == VT::kStr && lookup_name(kTestNames, v.text()) >= 0;
    case T::kNone: none(); return v.t == VT::kNone;
    case T::kBoolean: none(); return v.t == VT::kBool;
    case T::kFalse: none(); return v.t == VT::kBool && !v.b;
    case T::kTrue: none(); return v.t == VT::kBool && v.b;
    case T::kInteger: none(); return v.t == VT::kInt;
    case T::kFloat: none(); return v.t == VT::kFloat;
    case T::kLower:
    case T::kUpper: {
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
    case T::kCallable: none(); return v.t == VT::kFunc || v.t == VT::kUndefined || v.t == VT::kLoop;
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
    case T::kEq:
    case T::kEq2:
    case T::kEqualto: return py_eq(v, one());
    case T::kNe:
    case T::kNe2: return !py_eq(v, one());
    case T::kGt:
    case T::kGt2:
    case T::kGreaterthan: return py_compare(v, one(), ">") == 1;
    case T::kGe:
    case T::kGe2: {
      const int c = py_compare(v, one(), ">=");
      return c == 1 || c == 0;
    }
    case T::kLt:
    case T::kLt2:
    case T::kLessthan: return py_compare(v, one(), "<") == -1;
    case T::kLe:
    case T::kLe2: {
      const int c = py_compare(v, one(), "<=");
      return c == -1 || c == 0;
    }
    case T::kCountOf: break;
  }
  unsupported("the '" + tname + "' test");
}

}  // namespace disagg::text::jinja_detail
