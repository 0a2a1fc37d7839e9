// kv_event_wire.h — the one description of vLLM's KV-event wire format: frame layout, sequence
// numbers, replay request and end marker, event tags and the field order of every struct. The
// sim-worker's encoder (lib/kv_events/kv_event_publisher.cc) writes by it, the router's decoder and subscriber
// (lib/kv_events/kv_event_decoder.cc, router/kv_event_subscriber.cc) read by it.
//
// Frames (REFERENCE.md section 5; vllm/distributed/kv_events.py, ZmqEventPublisher):
//   publish  PUB multipart [topic, seq, payload]; seq numbers a publisher's batches 0, 1, 2, ...
//   replay   optional ROUTER socket: the request [identity, "", start seq] (a DEALER sends
//            ["", start seq]) is answered, for every buffered batch with seq >= start, by
//              before v0.26   [identity, "", seq, payload], end marker [identity, "", seq -1, ""]
//              since v0.26    [identity, "", topic, seq, payload], end marker
//                             [identity, "", "", seq -1, ""]
//            (vLLM PR #45177, "include topic frame in KV events replay response", merged
//            2026-06-10, first released in v0.26.0; before it ZmqEventPublisher._service_replay sent
//            (client_id, b"", seq, buf), e.g. vllm/distributed/kv_events.py at 0181ea3). A DEALER
//            receives the same frames without the identity; parse_replay_reply() tells the two
//            framings apart by their frame count.
//   seq      exactly 8 bytes, big-endian two's complement.
// Payload: one msgpack EventBatch. Each struct is a msgspec tagged struct, written either
//   array_like  [fields in declaration order]; an event's tag comes first: ["BlockStored", ...]
//   map_like    {"field": value, ...}; an event carries its tag as {"type": "BlockStored", ...}
// (older vLLM releases write array-like, newer ones map-like). Declaration order:
//   EventBatch       (ts, events, data_parallel_rank)     readers accept [ts, events] too
//   BlockStored      (block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
//                     lora_name)                           then defaulted fields (extra_keys, ...)
//   BlockRemoved     (block_hashes, medium)
//   AllBlocksCleared ()   vLLM's GPU prefix cache was reset (BlockPool.reset_prefix_cache);
//                         blocks offloaded to CPU or storage are not affected
// Fields with defaults after these are omitted by writers (msgspec's omit_defaults) and ignored
// by readers, so newer publishers stay readable.
//
// Header-only, no third-party dependency, nothing here allocates beyond an 8-byte (small-string)
// std::string: the decoder stays a pure function over bytes that a fuzzer can drive.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace disagg::kv_wire {

// ---- frames ------------------------------------------------------------------------------------

/// Bytes of a sequence-number frame.
inline constexpr std::size_t kSeqBytes = 8;
/// The sequence number of the replay end marker (its payload frame is empty).
inline constexpr std::int64_t kReplayEndSeq = -1;

/// Frame positions of a published message: [topic, seq, payload].
struct PublishFrame {
  static constexpr std::size_t topic = 0, seq = 1, payload = 2, count = 3;
};
/// Frame positions of a replay request as the publisher's ROUTER socket receives it:
/// [identity, "", start seq]. A DEALER sends the frames after the identity.
struct ReplayRequestFrame {
  static constexpr std::size_t identity = 0, empty = 1, start = 2, count = 3;
};
/// Frame positions of a replay answer (and of the end marker) as a DEALER receives it from vLLM
/// before v0.26: ["", seq, payload]. The ROUTER sends [identity] before these.
struct ReplayReplyFrame {
  static constexpr std::size_t empty = 0, seq = 1, payload = 2, count = 3;
};
/// The same since vLLM v0.26 (PR #45177): ["", topic, seq, payload]; the end marker's topic is empty.
struct ReplayReplyTopicFrame {
  static constexpr std::size_t empty = 0, topic = 1, seq = 2, payload = 3, count = 4;
};
/// Which of the two a publisher writes.
enum class ReplayFraming : std::uint8_t { seq_payload, topic_seq_payload };

/// The 8-byte big-endian frame of `seq` (two's complement: -1 is eight 0xff bytes).
inline std::string encode_seq(std::int64_t seq) {
  std::string out(kSeqBytes, '\0');
  auto v = static_cast<std::uint64_t>(seq);
  for (std::size_t i = kSeqBytes; i-- > 0;) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

/// The sequence number of a frame; nullopt unless it is exactly kSeqBytes long.
constexpr std::optional<std::int64_t> decode_seq(std::span<const std::uint8_t> bytes) {
  if (bytes.size() != kSeqBytes) return std::nullopt;
  std::uint64_t v = 0;
  for (std::uint8_t b : bytes) v = (v << 8) | b;
  return static_cast<std::int64_t>(v);
}
inline std::optional<std::int64_t> decode_seq(std::string_view bytes) {
  return decode_seq(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
}

/// One replay answer, viewing the frames it was parsed from.
struct ReplayReply {
  ReplayFraming framing = ReplayFraming::seq_payload;
  std::int64_t seq = 0;
  std::string_view topic;  ///< empty in the older framing
  std::string_view payload;
  bool end() const { return seq == kReplayEndSeq; }
};

/// Parses a replay answer as a DEALER receives it (the frames after the identity), in either
/// framing, told apart by the frame count (3: before v0.26, 4: since). nullopt for anything else:
/// another frame count, a non-empty delimiter, a sequence frame that is not 8 bytes, a sequence
/// below -1, or an end marker with a payload (the caller counts and skips it). Pure, no allocation.
template <class Frames>
constexpr std::optional<ReplayReply> parse_replay_reply(const Frames& frames) {
  ReplayReply r;
  std::string_view seq;
  if (frames.size() == ReplayReplyFrame::count) {
    if (!std::string_view(frames[ReplayReplyFrame::empty]).empty()) return std::nullopt;
    seq = frames[ReplayReplyFrame::seq];
    r.payload = frames[ReplayReplyFrame::payload];
  } else if (frames.size() == ReplayReplyTopicFrame::count) {
    if (!std::string_view(frames[ReplayReplyTopicFrame::empty]).empty()) return std::nullopt;
    r.framing = ReplayFraming::topic_seq_payload;
    r.topic = frames[ReplayReplyTopicFrame::topic];
    seq = frames[ReplayReplyTopicFrame::seq];
    r.payload = frames[ReplayReplyTopicFrame::payload];
  } else {
    return std::nullopt;
  }
  const auto n = decode_seq(seq);
  if (!n || *n < kReplayEndSeq) return std::nullopt;
  r.seq = *n;
  if (r.end() && (!r.payload.empty() || !r.topic.empty())) return std::nullopt;
  return r;
}

// ---- payload -----------------------------------------------------------------------------------

/// The two msgspec struct encodings (see the file comment).
enum class Encoding : std::uint8_t { array_like, map_like };

/// Event types; the order is the index of per-type counters (router metrics).
enum class EventTag : std::uint8_t { block_stored, block_removed, all_blocks_cleared };
inline constexpr std::size_t kEventTagCount = 3;

/// The wire tag, e.g. "BlockStored".
constexpr std::string_view tag_name(EventTag tag) {
  switch (tag) {
    case EventTag::block_stored: return "BlockStored";
    case EventTag::block_removed: return "BlockRemoved";
    case EventTag::all_blocks_cleared: return "AllBlocksCleared";
  }
  return "";
}
/// The event type of a wire tag (case-sensitive); nullopt for a tag this format does not know.
constexpr std::optional<EventTag> tag_from_name(std::string_view name) {
  for (auto tag : {EventTag::block_stored, EventTag::block_removed, EventTag::all_blocks_cleared}) {
    if (tag_name(tag) == name) return tag;
  }
  return std::nullopt;
}
/// The key of a map-like event's tag.
inline constexpr std::string_view kTypeKey = "type";

/// EventBatch fields, in declaration order (array_like position = enumerator value).
enum class BatchField : std::uint8_t { ts, events, data_parallel_rank };
inline constexpr std::array<BatchField, 3> kBatchFields = {BatchField::ts, BatchField::events,
                                                           BatchField::data_parallel_rank};
/// An array-like batch has at least ts and events.
inline constexpr std::size_t kBatchMinFields = 2;

/// BlockStored fields after the tag, in declaration order (array_like position after the tag =
/// enumerator value).
enum class StoredField : std::uint8_t {
  block_hashes,
  parent_block_hash,
  token_ids,
  block_size,
  lora_id,
  medium,
  lora_name,
  // Defaulted fields (vllm/distributed/kv_events.py): msgspec omits them at their defaults.
  extra_keys,
  group_idx,
  kv_cache_spec_kind,
  kv_cache_spec_sliding_window,
  // vLLM PR #48281 (v0.26.0): "LOCAL" | "REMOTE" for the STORAGE/FS/OBJ tiers, absent = unspecified.
  // v0.26 writes map-like events, so its array position (last) is not relied on.
  locality,
};
/// The fields every publisher writes (the sim-worker's encoder writes exactly these).
inline constexpr std::array<StoredField, 7> kStoredFields = {StoredField::block_hashes, StoredField::parent_block_hash,
                                                             StoredField::token_ids,    StoredField::block_size,
                                                             StoredField::lora_id,      StoredField::medium,
                                                             StoredField::lora_name};
/// Every field a reader accepts, in declaration order (array_like positions).
inline constexpr std::array<StoredField, 12> kStoredFieldsAll = {StoredField::block_hashes,
                                                                 StoredField::parent_block_hash,
                                                                 StoredField::token_ids,
                                                                 StoredField::block_size,
                                                                 StoredField::lora_id,
                                                                 StoredField::medium,
                                                                 StoredField::lora_name,
                                                                 StoredField::extra_keys,
                                                                 StoredField::group_idx,
                                                                 StoredField::kv_cache_spec_kind,
                                                                 StoredField::kv_cache_spec_sliding_window,
                                                                 StoredField::locality};

/// BlockRemoved fields after the tag, in declaration order (group_idx and locality defaulted).
enum class RemovedField : std::uint8_t { block_hashes, medium, group_idx, locality };
inline constexpr std::array<RemovedField, 2> kRemovedFields = {RemovedField::block_hashes, RemovedField::medium};
inline constexpr std::array<RemovedField, 4> kRemovedFieldsAll = {RemovedField::block_hashes, RemovedField::medium,
                                                                  RemovedField::group_idx, RemovedField::locality};

/// Field names (the keys of the map_like encoding).
constexpr std::string_view field_name(BatchField f) {
  switch (f) {
    case BatchField::ts: return "ts";
    case BatchField::events: return "events";
    case BatchField::data_parallel_rank: return "data_parallel_rank";
  }
  return "";
}
constexpr std::string_view field_name(StoredField f) {
  switch (f) {
    case StoredField::block_hashes: return "block_hashes";
    case StoredField::parent_block_hash: return "parent_block_hash";
    case StoredField::token_ids: return "token_ids";
    case StoredField::block_size: return "block_size";
    case StoredField::lora_id: return "lora_id";
    case StoredField::medium: return "medium";
    case StoredField::lora_name: return "lora_name";
    case StoredField::extra_keys: return "extra_keys";
    case StoredField::group_idx: return "group_idx";
    case StoredField::kv_cache_spec_kind: return "kv_cache_spec_kind";
    case StoredField::kv_cache_spec_sliding_window: return "kv_cache_spec_sliding_window";
    case StoredField::locality: return "locality";
  }
  return "";
}
constexpr std::string_view field_name(RemovedField f) {
  switch (f) {
    case RemovedField::block_hashes: return "block_hashes";
    case RemovedField::medium: return "medium";
    case RemovedField::group_idx: return "group_idx";
    case RemovedField::locality: return "locality";
  }
  return "";
}

/// The field at array_like position `pos` (counted after the tag); nullopt beyond the declared
/// fields (a newer publisher's defaulted fields, to be skipped).
template <class Field, std::size_t N>
constexpr std::optional<Field> field_at(const std::array<Field, N>& fields, std::uint64_t pos) {
  if (pos >= N) return std::nullopt;
  return fields[static_cast<std::size_t>(pos)];
}
/// The field named `name` among `fields`; nullopt for a key this format does not declare.
template <class Field, std::size_t N>
constexpr std::optional<Field> field_named(const std::array<Field, N>& fields, std::string_view name) {
  for (Field f : fields) {
    if (field_name(f) == name) return f;
  }
  return std::nullopt;
}

/// The medium the sim-worker reports (vLLM's GPU cache). Readers map media to tiers themselves.
inline constexpr std::string_view kMediumGpu = "GPU";

// extra_keys (BlockStored, since vLLM PR #33304) hold one entry per block: nil, or a tuple (msgpack
// array) of the LoRA name (every block of a LoRA request), multimodal (identifier, offset) pairs,
// the cache_salt (the first block of a sequence only) and prompt-embedding digests (bytes), in that
// order (vllm/v1/core/kv_cache_utils.py, generate_block_hash_extra_keys).

}  // namespace disagg::kv_wire
