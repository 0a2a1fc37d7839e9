// Long randomized runs (label "soak"; excluded from the default run with `ctest -LE soak`):
// many operations with restarts in between, both tiers under budget pressure.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "test_util.h"
#include "tiered_store.h"

namespace disagg::kvstore {
namespace {

TEST(KvstoreSoak, ChurnWithRestartsNeverServesAWrongValue) {
  testing::TempDir dir;
  StoreConfig cfg;
  cfg.memory_bytes = 512 * 1024;
  cfg.disk_dir = dir.path();
  cfg.disk_bytes = 4u << 20;
  cfg.segment_bytes = 128 * 1024;
  cfg.demote_min_reads = 1;
  cfg.max_value_bytes = 1 << 20;
  std::string error;
  auto store = TieredStore::open(cfg, 0, &error);
  ASSERT_TRUE(store) << error;
  std::map<std::string, std::string> last;  // last value written per key (deleted keys erased)
  std::mt19937_64 rng(424242);
  for (int round = 0; round < 20; ++round) {
    for (int op = 0; op < 5000; ++op) {
      const std::string key = "k" + std::to_string(rng() % 500);
      const int kind = static_cast<int>(rng() % 10);
      if (kind < 4) {
        std::string value = testing::make_value(rng, rng() % 40000);
        ASSERT_EQ(store->set(key, value, 0, 0), StoreStatus::kOk);
        last[key] = std::move(value);
      } else if (kind < 9) {
        Blob v;
        if (store->get(key, 0, &v) == StoreStatus::kOk) {
          auto it = last.find(key);
          ASSERT_NE(it, last.end());
          ASSERT_EQ(v.view(), it->second);
        }
      } else {
        store->del(key, 0);
        last.erase(key);
      }
      ASSERT_LE(store->memory_bytes(), cfg.memory_bytes);
      ASSERT_LE(store->disk_file_bytes(), cfg.disk_bytes + cfg.segment_bytes);
    }
    // Restart: memory contents are lost, the disk tier must come back consistent.
    store.reset();
    store = TieredStore::open(cfg, 0, &error);
    ASSERT_TRUE(store) << error;
    for (const auto& [key, value] : last) {
      Blob v;
      if (store->get(key, 0, &v) == StoreStatus::kOk) ASSERT_EQ(v.view(), value) << key;
    }
  }
}

}  // namespace
}  // namespace disagg::kvstore
