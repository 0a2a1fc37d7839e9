// spin_then_block_mutex.h — a mutex for short critical sections shared by a few event-loop
// threads: a waiter first spins (reading, with a CPU pause) for a bounded number of rounds, and
// only then sleeps on a futex.
//
// Why not std::mutex: the router's routing lock is held for a microsecond or two per request
// (scoring and the prefix history's update). std::mutex sleeps at the first failed attempt, so
// with two HTTP threads about 1 request in 150 put a thread to sleep and made the other wake it:
// two system calls and two context switches (bench/RESULTS.md). Spinning covers such waits
// without the kernel. The spin is bounded because
// the holder may have been preempted (more runnable threads than CPUs): then sleeping is right.
//
// Contract: Lockable (lock, try_lock, unlock), so std::lock_guard and std::unique_lock work; not
// recursive; unlock() only by the owner. Not fair: a thread that just unlocked may take it again
// first. Linux only (futex).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace disagg::router {

class SpinThenBlockMutex {
 public:
  /// Spin rounds before sleeping. A round is one pause and one read, some 10-150 cycles
  /// depending on the CPU's pause: a few microseconds in all, about one long critical section.
  static constexpr int kSpinRounds = 128;

  SpinThenBlockMutex() = default;
  SpinThenBlockMutex(const SpinThenBlockMutex&) = delete;
  SpinThenBlockMutex& operator=(const SpinThenBlockMutex&) = delete;

  void lock() noexcept {
    std::uint32_t expected = kFree;
    if (!state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire, std::memory_order_relaxed)) {
      lock_contended();
    }
  }

  bool try_lock() noexcept {
    std::uint32_t expected = kFree;
    return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire, std::memory_order_relaxed);
  }

  void unlock() noexcept {
    // Only a holder that may have sleepers pays for the wake-up call.
    if (state_.exchange(kFree, std::memory_order_release) == kSleepers) wake_one();
  }

  /// Futex waits begun by lock() after its spin (a wait returns at once if the holder let go
  /// in between, and is counted all the same); for tests and metrics, relaxed.
  std::uint64_t sleeps() const noexcept { return sleeps_.load(std::memory_order_relaxed); }

 private:
  // kSleepers: held, and a thread may be asleep waiting (unlock must wake one).
  static constexpr std::uint32_t kFree = 0, kLocked = 1, kSleepers = 2;

  static void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }

  void lock_contended() noexcept {
    for (int i = 0; i < kSpinRounds; ++i) {
      cpu_relax();
      // Read first: a failed compare-and-swap would take the line away from the holder.
      std::uint32_t s = state_.load(std::memory_order_relaxed);
      if (s == kFree &&
          state_.compare_exchange_weak(s, kLocked, std::memory_order_acquire, std::memory_order_relaxed)) {
        return;
      }
    }
    // Drepper's "Futexes are tricky", mutex 3: whoever takes the lock from here marks it as having
    // sleepers, since it cannot know whether others still sleep.
    while (state_.exchange(kSleepers, std::memory_order_acquire) != kFree) {
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      futex(FUTEX_WAIT_PRIVATE, kSleepers);  // returns at once if the state is no longer kSleepers
    }
  }

  void wake_one() noexcept {
    futex(FUTEX_WAKE_PRIVATE, 1);
  }

  void futex(int op, std::uint32_t value) noexcept {
    static_assert(sizeof(state_) == sizeof(std::uint32_t) && std::atomic<std::uint32_t>::is_always_lock_free);
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), op, value, nullptr, nullptr, 0);
  }

  std::atomic<std::uint32_t> state_{kFree};
  std::atomic<std::uint64_t> sleeps_{0};
};

}  // namespace disagg::router
