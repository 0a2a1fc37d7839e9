// counting_new.h — allocation counting for the "never allocates" tests.
//
// counting_new.cc replaces the global operator new of the test binary that links it (one binary,
// disagg_alloc_tests, so no other test pays for it) with a pass-through that counts calls per thread.
// Read allocations() before and after the measured window; other threads do not disturb the count.
#pragma once

namespace disagg::test {

/// operator new calls made by this thread since it started.
long allocations();

}  // namespace disagg::test
