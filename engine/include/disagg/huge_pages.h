// disagg/huge_pages.h — an allocator for large, long-lived arrays read at random (the KV block
// index), backed by transparent huge pages where the kernel offers them.
//
// Why: a router's index is tens of megabytes touched at random, a few dozen times per request.
// With 4 KiB pages nearly every touch also misses the TLB; with 2 MiB pages the whole index fits
// in the TLB's reach. Kernels whose THP mode is "madvise" (Debian 12's default, and this machine's)
// give huge pages only to memory that asks for them with madvise(MADV_HUGEPAGE).
//
// Contract: arrays of 2 MiB or more are allocated 2 MiB-aligned and advised; smaller ones, and
// every platform without MADV_HUGEPAGE, use operator new. The advice is a hint: without huge
// pages the memory behaves as any other. Throws std::bad_alloc as std::allocator does.
#pragma once

#include <cstddef>
#include <memory>

namespace disagg {

/// Arrays at least this large get huge pages.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// `bytes` (>= kHugePageBytes) of kHugePageBytes-aligned memory, advised for huge pages: on Linux
/// a mapping of its own (never heap memory that small allocations reuse), unmapped when freed.
void* huge_page_allocate(std::size_t bytes);
/// Frees what huge_page_allocate(bytes) returned.
void huge_page_free(void* p, std::size_t bytes) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;

  HugePageAllocator() noexcept = default;
  // Implicit, as std::allocator's: containers rebind allocators to their node types.
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    if (n * sizeof(T) < kHugePageBytes) return std::allocator<T>{}.allocate(n);
    return static_cast<T*>(huge_page_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHugePageBytes) {
      std::allocator<T>{}.deallocate(p, n);
    } else {
      huge_page_free(p, n * sizeof(T));
    }
  }

  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace disagg
