// KvTierCache must not allocate after creation: the simulator
// calls it on every admission and every published block. This binary replaces the global
// operator new with a counting pass-through (counted per thread, read only in the measured window).
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <vector>

#include "disagg/kv_tier_cache.h"

namespace {
thread_local long g_allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace disagg {
namespace {

TEST(KvTierAllocation, InsertTouchAndHoldsNeverAllocate) {
  // GIVEN a tier of 1,000 blocks
  auto tier = std::move(KvTierCache::create(1000)).value();
  // WHEN 100,000 inserts (evicting), touches and lookups run
  const long before = g_allocations;
  long held = 0;
  for (std::uint64_t i = 0; i < 100000; ++i) {
    tier.insert(i * 7919, static_cast<double>(i), i % 3 != 0);
    held += tier.touch((i / 2) * 7919) ? 1 : 0;
    held += tier.holds(i * 7919, static_cast<double>(i)) ? 1 : 0;
  }
  // THEN nothing was allocated, and the tier worked
  EXPECT_EQ(g_allocations - before, 0);
  EXPECT_GT(held, 0);
  EXPECT_EQ(tier.size(), 1000);
}

}  // namespace
}  // namespace disagg
