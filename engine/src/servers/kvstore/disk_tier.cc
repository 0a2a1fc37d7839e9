#include "disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>

#include "crc32c.h"

namespace disagg::kvstore {

struct RecordHeader {
  std::uint32_t magic;
  std::uint32_t crc;
  std::uint32_t key_len;
  std::uint32_t value_len;
  std::int64_t expire_at_ms;
  std::uint64_t seq;
};

namespace {

using Header = RecordHeader;
static_assert(sizeof(Header) == kRecordHeaderBytes, "record header must stay 32 bytes");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the record format is little-endian");

constexpr std::size_t kCrcCoveredHeader = sizeof(Header) - 8;  // key_len .. seq

bool pread_all(int fd, void* buf, std::size_t n, std::uint64_t off) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
    off += static_cast<std::uint64_t>(r);
  }
  return true;
}

// pwritev / preadv until every byte of `iov` moved; false on error or end of file.
template <bool kWrite>
bool pv_all(int fd, iovec* iov, int count, std::uint64_t off) {
  while (count > 0 && iov->iov_len == 0) {
    ++iov;
    --count;
  }
  while (count > 0) {
    const ssize_t w =
        kWrite ? ::pwritev(fd, iov, count, static_cast<off_t>(off)) : ::preadv(fd, iov, count, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += static_cast<std::uint64_t>(w);
    auto left = static_cast<std::size_t>(w);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

bool pwritev_all(int fd, iovec* iov, int count, std::uint64_t off) {
  return pv_all<true>(fd, iov, count, off);
}
bool preadv_all(int fd, iovec* iov, int count, std::uint64_t off) {
  return pv_all<false>(fd, iov, count, off);
}

std::uint32_t record_crc(const Header& h, std::string_view key, std::string_view value) {
  std::uint32_t crc = crc32c_extend(0, &h.key_len, kCrcCoveredHeader);
  crc = crc32c_extend(crc, key.data(), key.size());
  return crc32c_extend(crc, value.data(), value.size());
}

}  // namespace

const char* to_string(DiskError error) {
  switch (error) {
    case DiskError::kOk: return "ok";
    case DiskError::kNoSpace: return "disk tier full";
    case DiskError::kIo: return "disk I/O error";
    case DiskError::kCorrupt: return "corrupt record";
    case DiskError::kTooLarge: return "record too large";
  }
  return "unknown";
}

std::string DiskTier::segment_path(std::uint32_t segment) const {
  char name[32];
  std::snprintf(name, sizeof(name), "/segment-%010u.kvs", segment);
  return config_.dir + name;
}

std::unique_ptr<DiskTier> DiskTier::open(const DiskConfig& config, std::string* error) {
  if (::mkdir(config.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = "cannot create --disk-dir '" + config.dir + "': " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<DiskTier> tier(new DiskTier(config));
  DIR* dir = ::opendir(config.dir.c_str());
  if (dir == nullptr) {
    *error = "cannot open --disk-dir '" + config.dir + "': " + std::strerror(errno);
    return nullptr;
  }
  while (dirent* ent = ::readdir(dir)) {
    unsigned id = 0;
    char tail = 0;
    if (std::sscanf(ent->d_name, "segment-%10u.kv%c", &id, &tail) != 2 || tail != 's') continue;
    const std::string path = tier->segment_path(id);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    ::fstat(fd, &st);
    tier->segments_[id] = Segment{fd, static_cast<std::uint64_t>(st.st_size), 0};
    tier->file_bytes_ += static_cast<std::uint64_t>(st.st_size);
  }
  ::closedir(dir);
  return tier;
}

DiskTier::~DiskTier() {
  for (auto& [id, seg] : segments_) ::close(seg.fd);
}

bool DiskTier::open_active(std::string* error) {
  const std::uint32_t id = segments_.empty() ? 1 : segments_.rbegin()->first + 1;
  const std::string path = segment_path(id);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (error != nullptr) *error = "cannot create segment '" + path + "': " + std::strerror(errno);
    return false;
  }
  segments_[id] = Segment{fd, 0, 0};
  active_ = id;
  return true;
}

bool DiskTier::check_record(int fd, std::uint64_t size, std::uint64_t off, RecordHeader* h,
                            std::vector<char>* body) const {
  body->clear();
  if (off > size || size - off < sizeof(Header) || !pread_all(fd, h, sizeof(Header), off)) return false;
  if ((h->magic != kLiveMagic && h->magic != kDeadMagic) || h->key_len > kMaxKeyBytes ||
      h->value_len > config_.max_value_bytes || record_bytes(h->key_len, h->value_len) > size - off) {
    return false;
  }
  body->resize(std::size_t{h->key_len} + h->value_len);
  if (!pread_all(fd, body->data(), body->size(), off + sizeof(Header))) return false;
  return record_crc(*h, {body->data(), h->key_len}, {body->data() + h->key_len, h->value_len}) == h->crc;
}

std::uint64_t DiskTier::resync(int fd, std::uint64_t size, std::uint64_t from, std::uint64_t min_seq,
                               std::uint64_t* budget, RecordHeader* h, std::vector<char>* body) const {
  // Read the segment in windows and try every offset where a magic number starts; windows overlap
  // by 3 bytes so a magic split between two is still seen.
  constexpr std::size_t kWindow = 1u << 20;
  std::vector<char> window;
  for (std::uint64_t pos = from; pos < size && size - pos >= sizeof(Header);) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kWindow, size - pos));
    window.resize(n);
    if (!pread_all(fd, window.data(), n, pos)) return size;
    for (std::size_t i = 0; i + 4 <= n;) {
      const void* k = std::memchr(window.data() + i, 'K', n - 3 - i);
      if (k == nullptr) break;
      i = static_cast<std::size_t>(static_cast<const char*>(k) - window.data());
      std::uint32_t magic = 0;
      std::memcpy(&magic, window.data() + i, 4);
      if (magic == kLiveMagic || magic == kDeadMagic) {
        if (check_record(fd, size, pos + i, h, body) && h->seq > min_seq) return pos + i;
        // Each candidate costs its record's bytes; stop before that adds up to many segments.
        const std::uint64_t cost = sizeof(Header) + body->size();
        if (cost >= *budget) return size;
        *budget -= cost;
      }
      ++i;
    }
    if (n < kWindow) break;
    pos += n - 3;
  }
  return size;
}

RecoveryReport DiskTier::recover(const std::function<void(const RecoveredRecord&)>& on_record) {
  RecoveryReport report;
  std::vector<char>& body = scratch_;
  for (auto it = segments_.begin(); it != segments_.end(); ++it) {
    const std::uint32_t id = it->first;
    Segment& seg = it->second;
    std::uint64_t off = 0;
    std::uint64_t last_seq = 0;  // sequence numbers grow along a segment
    std::uint64_t budget = 4 * seg.size + (64u << 20);
    while (off < seg.size) {
      Header h{};
      if (!check_record(seg.fd, seg.size, off, &h, &body)) {
        // Torn or corrupt: resume at the next good record, losing only what lies in between.
        const std::uint64_t next = resync(seg.fd, seg.size, off + 1, last_seq, &budget, &h, &body);
        if (next >= seg.size) {
          // Nothing good follows: cut the tail so the space is reclaimed and the next recovery
          // sees a clean segment.
          report.cut_bytes += seg.size - off;
          file_bytes_ -= seg.size - off;
          if (::ftruncate(seg.fd, static_cast<off_t>(off)) != 0) {
            // Could not truncate: account the tail as dead so compaction removes the file later.
            file_bytes_ += seg.size - off;
            seg.dead += seg.size - off;
            dead_bytes_ += seg.size - off;
            break;
          }
          seg.size = off;
          break;
        }
        report.skipped_bytes += next - off;
        ++report.skipped_spans;
        seg.dead += next - off;
        dead_bytes_ += next - off;
        off = next;
      }
      const std::uint64_t bytes = record_bytes(h.key_len, h.value_len);
      last_seq = h.seq;
      next_seq_ = std::max(next_seq_, h.seq + 1);
      if (h.magic == kDeadMagic) {
        seg.dead += bytes;
        dead_bytes_ += bytes;
        off += bytes;
        continue;
      }
      RecoveredRecord rec;
      rec.key = std::string_view(body.data(), h.key_len);
      rec.expire_at_ms = h.expire_at_ms;
      rec.value_size = h.value_len;
      rec.location = DiskLocation{id, off, static_cast<std::uint32_t>(bytes)};
      on_record(rec);
      off += bytes;
    }
  }
  // Drop segments that hold nothing alive, then start a fresh active segment.
  for (auto it = segments_.begin(); it != segments_.end();) {
    auto next = std::next(it);
    if (it->second.dead >= it->second.size) remove_segment(it);
    it = next;
  }
  open_active(nullptr);
  std::vector<char>().swap(scratch_);  // as large as the largest record: do not keep it
  return report;
}

DiskError DiskTier::append(std::string_view key, std::string_view value, std::int64_t expire_at_ms, DiskLocation* out) {
  if (key.size() > kMaxKeyBytes || value.size() > config_.max_value_bytes) return DiskError::kTooLarge;
  const std::uint64_t bytes = record_bytes(key.size(), value.size());
  auto it = segments_.find(active_);
  if (it == segments_.end() || (it->second.size > 0 && it->second.size + bytes > config_.segment_bytes)) {
    if (!open_active(nullptr)) return DiskError::kIo;
    it = segments_.find(active_);
  }
  Segment& seg = it->second;
  Header h{kLiveMagic,   0,          static_cast<std::uint32_t>(key.size()), static_cast<std::uint32_t>(value.size()),
           expire_at_ms, next_seq_++};
  h.crc = record_crc(h, key, value);
  iovec iov[3] = {
      {&h, sizeof(h)}, {const_cast<char*>(key.data()), key.size()}, {const_cast<char*>(value.data()), value.size()}};
  if (!pwritev_all(seg.fd, iov, 3, seg.size)) {
    // A partial record may be on disk; it fails its checksum on recovery. Skip past it.
    seg.size += bytes;
    seg.dead += bytes;
    file_bytes_ += bytes;
    dead_bytes_ += bytes;
    return errno == ENOSPC ? DiskError::kNoSpace : DiskError::kIo;
  }
  *out = DiskLocation{active_, seg.size, static_cast<std::uint32_t>(bytes)};
  seg.size += bytes;
  file_bytes_ += bytes;
  return DiskError::kOk;
}

DiskError DiskTier::read(const DiskLocation& location, std::string_view key, Blob* value) const {
  auto it = segments_.find(location.segment);
  if (it == segments_.end()) return DiskError::kIo;
  return read_record(it->second.fd, location, key, value);
}

DiskError DiskTier::read_record(int fd, const DiskLocation& location, std::string_view key, Blob* value) {
  Header h{};
  if (!pread_all(fd, &h, sizeof(h), location.offset)) return DiskError::kIo;
  if (h.magic != kLiveMagic || h.key_len != key.size() ||
      record_bytes(h.key_len, h.value_len) != location.record_bytes) {
    return DiskError::kCorrupt;
  }
  // One preadv: the key into a scratch string, the value straight into the blob handed to replies.
  std::string stored_key(h.key_len, '\0');
  Blob out = Blob::allocate(h.value_len);
  iovec iov[2] = {{stored_key.data(), stored_key.size()}, {out.data(), out.size()}};
  if (!preadv_all(fd, iov, 2, location.offset + sizeof(Header))) return DiskError::kIo;
  if (stored_key != key) return DiskError::kCorrupt;
  if (record_crc(h, stored_key, out.view()) != h.crc) return DiskError::kCorrupt;
  *value = std::move(out);
  return DiskError::kOk;
}

int DiskTier::dup_segment_fd(std::uint32_t segment) const {
  auto it = segments_.find(segment);
  return it == segments_.end() ? -1 : ::fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
}

DiskError DiskTier::for_each_record(std::uint32_t segment,
                                    const std::function<void(const DiskLocation&, std::string_view key)>& fn) const {
  auto it = segments_.find(segment);
  if (it == segments_.end()) return DiskError::kIo;
  const Segment& seg = it->second;
  std::uint64_t off = 0;
  std::uint64_t last_seq = 0;
  std::uint64_t budget = 4 * seg.size + (64u << 20);
  std::string key;
  std::vector<char> body;
  while (off + sizeof(Header) <= seg.size) {
    Header h{};
    if (!pread_all(seg.fd, &h, sizeof(h), off)) return DiskError::kIo;
    std::uint64_t bytes = record_bytes(h.key_len, h.value_len);
    if ((h.magic != kLiveMagic && h.magic != kDeadMagic) || h.key_len > kMaxKeyBytes ||
        h.value_len > config_.max_value_bytes || bytes > seg.size - off) {
      // Recovery skipped this span (or it was corrupted since): find the next good record.
      off = resync(seg.fd, seg.size, off + 1, last_seq, &budget, &h, &body);
      if (off >= seg.size) break;
      bytes = record_bytes(h.key_len, h.value_len);
    }
    last_seq = h.seq;
    if (h.magic == kLiveMagic) {
      key.resize(h.key_len);
      if (!pread_all(seg.fd, key.data(), key.size(), off + sizeof(Header))) return DiskError::kIo;
      fn(DiskLocation{segment, off, static_cast<std::uint32_t>(bytes)}, key);
    }
    off += bytes;
  }
  return DiskError::kOk;
}

std::uint64_t DiskTier::live_bytes(std::uint32_t segment) const {
  auto it = segments_.find(segment);
  return it == segments_.end() ? 0 : it->second.size - std::min(it->second.dead, it->second.size);
}

void DiskTier::mark_dead(const DiskLocation& location) {
  auto it = segments_.find(location.segment);
  if (it == segments_.end()) return;
  const std::uint32_t magic = kDeadMagic;
  // Best effort: if this write fails the record stays live on disk, but it is gone from the index
  // now; a restart could then resurrect it. Nothing better is possible without the disk.
  (void)!::pwrite(it->second.fd, &magic, sizeof(magic), static_cast<off_t>(location.offset));
  it->second.dead += location.record_bytes;
  dead_bytes_ += location.record_bytes;
  if (location.segment != active_ && it->second.dead >= it->second.size) remove_segment(it);
}

void DiskTier::remove_segment(std::map<std::uint32_t, Segment>::iterator it) {
  ::close(it->second.fd);
  ::unlink(segment_path(it->first).c_str());
  file_bytes_ -= it->second.size;
  dead_bytes_ -= it->second.dead;
  segments_.erase(it);
}

void DiskTier::drop_segment(std::uint32_t segment) {
  auto it = segments_.find(segment);
  if (it != segments_.end() && segment != active_) remove_segment(it);
}

void DiskTier::clear() {
  while (!segments_.empty()) remove_segment(segments_.begin());
  open_active(nullptr);
}

bool DiskTier::pick_compaction_victim(double min_dead_fraction, std::uint32_t* segment) {
  std::uint64_t best_dead = 0;
  bool found = false;
  for (const auto& [id, seg] : segments_) {
    if (seg.dead == 0 || seg.dead < min_dead_fraction * static_cast<double>(seg.size)) continue;
    if (seg.dead > best_dead) {
      best_dead = seg.dead;
      *segment = id;
      found = true;
    }
  }
  if (found && *segment == active_) open_active(nullptr);  // seal it so it can be dropped
  return found;
}

}  // namespace disagg::kvstore
