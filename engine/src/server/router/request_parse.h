// request_parse.h — validates an OpenAI completions / chat request and derives its prompt tokens.
//
// Tokens come from the sim-worker's deterministic fake tokenizer (sim_worker/fake_tokenizer.h:
// split at ASCII whitespace, pieces of at most 4 bytes, id = 256 + FNV-1a-64(piece) mod
// (128256 - 256); chat rendered as "<|role|>\n" content "\n" per message, then "<|assistant|>\n"),
// re-implemented here so that the router does not link the worker; a parity test keeps the two
// equal. With the same block size and kRootBlockHash, the router's chained block hashes equal the
// hashes the sim-worker publishes in its KV events, so prefix hits line up.
// Real vLLM hashes blocks of its real tokenizer's ids (with its own hash function and seed): the
// router cannot reproduce them without the model's tokenizer, which is out of scope. Against real
// vLLM the index is still fed (and reported), but prefix scores only match if a compatible hashing
// is configured; load, KV pressure and the P/D decider work regardless.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "disagg/block_hash.h"
#include "disagg/expected.h"

namespace disagg::router {

/// Size of the fake vocabulary (the sim-worker's kFakeVocabSize).
inline constexpr std::int32_t kFakeVocabSize = 128256;

/// Token id of one piece (at most 4 bytes, no whitespace).
TokenId fake_token_id(std::string_view piece);

/// Appends the fake tokens of `text` to `out`.
void fake_tokenize(std::string_view text, std::vector<TokenId>& out);

/// An error answered to the client in OpenAI's shape.
struct ApiError {
  unsigned status = 400;
  std::string message;
  std::string param;
  std::string code;
};

/// What the router needs of a request.
struct GenerateRequest {
  std::string model;
  bool stream = false;
  /// max_completion_tokens or max_tokens; 0 when absent.
  std::int64_t max_tokens = 0;
};

/// Validates `body` (a parsed JSON value) as a completions (`chat` false) or chat completions
/// request, fills `out`, and appends its prompt tokens to `tokens` (`scratch` is reused for the
/// rendered chat text). `models`: the served model names; an unknown model is a 404.
/// Failure modes: 400 (not an object, missing or mistyped model / prompt / messages / stream /
/// max_tokens, empty prompt), 404 (unknown model; code "model_not_found").
Expected<void, ApiError> parse_generate_request(const nlohmann::json& body, bool chat,
                                                std::span<const std::string> models,
                                                GenerateRequest& out, std::vector<TokenId>& tokens,
                                                std::string& scratch);

}  // namespace disagg::router
