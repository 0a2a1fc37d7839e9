#include "memory_release.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

// gperftools' C interface (gperftools/malloc_extension_c.h), weak: null unless tcmalloc is linked
// into the binary (disagg-engine links it statically, the test binaries do not).
extern "C" {
int MallocExtension_GetNumericProperty(const char* property, size_t* value) __attribute__((weak));
void MallocExtension_ReleaseToSystem(size_t num_bytes) __attribute__((weak));
}

namespace disagg::http {

bool tcmalloc_linked() {
  return MallocExtension_GetNumericProperty != nullptr && MallocExtension_ReleaseToSystem != nullptr;
}

MemoryRelease release_free_memory(std::size_t keep_bytes) {
  MemoryRelease r;
  if (tcmalloc_linked()) {
    // Free pages of the page heap still backed by memory (freed spans not yet released).
    std::size_t free = 0;
    if (MallocExtension_GetNumericProperty("tcmalloc.pageheap_free_bytes", &free) == 0) return r;
    r.free_bytes = free;
    if (free > keep_bytes) {
      r.released_bytes = free - keep_bytes;
      MallocExtension_ReleaseToSystem(r.released_bytes);
    }
    return r;
  }
#if defined(__GLIBC__)
  const struct mallinfo2 info = mallinfo2();
  r.free_bytes = info.fordblks;
  if (r.free_bytes > keep_bytes) {
    r.released_bytes = r.free_bytes - keep_bytes;
    malloc_trim(keep_bytes);
  }
#else
  (void)keep_bytes;
#endif
  return r;
}

}  // namespace disagg::http
