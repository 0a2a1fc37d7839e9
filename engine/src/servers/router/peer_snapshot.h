// peer_snapshot.h — the compact snapshot of a router's KV-block index that a peer router loads when
// it starts (a warm restart of one router of an active-active pair). Pure codec: no sockets
// (peer_link.h serves and fetches it).
//
// Per worker endpoint, as the router names it (label "host:port", "[v6]:port"): the last KV-event
// sequence number applied, the KV cache group the keys were made for, and every block the router
// can still translate (BlockKeyer): its tier, the publisher's hash and the router keys it gave. With
// the translations a loading router applies later BlockRemoved events and keys children of these
// blocks (an entry without its translation could never be removed). Blocks the router indexes
// under the publisher's own hashes (events without token ids) are not in it.
//
// Wire format, little endian, version 1:
//   "DGPS" u16 version  u64 instance  u32 block_size  u32 endpoint_count
//   endpoint: u16 label_len  label  i64 last_seq (-1 none)  i32 group (-1 none)  u32 block_count
//   block:    u8 tier  u8 key_count (1..kMaxKeysPerBlock)  u64 publisher_hash  u64 keys[key_count]
//
// Bounds (PeerSnapshotLimits) are checked while decoding, before anything is allocated for a
// count, so hostile input costs at most its own size: endpoints, blocks in all, bytes, label length.
// The encoder keeps the newest blocks of each endpoint when the block bound would be passed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/expected.h"
#include "disagg/kv_block_index.h"

namespace disagg::router {

inline constexpr std::uint16_t kPeerSnapshotVersion = 1;
inline constexpr std::size_t kPeerSnapshotMaxKeysPerBlock = 8;  // BlockKeyer::kMaxKeysPerBlock
inline constexpr std::size_t kPeerSnapshotMaxLabel = 255;

struct PeerSnapshotLimits {
  std::size_t max_bytes = 64u << 20;   ///< whole encoded snapshot
  std::size_t max_endpoints = 64;      ///< kMaxRoutingEndpoints
  std::size_t max_blocks = 2'000'000;  ///< blocks over all endpoints
};

/// One block: its tier, the publisher's hash, and its router keys keys[first_key, first_key + key_count)
/// of the endpoint's `keys`.
struct PeerSnapshotBlock {
  KvTier tier = KvTier::gpu;
  std::uint8_t key_count = 0;
  BlockHash publisher = 0;
  std::uint32_t first_key = 0;
};

struct PeerSnapshotEndpoint {
  std::string label;
  std::int64_t last_seq = -1;
  std::int32_t group = -1;
  /// Oldest first (the order the loader re-inserts them, so the newest end most recently used).
  std::vector<PeerSnapshotBlock> blocks;
  std::vector<BlockHash> keys;

  std::span<const BlockHash> keys_of(const PeerSnapshotBlock& b) const {
    return std::span<const BlockHash>(keys).subspan(b.first_key, b.key_count);
  }
  /// Appends a block. Precondition: 1 <= keys.size() <= kPeerSnapshotMaxKeysPerBlock.
  void add(KvTier tier, BlockHash publisher, std::span<const BlockHash> block_keys);
};

struct PeerSnapshot {
  /// The serving router's random instance id (a router never loads its own snapshot).
  std::uint64_t instance = 0;
  /// The router's block size: keys made at another size are useless (the loader refuses them).
  std::int32_t block_size = 0;
  std::vector<PeerSnapshotEndpoint> endpoints;

  std::size_t block_count() const;
};

enum class PeerSnapshotErrc : std::uint8_t {
  truncated,    ///< the bytes end inside a field
  bad_magic,    ///< not a snapshot
  bad_version,  ///< another version of the format
  too_large,    ///< more bytes, endpoints or blocks than the limits allow
  malformed,    ///< a field out of range (tier, key count, label length) or bytes after the end
};
std::string_view to_string(PeerSnapshotErrc e);

/// The bytes of `snapshot`. Precondition: labels <= kPeerSnapshotMaxLabel bytes, key counts in
/// 1..kPeerSnapshotMaxKeysPerBlock (EndpointTable::snapshot() makes it so).
std::string encode_peer_snapshot(const PeerSnapshot& snapshot);

/// Decodes `bytes` into `out` (replaced). Failure modes: PeerSnapshotErrc; `out` is then unspecified.
Expected<void, PeerSnapshotErrc> decode_peer_snapshot(std::string_view bytes, PeerSnapshot& out,
                                                      const PeerSnapshotLimits& limits = {});

}  // namespace disagg::router
