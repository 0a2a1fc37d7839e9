// chat_template.h — Hugging Face chat templates (a Jinja subset), rendered byte for byte as
// transformers renders them, which is what vLLM serves.
//
// The router computes the exact prompt vLLM will see for an OpenAI chat request so that it can
// tokenize it and route by prefix-cache hits. vLLM renders with transformers'
// `apply_chat_template`: Python jinja2's ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, the loopcontrols extension, the `{% generation %}` tag (its body renders as is),
// a `tojson` filter that is `json.dumps(x, ensure_ascii=False, indent=..., separators=...,
// sort_keys=...)`, and the globals `raise_exception(message)` and `strftime_now(format)`. This
// renderer reproduces that environment, including Python's value semantics: str() of True/None,
// float repr (1.0, 1e-05), dict and list repr, code-point string indexing and slicing, Python's
// str methods, and jinja2's default Undefined.
//
// Supported: text, `{{ }}`, `{# #}`, `{% raw %}`, whitespace control (`-`, `+`), if/elif/else,
// for (tuple targets, `if` filter, else, loop.index/index0/revindex/first/last/length/previtem/
// nextitem/cycle/changed, break/continue), set (names, tuples, namespace attributes, block set
// with filters), macro (defaults, varargs/kwargs), with, filter blocks, print, generation; all
// jinja2 operators and literals, `%`-formatting and str.format without format specs; jinja2's
// tests and filters (abs attr batch capitalize center count d default dictsort e escape first
// float forceescape format indent int items join last length list lower map max min reject
// rejectattr replace reverse round safe select selectattr slice sort string sum title tojson trim
// truncate unique upper wordcount); str, dict and list methods; the globals range, dict,
// namespace, joiner, raise_exception and strftime_now. Lazy generators (map, select, ...) are
// lazy and single-use as in Python.
// Unsupported (a compile error naming the construct and its line, never a silently different
// render): extends/include/import/block/call/autoescape tags, recursive loops, `*args`/`**kwargs`
// in calls, non-ASCII identifiers, `\N{...}` escapes, and the filters groupby, pprint, random,
// striptags, urlencode, urlize, wordwrap, xmlattr, filesizeformat.
// Known limits (a render error, not a different render): integers beyond 64 bits (Python has big
// ints); printing what Python prints with a memory address (generators, methods, joiner());
// calling cycler()/lipsum() or a macro after the scope that defined it ended; str.format specs;
// slicing a constant that is not a sequence (`{{ none[1:] }}`): jinja2 folds that to Undefined at
// compile time, this renderer raises the TypeError jinja2 raises for the same slice of a variable.
// Unicode properties (case mapping, isprintable for repr, isspace for strip/split) follow Python
// 3.11's tables (utf8proc plus generated exception tables).
//
// Contract:
//   - compile() parses once; the ChatTemplate is immutable afterwards.
//   - render() is const and thread-safe: every call owns its state; the shared program is only
//     read. Copies of a ChatTemplate share the program.
//   - Neither throws: failures come back as TemplateError with the template line and column where
//     known. raise_exception(message) in a template yields a TemplateError whose message contains
//     `message`.
//   - Templates and contexts come from users, so recursion and work are bounded (RenderLimits and
//     the parser's nesting limit): exceeding a bound is an error that names it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "disagg/expected.h"

namespace disagg::text {

/// Why a template did not compile or render.
struct TemplateError {
  /// "line L:C: <kind>: <what>" when the location is known, else "<kind>: <what>".
  std::string message;
  /// 1-based template line and column of the construct at fault; 0 when unknown.
  int line = 0;
  int column = 0;
};

/// Bounds on one render; the defaults are far above what real chat templates need.
struct RenderLimits {
  /// Largest rendered prompt, and largest string any expression may build.
  std::size_t max_output_bytes = std::size_t{64} << 20;
  /// Evaluation steps (expression nodes, statements, loop iterations) per render.
  std::uint64_t max_steps = 50'000'000;
  /// Nested macro calls (and generation blocks).
  int max_call_depth = 100;
  /// Nesting of arrays and objects in the context.
  int max_context_depth = 128;
};

/// How vLLM hands message content to a template (vLLM's `--chat-template-content-format auto`):
/// "string" joins a message's text parts into one string; "openai" passes the parts as a list of
/// {"type": ...} objects, for templates that loop over a message's content.
enum class ContentFormat : std::uint8_t { kString, kOpenAI };

/// A compiled chat template.
class ChatTemplate {
 public:
  /// Parses `source` (UTF-8). Errors: invalid UTF-8, jinja2 syntax errors, unknown filters or
  /// tests (as jinja2 reports them), and constructs outside the supported subset.
  static Expected<ChatTemplate, TemplateError> compile(std::string_view source);

  /// Renders with `context` as the template's variables, as transformers passes them: `messages`,
  /// `tools` (null when none), `documents`, `add_generation_prompt`, `bos_token`, `eos_token` and
  /// any other keyword arguments (`enable_thinking`, `date_string`, ...). `context` must be an
  /// object; a variable it lacks is jinja2's Undefined. Thread-safe.
  Expected<std::string, TemplateError> render(const nlohmann::ordered_json& context) const;
  Expected<std::string, TemplateError> render(const nlohmann::ordered_json& context, const RenderLimits& limits) const;

  /// The content format vLLM detects for this template, computed once at compile from the parsed
  /// template as vLLM's `_detect_content_format` (vllm/renderers/hf.py) computes it from jinja2's
  /// AST: "openai" when some `for` loop iterates `<m>['content']` or `<m>.content` (also through
  /// filters, tests and slices), where `<m>` is the target of a loop over `messages` or over a
  /// name assigned from it with `set` (transitively, also through filters, tests and slices).
  /// A tuple loop target or a non-name `set` target on that path makes vLLM's analysis fail, and
  /// it then falls back to "string", as this does.
  ContentFormat content_format() const;

  struct Program;  // the parsed template (defined in chat_template.cc)

 private:
  explicit ChatTemplate(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace disagg::text
