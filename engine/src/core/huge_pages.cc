#include "disagg/huge_pages.h"

#include <cstdint>
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
  const std::size_t size = rounded(bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // A mapping of its own, not the heap: glibc serves large aligned_alloc()s from the heap once its
  // mmap threshold has grown past them, and the advice then stayed on heap memory after the free,
  // so small allocations landed on huge pages; and a freed array went back to the heap, not the
  // system. Over-map by one huge page, keep the aligned part, unmap the rest.
  void* m = mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(m);
  const std::uintptr_t aligned = (start + kHugePageBytes - 1) & ~(std::uintptr_t{kHugePageBytes} - 1);
  if (aligned > start) (void)munmap(m, aligned - start);
  const std::uintptr_t tail = start + size + kHugePageBytes - (aligned + size);
  if (tail > 0) (void)munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // Advisory: refused (THP "never", or not built in) leaves ordinary pages.
  (void)madvise(p, size, MADV_HUGEPAGE);
  return p;
#else
  void* p = std::aligned_alloc(kHugePageBytes, size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
#endif
}

void huge_page_free(void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p != nullptr) (void)munmap(p, rounded(bytes));
#else
  (void)bytes;
  std::free(p);
#endif
}

}  // namespace disagg
