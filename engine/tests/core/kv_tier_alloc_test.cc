// KvTierCache must not allocate after creation: the simulator
// calls it on every admission and every published block. Counted by counting_new.h (per thread,
// read only in the measured window).
#include <gtest/gtest.h>

#include <vector>

#include "disagg/kv_tier_cache.h"

#include "counting_new.h"

namespace disagg {
namespace {

TEST(KvTierAllocation, InsertTouchAndHoldsNeverAllocate) {
  // GIVEN a tier of 1,000 blocks
  auto tier = std::move(KvTierCache::create(1000)).value();
  // WHEN 100,000 inserts (evicting), touches and lookups run
  const long before = test::allocations();
  long held = 0;
  for (std::uint64_t i = 0; i < 100000; ++i) {
    tier.insert(i * 7919, static_cast<double>(i), i % 3 != 0);
    held += tier.touch((i / 2) * 7919) ? 1 : 0;
    held += tier.holds(i * 7919, static_cast<double>(i)) ? 1 : 0;
  }
  // THEN nothing was allocated, and the tier worked
  EXPECT_EQ(test::allocations() - before, 0);
  EXPECT_GT(held, 0);
  EXPECT_EQ(tier.size(), 1000);
}

}  // namespace
}  // namespace disagg
