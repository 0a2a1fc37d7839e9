// fake_tokenizer.h — the sim-worker's filler text around the shared fake tokenizer
// (disagg/fake_tokenizer.h: the tokenizer rule and the chat template, FakeChatPrompt, that the
// router relies on).
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
using disagg::FakeChatPrompt;
using disagg::kFakeVocabSize;

/// Seed of a request's filler text: a hash of its prompt tokens.
std::uint64_t filler_seed(std::span<const TokenId> prompt);

/// The k-th generated word (without the trailing space). Precondition: k >= 0.
std::string_view filler_word(std::uint64_t seed, std::int32_t k);

/// Token id of the k-th generated word: fake_token_id(filler_word(seed, k)).
TokenId filler_token(std::uint64_t seed, std::int32_t k);

}  // namespace disagg::sim_worker
