#include "disagg/fake_tokenizer.h"

#include <array>

#include "disagg/fnv1a.h"

namespace disagg {

namespace {

// ASCII whitespace of rule 1, as a table: the router tokenizes every prompt, so this loop is on
// its request path.
constexpr std::array<bool, 256> kSpace = [] {
  std::array<bool, 256> t{};
  for (const unsigned char c : {' ', '\t', '\n', '\r', '\f', '\v'}) t[c] = true;
  return t;
}();

TokenId id_of(std::uint64_t fnv) {
  return static_cast<TokenId>(256 + fnv % static_cast<std::uint64_t>(kFakeVocabSize - 256));
}

}  // namespace

TokenId fake_token_id(std::string_view piece) {
  return id_of(fnv1a64(piece));
}

void fake_tokenize(std::string_view text, std::vector<TokenId>& out) {
  // One pass: each byte either ends the piece (whitespace) or joins its hash; a piece also ends
  // at 4 bytes. The same tokens as splitting at whitespace and cutting runs into 4-byte pieces.
  std::uint64_t h = kFnv1aOffset;
  int len = 0;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (kSpace[c]) {
      if (len != 0) {
        out.push_back(id_of(h));
        h = kFnv1aOffset;
        len = 0;
      }
      continue;
    }
    h = fnv1a_step(h, c);
    if (++len == 4) {
      out.push_back(id_of(h));
      h = kFnv1aOffset;
      len = 0;
    }
  }
  if (len != 0) out.push_back(id_of(h));
}

}  // namespace disagg
