// kv_event_decoder.h — decodes vLLM's KV-cache event batches (msgpack) into flat, reusable arrays.
//
// The wire format (frames, sequence numbers, event tags, field order, the array-like and map-like
// struct encodings) is described once, in lib/kv_events/kv_event_wire.h, which the sim-worker's
// encoder writes by. Both encodings are accepted, also mixed within a batch; a batch may omit
// data_parallel_rank, a BlockStored may stop after block_size, a BlockRemoved after block_hashes.
//
// Block hashes: msgpack integers (unsigned 64-bit, or signed reinterpreted as unsigned) or, as in
// vLLM versions that hash blocks with SHA-256, byte strings: 8 bytes are read big-endian, any other
// length is folded to 64 bits with FNV-1a (stable, so stores and removals still pair up).
// Token ids (BlockStored.token_ids) are kept, with group_idx and kv_cache_spec_kind, and the extra
// keys that entered vLLM's hashes: the LoRA name and a sequence's cache_salt as digests (the ones
// a request names, disagg/block_hash.h chain_root), and whether any other did (multimodal inputs,
// prompt embeddings, a LoRA known only by lora_id).
// medium: "GPU"/"cuda" (or nil / absent) -> gpu, "CPU" -> cpu, "DISK"/"SSD"/"NVME"/"LOCAL_DISK"
// -> disk, "STORAGE"/"FS"/"OBJ" -> disk when `locality` is "LOCAL", else remote; anything else ->
// remote (case-insensitive).
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
#include "lib/kv_events/kv_event_wire.h"

namespace disagg::router {

/// The event types of the wire format (block_stored, block_removed, all_blocks_cleared).
using KvEventType = kv_wire::EventTag;

/// Stable lower-case name, e.g. "block_stored".
std::string_view to_string(KvEventType type);

/// A KV cache group's kind, from kv_cache_spec_kind: full attention (what prefix routing matches),
/// another kind (sliding window, Mamba, ...), or not given.
enum class KvCacheKind : std::uint8_t { unspecified, full_attention, other };

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
  /// block_stored: its token ids are KvEventBatch::tokens[first_token, first_token + token_count).
  std::uint32_t first_token = 0;
  std::uint32_t token_count = 0;
  /// The KV cache group (models with several, e.g. sliding-window and full attention); -1 absent.
  std::int32_t group = -1;
  /// block_stored: the group's kind as vLLM names it (kv_cache_spec_kind).
  KvCacheKind kind = KvCacheKind::unspecified;
  /// block_stored: extra_key_digest of the LoRA adapter's name (lora_name); 0 without one.
  std::uint64_t lora = 0;
  /// block_stored: extra_key_digest of the cache_salt in the first block's extra keys (only for an
  /// event without a parent: vLLM salts a sequence's first block); 0 without one.
  std::uint64_t cache_salt = 0;
  /// block_stored: extra keys a request cannot name entered the block hashes (multimodal inputs,
  /// prompt embeddings, a LoRA given only by lora_id, extra keys of an unknown shape): the token
  /// ids, LoRA name and cache_salt do not identify the blocks.
  bool keyed_beyond_tokens = false;
};

/// A decoded EventBatch. Reuse one object: clear() keeps the capacity.
struct KvEventBatch {
  double ts = 0;
  /// The publisher's sequence number of the batch (set by the subscriber, not by the decoder); -1
  /// when not known.
  std::int64_t seq = -1;
  /// -1 when absent or nil.
  std::int32_t data_parallel_rank = -1;
  std::vector<KvEventRecord> events;
  std::vector<BlockHash> hashes;
  std::vector<TokenId> tokens;
  /// Events of unknown type that were skipped.
  std::uint32_t skipped_events = 0;

  void clear() {
    ts = 0;
    seq = -1;
    data_parallel_rank = -1;
    events.clear();
    hashes.clear();
    tokens.clear();
    skipped_events = 0;
  }
  std::span<const BlockHash> hashes_of(const KvEventRecord& e) const {
    return std::span<const BlockHash>(hashes).subspan(e.first_hash, e.hash_count);
  }
  std::span<const TokenId> tokens_of(const KvEventRecord& e) const {
    return std::span<const TokenId>(tokens).subspan(e.first_token, e.token_count);
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
  std::uint32_t max_tokens = 1u << 24;
  /// Nesting depth of values that are skipped (unknown fields).
  int max_depth = 32;
};

/// The kind of a KV cache group from vLLM's kv_cache_spec_kind (e.g. "FullAttentionSpec",
/// "SlidingWindowSpec"): full attention (MLA included), or other.
KvCacheKind cache_kind_from_name(std::string_view name);

/// Decodes one msgpack EventBatch into `out` (cleared first). On error `out` holds what was decoded
/// before the error; callers drop the whole batch. Never throws.
Expected<void, KvDecodeError> decode_kv_event_batch(std::span<const std::uint8_t> bytes, KvEventBatch& out,
                                                    const KvDecodeLimits& limits = {});

/// The tier of a vLLM `medium` string and its `locality` (empty: unspecified; see the file comment).
KvTier tier_from_medium(std::string_view medium, std::string_view locality = {});

}  // namespace disagg::router
