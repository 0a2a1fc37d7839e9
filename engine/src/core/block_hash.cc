#include "disagg/block_hash.h"
#include "disagg/fnv1a.h"

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

// Word w of a block: tokens 2w and 2w + 1.
inline std::uint64_t word_at(const TokenId* t) noexcept {
  return static_cast<std::uint32_t>(t[0]) | static_cast<std::uint64_t>(static_cast<std::uint32_t>(t[1])) << 32;
}

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

}  // namespace

BlockHash hash_block(BlockHash parent, std::span<const TokenId> tokens) noexcept {
  // Four lanes, each a chain of mixes over every fourth word (two tokens per word). One chain over
  // all words is bound by its latency: a 64-token block took 32 mixes in a row (about 400 cycles,
  // and the router hashes every prompt). The lanes' multiplies overlap, and they do not depend on
  // the parent, so a prompt's next block is hashed while this one's result is still being
  // combined: only the last three mixes wait for the parent.
  std::uint64_t lane[4] = {0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL};
  const std::size_t n = tokens.size();
  const std::size_t words = n / 2;
  const TokenId* t = tokens.data();
  std::size_t w = 0;
  for (; w + 4 <= words; w += 4) {
    for (std::size_t k = 0; k < 4; ++k) lane[k] = mix(lane[k] ^ word_at(t + 2 * (w + k))) + kGolden;
  }
  for (std::size_t k = 0; w < words; ++w, ++k) lane[k] = mix(lane[k] ^ word_at(t + 2 * w)) + kGolden;
  // An odd last token has a lane of its own.
  const std::uint64_t odd = n % 2 != 0 ? mix(static_cast<std::uint32_t>(t[n - 1]) ^ kGolden) : 0;
  // Lanes combine asymmetrically (rotations, then mixes in a fixed order), so words that trade
  // lanes give another hash; the length is folded in so that blocks of different sizes never
  // share one.
  const std::uint64_t body = mix(mix(lane[0] ^ ((lane[1] << 17) | (lane[1] >> 47))) ^
                                 mix(lane[2] ^ ((lane[3] << 31) | (lane[3] >> 33))) ^ odd);
  return mix(mix(parent ^ kGolden) ^ body ^ (static_cast<std::uint64_t>(n) << 32));
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

std::uint64_t extra_key_digest(std::string_view key) noexcept {
  const std::uint64_t h = fnv1a64(key);
  return h == 0 ? 1 : h;
}

BlockHash chain_root(std::uint64_t lora, std::uint64_t cache_salt) noexcept {
  if (lora == 0 && cache_salt == 0) return kRootBlockHash;
  // Distinct odd constants per role, then the avalanche mix: (lora a, salt 0) != (lora 0, salt a).
  return mix(mix(kRootBlockHash ^ mix(lora ^ 0x243f6a8885a308d3ULL)) ^ mix(cache_salt ^ 0x13198a2e03707345ULL));
}

}  // namespace disagg
