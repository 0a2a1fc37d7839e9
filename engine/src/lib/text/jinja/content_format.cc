// content_format.cc — vLLM's content format detection on the parsed template. Apart from the
// parser because it is vLLM's analysis, not jinja2's: it reads the finished syntax tree once per
// compile(), and only detect_content_format() is shared.
#include "jinja_internal.h"

#include <algorithm>
#include <string>
#include <vector>

namespace disagg::text::jinja_detail {

// ---------------------------------------------------------------------------------------------
// Content format detection: vLLM's `_detect_content_format` (vllm/renderers/hf.py, checked at
// vllm-project/vllm 02e64f58 and e7ad92e5; the functions are the same in both) run on this
// parser's AST instead of jinja2's. jinja2 node kinds map one to one: Name (always a load in an
// expression), Getattr, Getitem (a Const or a Slice argument), Filter, Test, Assign (`set` with
// `=`; a block set is an AssignBlock, which vLLM does not look at), For. vLLM walks nodes with
// jinja2's find_all, a pre-order walk that visits a statement before its bodies, bodies in
// source order, and a for loop's body before its else; the walk below does the same, so the
// first content loop it meets is the one vLLM meets.

namespace {

class ContentFormatDetector {
 public:
  explicit ContentFormatDetector(const Body& root) { collect(root); }

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
        case SK::kSetNs: assigns_.push_back(&s); break;
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
        case SK::kGeneration: collect(s.body); break;
        default: break;
      }
    }
  }

  std::vector<const Stmt*> assigns_;  // `set` statements, in jinja2's find_all order
  std::vector<const Stmt*> loops_;    // `for` statements, in jinja2's find_all order
};

}  // namespace

ContentFormat detect_content_format(const Body& root) {
  return ContentFormatDetector(root).detect();
}

}  // namespace disagg::text::jinja_detail
