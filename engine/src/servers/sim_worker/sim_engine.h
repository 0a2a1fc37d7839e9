// sim_engine.h — the sim-worker's model replica: the core Scheduler stepped on the real clock.
//
// One engine thread owns the Scheduler. Each step it plans a batch, sleeps for the cost model's
// step time divided by `speedup` (deadline-based, so sleeps do not drift), completes the step and
// hands the results to the requests. HTTP coroutines talk to it through:
//   - an inbox of submissions, bounded by max_pending (submit() refuses beyond it: HTTP 429);
//   - one RequestState per request: atomics the engine writes (tokens produced, status) and a
//     WakeSignal that wakes the request's coroutine. Only counts cross threads, so a request's
//     "queue" is bounded by construction (its own output length).
//   - cancel(): the client left. The engine thread aborts the sequence in the scheduler (waiting,
//     running or pulling KV), frees its blocks, drops its KV-transfer timer and counts it as
//     vLLM does (request_success_total{finished_reason="abort"}).
// KV transfers (P/D): a remote_kv request's kv_pull becomes ready after
// CostModel::kv_transfer_seconds(tokens) / speedup; a finished prefill_only request holds its
// blocks for the same time for its prompt (the decode side pulling them), then releases them.
// Prefix-cache changes become vLLM KV events (one batch per step) when a publisher is given.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "disagg/scheduler.h"
#include "lib/kv_events/kv_event_publisher.h"
#include "prometheus.h"
#include "lib/http/wake_signal.h"

namespace disagg::sim_worker {

/// Shared between one request's HTTP coroutine and the engine thread.
struct RequestState {
  explicit RequestState(http::net::any_io_executor ex) : signal(std::move(ex)) {}

  enum Status : int { running = 0, finished = 1, failed = 2, aborted = 3 };

  /// Tokens sampled so far (written by the engine, release order before signal).
  std::atomic<std::int32_t> tokens{0};
  std::atomic<int> status{running};
  /// Prompt tokens found in the prefix cache at admission.
  std::atomic<std::int32_t> cached_tokens{0};
  /// Set by SimEngine::cancel() when the client left.
  std::atomic<bool> cancelled{false};
  /// The engine's id of the request (engine thread only; 0 until admitted from the inbox).
  std::uint64_t engine_id = 0;
  // Written by the engine before status becomes final; read by the HTTP side after.
  SchedErrc error = SchedErrc::invalid_request;
  /// Set with status failed when the engine stopped before the request finished.
  bool shutdown = false;
  std::vector<BlockId> held_block_ids;  ///< prefill_only: full prompt blocks held for transfer
  http::WakeSignal signal;
};

struct SimEngineOptions {
  SchedulerConfig scheduler;
  double speedup = 1.0;
  /// Submitted and not finished (inbox + waiting + running); submit() refuses beyond it.
  std::int32_t max_pending = 4096;
  std::string model_name;
  /// XORed into every block hash the KV events publish: a stand-in for vLLM's own hash function
  /// and seed, which the router cannot reproduce (it keys blocks by their token ids).
  std::uint64_t kv_hash_salt = 0;
};

/// One request for the engine.
struct EngineRequest {
  std::shared_ptr<RequestState> state;
  RequestKind kind = RequestKind::full;
  /// Prompt tokens followed by the output tokens the request will generate (the filler is known
  /// in advance, so output blocks are hashed and cached too).
  std::vector<TokenId> tokens;
  std::int32_t prompt_tokens = 0;
  std::int32_t output_tokens = 1;
  /// The LoRA adapter the request names (empty: the base model) and its vLLM lora_id, and its
  /// cache_salt (empty: none). They start its block chain (chain_root, disagg/block_hash.h), as
  /// vLLM's extra keys enter its block hashes, and its KV events carry them.
  std::string lora_name;
  std::int32_t lora_id = 0;
  std::string cache_salt;
  /// Set by submit().
  std::chrono::steady_clock::time_point arrival{};
};

class SimEngine {
 public:
  /// `publisher` may be null (no KV events); it must outlive the engine.
  static Expected<std::unique_ptr<SimEngine>, std::string> create(SimEngineOptions options, const CostModel& cost,
                                                                  KvEventPublisher* publisher);
  ~SimEngine();

  void start();
  /// Stops the thread (requests still running are failed).
  void stop();

  /// Queues a request. False when max_pending requests are already pending (nothing queued).
  bool submit(EngineRequest request);
  /// The client of a submitted request left: the engine thread aborts it (see the file comment)
  /// and sets its status to aborted. Thread-safe; a request that already ended is left alone.
  void cancel(const std::shared_ptr<RequestState>& state);

  /// Prometheus text of the vLLM metrics.
  std::string metrics_text() const;

  /// Counts a remote KV pull that failed (--kv-load-fail-rate): vllm:nixl_num_failed_transfers_total.
  void record_failed_kv_transfer();

  std::int32_t pending() const { return pending_.load(std::memory_order_acquire); }
  /// Prefill-only requests whose KV blocks are still held for a decode worker's pull (P/D).
  std::int32_t held_transfers() const { return held_transfers_.load(std::memory_order_acquire); }
  const SimEngineOptions& options() const { return options_; }
  const CostModel& cost_model() const { return cost_; }

 private:
  struct Active;
  class Listener;
  SimEngine(SimEngineOptions options, const CostModel& cost, Scheduler scheduler, KvEventPublisher* publisher);
  void loop();
  void admit_inbox(std::vector<EngineRequest>& inbox);
  void abort_cancelled(std::vector<std::shared_ptr<RequestState>>& cancels);
  void update_gauges();
  void finish(std::uint64_t id, RequestState::Status status, SchedErrc error);
  void run_timers(std::chrono::steady_clock::time_point now);
  void on_stored(BlockHash hash);
  void on_removed(BlockHash hash);
  void flush_events();

  SimEngineOptions options_;
  CostModel cost_;
  Scheduler sched_;
  KvEventPublisher* publisher_;
  std::unique_ptr<Listener> listener_;

  std::thread thread_;
  mutable std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;
  std::vector<EngineRequest> inbox_;
  std::vector<std::shared_ptr<RequestState>> cancels_;
  bool stop_ = false;
  std::atomic<std::int32_t> pending_{0};
  std::atomic<std::int32_t> held_transfers_{0};

  // Engine-thread state.
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::uint64_t, std::unique_ptr<Active>> active_;
  struct Timer {
    std::chrono::steady_clock::time_point at;
    SeqHandle handle;
    bool release_held;  // else: remote KV ready
  };
  std::vector<Timer> timers_;
  // Block hash -> parent and tokens, for BlockStored events (refcounted by active requests).
  struct BlockInfo {
    std::optional<BlockHash> parent;
    std::vector<TokenId> tokens;
    std::string lora_name;
    std::int32_t lora_id = 0;
    std::string cache_salt;  // the first block of a salted sequence only
    std::int32_t refs = 0;
  };
  std::unordered_map<BlockHash, BlockInfo> block_info_;
  std::vector<KvEvent> events_;

  // Metrics, guarded by metrics_mu_.
  mutable std::mutex metrics_mu_;
  PromHistogram ttft_, itl_, e2e_, queue_time_;
  PromHistogram nixl_xfer_, nixl_post_, nixl_bytes_, nixl_descriptors_;  // vLLM's NIXL connector's
  double nixl_failed_transfers_ = 0;
  double prefix_hits_ = 0, prefix_queries_ = 0, prompt_tokens_ = 0, generation_tokens_ = 0;
  double preemptions_ = 0, success_ = 0, failures_ = 0, kv_pulls_ = 0, kv_pull_seconds_ = 0;
  double aborted_ = 0;
  std::int32_t running_gauge_ = 0, waiting_gauge_ = 0;
  double kv_usage_ = 0;
};

}  // namespace disagg::sim_worker
