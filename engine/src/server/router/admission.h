// admission.h — bounded admission: at most `max_active` requests proxied at once, at most
// `max_queue` waiting (FIFO) for a slot, each for at most its timeout; beyond that the caller
// answers 429 with Retry-After. Thread-safe; waiters sleep on a WakeSignal of their own strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "server/http/wake_signal.h"

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

  Admission(std::int32_t max_active, std::int32_t max_queue)
      : max_active_(max_active), max_queue_(max_queue) {}

  /// Takes a free slot without waiting: true when one was free and nobody is queued (release() it
  /// once), false otherwise (then acquire() queues).
  bool try_acquire() {
    std::lock_guard lock(mu_);
    if (active_ >= max_active_ || !queue_.empty()) return false;
    ++active_;
    return true;
  }

  /// True when a slot is held (release() it once), false when the queue is full, the wait timed
  /// out or `cancel` (optional) was cancelled. `executor`: the caller's strand.
  http::Task<bool> acquire(http::net::any_io_executor executor, std::chrono::milliseconds timeout,
                           Cancel* cancel = nullptr) {
    std::shared_ptr<Waiter> me;
    {
      std::lock_guard lock(mu_);
      if (active_ < max_active_ && queue_.empty()) {
        ++active_;
        co_return true;
      }
      if (static_cast<std::int32_t>(queue_.size()) >= max_queue_ || timeout.count() <= 0) co_return false;
      if (cancel != nullptr && cancel->cancelled_) co_return false;
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
    std::lock_guard lock(mu_);
    if (!queue_.empty()) {
      std::shared_ptr<Waiter> next = std::move(queue_.front());
      queue_.pop_front();
      next->granted = true;  // the slot passes on; active_ is unchanged
      next->signal.notify();
      return;
    }
    --active_;
  }

  std::int32_t active() const {
    std::lock_guard lock(mu_);
    return active_;
  }
  std::int32_t queued() const {
    std::lock_guard lock(mu_);
    return static_cast<std::int32_t>(queue_.size());
  }

 private:
  struct Waiter {
    explicit Waiter(http::net::any_io_executor ex) : signal(std::move(ex)) {}
    http::WakeSignal signal;
    bool granted = false;  // under mu_
  };

  const std::int32_t max_active_;
  const std::int32_t max_queue_;
  mutable std::mutex mu_;
  std::int32_t active_ = 0;
  std::deque<std::shared_ptr<Waiter>> queue_;
};

}  // namespace disagg::router
