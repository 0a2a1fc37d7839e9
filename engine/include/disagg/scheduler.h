// disagg/scheduler.h — the step scheduler of one worker (one model replica), in the style of vLLM v1.
//
// Every sequence is described by one number pair: tokens known (prompt + generated so far) and tokens
// computed (whose KV is in the cache). A step gives each scheduled sequence up to
// (known - computed) new tokens, within a per-step token budget (max_num_batched_tokens): a decoding
// sequence gets 1, a prefilling one a chunk (chunked prefill). When a sequence's computed count
// reaches its known count, the step samples one new token for it.
//
// Policy of next_step(), in this order:
//   1. Running sequences, oldest first: each gets its tokens; if its KV blocks cannot be allocated,
//      the newest running sequence is preempted (recompute: blocks freed, computed = 0, sent to the
//      front of the waiting queue) until they can; if it is itself the newest, it is preempted.
//   2. Only when nothing was preempted: waiting sequences, FIFO, while fewer than max_num_seqs run
//      and budget remains: prefix-cache lookup through KvBlockPool::plan, commit, then a first
//      chunk. Admission stops at the first sequence that does not fit (no skipping), and, with
//      async scheduling (SchedulerConfig::async_scheduling), at the first one submitted while the
//      previous plan was pending, unless the step would otherwise be empty: vLLM plans step k+1
//      when it launches step k, so a request that arrives during step k joins step k+2 (TTFT is then
//      the rest of step k plus two steps).
// Without chunked prefill (SchedulerConfig::chunked_prefill false: vLLM V0's default scheduler, the
// baseline DistServe and Splitwise measured against), admissions come first and a step that admits
// a prompt runs prompts only, each whole (the first one even beyond the token budget); running
// sequences decode only in steps that admit nothing. Decodes then stall behind every prefill.
//
// Request kinds (disaggregation):
//   full         prefill, then decode output_tokens tokens (an aggregated worker).
//   prefill_only prefill, sample the first token, finish; the blocks stay held (the KV is being
//                transferred) until release_held() is called.
//   remote_kv    the prompt's KV comes from a prefill worker: at admission the blocks of the whole
//                prompt are allocated (local prefix hits need no transfer), the plan reports a pull of
//                the missing tokens, and the sequence waits until remote_kv_ready(); then it decodes
//                output_tokens tokens (its first step recomputes the last prompt token). A remote_kv
//                sequence that is preempted later recomputes its prompt locally.
//
// Lower KV tiers (optional; set_tier_hook): a worker may keep copies of KV blocks in host memory,
// on local disk and in a store shared with other workers (vLLM's OffloadingConnector, LMCache).
//   offload  write-through: every full block the worker computes is offered to the hook
//            (KvTierHook::offload) when it is published; the hook decides what each tier keeps.
//   load     at admission of a full or prefill_only sequence, after the GPU prefix hits, the hook
//            continues the chain of block hashes through the tiers (KvTierHook::lookup). When it
//            finds blocks, the sequence allocates GPU blocks for the hits and the loaded blocks
//            only, emits one tier_load event per tier involved (after its admitted event) and
//            waits, holding them, until tier_load_ready(); then its computed count covers the
//            loaded blocks, which are published (GPU-cached again; not offered back to the tiers),
//            and it runs. As with GPU hits, at least the last prompt token is left to compute.
//            remote_kv sequences never load (their prompt comes from the prefill worker). A
//            loading sequence counts as running, cannot be preempted, and may be aborted.
//
// Plan, then apply: next_step() plans a batch (admission and preemption happen here, since they
// decide the batch) and prices it with the CostModel; the caller lets the step's time pass on its own
// clock (virtual in the simulator, real in sim-worker), then calls complete_step(now), which advances
// the sequences and reports tokens and completions. The scheduler reads no clock and never sleeps.
//
// Abort (the client left): abort(handle) is valid in every state (waiting, running, pulling, held)
// and at any time, also between next_step() and complete_step() for a sequence of the pending plan:
// it is taken out of the plan at once, so complete_step() neither advances nor reports it (the
// plan's priced batch still counts its tokens: that work was launched). Its blocks are freed as a
// finished sequence's are (full published ones stay cached, evictable), its handle is retired at
// once and no later event names it. The caller drops its own pending work for the handle (e.g. a
// remote_kv_ready or release_held timer): the next submit() may reuse the handle.
//
// Bounded: at most max_num_seqs running (including those waiting for remote or tier KV), max_waiting waiting,
// max_num_seqs held. All storage is sized by create(); block tables keep their capacity when slots
// are reused, so a steady state allocates nothing. Not thread-safe; no method throws.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "disagg/block_hash.h"
#include "disagg/cost_model.h"
#include "disagg/expected.h"
#include "disagg/kv_block_index.h"
#include "disagg/kv_block_pool.h"

namespace disagg {

/// What a worker serves. It decides which request kinds submit() accepts.
enum class WorkerRole {
  aggregated,  ///< full requests only
  prefill,     ///< prefill_only requests (and full ones, e.g. as a fallback)
  decode,      ///< remote_kv requests (and full ones, when the router does not disaggregate)
};

/// How much of a request this worker does. See the header comment.
enum class RequestKind : std::uint8_t { full, prefill_only, remote_kv };

std::string_view to_string(WorkerRole role);
std::string_view to_string(RequestKind kind);

/// Limits of one worker's scheduler. Defaults follow vLLM v1's OpenAI-server defaults
/// (max_num_seqs 256, max_num_batched_tokens 8192, block size 16; vllm/engine/arg_utils.py).
struct SchedulerConfig {
  WorkerRole role = WorkerRole::aggregated;
  /// Sequences that may run (hold KV and be scheduled) at once. >= 1.
  std::int32_t max_num_seqs = 256;
  /// Token budget of one step (prefill chunks plus decode tokens). >= 1.
  std::int32_t max_num_batched_tokens = 8192;
  /// Waiting-queue capacity; submit() refuses beyond it. >= 1.
  std::int32_t max_waiting = 4096;
  /// KV blocks of the pool (HBM of the replica / block bytes). >= 1.
  std::int32_t num_blocks = 8192;
  /// Tokens per KV block. >= 1.
  std::int32_t block_size = 16;
  /// Look up and publish prefix-cache hashes. Off: every prompt is computed in full.
  bool enable_prefix_caching = true;
  /// Mix prompt chunks and decodes in one step (vLLM V1). Off: prefill-first steps of whole prompts
  /// that exclude decodes (vLLM V0 without --enable-chunked-prefill). See the header comment.
  bool chunked_prefill = true;
  /// The engine plans step k+1 while step k runs (vLLM --async-scheduling, on by default since
  /// vLLM 0.14). A sequence submitted while a plan is pending misses the next plan, which the real
  /// engine made before the sequence arrived, unless that plan would otherwise be empty (an idle
  /// engine picks a request up at once). Off: it may join the next plan.
  bool async_scheduling = true;
};

/// Why the scheduler refused a call. A refused call changes nothing.
enum class SchedErrc {
  invalid_config,   ///< create(): a limit is < 1, or the pool could not be created
  queue_full,       ///< submit(): max_waiting sequences are already waiting
  wrong_role,       ///< submit(): the worker's role does not accept this kind
  invalid_request,  ///< submit(): prompt_tokens < 1, or output_tokens < 1
  too_long,         ///< submit(): prompt + output would need more blocks than the whole pool
  not_found,        ///< remote_kv_ready()/tier_load_ready()/release_held()/abort(): the handle is not in that state
  step_pending,     ///< next_step() twice, or complete_step() without a plan
};
std::string_view to_string(SchedErrc code);

/// Handle of a submitted sequence; valid until its `finished` event (prefill_only: until
/// release_held()) or abort(). Handles are reused afterwards.
using SeqHandle = std::int32_t;

/// A request as the scheduler sees it.
struct SchedRequest {
  /// Caller's id, echoed in every event (e.g. an index into the caller's table).
  std::uint64_t id = 0;
  RequestKind kind = RequestKind::full;
  std::int32_t prompt_tokens = 0;
  /// Tokens to generate (prefill_only: ignored, the first token ends it). >= 1.
  std::int32_t output_tokens = 1;
  /// Chained hashes of the full blocks of the sequence (prompt, then output tokens, as far as the
  /// caller knows them): looked up at admission, published as blocks fill. May be shorter than the
  /// sequence (the rest is then never cached). The caller owns the storage and keeps it unchanged
  /// until the sequence is finished (prefill_only: released).
  std::span<const BlockHash> block_hashes;
  /// Leading entries of block_hashes that other sequences may present too. The rest are private to
  /// this sequence (the caller made them unique, e.g. fresh text or the output of a one-shot
  /// request): cached and evicted alike, but published with KvBlockPool::publish(shared = false),
  /// so they cost no index work and raise no KV events (no other lookup could match them); they
  /// are indexed when the sequence is preempted, so that it finds them again. Default: all shared.
  std::int32_t shared_blocks = INT32_MAX;
};

/// What happened to a sequence. Planning events come from next_step(), the rest from complete_step().
enum class SchedEventKind : std::uint8_t {
  admitted,     ///< planning: left the waiting queue; value = prompt tokens found in the prefix cache
  preempted,    ///< planning: lost its KV, back to waiting; value = tokens it had computed
  kv_pull,      ///< planning: remote_kv admitted; value = prompt tokens to transfer (not cached here)
  tier_load,    ///< planning: after `admitted`, one per lower tier: value = prompt tokens to load from `tier`
  first_token,  ///< completion: first token sampled (value = 1)
  token,        ///< completion: a later token sampled; value = tokens sampled so far
  finished,     ///< completion: done; value = tokens sampled. prefill_only: blocks stay held
};
std::string_view to_string(SchedEventKind kind);

struct SchedEvent {
  SchedEventKind kind = SchedEventKind::admitted;
  SeqHandle handle = -1;
  std::uint64_t id = 0;
  std::int32_t value = 0;
  /// tier_load: the tier to read from (cpu = host memory, disk, remote); gpu for other kinds.
  KvTier tier = KvTier::gpu;
};

/// Lower KV tiers of one worker, as its scheduler uses them. Implemented by the driver (the
/// simulator), which owns the tiers, their links and the clock. Calls are synchronous and must not
/// call back into the scheduler.
class KvTierHook {
 public:
  virtual ~KvTierHook() = default;
  /// `hashes` continue a sequence's GPU prefix hits. Writes to tiers[i] the fastest lower tier
  /// holding hashes[i] readable now, for the leading hashes held somewhere, and returns how many
  /// those are (it stops at the first hash held nowhere). A hit refreshes its LRU position.
  /// Precondition: tiers.size() >= hashes.size().
  virtual std::int32_t lookup(std::span<const BlockHash> hashes, std::span<KvTier> tiers) = 0;
  /// Write-through offload of full blocks this worker just computed, in sequence order; the
  /// leading `shared` of them may be presented by other sequences (the rest are private).
  virtual void offload(std::span<const BlockHash> hashes, std::int32_t shared) = 0;
};

/// A planned step.
struct StepPlan {
  /// The work, in the cost model's terms; tokens() == 0 means an empty step (nothing runnable).
  StepBatch batch;
  /// Cost model time of the batch (0 when empty). The caller lets this much time pass.
  double seconds = 0;
  /// Sequences scheduled in this step.
  std::int32_t num_scheduled = 0;
  /// Admissions, preemptions and KV pulls decided by this plan; valid until the next call.
  std::span<const SchedEvent> events;

  bool empty() const { return batch.tokens() == 0; }
};

/// Counters since create().
struct SchedulerStats {
  std::int64_t steps = 0;  ///< non-empty steps completed
  std::int64_t preemptions = 0;
  std::int64_t prompt_tokens_queried = 0;  ///< prompt tokens looked up at first admission
  std::int64_t prompt_tokens_hit = 0;      ///< of those, found in the prefix cache
  std::int64_t prompt_tokens_loaded = 0;   ///< of those, loaded from lower tiers (tier_load)
  std::int64_t prefill_tokens = 0;         ///< tokens computed by prefill chunks (recompute included)
  std::int64_t decode_tokens = 0;          ///< tokens computed by decode steps
  std::int64_t finished = 0;
  std::int64_t aborted = 0;  ///< sequences abort() retired before they finished
};

class Scheduler {
 public:
  /// Validates `config`, creates the KV pool and sizes every buffer. Failure: invalid_config.
  static Expected<Scheduler, SchedErrc> create(const SchedulerConfig& config, const CostModel& cost_model);

  /// Queues a request at the back of the waiting queue and returns its handle.
  /// Failure modes: queue_full, wrong_role, invalid_request, too_long.
  Expected<SeqHandle, SchedErrc> submit(const SchedRequest& request);

  /// Plans the next step. Precondition: no plan pending (else step_pending). The plan (and its
  /// events) stays valid until complete_step(). An empty plan must be completed too.
  Expected<const StepPlan*, SchedErrc> next_step();

  /// Applies the pending plan: advances computed counts, publishes full blocks, samples tokens,
  /// finishes sequences (freeing their blocks, or holding them for prefill_only). Takes no time
  /// argument: the caller stamps the events with its own clock. Returns the completion events,
  /// valid until the next call. Failure: step_pending (no plan).
  Expected<std::span<const SchedEvent>, SchedErrc> complete_step();

  /// The remote KV of a remote_kv sequence (after its kv_pull) has arrived: it becomes runnable.
  /// Failure: not_found.
  Expected<void, SchedErrc> remote_kv_ready(SeqHandle handle);

  /// The lower-tier KV of a sequence (after its tier_load events) is in its GPU blocks: its computed
  /// count covers them, they are published, and it becomes runnable. Failure: not_found.
  Expected<void, SchedErrc> tier_load_ready(SeqHandle handle);

  /// Frees the blocks of a finished prefill_only sequence (its KV has been transferred) and
  /// retires the handle. Failure: not_found.
  Expected<void, SchedErrc> release_held(SeqHandle handle);

  /// Stops a sequence that has not been retired yet, in any state (see "Abort" in the header
  /// comment): frees its blocks, retires the handle, counts stats().aborted, and no event names it
  /// afterwards. A held (finished prefill_only) sequence is released as by release_held() and not
  /// counted as aborted (it finished). O(max_num_seqs + max_waiting); allocates nothing.
  /// Failure: not_found (the handle is free or out of range; nothing changes).
  Expected<void, SchedErrc> abort(SeqHandle handle);

  /// Whether a next_step() could schedule something now (runnable running sequences, or waiting
  /// ones while a run slot is free). False means: idle until a submit, remote_kv_ready,
  /// tier_load_ready or release.
  bool has_work() const;

  const SchedulerConfig& config() const { return config_; }
  const CostModel& cost_model() const { return cost_; }
  /// The KV pool, e.g. for a router's prefix match or KV-use metrics. Not to be mutated.
  const KvBlockPool& pool() const { return pool_; }
  /// Receives prefix-cache changes (see KvPoolListener); nullptr for none.
  void set_pool_listener(KvPoolListener* listener) { pool_.set_listener(listener); }
  /// Enables lower KV tiers (see the file comment); nullptr (the default) disables them. Not owned;
  /// must outlive the scheduler's use. Sizes a scratch buffer (one entry per pool block) now.
  void set_tier_hook(KvTierHook* hook);

  std::int32_t num_running() const { return static_cast<std::int32_t>(running_.size()) + num_pulling_ + num_loading_; }
  std::int32_t num_waiting() const { return waiting_count_; }
  std::int32_t num_held() const { return num_held_; }
  /// Sequences submitted and not yet finished (held ones excluded).
  std::int32_t num_unfinished() const { return num_running() + num_waiting(); }
  const SchedulerStats& stats() const { return stats_; }

  /// Checks that block ownership adds up (every in-use block's ref count equals the number of
  /// block tables listing it) and that the pool's own invariants hold. For tests: O(blocks + seqs).
  Expected<void, std::string> check_invariants() const;

 private:
  enum class SeqState : std::uint8_t { free, waiting, running, pulling, loading, held };

  struct Seq {
    std::uint64_t id = 0;
    std::span<const BlockHash> hashes;
    std::int32_t prompt = 0;
    std::int32_t max_output = 0;
    std::int32_t output = 0;     // tokens sampled so far
    std::int32_t computed = 0;   // tokens whose KV is cached
    std::int32_t published = 0;  // leading blocks that hold their hash
    std::int32_t shared = 0;     // leading hashes announced to the pool listener
    std::int32_t scheduled = 0;  // tokens of the pending step
    std::int32_t loading = 0;    // blocks being loaded from lower tiers (state loading)
    std::int32_t preemptions = 0;
    RequestKind kind = RequestKind::full;
    SeqState state = SeqState::free;
    bool queried = false;   // prefix lookup counted in stats
    bool deferred = false;  // submitted while a plan was pending (async scheduling)
    std::vector<BlockId> blocks;
  };

  Scheduler(const SchedulerConfig& config, const CostModel& cost, KvBlockPool pool);

  std::int32_t known_tokens(const Seq& s) const { return s.prompt + s.output; }
  bool ensure_blocks(Seq& s, std::int32_t tokens);
  void preempt(SeqHandle h);
  bool try_admit(SeqHandle h, std::int32_t* budget);
  // Admits waiting sequences FIFO while budget, run slots and KV allow.
  void admit_waiting(std::int32_t* budget);
  // Prices the batch and publishes the plan's events.
  const StepPlan* finish_plan();
  bool admit_loading(SeqHandle h, std::int32_t hits, std::int32_t loaded);
  void free_blocks(Seq& s);
  void push_waiting_front(SeqHandle h);
  void publish_full_blocks(Seq& s, bool offload);
  void remove_waiting(SeqHandle h);

  SchedulerConfig config_;
  CostModel cost_;
  KvBlockPool pool_;

  std::vector<Seq> seqs_;              // slot table
  std::vector<SeqHandle> free_slots_;  // stack
  // Waiting queue: ring buffer of handles.
  std::vector<SeqHandle> waiting_;
  std::int32_t waiting_head_ = 0;
  std::int32_t waiting_count_ = 0;
  std::int32_t deferred_count_ = 0;   // waiting sequences with Seq::deferred (at the queue's tail)
  std::vector<SeqHandle> running_;    // admission order; newest at the back
  std::vector<SeqHandle> scheduled_;  // of the pending step
  std::int32_t num_pulling_ = 0;
  std::int32_t num_loading_ = 0;
  KvTierHook* tier_hook_ = nullptr;
  std::vector<KvTier> tier_scratch_;  // tiers of a lookup's hits; one entry per pool block
  std::int32_t num_held_ = 0;
  bool plan_pending_ = false;
  StepPlan plan_;
  std::vector<SchedEvent> plan_events_;
  std::vector<SchedEvent> done_events_;
  std::vector<SeqHandle> scratch_;  // running list rebuild
  std::vector<BlockHash> empty_hashes_;
  SchedulerStats stats_;
};

}  // namespace disagg
