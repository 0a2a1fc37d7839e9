// `disagg-engine render-chat`: NDJSON chat requests in, NDJSON prompts out (see text_command.h).
//
// Each request line is the template's context minus the special tokens, as transformers builds
// it for apply_chat_template: {"messages": [...], "tools": [...] or null, "add_generation_prompt":
// true, "enable_thinking": false, ...}. The answer is {"prompt": "..."} or {"error": "..."}.
// bos_token and eos_token come from tokenizer_config.json unless the request sets them.
// With --openai, each line is an OpenAI chat completions request body instead, prepared as vLLM
// prepares it (model_text.h: chat_template_context), and the answer also says the content format
// vLLM detects for the template: {"prompt": "...", "content_format": "string"|"openai"}.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat_template.h"
#include "disagg/json_depth.h"
#include "model_text.h"
#include "cmd/text_command.h"

namespace disagg::text {
namespace {

constexpr std::string_view kHelp =
    "usage: disagg-engine render-chat [--tokenizer DIR] [--template FILE]   (one or both)\n"
    "  Reads NDJSON chat requests on stdin (the template's context: messages, tools,\n"
    "  add_generation_prompt and any other keyword arguments) and writes one NDJSON answer\n"
    "  per line: {\"prompt\": \"...\"} or {\"error\": \"...\"}. Rendering follows transformers'\n"
    "  apply_chat_template (jinja2 with trim_blocks, lstrip_blocks, loopcontrols, tojson,\n"
    "  raise_exception, strftime_now).\n"
    "  --tokenizer DIR   read DIR/tokenizer_config.json: chat_template (a string, or a list of\n"
    "                    {name, template}: \"default\", or \"tool_use\" when a request has tools),\n"
    "                    else DIR/chat_template.jinja; bos_token and eos_token\n"
    "  --template FILE   take the template text from FILE instead\n"
    "  --openai          each line is an OpenAI chat request body, prepared as vLLM prepares it\n"
    "                    (content parts, tool calls, tools, developer role); answers add\n"
    "                    \"content_format\": \"string\" or \"openai\", as vLLM detects it\n";

/// Deepest nesting a request line may have (tool schemas nest deeper than messages).
constexpr std::size_t kMaxLineDepth = 128;

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return static_cast<bool>(in) || in.eof();
}

/// A special token in tokenizer_config.json: a string or an AddedToken object {"content": ...}.
std::optional<std::string> token_text(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    const auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

struct Templates {
  std::optional<ChatTemplate> default_template;
  std::optional<ChatTemplate> tool_use;  // transformers picks it when the request has tools
  bool default_developer = false;        // developer_role_in_template() of each source
  bool tool_use_developer = false;
};

bool compile_into(std::optional<ChatTemplate>& slot, bool& developer, const std::string& source,
                  const std::string& what) {
  auto compiled = ChatTemplate::compile(source);
  if (!compiled) {
    std::cerr << "render-chat: the chat template " << what << " does not compile: " << compiled.error().message << "\n";
    return false;
  }
  slot.emplace(std::move(compiled.value()));
  developer = developer_role_in_template(source);
  return true;
}

void write_line(const nlohmann::json& answer) {
  std::cout << answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

}  // namespace

int run_render_chat_command(int argc, char** argv) {
  std::string dir;
  std::string template_file;
  bool openai_requests = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kHelp;
      return 0;
    }
    if (arg == "--tokenizer" && i + 1 < argc) {
      dir = argv[++i];
    } else if (arg == "--template" && i + 1 < argc) {
      template_file = argv[++i];
    } else if (arg == "--openai") {
      openai_requests = true;
    } else {
      std::cerr << "render-chat: unknown or incomplete flag '" << arg << "'\n" << kHelp;
      return 2;
    }
  }
  if (dir.empty() && template_file.empty()) {
    std::cerr << "render-chat: --tokenizer DIR or --template FILE is required\n" << kHelp;
    return 2;
  }

  try {
    Templates templates;
    std::optional<std::string> bos;
    std::optional<std::string> eos;
    if (!dir.empty()) {
      std::string text;
      const std::string path = dir + "/tokenizer_config.json";
      if (!read_file(path, text)) {
        std::cerr << "render-chat: cannot read " << path << "\n";
        return 1;
      }
      const nlohmann::json config = nlohmann::json::parse(text, nullptr, false);
      if (config.is_discarded() || !config.is_object()) {
        std::cerr << "render-chat: " << path << " is not a JSON object\n";
        return 1;
      }
      bos = token_text(config, "bos_token");
      eos = token_text(config, "eos_token");
      if (template_file.empty()) {
        const auto ct = config.find("chat_template");
        if (ct != config.end() && ct->is_string()) {
          if (!compile_into(templates.default_template, templates.default_developer, ct->get<std::string>(),
                            "in " + path))
            return 1;
        } else if (ct != config.end() && ct->is_array()) {
          for (const auto& entry : *ct) {
            if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
                !entry["name"].is_string() || !entry["template"].is_string()) {
              continue;
            }
            const std::string name = entry["name"].get<std::string>();
            if (name == "default" && !compile_into(templates.default_template, templates.default_developer,
                                                   entry["template"].get<std::string>(), "'default' in " + path)) {
              return 1;
            }
            if (name == "tool_use" && !compile_into(templates.tool_use, templates.tool_use_developer,
                                                    entry["template"].get<std::string>(), "'tool_use' in " + path)) {
              return 1;
            }
          }
        } else {
          std::string jinja;
          if (read_file(dir + "/chat_template.jinja", jinja) &&
              !compile_into(templates.default_template, templates.default_developer, jinja,
                            "in " + dir + "/chat_template.jinja")) {
            return 1;
          }
        }
        if (!templates.default_template && !templates.tool_use) {
          std::cerr << "render-chat: " << path << " has no chat_template\n";
          return 1;
        }
      }
    }
    if (!template_file.empty()) {
      std::string text;
      if (!read_file(template_file, text)) {
        std::cerr << "render-chat: cannot read " << template_file << "\n";
        return 1;
      }
      if (!compile_into(templates.default_template, templates.default_developer, text, "in " + template_file)) return 1;
    }

    std::ios::sync_with_stdio(false);
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      if (!json_depth_within(line, kMaxLineDepth)) {
        write_line({{"error", json_depth_error(kMaxLineDepth)}});
        continue;
      }
      nlohmann::ordered_json request = nlohmann::ordered_json::parse(line, nullptr, false);
      if (request.is_discarded() || !request.is_object()) {
        write_line({{"error", "the request is not a JSON object"}});
        continue;
      }
      const auto tools = request.find("tools");
      // Template contexts carry tools as transformers gets them; OpenAI requests as vLLM reads them.
      const bool has_tools = openai_requests ? request_has_tools(request) : tools != request.end() && !tools->is_null();
      const bool use_tool_template = has_tools && templates.tool_use;
      const ChatTemplate* t = use_tool_template            ? &*templates.tool_use
                              : templates.default_template ? &*templates.default_template
                                                           : &*templates.tool_use;
      if (openai_requests) {
        const char* format = t->content_format() == ContentFormat::kOpenAI ? "openai" : "string";
        const auto fail = [&](const std::string& message) {
          write_line({{"error", message}, {"content_format", format}});
        };
        const bool developer = templates.tool_use && t == &*templates.tool_use ? templates.tool_use_developer
                                                                               : templates.default_developer;
        auto built = chat_template_context(request, *t, developer);
        if (!built) {
          fail(built.error());
          continue;
        }
        nlohmann::ordered_json context = nlohmann::ordered_json::object();
        if (bos) context["bos_token"] = *bos;
        if (eos) context["eos_token"] = *eos;
        for (auto& [key, value] : built.value().items()) context[key] = std::move(value);
        auto rendered = t->render(context);
        if (!rendered) {
          fail(rendered.error().message);
          continue;
        }
        std::string prompt = std::move(rendered).value();
        const auto cont = request.find("continue_final_message");
        if (cont != request.end() && cont->is_boolean() && cont->get<bool>()) {
          if (auto cut = cut_after_final_message(context, prompt); !cut) {
            fail(cut.error());
            continue;
          }
        }
        write_line({{"prompt", prompt}, {"content_format", format}});
        continue;
      }
      if (bos && !request.contains("bos_token")) request["bos_token"] = *bos;
      if (eos && !request.contains("eos_token")) request["eos_token"] = *eos;
      auto rendered = t->render(request);
      if (rendered) {
        write_line({{"prompt", rendered.value()}});
      } else {
        write_line({{"error", rendered.error().message}});
      }
    }
    std::cout.flush();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "render-chat: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace disagg::text
