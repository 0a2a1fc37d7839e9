#include "request_validation.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "disagg/json_depth.h"
#include "disagg/json_parse.h"
#include "fake_tokenizer.h"
#include "model_text.h"
#include "lib/openai/openai_request.h"

namespace disagg::sim_worker {

namespace {

// A request's document: ordered, because the chat template sees keys in the client's order (tojson
// of tool schemas), and parsed once, by parse_json_into (json_parse.h).
using Body = nlohmann::ordered_json;

Unexpected<ApiError> bad(std::string message, std::string param) {
  return unexpected(ApiError{400, std::move(message), std::move(param), ""});
}

// Appends the prompt tokens of a chat request's `messages` (an array with at least one element)
// to `out`, as vLLM computes them.
Expected<void, ApiError> chat_prompt(const Body& body, const Body& msgs, const text::ModelText* model_text,
                                     std::vector<TokenId>& out) {
  if (model_text) {
    std::string prompt;
    auto done = model_text->chat_tokens(body, thread_encode_scratch(), prompt, out);
    if (!done) return bad(done.error(), "messages");
    return {};
  }
  std::string text;
  FakeChatPrompt prompt(text);
  for (const Body& m : msgs) {
    if (!m.is_object()) return bad("every message must be an object with 'role' and 'content'", "messages");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return bad("every message needs a string 'role'", "messages");
    prompt.begin_message().append(role->get_ref<const std::string&>());
    if (auto c = m.find("content"); c != m.end() && !c->is_null()) {
      if (c->is_string()) {
        prompt.add_part().append(c->get_ref<const std::string&>());
      } else if (c->is_array()) {
        for (const Body& part : *c) {  // text parts; others are skipped
          if (!part.is_object()) continue;
          const auto type = part.find("type");
          const auto x = part.find("text");
          if (type == part.end() || !type->is_string() || *type != "text" || x == part.end() || !x->is_string()) {
            continue;
          }
          prompt.add_part().append(x->get_ref<const std::string&>());
        }
      } else {
        return bad("message 'content' must be a string or an array of parts", "messages");
      }
    }
    prompt.end_message();
  }
  fake_tokenize(prompt.finish(), out);
  return {};
}

Expected<Generation, ApiError> validate(const Body& body, bool chat, const SimWorkerConfig& config,
                                        const text::ModelText* model_text) {
  Generation g;
  g.chat = chat;
  // ---- The router's rules, in its order and with its answers (request_parse.cc).
  if (!body.is_object()) return bad("the request body must be a JSON object", "");
  // vLLM serves its base model to a request without a model name (null or "" included); the router
  // routes those as its first served name, the base model.
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) return bad("'model' is required: a string naming a served model", "model");
    const std::string& name = m->get_ref<const std::string&>();
    const auto adapter = std::find(config.lora_adapters.begin(), config.lora_adapters.end(), name);
    if (adapter != config.lora_adapters.end()) {
      g.lora_name = *adapter;
      g.lora_id = static_cast<std::int32_t>(adapter - config.lora_adapters.begin()) + 1;
    } else if (!name.empty() && name != config.model_name) {
      std::string served = config.model_name;
      for (const std::string& a : config.lora_adapters) served.append(", ").append(a);
      return unexpected(
          ApiError{404, "The model `" + name + "` does not exist; served: " + served, "model", "model_not_found"});
    }
  }
  if (auto s = body.find("stream"); s != body.end() && !s->is_null()) {
    if (!s->is_boolean()) return bad("'stream' must be a boolean", "stream");
    g.stream = s->get<bool>();
  }
  if (auto so = http::check_stream_options(body, g.stream); !so) return unexpected(so.error());
  // vLLM's check_cache_salt_support: a non-empty string when given.
  if (auto cs = body.find("cache_salt"); cs != body.end() && !cs->is_null()) {
    if (!cs->is_string() || cs->get_ref<const std::string&>().empty()) {
      return bad("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
    }
    g.cache_salt = cs->get<std::string>();
  }
  // Output length: the rule the router reads too (http/openai_request.h).
  const auto bound = http::read_output_bound(body);
  if (!bound) return unexpected(bound.error());
  const char* max_key = bound->field;
  const std::int64_t max_tokens = bound->tokens;
  // Prompt.
  bool batch = false;
  if (chat) {
    auto msgs = body.find("messages");
    if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
      return bad("'messages' must be a non-empty array of {role, content}", "messages");
    }
    if (auto done = chat_prompt(body, *msgs, model_text, g.prompt); !done) return unexpected(done.error());
  } else {
    auto p = body.find("prompt");
    if (p == body.end() || p->is_null()) {
      return bad("'prompt' is required: a string, an array of strings or an array of token ids", "prompt");
    }
    // A batch is read as the router reads it (its first prompt), then refused below.
    const Body* one = &*p;
    if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array())) {
      one = &(*p)[0];
      batch = p->size() > 1;
    }
    if (one->is_string()) {
      if (model_text) {
        const auto special = body.find("add_special_tokens");
        model_text->completion_tokens(one->get_ref<const std::string&>(),
                                      special == body.end() || !special->is_boolean() || special->get<bool>(),
                                      thread_encode_scratch(), g.prompt);
      } else {
        fake_tokenize(one->get_ref<const std::string&>(), g.prompt);
      }
    } else if (one->is_array()) {
      const std::int64_t limit =
          (model_text ? static_cast<std::int64_t>(model_text->tokenizer().vocab_size()) : kFakeVocabSize) - 1;
      for (const Body& t : *one) {
        if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::int64_t>() > limit) {
          return bad("'prompt' token ids must be whole numbers from 0 to " + std::to_string(limit), "prompt");
        }
        g.prompt.push_back(t.get<TokenId>());
      }
    } else {
      return bad("'prompt' must be a string, an array of strings or an array of token ids", "prompt");
    }
  }
  if (g.prompt.empty()) return bad("the prompt is empty", chat ? "messages" : "prompt");

  // ---- The worker's own rules (the router leaves these to the worker).
  if (batch) return bad("'prompt' batches are not supported: sim-worker answers one prompt per request", "prompt");
  if (auto n = body.find("n"); n != body.end() && !n->is_null() && !(n->is_number_integer() && *n == 1)) {
    return bad("'n' must be 1: sim-worker generates one choice", "n");
  }
  if (auto so = body.find("stream_options"); so != body.end() && so->is_object()) {
    if (auto iu = so->find("include_usage"); iu != so->end() && iu->is_boolean()) g.include_usage = *iu;
  }
  if (max_key != nullptr) {
    if (max_tokens > config.max_model_len) {
      return bad(
          std::string("'") + max_key + "' must be a whole number in [1, " + std::to_string(config.max_model_len) + "]",
          max_key);
    }
    g.max_tokens = static_cast<std::int32_t>(max_tokens);
  } else {
    g.max_tokens = chat ? config.default_max_tokens : 16;  // OpenAI's completions default is 16
  }
  // P/D handshake.
  if (auto kv = body.find("kv_transfer_params"); kv != body.end() && kv->is_object()) {
    const bool remote_decode = kv->value("do_remote_decode", false);
    const bool remote_prefill = kv->value("do_remote_prefill", false);
    if (remote_decode) {
      if (config.role != WorkerRole::prefill) {
        return bad("kv_transfer_params.do_remote_decode needs a prefill worker; this one is " +
                       std::string(to_string(config.role)),
                   "kv_transfer_params");
      }
      g.kind = RequestKind::prefill_only;
    } else if (remote_prefill) {
      if (config.role != WorkerRole::decode) {
        return bad("kv_transfer_params.do_remote_prefill needs a decode worker; this one is " +
                       std::string(to_string(config.role)),
                   "kv_transfer_params");
      }
      // Without the prefill side's blocks, vLLM prefills locally; so do we.
      auto ids = kv->find("remote_block_ids");
      if (ids != kv->end() && ids->is_array()) g.kind = RequestKind::remote_kv;
    }
  }
  const std::int64_t total =
      static_cast<std::int64_t>(g.prompt.size()) + (g.kind == RequestKind::prefill_only ? 1 : g.max_tokens);
  if (total > config.max_model_len) {
    return bad("This model's maximum context length is " + std::to_string(config.max_model_len) +
                   " tokens. However, you requested " + std::to_string(total) + " tokens (" +
                   std::to_string(g.prompt.size()) + " in the prompt, " +
                   std::to_string(total - static_cast<std::int64_t>(g.prompt.size())) +
                   " in the completion). Please reduce the length of the prompt or completion.",
               "max_tokens");
  }
  return g;
}

}  // namespace

text::EncodeScratch& thread_encode_scratch() {
  thread_local text::EncodeScratch scratch;
  return scratch;
}

Expected<Generation, ApiError> validate_generate_request(std::string_view body, bool chat,
                                                         const SimWorkerConfig& config,
                                                         const text::ModelText* model_text) {
  // The depth first: nlohmann builds any nesting, one heap node per level (json_depth.h).
  if (!json_depth_within(body, kMaxRequestJsonDepth)) {
    return unexpected(ApiError{400, json_depth_error(kMaxRequestJsonDepth), "", "json_too_deep"});
  }
  Body doc;
  if (!parse_json_into(body, doc)) return bad("the request body is not valid JSON", "");
  return validate(doc, chat, config, model_text);
}

}  // namespace disagg::sim_worker
