#include "disagg/huge_pages.h"

#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace disagg {

namespace {

std::size_t rounded(std::size_t bytes) {
  return (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
}

}  // namespace

void* huge_page_allocate(std::size_t bytes) {
  void* p = std::aligned_alloc(kHugePageBytes, rounded(bytes));
  if (p == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  // Advisory: refused (THP "never", or not built in) leaves ordinary pages.
  (void)madvise(p, rounded(bytes), MADV_HUGEPAGE);
#endif
  return p;
}

void huge_page_free(void* p, std::size_t bytes) noexcept {
  (void)bytes;
  std::free(p);
}

}  // namespace disagg
