// model_text.cc — see model_text.h.
#include "model_text.h"

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

// vLLM's message normalization for templates with string content (vllm/entrypoints/chat_utils.py:
// _parse_chat_message_content and _postprocess_messages): the fields it keeps, content parts
// joined, reasoning under both of its names, tool-call arguments decoded.
Expected<ojson, std::string> normalize_message(const ojson& m, std::size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return unexpected(where + " must be an object with 'role' and 'content'");
  const auto role = m.find("role");
  if (role == m.end() || !role->is_string()) return unexpected(where + " needs a string 'role'");
  ojson out = ojson::object();
  out["role"] = *role;
  std::string content;
  if (const auto c = m.find("content"); c != m.end() && !c->is_null()) {
    if (c->is_string()) {
      content = c->get<std::string>();
    } else if (c->is_array()) {
      bool first = true;
      for (const ojson& part : *c) {
        if (part.is_string()) {  // vLLM takes bare strings as text parts
          if (!first) content += '\n';
          content += part.get<std::string>();
          first = false;
          continue;
        }
        if (!part.is_object()) return unexpected(where + ".content: a part must be an object with a 'type'");
        const auto type = part.find("type");
        if (type == part.end() || !type->is_string()) return unexpected(where + ".content: a part needs a string 'type'");
        if (*type != "text") continue;  // images and other media: no text in the prompt here
        const auto text = part.find("text");
        if (text == part.end() || !text->is_string()) return unexpected(where + ".content: a text part needs a string 'text'");
        if (!first) content += '\n';
        content += text->get<std::string>();
        first = false;
      }
    } else {
      return unexpected(where + ".content must be a string, an array of parts or null");
    }
  }
  out["content"] = content;
  const std::string& r = role->get_ref<const std::string&>();
  if (r == "assistant") {
    if (const auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
      if (!calls->is_array()) return unexpected(where + ".tool_calls must be an array");
      if (!calls->empty()) {
        ojson list = *calls;
        for (std::size_t k = 0; k < list.size(); ++k) {
          ojson& call = list[k];
          if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
            return unexpected(where + ".tool_calls[" + std::to_string(k) + "] needs a 'function' object");
          }
          ojson& fn = call["function"];
          const auto args = fn.find("arguments");
          const bool empty = args == fn.end() || args->is_null() || (args->is_string() && args->get_ref<const std::string&>().empty());
          if (empty) {
            fn["arguments"] = ojson::object();
          } else if (args->is_string()) {
            ojson decoded = ojson::parse(args->get_ref<const std::string&>(), nullptr, false);
            if (decoded.is_discarded()) {
              return unexpected(where + ".tool_calls[" + std::to_string(k) + "].function.arguments is not valid JSON");
            }
            fn["arguments"] = std::move(decoded);
          }
        }
        out["tool_calls"] = std::move(list);
      }
    }
    const auto reasoning = m.contains("reasoning") ? m.find("reasoning") : m.find("reasoning_content");
    if (reasoning != m.end() && !reasoning->is_null()) {
      out["reasoning"] = *reasoning;
      out["reasoning_content"] = *reasoning;
    }
  } else if (r == "tool") {
    if (const auto id = m.find("tool_call_id"); id != m.end()) out["tool_call_id"] = *id;
  }
  if (const auto name = m.find("name"); name != m.end() && name->is_string()) out["name"] = *name;
  if (r == "developer") out["tools"] = m.contains("tools") ? m["tools"] : ojson();
  return out;
}

}  // namespace

Expected<ModelText, std::string> ModelText::load(const std::string& dir) {
  auto tokenizer = Tokenizer::load(dir);
  if (!tokenizer) return unexpected(tokenizer.error().message);
  std::optional<ChatTemplate> chat_template;
  ojson specials = ojson::object();
  std::vector<std::pair<std::string, std::string>> sources;  // (name, template text)
  if (std::ifstream in(dir + "/tokenizer_config.json", std::ios::binary); in) {
    std::ostringstream text;
    text << in.rdbuf();
    const ojson config = ojson::parse(text.str(), nullptr, false);
    if (config.is_discarded() || !config.is_object()) return unexpected(dir + "/tokenizer_config.json is not a JSON object");
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"}) {
      if (config.contains(key) && !token_text(config[key]).empty()) specials[key] = token_text(config[key]);
    }
    if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
      ojson list = ojson::array();
      for (const auto& t : config["additional_special_tokens"]) list.push_back(token_text(t));
      specials["additional_special_tokens"] = std::move(list);
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
  for (const auto& [name, source] : sources) {
    if (name != "default" && name != "tool_use") continue;
    auto compiled = ChatTemplate::compile(source);
    if (!compiled) {
      return unexpected(dir + ": the chat template \"" + name + "\" does not compile: " + compiled.error().message);
    }
    (name == "default" ? chat_template : tool_template) = std::move(compiled).value();
  }
  return ModelText(std::move(tokenizer).value(), std::move(chat_template), std::move(tool_template), std::move(specials));
}

void ModelText::completion_tokens(std::string_view prompt, bool add_special_tokens, EncodeScratch& scratch,
                                  std::vector<TokenId>& out) const {
  tokenizer_.encode(prompt, add_special_tokens, scratch, out);
}

Expected<void, std::string> ModelText::chat_tokens(const nlohmann::ordered_json& body, EncodeScratch& scratch, std::string& prompt,
                                                   std::vector<TokenId>& out) const {
  const bool tools = body.contains("tools") && !body["tools"].is_null();
  const ChatTemplate* chosen = tools && tool_template_ ? &*tool_template_ : chat_template_ ? &*chat_template_ : nullptr;
  if (!chosen) {
    return unexpected(std::string(
        "this model has no chat template (tokenizer_config.json has no chat_template), so chat requests cannot be "
        "rendered; use /v1/completions"));
  }
  const auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || messages->empty()) {
    return unexpected(std::string("'messages' must be a non-empty array of {role, content}"));
  }
  ojson context = specials_;
  ojson conversation = ojson::array();
  std::size_t index = 0;
  for (const auto& m : *messages) {
    auto normalized = normalize_message(m, index++);
    if (!normalized) return unexpected(normalized.error());
    conversation.push_back(std::move(normalized).value());
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
  context["messages"] = std::move(conversation);
  context["tools"] = tools ? body["tools"] : ojson();
  if (body.contains("documents") && !body["documents"].is_null()) context["documents"] = body["documents"];
  context["add_generation_prompt"] = add_generation_prompt;
  if (const auto kwargs = body.find("chat_template_kwargs"); kwargs != body.end() && kwargs->is_object()) {
    for (const auto& [key, value] : kwargs->items()) context[key] = value;
  }
  auto rendered = chosen->render(context);
  if (!rendered) return unexpected("the chat template failed: " + rendered.error().message);
  prompt = std::move(rendered).value();
  if (continue_final) {
    // transformers cuts the render after the final message's (stripped) content, so the model
    // continues it instead of closing it.
    const auto& last = context["messages"].back()["content"];
    std::string final_text = last.is_string() ? last.get<std::string>() : std::string();
    const auto begin = final_text.find_first_not_of(" \t\n\r\f\v");
    const auto end = final_text.find_last_not_of(" \t\n\r\f\v");
    final_text = begin == std::string::npos ? std::string() : final_text.substr(begin, end - begin + 1);
    const auto at = prompt.rfind(final_text);
    if (at == std::string::npos) return unexpected(std::string("continue_final_message: the final message does not appear in the rendered prompt"));
    prompt.resize(at + final_text.size());
  }
  tokenizer_.encode(prompt, flag("add_special_tokens", false), scratch, out);
  return {};
}

Expected<nlohmann::json, ModelText::EndpointError> ModelText::serve_tokenize(const nlohmann::ordered_json& body, bool detokenize, std::int64_t max_model_len,
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
    if (!ok) return unexpected(EndpointError{400, "'tokens' must be an array of token ids in [0, " + std::to_string(vocab) + ")", "tokens"});
    return json{{"prompt", tokenizer_.decode(ids, false)}};
  }
  std::vector<TokenId> ids;
  if (body.contains("messages")) {
    std::string prompt;
    if (auto done = chat_tokens(body, scratch, prompt, ids); !done) return unexpected(EndpointError{400, done.error(), "messages"});
  } else if (const auto p = body.find("prompt"); p != body.end() && p->is_string()) {
    const auto special = body.find("add_special_tokens");
    completion_tokens(p->get_ref<const std::string&>(), special == body.end() || !special->is_boolean() || special->get<bool>(),
                      scratch, ids);
  } else {
    return unexpected(EndpointError{400, "a tokenize request needs 'prompt' (a string) or 'messages'", "prompt"});
  }
  json out{{"count", ids.size()}, {"max_model_len", max_model_len > 0 ? json(max_model_len) : json()}, {"tokens", ids},
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
