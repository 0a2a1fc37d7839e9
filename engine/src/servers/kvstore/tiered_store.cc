#include "tiered_store.h"

#include <algorithm>

namespace disagg::kvstore {

const char* to_string(StoreStatus status) {
  switch (status) {
    case StoreStatus::kOk: return "ok";
    case StoreStatus::kNotFound: return "not found";
    case StoreStatus::kNotSet: return "not set";
    case StoreStatus::kTooLarge: return "value too large";
    case StoreStatus::kNoSpace: return "no space in either tier";
    case StoreStatus::kIoError: return "disk I/O error";
    case StoreStatus::kPending: return "disk read pending";
  }
  return "unknown";
}

std::unique_ptr<TieredStore> TieredStore::open(const StoreConfig& config, std::int64_t now_ms, std::string* error) {
  std::unique_ptr<TieredStore> store(new TieredStore(config));
  if (config.disk_dir.empty() || config.disk_bytes == 0) return store;
  if (store->config_.segment_bytes == 0) {
    // ~256 segments per tier keeps file descriptors few and each compaction step small. A record
    // larger than a segment simply gets a segment of its own.
    store->config_.segment_bytes = std::clamp<std::uint64_t>(config.disk_bytes / 256, 1u << 20, 4ull << 30);
  }
  if (config.disk_bytes < 2 * store->config_.segment_bytes) {
    *error = "--disk-bytes (" + std::to_string(config.disk_bytes) + ") must hold at least two segments of " +
             std::to_string(store->config_.segment_bytes) + " bytes; raise --disk-bytes or lower --segment-bytes";
    return nullptr;
  }
  DiskConfig dc;
  dc.dir = config.disk_dir;
  dc.budget_bytes = config.disk_bytes;
  dc.segment_bytes = store->config_.segment_bytes;
  dc.max_value_bytes = config.max_value_bytes;
  store->disk_ = DiskTier::open(dc, error);
  if (!store->disk_) return nullptr;
  TieredStore* self = store.get();
  const RecoveryReport report = self->disk_->recover([self, now_ms](const RecoveredRecord& rec) {
    if (rec.expire_at_ms != 0 && rec.expire_at_ms <= now_ms) {
      self->disk_->mark_dead(rec.location);
      return;
    }
    Entry* e = self->index_.find(rec.key);
    if (e != nullptr) {
      self->detach(e);  // a later record supersedes: kill the older one
    } else {
      e = self->index_.insert(rec.key);
    }
    e->tier = Tier::kDisk;
    e->disk = rec.location;
    e->value_size = rec.value_size;
    e->expire_at_ms = rec.expire_at_ms;
    e->reads = self->config_.demote_min_reads;  // it was reused before it reached disk
    lru_push_front(&self->disk_lru_, e);
    self->index_bytes_ += index_charge(e);
  });
  self->stats_.recovery_cut_bytes = report.cut_bytes;
  self->stats_.recovery_skipped_bytes = report.skipped_bytes;
  self->stats_.recovery_skipped_spans = report.skipped_spans;
  self->stats_.recovered_keys = self->index_.size();
  // Recovery can find more than the budget allows (e.g. the budget was lowered): trim now.
  self->make_disk_room(0);
  return store;
}

TieredStore::~TieredStore() = default;

void TieredStore::lru_unlink(LruList* list, Entry* e) {
  if (e->lru_prev != nullptr) e->lru_prev->lru_next = e->lru_next;
  else list->head = e->lru_next;
  if (e->lru_next != nullptr) e->lru_next->lru_prev = e->lru_prev;
  else list->tail = e->lru_prev;
  e->lru_prev = e->lru_next = nullptr;
}

void TieredStore::lru_push_front(LruList* list, Entry* e) {
  e->lru_prev = nullptr;
  e->lru_next = list->head;
  if (list->head != nullptr) list->head->lru_prev = e;
  else list->tail = e;
  list->head = e;
}

Entry* TieredStore::find_live(std::string_view key, std::int64_t now_ms) {
  Entry* e = index_.find(key);
  if (e != nullptr && is_expired(e, now_ms)) {
    remove(e);
    ++stats_.expired;
    return nullptr;
  }
  return e;
}

void TieredStore::detach(Entry* e) {
  switch (e->tier) {
    case Tier::kNone: break;
    case Tier::kMemory:
      lru_unlink(&memory_lru_, e);
      memory_bytes_ -= memory_charge(e);
      --memory_keys_;
      e->value = Blob();
      break;
    case Tier::kDisk:
      lru_unlink(&disk_lru_, e);
      disk_->mark_dead(e->disk);
      index_bytes_ -= index_charge(e);
      e->disk = DiskLocation{};
      break;
  }
  e->tier = Tier::kNone;
  e->value_size = 0;
}

void TieredStore::remove(Entry* e) {
  detach(e);
  index_.erase(e);
}

void TieredStore::place_in_memory(Entry* e, Blob value) {
  e->tier = Tier::kMemory;
  e->value_size = value.size();
  e->value = std::move(value);
  lru_push_front(&memory_lru_, e);
  memory_bytes_ += memory_charge(e);
  ++memory_keys_;
}

bool TieredStore::make_memory_room(std::uint64_t need) {
  // Values still arriving (reserved_) keep their share: only stored entries make way.
  if (need > config_.memory_bytes || reserved_ > config_.memory_bytes - need) return false;
  const std::uint64_t limit = config_.memory_bytes - reserved_;
  while (memory_bytes_ + need > limit && memory_lru_.tail != nullptr) demote_or_evict(memory_lru_.tail);
  return memory_bytes_ + need <= limit;
}

bool TieredStore::reserve(std::uint64_t bytes) {
  if (!make_memory_room(bytes)) return false;
  reserved_ += bytes;
  return true;
}

std::int64_t TieredStore::value_size(std::string_view key, std::int64_t now_ms) {
  const Entry* e = find_live(key, now_ms);
  return e == nullptr ? -1 : static_cast<std::int64_t>(e->value_size);
}

void TieredStore::demote_or_evict(Entry* e) {
  if (disk_ && e->reads >= config_.demote_min_reads) {
    Blob value = e->value;  // keeps the bytes alive while the entry is detached
    const std::uint32_t reads = e->reads;
    detach(e);
    if (write_to_disk(e, value.view()) == StoreStatus::kOk) {
      e->reads = reads;
      ++stats_.demotions;
      return;
    }
    index_.erase(e);  // the disk tier cannot take it: evict after all
  } else {
    remove(e);
  }
  ++stats_.evictions_memory;
}

StoreStatus TieredStore::write_to_disk(Entry* e, std::string_view value) {
  const std::uint64_t bytes = DiskTier::record_bytes(e->key.size(), value.size());
  if (!make_disk_room(bytes)) return StoreStatus::kNoSpace;
  DiskLocation loc;
  const DiskError err = disk_->append(e->key, value, e->expire_at_ms, &loc);
  if (err != DiskError::kOk) {
    ++stats_.disk_errors;
    return err == DiskError::kNoSpace ? StoreStatus::kNoSpace : StoreStatus::kIoError;
  }
  e->tier = Tier::kDisk;
  e->disk = loc;
  e->value_size = value.size();
  lru_push_front(&disk_lru_, e);
  index_bytes_ += index_charge(e);
  return StoreStatus::kOk;
}

bool TieredStore::make_disk_room(std::uint64_t need) {
  if (need > disk_->budget_bytes()) return false;
  while (!disk_->fits(need)) {
    std::uint32_t victim = 0;
    if (disk_->pick_compaction_victim(0.5, &victim)) {
      if (compact(victim)) continue;
    }
    if (disk_lru_.tail == nullptr) {
      // Nothing left to evict; only dead bytes remain. Compact whatever has any.
      if (disk_->pick_compaction_victim(0.0, &victim) && compact(victim)) continue;
      return false;
    }
    remove(disk_lru_.tail);
    ++stats_.evictions_disk;
  }
  return true;
}

bool TieredStore::compact(std::uint32_t segment) {
  // Collect the live records first: relocating while iterating would read our own appends.
  struct Live {
    Entry* e;
  };
  std::vector<Live> live;
  std::uint64_t found_bytes = 0;
  const DiskError err = disk_->for_each_record(segment, [&](const DiskLocation& loc, std::string_view key) {
    Entry* e = index_.find(key);
    if (e != nullptr && e->tier == Tier::kDisk && e->disk.segment == loc.segment && e->disk.offset == loc.offset) {
      live.push_back({e});
      found_bytes += loc.record_bytes;
    }
  });
  if (err == DiskError::kIo) {
    ++stats_.disk_errors;
    return false;
  }
  if (found_bytes != disk_->live_bytes(segment)) {
    // The walk missed live records (a corrupt header sent it past them): find them from the index
    // side instead, so dropping the segment loses none. O(disk-resident keys); rare.
    live.clear();
    for (Entry* e = disk_lru_.head; e != nullptr; e = e->lru_next) {
      if (e->disk.segment == segment) live.push_back({e});
    }
  }
  for (const Live& l : live) {
    Entry* e = l.e;
    Blob value;
    if (disk_->read(e->disk, e->key, &value) != DiskError::kOk) {
      ++stats_.corrupt_reads;
      remove(e);
      continue;
    }
    DiskLocation loc;
    if (disk_->append(e->key, value.view(), e->expire_at_ms, &loc) != DiskError::kOk) {
      ++stats_.disk_errors;
      remove(e);
      continue;
    }
    // The old copy dies with its segment; the new one is the live record from now on.
    e->disk = loc;
    stats_.compacted_bytes += loc.record_bytes;
  }
  disk_->drop_segment(segment);
  ++stats_.compactions;
  return true;
}

StoreStatus TieredStore::get(std::string_view key, std::int64_t now_ms, Blob* value) {
  DiskRead read;
  const StoreStatus st = begin_get(key, now_ms, value, &read);
  if (st != StoreStatus::kPending) return st;
  Blob loaded;
  const DiskError err = disk_->read(read.location, read.key, &loaded);
  return finish_get(read, err, std::move(loaded), now_ms, value);
}

StoreStatus TieredStore::begin_get(std::string_view key, std::int64_t now_ms, Blob* value, DiskRead* read) {
  Entry* e = find_live(key, now_ms);
  if (e == nullptr) {
    ++stats_.misses;
    return StoreStatus::kNotFound;
  }
  if (e->reads != UINT32_MAX) ++e->reads;
  if (e->tier == Tier::kMemory) {
    lru_unlink(&memory_lru_, e);
    lru_push_front(&memory_lru_, e);
    ++stats_.hits_memory;
    *value = e->value;
    return StoreStatus::kOk;
  }
  read->key.assign(key);
  read->location = e->disk;
  read->epoch = epoch_;
  return StoreStatus::kPending;
}

StoreStatus TieredStore::finish_get(const DiskRead& read, DiskError err, Blob loaded, std::int64_t now_ms,
                                    Blob* value) {
  Entry* e = index_.find(read.key);
  const bool unchanged = e != nullptr && read.epoch == epoch_ && e->tier == Tier::kDisk &&
                         e->disk.segment == read.location.segment && e->disk.offset == read.location.offset;
  if (!unchanged) {
    if (err != DiskError::kOk) return get(read.key, now_ms, value);  // the record died under the read
    ++stats_.hits_disk;
    *value = std::move(loaded);
    return StoreStatus::kOk;
  }
  if (err != DiskError::kOk) {
    // Never serve a record that fails its checks: drop the key and report a miss.
    if (err == DiskError::kCorrupt) ++stats_.corrupt_reads;
    else ++stats_.disk_errors;
    remove(e);
    ++stats_.misses;
    return StoreStatus::kNotFound;
  }
  ++stats_.hits_disk;
  const std::uint64_t charge = kEntryOverhead + e->key.size() + loaded.size();
  if (charge <= config_.memory_bytes) {
    const std::uint32_t reads = e->reads;
    detach(e);
    if (make_memory_room(charge)) {
      place_in_memory(e, loaded);
      e->reads = reads;
      ++stats_.promotions;
    } else if (write_to_disk(e, loaded.view()) != StoreStatus::kOk) {
      index_.erase(e);  // fits nowhere any more; it is still served this once
    } else {
      e->reads = reads;
    }
  } else {
    lru_unlink(&disk_lru_, e);
    lru_push_front(&disk_lru_, e);
  }
  *value = std::move(loaded);
  return StoreStatus::kOk;
}

StoreStatus TieredStore::set(std::string_view key, std::string_view value, std::int64_t expire_at_ms,
                             std::int64_t now_ms, SetCondition condition, bool keep_ttl) {
  return set_value(key, value, nullptr, expire_at_ms, now_ms, condition, keep_ttl);
}

StoreStatus TieredStore::set(std::string_view key, const Blob& value, std::int64_t expire_at_ms, std::int64_t now_ms,
                             SetCondition condition, bool keep_ttl) {
  return set_value(key, value.view(), &value, expire_at_ms, now_ms, condition, keep_ttl);
}

StoreStatus TieredStore::set_value(std::string_view key, std::string_view value, const Blob* owned,
                                   std::int64_t expire_at_ms, std::int64_t now_ms, SetCondition condition,
                                   bool keep_ttl) {
  if (value.size() > config_.max_value_bytes || key.size() > kMaxKeyBytes) return StoreStatus::kTooLarge;
  Entry* e = find_live(key, now_ms);
  if ((condition == SetCondition::kIfAbsent && e != nullptr) ||
      (condition == SetCondition::kIfPresent && e == nullptr)) {
    return StoreStatus::kNotSet;
  }
  const std::uint64_t charge = kEntryOverhead + key.size() + value.size();
  if (charge > config_.memory_bytes && !disk_) return StoreStatus::kNoSpace;
  const bool existed = e != nullptr;
  if (existed) {
    detach(e);
  } else {
    e = index_.insert(key);
  }
  if (!(keep_ttl && existed)) e->expire_at_ms = expire_at_ms;
  e->reads = 0;
  if (charge <= config_.memory_bytes) {
    Blob blob = owned != nullptr ? *owned : Blob::copy_of(value);
    if (make_memory_room(charge)) {
      place_in_memory(e, std::move(blob));
      return StoreStatus::kOk;
    }
  }
  // Larger than the memory tier (or memory cannot be freed): store it on disk directly.
  const StoreStatus st = disk_ ? write_to_disk(e, value) : StoreStatus::kNoSpace;
  if (st != StoreStatus::kOk) index_.erase(e);
  return st;
}

bool TieredStore::del(std::string_view key, std::int64_t now_ms) {
  Entry* e = find_live(key, now_ms);
  if (e == nullptr) return false;
  remove(e);
  return true;
}

bool TieredStore::exists(std::string_view key, std::int64_t now_ms) {
  return find_live(key, now_ms) != nullptr;
}

std::int64_t TieredStore::ttl_ms(std::string_view key, std::int64_t now_ms) {
  const Entry* e = find_live(key, now_ms);
  if (e == nullptr) return -2;
  if (e->expire_at_ms == 0) return -1;
  return e->expire_at_ms - now_ms;
}

bool TieredStore::expire(std::string_view key, std::int64_t expire_at_ms, std::int64_t now_ms) {
  Entry* e = find_live(key, now_ms);
  if (e == nullptr) return false;
  if (expire_at_ms <= now_ms) {
    remove(e);
    return true;
  }
  if (e->tier == Tier::kMemory) {
    e->expire_at_ms = expire_at_ms;
    return true;
  }
  // The expiry is part of the checksummed record: rewrite it so a restart sees the new one.
  Blob value;
  if (disk_->read(e->disk, e->key, &value) != DiskError::kOk) {
    ++stats_.corrupt_reads;
    remove(e);
    return false;
  }
  const std::uint32_t reads = e->reads;
  detach(e);
  e->expire_at_ms = expire_at_ms;
  if (write_to_disk(e, value.view()) != StoreStatus::kOk) {
    index_.erase(e);
    return false;
  }
  e->reads = reads;
  return true;
}

void TieredStore::flush_all() {
  ++epoch_;
  index_.clear();
  memory_lru_ = {};
  disk_lru_ = {};
  memory_bytes_ = 0;
  index_bytes_ = 0;
  memory_keys_ = 0;
  if (disk_) disk_->clear();
}

std::uint64_t TieredStore::scan(std::uint64_t cursor, std::size_t count, std::string_view match, std::int64_t now_ms,
                                std::vector<std::string>* keys) {
  return index_.scan(cursor, std::max<std::size_t>(count, 1), [&](const Entry* e) {
    if (is_expired(e, now_ms)) return;
    if (!match.empty() && !glob_match(match, e->key)) return;
    keys->push_back(e->key);
  });
}

void TieredStore::sweep_expired(std::int64_t now_ms, std::size_t buckets) {
  std::vector<Entry*> expired;
  expire_cursor_ = index_.scan(expire_cursor_, buckets, [&](Entry* e) {
    if (is_expired(e, now_ms)) expired.push_back(e);
  });
  for (Entry* e : expired) {
    remove(e);
    ++stats_.expired;
  }
}

namespace {

// Matches the pattern element at p[pi] (anything but '*') against `c`, with the rules of Redis's
// stringmatchlen(): `?`, `[...]` (`^` negates, `a-z` ranges either way round, `\x` escapes, a class
// left open runs to the end of the pattern), `\x`, or a literal. Sets *next past the element.
bool match_element(std::string_view p, std::size_t pi, char c, std::size_t* next) {
  const char pc = p[pi];
  if (pc == '?') {
    *next = pi + 1;
    return true;
  }
  if (pc == '[') {
    std::size_t j = pi + 1;
    const bool negate = j < p.size() && p[j] == '^';
    if (negate) ++j;
    bool matched = false;
    for (;; ++j) {
      if (j + 1 < p.size() && p[j] == '\\') {
        ++j;
        matched |= p[j] == c;
      } else if (j < p.size() && p[j] == ']') {
        break;
      } else if (j >= p.size()) {
        --j;  // open class: it ends with the pattern
        break;
      } else if (j + 2 < p.size() && p[j + 1] == '-') {
        const char lo = std::min(p[j], p[j + 2]), hi = std::max(p[j], p[j + 2]);
        matched |= c >= lo && c <= hi;
        j += 2;
      } else {
        matched |= p[j] == c;
      }
    }
    *next = j + 1;
    return matched != negate;
  }
  if (pc == '\\' && pi + 1 < p.size()) {
    *next = pi + 2;
    return p[pi + 1] == c;
  }
  *next = pi + 1;
  return pc == c;
}

}  // namespace

bool glob_match(std::string_view p, std::string_view s) {
  // Redis matches nothing but the empty pattern against an empty string (callers that mean "all"
  // pass no pattern, as KEYS * and SCAN MATCH * do).
  if (s.empty()) return p.empty();
  // Each element matches one byte, so backtracking to the last '*' only is enough (linear in
  // practice, unlike the recursive original on patterns such as *a*a*a*b).
  std::size_t pi = 0, si = 0, star_p = std::string_view::npos, star_s = 0;
  while (si < s.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star_p = pi++;
      star_s = si;
      continue;
    }
    std::size_t next = 0;
    if (pi < p.size() && match_element(p, pi, s[si], &next)) {
      pi = next;
      ++si;
      continue;
    }
    if (star_p == std::string_view::npos) return false;
    pi = star_p + 1;
    si = ++star_s;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace disagg::kvstore
