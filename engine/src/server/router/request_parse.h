// request_parse.h — validates an OpenAI completions / chat request and derives its prompt tokens.
//
// Tokens come from the fake tokenizer the sim-worker uses too (disagg/fake_tokenizer.h); chat is
// rendered by the same FakeChatPrompt as the sim-worker's ("<|role|>\n" content "\n" per message,
// then "<|assistant|>\n"), which a parity test checks. With the same block size and kRootBlockHash, the router's chained block hashes equal the
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
#include "disagg/fake_tokenizer.h"
#include "disagg/expected.h"
#include "disagg/json_depth.h"

namespace disagg::router {

using disagg::FakeChatPrompt;
using disagg::fake_token_id;
using disagg::fake_tokenize;
using disagg::kFakeVocabSize;

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

/// Parses a request body into a JSON document: the one full parse of a request (the router calls
/// it wherever the fast scan declines). The nesting depth is checked first (json_depth.h), so a
/// body nested deeper than kMaxRequestJsonDepth builds no document at all.
/// Failure modes: 400 naming the depth limit (code "json_too_deep"); 400 "not valid JSON".
Expected<nlohmann::json, ApiError> parse_request_json(std::string_view body);

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
