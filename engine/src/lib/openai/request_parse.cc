#include "request_parse.h"

#include "model_text.h"

#include "disagg/json_parse.h"
#include "lib/openai/openai_request.h"

#include <algorithm>

namespace disagg::router {

namespace {

Unexpected<ApiError> bad(std::string message, std::string param) {
  return unexpected(ApiError{400, std::move(message), std::move(param), ""});
}

using json = RequestJson;

}  // namespace

Expected<json, ApiError> parse_request_json(std::string_view body) {
  if (!json_depth_within(body, kMaxRequestJsonDepth)) {
    return unexpected(ApiError{400, json_depth_error(kMaxRequestJsonDepth), "", "json_too_deep"});
  }
  // The same document json::parse builds, at a fraction of its cost (json_parse.h).
  json doc;
  if (!parse_json_into(body, doc)) return bad("the request body is not valid JSON", "");
  return doc;
}

}  // namespace disagg::router

namespace disagg::http {

namespace {

Unexpected<ApiError> bad_field(std::string message, std::string param) {
  return unexpected(ApiError{400, std::move(message), std::move(param), ""});
}

// Adds a message's content to the made-up tokenizer's prompt: a string, or the text parts of an array
// (other parts are skipped). False for any other kind of content.
bool add_content(const nlohmann::ordered_json& c, FakeChatPrompt& prompt) {
  if (c.is_null()) return true;
  if (c.is_string()) {
    prompt.add_part().append(c.get_ref<const std::string&>());
    return true;
  }
  if (!c.is_array()) return false;
  for (const auto& part : c) {
    if (!part.is_object()) continue;
    auto t = part.find("type");
    auto x = part.find("text");
    if (t == part.end() || !t->is_string() || *t != "text" || x == part.end() || !x->is_string()) continue;
    prompt.add_part().append(x->get_ref<const std::string&>());
  }
  return true;
}

}  // namespace

Expected<GenerateFields, ApiError> read_generate_request(const nlohmann::ordered_json& body, bool chat,
                                                         std::span<const std::string> models,
                                                         const PromptSource& source, std::string& text,
                                                         std::vector<TokenId>& tokens) {
  using json = nlohmann::ordered_json;
  if (!body.is_object()) return bad_field("the request body must be a JSON object", "");
  GenerateFields f;
  // vLLM serves its base model, the first name served, to a request without a model name (null or
  // "" included).
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) return bad_field("'model' is required: a string naming a served model", "model");
    const std::string& name = m->get_ref<const std::string&>();
    if (!name.empty()) {
      const auto it = std::find(models.begin(), models.end(), name);
      if (it == models.end()) {
        std::string known;
        for (const std::string& served : models) known.append(known.empty() ? "" : ", ").append(served);
        return unexpected(
            ApiError{404, "The model `" + name + "` does not exist; served: " + known, "model", "model_not_found"});
      }
      f.model = static_cast<std::size_t>(it - models.begin());
    }
  }
  if (models.empty()) return bad_field("'model' is required: a string naming a served model", "model");
  if (auto s = body.find("stream"); s != body.end() && !s->is_null()) {
    if (!s->is_boolean()) return bad_field("'stream' must be a boolean", "stream");
    f.stream = s->get<bool>();
  }
  if (auto so = check_stream_options(body, f.stream); !so) return unexpected(so.error());
  // vLLM's check_cache_salt_support: a non-empty string when given.
  if (auto cs = body.find("cache_salt"); cs != body.end() && !cs->is_null()) {
    if (!cs->is_string() || cs->get_ref<const std::string&>().empty()) {
      return bad_field("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
    }
    f.cache_salt = cs->get_ref<const std::string&>();
  }
  const auto bound = read_output_bound(body);
  if (!bound) return unexpected(bound.error());
  f.bound = *bound;
  const text::ModelText* model = source.model;
  const std::size_t before = tokens.size();
  if (chat) {
    auto msgs = body.find("messages");
    if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
      return bad_field("'messages' must be a non-empty array of {role, content}", "messages");
    }
    if (model) {
      auto done = model->chat_tokens(body, *source.scratch, text, tokens);
      if (!done) return bad_field(done.error(), "messages");
    } else {
      FakeChatPrompt prompt(text);
      for (const json& msg : *msgs) {
        if (!msg.is_object()) return bad_field("every message must be an object with 'role' and 'content'", "messages");
        auto role = msg.find("role");
        if (role == msg.end() || !role->is_string())
          return bad_field("every message needs a string 'role'", "messages");
        prompt.begin_message().append(role->get_ref<const std::string&>());
        if (auto c = msg.find("content"); c != msg.end() && !add_content(*c, prompt)) {
          return bad_field("message 'content' must be a string or an array of parts", "messages");
        }
        prompt.end_message();
      }
      fake_tokenize(prompt.finish(), tokens);
    }
  } else {
    auto p = body.find("prompt");
    if (p == body.end() || p->is_null()) {
      return bad_field("'prompt' is required: a string, an array of strings or an array of token ids", "prompt");
    }
    // A batch is read by its first prompt (the router routes it so; the sim-worker refuses it).
    const json* one = &*p;
    if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array())) {
      one = &(*p)[0];
      f.batch = p->size() > 1;
    }
    if (one->is_string()) {
      if (model) {
        const auto special = body.find("add_special_tokens");
        model->completion_tokens(one->get_ref<const std::string&>(),
                                 special == body.end() || !special->is_boolean() || special->get<bool>(),
                                 *source.scratch, tokens);
      } else {
        fake_tokenize(one->get_ref<const std::string&>(), tokens);
      }
    } else if (one->is_array()) {
      const std::int64_t limit =
          model ? static_cast<std::int64_t>(model->tokenizer().vocab_size()) - 1 : source.max_token_id;
      for (const json& t : *one) {
        if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::int64_t>() > limit) {
          return bad_field("'prompt' token ids must be whole numbers from 0 to " + std::to_string(limit), "prompt");
        }
        tokens.push_back(t.get<TokenId>());
      }
    } else {
      return bad_field("'prompt' must be a string, an array of strings or an array of token ids", "prompt");
    }
  }
  if (tokens.size() == before) return bad_field("the prompt is empty", chat ? "messages" : "prompt");
  return f;
}

}  // namespace disagg::http

namespace disagg::router {

Expected<void, ApiError> parse_generate_request(const json& body, bool chat, std::span<const std::string> models,
                                                GenerateRequest& out, std::vector<TokenId>& tokens,
                                                std::string& scratch, const PromptTokenizer* tokenizer) {
  const http::PromptSource source{tokenizer ? tokenizer->model : nullptr, tokenizer ? tokenizer->scratch : nullptr};
  auto f = http::read_generate_request(body, chat, models, source, scratch, tokens);
  if (!f) return unexpected(f.error());
  out.model = models[f->model];
  out.stream = f->stream;
  out.cache_salt = f->cache_salt.empty() ? 0 : extra_key_digest(f->cache_salt);
  out.max_tokens = f->bound.tokens;
  return {};
}

}  // namespace disagg::router
