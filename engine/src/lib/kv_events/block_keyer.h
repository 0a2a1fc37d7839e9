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
// A sequence's first block chains from chain_root(lora, cache_salt) (disagg/block_hash.h), the
// digests of the LoRA name and cache_salt the event carries (lora_name, extra_keys), as the router
// starts a request's chain from the adapter its `model` names and its `cache_salt`: a salted or LoRA
// request matches exactly the blocks vLLM would reuse for it. Later blocks chain from their parent's
// key, which carries the same root.
//
// One keyer holds one tier of one endpoint (the caller keeps one per endpoint and medium): vLLM's
// offloading connectors publish a CPU or storage copy under the GPU block's hash, so a shared table
// would lose the GPU translation when the copy is evicted. A lower tier's event may lean on the GPU
// keyer: its parent is looked up there when this keyer does not know it (stored()'s `fallback`),
// and a copy published without token ids (OffloadingConnector's default placeholder) takes the GPU
// translation of the same hash (copy_from()). The GPU keyer is only read.
//
// What is not keyed, and why (Skip): blocks without token ids (the caller may index the publisher's
// hashes as they are, as before), a parent block the keyer never saw (its chain is unknown: after a
// lost event or a replay that did not reach back), a block size the router's does not divide,
// blocks hashed with extra keys a request cannot name (multimodal inputs, prompt embeddings, a LoRA
// given only by lora_id: token ids alone do not identify them), and KV cache groups other than the
// one prefix routing matches (models with sliding-window or Mamba groups next to full attention: the
// first full-attention group seen).
//
// Bounded: at most `capacity` router keys are remembered (so at most `capacity` publisher hashes:
// as many as the endpoint's share of index entries); beyond it the oldest blocks are forgotten
// first (their keys stay indexed; a later child of a forgotten block is an unknown parent). A hash
// stored again counts as new. All memory is reserved at construction, about 40 bytes per unit of
// capacity: the keys and blocks in insertion rings, and an open-addressed table from publisher
// hash to block (linear probing, deletion by backward shift, at most half full), so an event
// allocates nothing and a lookup touches about two cache lines. The arrays are zeroed by the
// kernel (calloc), so a ring's pages are resident only once the ring reaches them. Not thread-safe: the router calls
// it under its table lock, on the KV-event thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
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
  /// `fallback` (may be null; not this keyer): where to look the parent up when this keyer does not
  /// know it (the GPU keyer, for a lower tier's copy of a GPU chain).
  Skip stored(const KvEventRecord& e, std::span<const BlockHash> hashes, std::span<const TokenId> tokens,
              std::vector<BlockHash>& keys, const BlockKeyer* fallback = nullptr);

  /// A BlockStored without token ids whose publisher `hashes` name blocks `other` keyed (a lower
  /// tier's copy of GPU blocks): for each hash `other` knows, appends its router keys to `keys` and
  /// remembers them here, so that this tier's removal of it finds them. Hashes `other` does not
  /// know are appended to `unknown`. `other` is only read. Precondition: &other != this.
  void copy_from(const BlockKeyer& other, std::span<const BlockHash> hashes, std::vector<BlockHash>& keys,
                 std::vector<BlockHash>& unknown);

  /// A BlockRemoved: appends the router keys of the publisher `hashes` it knows, and forgets them.
  /// `group`: the event's group_idx (-1 absent); removals of other groups are ignored.
  void removed(std::span<const BlockHash> hashes, std::int32_t group, std::vector<BlockHash>& keys);

  /// Forgets everything (the endpoint's index entries were dropped).
  void clear();

  /// Publisher hashes remembered.
  std::size_t size() const { return live_; }

  /// The routing KV cache group once learned, else -1.
  std::int32_t group() const { return group_; }

  /// Calls fn(publisher, keys) for every block remembered, oldest first (a peer snapshot,
  /// peer_snapshot.h). `keys` is valid during the call only.
  template <class Fn>
  void for_each(Fn&& fn) const {
    BlockHash buf[kMaxKeysPerBlock];
    for (std::uint64_t q = block_tail_; q != block_head_; ++q) {
      const Block& b = blocks_[q % block_cap_];
      if (!b.live) continue;
      for (std::size_t k = 0; k < b.count; ++k) buf[k] = keys_[(b.key_begin + k) % key_cap_];
      fn(b.publisher, std::span<const BlockHash>(buf, b.count));
    }
  }

  /// Remembers block `publisher` with the router `keys` a peer computed for it (a peer snapshot's
  /// entry), as stored() would have; `group`: the peer's routing group (-1: unknown), taken when
  /// this keyer has none yet. Returns false (nothing remembered) when `keys` is empty or longer
  /// than kMaxKeysPerBlock, or `group` differs from this keyer's.
  bool restore(BlockHash publisher, std::span<const BlockHash> keys, std::int32_t group);

 private:
  // A remembered block: its publisher hash and its router keys, keys_[key_begin .. + count) (ring
  // positions: modulo the key ring's size).
  struct Block {
    BlockHash publisher = 0;
    std::uint64_t key_begin = 0;
    std::uint8_t count = 0;
    bool live = false;  // in the table (not removed, not stored again since)
  };
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  template <class T>
  using Zeroed = std::unique_ptr<T[], Free>;
  template <class T>
  static Zeroed<T> zeroed(std::size_t n);

  bool routing_group(const KvEventRecord& e);
  std::size_t home(BlockHash publisher) const;
  // The table slot naming a live block with this publisher hash, or npos.
  std::size_t find(BlockHash publisher) const;
  // Takes the block in table slot `slot` out of the table (backward-shift deletion).
  void unlink(std::size_t slot);
  // Appends a block of `count` keys (forgetting the oldest blocks as the bound needs); returns it.
  Block& append(BlockHash publisher, std::size_t count);
  // The last router key of the block in table slot `slot` (what its children chain from).
  BlockHash last_key(std::size_t slot) const {
    const Block& b = blocks_[table_[slot] - 1];
    return keys_[(b.key_begin + b.count - 1U) % key_cap_];
  }

  std::int32_t router_block_size_;
  std::int32_t group_ = -1;  // the routing group, once learned
  std::size_t key_cap_ = 0;
  std::size_t block_cap_ = 0;
  Zeroed<BlockHash> keys_;        // key ring of key_cap_
  Zeroed<Block> blocks_;          // block ring of block_cap_, in insertion order
  Zeroed<std::uint32_t> table_;   // publisher hash -> 1 + index in blocks_; 0 when free
  std::size_t mask_ = 0;          // the table's size - 1
  std::uint64_t key_head_ = 0;    // keys appended so far
  std::uint64_t block_head_ = 0;  // blocks appended so far
  std::uint64_t block_tail_ = 0;  // the oldest block still in the rings
  std::size_t live_ = 0;
};

std::string_view to_string(BlockKeyer::Skip skip);

}  // namespace disagg::router
