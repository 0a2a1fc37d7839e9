// TieredStore: the key-value store behind the kvstore server. A memory tier with a byte budget and
// an optional disk tier (DiskTier segments), one key index, and an LRU list per tier.
//
// Policy:
// - Writes go to memory. When memory is over budget, the least recently used entry leaves it: it
//   is demoted to disk if it was read at least `demote_min_reads` times since written (a block
//   that was reused is likely to be reused again), otherwise evicted.
// - A disk hit promotes the entry back to memory (its disk record is killed).
// - When disk is over budget, the segment with the largest dead share is compacted if at least
//   half of it is dead; otherwise the disk LRU entry is evicted.
// - Values larger than the whole memory budget go straight to disk and are served from there.
//
// Memory accounting: memory_bytes() = sum over memory-resident keys of key + value +
// kEntryOverhead; memory_bytes() + reserved_bytes() never exceeds the memory budget, where
// reserved_bytes() are values still arriving on connections (reserve()). Not counted (the stated
// overhead): the index
// entries of disk-resident keys (kEntryOverhead + key each, reported as index_bytes), hash buckets
// (8 bytes per key), and values still referenced by replies queued on sockets.
// Disk accounting: segment file bytes stay within budget + one segment (compaction copies the
// live records of a victim before deleting it).
//
// Single-threaded: every method must be called from the same thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "blob.h"
#include "disk_tier.h"
#include "key_index.h"

namespace disagg::kvstore {

struct StoreConfig {
  std::uint64_t memory_bytes = 1ull << 30;
  /// Empty: no disk tier (memory only, evictions drop entries).
  std::string disk_dir;
  std::uint64_t disk_bytes = 0;
  /// 0: derived from disk_bytes (1/256 of it, between 1 MiB and 4 GiB).
  std::uint64_t segment_bytes = 0;
  std::uint64_t max_value_bytes = 512u << 20;
  /// Reads needed before an entry may be demoted instead of evicted (0: demote everything).
  std::uint32_t demote_min_reads = 2;
};

enum class StoreStatus { kOk, kNotFound, kNotSet, kTooLarge, kNoSpace, kIoError, kPending };

/// A disk hit handed to the caller to read (begin_get), e.g. on an I/O thread.
struct DiskRead {
  std::string key;
  DiskLocation location;
  std::uint64_t epoch = 0;  // TieredStore::flush_all() count: segment ids restart after it
};
const char* to_string(StoreStatus status);

enum class SetCondition { kAlways, kIfAbsent /* NX */, kIfPresent /* XX */ };

struct StoreStats {
  std::uint64_t hits_memory = 0, hits_disk = 0, misses = 0;
  std::uint64_t evictions_memory = 0, evictions_disk = 0;
  std::uint64_t demotions = 0, promotions = 0, expired = 0;
  std::uint64_t corrupt_reads = 0, disk_errors = 0, compactions = 0, compacted_bytes = 0;
  std::uint64_t recovered_keys = 0, recovery_cut_bytes = 0;
  std::uint64_t recovery_skipped_bytes = 0, recovery_skipped_spans = 0;  ///< corrupt spans between good records
};

class TieredStore {
 public:
  /// Per-entry bookkeeping charged against the memory budget (Entry, allocator and blob headers).
  static constexpr std::uint64_t kEntryOverhead = sizeof(Entry) + 48;

  /// Opens the store; with a disk tier, recovers it from its segments. nullptr + `error` on failure.
  static std::unique_ptr<TieredStore> open(const StoreConfig& config, std::int64_t now_ms, std::string* error);
  ~TieredStore();
  TieredStore(const TieredStore&) = delete;
  TieredStore& operator=(const TieredStore&) = delete;

  /// kOk with the value (shared, not copied), or kNotFound. A corrupt disk record is a miss.
  StoreStatus get(std::string_view key, std::int64_t now_ms, Blob* value);
  /// get() in two halves, so the disk read can run off the store's thread: kOk (memory hit, `value`
  /// set), kNotFound, or kPending with `read` filled: read it with DiskTier::read_record() through
  /// dup_disk_fd(read->location.segment), then call finish_get(). Other calls may come in between.
  StoreStatus begin_get(std::string_view key, std::int64_t now_ms, Blob* value, DiskRead* read);
  /// Completes a kPending begin_get with the read's outcome: kOk with the value or kNotFound. If the
  /// key was overwritten, deleted or moved meanwhile, a good read is still served (it was the value
  /// when the GET began) but not promoted; a failed one is retried synchronously.
  StoreStatus finish_get(const DiskRead& read, DiskError error, Blob loaded, std::int64_t now_ms, Blob* value);
  /// See DiskTier::dup_segment_fd(); -1 without a disk tier.
  [[nodiscard]] int dup_disk_fd(std::uint32_t segment) const { return disk_ ? disk_->dup_segment_fd(segment) : -1; }

  /// kOk, kNotSet (NX/XX condition false), kTooLarge, kNoSpace (fits neither tier) or kIoError.
  /// `expire_at_ms` 0 = no expiry; `keep_ttl` keeps an existing key's expiry.
  StoreStatus set(std::string_view key, std::string_view value, std::int64_t expire_at_ms, std::int64_t now_ms,
                  SetCondition condition = SetCondition::kAlways, bool keep_ttl = false);
  /// The same, storing `value` itself (shared, not copied) when it goes to the memory tier: the
  /// server receives large values straight into a Blob, so SET costs no user-space copy.
  StoreStatus set(std::string_view key, const Blob& value, std::int64_t expire_at_ms, std::int64_t now_ms,
                  SetCondition condition = SetCondition::kAlways, bool keep_ttl = false);
  bool del(std::string_view key, std::int64_t now_ms);
  bool exists(std::string_view key, std::int64_t now_ms);
  /// Remaining time to live in ms; -1 without expiry, -2 when the key does not exist.
  std::int64_t ttl_ms(std::string_view key, std::int64_t now_ms);
  /// Sets an absolute expiry; one in the past deletes the key. False when the key does not exist.
  bool expire(std::string_view key, std::int64_t expire_at_ms, std::int64_t now_ms);
  void flush_all();
  /// One SCAN step: appends keys of about `count` buckets; returns the next cursor (0 = done).
  std::uint64_t scan(std::uint64_t cursor, std::size_t count, std::string_view match, std::int64_t now_ms,
                     std::vector<std::string>* keys);
  /// Reserves memory for `bytes` of a value still arriving, evicting (or demoting) LRU entries as
  /// needed so that memory_bytes() + reserved_bytes() stays within the budget. False, with
  /// nothing evicted, when it cannot fit even with every entry gone (other reservations hold the
  /// rest). Release it with release() before storing the value, so set() finds the room.
  bool reserve(std::uint64_t bytes);
  /// Returns `bytes` (at most reserved_bytes()) reserved by reserve().
  void release(std::uint64_t bytes) { reserved_ -= std::min(bytes, reserved_); }
  [[nodiscard]] std::uint64_t reserved_bytes() const { return reserved_; }

  /// STRLEN: the value's size without reading it (either tier); -1 when the key does not exist.
  std::int64_t value_size(std::string_view key, std::int64_t now_ms);

  /// Active expiry: removes expired keys from a bounded slice of the table.
  void sweep_expired(std::int64_t now_ms, std::size_t buckets = 64);

  [[nodiscard]] std::size_t key_count() const { return index_.size(); }
  [[nodiscard]] std::size_t memory_keys() const { return memory_keys_; }
  [[nodiscard]] std::size_t disk_keys() const { return index_.size() - memory_keys_; }
  [[nodiscard]] std::uint64_t memory_bytes() const { return memory_bytes_; }
  [[nodiscard]] std::uint64_t memory_budget() const { return config_.memory_bytes; }
  [[nodiscard]] std::uint64_t index_bytes() const { return index_bytes_; }
  [[nodiscard]] std::uint64_t disk_file_bytes() const { return disk_ ? disk_->file_bytes() : 0; }
  [[nodiscard]] std::uint64_t disk_dead_bytes() const { return disk_ ? disk_->dead_bytes() : 0; }
  [[nodiscard]] std::uint64_t disk_budget() const { return disk_ ? disk_->budget_bytes() : 0; }
  [[nodiscard]] std::uint64_t segment_bytes() const { return config_.segment_bytes; }
  [[nodiscard]] bool has_disk() const { return disk_ != nullptr; }
  [[nodiscard]] const StoreStats& stats() const { return stats_; }

 private:
  struct LruList {
    Entry* head = nullptr;  // most recent
    Entry* tail = nullptr;  // least recent
  };
  explicit TieredStore(StoreConfig config) : config_(std::move(config)) {}

  static std::uint64_t memory_charge(const Entry* e) { return kEntryOverhead + e->key.size() + e->value_size; }
  static std::uint64_t index_charge(const Entry* e) { return kEntryOverhead + e->key.size(); }
  static bool is_expired(const Entry* e, std::int64_t now_ms) {
    return e->expire_at_ms != 0 && e->expire_at_ms <= now_ms;
  }

  static void lru_unlink(LruList* list, Entry* e);
  static void lru_push_front(LruList* list, Entry* e);

  Entry* find_live(std::string_view key, std::int64_t now_ms);
  // Detaches `e` from its tier (kills its disk record), leaving it in the index as Tier::kNone.
  void detach(Entry* e);
  void remove(Entry* e);
  // Moves LRU entries out of memory until `need` more bytes fit. False when impossible.
  bool make_memory_room(std::uint64_t need);
  // Reclaims disk space (compaction, then LRU eviction) until `need` more bytes fit.
  bool make_disk_room(std::uint64_t need);
  bool compact(std::uint32_t segment);
  // Demotes the memory LRU victim `e` to disk if it qualifies and fits, else evicts it.
  void demote_or_evict(Entry* e);
  // Writes `value` for `e` (already detached) to disk; on success e is disk-resident.
  StoreStatus write_to_disk(Entry* e, std::string_view value);
  void place_in_memory(Entry* e, Blob value);
  // set(): `owned` (when not an empty handle) holds exactly `value`'s bytes and is stored as is.
  StoreStatus set_value(std::string_view key, std::string_view value, const Blob* owned, std::int64_t expire_at_ms,
                        std::int64_t now_ms, SetCondition condition, bool keep_ttl);

  StoreConfig config_;
  KeyIndex index_;
  std::unique_ptr<DiskTier> disk_;
  LruList memory_lru_;
  LruList disk_lru_;
  std::uint64_t memory_bytes_ = 0;
  std::uint64_t reserved_ = 0;  // values in flight (reserve())
  std::uint64_t index_bytes_ = 0;
  std::size_t memory_keys_ = 0;
  std::uint64_t expire_cursor_ = 0;
  std::uint64_t epoch_ = 0;  // flush_all() count
  StoreStats stats_;
};

/// Redis-style glob match (`*`, `?`, `[abc]`, `[^a-z]`, `\x`), used by SCAN MATCH.
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace disagg::kvstore
