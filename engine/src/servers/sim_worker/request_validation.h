// request_validation.h — the sim-worker's validation of a completions / chat completions body,
// without a socket: the bytes in, the request to run or the error to answer out.
//
// The rules the router reads too (model, stream and stream_options, cache_salt, the output bound,
// prompt / messages, an empty prompt) are read first by the one reader both servers call
// (http::read_generate_request, lib/openai/request_parse.h), so that a body the router refuses gets
// the same status, param, code and message from both (tests/servers/router/request_errors_differential_test.cc
// holds them to it). The worker's own rules run after it: `n` other than 1, a batch of prompts,
// max_tokens beyond the context, kv_transfer_params for another role, prompt + max_tokens beyond the
// context.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/expected.h"
#include "disagg/scheduler.h"
#include "disagg/block_hash.h"
#include "lib/openai/openai_error.h"
#include "sim_worker.h"

namespace disagg::text {
class ModelText;
class EncodeScratch;
}  // namespace disagg::text

namespace disagg::sim_worker {

using http::ApiError;

/// A generation request after validation.
struct Generation {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  std::int32_t max_tokens = 16;
  std::vector<TokenId> prompt;
  RequestKind kind = RequestKind::full;
  std::string lora_name;  // the adapter the request names; empty: the base model
  std::int32_t lora_id = 0;
  std::string cache_salt;
};

/// This thread's scratch for the served model's tokenizer (one per HTTP thread).
text::EncodeScratch& thread_encode_scratch();

/// Validates a POST /v1/completions (`chat` false) or /v1/chat/completions body as the worker
/// serves it: `config` gives the model and LoRA adapter names, max_model_len (resolved, > 0),
/// default_max_tokens and the role; `model_text` the served model's tokenizer and chat template
/// (null: the made-up tokenizer). Needs no running worker.
/// Failure modes: 400 json_too_deep (nesting beyond kMaxRequestJsonDepth, checked before any
/// parse), 400 (not JSON, not an object, a mistyped field, an empty prompt, a batch, n != 1,
/// max_tokens or prompt + max_tokens beyond max_model_len, kv_transfer_params for another role),
/// 404 model_not_found (a model name that is neither the served model nor an adapter).
Expected<Generation, ApiError> validate_generate_request(std::string_view body, bool chat,
                                                         const SimWorkerConfig& config,
                                                         const text::ModelText* model_text = nullptr);

}  // namespace disagg::sim_worker
