// chat_template.cc — the public API of chat_template.h: compile() lexes, parses and detects the
// content format; render() converts the context and runs a Renderer. The engine itself is in
// jinja/ (see jinja/jinja_internal.h for what each file holds).
//
// Internally failures are C++ exceptions (PyError, SyntaxFailure); the API catches them all and
// returns TemplateError, so none crosses the boundary.
#include "chat_template.h"

#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "jinja/jinja_internal.h"

namespace disagg::text {

using jinja_detail::Body;
using jinja_detail::detect_content_format;
using jinja_detail::from_json;
using jinja_detail::Lexer;
using jinja_detail::parse_template;
using jinja_detail::PyError;
using jinja_detail::Renderer;
using jinja_detail::SyntaxFailure;
using jinja_detail::Token;
using jinja_detail::valid_utf8;
using jinja_detail::Value;

namespace {

// ---------------------------------------------------------------------------------------------
// Formatting errors

std::string where(const Lexer& lexer, std::size_t pos, int& line, int& col) {
  const auto lc = lexer.location(pos);
  line = lc.first;
  col = lc.second;
  return "line " + std::to_string(line) + ":" + std::to_string(col) + ": ";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API

struct ChatTemplate::Program {
  std::unique_ptr<Lexer> lexer;
  Body body;
  ContentFormat content_format = ContentFormat::kString;
};

Expected<ChatTemplate, TemplateError> ChatTemplate::compile(std::string_view source) {
  try {
    if (!valid_utf8(source))
      return unexpected(TemplateError{"TemplateSyntaxError: the template is not valid UTF-8", 0, 0});
    auto program = std::make_shared<Program>();
    program->lexer = std::make_unique<Lexer>(source);
    std::vector<Token> tokens = program->lexer->run();
    program->body = parse_template(std::move(tokens), *program->lexer);
    program->content_format = detect_content_format(program->body);
    return ChatTemplate(std::move(program));
  } catch (const SyntaxFailure& f) {
    return unexpected(TemplateError{
        "line " + std::to_string(f.line) + ":" + std::to_string(f.column) + ": TemplateSyntaxError: " + f.message,
        f.line, f.column});
  } catch (const PyError& e) {
    return unexpected(TemplateError{e.type + ": " + e.message, 0, 0});
  } catch (const std::bad_alloc&) {
    return unexpected(TemplateError{"MemoryError: out of memory while compiling the template", 0, 0});
  } catch (const std::exception& e) {
    return unexpected(TemplateError{std::string("InternalError: ") + e.what(), 0, 0});
  }
}

Expected<std::string, TemplateError> ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render(context, RenderLimits{});
}

ContentFormat ChatTemplate::content_format() const {
  return program_ ? program_->content_format : ContentFormat::kString;
}

Expected<std::string, TemplateError> ChatTemplate::render(const nlohmann::ordered_json& context,
                                                          const RenderLimits& limits) const {
  if (!program_) return unexpected(TemplateError{"InternalError: an empty ChatTemplate", 0, 0});
  const Program& program = *program_;
  std::optional<Renderer> renderer;
  try {
    if (!context.is_object())
      return unexpected(TemplateError{"TypeError: the render context must be a JSON object", 0, 0});
    Value ctx = from_json(context, 1, limits.max_context_depth);
    renderer.emplace(*program.lexer, limits, std::move(ctx));
    return renderer->run(program.body);
  } catch (const PyError& e) {
    TemplateError err;
    std::string prefix;
    if (renderer) prefix = where(*program.lexer, renderer->pos(), err.line, err.column);
    err.message = prefix + e.type + ": " + e.message;
    return unexpected(std::move(err));
  } catch (const std::bad_alloc&) {
    return unexpected(TemplateError{"MemoryError: out of memory while rendering", 0, 0});
  } catch (const std::exception& e) {
    return unexpected(TemplateError{std::string("InternalError: ") + e.what(), 0, 0});
  }
}

}  // namespace disagg::text
