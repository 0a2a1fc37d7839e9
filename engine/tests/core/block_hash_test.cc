#include "disagg/block_hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <set>
#include <vector>

namespace disagg {
namespace {

TEST(BlockHash, ChainsParentAndTokens) {
  // GIVEN 10 tokens in blocks of 4
  const std::vector<TokenId> tokens{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::array<BlockHash, 8> out{};
  // WHEN the full blocks are hashed
  const std::size_t n = hash_blocks(tokens, 4, kRootBlockHash, out);
  // THEN the partial block is skipped and each hash chains on its parent
  ASSERT_EQ(n, 2u);
  const BlockHash h0 = hash_block(kRootBlockHash, std::span(tokens).first(4));
  EXPECT_EQ(out[0], h0);
  EXPECT_EQ(out[1], hash_block(h0, std::span(tokens).subspan(4, 4)));
}

TEST(BlockHash, SameBlockUnderDifferentPrefixesDiffers) {
  const std::vector<TokenId> a{1, 2, 3, 4, 9, 9, 9, 9};
  const std::vector<TokenId> b{1, 2, 3, 5, 9, 9, 9, 9};
  std::array<BlockHash, 2> ha{}, hb{};
  hash_blocks(a, 4, kRootBlockHash, ha);
  hash_blocks(b, 4, kRootBlockHash, hb);
  EXPECT_NE(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]);  // same tokens, different parent
}

TEST(BlockHash, DependsOnOrderParentAndLength) {
  const std::vector<TokenId> t{1, 2, 3, 4};
  const std::vector<TokenId> swapped{2, 1, 3, 4};
  EXPECT_NE(hash_block(kRootBlockHash, t), hash_block(kRootBlockHash, swapped));
  EXPECT_NE(hash_block(kRootBlockHash, t), hash_block(kRootBlockHash + 1, t));
  EXPECT_NE(hash_block(kRootBlockHash, std::span(t).first(3)), hash_block(kRootBlockHash, t));
}

TEST(BlockHash, EveryPositionAndEverySwapCounts) {
  // GIVEN blocks of 1 to 64 tokens, odd sizes included: fewer words than lanes, whole rounds of
  // four words, and rounds with words left over
  for (const std::size_t size : {1u, 2u, 3u, 7u, 8u, 9u, 16u, 63u, 64u}) {
    std::vector<TokenId> t(size);
    for (std::size_t i = 0; i < size; ++i) t[i] = static_cast<TokenId>(1000 + 7 * i);
    const BlockHash base = hash_block(kRootBlockHash, t);
    for (std::size_t i = 0; i < size; ++i) {
      // WHEN one token changes THEN the hash does
      std::vector<TokenId> changed = t;
      changed[i] += 1;
      EXPECT_NE(hash_block(kRootBlockHash, changed), base) << size << " tokens, position " << i;
      // AND WHEN two tokens trade places (within a word, a lane, or across lanes) THEN it does too
      for (std::size_t j = i + 1; j < size; ++j) {
        std::vector<TokenId> swapped = t;
        std::swap(swapped[i], swapped[j]);
        EXPECT_NE(hash_block(kRootBlockHash, swapped), base) << size << " tokens, swap " << i << "-" << j;
      }
    }
  }
}

TEST(BlockHash, OneBitInAnyTokenFlipsHalfTheBits) {
  // GIVEN random 64-token blocks and parents
  std::mt19937_64 rng(7);
  double flipped = 0;
  int trials = 0;
  for (int round = 0; round < 2000; ++round) {
    std::array<TokenId, 64> block{};
    for (TokenId& x : block) x = static_cast<TokenId>(rng() % 128'000);
    const BlockHash parent = rng();
    const BlockHash h = hash_block(parent, block);
    // WHEN one bit of one token, or of the parent, flips
    const std::size_t pos = rng() % 65;
    const int bit = static_cast<int>(rng() % 17);
    BlockHash other = 0;
    if (pos == 64) {
      other = hash_block(parent ^ (BlockHash{1} << (rng() % 64)), block);
    } else {
      block[pos] ^= TokenId{1} << bit;
      other = hash_block(parent, block);
    }
    flipped += __builtin_popcountll(h ^ other);
    ++trials;
  }
  // THEN about 32 of the 64 output bits change on average (avalanche)
  EXPECT_NEAR(flipped / trials, 32.0, 1.0);
}

TEST(BlockHash, OutputSpanBoundsTheCount) {
  const std::vector<TokenId> tokens(64, 7);
  std::array<BlockHash, 3> out{};
  EXPECT_EQ(hash_blocks(tokens, 4, kRootBlockHash, out), 3u);
}

TEST(BlockHash, NoCollisionsAmongManyRandomBlocks) {
  // GIVEN 200k random 16-token blocks (seeded)
  std::mt19937 rng(42);
  std::uniform_int_distribution<TokenId> tok(0, 128'000);
  std::set<BlockHash> seen;
  std::array<TokenId, 16> block{};
  for (int i = 0; i < 200'000; ++i) {
    for (TokenId& t : block) t = tok(rng);
    seen.insert(hash_block(kRootBlockHash, block));
  }
  // THEN 64-bit hashes do not collide (expected collisions ~1e-9)
  EXPECT_EQ(seen.size(), 200'000u);
}

}  // namespace
}  // namespace disagg
