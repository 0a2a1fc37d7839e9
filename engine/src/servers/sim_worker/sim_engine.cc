#include "sim_engine.h"

#include <algorithm>
#include <cmath>

namespace disagg::sim_worker {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Bucket bounds of vLLM's histograms (vllm/v1/metrics/loggers.py).
constexpr double kTtftBuckets[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                   1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
constexpr double kItlBuckets[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                  0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
// vLLM's NIXL connector histograms (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py,
// NixlPromMetrics): transfer and post times, bytes (2 KiB to 8 GiB in powers of 4), descriptors.
constexpr double kNixlXferBuckets[] = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0};
constexpr double kNixlPostBuckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0};
constexpr double kNixlBytesBuckets[] = {2048.0,    8192.0,     32768.0,     131072.0,    524288.0,     2097152.0,
                                        8388608.0, 33554432.0, 134217728.0, 536870912.0, 2147483648.0, 8589934592.0};
constexpr double kNixlDescriptorBuckets[] = {10, 20, 30, 50, 75, 100, 200, 400, 1000, 2000, 4000, 10000, 20000, 50000};
constexpr double kE2eBuckets[] = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                  30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

}  // namespace

struct SimEngine::Active {
  std::shared_ptr<RequestState> state;
  std::vector<TokenId> tokens;
  std::vector<BlockHash> hashes;
  RequestKind kind = RequestKind::full;
  std::int32_t prompt = 0;
  std::int32_t output = 0;
  SeqHandle handle = -1;
  Clock::time_point arrival{}, last_token{};
  bool admitted_once = false;
};

class SimEngine::Listener final : public KvPoolListener {
 public:
  explicit Listener(SimEngine& e) : e_(e) {}
  void on_block_stored(BlockHash hash) override { e_.on_stored(hash); }
  void on_block_removed(BlockHash hash) override { e_.on_removed(hash); }

 private:
  SimEngine& e_;
};

Expected<std::unique_ptr<SimEngine>, std::string> SimEngine::create(SimEngineOptions options, const CostModel& cost,
                                                                    KvEventPublisher* publisher) {
  if (!(options.speedup > 0)) return unexpected(std::string("'--speedup' must be > 0"));
  if (options.max_pending < 1) return unexpected(std::string("'--max-pending' must be >= 1"));
  auto sched = Scheduler::create(options.scheduler, cost);
  if (!sched) {
    return unexpected("scheduler configuration refused (" + std::string(to_string(sched.error())) +
                      "); --kv-blocks, --block-size, --max-num-seqs, --max-num-batched-tokens "
                      "and --max-waiting must be >= 1");
  }
  return std::unique_ptr<SimEngine>(new SimEngine(std::move(options), cost, std::move(*sched), publisher));
}

SimEngine::SimEngine(SimEngineOptions options, const CostModel& cost, Scheduler scheduler, KvEventPublisher* publisher)
    : options_(std::move(options)),
      cost_(cost),
      sched_(std::move(scheduler)),
      publisher_(publisher),
      ttft_(kTtftBuckets),
      itl_(kItlBuckets),
      e2e_(kE2eBuckets),
      queue_time_(kE2eBuckets),
      nixl_xfer_(kNixlXferBuckets),
      nixl_post_(kNixlPostBuckets),
      nixl_bytes_(kNixlBytesBuckets),
      nixl_descriptors_(kNixlDescriptorBuckets) {
  listener_ = std::make_unique<Listener>(*this);
  sched_.set_pool_listener(listener_.get());
  inbox_.reserve(static_cast<std::size_t>(options_.max_pending));
  cancels_.reserve(static_cast<std::size_t>(options_.max_pending));
}

void SimEngine::record_failed_kv_transfer() {
  std::lock_guard lock(metrics_mu_);
  nixl_failed_transfers_ += 1;
}

SimEngine::~SimEngine() {
  stop();
}

void SimEngine::start() {
  thread_ = std::thread([this] { loop(); });
}

void SimEngine::stop() {
  {
    std::lock_guard lock(inbox_mu_);
    stop_ = true;
  }
  inbox_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool SimEngine::submit(EngineRequest request) {
  request.arrival = Clock::now();
  {
    std::lock_guard lock(inbox_mu_);
    if (stop_ || pending_.load(std::memory_order_acquire) >= options_.max_pending) return false;
    pending_.fetch_add(1, std::memory_order_acq_rel);
    inbox_.push_back(std::move(request));
  }
  inbox_cv_.notify_one();
  return true;
}

void SimEngine::cancel(const std::shared_ptr<RequestState>& state) {
  if (state->cancelled.exchange(true, std::memory_order_acq_rel)) return;
  {
    std::lock_guard lock(inbox_mu_);
    if (stop_) return;  // the engine fails what is left when it stops
    cancels_.push_back(state);
  }
  inbox_cv_.notify_one();
}

void SimEngine::abort_cancelled(std::vector<std::shared_ptr<RequestState>>& cancels) {
  for (const auto& st : cancels) {
    // A cancel follows its submit, so the request was admitted from the inbox by now; it is gone
    // from active_ when it ended meanwhile.
    auto it = active_.find(st->engine_id);
    if (st->engine_id == 0 || it == active_.end()) continue;
    const SeqHandle h = it->second->handle;
    if (h >= 0) {
      (void)sched_.abort(h);
      // Its KV-pull timer must not fire for the next sequence that gets this handle.
      timers_.erase(std::remove_if(timers_.begin(), timers_.end(),
                                   [h](const Timer& t) { return t.handle == h && !t.release_held; }),
                    timers_.end());
    }
    finish(st->engine_id, RequestState::aborted, SchedErrc::not_found);
  }
  cancels.clear();
}

void SimEngine::update_gauges() {
  std::lock_guard lock(metrics_mu_);
  running_gauge_ = sched_.num_running();
  waiting_gauge_ = std::max(0, pending_.load(std::memory_order_acquire) - running_gauge_);
  kv_usage_ = static_cast<double>(sched_.pool().used_blocks()) / sched_.pool().total_blocks();
}

void SimEngine::admit_inbox(std::vector<EngineRequest>& inbox) {
  const std::size_t bs = static_cast<std::size_t>(options_.scheduler.block_size);
  for (EngineRequest& r : inbox) {
    const std::uint64_t id = next_id_++;
    auto a = std::make_unique<Active>();
    a->state = std::move(r.state);
    a->tokens = std::move(r.tokens);
    a->kind = r.kind;
    a->prompt = r.prompt_tokens;
    a->output = r.output_tokens;
    a->arrival = r.arrival;
    a->state->engine_id = id;
    if (options_.scheduler.enable_prefix_caching) {
      a->hashes.resize(a->tokens.size() / bs);
      const BlockHash root = chain_root(r.lora_name.empty() ? 0 : extra_key_digest(r.lora_name),
                                        r.cache_salt.empty() ? 0 : extra_key_digest(r.cache_salt));
      a->hashes.resize(hash_blocks(a->tokens, bs, root, a->hashes));
      for (std::size_t i = 0; i < a->hashes.size(); ++i) {
        BlockInfo& info = block_info_[a->hashes[i]];
        if (info.refs++ == 0) {
          info.parent = i == 0 ? std::nullopt : std::optional<BlockHash>(a->hashes[i - 1]);
          info.tokens.assign(a->tokens.begin() + static_cast<std::ptrdiff_t>(i * bs),
                             a->tokens.begin() + static_cast<std::ptrdiff_t>((i + 1) * bs));
          info.lora_name = r.lora_name;
          info.lora_id = r.lora_id;
          if (i == 0) info.cache_salt = r.cache_salt;
        }
      }
    }
    SchedRequest sr;
    sr.id = id;
    sr.kind = a->kind;
    sr.prompt_tokens = a->prompt;
    sr.output_tokens = a->output;
    sr.block_hashes = a->hashes;
    auto handle = sched_.submit(sr);
    Active* raw = a.get();
    active_.emplace(id, std::move(a));
    if (!handle) {
      finish(id, RequestState::failed, handle.error());
      continue;
    }
    raw->handle = *handle;
  }
}

void SimEngine::finish(std::uint64_t id, RequestState::Status status, SchedErrc error) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  Active& a = *it->second;
  for (BlockHash h : a.hashes) {
    auto bi = block_info_.find(h);
    if (bi != block_info_.end() && --bi->second.refs == 0) block_info_.erase(bi);
  }
  {
    std::lock_guard lock(metrics_mu_);
    if (status == RequestState::finished) {
      success_ += 1;
      e2e_.observe(seconds_between(a.arrival, Clock::now()));
      prompt_tokens_ += a.prompt;
      generation_tokens_ += a.state->tokens.load(std::memory_order_relaxed);
    } else if (status == RequestState::aborted) {
      // As vLLM: a finished request with reason abort; what it computed is counted.
      aborted_ += 1;
      e2e_.observe(seconds_between(a.arrival, Clock::now()));
      const std::int32_t produced = a.state->tokens.load(std::memory_order_relaxed);
      if (produced > 0) prompt_tokens_ += a.prompt;
      generation_tokens_ += produced;
    } else {
      failures_ += 1;
    }
  }
  a.state->error = error;
  a.state->status.store(status, std::memory_order_release);
  a.state->signal.notify();
  active_.erase(it);
  pending_.fetch_sub(1, std::memory_order_acq_rel);
}

void SimEngine::run_timers(Clock::time_point now) {
  for (std::size_t i = 0; i < timers_.size();) {
    if (timers_[i].at > now) {
      ++i;
      continue;
    }
    const Timer t = timers_[i];
    timers_[i] = timers_.back();
    timers_.pop_back();
    if (t.release_held) {
      (void)sched_.release_held(t.handle);
      // Recounted here too: an engine left with no work steps no more (a drain waits on this).
      held_transfers_.fetch_sub(1, std::memory_order_acq_rel);
    } else {
      (void)sched_.remote_kv_ready(t.handle);
    }
  }
}

void SimEngine::on_stored(BlockHash block) {
  auto it = block_info_.find(block);
  const BlockInfo* info = it == block_info_.end() ? nullptr : &it->second;
  const BlockHash salt = options_.kv_hash_salt;
  const BlockHash hash = block ^ salt;
  const std::optional<BlockHash> parent =
      info && info->parent ? std::optional<BlockHash>(*info->parent ^ salt) : std::nullopt;
  if (!events_.empty()) {
    KvEvent& last = events_.back();
    // Extend a run of consecutive blocks of one chain, as vLLM does per request.
    if (last.kind == KvEventKind::block_stored && parent && last.block_hashes.back() == *parent &&
        (info ? std::string_view(info->lora_name) : std::string_view()) == last.lora_name) {
      last.block_hashes.push_back(hash);
      if (info) last.token_ids.insert(last.token_ids.end(), info->tokens.begin(), info->tokens.end());
      return;
    }
  }
  KvEvent e;
  e.kind = KvEventKind::block_stored;
  e.block_hashes.push_back(hash);
  e.parent_block_hash = parent;
  if (info) {
    e.token_ids = info->tokens;
    e.lora_name = info->lora_name;
    e.lora_id = info->lora_id;
    if (!parent) e.cache_salt = info->cache_salt;
  }
  e.block_size = options_.scheduler.block_size;
  events_.push_back(std::move(e));
}

void SimEngine::on_removed(BlockHash block) {
  const BlockHash hash = block ^ options_.kv_hash_salt;
  if (!events_.empty() && events_.back().kind == KvEventKind::block_removed) {
    events_.back().block_hashes.push_back(hash);
    return;
  }
  KvEvent e;
  e.kind = KvEventKind::block_removed;
  e.block_hashes.push_back(hash);
  events_.push_back(std::move(e));
}

void SimEngine::flush_events() {
  if (events_.empty()) return;
  if (publisher_ != nullptr) { publisher_->publish(std::move(events_)); }
  events_.clear();
}

void SimEngine::loop() {
  std::vector<EngineRequest> inbox;
  inbox.reserve(static_cast<std::size_t>(options_.max_pending));
  std::vector<std::shared_ptr<RequestState>> cancels;
  cancels.reserve(static_cast<std::size_t>(options_.max_pending));
  Clock::time_point vtime = Clock::now();
  const double speedup = options_.speedup;
  bool idle_wait = false;  // the last plan was empty although work exists (e.g. out of blocks)
  while (true) {
    {
      std::unique_lock lock(inbox_mu_);
      if (!stop_ && inbox_.empty() && cancels_.empty() && (idle_wait || !sched_.has_work())) {
        Clock::time_point until = Clock::time_point::max();
        for (const Timer& t : timers_) until = std::min(until, t.at);
        if (idle_wait) until = std::min(until, Clock::now() + std::chrono::milliseconds(2));
        auto ready = [&] { return stop_ || !inbox_.empty() || !cancels_.empty(); };
        if (until == Clock::time_point::max()) inbox_cv_.wait(lock, ready);
        else inbox_cv_.wait_until(lock, until, ready);
      }
      if (stop_) break;
      inbox.swap(inbox_);
      cancels.swap(cancels_);
    }
    admit_inbox(inbox);
    inbox.clear();
    if (!cancels.empty()) {
      abort_cancelled(cancels);
      update_gauges();  // an idle engine steps no more, so the gauges are refreshed here
    }
    run_timers(Clock::now());
    idle_wait = false;
    if (!sched_.has_work()) {
      flush_events();
      continue;
    }
    auto planned = sched_.next_step();
    if (!planned) continue;  // cannot happen: one plan at a time
    const StepPlan& plan = **planned;
    Clock::time_point now = Clock::now();
    for (const SchedEvent& ev : plan.events) {
      auto it = active_.find(ev.id);
      if (it == active_.end()) continue;
      Active& a = *it->second;
      std::lock_guard lock(metrics_mu_);
      switch (ev.kind) {
        case SchedEventKind::admitted:
          if (!a.admitted_once) {
            a.admitted_once = true;
            a.state->cached_tokens.store(ev.value, std::memory_order_relaxed);
            queue_time_.observe(seconds_between(a.arrival, now));
            prefix_queries_ += a.prompt;
            prefix_hits_ += ev.value;
          }
          break;
        case SchedEventKind::kv_pull: {
          const double secs = cost_.kv_transfer_seconds(ev.value);
          kv_pulls_ += 1;
          kv_pull_seconds_ += secs;
          // As vLLM's decode side reports the pull (NixlPromMetrics), in wall seconds like its other
          // histograms: the transfer, its post (the fixed part: handshake and first round trips),
          // its bytes and one descriptor per block.
          nixl_xfer_.observe(secs / speedup);
          nixl_post_.observe(cost_.transfer_seconds(1.0) / speedup);
          nixl_bytes_.observe(cost_.kv_transfer_bytes(ev.value));
          nixl_descriptors_.observe(
              std::ceil(static_cast<double>(ev.value) / static_cast<double>(options_.scheduler.block_size)));
          timers_.push_back(
              {now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(secs / speedup)),
               ev.handle, false});
          break;
        }
        case SchedEventKind::preempted: preemptions_ += 1; break;
        default: break;
      }
    }
    if (plan.empty()) {
      (void)sched_.complete_step();
      flush_events();
      idle_wait = true;
      continue;
    }
    now = Clock::now();
    // Deadline-based pacing: a step ends at the previous step's end plus its scaled time. After a
    // stall (more than 5 ms late) the schedule restarts from now instead of bursting to catch up.
    if (vtime + std::chrono::milliseconds(5) < now) vtime = now;
    vtime += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(plan.seconds / speedup));
    if (vtime > now) std::this_thread::sleep_until(vtime);
    auto done = sched_.complete_step();
    now = Clock::now();
    if (done) {
      for (const SchedEvent& ev : *done) {
        auto it = active_.find(ev.id);
        if (it == active_.end()) continue;
        Active& a = *it->second;
        switch (ev.kind) {
          case SchedEventKind::first_token: {
            std::lock_guard lock(metrics_mu_);
            ttft_.observe(seconds_between(a.arrival, now));
            a.last_token = now;
            a.state->tokens.store(ev.value, std::memory_order_release);
            a.state->signal.notify();
            break;
          }
          case SchedEventKind::token: {
            std::lock_guard lock(metrics_mu_);
            itl_.observe(seconds_between(a.last_token, now));
            a.last_token = now;
            a.state->tokens.store(ev.value, std::memory_order_release);
            a.state->signal.notify();
            break;
          }
          case SchedEventKind::finished: {
            a.state->tokens.store(ev.value, std::memory_order_release);
            if (a.kind == RequestKind::prefill_only) {
              // Hand the full prompt blocks to the decode side (vLLM sends only full blocks),
              // and release them once the transfer would be over.
              const auto full = static_cast<std::size_t>(a.prompt / options_.scheduler.block_size);
              a.state->held_block_ids.clear();
              for (std::size_t i = 0; i < std::min(full, a.hashes.size()); ++i) {
                a.state->held_block_ids.push_back(sched_.pool().find(a.hashes[i]));
              }
              const double secs = cost_.kv_transfer_seconds(a.prompt);
              timers_.push_back(
                  {now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(secs / speedup)),
                   ev.handle, true});
              held_transfers_.fetch_add(1, std::memory_order_acq_rel);  // before the answer: a drain waits on it
            }
            finish(ev.id, RequestState::finished, SchedErrc::invalid_request);
            break;
          }
          default: break;
        }
      }
    }
    flush_events();
    update_gauges();
  }
  // Stopped: fail what is left, so no request waits forever.
  std::vector<std::uint64_t> ids;
  for (const auto& [id, a] : active_) ids.push_back(id);
  for (std::uint64_t id : ids) {
    active_.at(id)->state->shutdown = true;
    finish(id, RequestState::failed, SchedErrc::not_found);
  }
  std::lock_guard lock(inbox_mu_);
  for (EngineRequest& r : inbox_) {
    r.state->shutdown = true;
    r.state->error = SchedErrc::not_found;
    r.state->status.store(RequestState::failed, std::memory_order_release);
    r.state->signal.notify();
  }
  inbox_.clear();
  cancels_.clear();
}

std::string SimEngine::metrics_text() const {
  std::lock_guard lock(metrics_mu_);
  std::string out;
  out.reserve(8192);
  const std::string labels = "engine=\"0\",model_name=\"" + options_.model_name + "\"";
  write_prom_metric(out, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", labels,
                    running_gauge_);
  write_prom_metric(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", labels,
                    waiting_gauge_);
  write_prom_metric(out, "disagg:sim_worker_pending_kv_transfers", "gauge",
                    "Prefilled requests whose KV blocks are held for a decode worker's pull (P/D).", labels,
                    held_transfers_.load(std::memory_order_acquire));
  write_prom_metric(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", labels,
                    kv_usage_);
  // vLLM's CacheConfig as labels of a gauge of 1 (vllm/v1/metrics/loggers.py, log_metrics_info).
  write_prom_metric(out, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig",
                    labels + ",block_size=\"" + std::to_string(options_.scheduler.block_size) + "\",num_gpu_blocks=\"" +
                        std::to_string(sched_.pool().total_blocks()) + "\"",
                    1.0);
  write_prom_metric(out, "vllm:prefix_cache_queries_total", "counter",
                    "Prefix cache queries, in terms of number of queried tokens.", labels, prefix_queries_);
  write_prom_metric(out, "vllm:prefix_cache_hits_total", "counter",
                    "Prefix cache hits, in terms of number of cached tokens.", labels, prefix_hits_);
  write_prom_metric(out, "vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.",
                    labels, preemptions_);
  write_prom_metric(out, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", labels,
                    prompt_tokens_);
  write_prom_metric(out, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", labels,
                    generation_tokens_);
  // One series per finish reason, as vLLM's (vllm/v1/metrics/loggers.py): sim-worker requests end
  // at max_tokens (length) or when their client leaves (abort); none stops early.
  out.append(
      "# HELP vllm:request_success_total Count of successfully processed requests.\n"
      "# TYPE vllm:request_success_total counter\n");
  const std::pair<const char*, double> reasons[] = {{"stop", 0.0}, {"length", success_}, {"abort", aborted_}};
  for (const auto& [reason, value] : reasons) {
    out.append("vllm:request_success_total{")
        .append(labels)
        .append(",finished_reason=\"")
        .append(reason)
        .append("\"} ")
        .append(prom_number(value))
        .append("\n");
  }
  write_prom_metric(out, "disagg:sim_worker_request_failures_total", "counter",
                    "Requests the scheduler refused or that the engine dropped at shutdown.", labels, failures_);
  write_prom_metric(out, "disagg:sim_worker_kv_pulls_total", "counter",
                    "Remote KV transfers charged (P/D decode side).", labels, kv_pulls_);
  write_prom_metric(out, "disagg:sim_worker_kv_pull_model_seconds_total", "counter",
                    "Cost-model seconds of those transfers (before --speedup).", labels, kv_pull_seconds_);
  ttft_.write(out, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels);
  itl_.write(out, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels);
  e2e_.write(out, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", labels);
  queue_time_.write(out, "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                    labels);
  // vLLM's NIXL connector metrics (the decode side, which pulls), by the same names.
  nixl_xfer_.write(out, "vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers.",
                   labels);
  nixl_post_.write(out, "vllm:nixl_post_time_seconds", "Histogram of transfer post time for NIXL KV Cache transfers.",
                   labels);
  nixl_bytes_.write(out, "vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers.",
                    labels);
  nixl_descriptors_.write(out, "vllm:nixl_num_descriptors",
                          "Histogram of number of descriptors per NIXL  KV Cache transfers.", labels);
  write_prom_metric(out, "vllm:nixl_num_failed_transfers_total", "counter", "Number of failed NIXL KV Cache transfers.",
                    labels, nixl_failed_transfers_);
  // The same count under the sim-worker's own, older name (tests and scripts read it).
  write_prom_metric(out, "disagg:sim_worker_kv_load_failures_total", "counter",
                    "Remote KV pulls failed by --kv-load-fail-rate.", "", nixl_failed_transfers_);
  write_prom_metric(out, "vllm:nixl_num_failed_notifications_total", "counter",
                    "Number of failed NIXL KV Cache notifications.", labels, 0);
  write_prom_metric(out, "vllm:nixl_num_kv_expired_reqs_total", "counter",
                    "Number of requests that had their KV expire. NOTE: This metric is tracked on the P instance.",
                    labels, 0);
  return out;
}

}  // namespace disagg::sim_worker
