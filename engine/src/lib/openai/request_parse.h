// request_parse.h — validates an OpenAI completions / chat request and derives its prompt tokens.
//
// Tokens come from the served model's own tokenizer and chat template when the router has them
// (PromptTokenizer: text::ModelText, the same code the sim-worker runs with --tokenizer), computed
// as vLLM computes them; without them, from the made-up tokenizer the sim-worker uses by default
// (disagg/fake_tokenizer.h, chat rendered by the same FakeChatPrompt), which a parity test checks.
// Either way, with the same block size and kRootBlockHash, the router's chained block hashes equal
// the hashes the sim-worker publishes in its KV events, so prefix hits line up.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "disagg/block_hash.h"
#include "disagg/fake_tokenizer.h"
#include "disagg/expected.h"
#include "disagg/json_depth.h"
#include "lib/openai/openai_error.h"
#include "lib/openai/openai_request.h"

namespace disagg::text {
class ModelText;
class EncodeScratch;
}  // namespace disagg::text

namespace disagg::router {

/// The served model's tokenizer and chat template, for real token ids. With `model` null, the
/// made-up tokenizer is used.
struct PromptTokenizer {
  const text::ModelText* model = nullptr;
  text::EncodeScratch* scratch = nullptr;  ///< this thread's
};

using disagg::fake_token_id;
using disagg::fake_tokenize;
using disagg::FakeChatPrompt;
using disagg::kFakeVocabSize;

/// An error answered to the client in OpenAI's shape (the one type the sim-worker answers with too).
using ApiError = http::ApiError;

/// What the router needs of a request.
struct GenerateRequest {
  std::string model;
  bool stream = false;
  /// max_completion_tokens or max_tokens; 0 when absent.
  std::int64_t max_tokens = 0;
  /// extra_key_digest of the request's cache_salt (vLLM's field); 0 without one. With the LoRA
  /// adapter `model` may name, it starts the request's block chain (disagg/block_hash.h chain_root).
  std::uint64_t cache_salt = 0;
};

/// The router's document of a request body. Ordered (object members in the client's order) because a
/// chat template iterates objects in that order (tool schemas rendered with tojson), so the one parse
/// serves both the request's fields and the template.
using RequestJson = nlohmann::ordered_json;

/// Parses a request body into a JSON document: the one full parse of a request (the router calls
/// it wherever the fast scan declines). The nesting depth is checked first (json_depth.h), so a
/// body nested deeper than kMaxRequestJsonDepth builds no document at all.
/// Failure modes: 400 naming the depth limit (code "json_too_deep"); 400 "not valid JSON".
Expected<RequestJson, ApiError> parse_request_json(std::string_view body);

}  // namespace disagg::router

namespace disagg::http {

/// What both servers read of a completions or chat request, read by one rule in one order with one
/// set of answers: the router's parse_generate_request and the sim-worker's validate_generate_request
/// (servers/sim_worker/request_validation.h) both start with it, the sim-worker then applies its own
/// rules (n, batches, the context) after it.
struct GenerateFields {
  /// Index into `models` of the model the request names: 0, the base model, also when it names
  /// none (vLLM serves its base model then); i > 0 the i-th name after it (a LoRA adapter).
  std::size_t model = 0;
  bool stream = false;
  /// The request's cache_salt (a view into the body), empty without one.
  std::string_view cache_salt;
  /// max_completion_tokens or max_tokens (read_output_bound).
  OutputBound bound;
  /// A completions request with more than one prompt: its first prompt was read.
  bool batch = false;
};

/// Where prompt tokens come from: the served model's tokenizer and chat template (`model`, with this
/// thread's `scratch`), or, with `model` null, the made-up tokenizer, whose token ids a prompt of ids
/// may use up to `max_token_id`.
struct PromptSource {
  const text::ModelText* model = nullptr;
  text::EncodeScratch* scratch = nullptr;
  std::int64_t max_token_id = 0x7fffffff;
};

/// Reads `body` as a completions (`chat` false) or chat completions request: model (`models`: the
/// served names, the base model first; an unknown name is a 404 listing them), stream and
/// stream_options, cache_salt, the output bound, and the prompt, whose tokens are appended to
/// `tokens` (`text` is reused for the rendered chat). Failure modes: 400 (not an object, a mistyped
/// or missing field, an empty prompt, a chat template error, token ids beyond the vocabulary), 404
/// model_not_found.
Expected<GenerateFields, ApiError> read_generate_request(const nlohmann::ordered_json& body, bool chat,
                                                         std::span<const std::string> models,
                                                         const PromptSource& source, std::string& text,
                                                         std::vector<TokenId>& tokens);

}  // namespace disagg::http

namespace disagg::router {

/// Validates `body` (a parsed JSON value) as a completions (`chat` false) or chat completions
/// request, fills `out`, and appends its prompt tokens to `tokens` (`scratch` is reused for the
/// rendered chat text). `models`: the served model names; an unknown model is a 404.
/// `tokenizer`: the served model's (null: the made-up tokenizer).
/// A chat request's own `chat_template` is rendered instead of the model's (real tokenizer only;
/// text::ModelText::chat_tokens), so its tokens are the ones vLLM caches.
/// Failure modes: 400 (not an object, missing or mistyped model / prompt / messages / stream /
/// max_tokens, a cache_salt that is not a non-empty string (as vLLM), empty prompt, a chat template
/// error, token ids outside the vocabulary), 404
/// (unknown model; code "model_not_found").
Expected<void, ApiError> parse_generate_request(const RequestJson& body, bool chat, std::span<const std::string> models,
                                                GenerateRequest& out, std::vector<TokenId>& tokens,
                                                std::string& scratch, const PromptTokenizer* tokenizer = nullptr);

}  // namespace disagg::router
