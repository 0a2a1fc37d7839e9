// The disk tier's storage: append-only segment files of checksummed records.
//
// Record layout (little-endian), 32-byte header then key then value:
//
// | offset | field        | meaning                                                      |
// |--------|--------------|--------------------------------------------------------------|
// | 0      | magic u32    | kLiveMagic, or kDeadMagic once superseded/deleted (in place) |
// | 4      | crc32c u32   | CRC-32C of bytes [8, end of record)                          |
// | 8      | key_len u32  |                                                              |
// | 12     | value_len u32|                                                              |
// | 16     | expire i64   | Unix ms, 0 = never                                           |
// | 24     | seq u64      | write sequence number (diagnostics)                          |
//
// A record is served only if its magic is live and its checksum matches, so a torn write (kill -9
// mid-append) or a corrupted byte is never returned. Recovery checks every record (live and dead)
// and, past a record that fails, resynchronises: it scans forward for the next offset holding a
// magic, a sane header, a checksum that matches and a sequence number above the last good one, so
// a corrupt record costs only itself (the bytes in between count as dead until compaction). Killing a record rewrites its magic in place
// (one 4-byte write), so an overwritten or deleted key does not come back after a restart.
// Segment files are never rewritten otherwise; space is reclaimed by copying a segment's live
// records to the active segment and deleting the file (compaction, driven by TieredStore).
// Writes are not fsync'd: the tier survives process crashes (the page cache holds the bytes), not
// power loss, which is the right trade for a cache.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "blob.h"
#include "key_index.h"

namespace disagg::kvstore {

enum class DiskError { kOk, kNoSpace, kIo, kCorrupt, kTooLarge };
const char* to_string(DiskError error);

struct RecordHeader;  // the 32-byte header above (disk_tier.cc)

inline constexpr std::uint32_t kLiveMagic = 0x3152564Bu;  // "KVR1"
inline constexpr std::uint32_t kDeadMagic = 0x3044564Bu;  // "KVD0"
inline constexpr std::size_t kRecordHeaderBytes = 32;
inline constexpr std::size_t kMaxKeyBytes = 64u << 10;

struct DiskConfig {
  std::string dir;
  std::uint64_t budget_bytes = 0;
  /// Target size of one segment file; a record larger than this gets a segment of its own.
  std::uint64_t segment_bytes = 64u << 20;
  /// Largest value accepted (also bounds what recovery believes a header).
  std::uint64_t max_value_bytes = 512u << 20;
};

/// What recover() found wrong.
struct RecoveryReport {
  std::uint64_t cut_bytes = 0;      ///< torn or corrupt tails truncated (no good record after them)
  std::uint64_t skipped_bytes = 0;  ///< corrupt bytes between good records, skipped and counted dead
  std::uint64_t skipped_spans = 0;  ///< how many such runs
};

/// A live record found by recover().
struct RecoveredRecord {
  std::string_view key;
  std::int64_t expire_at_ms = 0;
  std::uint64_t value_size = 0;
  DiskLocation location;
};

class DiskTier {
 public:
  /// Creates `dir` if needed and lists its segments. Returns nullptr and sets `error` on failure.
  static std::unique_ptr<DiskTier> open(const DiskConfig& config, std::string* error);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  /// Scans every segment in write order and reports each live, intact record. A later record for
  /// the same key supersedes earlier ones: the callback must mark_dead() the one it replaces.
  /// A record that fails its checks is skipped by resynchronising on the next good one (see the
  /// file comment); a torn or corrupt tail with no good record after it is cut off (truncated), so
  /// the next recovery sees a clean end. Then opens a fresh active segment.
  RecoveryReport recover(const std::function<void(const RecoveredRecord&)>& on_record);

  /// Appends a record to the active segment (rolling to a new one when full). Does not enforce the
  /// budget: the caller makes room first (see fits()).
  DiskError append(std::string_view key, std::string_view value, std::int64_t expire_at_ms, DiskLocation* out);

  /// Reads the value at `location`, checking magic, key and checksum.
  DiskError read(const DiskLocation& location, std::string_view key, Blob* value) const;

  /// read() through `fd`, any descriptor of the record's segment (see dup_segment_fd()). Touches
  /// no DiskTier state, so it may run on another thread while the server goes on.
  static DiskError read_record(int fd, const DiskLocation& location, std::string_view key, Blob* value);

  /// A new descriptor (close-on-exec) of `segment`, or -1. Reading through it stays valid after the
  /// segment is dropped (the file lives on until the last descriptor closes).
  [[nodiscard]] int dup_segment_fd(std::uint32_t segment) const;

  /// Reads the header and key of each live record of `segment` (compaction uses it to find live
  /// ones). Headers are trusted while they look sane; past one that does not, the walk
  /// resynchronises as recovery does. A header whose lengths were corrupted into other sane ones
  /// can still make it skip records: callers compare what they found with live_bytes(). kOk or kIo.
  DiskError for_each_record(std::uint32_t segment,
                            const std::function<void(const DiskLocation&, std::string_view key)>& fn) const;

  /// Bytes of live records in `segment` (file bytes minus dead ones); 0 for an unknown segment.
  [[nodiscard]] std::uint64_t live_bytes(std::uint32_t segment) const;

  /// Marks a record dead in place; deletes its segment once every record in it is dead.
  void mark_dead(const DiskLocation& location);

  /// Deletes a segment file outright (after compaction copied its live records).
  void drop_segment(std::uint32_t segment);

  /// Deletes every segment and starts an empty one (FLUSHALL).
  void clear();

  /// The segment with the most dead bytes whose dead share is at least `min_dead_fraction`;
  /// returns false when there is none. Seals the active segment if it is the one chosen.
  bool pick_compaction_victim(double min_dead_fraction, std::uint32_t* segment);

  [[nodiscard]] static std::uint64_t record_bytes(std::size_t key_len, std::size_t value_len) {
    return kRecordHeaderBytes + key_len + value_len;
  }
  [[nodiscard]] bool fits(std::uint64_t extra) const { return file_bytes_ + extra <= config_.budget_bytes; }
  [[nodiscard]] std::uint64_t file_bytes() const { return file_bytes_; }
  [[nodiscard]] std::uint64_t dead_bytes() const { return dead_bytes_; }
  [[nodiscard]] std::uint64_t budget_bytes() const { return config_.budget_bytes; }
  [[nodiscard]] std::size_t segment_count() const { return segments_.size(); }
  [[nodiscard]] std::string segment_path(std::uint32_t segment) const;

 private:
  struct Segment {
    int fd = -1;
    std::uint64_t size = 0;  // bytes written (append offset)
    std::uint64_t dead = 0;  // bytes of dead records
  };
  explicit DiskTier(DiskConfig config) : config_(std::move(config)) {}
  bool open_active(std::string* error);
  // True when a record at `off` of a segment of `size` bytes has a sane header (read into *h),
  // lies inside the segment, and its checksum matches (key and value read into *body).
  bool check_record(int fd, std::uint64_t size, std::uint64_t off, RecordHeader* h, std::vector<char>* body) const;
  // The offset of the first record at or after `from` that passes check_record() with a sequence
  // number above `min_seq`, or `size` when there is none. Checks at most `*budget` record bytes
  // (decremented), so values that happen to hold magic numbers cannot make it quadratic.
  std::uint64_t resync(int fd, std::uint64_t size, std::uint64_t from, std::uint64_t min_seq, std::uint64_t* budget,
                       RecordHeader* h, std::vector<char>* body) const;
  void remove_segment(std::map<std::uint32_t, Segment>::iterator it);

  DiskConfig config_;
  std::map<std::uint32_t, Segment> segments_;
  std::uint32_t active_ = 0;
  std::uint64_t file_bytes_ = 0;
  std::uint64_t dead_bytes_ = 0;
  std::uint64_t next_seq_ = 1;
  mutable std::vector<char> scratch_;
};

}  // namespace disagg::kvstore
