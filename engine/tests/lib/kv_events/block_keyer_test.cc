// BlockKeyer: publisher block hashes (any function, seed and block size) -> the router's own keys,
// which equal the hashes the router computes for a request with the same tokens.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "block_keyer.h"

namespace disagg::router {
namespace {

std::vector<TokenId> tokens(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TokenId> t(n);
  for (auto& x : t) x = static_cast<TokenId>(rng() % 151000);
  return t;
}

// What the router computes for a request with these tokens (router.cc: hash_blocks, kRootBlockHash).
std::vector<BlockHash> request_hashes(const std::vector<TokenId>& t, std::size_t block) {
  std::vector<BlockHash> h(t.size() / block);
  h.resize(hash_blocks(t, block, kRootBlockHash, h));
  return h;
}

KvEventRecord stored_event(std::int32_t block_size, std::size_t blocks, std::optional<BlockHash> parent) {
  KvEventRecord e;
  e.block_size = block_size;
  e.hash_count = static_cast<std::uint32_t>(blocks);
  e.has_parent = parent.has_value();
  e.parent = parent.value_or(0);
  return e;
}

TEST(BlockKeyer, KeysEqualTheRequestsHashesWhateverThePublishersHashAndBlockSize) {
  // GIVEN 256 tokens stored by vLLM as four 64-token blocks, in two events (the second a child of
  // the first), under SHA-like hashes the router cannot reproduce
  const auto t = tokens(256, 7);
  BlockKeyer keyer(16, 1024);
  std::vector<BlockHash> keys;
  const std::vector<BlockHash> vllm = {0xa1b2c3d4e5f60718ULL, 0x1122334455667788ULL, 0xffffffffffffffffULL,
                                       0x8000000000000001ULL};
  ASSERT_EQ(keyer.stored(stored_event(64, 2, std::nullopt), std::span(vllm).first(2), std::span(t).first(128), keys),
            BlockKeyer::Skip::none);
  ASSERT_EQ(keyer.stored(stored_event(64, 2, vllm[1]), std::span(vllm).subspan(2), std::span(t).subspan(128), keys),
            BlockKeyer::Skip::none);
  // THEN the 16 router keys are the request's own 16-token block hashes
  EXPECT_EQ(keys, request_hashes(t, 16));
  EXPECT_EQ(keyer.size(), 4u);
  // AND a removal names them by vLLM's hash
  std::vector<BlockHash> removed;
  keyer.removed(std::span(vllm).subspan(3, 1), -1, removed);
  EXPECT_EQ(removed, std::vector<BlockHash>(keys.end() - 4, keys.end()));
  EXPECT_EQ(keyer.size(), 3u);
}

TEST(BlockKeyer, SaysWhyABlockCannotBeKeyed) {
  const auto t = tokens(64, 3);
  BlockKeyer keyer(16, 1024);
  std::vector<BlockHash> keys;
  const std::vector<BlockHash> h = {42, 43, 44, 45};
  // A parent never seen (a lost event): its chain is unknown.
  EXPECT_EQ(keyer.stored(stored_event(16, 4, 999), h, t, keys), BlockKeyer::Skip::unknown_parent);
  // A publisher block size the router's does not divide.
  BlockKeyer coarse(32, 1024);
  EXPECT_EQ(coarse.stored(stored_event(16, 4, std::nullopt), h, t, keys), BlockKeyer::Skip::block_size);
  // A LoRA or extra keys entered vLLM's hash.
  KvEventRecord lora = stored_event(16, 4, std::nullopt);
  lora.keyed_beyond_tokens = true;
  EXPECT_EQ(keyer.stored(lora, h, t, keys), BlockKeyer::Skip::beyond_tokens);
  // No token ids.
  EXPECT_EQ(keyer.stored(stored_event(16, 4, std::nullopt), h, {}, keys), BlockKeyer::Skip::no_tokens);
  EXPECT_TRUE(keys.empty());
  // Groups: the first full-attention group routes; a sliding-window group and another group do not.
  KvEventRecord sliding = stored_event(16, 4, std::nullopt);
  sliding.group = 1;
  sliding.kind = KvCacheKind::other;
  EXPECT_EQ(keyer.stored(sliding, h, t, keys), BlockKeyer::Skip::other_group);
  KvEventRecord full = stored_event(16, 4, std::nullopt);
  full.group = 0;
  full.kind = KvCacheKind::full_attention;
  EXPECT_EQ(keyer.stored(full, h, t, keys), BlockKeyer::Skip::none);
  KvEventRecord other = stored_event(16, 4, std::nullopt);
  other.group = 2;
  EXPECT_EQ(keyer.stored(other, h, t, keys), BlockKeyer::Skip::other_group);
  std::vector<BlockHash> removed;
  keyer.removed(h, 2, removed);  // another group's removal leaves group 0's blocks
  EXPECT_TRUE(removed.empty());
  EXPECT_EQ(keyer.size(), 4u);
}

TEST(BlockKeyer, RemembersAtMostItsCapacity) {
  BlockKeyer keyer(16, 100);
  std::vector<BlockHash> keys;
  for (std::uint32_t i = 0; i < 1000; ++i) {
    const auto t = tokens(16, i);
    const std::vector<BlockHash> h = {0x9000000000000000ULL + i};
    keys.clear();
    ASSERT_EQ(keyer.stored(stored_event(16, 1, std::nullopt), h, t, keys), BlockKeyer::Skip::none);
    ASSERT_LE(keyer.size(), 100u);
  }
  // The newest are the ones kept: a child of the last block is keyed, of the first is not.
  const auto t = tokens(16, 5000);
  keys.clear();
  EXPECT_EQ(keyer.stored(stored_event(16, 1, 0x9000000000000000ULL + 999), std::vector<BlockHash>{1}, t, keys),
            BlockKeyer::Skip::none);
  EXPECT_EQ(keyer.stored(stored_event(16, 1, 0x9000000000000000ULL), std::vector<BlockHash>{2}, t, keys),
            BlockKeyer::Skip::unknown_parent);
}

// The flat table against a plain model of its contract: blocks in insertion order (a hash stored
// again counts as new), the oldest forgotten first while the blocks or their keys would pass the
// capacity (removed blocks keep their ring space until the ring reaches them).
TEST(BlockKeyer, MatchesAModelOfItsBoundUnderRandomStoresAndRemovals) {
  constexpr std::size_t kCapacity = 64;
  struct ModelBlock {
    BlockHash hash;
    std::vector<BlockHash> keys;
    bool live;
  };
  std::deque<ModelBlock> ring;
  std::map<BlockHash, std::size_t> live_at;  // hash -> its block's position counted from the ring's start
  std::size_t popped = 0;
  const auto live_block = [&](BlockHash h) -> ModelBlock* {
    const auto it = live_at.find(h);
    return it == live_at.end() ? nullptr : &ring[it->second - popped];
  };
  const auto forget = [&](BlockHash h) {
    if (ModelBlock* b = live_block(h)) {
      b->live = false;
      live_at.erase(h);
    }
  };
  BlockKeyer keyer(16, kCapacity);
  std::mt19937 rng(42);
  std::vector<BlockHash> keys, removed;
  for (int step = 0; step < 20000; ++step) {
    const BlockHash h = rng() % 200;  // few hashes: repeats, removals of absent ones
    if (rng() % 3 == 0) {
      removed.clear();
      keyer.removed(std::vector<BlockHash>{h}, -1, removed);
      const ModelBlock* b = live_block(h);
      ASSERT_EQ(removed, b ? b->keys : std::vector<BlockHash>{}) << "step " << step;
      forget(h);
    } else {
      const std::size_t count = std::size_t{1} << (rng() % 3);  // 16, 32 or 64 tokens: 1, 2 or 4 keys
      const auto t = tokens(16 * count, static_cast<std::uint32_t>(step));
      const bool with_parent = rng() % 2 == 0;
      const BlockHash parent = rng() % 200;
      keys.clear();
      const BlockKeyer::Skip skip = keyer.stored(
          stored_event(static_cast<std::int32_t>(16 * count), 1, with_parent ? std::optional(parent) : std::nullopt),
          std::vector<BlockHash>{h}, t, keys);
      const ModelBlock* p = with_parent ? live_block(parent) : nullptr;
      if (with_parent && p == nullptr) {
        ASSERT_EQ(skip, BlockKeyer::Skip::unknown_parent) << "step " << step;
        continue;
      }
      ASSERT_EQ(skip, BlockKeyer::Skip::none) << "step " << step;
      std::vector<BlockHash> want(count);
      hash_blocks(t, 16, p ? p->keys.back() : kRootBlockHash, want);
      ASSERT_EQ(keys, want);
      forget(h);
      const auto used = [&] {
        std::size_t n = 0;
        for (const ModelBlock& b : ring) n += b.keys.size();
        return n;
      };
      while (ring.size() == kCapacity || (!ring.empty() && used() + count > kCapacity)) {
        if (ring.front().live) live_at.erase(ring.front().hash);
        ring.pop_front();
        ++popped;
      }
      ring.push_back(ModelBlock{h, want, true});
      live_at[h] = popped + ring.size() - 1;
    }
    ASSERT_EQ(keyer.size(), live_at.size()) << "step " << step;
  }
  // Every hash the model still holds is there with its keys; then the keyer is empty.
  for (BlockHash h = 0; h < 200; ++h) {
    removed.clear();
    keyer.removed(std::vector<BlockHash>{h}, -1, removed);
    const ModelBlock* b = live_block(h);
    ASSERT_EQ(removed, b ? b->keys : std::vector<BlockHash>{}) << "hash " << h;
  }
  EXPECT_EQ(keyer.size(), 0u);
}

}  // namespace
}  // namespace disagg::router
