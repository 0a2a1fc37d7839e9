// fake_tokenizer.h — the deterministic stand-in for a real tokenizer that the sim-worker and the
// router share, so that the router's chained block hashes equal the hashes the sim-worker publishes
// in its KV events (prefix hits line up end to end on loopback).
//
// Rule (stable: routers, workers and tests rely on it):
//   1. The text is split at ASCII whitespace (space, \t, \n, \r, \f, \v); whitespace itself
//      produces no token, so "a b" and "a \n b" give the same tokens.
//   2. Each run of other bytes is cut from its start into pieces of at most 4 bytes.
//   3. A piece's token id = 256 + FNV-1a-64(piece bytes) mod (kFakeVocabSize - 256); ids below 256
//      are never produced (kept for specials).
// Equal text gives equal tokens, and a text that extends another at a whitespace boundary extends
// its tokens, so shared prompt prefixes give prefix-cache hits as with a real tokenizer.
// Real vLLM hashes blocks of its real tokenizer's ids; this rule is for the sim-worker only.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "disagg/block_hash.h"

namespace disagg {

/// Size of the fake vocabulary (that of Llama 3's tokenizer, for realistic id ranges).
inline constexpr std::int32_t kFakeVocabSize = 128256;

/// Token id of one piece (at most 4 bytes, no whitespace). See the rule above.
TokenId fake_token_id(std::string_view piece);

/// Appends the tokens of `text` to `out`. Allocates only when `out` grows past its capacity.
void fake_tokenize(std::string_view text, std::vector<TokenId>& out);

}  // namespace disagg
