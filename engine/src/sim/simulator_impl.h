// simulator_impl.h — the simulator's state (Simulator::Impl) and what its pieces share: the event
// heap's entries, the replica slots' states, a worker's lower tiers and the router-index feeds.
// Internal to disagg_core; the interface is disagg/simulator.h.
//
// The simulator is one discrete-event program split by concern so that no file is too large to read:
//   simulator.cc            the event loop (run) and a request's life: arrival, admission, routing,
//                           delivery, scheduler steps, completion
//   simulator_kv.cc         KV movement: fabric transfers and lower-tier reads landing, the tiers'
//                           lookups and offloads, cache changes fed into the router's index
//   simulator_autoscale.cc  replica lifecycle and autoscaling: the rule's ticks and its pressure
//                           inputs, provisioning, draining, GPU-time accounting, the scaling report
//   simulator_setup.cc      create(): the configuration's checks (pools, tiers, autoscaling, router)
//                           and the pools, workers, router and tiers it builds
// Shared types are in sim_detail. Small functions called per event or per request are defined
// inline here, so that the split costs no calls on them.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <vector>

#include "disagg/block_hash.h"
#include "disagg/kv_block_index.h"
#include "disagg/kv_tier_cache.h"
#include "disagg/simulator.h"
#include "sim_routing.h"

namespace disagg::sim_detail {

// deliver / deliver_decode: a request reaches its (prefill or only) engine / its decode engine after
// the API server's time per request (efficiency.requestOverheadSeconds).
// autoscale_tick: the scaling rule runs; replica_ready: a provisioning replica starts serving.
enum class EvKind : std::uint8_t {
  arrival,
  step_done,
  transfer_done,
  tier_load_done,
  deliver,
  deliver_decode,
  autoscale_tick,
  replica_ready
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

// Forwards a worker's prefix-cache changes into the router's index.
class IndexFeed final : public KvPoolListener {
 public:
  IndexFeed(KvBlockIndex* index, EndpointId endpoint) : index_(index), endpoint_(endpoint) {}
  void on_block_stored(BlockHash hash) override;
  void on_block_removed(BlockHash hash) override;

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
  void on_block_stored(BlockHash hash) override;
  void on_block_removed(BlockHash hash) override;

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

  std::array<Link, kKvTierCount> links;                        // [0] (gpu) unused
  std::array<std::unique_ptr<KvTierCache>, kKvTierCount> own;  // host and disk caches

  std::int32_t lookup(std::span<const BlockHash> hashes, std::span<KvTier> tiers) override;
  void offload(std::span<const BlockHash> hashes, std::int32_t shared) override;

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

}  // namespace disagg::sim_detail

namespace disagg {

struct Simulator::Impl {
  using EvKind = sim_detail::EvKind;
  using SlotState = sim_detail::SlotState;

  struct Worker {
    Scheduler sched;
    WorkerRole role;
    bool busy = false;
    double busy_seconds = 0;
    double link_free_at = 0;  // fabric link (KV pulls into this worker), FIFO
    std::int64_t inflight_prefill_tokens = 0;
    double prefill_tokens_per_second = 0;
    std::unique_ptr<sim_detail::IndexFeed> feed;
    std::unique_ptr<sim_detail::WorkerTiers> tiers = nullptr;  // nullptr: GPU only
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
    double prompt_square_mean = 0;            // EWMA of prompt² (the prompts' spread, for the queueing bound)
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
  std::vector<std::unique_ptr<sim_detail::TierIndexFeed>> tier_feeds;
  sim_detail::TierTotals tier_totals;
  bool has_tiers = false;
  double clock = 0;

  std::priority_queue<sim_detail::Event, std::vector<sim_detail::Event>, std::greater<sim_detail::Event>> heap;
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

  // --- autoscaling (see disagg/simulator.h; all bounded by the pools' slots and the report's windows) ---
  std::vector<PoolRun> pools;
  bool autoscaled = false;        // some pool has a rule
  bool arrivals_pending = false;  // the workload may still yield requests
  std::int32_t draining_total = 0;
  double accounted_to = 0;  // GPU time and window means are integrated up to here
  // Requests held because a role they need has no ready replica (at most router.max_queue).
  std::deque<Queued> held;

  // --- small helpers, called per event or per request: inline here (see the file's comment) ---

  void push(double t, EvKind k, std::int32_t target) { heap.push({t, seq++, k, target}); }

  std::span<EndpointState> eps() { return routing->endpoints(); }

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
      pr.prompt_square_mean =
          pr.seen ? pr.prompt_square_mean + kAlpha * (prompt * prompt - pr.prompt_square_mean) : prompt * prompt;
      pr.output_mean = pr.seen ? pr.output_mean + kAlpha * (output - pr.output_mean) : output;
      pr.seen = true;
      pr.tokens_since_tick += static_cast<std::int64_t>(r.prompt.size());
    }
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

  const PoolSpec& pool_spec(std::int32_t w) const {
    return config.pools[static_cast<std::size_t>(workers[static_cast<std::size_t>(w)].pool)];
  }

  double request_overhead(std::int32_t w) const {
    return workers[static_cast<std::size_t>(w)].sched.cost_model().params().request_overhead_seconds;
  }

  void kick(double now, std::int32_t w) {
    if (!workers[static_cast<std::size_t>(w)].busy) start_step(now, w);
  }

  // --- a request's life (simulator.cc) ---
  // Those declared inline are called only in simulator.cc, where they are defined: inline, the
  // compiler weighs them as it did when they were defined in this class (route, start_step and
  // finish are called from other files too). Calling one from another file fails to build.
  inline void refresh_endpoints();
  inline std::int32_t new_flight();
  inline void hash_request(Flight& fl, const WorkloadRequest& r);
  inline bool submit(std::int32_t w, std::int32_t f, RequestKind kind, SeqHandle* out);
  inline void on_arrival(double now, const WorkloadRequest& r);
  inline void drain_admission(double now);
  void route(double now, double arrival, const WorkloadRequest& r);
  inline void on_deliver(double now, std::int32_t f);
  inline void deliver_decode(double now, std::int32_t f);
  void start_step(double now, std::int32_t wi);
  inline void on_step_done(double now, std::int32_t wi);
  void finish(double now, std::int32_t f);

  // --- KV transfers and lower-tier loads landing (simulator_kv.cc) ---
  void on_transfer_done(double now, std::int32_t f);
  void on_tier_load_done(double now, std::int32_t f);

  // --- replica lifecycle and autoscaling (simulator_autoscale.cc) ---
  void account(double now);
  double pressure(const PoolRun& pr) const;
  void on_tick(double now);
  bool start_replica(double now, PoolRun& pr);
  void stop_replica(double now, PoolRun& pr);
  void on_replica_ready(double now, std::int32_t wi);
  void check_drained(double now);
  void report_scaling(double now);
};

}  // namespace disagg
