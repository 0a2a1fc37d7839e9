// The key index: one Entry per key, whichever tier holds the value, in an intrusive chained hash
// table with a power-of-two bucket count.
//
// Power-of-two tables let SCAN use a reverse-binary cursor (as Redis does): every key present for
// the whole scan is returned at least once even when the table grows or shrinks between calls.
//
// | operation      | cost                         |
// |----------------|------------------------------|
// | find / insert  | O(1) expected                |
// | erase          | O(chain length), expected O(1) |
// | scan step      | O(count) buckets             |
// | grow / shrink  | O(n), amortised O(1)         |
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "blob.h"

namespace disagg::kvstore {

/// Where an entry's value lives; kNone while it is being moved between tiers.
enum class Tier : std::uint8_t { kNone, kMemory, kDisk };

/// Where a disk-tier value lives.
struct DiskLocation {
  std::uint32_t segment = 0;
  std::uint64_t offset = 0;
  std::uint32_t record_bytes = 0;
};

/// One key. Owned by the KeyIndex; linked into the LRU list of its tier by TieredStore.
struct Entry {
  Entry* hash_next = nullptr;
  Entry* lru_prev = nullptr;
  Entry* lru_next = nullptr;
  std::uint64_t hash = 0;
  std::string key;
  std::int64_t expire_at_ms = 0;  ///< Unix milliseconds; 0 = never.
  std::uint64_t value_size = 0;
  std::uint32_t reads = 0;  ///< GET hits since the value was written (drives demotion).
  Tier tier = Tier::kNone;
  Blob value;         ///< Set when tier == kMemory.
  DiskLocation disk;  ///< Set when tier == kDisk.
};

std::uint64_t hash_key(std::string_view key);

class KeyIndex {
 public:
  KeyIndex();
  ~KeyIndex();
  KeyIndex(const KeyIndex&) = delete;
  KeyIndex& operator=(const KeyIndex&) = delete;

  [[nodiscard]] Entry* find(std::string_view key) const;
  /// Inserts a new entry for `key`. Precondition: find(key) == nullptr.
  Entry* insert(std::string_view key);
  /// Unlinks and deletes `entry`. The caller must have unlinked it from any LRU list.
  void erase(Entry* entry);
  /// Deletes every entry (the caller resets its LRU lists).
  void clear();
  [[nodiscard]] std::size_t size() const { return size_; }

  /// Visits up to about `count` buckets from `cursor`; returns the next cursor (0 when done).
  /// `visit` must not insert or erase.
  template <typename Visit>
  std::uint64_t scan(std::uint64_t cursor, std::size_t count, Visit&& visit) const {
    const std::uint64_t mask = buckets_.size() - 1;
    std::size_t steps = 0;
    do {
      for (Entry* e = buckets_[cursor & mask]; e != nullptr; e = e->hash_next) visit(e);
      // Increment the reversed cursor: walks buckets in an order that stays valid across resizes.
      cursor |= ~mask;
      cursor = reverse_bits(cursor);
      ++cursor;
      cursor = reverse_bits(cursor);
    } while (cursor != 0 && ++steps < count);
    return cursor;
  }

 private:
  static std::uint64_t reverse_bits(std::uint64_t v);
  void rehash(std::size_t new_bucket_count);

  std::vector<Entry*> buckets_;
  std::size_t size_ = 0;
};

}  // namespace disagg::kvstore
