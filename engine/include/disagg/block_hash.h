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

}  // namespace disagg
