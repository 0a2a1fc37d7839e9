// admission.h — bounded admission: at most `max_active` requests proxied at once, at most
// `max_queue` waiting (FIFO) for a slot, each for at most its timeout; beyond that the caller
// answers 429 with Retry-After. Thread-safe; waiters sleep on a WakeSignal of their own strand.
//
// Every request takes and frees a slot, on whichever thread serves it, so the path without
// waiters is one compare-and-swap each way on a word holding both counts (no lock). The mutex
// guards only the queue: a waiter counts itself in that word under it, so a release that sees a
// waiter takes the lock and finds it queued, and a slot is never freed while someone waits.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "lib/http/wake_signal.h"

namespace disagg::router {

class Admission {
  struct Waiter;

 public:
  /// Lets a queued acquire() give up before its timeout, e.g. because its client left: cancel()
  /// wakes the wait and acquire() returns false at once (it still returns true when the slot had
  /// already been granted; the caller then releases it). Use it on the waiter's strand only.
  class Cancel {
   public:
    void cancel() {
      cancelled_ = true;
      if (auto w = waiter_.lock()) w->signal.notify();
    }
    bool cancelled() const { return cancelled_; }

   private:
    friend class Admission;
    bool cancelled_ = false;
    std::weak_ptr<Waiter> waiter_;
  };

  Admission(std::int32_t max_active, std::int32_t max_queue) : max_active_(max_active), max_queue_(max_queue) {}

  /// Takes a free slot without waiting: true when one was free and nobody is queued (release() it
  /// once), false otherwise (then acquire() queues).
  bool try_acquire() {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    while (active_of(s) < max_active_ && queued_of(s) == 0) {
      if (state_.compare_exchange_weak(s, s + kOneActive, std::memory_order_acquire, std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

  /// True when a slot is held (release() it once), false when the queue is full, the wait timed
  /// out or `cancel` (optional) was cancelled. `executor`: the caller's strand.
  http::Task<bool> acquire(http::net::any_io_executor executor, std::chrono::milliseconds timeout,
                           Cancel* cancel = nullptr) {
    std::shared_ptr<Waiter> me;
    {
      std::lock_guard lock(mu_);
      // Either a slot (when one is free and nobody waits) or a place in the queue, decided by one
      // compare-and-swap, so a concurrent release() either frees the slot taken here or sees the
      // waiter counted.
      std::uint64_t s = state_.load(std::memory_order_relaxed);
      while (true) {
        if (active_of(s) < max_active_ && queued_of(s) == 0) {
          if (state_.compare_exchange_weak(s, s + kOneActive, std::memory_order_acquire, std::memory_order_relaxed)) {
            co_return true;
          }
          continue;
        }
        if (queued_of(s) >= max_queue_ || timeout.count() <= 0) co_return false;
        if (cancel != nullptr && cancel->cancelled_) co_return false;
        if (state_.compare_exchange_weak(s, s + kOneQueued, std::memory_order_relaxed)) break;
      }
      me = std::make_shared<Waiter>(executor);
      queue_.push_back(me);
    }
    if (cancel != nullptr) cancel->waiter_ = me;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto now = std::chrono::steady_clock::now();
      {
        std::lock_guard lock(mu_);
        if (me->granted) co_return true;
        if (now >= deadline || (cancel != nullptr && cancel->cancelled_)) {
          for (auto it = queue_.begin(); it != queue_.end(); ++it) {
            if (*it == me) {
              queue_.erase(it);
              state_.fetch_sub(kOneQueued, std::memory_order_relaxed);
              break;
            }
          }
          co_return false;
        }
      }
      co_await me->signal.wait(deadline - now);
    }
  }

  /// Frees a slot: hands it to the oldest waiter, if any.
  void release() {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    while (queued_of(s) == 0) {
      if (state_.compare_exchange_weak(s, s - kOneActive, std::memory_order_release, std::memory_order_relaxed)) {
        return;
      }
    }
    // Someone waits (or did when read): under the lock the count and the queue agree.
    std::lock_guard lock(mu_);
    if (!queue_.empty()) {
      std::shared_ptr<Waiter> next = std::move(queue_.front());
      queue_.pop_front();
      state_.fetch_sub(kOneQueued, std::memory_order_relaxed);  // the slot passes on: active is unchanged
      next->granted = true;
      next->signal.notify();
      return;
    }
    state_.fetch_sub(kOneActive, std::memory_order_release);  // the waiter gave up meanwhile
  }

  std::int32_t active() const { return active_of(state_.load(std::memory_order_relaxed)); }
  std::int32_t queued() const { return queued_of(state_.load(std::memory_order_relaxed)); }

 private:
  struct Waiter {
    explicit Waiter(http::net::any_io_executor ex) : signal(std::move(ex)) {}
    http::WakeSignal signal;
    bool granted = false;  // under mu_
  };

  // state_: requests holding a slot in the low 32 bits, waiters in the high 32.
  static constexpr std::uint64_t kOneActive = 1;
  static constexpr std::uint64_t kOneQueued = std::uint64_t{1} << 32;
  static std::int32_t active_of(std::uint64_t s) { return static_cast<std::int32_t>(s & 0xffffffffu); }
  static std::int32_t queued_of(std::uint64_t s) { return static_cast<std::int32_t>(s >> 32); }

  const std::int32_t max_active_;
  const std::int32_t max_queue_;
  std::atomic<std::uint64_t> state_{0};
  std::mutex mu_;                              // guards queue_ (and Waiter::granted)
  std::deque<std::shared_ptr<Waiter>> queue_;  // size == queued_of(state_) while mu_ is held
};

}  // namespace disagg::router
