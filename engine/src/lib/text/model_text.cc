// model_text.cc — see model_text.h.
#include "model_text.h"

#include <algorithm>
#include <array>
#include <utility>
#include <fstream>
#include <sstream>

namespace disagg::text {
namespace {

using ojson = nlohmann::ordered_json;

std::string token_text(const ojson& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return {};
}

// Python truthiness of a JSON value (vLLM tests `if content := ...`).
bool truthy(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return false;
    case ojson::value_t::boolean: return v.get<bool>();
    case ojson::value_t::number_integer: return v.get<std::int64_t>() != 0;
    case ojson::value_t::number_unsigned: return v.get<std::uint64_t>() != 0;
    case ojson::value_t::number_float: return v.get<double>() != 0.0;
    case ojson::value_t::string: return !v.get_ref<const std::string&>().empty();
    case ojson::value_t::array:
    case ojson::value_t::object: return !v.empty();
    default: return true;
  }
}

ojson get_or_null(const ojson& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? ojson() : *it;
}

// The part types of vLLM's MM_PARSER_MAP (vllm/renderers/chat_utils/mm_parser_map.py).
constexpr std::array<std::string_view, 16> kPartTypes = {
    "text",         "thinking",     "input_text",   "output_text",   "input_image", "image_url",
    "image_embeds", "audio_embeds", "video_embeds", "prompt_embeds", "image_pil",   "audio_url",
    "input_audio",  "refusal",      "video_url",    "tool_reference"};
// The keys that type a part without `type`, in the order vLLM tries them.
constexpr std::array<const char*, 10> kDirectKeys = {"image_url",    "image_pil",     "image_embeds", "audio_embeds",
                                                     "video_embeds", "prompt_embeds", "audio_url",    "input_audio",
                                                     "video_url",    "tool_reference"};
// Every key of vLLM's content part types (ChatCompletionContentPartParam's TypedDicts); other keys
// of a part are carried into its "openai" form (_collect_extra_fields).
constexpr std::array<std::string_view, 17> kKnownPartKeys = {
    "type", "text",         "image_url",    "input_audio",  "file", "refusal",  "audio_url", "video_url", "image_pil",
    "uuid", "image_embeds", "audio_embeds", "video_embeds", "data", "thinking", "closed",    "name"};
constexpr std::string_view kPromptEmbedsPlaceholder = "<prompt_embeds>";
constexpr std::string_view kBillingHeader = "x-anthropic-billing-header";

bool known_type(std::string_view t) {
  return std::find(kPartTypes.begin(), kPartTypes.end(), t) != kPartTypes.end();
}

void add_extra_keys(const ojson& part, ojson& out) {
  for (const auto& [key, value] : part.items()) {
    if (std::find(kKnownPartKeys.begin(), kKnownPartKeys.end(), key) == kKnownPartKeys.end()) out[key] = value;
  }
}

// vLLM's _strip_claude_code_billing_header on a system message's parts.
ojson strip_billing_header(const ojson& parts) {
  ojson out = ojson::array();
  for (const ojson& part : parts) {
    const ojson* text = nullptr;
    if (part.is_string()) {
      text = &part;
    } else if (part.is_object() && part.contains("type") && part["type"] == "text" && part.contains("text")) {
      text = &part["text"];
    }
    if (text == nullptr || !text->is_string() || !text->get_ref<const std::string&>().starts_with(kBillingHeader)) {
      out.push_back(part);
      continue;
    }
    const std::string& t = text->get_ref<const std::string&>();
    const auto nl = t.find('\n');
    const std::string rest = nl == std::string::npos ? std::string() : t.substr(nl + 1);
    if (rest.empty()) continue;
    if (part.is_string()) {
      out.push_back(rest);
    } else {
      ojson copy = part;
      copy["text"] = rest;
      out.push_back(std::move(copy));
    }
  }
  return out;
}

// Python's str.strip() with no argument: the characters str.isspace() accepts, at both ends.
bool python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The code point starting at s[i] (valid UTF-8, as JSON strings are) and its length in bytes.
std::pair<char32_t, std::size_t> decode_at(const std::string& s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const std::size_t n = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
  char32_t c = n == 1 ? b : n == 2 ? (b & 0x1f) : n == 3 ? (b & 0x0f) : (b & 0x07);
  for (std::size_t k = 1; k < n && i + k < s.size(); ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  return {c, n};
}

std::string python_strip(const std::string& s) {
  std::size_t begin = 0;
  while (begin < s.size()) {
    const auto [c, n] = decode_at(s, begin);
    if (!python_space(c)) break;
    begin += n;
  }
  std::size_t end = begin;  // one past the last code point that is not a space
  for (std::size_t i = begin; i < s.size();) {
    const auto [c, n] = decode_at(s, i);
    i += n;
    if (!python_space(c)) end = i;
  }
  return s.substr(begin, end - begin);
}

// One message as vLLM's _parse_chat_message_content builds it.
Expected<ojson, std::string> normalize_message(const ojson& m, std::size_t index, ContentFormat format) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return unexpected(where + " must be an object with 'role' and 'content'");
  const auto role = m.find("role");
  if (role == m.end() || !role->is_string()) return unexpected(where + " needs a string 'role'");
  const std::string& r = role->get_ref<const std::string&>();
  const bool openai = format == ContentFormat::kOpenAI;

  ojson parts = ojson::array();
  if (const auto c = m.find("content"); c != m.end() && !c->is_null()) {
    if (c->is_string()) {
      parts.push_back(ojson{{"type", "text"}, {"text", *c}});
    } else if (c->is_array()) {
      parts = *c;
    } else {
      return unexpected(where + ".content must be a string, an array of parts or null");
    }
  }
  if (r == "system") parts = strip_billing_header(parts);

  ojson list = ojson::array();  // "openai"
  std::string text;             // "string"
  bool first = true;
  const auto append_text = [&](const std::string& t) {
    if (t.empty()) return;  // vLLM keeps only truthy parts
    if (!first) text += '\n';
    text += t;
    first = false;
  };
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const ojson& part = parts[k];
    const std::string at = where + ".content[" + std::to_string(k) + "]";
    if (part.is_string()) {
      if (openai) {
        list.push_back(ojson{{"type", "text"}, {"text", part}});
      } else {
        append_text(part.get<std::string>());
      }
      continue;
    }
    if (!part.is_object()) return unexpected(at + " must be a string or an object with a 'type'");
    const ojson type = get_or_null(part, "type");
    const ojson uuid = get_or_null(part, "uuid");
    std::string kind;
    ojson content;
    if (type.is_string() && known_type(type.get_ref<const std::string&>()) && uuid.is_null()) {
      kind = type.get<std::string>();
      if (kind == "text" || kind == "input_text" || kind == "output_text") content = get_or_null(part, "text");
      else if (kind == "thinking") content = get_or_null(part, "thinking");
      else if (kind == "refusal") content = get_or_null(part, "refusal");
      else if (kind == "tool_reference") content = get_or_null(part, "name");
      else if (kind == "prompt_embeds") content = get_or_null(part, "data");
    } else if (type.is_null() || !uuid.is_null()) {
      for (const char* key : kDirectKeys) {
        if (part.contains(key)) {
          kind = key;
          break;
        }
      }
      if (kind.empty()) return unexpected(at + ": Missing 'type' field in multimodal part.");
      if (kind == "tool_reference") content = get_or_null(part, "name");
      if (kind == "prompt_embeds") content = get_or_null(part, "data");
    } else if (!type.is_string()) {
      return unexpected(at + ": Invalid 'type' field in multimodal part.");
    } else {
      std::string supported;
      std::vector<std::string_view> names(kPartTypes.begin(), kPartTypes.end());
      std::sort(names.begin(), names.end());
      for (const auto n : names) supported += (supported.empty() ? "" : ", ") + std::string(n);
      return unexpected(at + ": Unsupported chat content part type: '" + type.get<std::string>() +
                        "'. Supported types: " + supported + ".");
    }
    if ((kind == "text" || kind == "refusal") && content.is_null()) continue;
    if (kind == "text" || kind == "input_text" || kind == "output_text" || kind == "refusal" || kind == "thinking") {
      if (!content.is_null() && !content.is_string()) return unexpected(at + ": the part's text must be a string");
      if (openai) {
        ojson p{{"type", "text"}, {"text", content}};
        add_extra_keys(part, p);
        list.push_back(std::move(p));
      } else if (content.is_string()) {
        append_text(content.get<std::string>());
      }
      continue;
    }
    if (kind == "tool_reference") {
      if (openai) {
        list.push_back(ojson{{"type", "tool_reference"}, {"name", content}});
      } else if (content.is_string()) {
        append_text(content.get<std::string>());
      }
      continue;
    }
    if (kind == "prompt_embeds") {
      if (!truthy(content)) {
        return unexpected(
            at + ": prompt_embeds content part requires a non-empty `data` field with base64-encoded tensor bytes.");
      }
      if (openai) {
        list.push_back(ojson{{"type", "text"}, {"text", kPromptEmbedsPlaceholder}});
      } else {
        append_text(std::string(kPromptEmbedsPlaceholder));
      }
      continue;
    }
    // Media: the template sees a placeholder part ("openai"); "string" drops them (see the header).
    if (openai) {
      const char* modality = kind.find("audio") != std::string::npos   ? "audio"
                             : kind.find("video") != std::string::npos ? "video"
                                                                       : "image";
      ojson p{{"type", modality}};
      add_extra_keys(part, p);
      list.push_back(std::move(p));
    }
  }

  ojson out = ojson::object();
  out["role"] = *role;
  if (openai) {
    out["content"] = std::move(list);
  } else {
    out["content"] = std::move(text);
  }
  if (r == "assistant") {
    if (const auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
      if (!calls->is_array()) return unexpected(where + ".tool_calls must be an array");
      out["tool_calls"] = *calls;
    }
    if (const auto reasoning = m.find("reasoning"); reasoning != m.end() && !reasoning->is_null()) {
      out["reasoning"] = *reasoning;
      out["reasoning_content"] = *reasoning;
    }
  } else if (r == "tool") {
    if (const auto id = m.find("tool_call_id"); id != m.end()) out["tool_call_id"] = *id;
    if (openai) {
      const ojson& c = out["content"];
      bool all_text = true;
      for (const ojson& item : c) all_text = all_text && !(item.is_object() && get_or_null(item, "type") != "text");
      if (all_text) {
        std::string joined;
        bool head = true;
        for (const ojson& item : c) {
          if (!item.is_object() || get_or_null(item, "type") != "text") continue;
          const ojson t = get_or_null(item, "text");
          if (!head) joined += '\n';
          joined += t.is_string() ? t.get<std::string>() : std::string();
          head = false;
        }
        out["content"] = std::move(joined);
      }
    }
  }
  if (const auto name = m.find("name"); name != m.end() && name->is_string()) out["name"] = *name;
  if (const auto task = m.find("task"); task != m.end() && task->is_string()) out["task"] = *task;
  if (r == "developer") out["tools"] = get_or_null(m, "tools");
  return out;
}

// vLLM's _postprocess_messages: tool-call arguments become objects; empty tool_calls go.
Expected<void, std::string> postprocess_tool_calls(ojson& conversation) {
  for (std::size_t i = 0; i < conversation.size(); ++i) {
    ojson& message = conversation[i];
    if (message["role"] != "assistant" || !message.contains("tool_calls")) continue;
    ojson& calls = message["tool_calls"];
    if (!calls.is_array()) continue;
    if (calls.empty()) {
      message.erase("tool_calls");
      continue;
    }
    const std::string where = "messages[" + std::to_string(i) + "].tool_calls";
    for (ojson& call : calls) {
      if (!call.is_object()) return unexpected(where + ": assistant tool_calls entries must be objects.");
      const ojson type = call.contains("type") ? call["type"] : ojson("function");
      if (type != "function" || !call.contains("function") || !call["function"].is_object()) {
        return unexpected(where + ": chat completions only support assistant tool_calls of type 'function'.");
      }
      ojson& fn = call["function"];
      const ojson args = get_or_null(fn, "arguments");
      ojson parsed = ojson::object();
      if (truthy(args)) {
        if (args.is_object()) {
          parsed = args;
        } else if (args.is_string()) {
          ojson decoded = ojson::parse(args.get_ref<const std::string&>(), nullptr, false);
          if (!decoded.is_discarded() && decoded.is_object()) parsed = std::move(decoded);
        }
      }
      fn["arguments"] = std::move(parsed);
    }
  }
  return {};
}

// vLLM's _convert_developer_to_system and _consolidate_system_messages (vllm/renderers/hf.py).
void developer_to_system(ojson& conversation) {
  for (ojson& m : conversation) {
    if (m["role"] != "developer") continue;
    m["role"] = "system";
    m.erase("tools");
  }
  std::vector<std::string> system_texts;
  ojson rest = ojson::array();
  bool consolidate = false;
  for (std::size_t i = 0; i < conversation.size(); ++i) {
    ojson& m = conversation[i];
    if (m["role"] != "system") {
      rest.push_back(std::move(m));
      continue;
    }
    if (i > 0 || !system_texts.empty()) consolidate = true;
    const ojson c = get_or_null(m, "content");
    std::string text;
    if (c.is_array()) {
      bool head = true;
      for (const ojson& part : c) {
        const ojson* t = part.is_object() && part.contains("text") ? &part["text"] : part.is_string() ? &part : nullptr;
        if (t == nullptr) continue;
        if (!head) text += '\n';
        if (t->is_string()) text += t->get<std::string>();
        head = false;
      }
    } else if (c.is_string()) {
      text = c.get<std::string>();
    }
    if (!text.empty()) system_texts.push_back(std::move(text));
    rest.push_back(std::move(m));  // put back below when nothing merges
  }
  if (!consolidate) {
    conversation = std::move(rest);
    return;
  }
  std::string merged;
  for (std::size_t k = 0; k < system_texts.size(); ++k) merged += (k ? "\n\n" : "") + system_texts[k];
  ojson out = ojson::array();
  out.push_back(ojson{{"role", "system"}, {"content", merged}});
  for (ojson& m : rest) {
    if (m["role"] != "system") out.push_back(std::move(m));
  }
  conversation = std::move(out);
}

// pydantic's model_dump of vLLM's ChatCompletionToolsParam list.
Expected<ojson, std::string> dump_tools(const ojson& tools) {
  if (!tools.is_array())
    return unexpected(std::string("'tools' must be an array of {type: \"function\", function: {...}}"));
  ojson out = ojson::array();
  for (std::size_t k = 0; k < tools.size(); ++k) {
    const ojson& tool = tools[k];
    const std::string where = "tools[" + std::to_string(k) + "]";
    if (!tool.is_object()) return unexpected(where + " must be an object {type: \"function\", function: {...}}");
    if (tool.contains("type") && tool["type"] != "function") return unexpected(where + ".type must be \"function\"");
    const auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object()) return unexpected(where + ".function must be an object with a 'name'");
    if (!fn->contains("name") || !(*fn)["name"].is_string())
      return unexpected(where + ".function.name must be a string");
    const ojson description = get_or_null(*fn, "description");
    if (!description.is_null() && !description.is_string())
      return unexpected(where + ".function.description must be a string or null");
    const ojson parameters = get_or_null(*fn, "parameters");
    if (!parameters.is_null() && !parameters.is_object())
      return unexpected(where + ".function.parameters must be an object or null");
    ojson f{{"name", (*fn)["name"]}, {"description", description}, {"parameters", parameters}};
    for (const auto& [key, value] : fn->items()) {
      if (key != "name" && key != "description" && key != "parameters") f[key] = value;
    }
    ojson t{{"type", "function"}, {"function", std::move(f)}};
    for (const auto& [key, value] : tool.items()) {
      if (key != "type" && key != "function") t[key] = value;
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

bool request_has_tools(const nlohmann::ordered_json& body) {
  if (!body.is_object()) return false;
  const auto tools = body.find("tools");
  if (tools == body.end() || tools->is_null()) return false;
  const auto choice = body.find("tool_choice");
  return !(tools->is_array() && tools->empty() && choice != body.end() && *choice == "required");
}

bool developer_role_in_template(std::string_view source) {
  return source.find("\"developer\"") != std::string_view::npos || source.find("'developer'") != std::string_view::npos;
}

Expected<nlohmann::ordered_json, std::string> chat_template_context(const nlohmann::ordered_json& body,
                                                                    const ChatTemplate& chosen,
                                                                    bool template_mentions_developer) {
  if (!body.is_object()) return unexpected(std::string("the chat request must be a JSON object"));
  const auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || messages->empty()) {
    return unexpected(std::string("'messages' must be a non-empty array of {role, content}"));
  }
  const ContentFormat format = chosen.content_format();
  ojson conversation = ojson::array();
  std::size_t index = 0;
  for (const auto& m : *messages) {
    auto normalized = normalize_message(m, index++, format);
    if (!normalized) return unexpected(normalized.error());
    conversation.push_back(std::move(normalized).value());
  }
  if (auto done = postprocess_tool_calls(conversation); !done) return unexpected(done.error());
  if (!template_mentions_developer) {
    bool any = false;
    for (const ojson& m : conversation) any = any || m["role"] == "developer";
    if (any) developer_to_system(conversation);
  }
  const auto flag = [&](const char* key, bool fallback) {
    const auto it = body.find(key);
    return it != body.end() && it->is_boolean() ? it->get<bool>() : fallback;
  };
  const bool add_generation_prompt = flag("add_generation_prompt", true);
  const bool continue_final = flag("continue_final_message", false);
  if (add_generation_prompt && continue_final) {
    return unexpected(std::string("'continue_final_message' and 'add_generation_prompt' cannot both be true"));
  }
  ojson context = ojson::object();
  // chat_template_kwargs first: the request's own fields override them (vLLM's build_chat_params
  // with merge_kwargs, which skips null overrides).
  if (const auto kwargs = body.find("chat_template_kwargs"); kwargs != body.end() && kwargs->is_object()) {
    for (const auto& [key, value] : kwargs->items()) context[key] = value;
  }
  context["messages"] = std::move(conversation);
  if (request_has_tools(body)) {
    auto dumped = dump_tools(body["tools"]);
    if (!dumped) return unexpected(dumped.error());
    context["tools"] = std::move(dumped).value();
  } else {
    context["tools"] = ojson();
  }
  if (const auto docs = body.find("documents"); docs != body.end() && !docs->is_null()) context["documents"] = *docs;
  if (const auto effort = body.find("reasoning_effort"); effort != body.end() && !effort->is_null()) {
    context["reasoning_effort"] = *effort;
  }
  context["add_generation_prompt"] = add_generation_prompt;
  // continue_final_message is apply_chat_template's own parameter, never a template variable.
  context.erase("continue_final_message");
  return context;
}

Expected<void, std::string> cut_after_final_message(const nlohmann::ordered_json& context, std::string& prompt) {
  const ojson& last = context["messages"].back()["content"];
  std::string final_text;
  if (last.is_string()) {
    final_text = last.get<std::string>();
  } else if (last.is_array()) {
    bool found = false;
    for (auto it = last.rbegin(); it != last.rend(); ++it) {
      if (it->is_object() && it->contains("text")) {
        const ojson& t = (*it)["text"];
        final_text = t.is_string() ? t.get<std::string>() : std::string();
        found = true;
        break;
      }
    }
    if (!found) return unexpected(std::string("continue_final_message: the final message has no text to continue"));
  }
  final_text = python_strip(final_text);
  const auto at = prompt.rfind(final_text);
  if (at == std::string::npos) {
    return unexpected(std::string("continue_final_message: the final message does not appear in the rendered prompt"));
  }
  prompt.resize(at + final_text.size());
  return {};
}

Expected<ModelText, std::string> ModelText::load(const std::string& dir) {
  auto tokenizer = Tokenizer::load(dir);
  if (!tokenizer) return unexpected(tokenizer.error().message);
  std::optional<ChatTemplate> chat_template;
  ojson specials = ojson::object();
  std::vector<std::pair<std::string, std::string>> sources;  // (name, template text)
  std::int64_t model_max_length = 0;
  if (std::ifstream in(dir + "/tokenizer_config.json", std::ios::binary); in) {
    std::ostringstream text;
    text << in.rdbuf();
    const ojson config = ojson::parse(text.str(), nullptr, false);
    if (config.is_discarded() || !config.is_object())
      return unexpected(dir + "/tokenizer_config.json is not a JSON object");
    for (const char* key :
         {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"}) {
      if (config.contains(key) && !token_text(config[key]).empty()) specials[key] = token_text(config[key]);
    }
    if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
      ojson list = ojson::array();
      for (const auto& t : config["additional_special_tokens"]) list.push_back(token_text(t));
      specials["additional_special_tokens"] = std::move(list);
    }
    // transformers writes int(1e30) (VERY_LARGE_INTEGER) when the length is unknown: only a
    // length a model could have counts.
    if (const auto m = config.find("model_max_length"); m != config.end() && m->is_number_integer() &&
                                                        m->get<std::int64_t>() >= 1 &&
                                                        m->get<std::int64_t>() <= (1LL << 31) - 1) {
      model_max_length = m->get<std::int64_t>();
    }
    if (const auto t = config.find("chat_template"); t != config.end()) {
      if (t->is_string()) {
        sources.emplace_back("default", t->get<std::string>());
      } else if (t->is_array()) {
        for (const auto& named : *t) {
          if (named.is_object() && named.contains("name") && named["name"].is_string() && named.contains("template") &&
              named["template"].is_string()) {
            sources.emplace_back(named["name"].get<std::string>(), named["template"].get<std::string>());
          }
        }
      }
    }
  }
  if (sources.empty()) {
    if (std::ifstream in(dir + "/chat_template.jinja", std::ios::binary); in) {
      std::ostringstream text;
      text << in.rdbuf();
      sources.emplace_back("default", text.str());
    }
  }
  std::optional<ChatTemplate> tool_template;
  bool chat_developer = false;
  bool tool_developer = false;
  for (const auto& [name, source] : sources) {
    if (name != "default" && name != "tool_use") continue;
    auto compiled = ChatTemplate::compile(source);
    if (!compiled) {
      return unexpected(dir + ": the chat template \"" + name + "\" does not compile: " + compiled.error().message);
    }
    (name == "default" ? chat_template : tool_template) = std::move(compiled).value();
    (name == "default" ? chat_developer : tool_developer) = developer_role_in_template(source);
  }
  ModelText loaded(std::move(tokenizer).value(), std::move(chat_template), std::move(tool_template),
                   std::move(specials), chat_developer, tool_developer);
  loaded.model_max_length_ = model_max_length;
  return loaded;
}

void ModelText::completion_tokens(std::string_view prompt, bool add_special_tokens, EncodeScratch& scratch,
                                  std::vector<TokenId>& out) const {
  tokenizer_.encode(prompt, add_special_tokens, scratch, out);
}

Expected<void, std::string> ModelText::chat_tokens(const nlohmann::ordered_json& body, EncodeScratch& scratch,
                                                   std::string& prompt, std::vector<TokenId>& out) const {
  const bool use_tool_template = request_has_tools(body) && tool_template_;
  const ChatTemplate* chosen = use_tool_template ? &*tool_template_ : chat_template_ ? &*chat_template_ : nullptr;
  bool developer = use_tool_template ? tool_developer_ : chat_developer_;
  // A request's own chat_template replaces the model's (vLLM passes it to apply_chat_template,
  // which then ignores the tool_use template): its prompt, so its blocks, are what that renders.
  std::optional<ChatTemplate> own;
  if (const auto t = body.find("chat_template"); t != body.end() && !t->is_null()) {
    if (!t->is_string()) return unexpected(std::string("'chat_template' must be a string"));
    auto compiled = ChatTemplate::compile(t->get_ref<const std::string&>());
    if (!compiled) return unexpected("the request's chat_template does not compile: " + compiled.error().message);
    own.emplace(std::move(compiled).value());
    chosen = &*own;
    developer = developer_role_in_template(t->get_ref<const std::string&>());
  }
  if (!chosen) {
    return unexpected(std::string(
        "this model has no chat template (tokenizer_config.json has no chat_template), so chat requests cannot be "
        "rendered; use /v1/completions"));
  }
  auto built = chat_template_context(body, *chosen, developer);
  if (!built) return unexpected(built.error());
  ojson context = specials_;
  for (auto& [key, value] : built.value().items()) context[key] = std::move(value);
  auto rendered = chosen->render(context);
  if (!rendered) return unexpected("the chat template failed: " + rendered.error().message);
  prompt = std::move(rendered).value();
  const auto cont = body.find("continue_final_message");
  if (cont != body.end() && cont->is_boolean() && cont->get<bool>()) {
    if (auto cut = cut_after_final_message(context, prompt); !cut) return unexpected(cut.error());
  }
  const auto special = body.find("add_special_tokens");
  tokenizer_.encode(prompt, special != body.end() && special->is_boolean() && special->get<bool>(), scratch, out);
  return {};
}

Expected<nlohmann::json, ModelText::EndpointError> ModelText::serve_tokenize(const nlohmann::ordered_json& body,
                                                                             bool detokenize,
                                                                             std::int64_t max_model_len,
                                                                             EncodeScratch& scratch) const {
  using json = nlohmann::json;
  if (detokenize) {
    const auto tokens = body.find("tokens");
    const auto vocab = static_cast<std::int64_t>(tokenizer_.vocab_size());
    std::vector<TokenId> ids;
    bool ok = tokens != body.end() && tokens->is_array();
    for (const nlohmann::ordered_json& t : ok ? *tokens : nlohmann::ordered_json::array()) {
      if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::int64_t>() >= vocab) {
        ok = false;
        break;
      }
      ids.push_back(t.get<TokenId>());
    }
    if (!ok)
      return unexpected(
          EndpointError{400, "'tokens' must be an array of token ids in [0, " + std::to_string(vocab) + ")", "tokens"});
    return json{{"prompt", tokenizer_.decode(ids, false)}};
  }
  std::vector<TokenId> ids;
  if (body.contains("messages")) {
    std::string prompt;
    if (auto done = chat_tokens(body, scratch, prompt, ids); !done)
      return unexpected(EndpointError{400, done.error(), "messages"});
  } else if (const auto p = body.find("prompt"); p != body.end() && p->is_string()) {
    const auto special = body.find("add_special_tokens");
    completion_tokens(p->get_ref<const std::string&>(),
                      special == body.end() || !special->is_boolean() || special->get<bool>(), scratch, ids);
  } else {
    return unexpected(EndpointError{400, "a tokenize request needs 'prompt' (a string) or 'messages'", "prompt"});
  }
  json out{{"count", ids.size()},
           {"max_model_len", max_model_len > 0 ? json(max_model_len) : json()},
           {"tokens", ids},
           {"token_strs", nullptr}};
  if (const auto strs = body.find("return_token_strs"); strs != body.end() && strs->is_boolean() && strs->get<bool>()) {
    json list = json::array();
    for (const TokenId id : ids) {
      const auto t = tokenizer_.id_to_token(id);
      list.push_back(t ? std::string(*t) : std::string());
    }
    out["token_strs"] = std::move(list);
  }
  return out;
}

}  // namespace disagg::text
