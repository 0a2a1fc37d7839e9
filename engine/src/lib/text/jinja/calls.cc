// calls.cc — what a call expression reaches: macros, the globals (range, dict, namespace, joiner,
// raise_exception, strftime_now), and the methods of str, dict, list and loop objects, str.format
// included. Apart from renderer.cc to keep each file readable; these are Renderer members.
#include "jinja_internal.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::text::jinja_detail {

// ---------------------------------------------------------------------------------------------
// Calls

namespace {

Value dict_from_args(std::string_view fname, const Args& a) {
  auto d = new_dict();
  if (a.pos.size() > 1)
    type_error(std::string(fname) + " expected at most 1 argument, got " + std::to_string(a.pos.size()));
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

/// datetime.now().strftime(format): local time; %f is microseconds and %z/%Z are empty for
/// the naive datetime Python uses.
std::string strftime_now(const std::string& format) {
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

}  // namespace

Value Renderer::invoke(const Value& callee, Args& a) {
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

Value Renderer::call_macro(FuncObj& fn, Args& a) {
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

Value Renderer::call_global(FuncObj& fn, Args& a) {
  switch (static_cast<G>(fn.id)) {
    case G::kRange: {
      if (!a.kw.empty()) type_error("range() takes no keyword arguments");
      if (a.pos.empty() || a.pos.size() > 3)
        type_error("range expected at least 1 argument, got " + std::to_string(a.pos.size()));
      int64_t v[3] = {0, 0, 1};
      for (std::size_t k = 0; k < a.pos.size(); ++k) {
        if (!a.pos[k].is_intlike())
          type_error("'" + type_name(a.pos[k]) + "' object cannot be interpreted as an integer");
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
      if (n > 100000)
        raise("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
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
    case G::kDict: return dict_from_args("dict", a);
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
    case G::kLipsum: unsupported("calling " + fn.name + "()");
    case G::kRaiseException: {
      const auto p = bind("raise_exception", a, {{"message", std::nullopt}});
      raise("TemplateError", to_str(p[0]));
    }
    case G::kStrftimeNow: {
      const auto p = bind("strftime_now", a, {{"format", std::nullopt}});
      if (p[0].t != VT::kStr) type_error("strftime() argument 1 must be str, not " + type_name(p[0]));
      return Value::str(strftime_now(p[0].text()));
    }
    case G::kCountOf: break;
  }
  unsupported("this global");
}

Value Renderer::loop_method(FuncObj& fn, Args& a) {
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

Value Renderer::dict_method(FuncObj& fn, Args& a) {
  const Value& self = fn.self;
  switch (static_cast<DM>(fn.id)) {
    case DM::kGet: {
      if (!a.kw.empty()) type_error("get() takes no keyword arguments");
      if (a.pos.empty() || a.pos.size() > 2)
        type_error("get expected at least 1 argument, got " + std::to_string(a.pos.size()));
      check_hashable(a.pos[0]);
      if (const Value* v = as_dict(self).get(a.pos[0])) return *v;
      return a.pos.size() == 2 ? a.pos[1] : Value::none();
    }
    case DM::kItems:
    case DM::kKeys:
    case DM::kValues: {
      if (!a.pos.empty() || !a.kw.empty()) type_error(fn.name + "() takes no arguments");
      auto w = std::make_shared<ViewObj>();
      w->kind = fn.id == static_cast<int>(DM::kItems)  ? ViewKind::kItems
                : fn.id == static_cast<int>(DM::kKeys) ? ViewKind::kKeys
                                                       : ViewKind::kValues;
      w->dict = dict_ptr(self);
      return Value::object(VT::kView, std::move(w));
    }
    case DM::kCopy: {
      if (!a.pos.empty() || !a.kw.empty()) type_error("copy() takes no arguments");
      return make_dict(std::make_shared<DictObj>(as_dict(self)));
    }
    default: break;
  }
  unsupported("calling " + fn.name + "()");
}

Value Renderer::list_method(FuncObj& fn, Args& a) {
  const auto& items = as_list(fn.self).items;
  if (!a.kw.empty()) type_error(fn.name + "() takes no keyword arguments");
  switch (static_cast<LM>(fn.id)) {
    case LM::kCount: {
      if (a.pos.size() != 1)
        type_error("count() takes exactly one argument (" + std::to_string(a.pos.size()) + " given)");
      int64_t n = 0;
      for (const auto& x : items) n += py_eq(x, a.pos[0]) ? 1 : 0;
      return Value::integer(n);
    }
    case LM::kIndex: {
      if (a.pos.empty() || a.pos.size() > 3)
        type_error("index expected at least 1 argument, got " + std::to_string(a.pos.size()));
      const auto len = static_cast<int64_t>(items.size());
      const auto [b, e] =
          span_args(len, a.pos.size() > 1 ? a.pos[1] : Value::none(), a.pos.size() > 2 ? a.pos[2] : Value::none());
      for (int64_t k = b; k < e; ++k) {
        if (py_eq(items[static_cast<std::size_t>(k)], a.pos[0])) return Value::integer(k);
      }
      raise("ValueError", "value is not in " + type_name(fn.self));
    }
    case LM::kCopy:
      if (!a.pos.empty()) type_error("copy() takes no arguments");
      return make_list(items);
    default: break;
  }
  unsupported("calling " + fn.name + "()");
}

Value Renderer::str_method(FuncObj& fn, Args& a) {
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
    case SM::kStrip:
    case SM::kLstrip:
    case SM::kRstrip: {
      argc(0, 1);
      const Value chars = a.pos.empty() ? Value::none() : a.pos[0];
      return Value::str(py_strip(s, chars, m != SM::kRstrip, m != SM::kLstrip), mk);
    }
    case SM::kSplit:
    case SM::kRsplit: {
      markup_unsupported();
      const auto p = bind(fname, a, {{"sep", Value::none()}, {"maxsplit", Value::integer(-1)}});
      const int64_t maxsplit = int_arg(p[1]);
      if (p[0].t == VT::kNone) return str_list(m == SM::kSplit ? py_split_ws(s, maxsplit) : py_rsplit_ws(s, maxsplit));
      if (p[0].t != VT::kStr) type_error("must be str or None, not " + type_name(p[0]));
      return str_list(m == SM::kSplit ? py_split_sep(s, p[0].text(), maxsplit)
                                      : py_rsplit_sep(s, p[0].text(), maxsplit));
    }
    case SM::kSplitlines: {
      markup_unsupported();
      const auto p = bind(fname, a, {{"keepends", Value::boolean(false)}});
      return str_list(py_splitlines(s, truthy(p[0])));
    }
    case SM::kStartswith:
    case SM::kEndswith: {
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
    case SM::kFind:
    case SM::kRfind:
    case SM::kIndex:
    case SM::kRindex:
    case SM::kCount: {
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
        if (item.t != VT::kStr)
          type_error("sequence item " + std::to_string(k) + ": expected str instance, " + type_name(item) + " found");
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
    case SM::kIsupper:
    case SM::kIslower: {
      argc(0, 0);
      bool cased = false;
      for (std::size_t i = 0; i < s.size();) {
        const char32_t c = next_cp(s, i);
        const bool wrong =
            m == SM::kIsupper ? (py_islower_cp(c) || py_istitle_cp(c)) : (py_isupper_cp(c) || py_istitle_cp(c));
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
    case SM::kCenter:
    case SM::kLjust:
    case SM::kRjust: {
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
    case SM::kPartition:
    case SM::kRpartition: {
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
    case SM::kRemoveprefix:
    case SM::kRemovesuffix: {
      argc(1, 1);
      const std::string& x = str_arg(0);
      if (m == SM::kRemoveprefix) { return Value::str(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s, mk); }
      const bool ends = s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
      return Value::str(ends && !x.empty() ? s.substr(0, s.size() - x.size()) : s, mk);
    }
    case SM::kFormat:
      if (mk) unsupported("str.format() on a Markup string");
      return Value::str(str_format(s, a));
    default: break;
  }
  unsupported("calling str." + fname + "()");
}

/// str.format() through the sandbox: {}, {0}, {name}, .attr and [key] lookups, !s and !r;
/// a non-empty format spec is refused as unsupported.
std::string Renderer::str_format(const std::string& fmt, const Args& a) {
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
        if (auto_index > 0)
          raise("ValueError", "cannot switch from automatic field numbering to manual field specification");
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
        const bool digits = !key.empty() && key.size() < 10 &&
                            std::all_of(key.begin(), key.end(), [](char d) { return d >= '0' && d <= '9'; });
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

}  // namespace disagg::text::jinja_detail
