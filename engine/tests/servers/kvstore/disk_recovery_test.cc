// Crash recovery of the disk tier: after a restart every read returns the last complete value of
// its key or a miss; torn and corrupt records are never served.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "disk_tier.h"
#include "test_util.h"
#include "tiered_store.h"

namespace disagg::kvstore {
namespace {

using testing::TempDir;

StoreConfig spill_config(const TempDir& dir) {
  StoreConfig cfg;
  cfg.memory_bytes = 64 * 1024;  // tiny: nearly everything lives on disk
  cfg.disk_dir = dir.path();
  cfg.disk_bytes = 64u << 20;
  cfg.segment_bytes = 256 * 1024;
  cfg.demote_min_reads = 0;
  cfg.max_value_bytes = 1 << 20;
  return cfg;
}

std::vector<std::filesystem::path> segments(const TempDir& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Writes `ops` random overwrites over `keys` keys; returns the last value written per key.
std::map<std::string, std::string> write_history(TieredStore* store, std::uint64_t seed, int ops, int keys) {
  std::mt19937_64 rng(seed);
  std::map<std::string, std::string> last;
  for (int i = 0; i < ops; ++i) {
    const std::string key = "k" + std::to_string(rng() % keys);
    std::string value = testing::make_value(rng, 1000 + rng() % 20000);
    EXPECT_EQ(store->set(key, value, 0, 0), StoreStatus::kOk);
    last[key] = std::move(value);
  }
  return last;
}

// Every key reads as its last written value or a miss; returns how many were present.
int check_last_or_miss(TieredStore* store, const std::map<std::string, std::string>& last) {
  int present = 0;
  for (const auto& [key, value] : last) {
    Blob v;
    if (store->get(key, 0, &v) == StoreStatus::kOk) {
      ++present;
      EXPECT_EQ(v.view(), value) << "stale or corrupt value served for " << key;
    }
  }
  return present;
}

TEST(DiskRecovery, CleanRestartRecoversDiskResidentKeys) {
  // GIVEN a store whose keys were demoted to disk
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(spill_config(dir), 0, &error);
  ASSERT_TRUE(store) << error;
  const auto last = write_history(store.get(), 1, 300, 60);
  const std::size_t on_disk = store->disk_keys();
  ASSERT_GT(on_disk, 40u);
  // WHEN the process goes away without any shutdown step (no destructor flushing matters: the
  // store writes records with pwrite as it goes) and a new one opens the same directory
  store.reset();
  store = TieredStore::open(spill_config(dir), 0, &error);
  ASSERT_TRUE(store) << error;
  // THEN the disk-resident keys come back with their last values; memory-resident ones are misses
  EXPECT_EQ(store->stats().recovered_keys, on_disk);
  EXPECT_EQ(check_last_or_miss(store.get(), last), static_cast<int>(on_disk));
}

TEST(DiskRecovery, OverwrittenAndDeletedKeysDoNotComeBack) {
  // GIVEN keys on disk that are then overwritten in memory or deleted
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(spill_config(dir), 0, &error);
  std::mt19937_64 rng(2);
  for (int i = 0; i < 20; ++i) store->set("k" + std::to_string(i), testing::make_value(rng, 10000), 0, 0);
  ASSERT_GT(store->disk_keys(), 10u);
  store->set("k0", "new", 0, 0);  // small: stays in memory
  store->del("k1", 0);
  // WHEN restarted
  store.reset();
  store = TieredStore::open(spill_config(dir), 0, &error);
  // THEN neither the old k0 nor the deleted k1 is served
  Blob v;
  EXPECT_EQ(store->get("k0", 0, &v), StoreStatus::kNotFound);
  EXPECT_EQ(store->get("k1", 0, &v), StoreStatus::kNotFound);
  EXPECT_EQ(store->get("k2", 0, &v), StoreStatus::kOk);
}

TEST(DiskRecovery, TornTailsAtRandomOffsetsAreCutOff) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    // GIVEN a store with history on disk
    TempDir dir;
    std::string error;
    auto store = TieredStore::open(spill_config(dir), 0, &error);
    const auto last = write_history(store.get(), seed, 200, 50);
    store.reset();
    // WHEN the newest segment is truncated at a random byte (a write torn by kill -9)
    auto segs = segments(dir);
    ASSERT_FALSE(segs.empty());
    std::filesystem::path victim = segs.back();
    for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
      if (std::filesystem::file_size(*it) > 0) {
        victim = *it;
        break;
      }
    }
    const auto size = std::filesystem::file_size(victim);
    std::mt19937_64 rng(seed * 77);
    std::filesystem::resize_file(victim, rng() % size);
    store = TieredStore::open(spill_config(dir), 0, &error);
    ASSERT_TRUE(store) << error;
    // THEN every key reads as its last value or a miss, never a torn or older value
    check_last_or_miss(store.get(), last);
    // AND a second restart finds a clean tier (the torn tail was cut, not skipped each time)
    store.reset();
    store = TieredStore::open(spill_config(dir), 0, &error);
    EXPECT_EQ(store->stats().recovery_cut_bytes, 0u);
    check_last_or_miss(store.get(), last);
  }
}

TEST(DiskRecovery, CorruptBytesAreNeverServed) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    // GIVEN a store with history on disk
    TempDir dir;
    std::string error;
    auto store = TieredStore::open(spill_config(dir), 0, &error);
    const auto last = write_history(store.get(), seed + 100, 200, 50);
    store.reset();
    // WHEN random bytes in random segments are flipped
    std::mt19937_64 rng(seed);
    for (int flips = 0; flips < 5; ++flips) {
      auto segs = segments(dir);
      const auto& path = segs[rng() % segs.size()];
      const auto size = std::filesystem::file_size(path);
      if (size == 0) continue;
      const int fd = ::open(path.c_str(), O_RDWR);
      const off_t off = static_cast<off_t>(rng() % size);
      char c = 0;
      ASSERT_EQ(::pread(fd, &c, 1, off), 1);
      c = static_cast<char>(c ^ (1 + rng() % 255));
      ASSERT_EQ(::pwrite(fd, &c, 1, off), 1);
      ::close(fd);
    }
    store = TieredStore::open(spill_config(dir), 0, &error);
    ASSERT_TRUE(store) << error;
    // THEN no corrupt value is returned
    check_last_or_miss(store.get(), last);
  }
}

// One record of a segment file, read with the layout documented in disk_tier.h.
struct SegmentRecord {
  std::filesystem::path path;
  std::uint64_t offset = 0, bytes = 0;
  bool live = false;
  std::string key;
};

// Walks every segment of a clean tier (no corruption yet) by its headers.
std::vector<SegmentRecord> read_records(const TempDir& dir) {
  std::vector<SegmentRecord> out;
  for (const auto& path : segments(dir)) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    const auto size = std::filesystem::file_size(path);
    for (std::uint64_t off = 0; off + kRecordHeaderBytes <= size;) {
      std::uint32_t h[4];
      EXPECT_EQ(::pread(fd, h, sizeof(h), static_cast<off_t>(off)), static_cast<ssize_t>(sizeof(h)));
      SegmentRecord r{path, off, kRecordHeaderBytes + h[2] + h[3], h[0] == kLiveMagic, std::string(h[2], '\0')};
      EXPECT_TRUE(h[0] == kLiveMagic || h[0] == kDeadMagic) << path << " at " << off;
      EXPECT_EQ(::pread(fd, r.key.data(), r.key.size(), static_cast<off_t>(off + kRecordHeaderBytes)),
                static_cast<ssize_t>(r.key.size()));
      off += r.bytes;
      out.push_back(std::move(r));
    }
    ::close(fd);
  }
  return out;
}

TEST(DiskRecovery, CorruptRecordsCostOnlyThemselves) {
  int lost_total = 0, corrupt_total = 0, intact_total = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    // GIVEN a store whose history (overwrites too, so dead records sit between live ones) is on disk
    TempDir dir;
    std::string error;
    auto store = TieredStore::open(spill_config(dir), 0, &error);
    ASSERT_TRUE(store) << error;
    const auto last = write_history(store.get(), seed + 300, 250, 100);
    store.reset();
    const std::vector<SegmentRecord> records = read_records(dir);
    // WHEN 8 bytes are inverted at 4 random places of the segment files
    std::mt19937_64 rng(seed);
    std::vector<std::pair<std::filesystem::path, std::uint64_t>> hits;
    const auto segs = segments(dir);
    for (int place = 0; place < 4; ++place) {
      const auto& path = segs[rng() % segs.size()];
      const auto size = std::filesystem::file_size(path);
      if (size < 8) continue;
      const std::uint64_t off = rng() % (size - 7);
      const int fd = ::open(path.c_str(), O_RDWR);
      char bytes[8];
      ASSERT_EQ(::pread(fd, bytes, 8, static_cast<off_t>(off)), 8);
      for (char& b : bytes) b = static_cast<char>(~b);
      ASSERT_EQ(::pwrite(fd, bytes, 8, static_cast<off_t>(off)), 8);
      ::close(fd);
      hits.emplace_back(path, off);
    }
    std::map<std::string, bool> live;  // key -> its live record was hit
    for (const SegmentRecord& r : records) {
      if (!r.live) continue;
      bool hit = false;
      for (const auto& [path, off] : hits) hit |= path == r.path && off < r.offset + r.bytes && r.offset < off + 8;
      live[r.key] = hit;
    }
    store = TieredStore::open(spill_config(dir), 0, &error);
    ASSERT_TRUE(store) << error;
    // THEN every intact record's key is back with its last value, and every corrupt one is gone
    // (a key has one live record: older versions were marked dead when overwritten)
    int lost = 0;
    for (const auto& [key, hit] : live) {
      Blob v;
      const StoreStatus st = store->get(key, 0, &v);
      if (hit) {
        EXPECT_EQ(st, StoreStatus::kNotFound) << "corrupt record of " << key << " served";
        ++corrupt_total;
      } else {
        ++intact_total;
        if (st != StoreStatus::kOk) ++lost;
        else EXPECT_EQ(v.view(), last.at(key)) << key;
      }
    }
    EXPECT_EQ(lost, 0) << "seed " << seed << ": intact keys lost";
    lost_total += lost;
  }
  std::printf("corrupt records: %d, intact records: %d, intact lost: %d\n", corrupt_total, intact_total, lost_total);
}

TEST(DiskRecovery, CompactionOfASegmentWithACorruptHeaderKeepsItsLiveRecords) {
  // GIVEN 60 distinct 20 KB values on disk (no overwrites: only the segment picked below has dead bytes)
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(spill_config(dir), 0, &error);
  std::mt19937_64 rng(9);
  std::map<std::string, std::string> values;
  for (int i = 0; i < 60; ++i) {
    const std::string key = "key" + std::to_string(100 + i);
    values[key] = testing::make_value(rng, 20000);
    ASSERT_EQ(store->set(key, values[key], 0, 0), StoreStatus::kOk);
  }
  store.reset();
  // AND in the first segment with 8 records, record 1's value length is rewritten so that its
  // header (still sane) ends exactly where record 3 starts: a walk trusting it skips record 2
  const std::vector<SegmentRecord> records = read_records(dir);
  std::vector<SegmentRecord> seg;
  for (const auto& path : segments(dir)) {
    seg.clear();
    for (const SegmentRecord& r : records) {
      if (r.path == path) seg.push_back(r);
    }
    if (seg.size() >= 8) break;
  }
  ASSERT_GE(seg.size(), 8u);
  {
    const int fd = ::open(seg[1].path.c_str(), O_RDWR);
    const std::uint32_t value_len =
        static_cast<std::uint32_t>(seg[3].offset - seg[1].offset - kRecordHeaderBytes - seg[1].key.size());
    ASSERT_EQ(::pwrite(fd, &value_len, 4, static_cast<off_t>(seg[1].offset + 12)), 4);
    ::close(fd);
  }
  // WHEN it restarts (recovery checks the checksum: only record 1 is lost), keys 4..7 of that
  // segment are deleted (so it is more than half dead), and a restart with a budget just below the
  // files' size makes the store compact it
  store = TieredStore::open(spill_config(dir), 0, &error);
  ASSERT_TRUE(store) << error;
  EXPECT_EQ(store->stats().recovery_skipped_spans, 1u);
  for (std::size_t i = 4; i < seg.size(); ++i) EXPECT_TRUE(store->del(seg[i].key, 0));
  const std::uint64_t files = store->disk_file_bytes();
  store.reset();
  StoreConfig tight = spill_config(dir);
  tight.disk_bytes = files - 1;
  store = TieredStore::open(tight, 0, &error);
  ASSERT_TRUE(store) << error;
  EXPECT_GE(store->stats().compactions, 1u);
  EXPECT_EQ(store->stats().evictions_disk, 0u);
  // THEN records 0, 2 and 3 survived the compaction with their values, and record 1 is gone
  for (std::size_t i : {0, 2, 3}) {
    Blob v;
    ASSERT_EQ(store->get(seg[i].key, 0, &v), StoreStatus::kOk) << seg[i].key;
    EXPECT_EQ(v.view(), values[seg[i].key]);
  }
  Blob v;
  EXPECT_EQ(store->get(seg[1].key, 0, &v), StoreStatus::kNotFound);
}

TEST(DiskRecovery, CorruptionAfterStartIsCaughtAtReadTime) {
  // GIVEN a running store with a value on disk
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(spill_config(dir), 0, &error);
  std::mt19937_64 rng(3);
  store->set("victim", testing::make_value(rng, 30000), 0, 0);
  for (int i = 0; i < 10; ++i) store->set("f" + std::to_string(i), testing::make_value(rng, 30000), 0, 0);
  ASSERT_GT(store->disk_keys(), 0u);
  // WHEN the middle of every segment's value bytes is flipped under it
  for (const auto& path : segments(dir)) {
    const auto size = std::filesystem::file_size(path);
    if (size < 100) continue;
    const int fd = ::open(path.c_str(), O_RDWR);
    char c = 0;
    ::pread(fd, &c, 1, 100);
    c = static_cast<char>(~c);
    ::pwrite(fd, &c, 1, 100);
    ::close(fd);
  }
  // THEN the affected read is a miss, counted as corrupt
  Blob v;
  EXPECT_EQ(store->get("victim", 0, &v), StoreStatus::kNotFound);
  EXPECT_GE(store->stats().corrupt_reads, 1u);
}

TEST(DiskRecovery, ExpiredRecordsAreDroppedAtRecovery) {
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(spill_config(dir), 0, &error);
  std::mt19937_64 rng(4);
  store->set("short", testing::make_value(rng, 30000), 5000, 0);
  store->set("long", testing::make_value(rng, 30000), 0, 0);
  for (int i = 0; i < 5; ++i) store->set("f" + std::to_string(i), testing::make_value(rng, 30000), 0, 0);
  store.reset();
  store = TieredStore::open(spill_config(dir), 6000, &error);
  EXPECT_FALSE(store->exists("short", 6000));
  EXPECT_TRUE(store->exists("long", 6000));
}

TEST(DiskTierFormat, RecordRoundTripAndChecksum) {
  // GIVEN one record appended
  TempDir dir;
  DiskConfig cfg;
  cfg.dir = dir.path();
  cfg.budget_bytes = 1 << 20;
  cfg.segment_bytes = 64 * 1024;
  std::string error;
  auto tier = DiskTier::open(cfg, &error);
  ASSERT_TRUE(tier) << error;
  tier->recover([](const RecoveredRecord&) {});
  DiskLocation loc;
  ASSERT_EQ(tier->append("key", "value bytes", 123, &loc), DiskError::kOk);
  EXPECT_EQ(loc.record_bytes, kRecordHeaderBytes + 3 + 11);
  // THEN it reads back, and reading it under another key is refused
  Blob v;
  ASSERT_EQ(tier->read(loc, "key", &v), DiskError::kOk);
  EXPECT_EQ(v.view(), "value bytes");
  EXPECT_EQ(tier->read(loc, "kex", &v), DiskError::kCorrupt);
  // AND once marked dead it is no longer readable
  tier->mark_dead(loc);
  EXPECT_EQ(tier->read(loc, "key", &v), DiskError::kCorrupt);
}

}  // namespace
}  // namespace disagg::kvstore
