#include "disagg/block_hash.h"

namespace disagg {

namespace {

// The splitmix64 finalizer: a cheap bijective mix with full avalanche, so that a change in any
// token changes every bit of the result with probability about one half.
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

BlockHash hash_block(BlockHash parent, std::span<const TokenId> tokens) noexcept {
  std::uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ULL);
  // Two tokens per mix (one 64-bit word): half the multiplies of a mix per token, and still
  // order-dependent, since every word is mixed before the next one enters.
  const std::size_t n = tokens.size();
  std::size_t i = 0;
  for (; i + 1 < n; i += 2) {
    const std::uint64_t word = static_cast<std::uint32_t>(tokens[i]) |
                               static_cast<std::uint64_t>(static_cast<std::uint32_t>(tokens[i + 1])) << 32;
    h = mix(h ^ word) + 0x9e3779b97f4a7c15ULL;
  }
  if (i < n) h = mix(h ^ static_cast<std::uint32_t>(tokens[i])) + 0x9e3779b97f4a7c15ULL;
  // Length is folded in so that blocks of different sizes never share a hash.
  return mix(h ^ (static_cast<std::uint64_t>(tokens.size()) << 32));
}

std::size_t hash_blocks(std::span<const TokenId> tokens, std::size_t block_size, BlockHash parent,
                        std::span<BlockHash> out) noexcept {
  std::size_t n = tokens.size() / block_size;
  if (n > out.size()) n = out.size();
  BlockHash h = parent;
  for (std::size_t i = 0; i < n; ++i) {
    h = hash_block(h, tokens.subspan(i * block_size, block_size));
    out[i] = h;
  }
  return n;
}

}  // namespace disagg
