#include "fake_tokenizer.h"

#include <array>

#include "disagg/fnv1a.h"

namespace disagg::sim_worker {

namespace {

// Short common English words (<= 4 bytes each, so each is exactly one fake token).
constexpr std::array<std::string_view, 48> kFillerWords = {
    "the",  "of",   "and",  "to",   "in",   "is",   "that", "for",  "it",   "as",   "was",  "with",
    "be",   "by",   "on",   "not",  "this", "are",  "or",   "from", "at",   "but",  "have", "an",
    "they", "you",  "were", "all",  "we",   "one",  "can",  "said", "its",  "more", "when", "will",
    "time", "each", "than", "many", "then", "them", "some", "into", "made", "over", "long", "down"};

}  // namespace

std::uint64_t filler_seed(std::span<const TokenId> prompt) {
  // FNV-1a's step over whole token ids rather than bytes.
  std::uint64_t h = kFnv1aOffset;
  for (TokenId t : prompt) h = (h ^ static_cast<std::uint32_t>(t)) * kFnv1aPrime;
  return h;
}

std::string_view filler_word(std::uint64_t seed, std::int32_t k) {
  return kFillerWords[(seed + 7u * static_cast<std::uint64_t>(k)) % kFillerWords.size()];
}

TokenId filler_token(std::uint64_t seed, std::int32_t k) {
  return fake_token_id(filler_word(seed, k));
}

}  // namespace disagg::sim_worker
