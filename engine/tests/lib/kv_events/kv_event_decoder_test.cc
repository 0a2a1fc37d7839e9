// KV event decoding: both msgspec encodings (from the publisher's encoder, which the sim-worker
// runs, and hand-built: the encoder -> decoder round trip of the codec), hash
// forms, media, unknown events, every truncation and corruption of a valid batch, and the sequence
// tracker's gap / duplicate / restart rules.
#include <gtest/gtest.h>

#include <random>

#include "kv_event_decoder.h"
#include "kv_event_sequence.h"
#include "msgpack_writer.h"

#include "lib/kv_events/kv_event_publisher.h"

namespace disagg::router {
namespace {

using testing::Writer;

std::span<const std::uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

TEST(KvEventDecoder, DecodesTheSimWorkersBatchesInBothEncodings) {
  // GIVEN a batch with each event type, encoded array-like and map-like by the sim-worker
  std::vector<sim_worker::KvEvent> events(3);
  events[0].kind = sim_worker::KvEventKind::block_stored;
  events[0].block_hashes = {0xfedcba9876543210ULL, 7, 1ULL << 63};
  events[0].parent_block_hash = 42;
  events[0].token_ids = std::vector<TokenId>(48, 300);
  events[0].block_size = 16;
  events[1].kind = sim_worker::KvEventKind::block_removed;
  events[1].block_hashes = {7};
  events[2].kind = sim_worker::KvEventKind::all_blocks_cleared;
  for (auto enc : {sim_worker::KvEventEncoding::array_like, sim_worker::KvEventEncoding::map_like}) {
    const std::string payload = sim_worker::encode_event_batch(1700000000.25, events, 3, enc);
    // WHEN it is decoded
    KvEventBatch out;
    auto r = decode_kv_event_batch(bytes_of(payload), out);
    // THEN every field comes back
    ASSERT_TRUE(r) << to_string(r.error().code) << " at " << r.error().offset;
    EXPECT_DOUBLE_EQ(out.ts, 1700000000.25);
    EXPECT_EQ(out.data_parallel_rank, 3);
    ASSERT_EQ(out.events.size(), 3u);
    EXPECT_EQ(out.events[0].type, KvEventType::block_stored);
    EXPECT_EQ(out.events[0].tier, KvTier::gpu);
    EXPECT_TRUE(out.events[0].has_parent);
    EXPECT_EQ(out.events[0].parent, 42u);
    EXPECT_EQ(out.events[0].block_size, 16);
    const auto stored = out.hashes_of(out.events[0]);
    EXPECT_EQ(std::vector<BlockHash>(stored.begin(), stored.end()),
              (std::vector<BlockHash>{0xfedcba9876543210ULL, 7, 1ULL << 63}));
    EXPECT_EQ(out.events[1].type, KvEventType::block_removed);
    ASSERT_EQ(out.hashes_of(out.events[1]).size(), 1u);
    EXPECT_EQ(out.hashes_of(out.events[1])[0], 7u);
    EXPECT_EQ(out.events[2].type, KvEventType::all_blocks_cleared);
    EXPECT_EQ(out.events[2].hash_count, 0u);
  }
}

TEST(KvEventDecoder, SequenceFrameMatchesTheSimWorkers) {
  for (std::int64_t seq : {0LL, 1LL, 255LL, 256LL, 1LL << 40, -1LL}) {
    EXPECT_EQ(kv_wire::decode_seq(bytes_of(sim_worker::encode_seq(seq))), seq);
  }
}

TEST(KvEventDecoder, MapLikeWithUnknownKeysTagLastAndByteHashes) {
  // GIVEN a map-like batch whose events carry extra keys, the tag after the fields, byte-string
  // hashes (8 bytes and 32 bytes), a CPU medium and a negative (int64) hash
  Writer w;
  const std::string h8("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  const std::string h32(32, '\x5a');
  w.map(4).str("future_field").array(2).u64(1).map(1).str("x").nil();
  w.str("events").array(3);
  w.map(5)
      .str("block_hashes")
      .array(2)
      .bin(h8)
      .bin(h32)
      .str("medium")
      .str("cpu")
      .str("extra_keys")
      .nil()
      .str("lora_name")
      .nil()
      .str("type")
      .str("BlockStored");
  w.map(2).str("type").str("BlockRemoved").str("block_hashes").array(1).i64(-2);
  w.map(2).str("type").str("AllBlocksCleared").str("medium").str("GPU");
  w.str("ts").u64(5).str("data_parallel_rank").nil();
  KvEventBatch out;
  // WHEN decoded
  auto r = decode_kv_event_batch(bytes_of(w.bytes()), out);
  // THEN hashes are folded stably, the medium maps to the CPU tier, int64 reinterprets as uint64
  ASSERT_TRUE(r) << to_string(r.error().code);
  EXPECT_EQ(out.data_parallel_rank, -1);
  EXPECT_DOUBLE_EQ(out.ts, 5);
  ASSERT_EQ(out.events.size(), 3u);
  EXPECT_EQ(out.events[0].tier, KvTier::cpu);
  ASSERT_EQ(out.events[0].hash_count, 2u);
  EXPECT_EQ(out.hashes_of(out.events[0])[0], 0x0102030405060708ULL);
  KvEventBatch again;
  ASSERT_TRUE(decode_kv_event_batch(bytes_of(w.bytes()), again));
  EXPECT_EQ(again.hashes_of(again.events[0])[1], out.hashes_of(out.events[0])[1]);
  EXPECT_EQ(out.hashes_of(out.events[1])[0], static_cast<BlockHash>(-2));
  EXPECT_EQ(out.events[2].type, KvEventType::all_blocks_cleared);
}

TEST(KvEventDecoder, CurrentVllmFieldsTokensGroupsAndKeysBeyondTokens) {
  // GIVEN a batch as current vLLM encodes it (vllm/distributed/kv_events.py at 0181ea3): an
  // array-like BlockStored with every field (32-byte hashes, token ids, extra_keys, group_idx,
  // kv_cache_spec_kind, the sliding window), a BlockRemoved with its group, and map-like events
  // with a LoRA name and with extra keys, mixed in one positional batch
  Writer w;
  const std::string h32a(32, '\x11'), h32b(32, '\x22');
  w.array(3).f64(2.5).array(4);
  w.array(12)
      .str("BlockStored")
      .array(2)
      .bin(h32a)
      .bin(h32b)
      .nil()
      .array(4)
      .u64(7)
      .u64(8)
      .u64(9)
      .u64(151643)
      .u64(2)
      .nil()
      .str("GPU")
      .nil()
      .array(2)
      .nil()
      .nil()
      .u64(1)
      .str("SlidingWindowSpec")
      .u64(4096);
  w.array(4).str("BlockRemoved").array(1).bin(h32a).str("GPU").u64(1);
  w.map(6)
      .str("type")
      .str("BlockStored")
      .str("block_hashes")
      .array(1)
      .u64(~0ULL)
      .str("token_ids")
      .array(2)
      .u64(1)
      .u64(2)
      .str("lora_name")
      .str("adapter-a")
      .str("group_idx")
      .u64(0)
      .str("kv_cache_spec_kind")
      .str("FullAttentionSpec");
  w.map(3)
      .str("type")
      .str("BlockStored")
      .str("block_hashes")
      .array(1)
      .u64(5)
      .str("extra_keys")
      .array(1)
      .array(1)
      .str("salt");
  w.u64(3);
  KvEventBatch out;
  // WHEN decoded
  auto r = decode_kv_event_batch(bytes_of(w.bytes()), out);
  ASSERT_TRUE(r) << to_string(r.error().code);
  ASSERT_EQ(out.events.size(), 4u);
  EXPECT_EQ(out.data_parallel_rank, 3);
  // THEN the tokens, group and kind of each store are kept
  const KvEventRecord& stored = out.events[0];
  EXPECT_EQ(std::vector<TokenId>(out.tokens_of(stored).begin(), out.tokens_of(stored).end()),
            (std::vector<TokenId>{7, 8, 9, 151643}));
  EXPECT_EQ(stored.block_size, 2);
  EXPECT_EQ(stored.group, 1);
  EXPECT_EQ(stored.kind, KvCacheKind::other);
  EXPECT_FALSE(stored.keyed_beyond_tokens);  // extra_keys all nil
  EXPECT_EQ(out.events[1].type, KvEventType::block_removed);
  EXPECT_EQ(out.events[1].group, 1);
  // AND uint64 hashes above 2^63 stay whole; a LoRA name and a first block's cache_salt are kept
  // as digests (a request names them), not as keys beyond tokens
  EXPECT_EQ(out.hashes_of(out.events[2])[0], ~0ULL);
  EXPECT_EQ(out.events[2].kind, KvCacheKind::full_attention);
  EXPECT_EQ(out.events[2].group, 0);
  EXPECT_EQ(out.events[2].lora, extra_key_digest("adapter-a"));
  EXPECT_FALSE(out.events[2].keyed_beyond_tokens);
  EXPECT_EQ(out.events[3].cache_salt, extra_key_digest("salt"));
  EXPECT_EQ(out.events[3].lora, 0u);
  EXPECT_FALSE(out.events[3].keyed_beyond_tokens);
  EXPECT_EQ(out.events[3].token_count, 0u);
  EXPECT_EQ(cache_kind_from_name("MLAAttentionSpec"), KvCacheKind::full_attention);
  EXPECT_EQ(cache_kind_from_name("MambaSpec"), KvCacheKind::other);
}

TEST(KvEventDecoder, ArrayLikeTwoElementBatchOldFieldsAndUnknownEvents) {
  // GIVEN an older 2-element batch: a BlockStored without medium (GPU), an unknown event type,
  // a BlockRemoved with a DISK medium and trailing future fields
  Writer w;
  w.array(2).f64(1.5).array(3);
  w.array(5).str("BlockStored").array(1).u64(9).nil().array(2).u64(1).u64(2).u64(16);
  w.array(3).str("BlockMoved").array(1).u64(9).str("GPU");
  w.array(4).str("BlockRemoved").array(1).u64(9).str("DISK").u64(77);
  KvEventBatch out;
  auto r = decode_kv_event_batch(bytes_of(w.bytes()), out);
  ASSERT_TRUE(r) << to_string(r.error().code);
  // THEN the unknown event is skipped and counted, the others keep their order and tiers
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(out.skipped_events, 1u);
  EXPECT_EQ(out.events[0].tier, KvTier::gpu);
  EXPECT_FALSE(out.events[0].has_parent);
  EXPECT_EQ(out.events[1].tier, KvTier::disk);
  EXPECT_EQ(out.hashes.size(), 2u);
}

TEST(KvEventDecoder, MediaMapToTiers) {
  EXPECT_EQ(tier_from_medium("GPU"), KvTier::gpu);
  EXPECT_EQ(tier_from_medium("cuda"), KvTier::gpu);
  EXPECT_EQ(tier_from_medium("CPU"), KvTier::cpu);
  EXPECT_EQ(tier_from_medium("local_disk"), KvTier::disk);
  EXPECT_EQ(tier_from_medium("lmcache-redis"), KvTier::remote);
}

TEST(KvEventDecoder, StorageTiersFollowTheirLocalityInEitherKeyOrder) {
  // GIVEN vLLM 0.26 map-like events of its storage tiers with a locality (PR #48281), the key
  // before or after the medium, and without one
  Writer w;
  w.array(3).f64(1).array(5);
  w.map(4)
      .str("type")
      .str("BlockStored")
      .str("block_hashes")
      .array(1)
      .u64(1)
      .str("medium")
      .str("STORAGE")
      .str("locality")
      .str("LOCAL");
  w.map(4)
      .str("type")
      .str("BlockStored")
      .str("locality")
      .str("LOCAL")
      .str("block_hashes")
      .array(1)
      .u64(2)
      .str("medium")
      .str("FS");
  w.map(4)
      .str("type")
      .str("BlockRemoved")
      .str("block_hashes")
      .array(1)
      .u64(3)
      .str("medium")
      .str("STORAGE")
      .str("locality")
      .str("REMOTE");
  w.map(3).str("type").str("BlockStored").str("block_hashes").array(1).u64(4).str("medium").str("STORAGE");
  w.map(4)
      .str("type")
      .str("BlockStored")
      .str("block_hashes")
      .array(1)
      .u64(5)
      .str("medium")
      .str("GPU")
      .str("locality")
      .str("REMOTE");
  w.u64(0);
  KvEventBatch out;
  ASSERT_TRUE(decode_kv_event_batch(bytes_of(w.bytes()), out));
  ASSERT_EQ(out.events.size(), 5u);
  // THEN LOCAL storage is the disk tier, REMOTE or unspecified the remote one; other media ignore it
  EXPECT_EQ(out.events[0].tier, KvTier::disk);
  EXPECT_EQ(out.events[1].tier, KvTier::disk);
  EXPECT_EQ(out.events[2].tier, KvTier::remote);
  EXPECT_EQ(out.events[3].tier, KvTier::remote);
  EXPECT_EQ(out.events[4].tier, KvTier::gpu);
}

TEST(KvEventDecoder, ExtraKeysARequestCannotNameAreKeptApart) {
  // GIVEN stores whose extra keys hold (1) a multimodal pair, (2) prompt-embedding bytes, (3) a LoRA
  // known by lora_id only, (4) a salt-like string on a block with a parent, (5) a LoRA whose later
  // blocks name another adapter, and (6) a LoRA with a salted first block, as vLLM writes it
  Writer w;
  w.array(3).f64(1).array(6);
  w.map(3)
      .str("type")
      .str("BlockStored")
      .str("block_hashes")
      .array(1)
      .u64(1)
      .str("extra_keys")
      .array(1)
      .array(1)
      .array(2)
      .str("mm-hash")
      .u64(0);
  w.map(3)
      .str("type")
      .str("BlockStored")
      .str("block_hashes")
      .array(1)
      .u64(2)
      .str("extra_keys")
      .array(1)
      .array(1)
      .bin(std::string(32, 'e'));
  w.map(3).str("type").str("BlockStored").str("block_hashes").array(1).u64(3).str("lora_id").u64(7);
  w.map(4)
      .str("type")
      .str("BlockStored")
      .str("block_hashes")
      .array(1)
      .u64(4)
      .str("parent_block_hash")
      .u64(3)
      .str("extra_keys")
      .array(1)
      .array(1)
      .str("salt");
  w.map(4)
      .str("type")
      .str("BlockStored")
      .str("block_hashes")
      .array(2)
      .u64(5)
      .u64(6)
      .str("lora_name")
      .str("a")
      .str("extra_keys")
      .array(2)
      .array(1)
      .str("a")
      .array(1)
      .str("b");
  w.map(5)
      .str("type")
      .str("BlockStored")
      .str("extra_keys")
      .array(2)
      .array(2)
      .str("a")
      .str("s")
      .array(1)
      .str("a")
      .str("block_hashes")
      .array(2)
      .u64(7)
      .u64(8)
      .str("lora_id")
      .u64(1)
      .str("lora_name")
      .str("a");
  w.u64(0);
  KvEventBatch out;
  ASSERT_TRUE(decode_kv_event_batch(bytes_of(w.bytes()), out));
  ASSERT_EQ(out.events.size(), 6u);
  // THEN the first five are keyed beyond tokens; the sixth names its LoRA and salt (keys in any order)
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(out.events[static_cast<std::size_t>(i)].keyed_beyond_tokens) << i;
  EXPECT_FALSE(out.events[5].keyed_beyond_tokens);
  EXPECT_EQ(out.events[5].lora, extra_key_digest("a"));
  EXPECT_EQ(out.events[5].cache_salt, extra_key_digest("s"));
}

TEST(KvEventDecoder, RefusesEveryTruncationAndNonBatches) {
  // GIVEN a valid batch
  Writer w;
  w.array(3).f64(2.0).array(2);
  w.array(8).str("BlockStored").array(3).u64(1).u64(2).u64(3).nil().array(1).u64(5).u64(16).nil().str("GPU").nil();
  w.array(3).str("BlockRemoved").array(1).u64(1).str("GPU");
  w.u64(0);
  const std::string full = w.bytes();
  KvEventBatch out;
  ASSERT_TRUE(decode_kv_event_batch(bytes_of(full), out));
  // WHEN any proper prefix is decoded THEN it is refused, never read past the end
  for (std::size_t n = 0; n < full.size(); ++n) {
    auto r = decode_kv_event_batch(bytes_of(full.substr(0, n)), out);
    EXPECT_FALSE(r) << "prefix " << n;
  }
  // AND trailing bytes, a bare integer, a 4-element array and 0xc1 are refused with their codes
  EXPECT_EQ(decode_kv_event_batch(bytes_of(full + "x"), out).error().code, KvDecodeErrc::trailing_bytes);
  EXPECT_EQ(decode_kv_event_batch(bytes_of(std::string("\x05", 1)), out).error().code, KvDecodeErrc::not_a_batch);
  Writer four;
  four.array(4).u64(1).array(0).u64(0).u64(0);
  EXPECT_EQ(decode_kv_event_batch(bytes_of(four.bytes()), out).error().code, KvDecodeErrc::not_a_batch);
  EXPECT_EQ(decode_kv_event_batch(bytes_of(std::string("\x92\xc1\x90", 3)), out).error().code, KvDecodeErrc::malformed);
}

TEST(KvEventDecoder, LimitsBoundEventsHashesAndDepth) {
  Writer w;
  w.array(2).f64(0).array(1).array(2).str("BlockRemoved").array(5);
  for (int i = 0; i < 5; ++i) w.u64(static_cast<std::uint64_t>(i));
  KvDecodeLimits limits;
  limits.max_hashes = 4;
  KvEventBatch out;
  EXPECT_EQ(decode_kv_event_batch(bytes_of(w.bytes()), out, limits).error().code, KvDecodeErrc::too_large);
  // A deeply nested unknown field is refused, not recursed without bound.
  Writer deep;
  deep.map(2).str("junk");
  for (int i = 0; i < 100; ++i) deep.array(1);
  deep.nil().str("events").array(0);
  EXPECT_EQ(decode_kv_event_batch(bytes_of(deep.bytes()), out).error().code, KvDecodeErrc::too_large);
  // A container length beyond the bytes left is refused before any allocation.
  const std::string lie("\x92\xcb\0\0\0\0\0\0\0\0\xdd\xff\xff\xff\xff", 15);
  EXPECT_EQ(decode_kv_event_batch(bytes_of(lie), out).error().code, KvDecodeErrc::truncated);
}

TEST(KvEventDecoder, RandomCorruptionNeverCrashes) {
  Writer w;
  w.map(3).str("ts").f64(1).str("events").array(2);
  w.map(4)
      .str("type")
      .str("BlockStored")
      .str("block_hashes")
      .array(2)
      .u64(11)
      .u64(12)
      .str("parent_block_hash")
      .u64(10)
      .str("medium")
      .str("GPU");
  w.map(2).str("type").str("BlockRemoved").str("block_hashes").array(1).u64(11);
  w.str("data_parallel_rank").u64(0);
  std::mt19937_64 rng(7);
  KvEventBatch out;
  int ok = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string b = w.bytes();
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    if (decode_kv_event_batch(bytes_of(b), out)) {
      ++ok;
      for (const auto& e : out.events) EXPECT_LE(e.first_hash + e.hash_count, out.hashes.size());
    }
  }
  EXPECT_LT(ok, 20000);  // most corruptions are caught
}

TEST(SequenceTracker, InOrderGapDuplicateRestart) {
  SequenceTracker t;
  // GIVEN a first batch at 5 (events before the subscription are unknown, not lost)
  EXPECT_EQ(t.observe(5), SeqVerdict::first);
  t.accept(5);
  EXPECT_EQ(t.observe(6), SeqVerdict::in_order);
  t.accept(6);
  // WHEN 9 arrives THEN 7 and 8 were lost
  EXPECT_EQ(t.observe(9), SeqVerdict::gap);
  EXPECT_EQ(t.expected(), 7);
  // AND after a replay from 7 up to 10, live 8..10 are duplicates, 11 is in order
  t.replaying_from(7);
  t.accept(10);
  EXPECT_EQ(t.observe(8), SeqVerdict::duplicate);
  EXPECT_EQ(t.observe(10), SeqVerdict::duplicate);
  EXPECT_EQ(t.observe(11), SeqVerdict::in_order);
  // AND a number before the replay's start means the publisher restarted
  EXPECT_EQ(t.observe(0), SeqVerdict::restart);
  // Without any replay, any step back is a restart.
  SequenceTracker u;
  u.accept(3);
  EXPECT_EQ(u.observe(3), SeqVerdict::restart);
  u.reset();
  EXPECT_EQ(u.observe(0), SeqVerdict::first);
}

}  // namespace
}  // namespace disagg::router
