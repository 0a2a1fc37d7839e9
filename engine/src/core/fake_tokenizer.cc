#include "disagg/fake_tokenizer.h"

#include <algorithm>

namespace disagg {

namespace {

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

TokenId fake_token_id(std::string_view piece) {
  std::uint64_t h = kFnvOffset;
  for (unsigned char c : piece) {
    h ^= c;
    h *= kFnvPrime;
  }
  return static_cast<TokenId>(256 + h % static_cast<std::uint64_t>(kFakeVocabSize - 256));
}

void fake_tokenize(std::string_view text, std::vector<TokenId>& out) {
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    while (i < n && is_space(text[i])) ++i;
    std::size_t j = i;
    while (j < n && !is_space(text[j])) ++j;
    for (std::size_t p = i; p < j; p += 4) {
      out.push_back(fake_token_id(text.substr(p, std::min<std::size_t>(4, j - p))));
    }
    i = j;
  }
}

}  // namespace disagg
