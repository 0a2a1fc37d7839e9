// Retry rules, endpoint health transitions (ejection and recovery), admission bounds, the
// Prometheus load parser and the metrics page.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "admission.h"
#include "endpoint_health.h"
#include "retry_policy.h"
#include "router_metrics.h"
#include "spin_then_block_mutex.h"
#include "thread_pinning.h"

namespace disagg::router {
namespace {

TEST(RetryPolicy, OnlyBeforeTheFirstByteAndWithinBounds) {
  for (AttemptResult r :
       {AttemptResult::connect_failed, AttemptResult::failed_before_response, AttemptResult::status_5xx}) {
    EXPECT_TRUE(should_retry(r, 0, 2, false));
    EXPECT_TRUE(should_retry(r, 1, 2, false));
    EXPECT_FALSE(should_retry(r, 2, 2, false));  // out of retries
    EXPECT_FALSE(should_retry(r, 0, 2, true));   // past the deadline
    EXPECT_FALSE(should_retry(r, 0, 0, false));  // retries off
  }
  EXPECT_FALSE(should_retry(AttemptResult::broke_after_first_byte, 0, 2, false));
  EXPECT_FALSE(should_retry(AttemptResult::status_4xx, 0, 2, false));
  EXPECT_FALSE(should_retry(AttemptResult::ok, 0, 2, false));
}

TEST(EndpointHealth, EjectsAfterConsecutiveFailuresAndRecoversByHealthCheck) {
  EndpointSlot s;
  const HealthPolicy policy{3, 1000};
  // GIVEN an endpoint whose health check passed
  EXPECT_TRUE(record_health(s, true, 0, policy));
  EXPECT_TRUE(routable(s, 0));
  // WHEN two proxied requests fail THEN it stays; a success resets the count
  EXPECT_FALSE(record_failure(s, 10, policy, false));
  EXPECT_FALSE(record_failure(s, 11, policy, false));
  record_success(s);
  EXPECT_FALSE(record_failure(s, 12, policy, false));
  EXPECT_FALSE(record_failure(s, 13, policy, false));
  // AND the third consecutive failure ejects it for eject_ms
  EXPECT_TRUE(record_failure(s, 14, policy, false));
  EXPECT_FALSE(routable(s, 500));
  EXPECT_EQ(s.ejections.load(), 1u);
  // AND a passing check during the ejection does not restore it early
  EXPECT_FALSE(record_health(s, true, 600, policy));
  EXPECT_FALSE(routable(s, 600));
  // AND after the ejection a passing check restores it with a clean count
  EXPECT_TRUE(routable(s, 1014));
  record_health(s, true, 1100, policy);
  EXPECT_EQ(s.failures.load(), 0);
}

TEST(EndpointHealth, RefusedConnectionMarksDownAtOnce) {
  EndpointSlot s;
  const HealthPolicy policy{3, 1000};
  record_health(s, true, 0, policy);
  EXPECT_FALSE(record_failure(s, 1, policy, /*definitive=*/true));
  EXPECT_FALSE(routable(s, 2));
  // A failed health check keeps it down; a passing one brings it back (not ejected).
  record_health(s, false, 3, policy);
  EXPECT_FALSE(routable(s, 4));
  EXPECT_TRUE(record_health(s, true, 5, policy));
  EXPECT_TRUE(routable(s, 5));
}

TEST(Admission, BoundsActiveAndQueuedRequests) {
  http::net::io_context ioc;
  Admission a(1, 1);
  int granted = 0, refused = 0;
  auto one = [&](std::chrono::milliseconds timeout, bool hold) -> http::Task<void> {
    const bool ok = co_await a.acquire(ioc.get_executor(), timeout);
    ok ? ++granted : ++refused;
    if (ok && !hold) a.release();
  };
  // GIVEN one slot held
  http::net::co_spawn(ioc, one(std::chrono::milliseconds(100), true), http::net::detached);
  ioc.run_for(std::chrono::milliseconds(20));
  EXPECT_EQ(granted, 1);
  // WHEN two more arrive: one queues, the other finds the queue full
  http::net::co_spawn(ioc, one(std::chrono::milliseconds(2000), false), http::net::detached);
  http::net::co_spawn(ioc, one(std::chrono::milliseconds(2000), false), http::net::detached);
  ioc.restart();  // run_for() stops the context when it runs out of work
  ioc.run_for(std::chrono::milliseconds(20));
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(a.queued(), 1);
  // AND when the slot is released the queued one gets it
  a.release();
  ioc.restart();
  ioc.run_for(std::chrono::milliseconds(50));
  EXPECT_EQ(granted, 2);
  EXPECT_EQ(a.active(), 0);
  // AND a waiter whose time runs out is refused and leaves the queue
  http::net::co_spawn(ioc, one(std::chrono::milliseconds(100), true), http::net::detached);
  http::net::co_spawn(ioc, one(std::chrono::milliseconds(30), false), http::net::detached);
  ioc.restart();
  ioc.run_for(std::chrono::milliseconds(200));
  EXPECT_EQ(refused, 2);
  EXPECT_EQ(a.queued(), 0);
}

TEST(Admission, ManyThreadsNeverExceedTheLimitAndEveryWaiterIsServed) {
  // GIVEN 3 slots, a queue long enough for everyone, and 4 threads, each running 50 requests that
  // take a slot the router's way (try_acquire, else queue) and hold it for a moment
  constexpr int kThreads = 4, kPerThread = 50, kSlots = 3;
  Admission a(kSlots, kThreads * kPerThread);
  std::atomic<int> holding{0}, most{0}, granted{0}, refused{0};
  auto one = [&](http::net::io_context& ioc, int i) -> http::Task<void> {
    bool ok = a.try_acquire();
    if (!ok) ok = co_await a.acquire(ioc.get_executor(), std::chrono::seconds(20));
    if (!ok) {
      ++refused;
      co_return;
    }
    const int now = ++holding;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {}
    http::net::steady_timer t(ioc, std::chrono::microseconds(50 * (i % 7)));
    co_await t.async_wait(http::net::use_awaitable);
    --holding;
    ++granted;
    a.release();
  };
  // WHEN they all run at once
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      http::net::io_context ioc;
      for (int i = 0; i < kPerThread; ++i) http::net::co_spawn(ioc, one(ioc, i), http::net::detached);
      ioc.run();
    });
  }
  for (auto& t : threads) t.join();
  // THEN at most 3 held a slot at any time, every request got one, and nothing is left held or queued
  EXPECT_LE(most.load(), kSlots);
  EXPECT_EQ(granted.load(), kThreads * kPerThread);
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(a.active(), 0);
  EXPECT_EQ(a.queued(), 0);
}

TEST(SpinThenBlockMutex, ExcludesEveryOtherThread) {
  // GIVEN 4 threads that each add to a plain counter 100,000 times under the mutex, and check
  // that nobody else is inside with them
  SpinThenBlockMutex mu;
  std::uint64_t counter = 0;
  int inside = 0;
  std::atomic<int> overlaps{0};
  constexpr int kThreads = 4, kPerThread = 100'000;
  std::vector<std::thread> threads;
  // WHEN they run at once
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        std::lock_guard lock(mu);
        if (++inside != 1) ++overlaps;
        ++counter;
        --inside;
      }
    });
  }
  for (auto& t : threads) t.join();
  // THEN no increment was lost and no two threads were ever inside together
  EXPECT_EQ(counter, std::uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_TRUE(mu.try_lock());  // and it was left unlocked
  mu.unlock();
}

TEST(SpinThenBlockMutex, AWaiterSleepsPastItsSpinAndIsWokenByTheUnlock) {
  // GIVEN a mutex held by this thread
  SpinThenBlockMutex mu;
  mu.lock();
  EXPECT_FALSE(mu.try_lock());
  std::atomic<bool> got{false};
  // WHEN another thread asks for it, and the holder keeps it far longer than a spin lasts
  std::thread waiter([&] {
    std::lock_guard lock(mu);
    got = true;
  });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (mu.sleeps() == 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // THEN the waiter went to sleep, and did not take the held lock
  EXPECT_GE(mu.sleeps(), 1U);
  EXPECT_FALSE(got.load());
  // AND the unlock wakes it, and it gets the lock
  mu.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_TRUE(mu.try_lock());
  mu.unlock();
}

TEST(ThreadPinning, AThreadRunsOnTheCpuItIsPinnedTo) {
  // GIVEN the CPUs this process may use
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  // WHEN a new thread pins itself to the last of them
  std::vector<int> seen;
  bool pinned = false;
  std::thread([&] {
    pinned = pin_this_thread(cpus.back());
    seen = allowed_cpus();
  }).join();
  // THEN that CPU is the only one it may run on, and this thread is unchanged
  EXPECT_TRUE(pinned);
  EXPECT_EQ(seen, std::vector<int>{cpus.back()});
  EXPECT_EQ(allowed_cpus(), cpus);
  // AND a CPU that does not exist is refused without changing the thread
  std::thread([&] {
    pinned = pin_this_thread(1023);
    seen = allowed_cpus();
  }).join();
  EXPECT_FALSE(pinned);
  EXPECT_EQ(seen, cpus);
}

TEST(RouterMetrics, ParsesVllmLoadGauges) {
  const std::string text =
      "# HELP vllm:num_requests_running x\n"
      "vllm:num_requests_running{engine=\"0\",model_name=\"m}x\"} 3\n"
      "vllm:num_requests_running{engine=\"1\"} 2 1700000000\n"
      "vllm:num_requests_waiting 4\n"
      "vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\n"
      "vllm:kv_cache_usage_perc{engine=\"1\"} 0.5\n"
      "vllm:num_requests_running_total 99\n"
      "garbage line\n"
      "vllm:num_requests_waiting{a=\"b\"} NaN\n";
  const ScrapedLoad l = parse_vllm_load(text);
  EXPECT_TRUE(l.found);
  EXPECT_EQ(l.running, 5);
  EXPECT_EQ(l.waiting, 4);
  EXPECT_EQ(l.kv_usage, 0.5);
  EXPECT_FALSE(parse_vllm_load("other_metric 1\n").found);
  EXPECT_FALSE(l.prefix_found);
}

// The workers' prefix-cache counters (tokens), summed over engines; the older gpu_ names count too.
TEST(RouterMetrics, ParsesVllmPrefixCacheCounters) {
  const ScrapedLoad l = parse_vllm_load(
      "# TYPE vllm:prefix_cache_queries_total counter\n"
      "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 1000\n"
      "vllm:prefix_cache_queries_total{engine=\"1\",model_name=\"m\"} 24\n"
      "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} 640\n"
      "vllm:prefix_cache_hits_created{engine=\"0\"} 1.7e9\n");
  EXPECT_TRUE(l.prefix_found);
  EXPECT_FALSE(l.found);  // no load gauges: the endpoint's load is not overwritten
  EXPECT_EQ(l.prefix_queries, 1024);
  EXPECT_EQ(l.prefix_hits, 640);
  const ScrapedLoad old =
      parse_vllm_load("vllm:gpu_prefix_cache_hits_total 5\nvllm:gpu_prefix_cache_queries_total 9\n");
  EXPECT_EQ(old.prefix_hits, 5);
  EXPECT_EQ(old.prefix_queries, 9);
}

// The worker's KV capacity from vllm:cache_config_info's labels (what the router's known-ratio gauge
// divides by); a label whose name only ends in the key does not count.
TEST(RouterMetrics, ParsesVllmCacheConfigInfo) {
  const ScrapedLoad l = parse_vllm_load(
      "vllm:cache_config_info{block_size=\"64\",cache_dtype=\"auto\",cpu_num_gpu_blocks=\"7\",num_gpu_blocks=\"28672\"}"
      " 1.0\n"
      "vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\n");
  EXPECT_EQ(l.num_gpu_blocks, 28672);
  EXPECT_EQ(l.gpu_block_size, 64);
  EXPECT_EQ(l.kv_usage, 0.25);
  EXPECT_EQ(parse_vllm_load("vllm:cache_config_info{num_gpu_blocks=\"x\"} 1\n").num_gpu_blocks, 0);
}

TEST(RouterMetrics, PageHasEveryFamily) {
  RouterMetrics m;
  m.decision_seconds.observe(3e-6);
  m.error(ErrorCause::queue_full);
  std::string out;
  m.write(out);
  for (const char* name :
       {"disagg_router_requests_total{route=\"chat\",outcome=\"ok\"} 0",
        "disagg_router_errors_total{cause=\"queue_full\"} 1", "disagg_router_decision_seconds_bucket{le=\"5e-06\"} 1",
        "disagg_router_decision_seconds_count 1", "disagg_router_ttft_seconds_count 0",
        "disagg_router_tpot_seconds_count 0", "disagg_router_overhead_seconds_count 0",
        "disagg_router_prefix_hit_blocks_total 0", "disagg_router_kv_events_gaps_total 0"}) {
    EXPECT_NE(out.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace disagg::router
