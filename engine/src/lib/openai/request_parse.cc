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

// Adds a message's content to the prompt: a string, or the text parts of an array (other parts
// are skipped). False for any other kind of content.
bool add_content(const json& c, FakeChatPrompt& prompt) {
  if (c.is_null()) return true;
  if (c.is_string()) {
    prompt.add_part().append(c.get_ref<const std::string&>());
    return true;
  }
  if (!c.is_array()) return false;
  for (const json& part : c) {
    if (!part.is_object()) continue;
    auto t = part.find("type");
    auto x = part.find("text");
    if (t == part.end() || !t->is_string() || *t != "text" || x == part.end() || !x->is_string()) { continue; }
    prompt.add_part().append(x->get_ref<const std::string&>());
  }
  return true;
}

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

Expected<void, ApiError> parse_generate_request(const json& body, bool chat, std::span<const std::string> models,
                                                GenerateRequest& out, std::vector<TokenId>& tokens,
                                                std::string& scratch, const PromptTokenizer* tokenizer) {
  if (!body.is_object()) return bad("the request body must be a JSON object", "");
  // The checks run in this order; the sim-worker's request_validation.cc runs the same ones in the
  // same order, with the same answers (tests/servers/router/request_errors_differential_test.cc).
  const text::ModelText* model = tokenizer ? tokenizer->model : nullptr;
  auto m = body.find("model");
  const bool named = m != body.end() && !m->is_null();
  if (named && !m->is_string()) return bad("'model' is required: a string naming a served model", "model");
  if (!named || m->get_ref<const std::string&>().empty()) {
    // vLLM serves its base model, the first name it serves, to a request without a model name
    // (null or "" included); so does the router, routing it as that model.
    if (models.empty()) return bad("'model' is required: a string naming a served model", "model");
    out.model = models.front();
  } else {
    out.model = m->get<std::string>();
  }
  if (std::find(models.begin(), models.end(), out.model) == models.end()) {
    std::string known;
    for (const std::string& name : models) known += (known.empty() ? "" : ", ") + name;
    return unexpected(
        ApiError{404, "The model `" + out.model + "` does not exist; served: " + known, "model", "model_not_found"});
  }
  out.stream = false;
  if (auto s = body.find("stream"); s != body.end() && !s->is_null()) {
    if (!s->is_boolean()) return bad("'stream' must be a boolean", "stream");
    out.stream = s->get<bool>();
  }
  if (auto so = http::check_stream_options(body, out.stream); !so) return unexpected(so.error());
  // vLLM's check_cache_salt_support: a non-empty string when given.
  out.cache_salt = 0;
  if (auto cs = body.find("cache_salt"); cs != body.end() && !cs->is_null()) {
    if (!cs->is_string() || cs->get_ref<const std::string&>().empty()) {
      return bad("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
    }
    out.cache_salt = extra_key_digest(cs->get_ref<const std::string&>());
  }
  // Output bound: the rule the sim-worker reads too (http/openai_request.h).
  const auto bound = http::read_output_bound(body);
  if (!bound) return unexpected(bound.error());
  out.max_tokens = bound->tokens;
  const std::size_t before = tokens.size();
  if (chat) {
    auto msgs = body.find("messages");
    if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
      return bad("'messages' must be a non-empty array of {role, content}", "messages");
    }
    if (model) {
      auto done = model->chat_tokens(body, *tokenizer->scratch, scratch, tokens);
      if (!done) return bad(done.error(), "messages");
      if (tokens.size() == before) return bad("the prompt is empty", "messages");
      return {};
    }
    FakeChatPrompt prompt(scratch);
    for (const json& msg : *msgs) {
      if (!msg.is_object()) return bad("every message must be an object with 'role' and 'content'", "messages");
      auto role = msg.find("role");
      if (role == msg.end() || !role->is_string()) return bad("every message needs a string 'role'", "messages");
      prompt.begin_message().append(role->get_ref<const std::string&>());
      if (auto c = msg.find("content"); c != msg.end() && !add_content(*c, prompt)) {
        return bad("message 'content' must be a string or an array of parts", "messages");
      }
      prompt.end_message();
    }
    fake_tokenize(prompt.finish(), tokens);
  } else {
    auto p = body.find("prompt");
    if (p == body.end() || p->is_null()) {
      return bad("'prompt' is required: a string, an array of strings or an array of token ids", "prompt");
    }
    // Batches route by their first prompt.
    const json* one = &*p;
    if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array())) one = &(*p)[0];
    if (one->is_string()) {
      if (model) {
        const auto special = body.find("add_special_tokens");
        model->completion_tokens(one->get_ref<const std::string&>(),
                                 special == body.end() || !special->is_boolean() || special->get<bool>(),
                                 *tokenizer->scratch, tokens);
      } else {
        fake_tokenize(one->get_ref<const std::string&>(), tokens);
      }
    } else if (one->is_array()) {
      const std::int64_t limit = model ? static_cast<std::int64_t>(model->tokenizer().vocab_size()) - 1 : 0x7fffffff;
      for (const json& t : *one) {
        if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::int64_t>() > limit) {
          return bad("'prompt' token ids must be whole numbers from 0 to " + std::to_string(limit), "prompt");
        }
        tokens.push_back(t.get<TokenId>());
      }
    } else {
      return bad("'prompt' must be a string, an array of strings or an array of token ids", "prompt");
    }
  }
  if (tokens.size() == before) return bad("the prompt is empty", chat ? "messages" : "prompt");
  return {};
}

}  // namespace disagg::router
