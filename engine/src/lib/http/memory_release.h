// memory_release.h — hands the allocator's free memory back to the OS after a burst.
//
// The servers allocate per request (bodies up to --max-body-bytes, token arrays, JSON documents).
// After a burst the allocator keeps what was freed: tcmalloc's page heap gives pages back at a
// rate of one per ~1000 freed (its default release rate), glibc keeps freed heap pages, so a
// router that once held 16 bodies of 7.5 MiB stayed at 200 MiB resident for good. HttpServer
// calls release_free_memory() every ServerOptions::memory_release_interval.
#pragma once

#include <cstddef>

namespace disagg::http {

/// What release_free_memory() found and did.
struct MemoryRelease {
  std::size_t free_bytes = 0;      ///< free bytes the allocator held (0 when it cannot tell)
  std::size_t released_bytes = 0;  ///< asked back to the OS (an upper bound for glibc)
};

/// When the allocator holds more than `keep_bytes` free, returns the excess to the OS:
/// tcmalloc's MallocExtension_ReleaseToSystem when tcmalloc is linked in (found through weak
/// symbols, so that binaries without it need nothing), glibc's malloc_trim otherwise. Takes the
/// allocator's locks for the time it walks its free memory (a page heap look-up, or glibc's
/// arenas): call it from a timer, not per request. Thread-safe.
MemoryRelease release_free_memory(std::size_t keep_bytes);

/// Whether tcmalloc's extension interface is linked in (tests, logs).
bool tcmalloc_linked();

}  // namespace disagg::http
