// wake_signal.h — wakes one coroutine from any thread (Boost 1.74 has no asio channel).
//
// The consumer coroutine runs on a strand (each server connection does); it checks its shared
// state, and if there is nothing to do, co_awaits wait(). Producers on other threads update the
// state and call notify(). No wake-up is lost: notify() sets a flag the consumer tests before it
// sleeps, and the cancel it posts runs on the consumer's strand, i.e. after the wait has started
// or before the flag test. Several notify() calls before a wait() collapse into one wake-up.
// The flag is cleared after a wake-up with an exchange, never a plain store: a notify() that finds
// the flag still set posts nothing and relies on the consumer reading its state after the clear.
// Only a read-modify-write orders that read after the producer's write; with a store, x86 may
// let the consumer's next state read pass the store still sitting in its store buffer, and the
// update is missed with no wake-up to come (a few in a million notify pairs microseconds apart:
// tests/lib/http/wake_signal_test.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "asio.h"

namespace disagg::http {

class WakeSignal {
 public:
  /// `executor` must be the strand (or single-threaded executor) the consumer runs on.
  explicit WakeSignal(net::any_io_executor executor) : state_(std::make_shared<State>(std::move(executor))) {}

  /// Thread-safe; cheap when no wake-up is pending.
  void notify() const {
    if (state_->pending.exchange(true, std::memory_order_acq_rel)) return;
    net::post(state_->timer.get_executor(), [s = state_] { s->timer.cancel(); });
  }

  /// Returns after a notify() (possibly one that came before the call) or after `timeout`.
  /// Call only from the consumer's strand, one waiter at a time.
  Task<void> wait(std::chrono::steady_clock::duration timeout = std::chrono::hours(24)) const {
    if (!state_->pending.exchange(false, std::memory_order_acq_rel)) {
      state_->timer.expires_after(timeout);
      boost::system::error_code ec;
      co_await state_->timer.async_wait(net::redirect_error(net::use_awaitable, ec));
      state_->pending.exchange(false, std::memory_order_acq_rel);
    }
  }

 private:
  struct State {
    explicit State(net::any_io_executor ex) : timer(std::move(ex)) {}
    net::steady_timer timer;
    std::atomic<bool> pending{false};
  };
  std::shared_ptr<State> state_;
};

}  // namespace disagg::http
