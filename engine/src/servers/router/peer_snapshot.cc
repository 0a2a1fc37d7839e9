// peer_snapshot.cc — see peer_snapshot.h.
#include "peer_snapshot.h"

#include <cstring>

namespace disagg::router {

namespace {

constexpr char kMagic[4] = {'D', 'G', 'P', 'S'};
// Fixed sizes, to check counts against the bytes left before allocating for them.
constexpr std::size_t kHeaderBytes = 4 + 2 + 8 + 4 + 4;
constexpr std::size_t kEndpointFixedBytes = 2 + 8 + 4 + 4;
constexpr std::size_t kBlockFixedBytes = 1 + 1 + 8;

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  for (std::size_t i = 0; i < sizeof(T); ++i)
    b[i] = static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xFF);
  out.append(b, sizeof(T));
}

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  std::size_t left() const { return b_.size() - at_; }
  template <class T>
  bool get(T* v) {
    if (left() < sizeof(T)) return false;
    std::uint64_t x = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i)
      x |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(b_[at_ + i])) << (8 * i);
    at_ += sizeof(T);
    *v = static_cast<T>(x);
    return true;
  }
  bool bytes(std::size_t n, std::string_view* v) {
    if (left() < n) return false;
    *v = b_.substr(at_, n);
    at_ += n;
    return true;
  }

 private:
  std::string_view b_;
  std::size_t at_ = 0;
};

}  // namespace

std::string_view to_string(PeerSnapshotErrc e) {
  switch (e) {
    case PeerSnapshotErrc::truncated: return "truncated";
    case PeerSnapshotErrc::bad_magic: return "bad_magic";
    case PeerSnapshotErrc::bad_version: return "bad_version";
    case PeerSnapshotErrc::too_large: return "too_large";
    case PeerSnapshotErrc::malformed: return "malformed";
  }
  return "unknown";
}

void PeerSnapshotEndpoint::add(KvTier tier, BlockHash publisher, std::span<const BlockHash> block_keys) {
  blocks.push_back(PeerSnapshotBlock{tier, static_cast<std::uint8_t>(block_keys.size()), publisher,
                                     static_cast<std::uint32_t>(keys.size())});
  keys.insert(keys.end(), block_keys.begin(), block_keys.end());
}

std::size_t PeerSnapshot::block_count() const {
  std::size_t n = 0;
  for (const PeerSnapshotEndpoint& e : endpoints) n += e.blocks.size();
  return n;
}

std::string encode_peer_snapshot(const PeerSnapshot& s) {
  std::string out;
  std::size_t size = kHeaderBytes;
  for (const PeerSnapshotEndpoint& e : s.endpoints) {
    size += kEndpointFixedBytes + e.label.size() + e.blocks.size() * kBlockFixedBytes + e.keys.size() * 8;
  }
  out.reserve(size);
  out.append(kMagic, 4);
  put<std::uint16_t>(out, kPeerSnapshotVersion);
  put<std::uint64_t>(out, s.instance);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(s.block_size));
  put<std::uint32_t>(out, static_cast<std::uint32_t>(s.endpoints.size()));
  for (const PeerSnapshotEndpoint& e : s.endpoints) {
    put<std::uint16_t>(out, static_cast<std::uint16_t>(e.label.size()));
    out.append(e.label);
    put<std::int64_t>(out, e.last_seq);
    put<std::int32_t>(out, e.group);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(e.blocks.size()));
    for (const PeerSnapshotBlock& b : e.blocks) {
      put<std::uint8_t>(out, static_cast<std::uint8_t>(b.tier));
      put<std::uint8_t>(out, b.key_count);
      put<std::uint64_t>(out, b.publisher);
      for (const BlockHash k : e.keys_of(b)) put<std::uint64_t>(out, k);
    }
  }
  return out;
}

Expected<void, PeerSnapshotErrc> decode_peer_snapshot(std::string_view bytes, PeerSnapshot& out,
                                                      const PeerSnapshotLimits& limits) {
  out = PeerSnapshot{};
  if (bytes.size() > limits.max_bytes) return unexpected(PeerSnapshotErrc::too_large);
  Reader r(bytes);
  std::string_view magic;
  if (!r.bytes(4, &magic)) return unexpected(PeerSnapshotErrc::truncated);
  if (std::memcmp(magic.data(), kMagic, 4) != 0) return unexpected(PeerSnapshotErrc::bad_magic);
  std::uint16_t version = 0;
  std::uint32_t block_size = 0, endpoints = 0;
  if (!r.get(&version)) return unexpected(PeerSnapshotErrc::truncated);
  if (version != kPeerSnapshotVersion) return unexpected(PeerSnapshotErrc::bad_version);
  if (!r.get(&out.instance) || !r.get(&block_size) || !r.get(&endpoints))
    return unexpected(PeerSnapshotErrc::truncated);
  if (block_size == 0 || block_size > (1U << 20)) return unexpected(PeerSnapshotErrc::malformed);
  out.block_size = static_cast<std::int32_t>(block_size);
  if (endpoints > limits.max_endpoints) return unexpected(PeerSnapshotErrc::too_large);
  if (static_cast<std::size_t>(endpoints) * kEndpointFixedBytes > r.left())
    return unexpected(PeerSnapshotErrc::truncated);
  out.endpoints.resize(endpoints);
  std::size_t total_blocks = 0;
  for (PeerSnapshotEndpoint& e : out.endpoints) {
    std::uint16_t label_len = 0;
    std::uint32_t blocks = 0;
    std::string_view label;
    if (!r.get(&label_len)) return unexpected(PeerSnapshotErrc::truncated);
    if (label_len == 0 || label_len > kPeerSnapshotMaxLabel) return unexpected(PeerSnapshotErrc::malformed);
    if (!r.bytes(label_len, &label) || !r.get(&e.last_seq) || !r.get(&e.group) || !r.get(&blocks)) {
      return unexpected(PeerSnapshotErrc::truncated);
    }
    e.label = std::string(label);
    if (e.last_seq < -1 || e.group < -1) return unexpected(PeerSnapshotErrc::malformed);
    total_blocks += blocks;
    if (total_blocks > limits.max_blocks) return unexpected(PeerSnapshotErrc::too_large);
    if (static_cast<std::size_t>(blocks) * (kBlockFixedBytes + 8) > r.left())
      return unexpected(PeerSnapshotErrc::truncated);
    e.blocks.reserve(blocks);
    e.keys.reserve(blocks);
    for (std::uint32_t i = 0; i < blocks; ++i) {
      std::uint8_t tier = 0, count = 0;
      BlockHash publisher = 0;
      if (!r.get(&tier) || !r.get(&count) || !r.get(&publisher)) return unexpected(PeerSnapshotErrc::truncated);
      if (tier >= kKvTierCount || count == 0 || count > kPeerSnapshotMaxKeysPerBlock) {
        return unexpected(PeerSnapshotErrc::malformed);
      }
      if (r.left() < std::size_t{count} * 8) return unexpected(PeerSnapshotErrc::truncated);
      e.blocks.push_back(
          PeerSnapshotBlock{static_cast<KvTier>(tier), count, publisher, static_cast<std::uint32_t>(e.keys.size())});
      for (std::uint8_t k = 0; k < count; ++k) {
        BlockHash key = 0;
        r.get(&key);
        e.keys.push_back(key);
      }
    }
  }
  if (r.left() != 0) return unexpected(PeerSnapshotErrc::malformed);
  return {};
}

}  // namespace disagg::router
