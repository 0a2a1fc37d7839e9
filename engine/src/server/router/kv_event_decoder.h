// kv_event_decoder.h — decodes vLLM's KV-cache event batches (msgpack) into flat, reusable arrays.
//
// Wire format (REFERENCE.md section 5; vllm/distributed/kv_events.py): a ZMQ PUB multipart
// message [topic, 8-byte big-endian sequence number, msgpack EventBatch], with
//   EventBatch       = (ts, events, data_parallel_rank)        data_parallel_rank may be absent
//   BlockStored      = ("BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
//                       lora_id, medium, lora_name, ...)       fields after block_size optional
//   BlockRemoved     = ("BlockRemoved", block_hashes, medium)  medium optional
//   AllBlocksCleared = ("AllBlocksCleared", ...)
// msgspec writes each struct either array-like (above; the tag first) or map-like
// ({"type": "BlockStored", "block_hashes": [...], ...} and {"ts", "events",
// "data_parallel_rank"}), depending on the vLLM version; both are accepted, also mixed.
//
// Block hashes: msgpack integers (unsigned 64-bit, or signed reinterpreted as unsigned) or, as in
// vLLM versions that hash blocks with SHA-256, byte strings: 8 bytes are read big-endian, any other
// length is folded to 64 bits with FNV-1a (stable, so stores and removals still pair up).
// medium: "GPU"/"cuda" (or nil / absent) -> gpu, "CPU" -> cpu, "DISK"/"SSD"/"NVME"/"LOCAL_DISK"
// -> disk, anything else -> remote (case-insensitive).
// Unknown event types are skipped (counted in KvEventBatch::skipped_events), unknown map keys and
// extra array fields are ignored: newer publishers stay readable.
//
// The decoder is a pure function over bytes: no exceptions, no I/O, bounded work (every length is
// checked against the bytes left and against KvDecodeLimits; nesting depth is bounded), so fuzzers
// and tests drive it directly. It allocates only when `out` must grow beyond its capacity; reuse one
// KvEventBatch per thread and steady-state decoding allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "disagg/block_hash.h"
#include "disagg/expected.h"
#include "disagg/kv_block_index.h"

namespace disagg::router {

enum class KvEventType : std::uint8_t { block_stored, block_removed, all_blocks_cleared };

/// Stable lower-case name, e.g. "block_stored".
std::string_view to_string(KvEventType type);

/// One decoded event; its hashes are KvEventBatch::hashes[first_hash, first_hash + hash_count).
struct KvEventRecord {
  KvEventType type = KvEventType::block_stored;
  KvTier tier = KvTier::gpu;
  std::uint32_t first_hash = 0;
  std::uint32_t hash_count = 0;
  /// block_stored: whether parent_block_hash was given (not nil).
  bool has_parent = false;
  BlockHash parent = 0;
  /// block_stored: tokens per block (0 when absent).
  std::int32_t block_size = 0;
};

/// A decoded EventBatch. Reuse one object: clear() keeps the capacity.
struct KvEventBatch {
  double ts = 0;
  /// -1 when absent or nil.
  std::int32_t data_parallel_rank = -1;
  std::vector<KvEventRecord> events;
  std::vector<BlockHash> hashes;
  /// Events of unknown type that were skipped.
  std::uint32_t skipped_events = 0;

  void clear() {
    ts = 0;
    data_parallel_rank = -1;
    events.clear();
    hashes.clear();
    skipped_events = 0;
  }
  std::span<const BlockHash> hashes_of(const KvEventRecord& e) const {
    return std::span<const BlockHash>(hashes).subspan(e.first_hash, e.hash_count);
  }
};

enum class KvDecodeErrc : std::uint8_t {
  truncated,       ///< the bytes end inside a value
  malformed,       ///< a byte that starts no msgpack value (0xc1), or a field of the wrong type
  not_a_batch,     ///< the top-level value is not an EventBatch (array of 2-3 or map)
  too_large,       ///< more events / hashes than KvDecodeLimits allow, or nesting too deep
  trailing_bytes,  ///< bytes left after the batch
};

/// Stable lower-case name, e.g. "truncated".
std::string_view to_string(KvDecodeErrc code);

struct KvDecodeError {
  KvDecodeErrc code = KvDecodeErrc::malformed;
  /// Byte offset where decoding stopped.
  std::size_t offset = 0;
};

/// Bounds of one batch (a batch beyond them is refused whole).
struct KvDecodeLimits {
  std::uint32_t max_events = 1u << 16;
  std::uint32_t max_hashes = 1u << 22;
  /// Nesting depth of values that are skipped (unknown fields).
  int max_depth = 32;
};

/// Decodes one msgpack EventBatch into `out` (cleared first). On error `out` holds what was decoded
/// before the error; callers drop the whole batch. Never throws.
Expected<void, KvDecodeError> decode_kv_event_batch(std::span<const std::uint8_t> bytes,
                                                    KvEventBatch& out,
                                                    const KvDecodeLimits& limits = {});

/// The sequence frame: exactly 8 bytes, big-endian, two's complement (-1 = replay end marker).
std::optional<std::int64_t> decode_sequence(std::span<const std::uint8_t> bytes);

/// The tier of a vLLM `medium` string (see the file comment).
KvTier tier_from_medium(std::string_view medium);

}  // namespace disagg::router
