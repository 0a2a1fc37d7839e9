// TieredStore against a reference model (std::unordered_map), over several tier configurations,
// plus budget enforcement, the demotion policy, expiry and SCAN.
#include "tiered_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>

#include "test_util.h"

namespace disagg::kvstore {
namespace {

using testing::TempDir;

struct TierSetup {
  const char* name;
  std::uint64_t memory_bytes;
  std::uint64_t disk_bytes;  // 0 = memory only
  std::uint32_t demote_min_reads;
  bool lossless;  // budgets large enough (or demotion unconditional) that nothing is lost
};

class TieredStoreDifferential : public ::testing::TestWithParam<TierSetup> {};

// Random SET / GET / DEL / EXISTS / MSET-like sequences. Lossless setups must match the model
// exactly; lossy ones may miss a key but must never return a wrong value.
TEST_P(TieredStoreDifferential, MatchesReferenceModel) {
  const TierSetup setup = GetParam();
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    // GIVEN a store in this configuration and an empty model
    TempDir dir;
    StoreConfig cfg;
    cfg.memory_bytes = setup.memory_bytes;
    if (setup.disk_bytes > 0) {
      cfg.disk_dir = dir.path();
      cfg.disk_bytes = setup.disk_bytes;
      cfg.segment_bytes = 64 * 1024;
    }
    cfg.demote_min_reads = setup.demote_min_reads;
    cfg.max_value_bytes = 1 << 20;
    std::string error;
    auto store = TieredStore::open(cfg, 1000, &error);
    ASSERT_TRUE(store) << error;
    std::unordered_map<std::string, std::string> model;
    std::mt19937_64 rng(seed);
    // WHEN a seeded random operation sequence runs against both
    for (int op = 0; op < 4000; ++op) {
      const std::string key = "k" + std::to_string(rng() % 200);
      const int kind = static_cast<int>(rng() % 10);
      if (kind < 4) {
        const std::string value = testing::make_value(rng, rng() % 4 == 0 ? 4000 + rng() % 12000 : rng() % 300);
        ASSERT_EQ(store->set(key, value, 0, 1000), StoreStatus::kOk);
        model[key] = value;
      } else if (kind < 8) {
        Blob got;
        const StoreStatus st = store->get(key, 1000, &got);
        auto it = model.find(key);
        // THEN every read agrees with the model (or, when lossy, at worst misses)
        if (st == StoreStatus::kOk) {
          ASSERT_NE(it, model.end()) << "store returned a deleted key " << key;
          ASSERT_EQ(got.view(), it->second) << "wrong value for " << key << " at op " << op;
        } else if (setup.lossless) {
          ASSERT_EQ(it, model.end()) << "lossless store lost " << key << " at op " << op;
        } else if (it != model.end()) {
          model.erase(it);  // evicted: from now on the model expects a miss too
        }
      } else if (kind == 8) {
        const bool had = store->del(key, 1000);
        const bool model_had = model.erase(key) > 0;
        if (setup.lossless) ASSERT_EQ(had, model_had);
        if (had) ASSERT_TRUE(model_had);
      } else {
        const bool has = store->exists(key, 1000);
        if (setup.lossless) ASSERT_EQ(has, model.count(key) > 0);
        if (has) ASSERT_TRUE(model.count(key) > 0);
      }
      ASSERT_LE(store->memory_bytes(), cfg.memory_bytes);
      if (setup.disk_bytes > 0) ASSERT_LE(store->disk_file_bytes(), cfg.disk_bytes + cfg.segment_bytes);
    }
    if (setup.lossless) ASSERT_EQ(store->key_count(), model.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Tiers, TieredStoreDifferential,
                         ::testing::Values(TierSetup{"MemoryOnlyRoomy", 64u << 20, 0, 2, true},
                                           TierSetup{"MemoryOnlyTight", 256u << 10, 0, 2, false},
                                           TierSetup{"SpillEverythingToDisk", 128u << 10, 64u << 20, 0, true},
                                           TierSetup{"DemoteReusedOnly", 128u << 10, 64u << 20, 2, false},
                                           TierSetup{"BothTiersTight", 96u << 10, 512u << 10, 0, false}),
                         [](const ::testing::TestParamInfo<TierSetup>& info) { return info.param.name; });

StoreConfig disk_config(const TempDir& dir, std::uint64_t memory, std::uint64_t disk, std::uint32_t min_reads) {
  StoreConfig cfg;
  cfg.memory_bytes = memory;
  cfg.disk_dir = dir.path();
  cfg.disk_bytes = disk;
  cfg.segment_bytes = 64 * 1024;
  cfg.demote_min_reads = min_reads;
  cfg.max_value_bytes = 1 << 20;
  return cfg;
}

TEST(TieredStore, MemoryNeverExceedsBudget) {
  // GIVEN a 1 MiB memory-only store
  StoreConfig cfg;
  cfg.memory_bytes = 1 << 20;
  std::string error;
  auto store = TieredStore::open(cfg, 0, &error);
  ASSERT_TRUE(store);
  // WHEN 10 MiB of 100 KiB values are written
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(store->set("k" + std::to_string(i), testing::make_value(rng, 100 * 1024), 0, 0), StoreStatus::kOk);
    // THEN the charged bytes stay within budget, and the newest keys survive (LRU)
    ASSERT_LE(store->memory_bytes(), cfg.memory_bytes);
  }
  EXPECT_TRUE(store->exists("k99", 0));
  EXPECT_FALSE(store->exists("k0", 0));
  EXPECT_GT(store->stats().evictions_memory, 80u);
}

TEST(TieredStore, LruKeepsRecentlyReadKeys) {
  StoreConfig cfg;
  cfg.memory_bytes = 1 << 20;
  std::string error;
  auto store = TieredStore::open(cfg, 0, &error);
  std::mt19937_64 rng(8);
  for (int i = 0; i < 9; ++i) store->set("k" + std::to_string(i), testing::make_value(rng, 100 * 1024), 0, 0);
  // GIVEN k0 is read (most recent) before more writes push the oldest out
  Blob v;
  ASSERT_EQ(store->get("k0", 0, &v), StoreStatus::kOk);
  for (int i = 9; i < 12; ++i) store->set("k" + std::to_string(i), testing::make_value(rng, 100 * 1024), 0, 0);
  // THEN k0 survived and k1 (the least recent) did not
  EXPECT_TRUE(store->exists("k0", 0));
  EXPECT_FALSE(store->exists("k1", 0));
}

TEST(TieredStore, DemotesOnlyEntriesReadTwiceAndPromotesOnHit) {
  // GIVEN memory for about 4 values of 64 KiB and a roomy disk tier
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(disk_config(dir, 300 * 1024, 16u << 20, 2), 0, &error);
  ASSERT_TRUE(store) << error;
  std::mt19937_64 rng(9);
  const std::string hot = testing::make_value(rng, 64 * 1024);
  const std::string cold = testing::make_value(rng, 64 * 1024);
  store->set("hot", hot, 0, 0);
  store->set("cold", cold, 0, 0);
  Blob v;
  store->get("hot", 0, &v);
  store->get("hot", 0, &v);
  store->get("cold", 0, &v);  // read once only
  // WHEN 8 more values push both out of memory
  for (int i = 0; i < 8; ++i) store->set("f" + std::to_string(i), testing::make_value(rng, 64 * 1024), 0, 0);
  // THEN the twice-read entry was demoted (still readable), the once-read one evicted
  EXPECT_EQ(store->stats().demotions, 1u);
  EXPECT_FALSE(store->exists("cold", 0));
  EXPECT_EQ(store->disk_keys(), 1u);
  // AND a hit on the demoted entry promotes it back to memory with its bytes intact
  ASSERT_EQ(store->get("hot", 0, &v), StoreStatus::kOk);
  EXPECT_EQ(v.view(), hot);
  EXPECT_EQ(store->stats().hits_disk, 1u);
  EXPECT_EQ(store->stats().promotions, 1u);
  EXPECT_EQ(store->disk_keys(), 0u);
  EXPECT_LE(store->memory_bytes(), 300u * 1024);
}

TEST(TieredStore, DiskBudgetIsEnforcedByEvictionAndCompaction) {
  // GIVEN a tiny memory tier, a 1 MiB disk tier and unconditional demotion
  TempDir dir;
  std::string error;
  auto cfg = disk_config(dir, 64 * 1024, 1 << 20, 0);
  auto store = TieredStore::open(cfg, 0, &error);
  ASSERT_TRUE(store) << error;
  std::mt19937_64 rng(10);
  std::map<std::string, std::string> last;
  // WHEN 20 MiB of overwrites churn through 100 keys
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "k" + std::to_string(rng() % 100);
    last[key] = testing::make_value(rng, 20 * 1024);
    ASSERT_EQ(store->set(key, last[key], 0, 0), StoreStatus::kOk);
    // THEN disk use stays within budget plus one segment
    ASSERT_LE(store->disk_file_bytes(), cfg.disk_bytes + cfg.segment_bytes);
  }
  EXPECT_GT(store->stats().compactions + store->stats().evictions_disk, 0u);
  // AND every key still present has its latest value
  int present = 0;
  for (const auto& [key, value] : last) {
    Blob v;
    if (store->get(key, 0, &v) == StoreStatus::kOk) {
      ++present;
      ASSERT_EQ(v.view(), value) << key;
    }
  }
  EXPECT_GT(present, 20);
}

TEST(TieredStore, ValueLargerThanMemoryGoesToDisk) {
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(disk_config(dir, 100 * 1024, 8u << 20, 2), 0, &error);
  std::mt19937_64 rng(11);
  const std::string big = testing::make_value(rng, 500 * 1024);
  ASSERT_EQ(store->set("big", big, 0, 0), StoreStatus::kOk);
  Blob v;
  ASSERT_EQ(store->get("big", 0, &v), StoreStatus::kOk);
  EXPECT_EQ(v.view(), big);
  EXPECT_EQ(store->disk_keys(), 1u);
}

TEST(TieredStore, MemoryOnlyRejectsValueLargerThanBudget) {
  StoreConfig cfg;
  cfg.memory_bytes = 1 << 20;
  std::string error;
  auto store = TieredStore::open(cfg, 0, &error);
  EXPECT_EQ(store->set("big", std::string(2 << 20, 'x'), 0, 0), StoreStatus::kNoSpace);
  EXPECT_FALSE(store->exists("big", 0));
}

TEST(TieredStore, NxXxConditions) {
  StoreConfig cfg;
  std::string error;
  auto store = TieredStore::open(cfg, 0, &error);
  EXPECT_EQ(store->set("a", "1", 0, 0, SetCondition::kIfPresent), StoreStatus::kNotSet);
  EXPECT_EQ(store->set("a", "1", 0, 0, SetCondition::kIfAbsent), StoreStatus::kOk);
  EXPECT_EQ(store->set("a", "2", 0, 0, SetCondition::kIfAbsent), StoreStatus::kNotSet);
  EXPECT_EQ(store->set("a", "3", 0, 0, SetCondition::kIfPresent), StoreStatus::kOk);
  Blob v;
  store->get("a", 0, &v);
  EXPECT_EQ(v.view(), "3");
}

TEST(TieredStore, ExpiryInBothTiers) {
  // GIVEN keys with a TTL, one of them demoted to disk
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(disk_config(dir, 200 * 1024, 8u << 20, 0), 1000, &error);
  std::mt19937_64 rng(12);
  store->set("mem", "v", 5000, 1000);
  store->set("disk", testing::make_value(rng, 64 * 1024), 5000, 1000);
  for (int i = 0; i < 4; ++i) store->set("f" + std::to_string(i), testing::make_value(rng, 64 * 1024), 0, 1000);
  ASSERT_GE(store->disk_keys(), 1u);
  // WHEN time passes the TTL
  EXPECT_EQ(store->ttl_ms("disk", 2000), 3000);
  EXPECT_TRUE(store->exists("disk", 4999));
  // THEN both are gone, and TTL reports -2
  EXPECT_FALSE(store->exists("disk", 5000));
  EXPECT_EQ(store->ttl_ms("mem", 5001), -2);
  EXPECT_EQ(store->ttl_ms("f0", 5001), -1);
}

TEST(TieredStore, ExpireRewritesADiskRecord) {
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(disk_config(dir, 200 * 1024, 8u << 20, 0), 1000, &error);
  std::mt19937_64 rng(13);
  const std::string value = testing::make_value(rng, 64 * 1024);
  store->set("x", value, 0, 1000);
  for (int i = 0; i < 4; ++i) store->set("f" + std::to_string(i), testing::make_value(rng, 64 * 1024), 0, 1000);
  ASSERT_TRUE(store->expire("x", 9000, 1000));
  EXPECT_EQ(store->ttl_ms("x", 1000), 8000);
  Blob v;
  ASSERT_EQ(store->get("x", 1000, &v), StoreStatus::kOk);
  EXPECT_EQ(v.view(), value);
  EXPECT_TRUE(store->expire("x", 500, 1000));  // in the past: deletes
  EXPECT_FALSE(store->exists("x", 1000));
}

TEST(TieredStore, SweepRemovesExpiredKeysWithoutAccess) {
  StoreConfig cfg;
  std::string error;
  auto store = TieredStore::open(cfg, 0, &error);
  for (int i = 0; i < 1000; ++i) store->set("k" + std::to_string(i), "v", i % 2 == 0 ? 100 : 0, 0);
  for (int i = 0; i < 100; ++i) store->sweep_expired(200);
  EXPECT_EQ(store->key_count(), 500u);
  EXPECT_GE(store->stats().expired, 500u);
}

TEST(TieredStore, ScanReturnsEveryKeyDespiteGrowth) {
  // GIVEN 1000 keys
  StoreConfig cfg;
  std::string error;
  auto store = TieredStore::open(cfg, 0, &error);
  for (int i = 0; i < 1000; ++i) store->set("k" + std::to_string(i), "v", 0, 0);
  // WHEN scanning while adding 3000 more keys between steps (the table grows twice)
  std::set<std::string> seen;
  std::uint64_t cursor = 0;
  int added = 0;
  do {
    std::vector<std::string> keys;
    cursor = store->scan(cursor, 10, "", 0, &keys);
    seen.insert(keys.begin(), keys.end());
    for (int j = 0; j < 100 && added < 3000; ++j, ++added) store->set("n" + std::to_string(added), "v", 0, 0);
  } while (cursor != 0);
  // THEN every original key was returned
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(seen.count("k" + std::to_string(i))) << i;
}

TEST(TieredStore, ScanMatchFilters) {
  StoreConfig cfg;
  std::string error;
  auto store = TieredStore::open(cfg, 0, &error);
  store->set("user:1", "v", 0, 0);
  store->set("user:2", "v", 0, 0);
  store->set("item:1", "v", 0, 0);
  std::vector<std::string> keys;
  std::uint64_t cursor = 0;
  do cursor = store->scan(cursor, 100, "user:*", 0, &keys);
  while (cursor != 0);
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()), (std::set<std::string>{"user:1", "user:2"}));
}

TEST(GlobMatch, RedisPatterns) {
  EXPECT_TRUE(glob_match("*", "anything"));
  EXPECT_TRUE(glob_match("h?llo", "hello"));
  EXPECT_TRUE(glob_match("h[ae]llo", "hallo"));
  EXPECT_FALSE(glob_match("h[ae]llo", "hillo"));
  EXPECT_TRUE(glob_match("h[^e]llo", "hallo"));
  EXPECT_FALSE(glob_match("h[^e]llo", "hello"));
  EXPECT_TRUE(glob_match("h[a-c]llo", "hbllo"));
  EXPECT_TRUE(glob_match("a*b*c", "axxbyyc"));
  EXPECT_FALSE(glob_match("a*b*c", "axxbyy"));
  EXPECT_TRUE(glob_match("a\\*", "a*"));
  EXPECT_FALSE(glob_match("a\\*", "ab"));
  // Redis's quirks (checked against redis-server 7.0, and by test/kvstore against the one installed):
  EXPECT_FALSE(glob_match("*", ""));  // only the empty pattern matches an empty key
  EXPECT_TRUE(glob_match("", ""));
  EXPECT_TRUE(glob_match("a[bc", "ab"));  // a class left open runs to the end of the pattern
  EXPECT_TRUE(glob_match("[^", "x"));
  EXPECT_TRUE(glob_match("a[b-]", "a]"));  // "b-]" is a range (']'..'b'), not "b" and "-"
  EXPECT_FALSE(glob_match("a[b-]", "a-"));
  EXPECT_FALSE(glob_match("a[]", "a]"));  // "[]" is an empty class
  EXPECT_TRUE(glob_match("a[\\]]", "a]"));
  EXPECT_TRUE(glob_match("h[z-a]llo", "hello"));  // ranges either way round
}

TEST(TieredStore, ReservationsForValuesInFlightShareTheMemoryBudget) {
  // GIVEN a 1 MiB memory tier holding 8 values of 100 KiB
  StoreConfig cfg;
  cfg.memory_bytes = 1u << 20;
  std::string error;
  auto store = TieredStore::open(cfg, 0, &error);
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(store->set("k" + std::to_string(i), std::string(100 << 10, 'v'), 0, 0), StoreStatus::kOk);
  // WHEN 600 KiB are reserved for a value still arriving
  ASSERT_TRUE(store->reserve(600 << 10));
  // THEN LRU entries made way, and stored plus reserved bytes stay within the budget
  EXPECT_EQ(store->reserved_bytes(), 600u << 10);
  EXPECT_LE(store->memory_bytes() + store->reserved_bytes(), cfg.memory_bytes);
  EXPECT_FALSE(store->exists("k0", 0));
  EXPECT_TRUE(store->exists("k7", 0));
  // AND a second reservation that cannot fit beside it fails without evicting anything
  const std::size_t keys = store->key_count();
  EXPECT_FALSE(store->reserve(500 << 10));
  EXPECT_EQ(store->key_count(), keys);
  // AND a SET cannot take the reserved room, but can once it is released
  EXPECT_EQ(store->set("big", std::string(600 << 10, 'b'), 0, 0), StoreStatus::kNoSpace);
  store->release(600 << 10);
  EXPECT_EQ(store->reserved_bytes(), 0u);
  EXPECT_EQ(store->set("big", std::string(600 << 10, 'b'), 0, 0), StoreStatus::kOk);
  EXPECT_LE(store->memory_bytes(), cfg.memory_bytes);
}

TEST(TieredStore, FlushAllEmptiesBothTiers) {
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(disk_config(dir, 100 * 1024, 8u << 20, 0), 0, &error);
  std::mt19937_64 rng(14);
  for (int i = 0; i < 10; ++i) store->set("k" + std::to_string(i), testing::make_value(rng, 30 * 1024), 0, 0);
  ASSERT_GT(store->disk_keys(), 0u);
  store->flush_all();
  EXPECT_EQ(store->key_count(), 0u);
  EXPECT_EQ(store->memory_bytes(), 0u);
  EXPECT_EQ(store->disk_file_bytes(), 0u);
  store.reset();
  // AND nothing comes back after a restart
  store = TieredStore::open(disk_config(dir, 100 * 1024, 8u << 20, 0), 0, &error);
  EXPECT_EQ(store->key_count(), 0u);
}

TEST(TieredStore, SplitGetReconcilesChangesDuringTheRead) {
  // GIVEN two values demoted to disk (memory holds one 64 KiB value; demotion unconditional)
  TempDir dir;
  std::string error;
  auto store = TieredStore::open(disk_config(dir, 100 * 1024, 16u << 20, 0), 0, &error);
  ASSERT_TRUE(store) << error;
  std::mt19937_64 rng(11);
  const std::string a1 = testing::make_value(rng, 64 * 1024), b1 = testing::make_value(rng, 64 * 1024);
  const std::string a2 = testing::make_value(rng, 64 * 1024);
  store->set("a", a1, 0, 0);
  store->set("b", b1, 0, 0);
  store->set("x", a2, 0, 0);
  store->set("y", a2, 0, 0);
  ASSERT_EQ(store->disk_keys(), 3u);
  Blob v;
  // WHEN a read of "a" begins, then "a" is overwritten before it completes
  DiskRead ra;
  ASSERT_EQ(store->begin_get("a", 0, &v, &ra), StoreStatus::kPending);
  Blob loaded;
  const int fd = store->dup_disk_fd(ra.location.segment);
  ASSERT_GE(fd, 0);
  const DiskError err = DiskTier::read_record(fd, ra.location, ra.key, &loaded);
  ::close(fd);
  store->set("a", a2, 0, 0);
  // THEN the completed read serves the value of when the GET began, and does not clobber the new one
  ASSERT_EQ(store->finish_get(ra, err, loaded, 0, &v), StoreStatus::kOk);
  EXPECT_EQ(v.view(), a1);
  ASSERT_EQ(store->get("a", 0, &v), StoreStatus::kOk);
  EXPECT_EQ(v.view(), a2);
  // WHEN a read of "b" fails because "b" was deleted (its record killed) before the read ran
  DiskRead rb;
  ASSERT_EQ(store->begin_get("b", 0, &v, &rb), StoreStatus::kPending);
  store->del("b", 0);
  const int fd2 = store->dup_disk_fd(rb.location.segment);
  Blob dead;
  const DiskError err2 = fd2 >= 0 ? DiskTier::read_record(fd2, rb.location, rb.key, &dead) : DiskError::kIo;
  if (fd2 >= 0) ::close(fd2);
  // THEN it is a miss, not an error and not the deleted bytes
  EXPECT_NE(err2, DiskError::kOk);
  EXPECT_EQ(store->finish_get(rb, err2, dead, 0, &v), StoreStatus::kNotFound);
  // AND an unchanged entry completes like a synchronous disk hit (promoted to memory)
  DiskRead rx;
  ASSERT_EQ(store->begin_get("x", 0, &v, &rx), StoreStatus::kPending);
  const int fd3 = store->dup_disk_fd(rx.location.segment);
  Blob lx;
  ASSERT_EQ(DiskTier::read_record(fd3, rx.location, rx.key, &lx), DiskError::kOk);
  ::close(fd3);
  const std::uint64_t promotions = store->stats().promotions;
  ASSERT_EQ(store->finish_get(rx, DiskError::kOk, lx, 0, &v), StoreStatus::kOk);
  EXPECT_EQ(v.view(), a2);
  EXPECT_EQ(store->stats().promotions, promotions + 1);
}

}  // namespace
}  // namespace disagg::kvstore
