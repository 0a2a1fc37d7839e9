// block_keyer.h — one endpoint's KV-event block hashes -> the router's own block keys.
//
// vLLM names a stored block by its own hash (SHA-256 or a builtin hash of the token ids, with a
// seed, at vLLM's block size), which the router cannot reproduce from a request. The events carry
// the token ids, so the router keys each block by its own chained hash of those ids at its own
// block size (disagg/block_hash.h, the hash it computes for requests): prefix matches then hold
// whatever vLLM's hash function, seed and block size, and survive a router restart (vLLM's replay
// rebuilds the same keys). A publisher block of B_v tokens gives B_v / B_r router keys (B_r, the
// router's block size, must divide B_v; at most kMaxKeysPerBlock of them).
//
// What is not keyed, and why (Skip): blocks without token ids (the caller may index the publisher's
// hashes as they are, as before), a parent block the keyer never saw (its chain is unknown: after a
// lost event or a replay that did not reach back), a block size the router's does not divide,
// blocks hashed with a LoRA or extra keys (multimodal inputs, cache_salt: token ids alone do not
// identify them), and KV cache groups other than the one prefix routing matches (models with
// sliding-window or Mamba groups next to full attention: the first full-attention group seen).
//
// Bounded: at most `capacity` publisher hashes are remembered; beyond it the oldest are forgotten
// (their blocks stay indexed; a later child of a forgotten block is an unknown parent). Not
// thread-safe: the router calls it under its table lock. The map's buckets are reserved up front;
// each remembered hash is one node allocation (on the KV-event thread, not a request's path).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "disagg/block_hash.h"
#include "kv_event_decoder.h"

namespace disagg::router {

class BlockKeyer {
 public:
  static constexpr std::int32_t kMaxKeysPerBlock = 8;

  enum class Skip : std::uint8_t { none, no_tokens, unknown_parent, block_size, beyond_tokens, other_group };
  static constexpr std::size_t kSkipCount = 6;

  BlockKeyer(std::int32_t router_block_size, std::size_t capacity);

  /// A BlockStored `e` with its publisher `hashes` and `tokens`: appends the router keys of every
  /// block to `keys` and returns Skip::none, or returns why nothing was keyed (`keys` unchanged).
  Skip stored(const KvEventRecord& e, std::span<const BlockHash> hashes, std::span<const TokenId> tokens,
              std::vector<BlockHash>& keys);

  /// A BlockRemoved: appends the router keys of the publisher `hashes` it knows, and forgets them.
  /// `group`: the event's group_idx (-1 absent); removals of other groups are ignored.
  void removed(std::span<const BlockHash> hashes, std::int32_t group, std::vector<BlockHash>& keys);

  /// Forgets everything (the endpoint's index entries were dropped).
  void clear();

  /// Publisher hashes remembered.
  std::size_t size() const { return map_.size(); }

 private:
  struct Entry {
    std::array<BlockHash, kMaxKeysPerBlock> keys{};
    std::uint8_t count = 0;
  };
  bool routing_group(const KvEventRecord& e);
  void remember(BlockHash publisher_hash, const Entry& entry);

  std::int32_t router_block_size_;
  std::size_t capacity_;
  std::int32_t group_ = -1;  // the routing group, once learned
  std::unordered_map<BlockHash, Entry> map_;
  std::vector<BlockHash> order_;  // insertion ring for the bound
  std::size_t next_ = 0;
};

std::string_view to_string(BlockKeyer::Skip skip);

}  // namespace disagg::router
