// parser.cc — jinja2's grammar and precedence (parser.py), statement by statement, into the syntax
// tree of jinja_internal.h; jinja2's compile-time refusal of unknown filters and tests. Apart from
// the lexer and the renderer: it runs once per compile(), and only parse_template() is shared.
#include "jinja_internal.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::text::jinja_detail {

// ---------------------------------------------------------------------------------------------
// Parser: jinja2's grammar and precedence (parser.py), statement by statement.

namespace {

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
      if (++p_.depth_ > kMaxParseDepth)
        p_.fail("the template nests expressions or blocks more than " + std::to_string(kMaxParseDepth) + " levels");
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
        if (++p_.block_depth_ > kMaxBlockDepth)
          p_.fail("the template nests blocks more than " + std::to_string(kMaxBlockDepth) + " levels");
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
    if (!to_target(*e, t))
      fail_at(pos, "can't assign to '" +
                       std::string(e->kind == EK::kConst  ? "const"
                                   : e->kind == EK::kList ? "list"
                                                          : "expression") +
                       "'");
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
      if (t.type == Tok::kOp &&
          (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=")) {
        ops.push_back(t.text == "=="   ? CmpOp::kEq
                      : t.text == "!=" ? CmpOp::kNe
                      : t.text == "<"  ? CmpOp::kLt
                      : t.text == "<=" ? CmpOp::kLe
                      : t.text == ">"  ? CmpOp::kGt
                                       : CmpOp::kGe);
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
      const BinOp op = cur_op("*")    ? BinOp::kMul
                       : cur_op("/")  ? BinOp::kDiv
                       : cur_op("//") ? BinOp::kFloorDiv
                                      : BinOp::kMod;
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
      if (cur_op("*") || cur_op("**"))
        fail("*args and **kwargs in calls are not supported (outside the supported Jinja subset)");
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
      if (e->fn >= kFirstUnsupportedFilter)
        fail_at(pos, "the '" + name + "' filter is not supported (outside the supported Jinja subset)");
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
        case SK::kGeneration: validate(s.body, false); break;
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
      if (expr_loads(s->expr.get(), name) || expr_loads(s->cond.get(), name) || expr_loads(s->filter.get(), name))
        return true;
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

}  // namespace

Body parse_template(std::vector<Token> tokens, const Lexer& lexer) {
  Parser parser(std::move(tokens), lexer);
  return parser.parse();
}

}  // namespace disagg::text::jinja_detail
