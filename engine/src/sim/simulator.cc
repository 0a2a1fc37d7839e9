#include "disagg/simulator.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <deque>
#include <optional>
#include <queue>
#include <utility>

#include "disagg/block_hash.h"
#include "disagg/json_value.h"
#include "disagg/kv_block_index.h"
#include "disagg/kv_tier_cache.h"
#include "disagg/pool_pressure.h"
#include "disagg/route_plan.h"
#include "sim_routing.h"

namespace disagg {

std::string_view to_string(FirstTokenAt at) {
  switch (at) {
    case FirstTokenAt::decode_step: return "decode-step";
    case FirstTokenAt::transfer: return "transfer";
    case FirstTokenAt::prefill: return "prefill";
  }
  return "unknown";
}

std::string_view to_string(SimErrc code) {
  switch (code) {
    case SimErrc::invalid_config: return "invalid_config";
    case SimErrc::invariant_violated: return "invariant_violated";
  }
  return "unknown";
}

namespace {

// deliver / deliver_decode: a request reaches its (prefill or only) engine / its decode engine after
// the API server's time per request (efficiency.requestOverheadSeconds).
// autoscale_tick: the scaling rule runs; replica_ready: a provisioning replica starts serving.
enum class EvKind : std::uint8_t {
  arrival, step_done, transfer_done, tier_load_done, deliver, deliver_decode, autoscale_tick, replica_ready
};

// A worker slot of an autoscaled pool: off (no replica), provisioning (billed, not serving),
// ready (serving), draining (billed, no new work, finishing what it holds).
enum class SlotState : std::uint8_t { off, provisioning, ready, draining };

// POD event; the heap orders by time, then by the order events were scheduled.
struct Event {
  double time;
  std::uint64_t seq;
  EvKind kind;
  std::int32_t target;  // worker (step_done) or flight (the others but arrival)

  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

EndpointRole endpoint_role(WorkerRole r) {
  switch (r) {
    case WorkerRole::aggregated: return EndpointRole::aggregated;
    case WorkerRole::prefill: return EndpointRole::prefill;
    case WorkerRole::decode: return EndpointRole::decode;
  }
  return EndpointRole::aggregated;
}

// Forwards a worker's prefix-cache changes into the router's index.
class IndexFeed final : public KvPoolListener {
 public:
  IndexFeed(KvBlockIndex* index, EndpointId endpoint) : index_(index), endpoint_(endpoint) {}
  void on_block_stored(BlockHash hash) override {
    auto r = index_->apply_stored(endpoint_, KvTier::gpu, std::span<const BlockHash>(&hash, 1));
    (void)r;
  }
  void on_block_removed(BlockHash hash) override {
    auto r = index_->apply_removed(endpoint_, KvTier::gpu, std::span<const BlockHash>(&hash, 1));
    (void)r;
  }

 private:
  KvBlockIndex* index_;
  EndpointId endpoint_;
};

// Forwards one lower tier's stores and evictions into the router's index, for every endpoint that
// reaches the tier (one for host and disk; each worker listing the shared remote store).
class TierIndexFeed final : public KvPoolListener {
 public:
  TierIndexFeed(KvBlockIndex* index, KvTier tier) : index_(index), tier_(tier) {}
  void add_endpoint(EndpointId e) { endpoints_.push_back(e); }
  void on_block_stored(BlockHash hash) override {
    for (const EndpointId e : endpoints_) {
      auto r = index_->apply_stored(e, tier_, std::span<const BlockHash>(&hash, 1));
      (void)r;
    }
  }
  void on_block_removed(BlockHash hash) override {
    for (const EndpointId e : endpoints_) {
      auto r = index_->apply_removed(e, tier_, std::span<const BlockHash>(&hash, 1));
      (void)r;
    }
  }

 private:
  KvBlockIndex* index_;
  KvTier tier_;
  std::vector<EndpointId> endpoints_;
};

// Totals over all workers, indexed by KvTier.
struct TierTotals {
  std::array<double, kKvTierCount> bytes_loaded{}, bytes_offloaded{};
  std::array<std::int64_t, kKvTierCount> offloads_skipped{};
};

// One worker's lower tiers as its scheduler sees them: per tier the contents (its own host or disk
// cache, or the shared remote store) and the worker's FIFO read and write links to it.
class WorkerTiers final : public KvTierHook {
 public:
  struct Link {
    KvTierCache* cache = nullptr;  // nullptr: tier not configured
    KvTierSpec spec;
    double read_free_at = 0, write_free_at = 0;
  };

  WorkerTiers(const double* clock, double block_bytes, TierTotals* totals)
      : clock_(clock), block_bytes_(block_bytes), totals_(totals) {}

  std::array<Link, kKvTierCount> links;  // [0] (gpu) unused
  std::array<std::unique_ptr<KvTierCache>, kKvTierCount> own;  // host and disk caches

  std::int32_t lookup(std::span<const BlockHash> hashes, std::span<KvTier> tiers) override {
    const double now = *clock_;
    std::int32_t n = 0;
    for (const BlockHash h : hashes) {
      int found = 0;
      for (int t = 1; t < kKvTierCount && found == 0; ++t) {
        KvTierCache* c = links[static_cast<std::size_t>(t)].cache;
        if (c != nullptr && c->holds(h, now)) found = t;
      }
      if (found == 0) break;
      links[static_cast<std::size_t>(found)].cache->touch(h);
      tiers[static_cast<std::size_t>(n++)] = static_cast<KvTier>(found);
    }
    return n;
  }

  void offload(std::span<const BlockHash> hashes, std::int32_t shared) override {
    const double now = *clock_;
    for (int t = 1; t < kKvTierCount; ++t) {
      Link& l = links[static_cast<std::size_t>(t)];
      if (l.cache == nullptr) continue;
      // Blocks the tier holds already (written by an earlier sequence, or by another worker into
      // the shared store) need no write: refresh them, count the rest.
      std::int64_t fresh = 0;
      for (const BlockHash h : hashes) fresh += l.cache->touch(h) ? 0 : 1;
      if (fresh == 0) continue;
      if (l.write_free_at - now > l.spec.max_write_backlog_seconds) {
        totals_->offloads_skipped[static_cast<std::size_t>(t)] += fresh;
        continue;
      }
      const double bytes = static_cast<double>(fresh) * block_bytes_;
      const double done = std::max(now, l.write_free_at) + l.spec.latency_seconds + bytes / l.spec.write_bytes_per_second;
      l.write_free_at = done;
      totals_->bytes_offloaded[static_cast<std::size_t>(t)] += bytes;
      for (std::size_t i = 0; i < hashes.size(); ++i) {
        l.cache->insert(hashes[i], done, static_cast<std::int32_t>(i) < shared);
      }
    }
  }

  // Times a read of `bytes` from tier `t` on this worker's link; returns when it lands.
  double read(KvTier t, double bytes, double now) {
    Link& l = links[static_cast<std::size_t>(t)];
    const double done = std::max(now, l.read_free_at) + l.spec.latency_seconds + bytes / l.spec.read_bytes_per_second;
    l.read_free_at = done;
    totals_->bytes_loaded[static_cast<std::size_t>(t)] += bytes;
    return done;
  }

 private:
  const double* clock_;
  double block_bytes_;
  TierTotals* totals_;
};

}  // namespace

struct Simulator::Impl {
  struct Worker {
    Scheduler sched;
    WorkerRole role;
    bool busy = false;
    double busy_seconds = 0;
    double link_free_at = 0;  // fabric link (KV pulls into this worker), FIFO
    std::int64_t inflight_prefill_tokens = 0;
    double prefill_tokens_per_second = 0;
    std::unique_ptr<IndexFeed> feed;
    std::unique_ptr<WorkerTiers> tiers = nullptr;  // nullptr: GPU only
    SlotState state = SlotState::ready;
    double ready_at = 0;    // provisioning: when it starts serving
    std::int32_t pool = 0;  // index in config.pools
  };

  // One pool at run time: its worker slots [first, first + slots), its rule and its counts.
  struct PoolRun {
    std::int32_t first = 0, slots = 0;
    std::optional<PoolAutoscaler> scaler;  // absent: static pool
    SchedulerConfig sched;                 // a new replica's scheduler
    std::optional<CostModel> cost;
    double last_request = -1e300;
    double prompt_mean = 0, output_mean = 0;  // EWMA over arrivals (the "one mean prompt")
    double prompt_square_mean = 0;             // EWMA of prompt² (the prompts' spread, for the queueing bound)
    bool seen = false;
    // Prompt tokens arriving per second: those of the last interval, smoothed over about a minute.
    std::int64_t tokens_since_tick = 0;
    double token_rate = 0;
    bool rate_seen = false;
    std::int32_t ready = 0, provisioning = 0, draining = 0;
    std::int32_t billed() const { return ready + provisioning + draining; }
    PoolScaleReport report;
  };

  struct Flight {
    std::vector<BlockHash> hashes;  // prompt + output full blocks
    double arrival = 0, first_token = -1, last_token = 0;
    std::int32_t prompt = 0, output = 0, prompt_blocks = 0;
    // Prompt tokens the router counts as queued prefill on the prefilling worker (the plan's
    // uncached tokens, as the router counts them) until its first token.
    std::int64_t prefill_tokens = 0;
    std::int32_t shared_blocks = 0;  // leading hashes other requests can present (the rest are unique)
    std::int32_t prefill_worker = -1, decode_worker = -1;  // decode_worker: the client-facing one
    SeqHandle prefill_handle = -1, decode_handle = -1;
    std::int32_t cached_tokens = 0;
    std::array<std::int32_t, kCacheTiers> tier_tokens{};  // loaded at first admission, per tier
    std::int32_t load_worker = -1, load_pending = 0;      // lower-tier reads in flight
    SeqHandle load_handle = -1;
    bool first_admission = false;  // its latest admission was the first (tier loads count)
    std::int32_t preemptions = 0;
    double kv_bytes = 0;
    std::uint64_t route_id = 0;
    // Disaggregated: when the client sees the first token (its decode pool's PoolSpec::first_token_at).
    FirstTokenAt first_token_at = FirstTokenAt::decode_step;
    bool disaggregated = false;
    bool admitted_once = false;
    bool active = false;
  };

  SimulationConfig config;
  std::vector<Worker> workers;
  // Routing: the RoutePlanner, one EndpointState per worker and the legs in flight on each.
  std::optional<sim::SimRouting> routing;
  std::optional<KvBlockIndex> index;
  // Announce every block to the index, even those no lookup can match (RouterSpec).
  bool announce_private = false;
  std::int32_t block_size = 16;
  bool ran = false;
  // Lower tiers: the shared remote store, the index feeds, totals, and the clock the hooks read.
  std::unique_ptr<KvTierCache> remote_store;
  std::vector<std::unique_ptr<TierIndexFeed>> tier_feeds;
  TierTotals tier_totals;
  bool has_tiers = false;
  double clock = 0;

  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> heap;
  std::uint64_t seq = 0;
  std::deque<Flight> flights;
  std::vector<std::int32_t> free_flights;
  std::int64_t in_flight = 0;
  MetricsCollector metrics;
  SimulationResult result;
  std::vector<TokenId> scratch_tokens;
  std::optional<SimError> failure;
  Workload* workload = nullptr;  // set during run() for a closed-loop workload
  // Requests waiting for one of the router's max_inflight slots (at most router.max_queue).
  struct Queued {
    double since = 0;
    WorkloadRequest request;
  };
  std::deque<Queued> admission_queue;

  // --- autoscaling (see the header; all bounded by the pools' slots and the report's windows) ---
  std::vector<PoolRun> pools;
  bool autoscaled = false;       // some pool has a rule
  bool arrivals_pending = false; // the workload may still yield requests
  std::int32_t draining_total = 0;
  double accounted_to = 0;       // GPU time and window means are integrated up to here
  // Requests held because a role they need has no ready replica (at most router.max_queue).
  std::deque<Queued> held;

  std::int64_t window_of(double t) const {
    return static_cast<std::int64_t>(std::floor(std::max(0.0, t) / config.autoscale.window_seconds));
  }

  // The report's window `w` (created on demand); nullptr past kMaxScaleWindows.
  ScaleWindow* window(std::int64_t w) {
    if (!config.autoscale.report || w >= kMaxScaleWindows) return nullptr;
    ScalingReport& r = result.scaling;
    while (static_cast<std::int64_t>(r.windows.size()) <= w) {
      ScaleWindow sw;
      sw.start_seconds = static_cast<double>(r.windows.size()) * config.autoscale.window_seconds;
      r.windows.push_back(sw);
      r.window_replicas.resize(r.window_replicas.size() + pools.size(), 0.0);
      r.window_ready.resize(r.window_ready.size() + pools.size(), 0.0);
    }
    return &r.windows[static_cast<std::size_t>(w)];
  }

  // Integrates billed replicas x GPUs (and the windows' replica-seconds) up to `now`. Called
  // before every change of a pool's counts.
  void account(double now) {
    if (!config.autoscale.report || !(now > accounted_to)) return;
    const double ws = config.autoscale.window_seconds;
    double t = accounted_to;
    while (t < now) {
      const std::int64_t w = window_of(t);
      double end = std::min(now, static_cast<double>(w + 1) * ws);
      if (!(end > t)) end = std::min(now, t + ws);
      const double dt = end - t;
      const bool in_window = window(w) != nullptr;
      for (std::size_t p = 0; p < pools.size(); ++p) {
        PoolRun& pr = pools[p];
        pr.report.gpu_seconds += static_cast<double>(pr.billed()) * pr.report.gpus_per_replica * dt;
        if (in_window) {
          const std::size_t k = static_cast<std::size_t>(w) * pools.size() + p;
          result.scaling.window_replicas[k] += pr.billed() * dt;
          result.scaling.window_ready[k] += pr.ready * dt;
        }
      }
      t = end;
    }
    accounted_to = now;
  }

  std::span<EndpointState> eps() { return routing->endpoints(); }

  // Whether every role of the deployment has a ready replica (else a request waits in `held`).
  bool can_route() const {
    if (!autoscaled) return true;
    std::array<std::int32_t, 3> ready{};
    std::array<bool, 3> present{};
    for (const PoolRun& pr : pools) {
      const auto r = static_cast<std::size_t>(workers[static_cast<std::size_t>(pr.first)].role);
      present[r] = true;
      ready[r] += pr.ready;
    }
    for (std::size_t r = 0; r < 3; ++r) {
      if (present[r] && ready[r] == 0) return false;
    }
    return true;
  }

  // A request arrived (or left the router's queue): the pools' demand signals see it.
  void note_request(double now, const WorkloadRequest& r) {
    if (!autoscaled) return;
    constexpr double kAlpha = 0.05;  // ~20 requests of memory: a surge of long prompts shows fast
    for (PoolRun& pr : pools) {
      pr.last_request = now;
      const double prompt = static_cast<double>(r.prompt.size());
      const double output = static_cast<double>(r.output_tokens);
      pr.prompt_mean = pr.seen ? pr.prompt_mean + kAlpha * (prompt - pr.prompt_mean) : prompt;
      pr.prompt_square_mean = pr.seen ? pr.prompt_square_mean + kAlpha * (prompt * prompt - pr.prompt_square_mean) : prompt * prompt;
      pr.output_mean = pr.seen ? pr.output_mean + kAlpha * (output - pr.output_mean) : output;
      pr.seen = true;
      pr.tokens_since_tick += static_cast<std::int64_t>(r.prompt.size());
    }
  }

  // The pool's SLO pressure: the engine's one rule (disagg/pool_pressure.h), on what the simulator
  // knows of the pool's ready replicas; the router computes it from what it observes.
  double pressure(const PoolRun& pr) const {
    const WorkerRole role = workers[static_cast<std::size_t>(pr.first)].role;
    const CostModel& cm = *pr.cost;
    if (role == WorkerRole::prefill) {
      PrefillLoad load;
      load.ready_replicas = pr.ready;
      load.queued_requests = static_cast<double>(held.size());
      load.mean_prompt_tokens = pr.prompt_mean;
      for (std::int32_t i = pr.first; i < pr.first + pr.slots; ++i) {
        const Worker& w = workers[static_cast<std::size_t>(i)];
        if (w.state != SlotState::ready) continue;
        load.pending_prompt_tokens += static_cast<double>(w.inflight_prefill_tokens);
        load.capacity_tokens_per_second += w.prefill_tokens_per_second;
      }
      load.prompt_cv2 = pr.prompt_mean > 0 ? pr.prompt_square_mean / (pr.prompt_mean * pr.prompt_mean) - 1 : 0;
      load.prompt_tokens_per_second = pr.token_rate;
      load.fixed_seconds = cm.params().request_overhead_seconds;
      load.ttft_slo_seconds = config.slo.ttft_seconds;
      return prefill_pressure(load).pressure;
    }
    DecodeLoad load;
    load.ready_replicas = pr.ready;
    load.queued_requests = static_cast<double>(held.size());
    double kv = 0;
    for (std::int32_t i = pr.first; i < pr.first + pr.slots; ++i) {
      const Worker& w = workers[static_cast<std::size_t>(i)];
      if (w.state != SlotState::ready) continue;
      load.running_sequences += static_cast<double>(w.sched.num_running());
      const KvBlockPool& kp = w.sched.pool();
      kv += static_cast<double>(kp.used_blocks()) / static_cast<double>(kp.total_blocks());
    }
    load.kv_utilization = pr.ready > 0 ? kv / pr.ready : 0;
    load.max_sequences = static_cast<double>(std::max<std::int64_t>(1, pr.sched.max_num_seqs));
    load.tpot_slo_seconds = config.slo.tpot_seconds;
    // The cost model's step at the mean context.
    const double context = pr.prompt_mean + pr.output_mean / 2;
    return decode_pressure(load, [&cm, context](double batch) { return decode_step_seconds(cm, batch, context); }).pressure;
  }

  void on_tick(double now) {
    account(now);
    const double interval = config.autoscale.evaluation_interval_seconds;
    for (std::size_t p = 0; p < pools.size(); ++p) {
      PoolRun& pr = pools[p];
      if (!pr.scaler) continue;
      const double rate = static_cast<double>(pr.tokens_since_tick) / interval;
      pr.token_rate = pr.rate_seen ? pr.token_rate + std::min(1.0, interval / 60.0) * (rate - pr.token_rate) : rate;
      pr.rate_seen = true;
      pr.tokens_since_tick = 0;
      const std::int32_t requested = pr.ready + pr.provisioning;
      const std::int32_t desired = pr.scaler->evaluate(now, pr.ready, requested, pressure(pr), pr.last_request);
      for (std::int32_t k = requested; k < desired; ++k) {
        if (!start_replica(now, pr)) break;
      }
      for (std::int32_t k = desired; k < requested; ++k) stop_replica(now, pr);
    }
    // The rule keeps running while work remains, and to the horizon (scale-down after the load).
    const bool work = arrivals_pending || in_flight > 0 || !held.empty() || !admission_queue.empty() ||
                      draining_total > 0;
    bool provisioning = false;
    for (const PoolRun& pr : pools) provisioning = provisioning || pr.provisioning > 0;
    const double next = now + config.autoscale.evaluation_interval_seconds;
    if (work || provisioning || next <= config.autoscale.horizon_seconds) push(next, EvKind::autoscale_tick, -1);
  }

  // A new replica in an off slot of `pr`: a fresh scheduler (empty cache), provisioning until
  // now + provisioning time. False when every slot is taken (replicas still draining).
  bool start_replica(double now, PoolRun& pr) {
    for (std::int32_t i = pr.first; i < pr.first + pr.slots; ++i) {
      Worker& w = workers[static_cast<std::size_t>(i)];
      if (w.state != SlotState::off) continue;
      account(now);
      SchedulerConfig sc = pr.sched;
      auto s = Scheduler::create(sc, *pr.cost);
      if (!s) return false;  // cannot happen: the same limits were accepted at create()
      w.sched = std::move(*s);
      if (w.feed) w.sched.set_pool_listener(w.feed.get());
      if (w.tiers) w.sched.set_tier_hook(w.tiers.get());
      w.busy = false;
      w.link_free_at = now;
      w.inflight_prefill_tokens = 0;
      w.state = SlotState::provisioning;
      w.ready_at = now + pr.report.provision_seconds;
      ++pr.provisioning;
      ++pr.report.scale_ups;
      pr.report.peak_replicas = std::max(pr.report.peak_replicas, pr.billed());
      push(w.ready_at, EvKind::replica_ready, i);
      return true;
    }
    return false;
  }

  // Removes one replica of `pr`: the newest provisioning one (cancelled), else the least loaded
  // ready one, which drains: no new work from now on, switched off once it holds nothing.
  void stop_replica(double now, PoolRun& pr) {
    account(now);
    std::int32_t pick = -1;
    for (std::int32_t i = pr.first; i < pr.first + pr.slots; ++i) {
      const Worker& w = workers[static_cast<std::size_t>(i)];
      if (w.state == SlotState::provisioning && (pick < 0 || w.ready_at > workers[static_cast<std::size_t>(pick)].ready_at)) pick = i;
    }
    if (pick >= 0) {
      workers[static_cast<std::size_t>(pick)].state = SlotState::off;
      --pr.provisioning;
      ++pr.report.scale_downs;
      return;
    }
    std::int64_t least = 0;
    for (std::int32_t i = pr.first; i < pr.first + pr.slots; ++i) {
      const Worker& w = workers[static_cast<std::size_t>(i)];
      if (w.state != SlotState::ready) continue;
      const std::int64_t load = std::int64_t{w.sched.num_unfinished()} + eps()[static_cast<std::size_t>(i)].routed_requests;
      if (pick < 0 || load < least) {
        pick = i;
        least = load;
      }
    }
    if (pick < 0) return;
    workers[static_cast<std::size_t>(pick)].state = SlotState::draining;
    eps()[static_cast<std::size_t>(pick)].healthy = false;
    --pr.ready;
    ++pr.draining;
    ++draining_total;
    ++pr.report.scale_downs;
  }

  void on_replica_ready(double now, std::int32_t wi) {
    Worker& w = workers[static_cast<std::size_t>(wi)];
    if (w.state != SlotState::provisioning || w.ready_at != now) return;  // cancelled meanwhile
    PoolRun& pr = pools[static_cast<std::size_t>(w.pool)];
    account(now);
    w.state = SlotState::ready;
    EndpointState& e = eps()[static_cast<std::size_t>(wi)];
    e.healthy = true;
    ++e.generation;  // a new pod behind a reused id
    --pr.provisioning;
    ++pr.ready;
    // Requests waiting for this role go now.
    while (!held.empty() && can_route()) {
      Queued q = std::move(held.front());
      held.pop_front();
      route(now, q.since, q.request);
    }
  }

  // Draining replicas that hold nothing any more are switched off.
  void check_drained(double now) {
    for (PoolRun& pr : pools) {
      if (pr.draining == 0) continue;
      for (std::int32_t i = pr.first; i < pr.first + pr.slots; ++i) {
        Worker& w = workers[static_cast<std::size_t>(i)];
        if (w.state != SlotState::draining) continue;
        const bool idle = !w.busy && w.sched.num_unfinished() == 0 && w.sched.num_held() == 0 &&
                          w.sched.pool().used_blocks() == 0 && eps()[static_cast<std::size_t>(i)].routed_requests == 0 &&
                          w.link_free_at <= now;
        if (!idle) continue;
        account(now);
        w.state = SlotState::off;
        --pr.draining;
        --draining_total;
        if (index) index->clear(static_cast<EndpointId>(i));
      }
    }
  }

  void push(double t, EvKind k, std::int32_t target) { heap.push({t, seq++, k, target}); }

  void refresh_endpoints() {
    const std::span<EndpointState> endpoints = routing->endpoints();
    for (std::size_t i = 0; i < workers.size(); ++i) {
      const Worker& w = workers[i];
      EndpointState& e = endpoints[i];
      const KvBlockPool& pool = w.sched.pool();
      e.running_requests = w.sched.num_running();
      e.waiting_requests = w.sched.num_waiting();
      e.total_kv_blocks = pool.total_blocks();
      // Free cached blocks are reusable, so they count as free (as vLLM's usage metric does).
      e.free_kv_blocks = pool.free_blocks();
      e.kv_usage = static_cast<double>(pool.used_blocks()) / static_cast<double>(pool.total_blocks());
      e.inflight_prefill_tokens = w.inflight_prefill_tokens;
    }
  }

  std::int32_t new_flight() {
    std::int32_t f;
    if (!free_flights.empty()) {
      f = free_flights.back();
      free_flights.pop_back();
    } else {
      f = static_cast<std::int32_t>(flights.size());
      flights.emplace_back();
    }
    Flight& fl = flights[static_cast<std::size_t>(f)];
    fl.first_token = -1;
    fl.prefill_worker = fl.decode_worker = -1;
    fl.prefill_handle = fl.decode_handle = -1;
    fl.cached_tokens = fl.preemptions = 0;
    fl.tier_tokens = {};
    fl.load_worker = -1;
    fl.load_pending = 0;
    fl.load_handle = -1;
    fl.first_admission = false;
    fl.kv_bytes = 0;
    fl.first_token_at = FirstTokenAt::decode_step;
    fl.disaggregated = fl.admitted_once = false;
    fl.active = true;
    ++in_flight;
    return f;
  }

  void retire(std::int32_t f) {
    flights[static_cast<std::size_t>(f)].active = false;
    free_flights.push_back(f);
    --in_flight;
  }

  // A request ended (finished or refused): a closed-loop client sends its next one now.
  void ended(double now) {
    if (workload != nullptr) workload->complete(now);
  }

  // A request is refused (429 at the router or a full engine queue): counted, its flight (if it
  // got one, f >= 0) retired, its client told.
  void refuse(double now, std::int32_t f = -1) {
    metrics.add_rejected();
    if (f >= 0) retire(f);
    ended(now);
  }

  void hash_request(Flight& fl, const WorkloadRequest& r) {
    const std::size_t bs = static_cast<std::size_t>(block_size);
    const std::size_t total = (r.prompt.size() + static_cast<std::size_t>(r.output_tokens)) / bs;
    fl.hashes.resize(total);
    if (!r.answer.empty()) {
      scratch_tokens.assign(r.prompt.begin(), r.prompt.end());
      scratch_tokens.insert(scratch_tokens.end(), r.answer.begin(), r.answer.end());
      const std::size_t n = hash_blocks(scratch_tokens, bs, kRootBlockHash, fl.hashes);
      fl.hashes.resize(n);
      fl.shared_blocks = static_cast<std::int32_t>(n);  // later turns reuse the answer
      return;
    }
    // Only the shared prefix (system prompt, trace blocks) can match another request: hash its
    // tokens. Past it the blocks hold fresh text and, since the output is unknown, output tokens:
    // give them values unique to this request instead of hashing their tokens. They occupy the
    // cache (and get evicted) like vLLM's, but never match another request, so they are private
    // (no index work, no KV events) unless the policy counts index entries.
    const std::size_t shared_tokens =
        r.shared_prefix_tokens < 0 ? r.prompt.size()
                                   : std::min(r.prompt.size(), static_cast<std::size_t>(r.shared_prefix_tokens));
    const std::size_t n = hash_blocks(std::span<const TokenId>(r.prompt).first(shared_tokens), bs,
                                      kRootBlockHash, fl.hashes);
    fl.shared_blocks = announce_private ? static_cast<std::int32_t>(total) : static_cast<std::int32_t>(n);
    BlockHash h = n > 0 ? fl.hashes[n - 1] : kRootBlockHash;
    const std::uint64_t salt = mix64(r.index + 0x5bd1e995ULL);
    for (std::size_t i = n; i < total; ++i) {
      h = mix64(h ^ salt ^ i);
      fl.hashes[i] = h;
    }
  }

  // A disaggregated request whose first token the client gets from the prefill side (first_token_at
  // transfer or prefill): its decode leg starts from the prompt and that token.
  static bool early_first_token(const Flight& fl) {
    return fl.disaggregated && fl.first_token_at != FirstTokenAt::decode_step;
  }

  // The client sees a token of `fl` now: its first, or the next (an inter-token latency).
  void client_token(double now, Flight& fl) {
    if (fl.first_token < 0) {
      fl.first_token = now;
    } else {
      metrics.add_itl(now - fl.last_token);
    }
    fl.last_token = now;
    ++result.tokens_sampled;
  }

  bool submit(std::int32_t w, std::int32_t f, RequestKind kind, SeqHandle* out) {
    Flight& fl = flights[static_cast<std::size_t>(f)];
    SchedRequest req;
    req.id = static_cast<std::uint64_t>(f);
    req.kind = kind;
    req.prompt_tokens = fl.prompt;
    req.output_tokens = fl.output;
    if (kind == RequestKind::remote_kv && early_first_token(fl)) {
      // The decode side receives the prompt's KV and the first token, computes that token's KV in
      // its first step and samples the other output - 1 (at least one: a request of one token that
      // needs the transfer is retired when it lands, on_transfer_done).
      req.prompt_tokens = fl.prompt + 1;
      req.output_tokens = std::max(fl.output - 1, 1);
    }
    req.block_hashes = fl.hashes;
    req.shared_blocks = fl.shared_blocks;
    auto h = workers[static_cast<std::size_t>(w)].sched.submit(req);
    if (!h) return false;
    *out = *h;
    if (kind != RequestKind::remote_kv) workers[static_cast<std::size_t>(w)].inflight_prefill_tokens += fl.prefill_tokens;
    return true;
  }

  void on_arrival(double now, const WorkloadRequest& r) {
    if (ScaleWindow* sw = window(window_of(now))) {
      ++sw->arrivals;
      sw->prompt_tokens += static_cast<std::int64_t>(r.prompt.size());
    }
    note_request(now, r);
    if (in_flight >= config.max_in_flight) {
      refuse(now);
      return;
    }
    // The router's admission bound: a full router queues the request, a full queue refuses it.
    if (in_flight >= config.router.max_inflight || !admission_queue.empty()) {
      if (static_cast<std::int64_t>(admission_queue.size()) >= config.router.max_queue) {
        refuse(now);
        return;
      }
      admission_queue.push_back({now, r});
      return;
    }
    route(now, now, r);
  }

  // Requests ended: queued ones take the free slots in FIFO order; those that waited past the
  // router's queue timeout are refused (the router answered them 429 at their timeout).
  void drain_admission(double now) {
    while (!admission_queue.empty() && in_flight < config.router.max_inflight) {
      Queued& q = admission_queue.front();
      if (now - q.since > config.router.queue_timeout_seconds) {
        refuse(now);
      } else {
        route(now, q.since, q.request);
      }
      admission_queue.pop_front();
    }
  }

  void route(double now, double arrival, const WorkloadRequest& r) {
    if (!can_route()) {
      // No ready replica for a role the request needs (scaled to zero, or not up yet): it waits,
      // as the router holds it (disagg_router_pool_queued_requests), within the router's queue.
      if (static_cast<std::int64_t>(held.size()) >= config.router.max_queue) {
        refuse(now);
        return;
      }
      ++result.scaling.held_for_capacity;
      held.push_back({arrival, r});
      return;
    }
    const std::int32_t f = new_flight();
    Flight& fl = flights[static_cast<std::size_t>(f)];
    fl.arrival = arrival;
    fl.prompt = static_cast<std::int32_t>(r.prompt.size());
    fl.output = r.output_tokens;
    fl.route_id = r.index + 1;
    hash_request(fl, r);
    fl.prompt_blocks = std::min<std::int32_t>(fl.prompt / block_size, static_cast<std::int32_t>(fl.hashes.size()));

    refresh_endpoints();
    RouteRequest rr;
    rr.request_id = fl.route_id;
    rr.prompt_tokens = fl.prompt;
    rr.output_tokens = fl.output;
    rr.block_hashes = std::span<const BlockHash>(fl.hashes).first(static_cast<std::size_t>(fl.prompt_blocks));
    rr.block_size = block_size;
    rr.session_key = r.session_id + 1;
    rr.tenant = r.tenant < 0 ? 0u : static_cast<std::uint32_t>(r.tenant);
    rr.now_ms = static_cast<std::int64_t>(std::floor(now * 1000.0));  // the virtual clock, as the router's
    const RoutePlan plan = routing->plan(rr);
    if (!plan.ok()) {
      refuse(now, f);
      return;
    }
    // The prefilling worker gets the request now; a disaggregated one reaches its decode worker
    // when its prefill finishes (on_step_done). A refused submit is never applied.
    fl.decode_worker = plan.main.index;
    fl.disaggregated = plan.disaggregated();
    fl.prefill_worker = fl.disaggregated ? plan.prefill.index : plan.main.index;
    if (fl.disaggregated) fl.first_token_at = pool_spec(fl.decode_worker).first_token_at;
    fl.prefill_tokens = plan.prefill_tokens;
    // The API server's time: the router routes now, the engine sees the request later.
    const double api = request_overhead(fl.prefill_worker);
    if (api > 0) {
      routing->apply(rr, plan);
      push(now + api, EvKind::deliver, f);
      return;
    }
    const RequestKind kind = fl.disaggregated ? RequestKind::prefill_only : RequestKind::full;
    if (!submit(fl.prefill_worker, f, kind, fl.disaggregated ? &fl.prefill_handle : &fl.decode_handle)) {
      refuse(now, f);
      return;
    }
    routing->apply(rr, plan);
    kick(now, fl.prefill_worker);
  }

  const PoolSpec& pool_spec(std::int32_t w) const {
    return config.pools[static_cast<std::size_t>(workers[static_cast<std::size_t>(w)].pool)];
  }

  double request_overhead(std::int32_t w) const {
    return workers[static_cast<std::size_t>(w)].sched.cost_model().params().request_overhead_seconds;
  }

  // A routed request reaches its engine (after the API server's time); refused: its legs end.
  void on_deliver(double now, std::int32_t f) {
    Flight& fl = flights[static_cast<std::size_t>(f)];
    const RequestKind kind = fl.disaggregated ? RequestKind::prefill_only : RequestKind::full;
    if (!submit(fl.prefill_worker, f, kind, fl.disaggregated ? &fl.prefill_handle : &fl.decode_handle)) {
      routing->leg_done(fl.route_id, fl.prefill_worker);
      if (fl.disaggregated) routing->leg_done(fl.route_id, fl.decode_worker);
      refuse(now, f);
      return;
    }
    kick(now, fl.prefill_worker);
  }

  // A disaggregated request's prefill is done: it goes to its decode engine (through that
  // engine's API server). Decode queue full: the request fails, as a proxy would report it.
  void deliver_decode(double now, std::int32_t f) {
    Flight& fl = flights[static_cast<std::size_t>(f)];
    if (!submit(fl.decode_worker, f, RequestKind::remote_kv, &fl.decode_handle)) {
      auto r = workers[static_cast<std::size_t>(fl.prefill_worker)].sched.release_held(fl.prefill_handle);
      (void)r;
      routing->leg_done(fl.route_id, fl.decode_worker);
      refuse(now, f);
      return;
    }
    kick(now, fl.decode_worker);
  }

  void kick(double now, std::int32_t w) {
    if (!workers[static_cast<std::size_t>(w)].busy) start_step(now, w);
  }

  void start_step(double now, std::int32_t wi) {
    Worker& w = workers[static_cast<std::size_t>(wi)];
    auto plan_or = w.sched.next_step();
    if (!plan_or) return;  // cannot happen: complete_step always follows
    const StepPlan& plan = **plan_or;
    for (const SchedEvent& e : plan.events) {
      Flight& fl = flights[e.id];
      switch (e.kind) {
        case SchedEventKind::admitted:
          fl.first_admission = wi == fl.prefill_worker && !fl.admitted_once;
          if (fl.first_admission) {
            fl.admitted_once = true;
            fl.cached_tokens = std::min(e.value, fl.prompt);
          }
          break;
        case SchedEventKind::tier_load: {
          const double bytes = w.sched.cost_model().kv_transfer_bytes(e.value);
          const double done = w.tiers->read(e.tier, bytes, now);
          if (fl.first_admission) fl.tier_tokens[static_cast<std::size_t>(e.tier)] += e.value;
          fl.load_worker = wi;
          fl.load_handle = e.handle;
          ++fl.load_pending;
          push(done, EvKind::tier_load_done, static_cast<std::int32_t>(e.id));
          break;
        }
        case SchedEventKind::preempted: ++fl.preemptions; break;
        case SchedEventKind::kv_pull: {
          const CostModel& cm = w.sched.cost_model();
          // The first token's KV (early_first_token: part of the decode side's prompt) is computed
          // there, not pulled.
          const std::int64_t pulled = early_first_token(fl) ? std::max(e.value - 1, 0) : e.value;
          const double bytes = cm.kv_transfer_bytes(pulled);
          const double start = std::max(now, w.link_free_at);
          const double done = start + cm.transfer_seconds(bytes);
          w.link_free_at = done;
          fl.kv_bytes += bytes;
          push(done, EvKind::transfer_done, static_cast<std::int32_t>(e.id));
          break;
        }
        default: break;
      }
    }
    if (plan.empty()) {
      auto done = w.sched.complete_step();
      (void)done;
      w.busy = false;
      return;
    }
    w.busy = true;
    w.busy_seconds += plan.seconds;
    push(now + plan.seconds, EvKind::step_done, wi);
  }

  void on_step_done(double now, std::int32_t wi) {
    Worker& w = workers[static_cast<std::size_t>(wi)];
    w.busy = false;
    auto events = w.sched.complete_step();
    if (!events) return;
    ++result.steps;
    for (const SchedEvent& e : *events) {
      const std::int32_t f = static_cast<std::int32_t>(e.id);
      Flight& fl = flights[e.id];
      const bool prefill_side = w.role == WorkerRole::prefill && fl.disaggregated && wi == fl.prefill_worker;
      switch (e.kind) {
        case SchedEventKind::first_token:
          if (wi == fl.prefill_worker) w.inflight_prefill_tokens -= fl.prefill_tokens;
          if (prefill_side) {
            if (fl.first_token_at == FirstTokenAt::prefill) client_token(now, fl);
            break;
          }
          if (early_first_token(fl)) {
            client_token(now, fl);  // the decode side's first is the client's second
            break;
          }
          if (fl.first_token < 0) fl.first_token = now;
          fl.last_token = now;
          ++result.tokens_sampled;
          break;
        case SchedEventKind::token:
          metrics.add_itl(now - fl.last_token);
          fl.last_token = now;
          ++result.tokens_sampled;
          break;
        case SchedEventKind::finished:
          if (prefill_side) {
            if (w.state == SlotState::draining) ++pools[static_cast<std::size_t>(w.pool)].report.drained_requests;
            // The prefill leg's answer: the router's prefill leg ends here.
            routing->leg_done(fl.route_id, fl.prefill_worker);
            if (fl.first_token_at == FirstTokenAt::prefill && fl.output == 1) {
              // Its one token is out: no decode leg, no transfer.
              auto r = w.sched.release_held(fl.prefill_handle);
              (void)r;
              finish(now, f);
              break;
            }
            if (const double api = request_overhead(fl.decode_worker); api > 0) {
              push(now + api, EvKind::deliver_decode, f);
            } else {
              deliver_decode(now, f);
            }
          } else {
            finish(now, f);
          }
          break;
        default: break;
      }
    }
    if (config.check_invariants && !failure) {
      if (auto ok = w.sched.check_invariants(); !ok) {
        failure = SimError{SimErrc::invariant_violated, "worker " + std::to_string(wi) + ": " + ok.error()};
      }
    }
    start_step(now, wi);
  }

  void finish(double now, std::int32_t f) {
    Flight& fl = flights[static_cast<std::size_t>(f)];
    RequestRecord rec;
    rec.arrival = fl.arrival;
    rec.first_token = fl.first_token;
    rec.finish = now;
    rec.prompt_tokens = fl.prompt;
    rec.output_tokens = fl.output;
    rec.cached_tokens[static_cast<std::size_t>(CacheTier::gpu)] = fl.cached_tokens;
    for (std::size_t t = 1; t < kCacheTiers; ++t) rec.cached_tokens[t] = fl.tier_tokens[t];
    rec.preemptions = fl.preemptions;
    rec.disaggregated = fl.disaggregated;
    rec.kv_transfer_bytes = fl.kv_bytes;
    metrics.add_request(rec);
    if (config.autoscale.report) {
      const Worker& dw = workers[static_cast<std::size_t>(fl.decode_worker)];
      if (dw.state == SlotState::draining) ++pools[static_cast<std::size_t>(dw.pool)].report.drained_requests;
      // Good as disagg/metrics.h counts it: TTFT and TPOT within the SLO.
      const bool ttft_ok = fl.first_token - fl.arrival <= config.slo.ttft_seconds;
      const bool tpot_ok = fl.output < 2 || (now - fl.first_token) / (fl.output - 1) <= config.slo.tpot_seconds;
      if (ttft_ok && tpot_ok) {
        if (ScaleWindow* sw = window(window_of(fl.arrival))) ++sw->good;
      }
    }
    routing->leg_done(fl.route_id, fl.decode_worker);
    retire(f);
    ended(now);
  }

  void on_transfer_done(double now, std::int32_t f) {
    Flight& fl = flights[static_cast<std::size_t>(f)];
    if (fl.first_token_at == FirstTokenAt::transfer) {
      client_token(now, fl);  // the prefill's token arrives with the KV
      if (fl.output == 1) {
        // Nothing left to generate: the decode side's sequence, which only received the KV, is
        // retired without a step, and the request finishes.
        auto a = workers[static_cast<std::size_t>(fl.decode_worker)].sched.abort(fl.decode_handle);
        auto b = workers[static_cast<std::size_t>(fl.prefill_worker)].sched.release_held(fl.prefill_handle);
        (void)a;
        (void)b;
        const std::int32_t decode = fl.decode_worker, prefill = fl.prefill_worker;
        finish(now, f);
        kick(now, decode);
        kick(now, prefill);
        return;
      }
    }
    auto a = workers[static_cast<std::size_t>(fl.decode_worker)].sched.remote_kv_ready(fl.decode_handle);
    auto b = workers[static_cast<std::size_t>(fl.prefill_worker)].sched.release_held(fl.prefill_handle);
    (void)a;
    (void)b;
    kick(now, fl.decode_worker);
    kick(now, fl.prefill_worker);
  }

  void on_tier_load_done(double now, std::int32_t f) {
    Flight& fl = flights[static_cast<std::size_t>(f)];
    if (--fl.load_pending > 0) return;  // another tier's read is still on its way
    auto ready = workers[static_cast<std::size_t>(fl.load_worker)].sched.tier_load_ready(fl.load_handle);
    (void)ready;
    kick(now, fl.load_worker);
  }
};

Simulator::Simulator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;
Simulator::~Simulator() = default;

namespace {

std::string tier_name(KvTier t) {
  switch (t) {
    case KvTier::gpu: return "gpu";
    case KvTier::cpu: return "host";
    case KvTier::disk: return "disk";
    case KvTier::remote: return "remote";
  }
  return "unknown";
}

std::string num(double v) { return json_number(v); }

// Checks the lower tiers of every pool (messages in the JSON configuration's terms) and returns
// the blocks each tier entry holds (per worker; the store's total for remote), pool by pool.
Expected<std::vector<std::vector<std::int64_t>>, std::string> check_tiers(const SimulationConfig& config,
                                                                          std::int32_t block_size) {
  std::vector<std::vector<std::int64_t>> blocks(config.pools.size());
  std::int64_t total = 0;
  double remote_capacity = -1;
  std::size_t remote_pool = 0;
  bool remote_counted = false;
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolSpec& p = config.pools[i];
    const double block_bytes = kv_replica_bytes_per_token(p.cost) * block_size;
    int last = 0;
    for (std::size_t j = 0; j < p.kv_tiers.size(); ++j) {
      const KvTierSpec& t = p.kv_tiers[j];
      const std::string f = "'pools[" + std::to_string(i) + "].kvTiers[" + std::to_string(j) + "]";
      const int rank = static_cast<int>(t.tier);
      if (t.tier == KvTier::gpu || rank >= kKvTierCount) {
        return unexpected(f + ".tier' (" + tier_name(t.tier) + ") must be host, disk or remote");
      }
      if (rank <= last) {
        return unexpected("'pools[" + std::to_string(i) + "].kvTiers' lists " + tier_name(t.tier) +
                          " after " + tier_name(static_cast<KvTier>(last)) +
                          "; list host, disk, remote in that order, each at most once");
      }
      last = rank;
      if (!(t.read_bytes_per_second > 0) || !std::isfinite(t.read_bytes_per_second)) {
        return unexpected(f + ".readBytesPerSecond' (" + num(t.read_bytes_per_second) + ") must be > 0; e.g. 5e10 for host memory over PCIe Gen5 x16");
      }
      if (!(t.write_bytes_per_second > 0) || !std::isfinite(t.write_bytes_per_second)) {
        return unexpected(f + ".writeBytesPerSecond' (" + num(t.write_bytes_per_second) + ") must be > 0; e.g. 5e10 for host memory over PCIe Gen5 x16");
      }
      if (!(t.latency_seconds >= 0) || !std::isfinite(t.latency_seconds)) {
        return unexpected(f + ".latencySeconds' (" + num(t.latency_seconds) + ") must be >= 0");
      }
      if (!(t.max_write_backlog_seconds >= 0)) {
        return unexpected(f + ".maxWriteBacklogSeconds' (" + num(t.max_write_backlog_seconds) + ") must be >= 0");
      }
      if (!(block_bytes > 0)) continue;  // the cost model's own check reports kvBytesPerToken
      if (!(t.capacity_bytes >= block_bytes) || !std::isfinite(t.capacity_bytes)) {
        return unexpected(f + ".capacityBytes' (" + num(t.capacity_bytes) + ") must hold at least one KV block of " +
                          num(block_bytes) + " bytes (" + std::to_string(block_size) + " tokens x " +
                          num(kv_replica_bytes_per_token(p.cost)) + " bytes per token)");
      }
      const double n = std::floor(t.capacity_bytes / block_bytes);
      if (n > static_cast<double>(KvTierCache::kMaxBlocks)) {
        return unexpected(f + ".capacityBytes' (" + num(t.capacity_bytes) + ") is " + num(n) +
                          " KV blocks; the simulator holds at most " + std::to_string(KvTierCache::kMaxBlocks) +
                          " per tier; give less (a tier larger than the workload's working set behaves the same)");
      }
      const auto nb = static_cast<std::int64_t>(n);
      blocks[i].push_back(nb);
      if (t.tier == KvTier::remote) {
        if (remote_capacity >= 0 && t.capacity_bytes != remote_capacity) {
          return unexpected(f + ".capacityBytes' (" + num(t.capacity_bytes) +
                            ") differs from the remote store's capacity in pools[" + std::to_string(remote_pool) +
                            "] (" + num(remote_capacity) + "); the store is shared: give every pool the same capacityBytes");
        }
        remote_capacity = t.capacity_bytes;
        remote_pool = i;
        if (!remote_counted) total += nb;
        remote_counted = true;
      } else {
        total += nb * p.replicas;
      }
      if (total > kMaxSimTierBlocks) {
        return unexpected(f + ".capacityBytes' (" + num(t.capacity_bytes) + ") brings the lower tiers of all workers to " +
                          std::to_string(total) + " KV blocks; the simulator holds at most " +
                          std::to_string(kMaxSimTierBlocks) + " (about 50 bytes each); give smaller capacities");
      }
    }
  }
  return blocks;
}

// Router-index entries the lower tiers can add, beyond the GPU pools': bounded, so that a large
// store costs no more than ~400 MB of index (beyond it the index evicts, as a real router's does).
constexpr std::int64_t kMaxTierIndexEntries = std::int64_t{1} << 22;

}  // namespace

Expected<Simulator, SimError> Simulator::create(const SimulationConfig& config) {
  auto bad = [](std::string m) { return unexpected(SimError{SimErrc::invalid_config, std::move(m)}); };
  if (config.pools.empty()) return bad("'pools' is empty; declare at least one pool with role 'both' (aggregated)");
  int aggregated = 0, prefill = 0, decode = 0;
  std::int64_t total_workers = 0;
  std::int64_t total_blocks = 0;
  const std::int32_t block_size = config.pools.front().scheduler.block_size;
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolSpec& p = config.pools[i];
    const std::string field = "'pools[" + std::to_string(i) + "]";
    const bool scaled = p.autoscaling.enabled;
    if (p.replicas < (scaled ? 0 : 1)) {
      return bad(field + ".replicas' (" + std::to_string(p.replicas) + ") must be >= " + (scaled ? "0" : "1"));
    }
    if (p.scheduler.block_size != block_size) {
      return bad(field + "' block size (" + std::to_string(p.scheduler.block_size) +
                 ") differs from the first pool's (" + std::to_string(block_size) + "); use one block size");
    }
    (p.role == WorkerRole::aggregated ? aggregated : p.role == WorkerRole::prefill ? prefill : decode) += 1;
    const std::int64_t slots = scaled ? 2 * std::int64_t{std::max(p.autoscaling.policy.max_replicas, 1)} : p.replicas;
    total_workers += slots;
    total_blocks += slots * p.scheduler.num_blocks;
  }
  if (aggregated > 0 && (prefill > 0 || decode > 0)) {
    return bad("'pools' mixes role 'both' with 'prefill'/'decode'; simulate either aggregated or disaggregated serving");
  }
  if (aggregated == 0 && (prefill == 0 || decode == 0)) {
    return bad("'pools' needs a 'prefill' and a 'decode' pool for disaggregated serving (or one pool with role 'both')");
  }
  if (total_workers > kMaxRoutingEndpoints) {
    return bad("'pools' declare " + std::to_string(total_workers) + " replicas in all (an autoscaled pool counts 2 x maxReplicas: "
               "replicas draining beside new ones); the router tracks at most " +
               std::to_string(kMaxRoutingEndpoints) + " endpoints; use fewer, larger replicas");
  }
  const AutoscaleRun& ar = config.autoscale;
  if (!(ar.evaluation_interval_seconds > 0) || !std::isfinite(ar.evaluation_interval_seconds)) {
    return bad("'autoscaling.evaluationIntervalSeconds' (" + num(ar.evaluation_interval_seconds) + ") must be > 0; HPA evaluates every 15 s");
  }
  if (!(ar.window_seconds > 0) || !std::isfinite(ar.window_seconds)) {
    return bad("'autoscaling.windowSeconds' (" + num(ar.window_seconds) + ") must be > 0, e.g. 300");
  }
  if (!(ar.horizon_seconds >= 0) || !std::isfinite(ar.horizon_seconds)) {
    return bad("'autoscaling.horizonSeconds' (" + num(ar.horizon_seconds) + ") must be >= 0 (0: the run's end)");
  }
  if (ar.horizon_seconds / ar.window_seconds > static_cast<double>(kMaxScaleWindows)) {
    return bad("'autoscaling.windowSeconds' (" + num(ar.window_seconds) + ") cuts the horizon of " + num(ar.horizon_seconds) +
               " s into more than " + std::to_string(kMaxScaleWindows) + " windows; give wider windows");
  }
  std::vector<std::optional<PoolAutoscaler>> scalers(config.pools.size());
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolAutoscaling& a = config.pools[i].autoscaling;
    if (!a.enabled) continue;
    const std::string f = "pools[" + std::to_string(i) + "].autoscaling";
    auto sc = PoolAutoscaler::create(a.policy, ar.evaluation_interval_seconds, f);
    if (!sc) return bad(sc.error());
    const ProvisioningSpec& v = a.provisioning;
    for (const auto& [key, x] : {std::pair<const char*, double>{"nodeStartSeconds", v.node_start_seconds},
                                 {"imagePullSeconds", v.image_pull_seconds},
                                 {"checkpointBytes", v.checkpoint_bytes},
                                 {"networkBytesPerSecond", v.network_bytes_per_second},
                                 {"nvmeBytesPerSecond", v.nvme_bytes_per_second},
                                 {"engineStartSeconds", v.engine_start_seconds}}) {
      if (!(x >= 0) || !std::isfinite(x)) return bad("'" + f + ".provisioning." + key + "' (" + num(x) + ") must be >= 0");
    }
    if (!config.pools[i].kv_tiers.empty()) {
      return bad("'" + f + "': autoscaled pools cannot have kvTiers yet (a new replica's host and disk tiers would start warm); drop one of them");
    }
    scalers[i].emplace(std::move(*sc));
  }
  if (config.max_in_flight < 1) return bad("'maxInFlight' must be >= 1");
  if (config.router.max_inflight < 1) return bad("'router.maxInflight' must be >= 1 (the router's --max-inflight)");
  if (config.router.max_queue < 0) return bad("'router.maxQueue' must be >= 0 (the router's --max-queue)");
  if (!(config.router.queue_timeout_seconds >= 0)) {
    return bad("'router.queueTimeoutSeconds' must be >= 0 (the router's --queue-timeout-ms / 1000)");
  }
  if (!(config.max_seconds >= 0)) return bad("'maxSeconds' must be >= 0");
  auto tier_blocks = check_tiers(config, block_size);
  if (!tier_blocks) return bad(tier_blocks.error());
  // Index entries the tiers may add: host and disk per worker, the store once per endpoint reaching it.
  std::int64_t tier_entries = 0, remote_endpoints = 0, remote_blocks = 0;
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    for (std::size_t j = 0; j < config.pools[i].kv_tiers.size(); ++j) {
      const std::int64_t nb = (*tier_blocks)[i][j];
      if (config.pools[i].kv_tiers[j].tier == KvTier::remote) {
        remote_blocks = nb;
        remote_endpoints += config.pools[i].replicas;
      } else {
        tier_entries += nb * config.pools[i].replicas;
      }
    }
  }
  tier_entries = std::min(tier_entries + remote_blocks * remote_endpoints, kMaxTierIndexEntries);

  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->block_size = block_size;
  impl->announce_private = config.router.announce_unique_blocks;
  PolicyOptions options = config.router.options;
  options.max_endpoints = static_cast<int>(total_workers);
  options.index = nullptr;
  // Only prefix-aware policies read the index; feeding it costs time per cached block.
  const bool reads_prefixes = routing_policy_reads_prefixes(config.router.policy);
  if (config.router.precise_prefix && reads_prefixes) {
    KvIndexConfig ic;
    ic.max_endpoints = static_cast<int>(total_workers);
    // Every block of every pool, once: the index never needs to evict.
    ic.max_entries = std::min<std::int64_t>(std::max<std::int64_t>(total_blocks, 1) + tier_entries, 1LL << 28);
    auto idx = KvBlockIndex::create(ic);
    if (!idx) return bad("router index: " + std::string(to_string(idx.error())));
    impl->index.emplace(std::move(*idx));
    options.index = &*impl->index;
  }
  RoutePlanConfig route_config;
  route_config.disaggregated = aggregated == 0;
  route_config.decider = config.router.decider;
  route_config.session_affinity = config.router.session_affinity;
  auto planner = RoutePlanner::create(config.router.policy, options, route_config);
  if (!planner) return bad(planner.error().message);
  std::vector<EndpointState> endpoints;

  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolSpec& p = config.pools[i];
    auto cm = CostModel::create(p.cost);
    if (!cm) return bad("'pools[" + std::to_string(i) + "]' (" + p.name + "): " + cm.error().message());
    SchedulerConfig sc = p.scheduler;
    sc.role = p.role;
    Impl::PoolRun pr;
    pr.first = static_cast<std::int32_t>(impl->workers.size());
    pr.sched = sc;
    pr.cost.emplace(*cm);
    pr.report.name = p.name;
    pr.report.role = p.role;
    pr.report.gpus_per_replica = static_cast<std::int32_t>(
        std::min<std::int64_t>(std::int64_t{p.cost.tensor_parallel} * p.cost.pipeline_parallel, INT32_MAX));
    std::int32_t initial = p.replicas;
    if (scalers[i]) {
      const AutoscalePolicy& ap = p.autoscaling.policy;
      pr.slots = 2 * ap.max_replicas;
      initial = std::clamp(p.replicas, ap.scale_to_zero ? ap.min_replicas : std::max(ap.min_replicas, 1), ap.max_replicas);
      pr.scaler = std::move(scalers[i]);
      pr.report.provision_seconds = p.autoscaling.provisioning.seconds();
      impl->autoscaled = true;
    } else {
      pr.slots = p.replicas;
    }
    pr.ready = initial;
    pr.report.peak_replicas = initial;
    impl->pools.push_back(std::move(pr));
    for (std::int32_t r = 0; r < impl->pools.back().slots; ++r) {
      auto s = Scheduler::create(sc, *cm);
      if (!s) {
        return bad("'pools[" + std::to_string(i) + "]' (" + p.name +
                   "): scheduler limits (maxConcurrencyPerReplica, maxBatchedTokens, KV blocks) must be >= 1");
      }
      const EndpointId id = static_cast<EndpointId>(impl->workers.size());
      const double chunk = static_cast<double>(sc.max_num_batched_tokens);
      const double chunk_seconds = cm->prefill_chunk_time(sc.max_num_batched_tokens, 0).total_seconds;
      impl->workers.push_back(Impl::Worker{std::move(*s), p.role, false, 0, 0, 0, 0, nullptr});
      Impl::Worker& w = impl->workers.back();
      // Pipeline stages prefill one chunk each at a time (disagg/cost_model.h): pp chunks per chunk time.
      w.prefill_tokens_per_second = chunk_seconds > 0 ? chunk * p.cost.pipeline_parallel / chunk_seconds : 0;
      w.pool = static_cast<std::int32_t>(i);
      w.state = r < initial ? SlotState::ready : SlotState::off;
      EndpointState e;
      e.id = id;
      e.healthy = w.state == SlotState::ready;
      e.role = endpoint_role(p.role);
      e.prefill_tokens_per_second = w.prefill_tokens_per_second;
      endpoints.push_back(e);
    }
  }
  impl->routing.emplace(std::move(*planner), std::move(endpoints));
  // Lower tiers: per worker host and disk caches of its own, links to every tier, one shared store.
  std::array<TierIndexFeed*, kKvTierCount> remote_feed{};
  std::size_t worker = 0;
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolSpec& p = config.pools[i];
    for (std::int32_t r = 0; r < impl->pools[i].slots; ++r, ++worker) {
      if (p.kv_tiers.empty()) continue;
      impl->has_tiers = true;
      Impl::Worker& w = impl->workers[worker];
      const double block_bytes = w.sched.cost_model().kv_transfer_bytes(block_size);
      w.tiers = std::make_unique<WorkerTiers>(&impl->clock, block_bytes, &impl->tier_totals);
      for (std::size_t j = 0; j < p.kv_tiers.size(); ++j) {
        const KvTierSpec& t = p.kv_tiers[j];
        const auto k = static_cast<std::size_t>(t.tier);
        const std::int64_t nb = (*tier_blocks)[i][j];
        KvTierCache* cache = nullptr;
        TierIndexFeed* feed = nullptr;
        if (t.tier == KvTier::remote) {
          if (!impl->remote_store) {
            auto c = KvTierCache::create(nb);
            if (!c) return bad("'pools[" + std::to_string(i) + "].kvTiers[" + std::to_string(j) + "].capacityBytes': cannot size the remote store");
            impl->remote_store = std::make_unique<KvTierCache>(std::move(*c));
            if (impl->index) {
              impl->tier_feeds.push_back(std::make_unique<TierIndexFeed>(&*impl->index, KvTier::remote));
              remote_feed[k] = impl->tier_feeds.back().get();
              impl->remote_store->set_listener(remote_feed[k]);
            }
          }
          cache = impl->remote_store.get();
          feed = remote_feed[k];
        } else {
          auto c = KvTierCache::create(nb);
          if (!c) return bad("'pools[" + std::to_string(i) + "].kvTiers[" + std::to_string(j) + "].capacityBytes': cannot size the tier");
          w.tiers->own[k] = std::make_unique<KvTierCache>(std::move(*c));
          cache = w.tiers->own[k].get();
          if (impl->index) {
            impl->tier_feeds.push_back(std::make_unique<TierIndexFeed>(&*impl->index, t.tier));
            feed = impl->tier_feeds.back().get();
            cache->set_listener(feed);
          }
        }
        if (feed != nullptr) feed->add_endpoint(static_cast<EndpointId>(worker));
        w.tiers->links[k].cache = cache;
        w.tiers->links[k].spec = t;
      }
      w.sched.set_tier_hook(w.tiers.get());
    }
  }
  if (impl->index) {
    // Listeners point into `workers`, which no longer grows.
    for (std::size_t i = 0; i < impl->workers.size(); ++i) {
      impl->workers[i].feed = std::make_unique<IndexFeed>(&*impl->index, static_cast<EndpointId>(i));
      impl->workers[i].sched.set_pool_listener(impl->workers[i].feed.get());
    }
  }
  return Simulator(std::move(impl));
}

Expected<SimulationResult, SimError> Simulator::run(Workload& workload, const SimProgressFn& progress) {
  Impl& s = *impl_;
  if (s.ran) return unexpected(SimError{SimErrc::invalid_config, "run() was already called on this Simulator; create another"});
  s.ran = true;
  WorkloadRequest pending;
  bool have_pending = workload.next(pending);
  const double first_arrival = have_pending ? pending.arrival_seconds : 0;
  if (have_pending) s.push(pending.arrival_seconds, EvKind::arrival, -1);
  s.arrivals_pending = have_pending;
  // The first evaluation after one interval of measurement (as an HPA's first metrics arrive).
  if (s.autoscaled) s.push(s.config.autoscale.evaluation_interval_seconds, EvKind::autoscale_tick, -1);
  // Closed loop: requests appear as others end, so the stream is polled after every event.
  const bool closed = workload.closed_loop();
  if (closed) s.workload = &workload;
  double now = 0;
  while (true) {
    if (closed && !have_pending) {
      have_pending = workload.next(pending);
      if (have_pending) s.push(std::max(now, pending.arrival_seconds), EvKind::arrival, -1);
    }
    if (s.heap.empty()) break;
    const Event ev = s.heap.top();
    if (s.config.max_seconds > 0 && ev.time > s.config.max_seconds) break;
    s.heap.pop();
    now = ev.time;
    s.clock = now;
    ++s.result.events;
    switch (ev.kind) {
      case EvKind::arrival:
        s.on_arrival(now, pending);
        have_pending = workload.next(pending);
        if (have_pending) s.push(std::max(now, pending.arrival_seconds), EvKind::arrival, -1);
        break;
      case EvKind::step_done: s.on_step_done(now, ev.target); break;
      case EvKind::transfer_done: s.on_transfer_done(now, ev.target); break;
      case EvKind::tier_load_done: s.on_tier_load_done(now, ev.target); break;
      case EvKind::deliver: s.on_deliver(now, ev.target); break;
      case EvKind::deliver_decode: s.deliver_decode(now, ev.target); break;
      case EvKind::autoscale_tick: s.on_tick(now); break;
      case EvKind::replica_ready: s.on_replica_ready(now, ev.target); break;
    }
    if (ev.kind == EvKind::arrival) s.arrivals_pending = have_pending;
    if (!s.admission_queue.empty()) s.drain_admission(now);
    if (s.draining_total > 0) s.check_drained(now);
    if (progress && (s.result.events & 0xFFF) == 0) progress(now);
    if (s.failure) return unexpected(*s.failure);
  }
  // Requests never delivered (arrivals after the stop) do not count; those in flight do, and those
  // still waiting for admission: refused once past the queue timeout, else unfinished.
  std::int64_t unfinished = s.in_flight;
  for (const auto& q : s.admission_queue) {
    if (now - q.since > s.config.router.queue_timeout_seconds) {
      s.metrics.add_rejected();
    } else {
      ++unfinished;
    }
  }
  unfinished += static_cast<std::int64_t>(s.held.size());
  s.result.unfinished = unfinished;
  for (std::int64_t i = 0; i < unfinished; ++i) s.metrics.add_unfinished();
  std::vector<double> busy;
  busy.reserve(s.workers.size());
  for (const auto& w : s.workers) {
    busy.push_back(w.busy_seconds);
    s.result.blocks_in_use_at_end += w.sched.pool().used_blocks();
  }
  s.result.end_seconds = now;
  if (s.config.autoscale.report) {
    const double horizon = std::max(now, s.config.autoscale.horizon_seconds);
    s.account(horizon);
    ScalingReport& r = s.result.scaling;
    r.horizon_seconds = horizon;
    r.window_seconds = s.config.autoscale.window_seconds;
    // Window sums of replica-seconds become means over each window's length (the last may be short).
    for (std::size_t w = 0; w < r.windows.size(); ++w) {
      const double len = std::min(r.window_seconds, horizon - r.windows[w].start_seconds);
      for (std::size_t p = 0; p < s.pools.size(); ++p) {
        const std::size_t k = w * s.pools.size() + p;
        r.window_replicas[k] = len > 0 ? r.window_replicas[k] / len : 0;
        r.window_ready[k] = len > 0 ? r.window_ready[k] / len : 0;
      }
    }
    // Latency over time: each window's completed arrivals, from the records the summary reads too.
    {
      std::vector<std::vector<double>> ttft(r.windows.size());
      std::vector<std::vector<double>> tpot(r.windows.size());
      for (const RequestRecord& rec : s.metrics.records()) {
        const std::int64_t w = s.window_of(rec.arrival);
        if (w < 0 || w >= static_cast<std::int64_t>(r.windows.size())) continue;
        ttft[static_cast<std::size_t>(w)].push_back(rec.first_token - rec.arrival);
        if (rec.output_tokens >= 2) tpot[static_cast<std::size_t>(w)].push_back((rec.finish - rec.first_token) / (rec.output_tokens - 1));
      }
      for (std::size_t w = 0; w < r.windows.size(); ++w) {
        std::sort(ttft[w].begin(), ttft[w].end());
        std::sort(tpot[w].begin(), tpot[w].end());
        if (!ttft[w].empty()) r.windows[w].ttft_p90 = percentile_sorted(ttft[w], 0.90);
        if (!tpot[w].empty()) r.windows[w].tpot_p90 = percentile_sorted(tpot[w], 0.90);
      }
    }
    for (Impl::PoolRun& pr : s.pools) {
      // Replicas still draining at the end hold work that counts as unfinished, not lost.
      r.pools.push_back(pr.report);
    }
    s.result.has_scaling = true;
  }
  s.result.summary = s.metrics.summarize(s.config.slo, first_arrival, busy);
  s.result.summary.has_tiers = s.has_tiers;
  for (std::size_t t = 1; t < kCacheTiers; ++t) {
    s.result.summary.tier_bytes_loaded[t] = s.tier_totals.bytes_loaded[t];
    s.result.summary.tier_bytes_offloaded[t] = s.tier_totals.bytes_offloaded[t];
    s.result.summary.tier_offloads_skipped[t] = s.tier_totals.offloads_skipped[t];
  }
  return s.result;
}

}  // namespace disagg
