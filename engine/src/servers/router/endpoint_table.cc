// endpoint_table.cc — endpoint slots, the KV-event sink, the decision and the leg accounting
// (endpoint_table.h).
#include "endpoint_table.h"

#include <algorithm>
#include <bit>
#include <mutex>
#include <utility>

#include <nlohmann/json.hpp>

namespace disagg::router {

namespace {

// An endpoint's name in logs, metrics and peer snapshots: host:port, [v6]:port.
std::string label_of(const EndpointSpec& spec) {
  return (spec.host.find(':') != std::string::npos ? "[" + spec.host + "]" : spec.host) + ":" +
         std::to_string(spec.port);
}

}  // namespace

Expected<std::unique_ptr<EndpointTable>, std::string> EndpointTable::create(const RouterConfig& c,
                                                                            RouterMetrics& metrics) {
  std::unique_ptr<EndpointTable> t(new EndpointTable(metrics, HealthPolicy{c.eject_after, c.eject_ms}));

  // Roles: P/D when any decode endpoint or pool is configured.
  bool any_events = false, any_aggregated = false;
  auto note_role = [&](EndpointRole r) {
    if (r == EndpointRole::decode) t->pd_mode_ = true;
    if (r == EndpointRole::prefill) t->need_prefill_ = true;
    if (r == EndpointRole::aggregated) any_aggregated = true;
  };
  for (const EndpointSpec& e : c.endpoints) {
    note_role(e.role);
    any_events = any_events || !e.kv_events.empty();
  }
  for (const DnsPoolSpec& p : c.dns_pools) {
    note_role(p.role);
    any_events = any_events || p.kv_events_port != 0;
  }
  if (t->need_prefill_ && !t->pd_mode_) {
    return unexpected(
        std::string("prefill endpoints need decode endpoints to hand their KV to; add a decode pool or endpoint"));
  }
  if (t->pd_mode_ && any_aggregated) {
    log_line("warning: aggregated endpoints are ignored while decode endpoints exist (P/D mode)");
  }

  // Index and planner.
  const bool precise = c.precise_prefix.value_or(any_events);
  t->precise_ = precise;
  if (any_events || precise) {
    KvIndexConfig ic;
    ic.max_endpoints = kMaxRoutingEndpoints;
    ic.max_entries = c.index_entries;
    ic.max_entries_per_endpoint = c.index_entries_per_endpoint;
    auto idx = KvBlockIndex::create(ic);
    if (!idx) {
      return unexpected("'--index-entries' (" + std::to_string(c.index_entries) +
                        ") refused by the KV block index: " + std::string(to_string(idx.error())));
    }
    t->index_.emplace(std::move(*idx));
    // Router keys remembered per endpoint (so at most as many publisher hashes): as many as its
    // share of index entries, about 40 bytes each, allocated at the endpoint's first stored event.
    const std::int64_t share = c.index_entries_per_endpoint > 0 ? c.index_entries_per_endpoint : c.index_entries / 4;
    t->keyer_capacity_ = static_cast<std::size_t>(std::max<std::int64_t>(4096, share));
    t->block_size_ = c.block_size;
  }
  PolicyOptions options = c.options;
  if (precise) {
    // maxEndpoints sizes only an approximate history, which "sglang" keeps even here.
    options.index = &*t->index_;
  } else if (!c.max_endpoints_given && c.dns_pools.empty()) {
    // Only the static endpoints can ever be routed to: the history's block pool is sized for them
    // (less memory, and a table that stays in cache: about 1.5 us less router user time per
    // request at concurrency 32 with 2 endpoints, bench/notes/router-overhead.md).
    options.max_endpoints = std::clamp(static_cast<int>(c.endpoints.size()), 1, kMaxRoutingEndpoints);
  }
  RoutePlanConfig rc;
  rc.disaggregated = t->pd_mode_;
  rc.decider = c.decider;
  rc.session_affinity = !c.session_header.empty();
  auto planner = RoutePlanner::create(c.policy, options, rc);
  if (!planner) return unexpected("policy '" + c.policy + "': " + planner.error().message);
  t->planner_.emplace(std::move(*planner));
  if (!precise && routing_policy_reads_prefixes(c.policy)) {
    log_line("prefix history: " + std::to_string(options.history_blocks_per_endpoint * options.max_endpoints) +
             " blocks, sized for " + std::to_string(options.max_endpoints) +
             (options.max_endpoints == 1 ? " endpoint" : " endpoints") + " (at most " +
             std::to_string(options.history_blocks_per_endpoint) + " each)");
  }
  return t;
}

// ---- endpoints --------------------------------------------------------------------------------

int EndpointTable::add(const EndpointSpec& spec, bool from_dns, const std::string& topic) {
  std::lock_guard lock(mu_);
  for (int id = 0; id < kMaxRoutingEndpoints; ++id) {
    EndpointSlot& s = slots_[static_cast<std::size_t>(id)];
    if (s.present || s.inflight.load() != 0) continue;
    s.present = true;
    present_ids_ |= std::uint64_t{1} << id;
    ++s.generation;
    s.spec = spec;
    s.from_dns = from_dns;
    s.data_parallel_rank = spec.data_parallel_rank;
    s.rank_mismatch_logged = false;
    s.label = label_of(spec);
    s.reset_live();
    if (index_) index_->clear(static_cast<EndpointId>(id));
    reset_keyers(static_cast<EndpointId>(id));
    publisher_keyed_ids_ &= ~(std::uint64_t{1} << id);
    kv_seq_[static_cast<std::size_t>(id)] = -1;
    const std::int64_t resume_seq = spec.kv_events.empty() ? -1 : load_peer_entry(static_cast<EndpointId>(id));
    if (hooks_.added) hooks_.added(static_cast<EndpointId>(id), s, topic, resume_seq);
    log_line("endpoint " + s.label + " added (pool " + spec.pool + ", role " + std::string(to_string(spec.role)) +
             (spec.kv_events.empty() ? "" : ", kv events " + spec.kv_events) + ")");
    return id;
  }
  log_line("endpoint " + spec.host + ":" + std::to_string(spec.port) + " not added: all " +
           std::to_string(kMaxRoutingEndpoints) + " endpoint slots are in use");
  return -1;
}

void EndpointTable::remove(int id) {
  EndpointSlot& s = slots_[static_cast<std::size_t>(id)];
  if (!s.present) return;
  s.present = false;
  present_ids_ &= ~(std::uint64_t{1} << id);
  if (index_) index_->clear(static_cast<EndpointId>(id));
  reset_keyers(static_cast<EndpointId>(id));
  publisher_keyed_ids_ &= ~(std::uint64_t{1} << id);
  if (hooks_.removed) hooks_.removed(static_cast<EndpointId>(id), s);
  log_line("endpoint " + s.label + " removed (no longer in DNS)");
}

void EndpointTable::sync_dns_pool(const DnsPoolSpec& pool, const std::set<std::string>& addresses) {
  // One endpoint per address x port (a pod serving one vLLM API server per local data-parallel
  // rank lists every rank's port); the pool's ports never change, so only addresses come and go.
  std::set<std::pair<std::string, std::uint16_t>> have;
  std::vector<EndpointSpec> fresh;
  {
    std::lock_guard lock(mu_);
    for (int id = 0; id < kMaxRoutingEndpoints; ++id) {
      EndpointSlot& s = slots_[static_cast<std::size_t>(id)];
      if (!s.present || !s.from_dns || s.spec.pool != pool.pool) continue;
      if (addresses.count(s.spec.host) == 0) remove(id);
      else have.emplace(s.spec.host, s.spec.port);
    }
  }
  for (const std::string& ip : addresses) {
    for (std::size_t j = 0; j < pool.ports.size(); ++j) {
      if (have.count({ip, pool.ports[j]}) != 0) continue;
      EndpointSpec e;
      e.pool = pool.pool;
      e.role = pool.role;
      e.host = ip;
      e.port = pool.ports[j];
      // vLLM offsets each rank's KV-event port by its rank (dns_kv_events_port, router_config.h).
      if (const std::uint16_t kv = dns_kv_events_port(pool, j); kv != 0) {
        const std::string h = ip.find(':') != std::string::npos ? "[" + ip + "]" : ip;
        e.kv_events = "tcp://" + h + ":" + std::to_string(kv);
        if (pool.kv_replay_port != 0) e.kv_replay = "tcp://" + h + ":" + std::to_string(pool.kv_replay_port + j);
      }
      fresh.push_back(std::move(e));
    }
  }
  late_peer_load(fresh);
  for (const EndpointSpec& e : fresh) add(e, true, pool.topic_prefix);
}

// ---- KV events --------------------------------------------------------------------------------

BlockKeyer& EndpointTable::keyer(EndpointId id, KvTier tier) {
  auto& k = keyers_[id][static_cast<std::size_t>(tier)];
  if (!k) k = std::make_unique<BlockKeyer>(block_size_, keyer_capacity_);
  return *k;
}

void EndpointTable::on_kv_batch(EndpointId id, std::uint32_t generation, const KvEventBatch& batch) {
  std::lock_guard lock(mu_);
  const EndpointSlot& s = slots_[id];
  if (!index_ || !s.present || s.generation != generation) return;
  if (!rank_matches(id, batch.data_parallel_rank)) return;
  if (batch.seq >= 0) kv_seq_[id] = batch.seq;
  thread_local std::vector<BlockHash> keys, unknown;  // the subscriber's thread
  for (const KvEventRecord& e : batch.events) {
    switch (e.type) {
      case KvEventType::block_stored: {
        keys.clear();
        BlockKeyer& k = keyer(id, e.tier);
        // A lower tier's copy leans on the GPU translations (block_keyer.h); the GPU table is only read.
        const BlockKeyer* gpu = e.tier == KvTier::gpu ? nullptr : find_keyer(id, KvTier::gpu);
        const BlockKeyer::Skip skip = k.stored(e, batch.hashes_of(e), batch.tokens_of(e), keys, gpu);
        if (skip == BlockKeyer::Skip::none) {
          keyed_blocks_ += e.hash_count;
          (void)index_->apply_stored(id, e.tier, keys);
          break;
        }
        std::span<const BlockHash> publisher = batch.hashes_of(e);
        if (skip == BlockKeyer::Skip::no_tokens && gpu != nullptr && !e.keyed_beyond_tokens) {
          // vLLM's OffloadingConnector by default: the GPU block's hash, no token ids.
          unknown.clear();
          k.copy_from(*gpu, publisher, keys, unknown);
          keyed_blocks_ += publisher.size() - unknown.size();
          if (!keys.empty()) (void)index_->apply_stored(id, e.tier, keys);
          publisher = unknown;
        }
        unkeyed_blocks_[static_cast<std::size_t>(skip)] += publisher.size();
        // Without token ids the publisher's own hashes are the keys (they match the router's
        // only where the publisher hashes as the router does).
        if (skip == BlockKeyer::Skip::no_tokens && !publisher.empty()) {
          (void)index_->apply_stored(id, e.tier, publisher);
          publisher_keyed_ids_ |= std::uint64_t{1} << id;
        }
        break;
      }
      case KvEventType::block_removed:
        keys.clear();
        if (BlockKeyer* k = keyers_[id][static_cast<std::size_t>(e.tier)].get())
          k->removed(batch.hashes_of(e), e.group, keys);
        if (!keys.empty()) (void)index_->apply_removed(id, e.tier, keys);
        // Entries stored as the publisher's hashes, if this endpoint ever stored any.
        if ((publisher_keyed_ids_ >> id) & 1U) (void)index_->apply_removed(id, e.tier, batch.hashes_of(e));
        break;
      // vLLM emits it when its GPU prefix cache is reset (BlockPool.reset_prefix_cache,
      // vllm/v1/core/block_pool.py); copies offloaded to CPU or storage stay where they are, and
      // so do the keyer's translations of them.
      case KvEventType::all_blocks_cleared: index_->clear(id, KvTier::gpu); break;
    }
  }
}

// vLLM's publisher of data-parallel rank r binds the configured port + r and stamps every batch
// with r (vllm/distributed/kv_events.py: offset_endpoint_port, KVEventBatch.data_parallel_rank), so
// one socket carries one rank's cache. A batch without the field (older vLLM, no data parallelism)
// is taken as the endpoint's. A batch naming another rank than the one configured for the endpoint
// describes another engine's cache (ports crossed): it is dropped, counted and logged once. On a
// DNS endpoint the rank is learned from its first batch; a later change means another engine now
// publishes there (a rank restarted elsewhere), so the old rank's entries are cleared first.
bool EndpointTable::rank_matches(EndpointId id, std::int32_t rank) {
  EndpointSlot& s = slots_[id];
  if (rank < 0 || rank == s.data_parallel_rank) return true;
  if (s.data_parallel_rank < 0) {
    s.data_parallel_rank = rank;
    return true;
  }
  ++rank_mismatch_batches_;
  if (s.spec.data_parallel_rank >= 0) {
    if (!s.rank_mismatch_logged) {
      s.rank_mismatch_logged = true;
      log_line("KV events of " + s.label + " name data-parallel rank " + std::to_string(rank) + ", not its rank " +
               std::to_string(s.spec.data_parallel_rank) +
               ": dropped (another rank's cache; check its kvEventsEndpoint = the rank's KV-event port + rank)");
    }
    return false;
  }
  const std::int64_t dropped = index_->clear(id);
  reset_keyers(id);
  publisher_keyed_ids_ &= ~(std::uint64_t{1} << id);
  log_line("KV events of " + s.label + " now name data-parallel rank " + std::to_string(rank) + " (was " +
           std::to_string(s.data_parallel_rank) +
           "): another engine publishes there; its entries cleared: " + std::to_string(dropped));
  s.data_parallel_rank = rank;
  return true;
}

void EndpointTable::on_kv_clear(EndpointId id, std::uint32_t generation, std::string_view why) {
  std::lock_guard lock(mu_);
  const EndpointSlot& s = slots_[id];
  if (!index_ || !s.present || s.generation != generation) return;
  const std::int64_t dropped = index_->clear(id);
  reset_keyers(id);
  publisher_keyed_ids_ &= ~(std::uint64_t{1} << id);
  log_line("KV index entries of " + s.label + " cleared (" + std::string(why) + "): " + std::to_string(dropped));
}

// ---- peer snapshots ----------------------------------------------------------------------------

void EndpointTable::snapshot(PeerSnapshot& out, std::size_t max_blocks, const std::vector<std::string>* only) {
  out.block_size = block_size_;
  out.endpoints.clear();
  std::lock_guard lock(mu_);
  if (!index_) return;
  const auto wanted = [&](const EndpointSlot& s) {
    return !s.spec.kv_events.empty() &&
           (only == nullptr || std::find(only->begin(), only->end(), s.label) != only->end());
  };
  // An equal share of the bound per endpoint, GPU tier first, so that no endpoint crowds out the others.
  std::size_t with_events = 0;
  for (std::uint64_t ids = present_ids_; ids != 0; ids &= ids - 1) {
    with_events += wanted(slots_[static_cast<std::size_t>(std::countr_zero(ids))]) ? 1 : 0;
  }
  if (with_events == 0) return;
  const std::size_t share = max_blocks / with_events;
  for (std::uint64_t ids = present_ids_; ids != 0; ids &= ids - 1) {
    const int id = std::countr_zero(ids);
    const EndpointSlot& s = slots_[static_cast<std::size_t>(id)];
    if (!wanted(s)) continue;
    std::size_t budget = share;
    PeerSnapshotEndpoint& e = out.endpoints.emplace_back();
    e.label = s.label.substr(0, kPeerSnapshotMaxLabel);
    e.last_seq = kv_seq_[static_cast<std::size_t>(id)];
    if (const BlockKeyer* gpu = find_keyer(static_cast<EndpointId>(id), KvTier::gpu)) e.group = gpu->group();
    for (int t = 0; t < kKvTierCount; ++t) {
      const BlockKeyer* k = find_keyer(static_cast<EndpointId>(id), static_cast<KvTier>(t));
      if (k == nullptr || budget == 0) continue;
      // Oldest first; when over the budget, the oldest are left out.
      std::size_t skip = k->size() > budget ? k->size() - budget : 0;
      k->for_each([&](BlockHash publisher, std::span<const BlockHash> keys) {
        if (skip > 0) {
          --skip;
          return;
        }
        if (budget == 0) return;
        e.add(static_cast<KvTier>(t), publisher, keys);
        --budget;
      });
    }
  }
}

bool EndpointTable::set_peer_snapshot(PeerSnapshot snapshot, std::int64_t keep_ms) {
  std::lock_guard lock(mu_);
  if (!index_) return false;
  if (snapshot.block_size != block_size_) {
    log_line("peer snapshot refused: its block size " + std::to_string(snapshot.block_size) + " is not this router's " +
             std::to_string(block_size_) + " (router.kvBlockSize must match between peers)");
    return false;
  }
  peer_ = std::move(snapshot);
  peer_until_ms_ = now_ms() + keep_ms;
  return true;
}

void EndpointTable::set_late_peer_fetch(LatePeerFetch fetch, std::int64_t from_ms) {
  std::lock_guard lock(mu_);
  late_fetch_ = std::move(fetch);
  late_from_ms_ = from_ms;
}

// The start-time snapshot covers the endpoints DNS brings within its window; one that shows up
// later (a pod that left DNS for a while, a pool whose name resolved late) would start from its
// worker's replay buffer alone, whose horizon is its last buffer_steps batches, while a peer that
// kept it has every block. So it gets a fetch of its own, filtered to its label.
void EndpointTable::late_peer_load(const std::vector<EndpointSpec>& fresh) {
  std::vector<std::string> labels;
  {
    std::lock_guard lock(mu_);
    if (!late_fetch_ || !index_ || fresh.empty() || now_ms() < late_from_ms_) return;
    for (const EndpointSpec& e : fresh) {
      if (e.kv_events.empty()) continue;
      std::string label = label_of(e);
      if (peer_ && now_ms() <= peer_until_ms_ &&
          std::any_of(peer_->endpoints.begin(), peer_->endpoints.end(),
                      [&](const PeerSnapshotEndpoint& p) { return p.label == label; })) {
        continue;  // a snapshot still kept has it
      }
      if (late_tried_.count(label) != 0) continue;
      if (late_tried_.size() >= kMaxLatePeerLabels) {
        if (!late_full_logged_) {
          log_line("peers: " + std::to_string(kMaxLatePeerLabels) +
                   " endpoints were fetched for already; endpoints seen from now on start without a peer's entries");
        }
        late_full_logged_ = true;
        break;
      }
      late_tried_.insert(label);
      labels.push_back(std::move(label));
    }
  }
  if (labels.empty()) return;
  std::string names;
  for (const std::string& l : labels) names.append(names.empty() ? "" : ", ").append(l);
  auto snap = late_fetch_(labels);  // off the lock: it waits on the network
  if (!snap) {
    log_line("peers: no entries for " + names + " (first seen after the start): " + snap.error() + "; they start cold");
    return;
  }
  std::erase_if(snap->endpoints, [&](const PeerSnapshotEndpoint& p) {
    return std::find(labels.begin(), labels.end(), p.label) == labels.end();
  });
  if (snap->endpoints.empty()) {
    log_line("peers: the peer has no entries for " + names + " (first seen after the start)");
    return;
  }
  std::lock_guard lock(mu_);
  if (snap->block_size != block_size_) {
    log_line("peers: entries for " + names + " refused: the peer's block size " + std::to_string(snap->block_size) +
             " is not this router's " + std::to_string(block_size_) + " (router.kvBlockSize must match between peers)");
    return;
  }
  if (!peer_ || now_ms() > peer_until_ms_) {
    peer_ = std::move(*snap);  // what was left of the start-time snapshot is past its window
  } else {
    for (PeerSnapshotEndpoint& e : snap->endpoints) peer_->endpoints.push_back(std::move(e));
  }
  peer_until_ms_ = std::max(peer_until_ms_, now_ms() + kPeerSnapshotKeepMs);
}

std::int64_t EndpointTable::load_peer_entry(EndpointId id) {
  if (!peer_ || !index_) return -1;
  if (now_ms() > peer_until_ms_) {
    peer_.reset();
    return -1;
  }
  const EndpointSlot& s = slots_[id];
  auto it = std::find_if(peer_->endpoints.begin(), peer_->endpoints.end(),
                         [&](const PeerSnapshotEndpoint& e) { return e.label == s.label; });
  if (it == peer_->endpoints.end()) return -1;
  std::uint64_t loaded = 0;
  for (const PeerSnapshotBlock& b : it->blocks) {
    const auto keys = it->keys_of(b);
    if (!keyer(id, b.tier).restore(b.publisher, keys, it->group)) continue;
    (void)index_->apply_stored(id, b.tier, keys);
    ++loaded;
  }
  const std::int64_t seq = it->last_seq;
  kv_seq_[id] = seq;
  metrics_.kv_warm_peer_blocks.fetch_add(loaded, std::memory_order_relaxed);
  log_line("endpoint " + s.label + ": " + std::to_string(loaded) +
           " blocks loaded from the peer snapshot, KV events "
           "resume after sequence " +
           std::to_string(seq));
  peer_->endpoints.erase(it);
  if (peer_->endpoints.empty()) peer_.reset();
  return seq;
}

// ---- routing ----------------------------------------------------------------------------------

void EndpointTable::fill_pick(Pick& out, int id, std::int32_t cached_blocks) const {
  const EndpointSlot& s = slots_[static_cast<std::size_t>(id)];
  out.slot = id;
  out.generation = s.generation;
  out.cached_blocks = cached_blocks;
  out.host = s.spec.host;
  out.port = s.spec.port;
  out.label = s.label;
}

// `t`: now, as the caller has just read it (each clock read costs tens of nanoseconds, and a
// request would otherwise read it many times).
Plan EndpointTable::plan(const RouteRequest& request, std::uint64_t exclude, bool allow_pd, Clock::time_point t,
                         bool explain_it) {
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  // The decision's time, not the request's arrival: a precise policy remembers the blocks it routes
  // for pendingBlocksMs from here, and a request may have waited in the admission queue or be a retry.
  RouteRequest rq = request;
  rq.now_ms = now;
  std::size_t n = 0;
  Plan out;
  std::lock_guard lock(mu_);
  // The endpoint snapshot: per thread, not per request (64 EndpointStates are 4 KiB, of which a
  // request fills two or three), and not one per router, whose lines each request would take
  // from the other HTTP thread's core. Used only inside this call.
  thread_local std::array<EndpointState, kMaxRoutingEndpoints> states;
  for (std::uint64_t ids = present_ids_; ids != 0; ids &= ids - 1) {
    const int id = std::countr_zero(ids);
    const EndpointSlot& s = slots_[static_cast<std::size_t>(id)];
    EndpointState& e = states[n++];
    e = EndpointState{};
    e.id = static_cast<EndpointId>(id);
    e.generation = s.generation.load(std::memory_order_relaxed);
    e.role = s.spec.role;
    e.healthy = routable(s, now) && ((exclude >> id) & 1U) == 0;
    e.running_requests = s.running.load(std::memory_order_relaxed);
    e.waiting_requests = s.waiting.load(std::memory_order_relaxed);
    e.kv_usage = s.kv_usage.load(std::memory_order_relaxed);
    e.inflight_prefill_tokens = std::max<std::int64_t>(0, s.inflight_prefill_tokens.load(std::memory_order_relaxed));
    // Scraped numbers lag; the router's own count of legs in flight does not (the planner counts
    // the ones the last scrape does not show as waiting).
    e.routed_requests = s.inflight.load(std::memory_order_relaxed);
  }
  const std::span<const EndpointState> st(states.data(), n);
  const RoutePlan rp = planner_->plan_route(rq, st, allow_pd);
  if (explain_it) explain(rq, st, rp, out.decision);
  if (!rp.ok()) {
    out.decided = Clock::now();
    metrics_.decision_seconds.observe(std::chrono::duration<double>(out.decided - t).count());
    return out;
  }
  planner_->apply_route(rq, st, rp);
  fill_pick(out.main, rp.main.endpoint, rp.main.cached_blocks);
  if (rp.prefill.ok()) fill_pick(out.prefill, rp.prefill.endpoint, rp.prefill.cached_blocks);
  out.pd_evaluated = rp.pd_evaluated;
  out.reason = rp.reason;
  if (rp.pd_evaluated) metrics_.pd_decisions[static_cast<int>(rp.reason)].fetch_add(1, std::memory_order_relaxed);
  // Count the request against the endpoints now, so the next decision sees it.
  (out.prefill.ok() ? out.prefill : out.main).prefill_tokens = rp.prefill_tokens;
  for (Pick* p : {&out.main, &out.prefill}) {
    if (!p->ok()) continue;
    EndpointSlot& s = slots_[static_cast<std::size_t>(p->slot)];
    s.inflight.fetch_add(1, std::memory_order_relaxed);
    s.requests.fetch_add(1, std::memory_order_relaxed);
    s.inflight_prefill_tokens.fetch_add(p->prefill_tokens, std::memory_order_relaxed);
    // What the router expects the endpoint's prefix cache to hit, to set against what it reports.
    const std::int64_t prompt = std::max<std::int64_t>(0, rq.prompt_tokens);
    s.routed_prompt_tokens.fetch_add(static_cast<std::uint64_t>(prompt), std::memory_order_relaxed);
    s.routed_prompt_squares.fetch_add(static_cast<std::uint64_t>(prompt) * static_cast<std::uint64_t>(prompt) / 16,
                                      std::memory_order_relaxed);
    s.predicted_hit_tokens.fetch_add(
        static_cast<std::uint64_t>(std::min(prompt, std::int64_t{std::max(0, p->cached_blocks)} * rq.block_size)),
        std::memory_order_relaxed);
  }
  metrics_.prefix_query_blocks.fetch_add(rq.block_hashes.size(), std::memory_order_relaxed);
  metrics_.prefix_hit_blocks.fetch_add(static_cast<std::uint64_t>(std::max(0, rp.main.cached_blocks)),
                                       std::memory_order_relaxed);
  out.decided = Clock::now();
  metrics_.decision_seconds.observe(std::chrono::duration<double>(out.decided - t).count());
  return out;
}

void EndpointTable::explain(const RouteRequest& rq, std::span<const EndpointState> st, const RoutePlan& rp,
                            std::string& out) const {
  std::array<CandidateView, kMaxRoutingEndpoints> views;
  const std::size_t n = planner_->explain_route(rq, st, views);
  const auto label = [this](EndpointId id) { return slots_[static_cast<std::size_t>(id)].label; };
  nlohmann::json candidates = nlohmann::json::array();
  for (std::size_t i = 0; i < n; ++i) {
    const CandidateView& v = views[i];
    nlohmann::json c = {{"endpoint", label(v.endpoint)},
                        {"role", to_string(v.role)},
                        {"eligible", v.eligible},
                        {"cachedBlocks", v.cached_blocks},
                        {"cost", nullptr},
                        {"load", v.load},
                        {"kvUsage", v.kv_usage}};
    if (v.eligible) c["cost"] = v.cost;
    candidates.push_back(std::move(c));
  }
  nlohmann::json d = {{"policy", planner_->policy().name()},  {"prefixSource", precise_ ? "index" : "history"},
                      {"promptTokens", rq.prompt_tokens},     {"promptBlocks", rq.block_hashes.size()},
                      {"blockSize", rq.block_size},           {"chosen", nullptr},
                      {"cachedBlocks", rp.main.cached_blocks}};
  if (rp.ok()) d["chosen"] = label(rp.main.endpoint);
  if (rp.session_kept) d["sessionKept"] = true;
  if (rp.pd_evaluated) d["pd"] = to_string(rp.reason);
  if (rp.prefill.ok()) {
    d["prefill"] = label(rp.prefill.endpoint);
    d["prefillCachedBlocks"] = rp.prefill.cached_blocks;
  }
  d["candidates"] = std::move(candidates);
  out = d.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

void EndpointTable::first_byte(Pick& p) {
  if (!p.ok() || p.prefill_tokens == 0) return;
  slots_[static_cast<std::size_t>(p.slot)].inflight_prefill_tokens.fetch_sub(p.prefill_tokens,
                                                                             std::memory_order_relaxed);
  p.prefill_tokens = 0;
}

void EndpointTable::finish(Pick& p, std::uint64_t request_id) {
  if (!p.ok()) return;
  first_byte(p);
  EndpointSlot& s = slots_[static_cast<std::size_t>(p.slot)];
  // Atomic, and not reset when the slot changes hands (the old endpoint's requests still end
  // here), so no lock: the lock is for the policy's hook alone, which the built-in policies do
  // not have. (Taking it anyway passed its line between the HTTP threads' cores per request.)
  s.inflight.fetch_sub(1, std::memory_order_relaxed);
  if (planner_->tracks_finished()) {
    std::lock_guard lock(mu_);
    if (s.present && s.generation == p.generation) planner_->on_finished(request_id, static_cast<EndpointId>(p.slot));
  }
  p.slot = -1;
}

void EndpointTable::finish_failed(const RouteRequest& rq, Pick& p, bool prefill_leg) {
  if (!p.ok()) return;
  {
    std::lock_guard lock(mu_);
    const EndpointSlot& s = slots_[static_cast<std::size_t>(p.slot)];
    if (s.present && s.generation == p.generation) {
      planner_->on_failed(rq, prefill_leg, static_cast<EndpointId>(p.slot));
    }
  }
  finish(p, rq.request_id);
}

void EndpointTable::upstream_failed(const Pick& p, bool definitive, std::string_view what) {
  EndpointSlot& s = slots_[static_cast<std::size_t>(p.slot)];
  if (s.generation != p.generation) return;
  const bool was_up = s.up.load();
  if (record_failure(s, now_ms(), health_, definitive)) {
    log_line("endpoint " + p.label + " ejected for " + std::to_string(health_.eject_ms) + " ms after " +
             std::to_string(s.failures.load()) + " consecutive failures (last: " + std::string(what) + ")");
  } else if (definitive && was_up) {
    log_line("endpoint " + p.label + " marked down (" + std::string(what) + ")");
  }
}

void EndpointTable::upstream_draining(const Pick& p) {
  EndpointSlot& s = slots_[static_cast<std::size_t>(p.slot)];
  if (s.generation != p.generation) return;
  if (record_draining(s, now_ms())) {
    log_line("endpoint " + p.label + " is draining (answered 503): no new requests go there; those in flight finish");
  }
}

void EndpointTable::upstream_ok(const Pick& p) {
  EndpointSlot& s = slots_[static_cast<std::size_t>(p.slot)];
  if (s.generation == p.generation) record_success(s);
}

std::string EndpointTable::not_ready_reason() {
  const std::int64_t now = now_ms();
  bool have_main = false, have_prefill = false;
  std::lock_guard lock(mu_);
  const EndpointRole main_role = pd_mode_ ? EndpointRole::decode : EndpointRole::aggregated;
  for (const EndpointSlot& s : slots_) {
    if (!s.present || !routable(s, now)) continue;
    have_main = have_main || s.spec.role == main_role;
    have_prefill = have_prefill || s.spec.role == EndpointRole::prefill;
  }
  if (!have_main) return std::string("no healthy ") + (pd_mode_ ? "decode" : "aggregated") + " endpoint";
  if (need_prefill_ && !have_prefill) return "no healthy prefill endpoint";
  return "";
}

// ---- health ---------------------------------------------------------------------------------------

void EndpointTable::present(std::vector<Present>& out) {
  out.clear();
  std::lock_guard lock(mu_);
  for (std::uint64_t ids = present_ids_; ids != 0; ids &= ids - 1) {
    const int id = std::countr_zero(ids);
    const EndpointSlot& s = slots_[static_cast<std::size_t>(id)];
    // Field by field: g++ 12 mishandles braced temporaries in coroutines (http/README.md), and
    // the health loop that calls this is one.
    Present& e = out.emplace_back();
    e.id = id;
    e.host = s.spec.host;
    e.port = s.spec.port;
    e.generation = s.generation;
  }
}

void EndpointTable::health_checked(int id, std::uint32_t generation, bool ok, const std::string& failure,
                                   std::int64_t started_ms, bool draining, bool says_draining) {
  EndpointSlot& s = slots_[static_cast<std::size_t>(id)];
  std::lock_guard lock(mu_);
  if (!s.present || s.generation != generation) return;
  // A draining endpoint's check answers 503 (the sim-worker's says "draining") and that is
  // expected: no strike. A bare 503 from one not marked draining counts as a failure: vLLM's
  // /health answers 503 when its engine died (EngineDeadError,
  // vllm/entrypoints/serve/instrumentator/health.py).
  if (says_draining && record_draining(s, now_ms())) {
    log_line("endpoint " + s.label +
             " is draining (its health check says so): no new requests go there; those in flight finish");
  }
  if (draining && s.draining_since_ms.load(std::memory_order_acquire) != 0) {
    s.checked.store(true, std::memory_order_release);
    return;
  }
  const bool was_checked = s.checked.load();
  const bool was_up = s.up.load();
  if (record_health(s, ok, now_ms(), health_, started_ms)) {
    log_line("endpoint " + s.label + (was_checked ? " healthy again" : " healthy"));
  } else if (!ok && (was_up || !was_checked)) {
    log_line("endpoint " + s.label + " failed its health check (" + failure + ")");
  }
}

void EndpointTable::load_reported(int id, std::uint32_t generation, const ScrapedLoad& load) {
  EndpointSlot& s = slots_[static_cast<std::size_t>(id)];
  if (s.generation != generation) return;
  if (load.prefix_found) {
    const double hits_before = s.reported_prefix_hits.exchange(load.prefix_hits, std::memory_order_relaxed);
    s.reported_prefix_queries.store(load.prefix_queries, std::memory_order_relaxed);
    // How much of the cache the worker used the router knew: its predicted hits against the
    // worker's, over the interval since the previous scrape (a cold router predicts none of them).
    const double predicted = static_cast<double>(s.predicted_hit_tokens.load());
    const double predicted_before = s.predicted_at_scrape.exchange(predicted, std::memory_order_relaxed);
    const double worker_hits = load.prefix_hits - hits_before;
    if (hits_before >= 0 && predicted_before >= 0 && worker_hits > 0) {
      s.known_hit_ratio.store(std::clamp((predicted - predicted_before) / worker_hits, 0.0, 1.0),
                              std::memory_order_relaxed);
    }
  }
  if (!load.found) return;
  s.running.store(static_cast<std::int32_t>(load.running), std::memory_order_relaxed);
  s.waiting.store(static_cast<std::int32_t>(load.waiting), std::memory_order_relaxed);
  s.kv_usage.store(load.kv_usage, std::memory_order_relaxed);
  if (load.num_gpu_blocks > 0) {
    // In the router's blocks: a worker block of B tokens is B / router block size router blocks.
    const double per = load.gpu_block_size > 0 ? load.gpu_block_size / static_cast<double>(block_size_) : 1.0;
    s.reported_kv_blocks.store(load.kv_usage * load.num_gpu_blocks * per, std::memory_order_relaxed);
  }
}

// ---- scaling signals ------------------------------------------------------------------------------

void EndpointTable::observe_pools(PoolObservation& prefill, PoolObservation& decode) {
  prefill = PoolObservation{};
  decode = PoolObservation{};
  const std::int64_t now = now_ms();
  std::lock_guard lock(mu_);
  for (std::uint64_t ids = present_ids_; ids != 0; ids &= ids - 1) {
    const EndpointSlot& s = slots_[static_cast<std::size_t>(std::countr_zero(ids))];
    // In P/D mode aggregated endpoints get no requests (EndpointTable::create warns): no pool's.
    if (pd_mode_ && s.spec.role == EndpointRole::aggregated) continue;
    PoolObservation& o = s.spec.role == EndpointRole::prefill ? prefill : decode;
    o.routed_prompt_tokens_total += static_cast<double>(s.routed_prompt_tokens.load());
    o.routed_requests_total += static_cast<double>(s.requests.load());
    o.routed_prompt_squares_total += 16.0 * static_cast<double>(s.routed_prompt_squares.load());
    if (s.draining_since_ms.load(std::memory_order_acquire) != 0) {
      ++o.draining_endpoints;
      continue;
    }
    if (!routable(s, now)) continue;
    ++o.ready_endpoints;
    o.waiting_prompt_tokens += static_cast<double>(std::max<std::int64_t>(0, s.inflight_prefill_tokens.load()));
    o.running_sequences += s.running.load(std::memory_order_relaxed);
    o.waiting_sequences += s.waiting.load(std::memory_order_relaxed);
    o.kv_utilization_sum += s.kv_usage.load(std::memory_order_relaxed);
  }
}

// ---- metrics --------------------------------------------------------------------------------------

void EndpointTable::write_metrics(std::string& out) {
  std::lock_guard lock(mu_);
  write_metric(out, "disagg_router_kv_index_entries", "gauge",
               "Entries (block x endpoint x tier) in the KV block index.", "",
               index_ ? static_cast<double>(index_->size()) : 0);
  write_metric(out, "disagg_router_kv_index_evictions_total", "counter", "Index entries evicted by its bounds.", "",
               index_ ? static_cast<double>(index_->evictions()) : 0);
  // How complete the index is: publisher blocks keyed by the router's own hash of their token ids,
  // and those that could not be (by reason).
  write_metric(out, "disagg_router_kv_blocks_keyed_total", "counter",
               "Stored KV blocks indexed under the router's own hash of their token ids.", "",
               static_cast<double>(keyed_blocks_));
  out.append(
      "# HELP disagg_router_kv_blocks_unkeyed_total Stored KV blocks not keyed by token ids, by reason "
      "(no_tokens: indexed under the publisher's hash).\n# TYPE disagg_router_kv_blocks_unkeyed_total counter\n");
  for (std::size_t r = 1; r < BlockKeyer::kSkipCount; ++r) {
    out.append("disagg_router_kv_blocks_unkeyed_total{reason=\"")
        .append(to_string(static_cast<BlockKeyer::Skip>(r)))
        .append("\"} ")
        .append(std::to_string(unkeyed_blocks_[r]))
        .append("\n");
  }
  write_metric(out, "disagg_router_kv_batches_rank_mismatch_total", "counter",
               "KV-event batches naming another data-parallel rank than their endpoint's (dropped when the "
               "endpoint's rank is configured; a new rank on a DNS endpoint clears its entries).",
               "", static_cast<double>(rank_mismatch_batches_));
  std::size_t remembered = 0;
  for (const auto& tiers : keyers_) {
    for (const auto& k : tiers) remembered += k ? k->size() : 0;
  }
  write_metric(out, "disagg_router_kv_key_map_entries", "gauge",
               "Publisher block hashes the router remembers to translate removals and children.", "",
               static_cast<double>(remembered));
  struct Family {
    const char* name;
    const char* type;
    const char* help;
  };
  constexpr std::array<Family, 15> families = {{
      {"disagg_router_endpoint_healthy", "gauge",
       "1 when the endpoint receives requests (health check passed, not ejected)."},
      {"disagg_router_endpoint_inflight", "gauge", "Requests the router has in flight on the endpoint."},
      {"disagg_router_endpoint_running", "gauge", "vllm:num_requests_running last scraped."},
      {"disagg_router_endpoint_waiting", "gauge", "vllm:num_requests_waiting last scraped."},
      {"disagg_router_endpoint_kv_usage", "gauge", "vllm:kv_cache_usage_perc last scraped."},
      {"disagg_router_endpoint_kv_index_entries", "gauge", "KV block index entries of the endpoint."},
      {"disagg_router_endpoint_requests_total", "counter", "Requests (legs) routed to the endpoint."},
      {"disagg_router_endpoint_ejections_total", "counter",
       "Times the endpoint was ejected after consecutive failures."},
      // Predicted against reported prefix hits: rate(predicted) / rate(prompt) is the hit rate the
      // router routed for; rate(worker hits) / rate(worker queries) the one the endpoint got.
      {"disagg_router_endpoint_prompt_tokens_total", "counter", "Prompt tokens of the legs routed to the endpoint."},
      {"disagg_router_endpoint_predicted_prefix_hit_tokens_total", "counter",
       "Of those, tokens the router found cached there when it routed (cached prefix blocks x block size)."},
      {"disagg_router_endpoint_worker_prefix_cache_queries_total", "counter",
       "vllm:prefix_cache_queries_total last scraped from the endpoint (tokens; absent until scraped)."},
      {"disagg_router_endpoint_worker_prefix_cache_hits_total", "counter",
       "vllm:prefix_cache_hits_total last scraped from the endpoint (tokens; absent until scraped)."},
      {"disagg_router_endpoint_data_parallel_rank", "gauge",
       "The data-parallel rank of the engine behind the endpoint (configured, else from its KV events; absent until "
       "known)."},
      // How much of the worker's cache the router knows (a warm restart fills it at once, a cold
      // one as blocks are stored again).
      {"disagg_router_endpoint_worker_kv_blocks", "gauge",
       "KV blocks the worker reports in use (vllm:kv_cache_usage_perc x num_gpu_blocks of vllm:cache_config_info), in "
       "router blocks (absent until scraped)."},
      {"disagg_router_endpoint_known_hit_ratio", "gauge",
       "Of the prefix-cache hit tokens the worker reported between its last two scrapes with hits, the share the "
       "router "
       "predicted when routing (its index knew those blocks there), at most 1; low after a cold restart (absent until "
       "known)."},
  }};
  const std::int64_t now = now_ms();
  for (std::size_t f = 0; f < families.size(); ++f) {
    out.append("# HELP ").append(families[f].name).append(" ").append(families[f].help).append("\n");
    out.append("# TYPE ").append(families[f].name).append(" ").append(families[f].type).append("\n");
    for (int id = 0; id < kMaxRoutingEndpoints; ++id) {
      const EndpointSlot& s = slots_[static_cast<std::size_t>(id)];
      if (!s.present) continue;
      const std::string labels = "endpoint=\"" + s.label + "\",pool=\"" + s.spec.pool + "\",role=\"" +
                                 std::string(to_string(s.spec.role)) + "\"";
      double v = 0;
      switch (f) {
        case 0: v = routable(s, now) ? 1 : 0; break;
        case 1: v = s.inflight.load(); break;
        case 2: v = s.running.load(); break;
        case 3: v = s.waiting.load(); break;
        case 4: v = s.kv_usage.load(); break;
        case 5: v = index_ ? static_cast<double>(index_->size(static_cast<EndpointId>(id))) : 0; break;
        case 6: v = static_cast<double>(s.requests.load()); break;
        case 7: v = static_cast<double>(s.ejections.load()); break;
        case 8: v = static_cast<double>(s.routed_prompt_tokens.load()); break;
        case 9: v = static_cast<double>(s.predicted_hit_tokens.load()); break;
        case 10: v = s.reported_prefix_queries.load(); break;
        case 11: v = s.reported_prefix_hits.load(); break;
        case 12: v = s.data_parallel_rank; break;
        case 13: v = s.reported_kv_blocks.load(); break;
        default: v = s.known_hit_ratio.load(); break;
      }
      if (v < 0) continue;  // the worker's counters, not scraped yet
      write_sample(out, families[f].name, labels, v);
    }
  }
}

}  // namespace disagg::router
