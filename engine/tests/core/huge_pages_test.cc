// HugePageAllocator (disagg/huge_pages.h): large arrays are 2 MiB-aligned and advised for
// transparent huge pages (the kernel marks the mapping "hg" in /proc/self/smaps); small ones are
// ordinary allocations.
#include "disagg/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace disagg {
namespace {

// Whether the VmFlags line `flags` holds the two-letter flag `flag`.
bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  for (std::string w; words >> w;) {
    if (w == flag) return true;
  }
  return false;
}

// The VmFlags line of the mapping of /proc/self/smaps that contains `p`, or "" if none does.
std::string vm_flags_of(const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      inside = lo <= addr && addr < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(HugePageAllocator, LargeArraysAreAlignedAndAdvised) {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  // GIVEN an array of 3 MiB WHEN allocated THEN it starts on a 2 MiB boundary and its mapping is
  // advised for huge pages
  std::vector<std::uint64_t, HugePageAllocator<std::uint64_t>> big(3 << 17, 7);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.data()) % kHugePageBytes, 0u);
  const std::string flags = vm_flags_of(big.data());
  ASSERT_FALSE(flags.empty()) << "no mapping holds the array";
  EXPECT_TRUE(has_flag(flags, "hg")) << flags;
  // AND its contents are those of any vector
  EXPECT_EQ(big.front(), 7u);
  EXPECT_EQ(big.back(), 7u);
}

TEST(HugePageAllocator, SmallArraysAreOrdinary) {
  // GIVEN an array far below 2 MiB WHEN allocated THEN it is not advised for huge pages
  std::vector<std::uint64_t, HugePageAllocator<std::uint64_t>> small(1000, 1);
  const std::string flags = vm_flags_of(small.data());
  EXPECT_FALSE(has_flag(flags, "hg")) << flags;
  EXPECT_EQ(small[999], 1u);
}

}  // namespace
}  // namespace disagg
