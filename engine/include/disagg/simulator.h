// disagg/simulator.h — discrete-event simulation of a whole deployment on a virtual clock.
//
// A deployment is either aggregated (pools of role aggregated) or disaggregated (at least one
// prefill pool and one decode pool). Every replica of a pool is one worker: a Scheduler with its own
// KV pool and CostModel. The router is the RoutePlanner of disagg/route_plan.h, the router's own
// routing sequence: for prefill/decode it first picks a decode endpoint, asks the PdDecider with the
// cached tokens the policy reports, then (if disaggregating) picks a prefill endpoint, as llm-d's
// router does; each leg counts on its worker's EndpointState::routed_requests until it ends (a
// prefill leg when its prefill finishes, the request when it finishes). A disaggregated request runs
// prefill_only on the prefill worker; when that finishes it is submitted as remote_kv to the decode
// worker, which allocates blocks and reports the tokens to pull; the transfer takes
// CostModel::transfer_seconds of those bytes on the decode worker's fabric link, one transfer at a
// time per link (FIFO); on arrival the decode worker runs it and the prefill worker frees its blocks.
// TTFT is measured at the first token the client sees. For a disaggregated request the decode
// pool's PoolSpec::first_token_at says which that is: by default the decode worker's first step
// after the transfer (vLLM's NixlConnector P/D); with `transfer` the token the prefill worker
// sampled, once the KV transfer that carries it completes (DistServe, SGLang's P/D); with `prefill`
// that token as soon as its prefill step completes (TensorRT-LLM's disaggregated server). In the
// last two the decode worker generates the other output - 1 tokens: it receives the prompt's KV and
// the first token, whose KV its first step computes (SchedRequest of prompt + 1 tokens), and a
// request of one output token finishes at its first token (with `prefill` it needs no decode leg).
//
// Policies that score prefixes read a KvBlockIndex fed by every worker's KV pool events (precise),
// unless router.precise_prefix is false (then they keep their own approximate history). Blocks
// unique to one request (WorkloadRequest::shared_prefix_tokens) get synthetic unique hashes and are
// private to their worker's pool (see RouterSpec::announce_unique_blocks).
//
// Lower KV tiers (PoolSpec::kv_tiers; see engine/README.md, "Lower KV tiers"): each worker of a
// pool may have host memory and local disk tiers of its own, and reach one remote store shared by
// every worker that lists it. Each tier is a bounded LRU set of block hashes (KvTierCache).
//   offload  write-through: the full blocks a worker computes in a step, per sequence, are one
//            write per tier (blocks the tier holds already are only refreshed), timed on the
//            worker's FIFO write link to that tier: latency + bytes / writeBytesPerSecond. When
//            the link is more than max_write_backlog_seconds behind, the write is skipped and its
//            blocks counted (LMCache and vLLM drop stores under pressure rather than stall).
//            A block is readable from the tier only once its write completes (holds(hash, now)).
//   load     at admission the scheduler continues the GPU prefix hits block by block through
//            host, disk, then remote (the fastest tier holding each block, up to the first block
//            held nowhere); per tier involved one read of latency + bytes / readBytesPerSecond on
//            the worker's FIFO read link to it (tiers in parallel); when the last read lands the
//            sequence runs with those tokens computed and the blocks GPU-cached again.
// With a precise router index, tier stores (announced at write issue) and evictions reach it
// with their tier (remote ones for every endpoint that lists the store), so policies that weigh
// tiers see them. Without tiers nothing of this runs and every result is unchanged.
//
// Autoscaling (PoolSpec::autoscaling; engine/README.md, "Autoscaling"): each autoscaled pool has
// 2 x max_replicas worker slots, each off, provisioning (billed, not routable), ready or draining
// (billed, not routable, finishing what it holds). Every evaluation interval the pool's rule
// (disagg/autoscaler.h) reads the pool's SLO pressure from its ready replicas and starts replicas
// (ready after ProvisioningSpec::seconds) or removes them (a provisioning one is cancelled, else the
// least loaded ready one drains and is switched off once it holds nothing). A request that finds
// no ready replica of a role it needs waits until one is. With AutoscaleRun::report the result
// carries GPU-hours per pool and SLO attainment and replicas per time window (ScalingReport).
//
// Events are POD structs in a binary heap ordered by (time, sequence number): no std::function per
// event, no randomness, so a run is a pure function of the configuration and the workload (seed).
// Requests are pulled from the Workload one at a time, so memory holds only the requests in flight.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "disagg/autoscaler.h"
#include "disagg/cost_model.h"
#include "disagg/expected.h"
#include "disagg/metrics.h"
#include "disagg/routing.h"
#include "disagg/scheduler.h"
#include "disagg/workload.h"

namespace disagg {

/// Write backlog (seconds of queued writes on a tier's link) beyond which an offload is skipped.
inline constexpr double kDefaultMaxWriteBacklogSeconds = 1.0;

/// Most blocks the lower tiers of all workers may hold together (each costs about 50 bytes of
/// simulator memory, allocated at create()).
inline constexpr std::int64_t kMaxSimTierBlocks = std::int64_t{1} << 26;

/// One lower KV tier of every worker of a pool.
struct KvTierSpec {
  /// KvTier::cpu (host memory), disk or remote (the shared store); never gpu.
  KvTier tier = KvTier::cpu;
  /// Bytes of KV the tier holds: per worker for cpu and disk; the whole store for remote (every
  /// pool that lists the remote store must give the same value).
  double capacity_bytes = 0;
  /// Bandwidth of one worker's link reading from the tier into GPU memory. > 0.
  double read_bytes_per_second = 0;
  /// Bandwidth of one worker's link writing to the tier. > 0.
  double write_bytes_per_second = 0;
  /// Fixed latency of each read or write. >= 0.
  double latency_seconds = 0;
  /// Skip an offload when the write link is more than this far behind. >= 0.
  double max_write_backlog_seconds = kDefaultMaxWriteBacklogSeconds;
};

/// Time a new replica takes from the scaling decision to serving (autoscaled pools):
/// node_start + image_pull + checkpoint / network + checkpoint / nvme + engine_start. The weights
/// are downloaded to the node's NVMe, then read from it into GPU memory; a bandwidth of 0 skips
/// that leg (weights already local, or streamed). Defaults: engine/README.md, "Autoscaling".
struct ProvisioningSpec {
  double node_start_seconds = 0;        ///< instance launch to a Ready node (0 when a node is warm)
  double image_pull_seconds = 0;        ///< the serving image onto the node
  double checkpoint_bytes = 0;          ///< the model's weights, bytes
  double network_bytes_per_second = 0;  ///< download of the checkpoint (0: not downloaded)
  double nvme_bytes_per_second = 0;     ///< read of the checkpoint from local NVMe (0: not read)
  double engine_start_seconds = 0;      ///< engine start: profiling, CUDA graphs, warm-up
  double seconds() const {
    return node_start_seconds + image_pull_seconds + engine_start_seconds +
           (network_bytes_per_second > 0 ? checkpoint_bytes / network_bytes_per_second : 0) +
           (nvme_bytes_per_second > 0 ? checkpoint_bytes / nvme_bytes_per_second : 0);
  }
};

/// A pool's autoscaling (disabled: the pool keeps `replicas` for the whole run).
struct PoolAutoscaling {
  bool enabled = false;
  AutoscalePolicy policy;
  ProvisioningSpec provisioning;
};

/// When the client sees a disaggregated request's first token (see the file comment). Read on the
/// decode pool of a prefill/decode pair; other pools ignore it.
enum class FirstTokenAt : std::uint8_t {
  decode_step,  ///< the decode worker's first step after the KV transfer (vLLM NixlConnector P/D)
  transfer,     ///< the KV transfer's completion, which brings the prefill's token (DistServe, SGLang P/D)
  prefill,      ///< the prefill step that samples it (TensorRT-LLM's disaggregated server)
};
/// "decode-step", "transfer" or "prefill", as in the configuration (pools[].firstTokenAt).
std::string_view to_string(FirstTokenAt at);

/// Identical replicas.
struct PoolSpec {
  std::string name = "pool";
  WorkerRole role = WorkerRole::aggregated;
  std::int32_t replicas = 1;
  /// Validated by CostModel::create.
  CostModelParams cost;
  /// Limits of each replica's scheduler (its `role` is replaced by the pool's).
  SchedulerConfig scheduler;
  /// Lower KV tiers of each replica, in the order cpu, disk, remote, each at most once. Empty: GPU only.
  std::vector<KvTierSpec> kv_tiers;
  /// Autoscaled: `replicas` are the ready ones at time 0 (clamped to [min, max]); the pool holds
  /// 2 x max_replicas worker slots (replicas draining beside new ones), which count against
  /// kMaxRoutingEndpoints.
  PoolAutoscaling autoscaling;
  /// A decode pool's: when the client sees a disaggregated request's first token.
  FirstTokenAt first_token_at = FirstTokenAt::decode_step;
};

/// Run-wide settings of autoscaling and of its report (SimulationConfig::autoscale).
struct AutoscaleRun {
  /// Report GPU-hours, scaling and SLO attainment per window (SimulationResult::scaling), for
  /// static deployments too. True when the configuration has an `autoscaling` section.
  bool report = false;
  /// The rule runs every this many seconds (HPA's sync period: 15 s).
  double evaluation_interval_seconds = 15;
  /// Width of the report's time windows (SLO attainment, mean replicas).
  double window_seconds = 300;
  /// GPU time is counted from 0 to max(this, the last event): the same horizon for the static
  /// deployment and the autoscaled one (e.g. the day). 0: to the last event. The rule keeps
  /// running until the horizon, so the autoscaled pools scale down after the load ends.
  double horizon_seconds = 0;
};

/// Windows of a scaling report, at most (a day at 1 s, a week at 7 s).
inline constexpr std::int64_t kMaxScaleWindows = 86'400;

struct RouterSpec {
  /// A routing_policy_names() entry.
  std::string policy = "round-robin";
  /// Options of the policy (its `index` is set by the simulator when precise_prefix).
  PolicyOptions options;
  /// Feed a KvBlockIndex from the workers' KV events (false: approximate histories).
  bool precise_prefix = true;
  /// Prefill/decode decision (disaggregated deployments only).
  PdDeciderConfig decider;
  /// Also announce blocks unique to one request (fresh text, unknown output) to the index. Off:
  /// they are cached as usual but cost no index work and raise no KV events, which changes no
  /// lookup (no other request can present them). On: index sizes count them too.
  bool announce_unique_blocks = false;
  /// Keep a session's requests on the endpoint it used last while that endpoint is not overloaded
  /// (RoutePlanConfig::session_affinity; the router's --session-header). Sessions are the
  /// workload's (WorkloadRequest::session_id).
  bool session_affinity = false;
  /// The router's admission bound (its --max-inflight, --max-queue, --queue-timeout-ms): at most
  /// max_inflight requests routed at once; arrivals beyond wait in FIFO order, at most max_queue of
  /// them and each at most queue_timeout_seconds, for a request to end; the rest are refused (429),
  /// so an overloaded deployment sheds load as the router does instead of queueing without bound.
  std::int64_t max_inflight = 4096;
  std::int64_t max_queue = 1024;
  double queue_timeout_seconds = 10;
};

struct SimulationConfig {
  std::vector<PoolSpec> pools;
  RouterSpec router;
  Slo slo;
  /// Hard stop of the virtual clock in seconds (0: run until every request finished). Requests
  /// unfinished at the stop count as submitted and not good.
  double max_seconds = 0;
  /// Requests in flight at once; arrivals beyond are rejected (bounds the simulator's memory).
  std::int64_t max_in_flight = 1 << 20;
  /// Tests: check every scheduler's invariants after every step (slow).
  bool check_invariants = false;
  AutoscaleRun autoscale;
};

/// One pool's part of a scaling report.
struct PoolScaleReport {
  std::string name;
  WorkerRole role = WorkerRole::aggregated;
  std::int32_t gpus_per_replica = 1;  ///< tensor-parallel x pipeline-parallel size
  /// Replica-seconds x GPUs from 0 to the horizon: provisioning, serving and draining replicas.
  double gpu_seconds = 0;
  std::int32_t peak_replicas = 0;  ///< most replicas billed at once
  std::int64_t scale_ups = 0;      ///< replicas started
  std::int64_t scale_downs = 0;    ///< replicas removed (drained or cancelled while provisioning)
  double provision_seconds = 0;    ///< one replica's provisioning time (ProvisioningSpec::seconds)
  /// Requests that finished on a replica after it began draining (their work was not lost).
  std::int64_t drained_requests = 0;
  /// Work a replica still held when it was switched off: always 0 (a draining replica is switched
  /// off only once it holds no sequence, KV block, transfer or routed request); counted to prove it.
  std::int64_t lost_on_scale_down = 0;
};

/// One time window of a scaling report (requests by arrival time).
struct ScaleWindow {
  double start_seconds = 0;
  std::int64_t arrivals = 0;       ///< requests that arrived in the window
  std::int64_t good = 0;           ///< of those, completed meeting both SLOs
  std::int64_t prompt_tokens = 0;  ///< prompt tokens of those arrivals
  /// 90th percentiles over the window's arrivals that completed (NaN when none did): TTFT, and TPOT
  /// of those with two or more output tokens. What a staged or autoscaled run's latency looked like
  /// over time, from the run's request records (no extra per-request state).
  double ttft_p90 = std::numeric_limits<double>::quiet_NaN();
  double tpot_p90 = std::numeric_limits<double>::quiet_NaN();
};

/// GPU time, scaling and SLO attainment over time (SimulationConfig::autoscale.report).
struct ScalingReport {
  double horizon_seconds = 0;
  double window_seconds = 0;
  std::vector<PoolScaleReport> pools;
  std::vector<ScaleWindow> windows;
  /// Mean replicas billed (provisioning, ready, draining) per window and pool: windows x pools,
  /// row-major; and the mean ready ones.
  std::vector<double> window_replicas, window_ready;
  std::int64_t held_for_capacity = 0;  ///< requests that waited for a pool with no ready replica
};

enum class SimErrc { invalid_config, invariant_violated };
std::string_view to_string(SimErrc code);

struct SimError {
  SimErrc code = SimErrc::invalid_config;
  std::string message;  ///< names the field, the value and the fix
};

struct SimulationResult {
  MetricsSummary summary;
  std::int64_t events = 0;  ///< events processed
  std::int64_t steps = 0;   ///< non-empty steps, all workers
  /// Client-visible tokens: sampled by decode and aggregated workers, and the first tokens a decode
  /// pool with first_token_at transfer or prefill takes from the prefill workers.
  std::int64_t tokens_sampled = 0;
  std::int64_t blocks_in_use_at_end = 0;  ///< 0 when every request finished (no leak)
  std::int64_t unfinished = 0;
  double end_seconds = 0;    ///< virtual time of the last event
  bool has_scaling = false;  ///< config.autoscale.report
  ScalingReport scaling;
};

/// Progress of a long run: the virtual time reached (called every few thousand events).
using SimProgressFn = std::function<void(double virtual_seconds)>;

class Simulator {
 public:
  /// Validates the deployment: pools non-empty, replicas >= 1, aggregated xor (prefill + decode),
  /// at most kMaxRoutingEndpoints workers when the policy needs endpoint ids, equal block sizes,
  /// cost models and scheduler limits valid, policy known, KV tiers ordered with capacities of at
  /// least one block (at most kMaxSimTierBlocks in all) and one remote store capacity.
  /// Failure: invalid_config.
  static Expected<Simulator, SimError> create(const SimulationConfig& config);

  /// Runs `workload` to its end (or to max_seconds). May be called once per Simulator.
  /// Failure: invariant_violated (only with check_invariants).
  Expected<SimulationResult, SimError> run(Workload& workload, const SimProgressFn& progress = {});

  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;
  ~Simulator();

  struct Impl;

 private:
  explicit Simulator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace disagg
