// disagg/block_hash.h — chained hashes of full KV blocks, the keys of the prefix cache.
//
// The hash of block i covers its parent's hash and the block's own token ids, so equal hashes mean
// equal prefixes (up to 64-bit collisions): hash_i = H(hash_{i-1}, tokens[i*B, (i+1)*B)), with
// hash_{-1} = kRootBlockHash. Only full blocks are hashed; a partial last block is never cached.
// These hashes key the simulator's own pools; the router's index takes vLLM's hashes from KV events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace disagg {

/// A block's chained hash.
using BlockHash = std::uint64_t;

/// A token id (vLLM token ids fit in 32 bits).
using TokenId = std::int32_t;

/// Parent hash of the first block of every sequence. Pass another value as `parent` to separate
/// namespaces (e.g. LoRA adapters or tenants whose caches must not be shared).
inline constexpr BlockHash kRootBlockHash = 0x6a09e667f3bcc908ULL;

/// Hash of one block: its parent's hash and its tokens, in order. Never allocates.
BlockHash hash_block(BlockHash parent, std::span<const TokenId> tokens) noexcept;

/// Writes the chained hashes of the full blocks of `tokens` into `out`, starting from `parent`.
/// Returns how many were written: min(tokens.size() / block_size, out.size()).
/// Precondition: block_size >= 1. Never allocates.
std::size_t hash_blocks(std::span<const TokenId> tokens, std::size_t block_size, BlockHash parent,
                        std::span<BlockHash> out) noexcept;

/// vLLM's extra keys that a request names and a router can therefore reproduce: the LoRA adapter's
/// name, which vLLM mixes into every block's hash, and the request's cache_salt, which it mixes into
/// the first block's only (vllm/v1/core/kv_cache_utils.py, generate_block_hash_extra_keys). Either
/// changes block 0's hash and so, through the chain, every later block's: starting a chain from
/// chain_root(lora, salt) makes two requests' keys equal exactly where vLLM's hashes are equal
/// (collisions aside). Multimodal inputs and prompt embeddings are not covered (a request's keys
/// cannot reproduce them). This is the one home of the rule: the router's request keys, its keys
/// of vLLM's events (block_keyer.h) and the sim-worker's prefix cache all start chains here.
/// The digest of one extra key (FNV-1a 64 of its bytes); never 0, so 0 can mean "none".
std::uint64_t extra_key_digest(std::string_view key) noexcept;

/// The parent hash of a sequence's first block given the digests of its LoRA name and cache_salt
/// (0 = none): kRootBlockHash when both are 0, else a value derived from both (the two keys are
/// mixed in distinct roles, so a salt never equals an adapter of the same name).
BlockHash chain_root(std::uint64_t lora, std::uint64_t cache_salt) noexcept;

}  // namespace disagg
