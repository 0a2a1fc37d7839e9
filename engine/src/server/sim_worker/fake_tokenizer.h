// fake_tokenizer.h — the sim-worker's prompt rendering and filler text around the shared fake
// tokenizer (disagg/fake_tokenizer.h: the rule the router relies on).
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
#include "disagg/fake_tokenizer.h"

namespace disagg::sim_worker {

using disagg::fake_token_id;
using disagg::fake_tokenize;
using disagg::kFakeVocabSize;

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
