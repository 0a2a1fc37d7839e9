// fake_tokenizer.h — the sim-worker's deterministic stand-in for a real tokenizer.
//
// Rule (stable: routers and tests may rely on it):
//   1. The text is split at ASCII whitespace (space, \t, \n, \r, \f, \v); whitespace itself
//      produces no token, so "a b" and "a \n b" give the same tokens.
//   2. Each run of other bytes is cut from its start into pieces of at most 4 bytes.
//   3. A piece's token id = 256 + FNV-1a-64(piece bytes) mod (kFakeVocabSize - 256); ids below 256
//      are never produced (kept for specials).
// Equal text gives equal tokens, and a text that extends another at a whitespace boundary extends
// its tokens, so shared prompt prefixes give prefix-cache hits as with a real tokenizer.
//
// Chat prompts are rendered before tokenizing, one line pair per message:
//   "<|role|>\n" + content + "\n"   ... followed by "<|assistant|>\n"
// so a conversation that grows by turns keeps its earlier tokens.
//
// Generated text is filler: the k-th output token of a request is the word
// kFillerWords[(seed + 7k) mod N] (each word is at most 4 bytes, so one word = one token), streamed
// as "word ". seed = the request's prompt-token hash, so the same prompt yields the same text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/block_hash.h"

namespace disagg::sim_worker {

/// Size of the fake vocabulary (that of Llama 3's tokenizer, for realistic id ranges).
inline constexpr std::int32_t kFakeVocabSize = 128256;

/// Token id of one piece (at most 4 bytes, no whitespace). See the rule above.
TokenId fake_token_id(std::string_view piece);

/// Appends the tokens of `text` to `out`.
void fake_tokenize(std::string_view text, std::vector<TokenId>& out);

/// One chat message for render_chat().
struct ChatMessage {
  std::string role;
  std::string content;
};

/// The chat template above.
std::string render_chat(std::span<const ChatMessage> messages);

/// Seed of a request's filler text: a hash of its prompt tokens.
std::uint64_t filler_seed(std::span<const TokenId> prompt);

/// The k-th generated word (without the trailing space). Precondition: k >= 0.
std::string_view filler_word(std::uint64_t seed, std::int32_t k);

/// Token id of the k-th generated word: fake_token_id(filler_word(seed, k)).
TokenId filler_token(std::uint64_t seed, std::int32_t k);

}  // namespace disagg::sim_worker
