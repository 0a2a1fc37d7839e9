#include "disagg/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

namespace disagg {

std::string_view to_string(WorkerRole role) {
  switch (role) {
    case WorkerRole::aggregated: return "aggregated";
    case WorkerRole::prefill: return "prefill";
    case WorkerRole::decode: return "decode";
  }
  return "unknown";
}

std::string_view to_string(RequestKind kind) {
  switch (kind) {
    case RequestKind::full: return "full";
    case RequestKind::prefill_only: return "prefill_only";
    case RequestKind::remote_kv: return "remote_kv";
  }
  return "unknown";
}

std::string_view to_string(SchedErrc code) {
  switch (code) {
    case SchedErrc::invalid_config: return "invalid_config";
    case SchedErrc::queue_full: return "queue_full";
    case SchedErrc::wrong_role: return "wrong_role";
    case SchedErrc::invalid_request: return "invalid_request";
    case SchedErrc::too_long: return "too_long";
    case SchedErrc::not_found: return "not_found";
    case SchedErrc::step_pending: return "step_pending";
  }
  return "unknown";
}

std::string_view to_string(SchedEventKind kind) {
  switch (kind) {
    case SchedEventKind::admitted: return "admitted";
    case SchedEventKind::preempted: return "preempted";
    case SchedEventKind::kv_pull: return "kv_pull";
    case SchedEventKind::tier_load: return "tier_load";
    case SchedEventKind::first_token: return "first_token";
    case SchedEventKind::token: return "token";
    case SchedEventKind::finished: return "finished";
  }
  return "unknown";
}

Expected<Scheduler, SchedErrc> Scheduler::create(const SchedulerConfig& config, const CostModel& cost_model) {
  if (config.max_num_seqs < 1 || config.max_num_batched_tokens < 1 || config.max_waiting < 1 || config.num_blocks < 1 ||
      config.block_size < 1) {
    return unexpected(SchedErrc::invalid_config);
  }
  auto pool = KvBlockPool::create(config.num_blocks, config.block_size);
  if (!pool) return unexpected(SchedErrc::invalid_config);
  return Scheduler(config, cost_model, std::move(*pool));
}

Scheduler::Scheduler(const SchedulerConfig& config, const CostModel& cost, KvBlockPool pool)
    : config_(config), cost_(cost), pool_(std::move(pool)) {
  // Slots: waiting + running + held (held ones are bounded by refusing submits when no slot is free).
  const std::size_t slots =
      static_cast<std::size_t>(config.max_waiting) + 2 * static_cast<std::size_t>(config.max_num_seqs);
  seqs_.resize(slots);
  free_slots_.reserve(slots);
  for (std::size_t i = slots; i-- > 0;) free_slots_.push_back(static_cast<SeqHandle>(i));
  // Preempted sequences return to the waiting queue beyond max_waiting.
  waiting_.resize(static_cast<std::size_t>(config.max_waiting + config.max_num_seqs));
  running_.reserve(static_cast<std::size_t>(config.max_num_seqs));
  scheduled_.reserve(static_cast<std::size_t>(config.max_num_seqs));
  scratch_.reserve(static_cast<std::size_t>(config.max_num_seqs));
  // Per step at most: per admitted sequence an admission and a pull or up to three tier loads; or
  // one preemption per running sequence (never both in one step).
  plan_events_.reserve(4 * static_cast<std::size_t>(config.max_num_seqs));
  done_events_.reserve(2 * static_cast<std::size_t>(config.max_num_seqs));
}

Expected<SeqHandle, SchedErrc> Scheduler::submit(const SchedRequest& r) {
  if (r.prompt_tokens < 1 || (r.kind != RequestKind::prefill_only && r.output_tokens < 1)) {
    return unexpected(SchedErrc::invalid_request);
  }
  const bool accepted = r.kind == RequestKind::full ||
                        (r.kind == RequestKind::prefill_only && config_.role == WorkerRole::prefill) ||
                        (r.kind == RequestKind::remote_kv && config_.role == WorkerRole::decode);
  if (!accepted) return unexpected(SchedErrc::wrong_role);
  const std::int32_t output = r.kind == RequestKind::prefill_only ? 1 : r.output_tokens;
  // The last sampled token's KV is never computed, so the sequence needs prompt + output - 1 slots.
  const std::int64_t tokens = static_cast<std::int64_t>(r.prompt_tokens) + output - 1;
  if (pool_.blocks_for_tokens(std::max<std::int64_t>(tokens, 1)) > pool_.total_blocks()) {
    return unexpected(SchedErrc::too_long);
  }
  if (waiting_count_ >= config_.max_waiting || free_slots_.empty()) { return unexpected(SchedErrc::queue_full); }
  const SeqHandle h = free_slots_.back();
  free_slots_.pop_back();
  Seq& s = seqs_[static_cast<std::size_t>(h)];
  s.id = r.id;
  s.hashes = config_.enable_prefix_caching ? r.block_hashes : std::span<const BlockHash>();
  s.prompt = r.prompt_tokens;
  s.max_output = output;
  s.output = 0;
  s.computed = 0;
  s.published = 0;
  s.shared = std::max<std::int32_t>(r.shared_blocks, 0);
  s.scheduled = 0;
  s.loading = 0;
  s.preemptions = 0;
  s.kind = r.kind;
  s.state = SeqState::waiting;
  s.queried = false;
  s.deferred = config_.async_scheduling && plan_pending_;
  if (s.deferred) ++deferred_count_;
  s.blocks.clear();
  const std::size_t cap = waiting_.size();
  waiting_[(static_cast<std::size_t>(waiting_head_) + static_cast<std::size_t>(waiting_count_)) % cap] = h;
  ++waiting_count_;
  return h;
}

void Scheduler::push_waiting_front(SeqHandle h) {
  const std::int32_t cap = static_cast<std::int32_t>(waiting_.size());
  waiting_head_ = (waiting_head_ + cap - 1) % cap;
  waiting_[static_cast<std::size_t>(waiting_head_)] = h;
  ++waiting_count_;
}

void Scheduler::free_blocks(Seq& s) {
  if (!s.blocks.empty()) {
    auto released = pool_.release(s.blocks);
    (void)released;  // cannot fail: the table holds exactly one reference per listed block
  }
  s.blocks.clear();
}

bool Scheduler::ensure_blocks(Seq& s, std::int32_t tokens) {
  const std::int32_t need = pool_.blocks_for_tokens(tokens);
  const std::int32_t have = static_cast<std::int32_t>(s.blocks.size());
  if (need <= have) return true;
  const PoolPlan p = pool_.plan({}, need - have);
  if (!p.fits) return false;
  s.blocks.resize(static_cast<std::size_t>(need));
  auto done = pool_.commit(p, {}, std::span<BlockId>(s.blocks).subspan(static_cast<std::size_t>(have)));
  if (!done) {
    s.blocks.resize(static_cast<std::size_t>(have));
    return false;
  }
  return true;
}

void Scheduler::preempt(SeqHandle h) {
  Seq& s = seqs_[static_cast<std::size_t>(h)];
  plan_events_.push_back({SchedEventKind::preempted, h, s.id, s.computed});
  // Its private blocks must be findable when it comes back for them (nobody else can use them).
  if (s.published > s.shared) {
    pool_.index_private(std::span<const BlockId>(s.blocks).subspan(static_cast<std::size_t>(s.shared),
                                                                   static_cast<std::size_t>(s.published - s.shared)));
  }
  free_blocks(s);
  s.computed = 0;
  s.published = 0;
  s.scheduled = 0;
  ++s.preemptions;
  // Its KV is gone: a remote_kv sequence now recomputes its prompt here.
  if (s.kind == RequestKind::remote_kv) s.kind = RequestKind::full;
  s.state = SeqState::waiting;
  push_waiting_front(h);
  ++stats_.preemptions;
}

bool Scheduler::try_admit(SeqHandle h, std::int32_t* budget) {
  Seq& s = seqs_[static_cast<std::size_t>(h)];
  const std::int32_t bs = config_.block_size;
  const std::int32_t known = known_tokens(s);
  // At least one token is always computed, so that the step samples the next one.
  const std::size_t max_hits = static_cast<std::size_t>((known - 1) / bs);
  const std::span<const BlockHash> lookup = s.hashes.first(std::min(s.hashes.size(), max_hits));
  const std::int32_t hits = pool_.match_prefix(lookup);
  const std::int32_t hit_tokens = hits * bs;
  // Lower tiers continue the GPU prefix; a remote_kv prompt comes from its prefill worker instead.
  if (tier_hook_ != nullptr && s.kind != RequestKind::remote_kv && static_cast<std::size_t>(hits) < lookup.size()) {
    const std::int32_t loaded = tier_hook_->lookup(lookup.subspan(static_cast<std::size_t>(hits)), tier_scratch_);
    if (loaded > 0) return admit_loading(h, hits, loaded);
  }
  std::int32_t new_tokens = s.kind == RequestKind::remote_kv ? 0 : std::min(known - hit_tokens, *budget);
  if (!config_.chunked_prefill && s.kind != RequestKind::remote_kv && new_tokens < known - hit_tokens) {
    // Whole prompts only: one that does not fit waits for the next step, unless it is the step's first.
    if (*budget < config_.max_num_batched_tokens) return false;
    new_tokens = known - hit_tokens;
  }
  const std::int32_t blocks_total = s.kind == RequestKind::remote_kv ? pool_.blocks_for_tokens(s.prompt)
                                                                     : pool_.blocks_for_tokens(hit_tokens + new_tokens);
  const std::span<const BlockHash> hit_hashes = lookup.first(static_cast<std::size_t>(hits));
  const PoolPlan p = pool_.plan(hit_hashes, blocks_total);
  if (!p.fits) return false;
  s.blocks.resize(static_cast<std::size_t>(blocks_total));
  auto done = pool_.commit(p, hit_hashes, s.blocks);
  if (!done) {
    s.blocks.clear();
    return false;
  }
  if (!s.queried) {
    s.queried = true;
    stats_.prompt_tokens_queried += s.prompt;
    stats_.prompt_tokens_hit += std::min(hit_tokens, s.prompt);
  }
  s.published = hits;
  plan_events_.push_back({SchedEventKind::admitted, h, s.id, hit_tokens});
  if (s.kind == RequestKind::remote_kv) {
    s.computed = s.prompt - 1;
    s.state = SeqState::pulling;
    ++num_pulling_;
    plan_events_.push_back({SchedEventKind::kv_pull, h, s.id, s.prompt - hit_tokens});
    return true;
  }
  s.computed = hit_tokens;
  s.scheduled = new_tokens;
  *budget = std::max(0, *budget - new_tokens);
  s.state = SeqState::running;
  running_.push_back(h);
  scheduled_.push_back(h);
  plan_.batch.add_prefill_chunk(new_tokens, s.computed);
  return true;
}

Expected<const StepPlan*, SchedErrc> Scheduler::next_step() {
  if (plan_pending_) return unexpected(SchedErrc::step_pending);
  plan_pending_ = true;
  plan_ = StepPlan{};
  plan_events_.clear();
  scheduled_.clear();
  std::int32_t budget = config_.max_num_batched_tokens;
  bool preempted = false;

  // 0. Without chunked prefill, prompts first; a step that starts one runs prompts only.
  if (!config_.chunked_prefill) {
    admit_waiting(&budget);
    if (!scheduled_.empty()) return finish_plan();
  }

  // 1. Running sequences, oldest first; victims of preemption are taken from the back.
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    const SeqHandle h = running_[i];
    Seq& s = seqs_[static_cast<std::size_t>(h)];
    const std::int32_t want = std::min(known_tokens(s) - s.computed, budget);
    bool self_preempted = false;
    while (!ensure_blocks(s, s.computed + want)) {
      const SeqHandle victim = running_.back();
      running_.pop_back();
      preempt(victim);
      preempted = true;
      if (victim == h) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    s.scheduled = want;
    budget -= want;
    scheduled_.push_back(h);
    const bool decoding =
        want == 1 && s.computed + 1 == known_tokens(s) && (s.output > 0 || s.kind == RequestKind::remote_kv);
    if (decoding) {
      plan_.batch.add_decodes(1, s.computed);
    } else {
      plan_.batch.add_prefill_chunk(want, s.computed);
    }
  }

  // 2. Admissions, FIFO, only when this step preempted nothing (as vLLM v1 does).
  if (!preempted && config_.chunked_prefill) admit_waiting(&budget);
  return finish_plan();
}

void Scheduler::admit_waiting(std::int32_t* budget) {
  // Async scheduling: sequences submitted during the last step wait one more plan, unless this
  // plan has nothing else to run (see SchedulerConfig::async_scheduling).
  const bool hold_deferred = deferred_count_ > 0 && !scheduled_.empty();
  while (waiting_count_ > 0 && *budget > 0 && num_running() < config_.max_num_seqs) {
    const SeqHandle h = waiting_[static_cast<std::size_t>(waiting_head_)];
    if (hold_deferred && seqs_[static_cast<std::size_t>(h)].deferred) break;
    if (!try_admit(h, budget)) break;
    seqs_[static_cast<std::size_t>(h)].deferred = false;
    waiting_head_ = (waiting_head_ + 1) % static_cast<std::int32_t>(waiting_.size());
    --waiting_count_;
  }
}

const StepPlan* Scheduler::finish_plan() {
  // The deferred sequences have now missed one plan; the next one may admit them.
  if (deferred_count_ > 0) {
    const std::size_t cap = waiting_.size();
    for (std::int32_t i = 0; i < waiting_count_; ++i) {
      seqs_[static_cast<std::size_t>(waiting_[(static_cast<std::size_t>(waiting_head_ + i)) % cap])].deferred = false;
    }
    deferred_count_ = 0;
  }
  plan_.num_scheduled = static_cast<std::int32_t>(scheduled_.size());
  plan_.seconds = plan_.empty() ? 0.0 : cost_.step_time(plan_.batch).total_seconds;
  plan_.events = plan_events_;
  return &plan_;
}

void Scheduler::publish_full_blocks(Seq& s, bool offload) {
  const std::size_t full =
      std::min({static_cast<std::size_t>(s.computed / config_.block_size), s.hashes.size(), s.blocks.size()});
  const std::size_t first = static_cast<std::size_t>(s.published);
  for (std::size_t i = first; i < full; ++i) {
    // false (another block holds this hash) is fine: this block then frees as empty.
    auto r = pool_.publish(s.blocks[i], s.hashes[i], i < static_cast<std::size_t>(s.shared));
    (void)r;
  }
  if (full <= first) return;
  s.published = static_cast<std::int32_t>(full);
  // Write-through: the blocks this worker computed go to its lower tiers too.
  if (offload && tier_hook_ != nullptr) {
    const std::int32_t shared = std::clamp<std::int32_t>(s.shared - static_cast<std::int32_t>(first), 0,
                                                         static_cast<std::int32_t>(full - first));
    tier_hook_->offload(s.hashes.subspan(first, full - first), shared);
  }
}

void Scheduler::set_tier_hook(KvTierHook* hook) {
  tier_hook_ = hook;
  if (hook != nullptr) tier_scratch_.assign(static_cast<std::size_t>(pool_.total_blocks()), KvTier::gpu);
}

bool Scheduler::admit_loading(SeqHandle h, std::int32_t hits, std::int32_t loaded) {
  Seq& s = seqs_[static_cast<std::size_t>(h)];
  const std::int32_t bs = config_.block_size;
  // Blocks for the GPU hits and the loaded ones only: the rest is computed after the load.
  const std::span<const BlockHash> hit_hashes = s.hashes.first(static_cast<std::size_t>(hits));
  const std::int32_t blocks_total = hits + loaded;
  const PoolPlan p = pool_.plan(hit_hashes, blocks_total);
  if (!p.fits) return false;
  s.blocks.resize(static_cast<std::size_t>(blocks_total));
  auto done = pool_.commit(p, hit_hashes, s.blocks);
  if (!done) {
    s.blocks.clear();
    return false;
  }
  const std::int32_t hit_tokens = hits * bs;
  if (!s.queried) {
    s.queried = true;
    stats_.prompt_tokens_queried += s.prompt;
    stats_.prompt_tokens_hit += std::min(hit_tokens, s.prompt);
    stats_.prompt_tokens_loaded += std::min(loaded * bs, s.prompt - std::min(hit_tokens, s.prompt));
  }
  s.published = hits;
  s.computed = hit_tokens;
  s.loading = loaded;
  s.state = SeqState::loading;
  ++num_loading_;
  plan_events_.push_back({SchedEventKind::admitted, h, s.id, hit_tokens});
  std::int32_t per_tier[kKvTierCount] = {};
  for (std::int32_t i = 0; i < loaded; ++i) ++per_tier[static_cast<int>(tier_scratch_[static_cast<std::size_t>(i)])];
  for (int t = 1; t < kKvTierCount; ++t) {
    if (per_tier[t] > 0) {
      plan_events_.push_back({SchedEventKind::tier_load, h, s.id, per_tier[t] * bs, static_cast<KvTier>(t)});
    }
  }
  return true;
}

Expected<std::span<const SchedEvent>, SchedErrc> Scheduler::complete_step() {
  if (!plan_pending_) return unexpected(SchedErrc::step_pending);
  plan_pending_ = false;
  done_events_.clear();
  if (!plan_.empty()) ++stats_.steps;
  bool any_finished = false;
  for (const SeqHandle h : scheduled_) {
    Seq& s = seqs_[static_cast<std::size_t>(h)];
    const bool decoding =
        s.scheduled == 1 && s.computed + 1 == known_tokens(s) && (s.output > 0 || s.kind == RequestKind::remote_kv);
    (decoding ? stats_.decode_tokens : stats_.prefill_tokens) += s.scheduled;
    s.computed += s.scheduled;
    s.scheduled = 0;
    publish_full_blocks(s, true);
    if (s.computed < known_tokens(s)) continue;  // a prefill chunk that is not the last one
    ++s.output;
    done_events_.push_back({s.output == 1 ? SchedEventKind::first_token : SchedEventKind::token, h, s.id, s.output});
    if (s.output < s.max_output) continue;
    done_events_.push_back({SchedEventKind::finished, h, s.id, s.output});
    any_finished = true;
    ++stats_.finished;
    if (s.kind == RequestKind::prefill_only) {
      s.state = SeqState::held;
      ++num_held_;
    } else {
      free_blocks(s);
      s.state = SeqState::free;
      s.hashes = {};
      free_slots_.push_back(h);
    }
  }
  if (any_finished) {
    scratch_.clear();
    for (const SeqHandle h : running_) {
      if (seqs_[static_cast<std::size_t>(h)].state == SeqState::running) scratch_.push_back(h);
    }
    running_.swap(scratch_);
  }
  scheduled_.clear();
  return std::span<const SchedEvent>(done_events_);
}

Expected<void, SchedErrc> Scheduler::remote_kv_ready(SeqHandle h) {
  if (h < 0 || static_cast<std::size_t>(h) >= seqs_.size()) return unexpected(SchedErrc::not_found);
  Seq& s = seqs_[static_cast<std::size_t>(h)];
  if (s.state != SeqState::pulling) return unexpected(SchedErrc::not_found);
  s.state = SeqState::running;
  --num_pulling_;
  running_.push_back(h);
  // Pulled blocks were computed (and offloaded) by the prefill worker.
  publish_full_blocks(s, false);
  return {};
}

Expected<void, SchedErrc> Scheduler::tier_load_ready(SeqHandle h) {
  if (h < 0 || static_cast<std::size_t>(h) >= seqs_.size()) return unexpected(SchedErrc::not_found);
  Seq& s = seqs_[static_cast<std::size_t>(h)];
  if (s.state != SeqState::loading) return unexpected(SchedErrc::not_found);
  s.computed = (s.published + s.loading) * config_.block_size;
  s.loading = 0;
  s.state = SeqState::running;
  --num_loading_;
  running_.push_back(h);
  // GPU-cached again; the tiers already hold these blocks.
  publish_full_blocks(s, false);
  return {};
}

Expected<void, SchedErrc> Scheduler::release_held(SeqHandle h) {
  if (h < 0 || static_cast<std::size_t>(h) >= seqs_.size()) return unexpected(SchedErrc::not_found);
  Seq& s = seqs_[static_cast<std::size_t>(h)];
  if (s.state != SeqState::held) return unexpected(SchedErrc::not_found);
  free_blocks(s);
  s.state = SeqState::free;
  s.hashes = {};
  --num_held_;
  free_slots_.push_back(h);
  return {};
}

void Scheduler::remove_waiting(SeqHandle h) {
  // Close the gap in the ring buffer, keeping FIFO order.
  const std::size_t cap = waiting_.size();
  const std::size_t head = static_cast<std::size_t>(waiting_head_);
  const std::size_t count = static_cast<std::size_t>(waiting_count_);
  std::size_t i = 0;
  while (i < count && waiting_[(head + i) % cap] != h) ++i;
  if (i == count) return;
  for (; i + 1 < count; ++i) waiting_[(head + i) % cap] = waiting_[(head + i + 1) % cap];
  --waiting_count_;
}

Expected<void, SchedErrc> Scheduler::abort(SeqHandle h) {
  if (h < 0 || static_cast<std::size_t>(h) >= seqs_.size()) return unexpected(SchedErrc::not_found);
  Seq& s = seqs_[static_cast<std::size_t>(h)];
  switch (s.state) {
    case SeqState::free: return unexpected(SchedErrc::not_found);
    case SeqState::held: return release_held(h);  // it finished: only its blocks are left
    case SeqState::waiting:
      remove_waiting(h);
      if (s.deferred) --deferred_count_;
      s.deferred = false;
      break;
    case SeqState::pulling: --num_pulling_; break;
    case SeqState::loading: --num_loading_; break;
    case SeqState::running:
      running_.erase(std::find(running_.begin(), running_.end(), h));
      // Out of the pending plan too, so complete_step() neither advances nor reports it.
      if (auto it = std::find(scheduled_.begin(), scheduled_.end(), h); it != scheduled_.end()) {
        scheduled_.erase(it);
      }
      break;
  }
  free_blocks(s);
  s.scheduled = 0;
  s.loading = 0;
  s.state = SeqState::free;
  s.hashes = {};
  free_slots_.push_back(h);
  ++stats_.aborted;
  return {};
}

bool Scheduler::has_work() const {
  return !running_.empty() || (waiting_count_ > 0 && num_running() < config_.max_num_seqs);
}

Expected<void, std::string> Scheduler::check_invariants() const {
  if (auto pool_ok = pool_.check_invariants(); !pool_ok) return unexpected(pool_ok.error());
  std::vector<std::int32_t> refs(static_cast<std::size_t>(pool_.total_blocks()), 0);
  std::int32_t running = 0, waiting = 0, pulling = 0, loading = 0, held = 0;
  for (std::size_t h = 0; h < seqs_.size(); ++h) {
    const Seq& s = seqs_[h];
    switch (s.state) {
      case SeqState::free: continue;
      case SeqState::waiting: ++waiting; break;
      case SeqState::running: ++running; break;
      case SeqState::pulling: ++pulling; break;
      case SeqState::loading: ++loading; break;
      case SeqState::held: ++held; break;
    }
    if (s.state == SeqState::waiting && !s.blocks.empty()) {
      return unexpected("waiting sequence " + std::to_string(h) + " holds blocks");
    }
    if (s.state != SeqState::waiting &&
        static_cast<std::int32_t>(s.blocks.size()) < pool_.blocks_for_tokens(s.computed)) {
      return unexpected("sequence " + std::to_string(h) + " computed " + std::to_string(s.computed) + " tokens in " +
                        std::to_string(s.blocks.size()) + " blocks");
    }
    for (const BlockId b : s.blocks) ++refs[static_cast<std::size_t>(b)];
  }
  for (std::int32_t b = 0; b < pool_.total_blocks(); ++b) {
    if (refs[static_cast<std::size_t>(b)] != pool_.ref_count(b)) {
      return unexpected("block " + std::to_string(b) + " has ref count " + std::to_string(pool_.ref_count(b)) +
                        " but " + std::to_string(refs[static_cast<std::size_t>(b)]) + " block-table entries");
    }
  }
  if (running != static_cast<std::int32_t>(running_.size()) || pulling != num_pulling_ || loading != num_loading_ ||
      waiting != waiting_count_ || held != num_held_) {
    return unexpected(std::string("state counts disagree with the queues"));
  }
  if (num_running() > config_.max_num_seqs) return unexpected(std::string("too many running"));
  return {};
}

}  // namespace disagg
