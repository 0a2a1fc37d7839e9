// segment_cache.h — token ids of recently encoded text segments, so a conversation's earlier turns
// are not tokenized again on every turn.
//
// Why it is exact: the tokenizer splits the input at added tokens first and encodes each piece in
// between on its own (normalizer, pre-tokenizers, model: tokenizer.h), so a piece's ids depend on its
// bytes and on whether it starts the input (Metaspace's prepend_scheme "first") alone. A chat template
// puts each message between special tokens, so turn n repeats turn n-1's pieces byte for byte. A hit is
// checked byte for byte against the stored text, never trusted to the hash.
//
// Contracts:
//   - Bounded: one ring of `capacity_bytes` holding each entry's text and ids back to back, and an
//     index of capacity_bytes / 1024 slots (at least 64). The oldest entries are overwritten.
//   - Allocates the ring and the index at the first insert (a scratch that never caches costs no
//     memory), nothing after. Not thread-safe: one per EncodeScratch (per thread).
//   - capacity 0 disables it (lookups miss, inserts do nothing).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "disagg/block_hash.h"

namespace disagg::text {

class SegmentCache {
 public:
  /// Segments shorter than this are encoded every time: their encoding costs about what a lookup
  /// costs.
  static constexpr std::size_t kMinBytes = 256;

  explicit SegmentCache(std::size_t capacity_bytes) : capacity_(capacity_bytes) {}

  /// Appends the cached ids of (`text`, `at_start`) for tokenizer `owner` to `out` and returns true,
  /// or returns false.
  bool find(const void* owner, std::string_view text, bool at_start, std::vector<TokenId>& out) const {
    if (slots_.empty() || text.size() < kMinBytes) return false;
    const std::uint64_t h = hash(owner, text, at_start);
    for (std::size_t k = 0; k < kProbe; ++k) {
      const Slot& s = slots_[(h + k) & (slots_.size() - 1)];
      if (s.hash != h || s.text_bytes != text.size() || !alive(s)) continue;
      const char* at = ring_.data() + s.start % ring_.size();
      if (std::memcmp(at, text.data(), text.size()) != 0) continue;
      const std::size_t n = out.size();
      out.resize(n + s.ids);
      std::memcpy(out.data() + n, at + text.size(), s.ids * sizeof(TokenId));
      return true;
    }
    return false;
  }

  /// Remembers `ids` as the encoding of (`text`, `at_start`) for `owner`, evicting the oldest.
  void insert(const void* owner, std::string_view text, bool at_start, std::span<const TokenId> ids) {
    const std::size_t bytes = text.size() + ids.size_bytes();
    if (capacity_ == 0 || text.size() < kMinBytes || bytes > capacity_ / 4) return;
    if (slots_.empty()) {
      ring_.resize(capacity_);
      std::size_t slots = 64;
      while (slots < capacity_ / 1024) slots *= 2;
      slots_.assign(slots, Slot{});
    }
    // Entries are contiguous: one that would wrap starts at the ring's beginning instead.
    if (written_ % ring_.size() + bytes > ring_.size()) written_ += ring_.size() - written_ % ring_.size();
    char* at = ring_.data() + written_ % ring_.size();
    std::memcpy(at, text.data(), text.size());
    std::memcpy(at + text.size(), ids.data(), ids.size_bytes());
    const std::uint64_t h = hash(owner, text, at_start);
    Slot* victim = nullptr;
    for (std::size_t k = 0; k < kProbe; ++k) {
      Slot& s = slots_[(h + k) & (slots_.size() - 1)];
      if (!alive(s) || (s.hash == h && s.text_bytes == text.size())) {
        victim = &s;
        break;
      }
      if (!victim || s.start < victim->start) victim = &s;  // else the oldest of the probe window
    }
    *victim = Slot{h, written_, static_cast<std::uint32_t>(text.size()), static_cast<std::uint32_t>(ids.size())};
    written_ += bytes;
  }

 private:
  static constexpr std::size_t kProbe = 8;
  struct Slot {
    std::uint64_t hash = 0;
    std::uint64_t start = 0;  // absolute ring position (bytes written before it)
    std::uint32_t text_bytes = 0;
    std::uint32_t ids = 0;  // 0: empty (a cached segment of >= kMinBytes bytes has ids)
  };

  // An entry's bytes are intact while the ring has not come round to them again.
  bool alive(const Slot& s) const { return s.ids != 0 && written_ <= s.start + ring_.size(); }

  static std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
    const std::uint64_t r = (a ^ (a >> 29)) * (b | 1);
    return r ^ (r >> 32);
  }
  // A fast multiply-mix hash over 8-byte words; collisions only cost a byte comparison.
  static std::uint64_t hash(const void* owner, std::string_view text, bool at_start) {
    constexpr std::uint64_t k0 = 0x9e3779b97f4a7c15ULL, k1 = 0xbf58476d1ce4e5b9ULL, k2 = 0x94d049bb133111ebULL;
    std::uint64_t h = mix(reinterpret_cast<std::uintptr_t>(owner) ^ k0, (text.size() << 1 | (at_start ? 1 : 0)) ^ k1);
    std::size_t i = 0;
    for (; i + 8 <= text.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, text.data() + i, 8);
      h = mix(h ^ w, k2);
    }
    std::uint64_t tail = 0;
    std::memcpy(&tail, text.data() + i, text.size() - i);
    return mix(h ^ tail ^ k1, k0);
  }

  std::size_t capacity_;
  std::vector<char> ring_;
  std::vector<Slot> slots_;
  std::uint64_t written_ = 0;
};

}  // namespace disagg::text
