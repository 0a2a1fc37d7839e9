// The KV-event wire module (lib/kv_events/kv_event_wire.h): sequence frames and their round trip,
// the replay request and its -1 end marker, event tags, field order, and that a batch written by the
// module's tables in either msgspec encoding is what the router's decoder reads back.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "kv_event_decoder.h"
#include "msgpack_writer.h"
#include "lib/kv_events/kv_event_wire.h"
#include "lib/kv_events/vllm_release.h"

namespace disagg::kv_wire {
namespace {

using router::testing::Writer;

std::span<const std::uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

TEST(KvEventWire, SequenceRoundTrips) {
  for (std::int64_t seq :
       {std::int64_t{0}, std::int64_t{1}, std::int64_t{255}, std::int64_t{256}, std::int64_t{1} << 40,
        std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(), std::int64_t{-2}}) {
    const std::string frame = encode_seq(seq);
    EXPECT_EQ(frame.size(), kSeqBytes);
    EXPECT_EQ(decode_seq(frame), seq);
    EXPECT_EQ(decode_seq(bytes_of(frame)), seq);
  }
}

TEST(KvEventWire, SequenceIsEightBytesBigEndian) {
  EXPECT_EQ(encode_seq(0), std::string(8, '\0'));
  EXPECT_EQ(encode_seq(258), std::string("\0\0\0\0\0\0\x01\x02", 8));
  EXPECT_EQ(decode_seq(std::string("\x01\0\0\0\0\0\0\0", 8)), std::int64_t{1} << 56);
}

TEST(KvEventWire, ReplayEndMarkerIsMinusOneAsEightFfBytes) {
  EXPECT_EQ(kReplayEndSeq, -1);
  EXPECT_EQ(encode_seq(kReplayEndSeq), std::string(8, '\xff'));
  EXPECT_EQ(decode_seq(std::string(8, '\xff')), kReplayEndSeq);
}

TEST(KvEventWire, SequenceFrameOfAnyOtherLengthIsRefused) {
  for (std::size_t n : {0u, 1u, 7u, 9u, 16u}) {
    EXPECT_FALSE(decode_seq(std::string(n, '\0')).has_value()) << n << " bytes";
  }
}

TEST(KvEventWire, ReplayRequestCarriesTheStartSequence) {
  // GIVEN the frames a DEALER sends for a replay from 5, as the publisher's ROUTER receives them
  const std::vector<std::string> frames = {"peer-identity", "", encode_seq(5)};
  ASSERT_EQ(frames.size(), ReplayRequestFrame::count);
  // THEN the start is read from its frame, and an answer's sequence sits where a DEALER reads it
  EXPECT_TRUE(frames[ReplayRequestFrame::empty].empty());
  EXPECT_EQ(decode_seq(frames[ReplayRequestFrame::start]), 5);
  const std::vector<std::string> end = {"", encode_seq(kReplayEndSeq), ""};
  ASSERT_EQ(end.size(), ReplayReplyFrame::count);
  EXPECT_EQ(decode_seq(end[ReplayReplyFrame::seq]), kReplayEndSeq);
  EXPECT_TRUE(end[ReplayReplyFrame::payload].empty());
  EXPECT_EQ(PublishFrame::count, 3u);
  EXPECT_EQ(PublishFrame::seq, 1u);
}

TEST(KvEventWire, TagsRoundTripAndUnknownTagsAreNotGuessed) {
  std::set<std::string_view> names;
  for (EventTag t : {EventTag::block_stored, EventTag::block_removed, EventTag::all_blocks_cleared}) {
    EXPECT_EQ(tag_from_name(tag_name(t)), t);
    names.insert(tag_name(t));
  }
  EXPECT_EQ(names.size(), kEventTagCount);
  EXPECT_EQ(tag_name(EventTag::block_stored), "BlockStored");
  EXPECT_FALSE(tag_from_name("blockstored").has_value());
  EXPECT_FALSE(tag_from_name("BlockEvicted").has_value());
}

TEST(KvEventWire, FieldOrderIsVllmsDeclarationOrder) {
  std::vector<std::string_view> stored;
  for (StoredField f : kStoredFields) stored.push_back(field_name(f));
  EXPECT_EQ(stored, (std::vector<std::string_view>{"block_hashes", "parent_block_hash", "token_ids", "block_size",
                                                   "lora_id", "medium", "lora_name"}));
  EXPECT_EQ(field_at(kStoredFields, 5), StoredField::medium);
  EXPECT_FALSE(field_at(kStoredFields, 7).has_value());  // a newer publisher's extra_keys
  EXPECT_FALSE(field_at(kStoredFields, 256).has_value());
  EXPECT_EQ(field_named(kStoredFields, "block_size"), StoredField::block_size);
  EXPECT_FALSE(field_named(kStoredFields, "extra_keys").has_value());
  EXPECT_EQ(field_at(kRemovedFields, 1), RemovedField::medium);
  EXPECT_EQ(field_named(kBatchFields, "data_parallel_rank"), BatchField::data_parallel_rank);
  EXPECT_EQ(kBatchMinFields, 2u);
}

// Writes a batch of one event of each type by the module's tables, in `enc`.
std::string write_batch(Encoding enc, bool with_rank) {
  const bool map = enc == Encoding::map_like;
  Writer w;
  auto begin = [&](std::size_t n) {
    map ? w.map(static_cast<std::uint32_t>(n)) : w.array(static_cast<std::uint32_t>(n));
  };
  auto key = [&](std::string_view k) {
    if (map) w.str(k);
  };
  auto tag = [&](EventTag t) {
    key(kTypeKey);
    w.str(tag_name(t));
  };
  begin(with_rank ? kBatchFields.size() : kBatchMinFields);
  for (BatchField bf : kBatchFields) {
    if (bf == BatchField::data_parallel_rank && !with_rank) continue;
    key(field_name(bf));
    switch (bf) {
      case BatchField::ts: w.f64(1700000000.5); break;
      case BatchField::data_parallel_rank: w.u64(2); break;
      case BatchField::events:
        w.array(3);
        // Every field current vLLM may write, defaulted ones included.
        begin(1 + kStoredFieldsAll.size());
        tag(EventTag::block_stored);
        for (StoredField f : kStoredFieldsAll) {
          key(field_name(f));
          switch (f) {
            case StoredField::block_hashes: w.array(2).u64(11).u64(0xfedcba9876543210ULL); break;
            case StoredField::parent_block_hash: w.u64(10); break;
            case StoredField::token_ids:
              w.array(8);
              for (std::uint64_t t = 1; t <= 8; ++t) w.u64(t);
              break;
            case StoredField::block_size: w.u64(4); break;
            case StoredField::medium: w.str("CPU"); break;
            case StoredField::lora_id:
            case StoredField::lora_name:
            case StoredField::extra_keys:
            case StoredField::kv_cache_spec_sliding_window:
            case StoredField::locality: w.nil(); break;
            case StoredField::group_idx: w.u64(0); break;
            case StoredField::kv_cache_spec_kind: w.str("FullAttentionSpec"); break;
          }
        }
        begin(1 + kRemovedFieldsAll.size());
        tag(EventTag::block_removed);
        for (RemovedField f : kRemovedFieldsAll) {
          key(field_name(f));
          switch (f) {
            case RemovedField::block_hashes: w.array(1).u64(11); break;
            case RemovedField::medium: w.str("DISK"); break;
            case RemovedField::group_idx: w.u64(0); break;
            case RemovedField::locality: w.nil(); break;
          }
        }
        begin(1);
        tag(EventTag::all_blocks_cleared);
        break;
    }
  }
  return w.bytes();
}

TEST(KvEventWire, TheDecoderReadsBothEncodingsWrittenByTheModule) {
  for (Encoding enc : {Encoding::array_like, Encoding::map_like}) {
    for (bool with_rank : {true, false}) {
      SCOPED_TRACE(std::string(enc == Encoding::map_like ? "map_like" : "array_like") +
                   (with_rank ? ", with rank" : ", without rank"));
      // GIVEN a batch written field by field from the module's tables
      const std::string bytes = write_batch(enc, with_rank);
      // WHEN the router decodes it
      router::KvEventBatch out;
      auto r = router::decode_kv_event_batch(bytes_of(bytes), out);
      // THEN every field the router uses comes back where the module put it
      ASSERT_TRUE(r) << router::to_string(r.error().code) << " at " << r.error().offset;
      EXPECT_DOUBLE_EQ(out.ts, 1700000000.5);
      EXPECT_EQ(out.data_parallel_rank, with_rank ? 2 : -1);
      ASSERT_EQ(out.events.size(), 3u);
      EXPECT_EQ(out.skipped_events, 0u);
      const auto& stored = out.events[0];
      EXPECT_EQ(stored.type, EventTag::block_stored);
      EXPECT_EQ(stored.tier, KvTier::cpu);
      EXPECT_TRUE(stored.has_parent);
      EXPECT_EQ(stored.parent, 10u);
      EXPECT_EQ(stored.block_size, 4);
      const auto hs = out.hashes_of(stored);
      EXPECT_EQ(std::vector<BlockHash>(hs.begin(), hs.end()), (std::vector<BlockHash>{11, 0xfedcba9876543210ULL}));
      EXPECT_EQ(out.events[1].type, EventTag::block_removed);
      EXPECT_EQ(out.events[1].tier, KvTier::disk);
      ASSERT_EQ(out.hashes_of(out.events[1]).size(), 1u);
      EXPECT_EQ(out.hashes_of(out.events[1])[0], 11u);
      EXPECT_EQ(out.events[2].type, EventTag::all_blocks_cleared);
      EXPECT_EQ(out.events[2].hash_count, 0u);
    }
  }
}

// Frames as a DEALER receives them (views, as the subscriber holds them).
using Frames = std::vector<std::string_view>;

TEST(KvEventWire, ReplayAnswersOfBothFramingsAreToldApartByFrameCount) {
  const std::string s7 = encode_seq(7), end = encode_seq(kReplayEndSeq);
  // GIVEN an answer and the end marker as vLLM before 0.26 sends them: ["", seq, payload]
  auto old = parse_replay_reply(Frames{"", s7, "payload"});
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->framing, ReplayFraming::seq_payload);
  EXPECT_EQ(old->seq, 7);
  EXPECT_EQ(old->payload, "payload");
  EXPECT_TRUE(old->topic.empty());
  ASSERT_TRUE(parse_replay_reply(Frames{"", end, ""}).has_value());
  EXPECT_TRUE(parse_replay_reply(Frames{"", end, ""})->end());
  // AND as vLLM 0.26 (PR #45177) sends them: ["", topic, seq, payload], the end ["", "", -1, ""]
  auto now = parse_replay_reply(Frames{"", "kv@10.0.0.1@m", s7, "payload"});
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->framing, ReplayFraming::topic_seq_payload);
  EXPECT_EQ(now->seq, 7);
  EXPECT_EQ(now->topic, "kv@10.0.0.1@m");
  EXPECT_EQ(now->payload, "payload");
  ASSERT_TRUE(parse_replay_reply(Frames{"", "", end, ""}).has_value());
  EXPECT_TRUE(parse_replay_reply(Frames{"", "", end, ""})->end());
  // THEN nothing else is taken for an answer: other frame counts, a non-empty delimiter, a short
  // or negative sequence, an end marker with a payload or a topic
  for (const Frames& bad : {Frames{}, Frames{"", s7}, Frames{"", "t", s7, "p", "x"}, Frames{"x", s7, "p"},
                            Frames{"x", "t", s7, "p"}, Frames{"", "1234", "p"}, Frames{"", "t", "123456789", "p"},
                            Frames{"", encode_seq(-2), "p"}, Frames{"", end, "p"}, Frames{"", "t", end, ""}}) {
    EXPECT_FALSE(parse_replay_reply(bad).has_value()) << bad.size() << " frames";
  }
  // AND the 4-frame reading of an old answer never succeeds by accident: its seq is frame 1
  EXPECT_FALSE(parse_replay_reply(Frames{"", s7, "payload", "more"}).has_value());
}

TEST(KvEventWire, VllmReleasesMapToTheirFormats) {
  // GIVEN the releases the table names, written as users write them
  const auto pinned = vllm_release("0.19.1");
  const auto maps = vllm_release("v0.24.0");
  const auto topic = vllm_release("0.26");
  const auto later = vllm_release("1.2.0rc1");
  ASSERT_TRUE(pinned && maps && topic && later);
  // THEN 0.19 writes array-like structs and the old replay framing (vLLM's array_like structs)
  EXPECT_EQ(pinned->events, Encoding::array_like);
  EXPECT_EQ(pinned->replay, ReplayFraming::seq_payload);
  // AND 0.24 map-like events in a positional batch (PR #42892), still the old replay framing
  EXPECT_EQ(maps->batch, Encoding::array_like);
  EXPECT_EQ(maps->events, Encoding::map_like);
  EXPECT_EQ(maps->replay, ReplayFraming::seq_payload);
  EXPECT_EQ(vllm_release("0.25.2")->replay, ReplayFraming::seq_payload);
  // AND 0.26 on the topic in replay answers (PR #45177); later releases the newest row
  EXPECT_EQ(topic->replay, ReplayFraming::topic_seq_payload);
  EXPECT_EQ(topic->events, Encoding::map_like);
  EXPECT_EQ(later->minor, kNewestVllmRelease.minor);
  EXPECT_EQ(kNewestVllmRelease.replay, ReplayFraming::topic_seq_payload);
  // AND older releases and other spellings are refused
  for (std::string_view bad : {"0.18.2", "0", "0.", "x.1", "0.26x", "", "latest"}) {
    EXPECT_FALSE(vllm_release(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace disagg::kv_wire
