// disagg/fnv1a.h — 64-bit FNV-1a, the engine's one non-cryptographic string hash (block-key extras,
// KV-event byte folding, session and endpoint keys, the fake tokenizers' ids). Not for anything an
// adversary picks to collide: the block hash chain (disagg/block_hash.h) is vLLM's own.
#pragma once

#include <cstdint>
#include <string_view>

namespace disagg {

inline constexpr std::uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnv1aPrime = 0x100000001b3ULL;

/// One byte into a running FNV-1a hash.
constexpr std::uint64_t fnv1a_step(std::uint64_t h, unsigned char byte) {
  return (h ^ byte) * kFnv1aPrime;
}

/// FNV-1a of `bytes`, from FNV's offset basis or a caller's seed. No allocation.
constexpr std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t seed = kFnv1aOffset) {
  std::uint64_t h = seed;
  for (const char c : bytes) h = fnv1a_step(h, static_cast<unsigned char>(c));
  return h;
}

static_assert(fnv1a64("") == kFnv1aOffset);
static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);  // the published test vector

}  // namespace disagg
