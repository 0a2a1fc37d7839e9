// renderer.cc — the renderer's core: scopes and argument binding, attribute lookup by name, and
// the Renderer's statements, expressions and attribute/item access (the sandbox's getattr and
// getitem). Calls and methods are in calls.cc, filters and tests in filters.cc: each is large,
// and they use the core only through the Renderer's members.
#include "jinja_internal.h"

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::text::jinja_detail {

// ---------------------------------------------------------------------------------------------
// Runtime support

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

std::vector<Value> collect(Renderer& r, const Value& v) {
  if (v.t == VT::kList) return as_list(v).items;
  std::vector<Value> out;
  Cursor c = Cursor::over(v);
  Value item;
  while (c.next(r, item)) out.push_back(std::move(item));
  return out;
}

Value make_iter(std::string type_name, std::function<bool(Renderer&, Value&)> pull, int chain) {
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

// ---------------------------------------------------------------------------------------------
// Methods and globals by name

namespace {

/// Mutating dict/list methods: ImmutableSandboxedEnvironment answers an unsafe Undefined.
constexpr std::string_view kUnsafeDictMethods[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kUnsafeListMethods[] = {"append", "reverse", "insert", "sort", "extend", "remove"};

Value unsafe_attr(const Value& obj, std::string_view name) {
  return Value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(obj) +
                          "' object is unsafe.");
}

}  // namespace

Value make_func(FnKind kind, int id, std::string name, Value self) {
  auto f = std::make_shared<FuncObj>();
  f->kind = kind;
  f->id = id;
  f->name = std::move(name);
  f->self = std::move(self);
  return Value::object(VT::kFunc, std::move(f));
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
      if (m >= 0)
        return make_func(m >= kFirstStubStrMethod ? FnKind::kStub : FnKind::kStrMethod, m, "str." + std::string(name),
                         obj);
      return std::nullopt;
    }
    case VT::kDict: {
      const int m = lookup_name(kDictMethodNames, name);
      if (m >= 0)
        return make_func(m == static_cast<int>(DM::kFromkeys) ? FnKind::kStub : FnKind::kDictMethod, m,
                         "dict." + std::string(name), obj);
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
    default: return std::nullopt;
  }
}

// ---------------------------------------------------------------------------------------------
// The renderer: one per render() call; everything it mutates is its own.

Renderer::Renderer(const Lexer& lexer, const RenderLimits& limits, Value context)
    : lexer_(lexer), limits_(limits), context_(std::move(context)), saved_text_limit_(t_text_limit) {
  t_text_limit = limits.max_output_bytes;
}

/// Values form reference cycles only through the mutable objects (a namespace that holds itself,
/// a loop object stored in a namespace); clearing those that outlive the render frees them all.
Renderer::~Renderer() {
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

std::string Renderer::run(const Body& body) {
  root_ = std::make_shared<Frame>();
  std::string out;
  exec(body, root_, out);
  return out;
}

// ---- statements

Flow Renderer::exec(const Body& body, const FramePtr& frame, std::string& out) {
  for (const auto& s : body) {
    const Flow flow = exec_stmt(*s, frame, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Flow Renderer::exec_stmt(const Stmt& s, const FramePtr& frame, std::string& out) {
  tick(s.pos);
  switch (s.kind) {
    case SK::kText: append(out, s.text); return Flow::kNormal;
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
    case SK::kFor: return exec_for(s, frame, out);
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
    case SK::kBreak: return Flow::kBreak;
    case SK::kContinue: return Flow::kContinue;
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

Flow Renderer::exec_for(const Stmt& s, const FramePtr& frame, std::string& out) {
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

void Renderer::assign(const Target& t, const Value& v, const FramePtr& frame) {
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
    raise("ValueError", "not enough values to unpack (expected " + std::to_string(want) + ", got " +
                            std::to_string(items.size()) + ")");
  }
  for (std::size_t k = 0; k < want; ++k) assign(t.items[k], items[k], frame);
}

// ---- expressions

Value Renderer::lookup(const std::string& name, const FramePtr& frame) {
  for (const Frame* f = frame.get(); f != nullptr; f = f->parent.get()) {
    if (const Value* v = f->find(name)) return *v;
  }
  if (const Value* v = as_dict(context_).get_str(name)) return *v;
  const int g = lookup_name(kGlobalNames, name);
  if (g >= 0) return make_func(FnKind::kGlobal, g, name);
  return Value::undefined("'" + name + "' is undefined");
}

Value Renderer::eval(const Expr& e, const FramePtr& frame) {
  tick(e.pos);
  switch (e.kind) {
    case EK::kConst: return e.value;
    case EK::kName: return lookup(e.name, frame);
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
    case EK::kSlice: unsupported("a slice outside a subscript");
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
    case EK::kNot: return Value::boolean(!truthy(eval(*e.node, frame)));
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
        if (v.as_int() == std::numeric_limits<int64_t>::min())
          unsupported("an integer beyond 64 bits (Python would use a big int)");
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

Args Renderer::eval_args(const Expr& e, const FramePtr& frame) {
  Args a;
  a.pos.reserve(e.args.size());
  for (const auto& x : e.args) a.pos.push_back(eval(*x, frame));
  for (const auto& k : e.kwargs) a.kw.emplace_back(k.name, eval(*k.value, frame));
  return a;
}

Value Renderer::apply_filter(const Expr& e, const Value& v, const FramePtr& frame) {
  Args a = eval_args(e, frame);
  pos_ = e.pos;
  if (e.fn < 0) raise("TemplateRuntimeError", "No filter named '" + e.name + "' found.");
  return filter(e.fn, v, a);
}

/// A filter chain whose innermost subject is missing (filter blocks, `set x | f`).
Value Renderer::apply_filter_chain(const Expr& e, const Value& v, const FramePtr& frame) {
  const Value inner = e.node ? apply_filter_chain(*e.node, v, frame) : v;
  return apply_filter(e, inner, frame);
}

bool Renderer::compare(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::kEq: return py_eq(a, b);
    case CmpOp::kNe: return !py_eq(a, b);
    case CmpOp::kLt: return py_compare(a, b, "<") == -1;
    case CmpOp::kLe: {
      const int c = py_compare(a, b, "<=");
      return c == -1 || c == 0;
    }
    case CmpOp::kGt: return py_compare(a, b, ">") == 1;
    case CmpOp::kGe: {
      const int c = py_compare(a, b, ">=");
      return c == 1 || c == 0;
    }
    case CmpOp::kIn: return contains(b, a);
    case CmpOp::kNotIn: return !contains(b, a);
  }
  return false;
}

/// `item in container`.
bool Renderer::contains(const Value& container, const Value& item) {
  switch (container.t) {
    case VT::kStr:
      if (item.t != VT::kStr) type_error("'in <string>' requires string as left operand, not " + type_name(item));
      return container.text().find(item.text()) != std::string::npos;
    case VT::kDict: check_hashable(item); return as_dict(container).get(item) != nullptr;
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
    case VT::kIter: break;
    default: type_error("argument of type '" + type_name(container) + "' is not iterable");
  }
  Cursor c = Cursor::over(container);
  Value x;
  while (c.next(*this, x)) {
    if (py_eq(x, item)) return true;
  }
  return false;
}

// ---- attribute and item access (the sandbox's getattr/getitem)

Value Renderer::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (auto m = python_attr(obj, name)) return *m;
  switch (obj.t) {
    case VT::kDict:
      if (const Value* v = as_dict(obj).get_str(name)) return *v;
      break;
    case VT::kNamespace:
      if (const Value* v = as_ns(obj).attrs.get_str(name)) return *v;
      break;
    case VT::kLoop: return loop_attr(obj, name);
    default: break;
  }
  return missing_attr(obj, name);
}

Value Renderer::loop_attr(const Value& obj, std::string_view name) {
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

Value Renderer::slice(const Value& obj, const Expr& sl, const FramePtr& frame) {
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
    for (int64_t k = 0, j = si.start; k < si.count; ++k, j += si.step)
      r.push_back(l.items[static_cast<std::size_t>(j)]);
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
    default: break;
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

}  // namespace disagg::text::jinja_detail
