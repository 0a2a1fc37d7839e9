#include "request_validation.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "disagg/json_depth.h"
#include "disagg/json_parse.h"
#include "fake_tokenizer.h"
#include "model_text.h"
#include "lib/openai/openai_request.h"
#include "lib/openai/request_parse.h"

namespace disagg::sim_worker {

namespace {

// A request's document: ordered, because the chat template sees keys in the client's order (tojson
// of tool schemas), and parsed once, by parse_json_into (json_parse.h).
using Body = nlohmann::ordered_json;

Unexpected<ApiError> bad(std::string message, std::string param) {
  return unexpected(ApiError{400, std::move(message), std::move(param), ""});
}

Expected<Generation, ApiError> validate(const Body& body, bool chat, const SimWorkerConfig& config,
                                        const text::ModelText* model_text) {
  Generation g;
  g.chat = chat;
  // ---- The rules the router reads too, by the one reader (lib/openai/request_parse.h): model,
  // stream, cache_salt, the output bound, the prompt.
  std::vector<std::string> served;
  served.reserve(1 + config.lora_adapters.size());
  served.push_back(config.model_name);
  served.insert(served.end(), config.lora_adapters.begin(), config.lora_adapters.end());
  const http::PromptSource source{model_text, model_text ? &thread_encode_scratch() : nullptr, kFakeVocabSize - 1};
  std::string text;
  auto fields = http::read_generate_request(body, chat, served, source, text, g.prompt);
  if (!fields) return unexpected(fields.error());
  if (fields->model > 0) {
    g.lora_name = served[fields->model];
    g.lora_id = static_cast<std::int32_t>(fields->model);
  }
  g.stream = fields->stream;
  g.cache_salt = std::string(fields->cache_salt);
  const char* max_key = fields->bound.field;
  const std::int64_t max_tokens = fields->bound.tokens;
  const bool batch = fields->batch;

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
