// jinja_internal.h — what the pieces of the chat-template engine share: Python's values, the
// lexer's tokens, the syntax tree, the runtime's scopes and iterators, and the Renderer's class.
// Internal to disagg_text; the interface is chat_template.h.
//
// The engine is one program split by concern so that no file is too large to read:
//   py_text.cc         Python 3.11's str semantics on UTF-8 (Unicode tables, case mapping, the
//                      helpers behind str's methods)
//   arithmetic.cc      numbers as Python prints and parses them; the binary operators, %-format
//   values.cc          type names, str()/repr(), truthiness and comparisons, from_json, json.dumps
//   lexer.cc           jinja2's lexer; parser.cc its grammar; content_format.cc vLLM's detection
//   renderer.cc        the renderer: statements, expressions, attribute and item access
//   calls.cc           macros, globals, and the methods of str, dict, list and loop
//   filters.cc         filters and tests
//   ../chat_template.cc  the public API: compile(), render(), content_format()
// Everything here is in jinja_detail: the pieces see one another and nothing else does. Small
// functions on hot paths are defined inline here, so that the split costs no calls on them.
//
// Internally failures are C++ exceptions (PyError, SyntaxFailure); the public API catches them all
// and returns TemplateError, so none crosses the boundary.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_template.h"
#include "disagg/utf8.h"

namespace disagg::text::jinja_detail {

// ---------------------------------------------------------------------------------------------
// Errors

/// A Python-level exception raised while rendering (TypeError, UndefinedError, ...).
struct PyError {
  std::string type;
  std::string message;
};

[[noreturn]] inline void raise(std::string type, std::string message) {
  throw PyError{std::move(type), std::move(message)};
}
[[noreturn]] inline void type_error(std::string message) {
  raise("TypeError", std::move(message));
}
[[noreturn]] inline void unsupported(std::string message) {
  raise("Unsupported", std::move(message) + " (outside the supported Jinja subset)");
}

/// A compile-time failure with its location.
struct SyntaxFailure {
  std::string message;
  int line;
  int column;
};

// ---------------------------------------------------------------------------------------------
// UTF-8 and Unicode (Python 3.11's str semantics): py_text.cc

// UTF-8 reading and writing: utf8.h, shared with the tokenizer.
inline bool valid_utf8(std::string_view s) {
  return is_valid_utf8(s);
}
inline char32_t next_cp(std::string_view s, std::size_t& i) {
  return next_code_point(s, i);
}

inline void put_cp(std::string& out, char32_t cp) {
  append_utf8(cp, out);
}

std::u32string to_u32(std::string_view s);
std::string from_u32(const char32_t* first, const char32_t* last);
std::string from_u32(const std::u32string& s);

/// len() of a Python str: code points.
inline std::size_t cp_count(std::string_view s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

/// str.isspace() of one code point (also Python's `\s` and the default of strip/split).
inline bool py_isspace(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

/// utf8proc's general category of a code point (a UTF8PROC_CATEGORY_* value).
int category(char32_t c);
/// Python's str.is*() of one code point.
bool py_isprintable(char32_t c);
bool py_islower_cp(char32_t c);
bool py_isupper_cp(char32_t c);
bool py_istitle_cp(char32_t c);
bool py_isalpha_cp(char32_t c);
bool py_isdecimal_cp(char32_t c);
bool py_isdigit_cp(char32_t c);
bool py_isnumeric_cp(char32_t c);
bool py_isalnum_cp(char32_t c);
/// The digit value of a decimal code point.
int decimal_value(char32_t c);
/// str.upper() of one code point, appended to out.
void append_upper(std::string& out, char32_t c);
bool is_ascii(std::string_view s);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_swapcase(std::string_view s);

// ---------------------------------------------------------------------------------------------
// Numbers as Python prints and parses them: arithmetic.cc

/// repr(float).
std::string float_repr(double d);
/// Python's int(text, base); nullopt where Python raises ValueError.
std::optional<int64_t> parse_py_int(std::string_view text, int base);
/// Python's float(text); nullopt where Python raises ValueError.
std::optional<double> parse_py_float(std::string_view text);

// ---------------------------------------------------------------------------------------------
// Values: the Python objects a template sees

class Renderer;
struct Frame;
struct Stmt;
using FramePtr = std::shared_ptr<Frame>;

enum class VT : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kStr,
  kList,
  kDict,
  kNamespace,
  kFunc,
  kLoop,
  kIter,
  kView
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
  int id = 0;        // which global or method
  std::string name;  // for messages
  Value self;        // the bound object of a method
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

inline Value make_list(std::vector<Value> items, SeqKind kind = SeqKind::kList) {
  auto l = std::make_shared<ListObj>();
  l->kind = kind;
  l->items = std::move(items);
  return Value::object(VT::kList, std::move(l));
}
inline Value make_tuple(std::vector<Value> items) {
  return make_list(std::move(items), SeqKind::kTuple);
}
inline const ListObj& as_list(const Value& v) {
  return static_cast<const ListObj&>(*v.o);
}
inline const DictObj& as_dict(const Value& v) {
  return static_cast<const DictObj&>(*v.o);
}
inline std::shared_ptr<DictObj> dict_ptr(const Value& v) {
  return std::static_pointer_cast<DictObj>(v.o);
}
inline NamespaceObj& as_ns(const Value& v) {
  return static_cast<NamespaceObj&>(*v.o);
}
inline FuncObj& as_func(const Value& v) {
  return static_cast<FuncObj&>(*v.o);
}
inline IterObj& as_iter(const Value& v) {
  return static_cast<IterObj&>(*v.o);
}
inline const ViewObj& as_view(const Value& v) {
  return static_cast<const ViewObj&>(*v.o);
}
inline Value make_dict(std::shared_ptr<DictObj> d) {
  return Value::object(VT::kDict, std::move(d));
}

std::string type_name(const Value& v);
/// jinja2's object_type_repr, for undefined-value messages.
std::string object_type_repr(const Value& v);
bool is_hashable(const Value& v);
/// Raises TypeError for unhashable keys, as Python does; other objects are refused as unsupported.
void check_hashable(const Value& v);

inline std::shared_ptr<DictObj> new_dict() {
  return std::make_shared<DictObj>();
}

// ---- str() and repr()

/// The longest text str()/repr()/json.dumps may build: the render's byte limit (values.cc; the
/// Renderer sets it for its thread). constinit: no dynamic initialization, so no TLS wrapper.
extern constinit thread_local std::size_t t_text_limit;

/// repr(str): Python's quote choice and escapes; printable non-ASCII stays as is.
void str_repr_into(std::string& out, std::string_view s);
/// str(v) into out. Objects that Python prints with a memory address are refused.
void str_into(std::string& out, const Value& v, int depth);
void repr_into(std::string& out, const Value& v, int depth);

// ---- truthiness, equality, ordering

inline bool truthy(const Value& v) {
  switch (v.t) {
    case VT::kUndefined:
    case VT::kNone: return false;
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

[[noreturn]] void undefined_error(const Value& v);
/// Python's three-way ordering for <, <=, >, >=; TypeError for unorderable operands.
int py_compare(const Value& a, const Value& b, const char* op);
bool py_lt(const Value& a, const Value& b);

// ---- conversion from JSON (the render context)

Value from_json(const nlohmann::ordered_json& j, int depth, int max_depth);

// ---- json.dumps, as transformers' tojson calls it

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};

void json_into(std::string& out, const Value& v, const JsonOptions& o, int level, int depth);

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

/// The lexer (lexer.cc). The program keeps it after compile(): it maps byte offsets to the line
/// and column that errors name.
class Lexer {
 public:
  explicit Lexer(std::string_view raw);

  std::vector<Token> run();

  /// 1-based line and column of a byte offset.
  std::pair<int, int> location(std::size_t pos) const;

 private:
  [[noreturn]] void fail(std::size_t pos, std::string message) const;
  void emit_data(std::string text, std::size_t pos);
  static void apply_strip(std::string& text, char sign, bool lstrip_applies, bool line_starting);
  static bool all_ws(std::string_view s);
  static void rstrip_ws(std::string& s);
  std::size_t ws_run(std::size_t pos) const;
  bool at(std::size_t pos, std::string_view s) const;
  bool match_raw_begin(std::size_t p, std::size_t& end) const;
  std::size_t lex_raw_body(std::size_t pos, bool& line_starting);
  std::size_t lex_comment(std::size_t q, std::size_t start, bool& line_starting);
  static bool is_digit(char c);
  static bool is_name_char(char c);
  std::size_t digits_us(std::size_t i, bool (*digit)(char) = is_digit) const;
  std::size_t match_float(std::size_t i) const;
  std::size_t match_int(std::size_t i, int64_t& value) const;
  int64_t int_value(const std::string& digits, int base, std::size_t pos) const;
  std::string decode_string(std::string_view body, std::size_t pos) const;
  std::size_t lex_tag(std::size_t pos, bool block, bool& line_starting);

  std::string src_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> tokens_;
};

// ---------------------------------------------------------------------------------------------
// Syntax tree

enum class EK : uint8_t {
  kConst,
  kName,
  kGetattr,
  kGetitem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNeg,
  kPos,
  kNot,
  kBin,
  kCompare,
  kAnd,
  kOr,
  kCond,
  kList,
  kTuple,
  kDict,
  kConcat
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
  int fn = -1;    // resolved filter or test
  int depth = 1;  // height of this subtree (bounded by the parser)
};

struct Target {
  std::string name;  // a plain name when !tuple
  bool tuple = false;
  std::vector<Target> items;
};

enum class SK : uint8_t {
  kText,
  kPrint,
  kIf,
  kFor,
  kSet,
  kSetNs,
  kSetBlock,
  kMacro,
  kBreak,
  kContinue,
  kGeneration,
  kWith,
  kFilterBlock
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  SK kind = SK::kText;
  std::size_t pos = 0;
  std::string text;            // kText; kMacro's name; kSetNs's attribute
  std::vector<ExprPtr> exprs;  // kPrint's items; kIf's tests, one per branch
  std::vector<Body> bodies;    // kIf's branch bodies (one more when there is an else)
  ExprPtr expr;                // kFor's iterable; kSet's value; kSetNs's namespace
  ExprPtr cond;                // kFor's `if` filter
  Target target;               // kFor, kSet, kSetBlock
  Body body, else_body;
  std::vector<std::string> params;  // kMacro
  std::vector<ExprPtr> defaults;    // kMacro: defaults of the last params
  bool uses_varargs = false, uses_kwargs = false;
  std::vector<Target> targets;  // kWith
  std::vector<ExprPtr> values;  // kWith
  ExprPtr filter;               // kSetBlock/kFilterBlock: a filter chain applied to the body
  bool ns_target = false;       // kSetBlock onto a namespace attribute (name in target.name)
};

// Filters and tests: jinja2's names, and which this renderer implements.
enum class F : int {
  kAbs,
  kAttr,
  kBatch,
  kCapitalize,
  kCenter,
  kCount,
  kD,
  kDefault,
  kDictsort,
  kE,
  kEscape,
  kFirst,
  kFloat,
  kForceescape,
  kFormat,
  kIndent,
  kInt,
  kJoin,
  kLast,
  kLength,
  kList,
  kLower,
  kItems,
  kMap,
  kMin,
  kMax,
  kReject,
  kRejectattr,
  kReplace,
  kReverse,
  kRound,
  kSafe,
  kSelect,
  kSelectattr,
  kSlice,
  kSort,
  kString,
  kSum,
  kTitle,
  kTrim,
  kTruncate,
  kUnique,
  kUpper,
  kTojson,
  kWordcount,
  // jinja2 has these; they need Python machinery this renderer does not carry.
  kFilesizeformat,
  kGroupby,
  kPprint,
  kRandom,
  kStriptags,
  kUrlencode,
  kUrlize,
  kWordwrap,
  kXmlattr,
  kCountOf
};
inline constexpr int kFirstUnsupportedFilter = static_cast<int>(F::kFilesizeformat);
inline constexpr std::array<std::string_view, static_cast<std::size_t>(F::kCountOf)> kFilterNames = {
    "abs",       "attr",
    "batch",     "capitalize",
    "center",    "count",
    "d",         "default",
    "dictsort",  "e",
    "escape",    "first",
    "float",     "forceescape",
    "format",    "indent",
    "int",       "join",
    "last",      "length",
    "list",      "lower",
    "items",     "map",
    "min",       "max",
    "reject",    "rejectattr",
    "replace",   "reverse",
    "round",     "safe",
    "select",    "selectattr",
    "slice",     "sort",
    "string",    "sum",
    "title",     "trim",
    "truncate",  "unique",
    "upper",     "tojson",
    "wordcount", "filesizeformat",
    "groupby",   "pprint",
    "random",    "striptags",
    "urlencode", "urlize",
    "wordwrap",  "xmlattr"};

enum class T : int {
  kOdd,
  kEven,
  kDivisibleby,
  kDefined,
  kUndefined,
  kFilter,
  kTest,
  kNone,
  kBoolean,
  kFalse,
  kTrue,
  kInteger,
  kFloat,
  kLower,
  kUpper,
  kString,
  kMapping,
  kNumber,
  kSequence,
  kIterable,
  kCallable,
  kSameas,
  kEscaped,
  kIn,
  kEq,
  kEq2,
  kEqualto,
  kNe,
  kNe2,
  kGt,
  kGt2,
  kGreaterthan,
  kGe,
  kGe2,
  kLt,
  kLt2,
  kLessthan,
  kLe,
  kLe2,
  kCountOf
};
inline constexpr std::array<std::string_view, static_cast<std::size_t>(T::kCountOf)> kTestNames = {
    "odd",     "even",   "divisibleby", "defined",  "undefined", "filter", "test",    "none",
    "boolean", "false",  "true",        "integer",  "float",     "lower",  "upper",   "string",
    "mapping", "number", "sequence",    "iterable", "callable",  "sameas", "escaped", "in",
    "==",      "eq",     "equalto",     "!=",       "ne",        ">",      "gt",      "greaterthan",
    "ge",      ">=",     "<",           "lt",       "lessthan",  "<=",     "le"};

template <std::size_t N>
int lookup_name(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::size_t k = 0; k < N; ++k) {
    if (names[k] == name) return static_cast<int>(k);
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Parser (parser.cc) and content format detection (content_format.cc)

/// Parses the lexer's tokens into the template's body: jinja2's grammar and precedence, its
/// compile-time checks (unknown filters and tests), and the nesting limits. Throws SyntaxFailure.
Body parse_template(std::vector<Token> tokens, const Lexer& lexer);

/// vLLM's `_detect_content_format` on the parsed template (see ChatTemplate::content_format()).
ContentFormat detect_content_format(const Body& root);

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

inline FramePtr child_frame(const FramePtr& parent) {
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
std::vector<Value> bind(std::string_view fname, const Args& a, std::initializer_list<Param> params);

/// Counts `units` of work against the render's step budget (defined after Renderer).
inline void charge(Renderer& r, uint64_t units);

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
      case Mode::kKeys:
      case Mode::kValues:
      case Mode::kItems: {
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

std::vector<Value> collect(Renderer& r, const Value& v);
Value make_iter(std::string type_name, std::function<bool(Renderer&, Value&)> pull, int chain = 0);
/// A lazy iterator over the items of a vector (reversed(), generators built from lists).
Value iter_of(std::string type_name, std::vector<Value> items);

/// jinja2's LoopContext: index/first/last/length/previtem/nextitem/cycle/changed, pulling the
/// iterable lazily (through the loop's `if` filter) and looking ahead only when asked.
struct LoopObj : Obj {
  Cursor src;
  std::function<bool(Renderer&, const Value&)> accept;  // the loop filter, if any
  std::vector<Value> ahead;                             // pulled but not yet reached (front = next)
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
inline LoopObj& as_loop(const Value& v) {
  return static_cast<LoopObj&>(*v.o);
}

// ---------------------------------------------------------------------------------------------
// Arithmetic and formatting: arithmetic.cc

/// a * b; an integer beyond 64 bits is refused as unsupported.
int64_t mul_i(int64_t a, int64_t b);
void check_size(std::size_t bytes, std::size_t limit);
std::string html_escape(std::string_view s);
/// str(v), for values without a renderer-dependent str (all but loop objects).
std::string py_str_value(const Value& v);
/// printf-style formatting (`str % args`, `|format`), as Python's.
std::string percent_format(const std::string& fmt, const Value& rhs);
/// A binary operator with Python's semantics; strings and lists may grow to `limit` bytes.
Value binop(BinOp op, const Value& a, const Value& b, std::size_t limit);

// ---------------------------------------------------------------------------------------------
// Python str methods on UTF-8 text: py_text.cc

/// Python slice bounds for a sequence of `len` items (PySlice_AdjustIndices).
struct SliceIdx {
  int64_t start, stop, step, count;
};
SliceIdx slice_indices(int64_t len, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
                       const std::optional<int64_t>& step_opt);
/// The start/end arguments of find/count/startswith, as code point offsets clamped like Python.
std::pair<int64_t, int64_t> span_args(int64_t len, const Value& start, const Value& end);
std::string py_strip(std::string_view s, const Value& chars, bool left, bool right);
std::vector<std::string> py_split_ws(std::string_view s, int64_t maxsplit);
std::vector<std::string> py_rsplit_ws(std::string_view s, int64_t maxsplit);
std::vector<std::string> py_split_sep(std::string_view s, std::string_view sep, int64_t maxsplit);
std::vector<std::string> py_rsplit_sep(std::string_view s, std::string_view sep, int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count,
                       std::size_t limit);
/// str.center/ljust/rjust with a one-code-point fill.
std::string py_pad(std::string_view s, int64_t width, std::string_view fill, int mode);

// ---------------------------------------------------------------------------------------------
// Methods and globals by name

enum class G : int { kRange, kDict, kNamespace, kJoiner, kCycler, kLipsum, kRaiseException, kStrftimeNow, kCountOf };
inline constexpr std::array<std::string_view, static_cast<std::size_t>(G::kCountOf)> kGlobalNames = {
    "range", "dict", "namespace", "joiner", "cycler", "lipsum", "raise_exception", "strftime_now"};

enum class SM : int {
  kStrip,
  kLstrip,
  kRstrip,
  kSplit,
  kRsplit,
  kSplitlines,
  kStartswith,
  kEndswith,
  kUpper,
  kLower,
  kTitle,
  kCapitalize,
  kSwapcase,
  kReplace,
  kFind,
  kRfind,
  kIndex,
  kRindex,
  kCount,
  kJoin,
  kIsdigit,
  kIsalpha,
  kIsalnum,
  kIsspace,
  kIsupper,
  kIslower,
  kIsdecimal,
  kIsnumeric,
  kIstitle,
  kIsascii,
  kIsprintable,
  kCenter,
  kLjust,
  kRjust,
  kZfill,
  kPartition,
  kRpartition,
  kRemoveprefix,
  kRemovesuffix,
  kFormat,
  // str methods Python has and this renderer does not implement: defined, but an error when called
  kCasefold,
  kEncode,
  kExpandtabs,
  kFormatMap,
  kIsidentifier,
  kMaketrans,
  kTranslate,
  kCountOf
};
inline constexpr int kFirstStubStrMethod = static_cast<int>(SM::kCasefold);
inline constexpr std::array<std::string_view, static_cast<std::size_t>(SM::kCountOf)> kStrMethodNames = {
    "strip",    "lstrip",  "rstrip",     "split",      "rsplit",       "splitlines",   "startswith",   "endswith",
    "upper",    "lower",   "title",      "capitalize", "swapcase",     "replace",      "find",         "rfind",
    "index",    "rindex",  "count",      "join",       "isdigit",      "isalpha",      "isalnum",      "isspace",
    "isupper",  "islower", "isdecimal",  "isnumeric",  "istitle",      "isascii",      "isprintable",  "center",
    "ljust",    "rjust",   "zfill",      "partition",  "rpartition",   "removeprefix", "removesuffix", "format",
    "casefold", "encode",  "expandtabs", "format_map", "isidentifier", "maketrans",    "translate"};

enum class DM : int { kGet, kItems, kKeys, kValues, kCopy, kFromkeys, kCountOf };
inline constexpr std::array<std::string_view, static_cast<std::size_t>(DM::kCountOf)> kDictMethodNames = {
    "get", "items", "keys", "values", "copy", "fromkeys"};

enum class LM : int { kIndex, kCount, kCopy, kPop, kClear, kCountOf };
inline constexpr std::array<std::string_view, static_cast<std::size_t>(LM::kCountOf)> kListMethodNames = {
    "index", "count", "copy", "pop", "clear"};

enum class LoopM : int { kCycle, kChanged };

Value make_func(FnKind kind, int id, std::string name, Value self = {});
Value missing_attr(const Value& obj, std::string_view name);
/// Python's attribute lookup on our objects: methods first (what getattr() finds).
std::optional<Value> python_attr(const Value& obj, std::string_view name);

// ---------------------------------------------------------------------------------------------
// The renderer: one per render() call; everything it mutates is its own. Its members are defined
// in renderer.cc (statements, expressions, attribute and item access), calls.cc (macros, globals,
// methods) and filters.cc (filters and tests); the small ones used everywhere are inline here.

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const Lexer& lexer, const RenderLimits& limits, Value context);

  /// Values form reference cycles only through the mutable objects (a namespace that holds itself,
  /// a loop object stored in a namespace); clearing those that outlive the render frees them all.
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  std::string run(const Body& body);

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

  Value call_filter_by_name(const Value& name, const Value& v, const Args& a);
  bool call_test_by_name(const Value& name, const Value& v, const Args& a);
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

  // ---- statements (renderer.cc)

  Flow exec(const Body& body, const FramePtr& frame, std::string& out);
  Flow exec_stmt(const Stmt& s, const FramePtr& frame, std::string& out);
  Flow exec_for(const Stmt& s, const FramePtr& frame, std::string& out);
  void assign(const Target& t, const Value& v, const FramePtr& frame);

  // ---- expressions (renderer.cc)

  Value lookup(const std::string& name, const FramePtr& frame);
  Value eval(const Expr& e, const FramePtr& frame);
  Args eval_args(const Expr& e, const FramePtr& frame);
  Value apply_filter(const Expr& e, const Value& v, const FramePtr& frame);
  /// A filter chain whose innermost subject is missing (filter blocks, `set x | f`).
  Value apply_filter_chain(const Expr& e, const Value& v, const FramePtr& frame);
  bool compare(CmpOp op, const Value& a, const Value& b);
  /// `item in container`.
  bool contains(const Value& container, const Value& item);

  // ---- attribute and item access, the sandbox's getattr/getitem (renderer.cc)

  Value getattr(const Value& obj, const std::string& name);
  Value loop_attr(const Value& obj, std::string_view name);
  Value slice(const Value& obj, const Expr& sl, const FramePtr& frame);

  // ---- calls (calls.cc)

  Value invoke(const Value& callee, Args& a);
  Value call_macro(FuncObj& fn, Args& a);
  Value call_global(FuncObj& fn, Args& a);
  Value loop_method(FuncObj& fn, Args& a);
  Value dict_method(FuncObj& fn, Args& a);
  Value list_method(FuncObj& fn, Args& a);
  Value str_method(FuncObj& fn, Args& a);
  /// str.format() through the sandbox.
  std::string str_format(const std::string& fmt, const Args& a);

  // ---- filters and tests (filters.cc)

  Value attr_getter_item(const Value& item, const std::vector<Value>& parts);
  int64_t length(const Value& v);
  /// A lazy generator that applies `fn` to each item of `src` (None from fn: skip the item).
  Value lazy_map(const Value& src, std::function<std::optional<Value>(Renderer&, const Value&)> fn);
  Value select_or_reject(const Value& v, const Args& a, bool select, bool lookup_attr);
  Value map_filter(const Value& v, const Args& a);
  std::vector<Value> sorted_values(std::vector<Value> items, bool reverse,
                                   const std::function<Value(const Value&)>& key);
  Value filter(int id, const Value& v, const Args& a);
  bool test(int id, const Value& v, const Args& a);

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

inline void charge(Renderer& r, uint64_t units) {
  r.charge(units);
}

}  // namespace disagg::text::jinja_detail
