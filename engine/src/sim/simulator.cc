// simulator.cc — the simulator's event loop (run) and a request's life through it: arrival, the
// router's admission queue, routing, delivery to its engines, scheduler steps and their events,
// completion. The state and the small per-event helpers are in simulator_impl.h; KV movement,
// autoscaling and create() are in files of their own (listed there), as concerns apart from the
// path every request takes.
#include "disagg/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "disagg/block_hash.h"
#include "disagg/route_plan.h"
#include "simulator_impl.h"

namespace disagg {

using sim_detail::Event;
using sim_detail::EvKind;
using sim_detail::SlotState;

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

constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Simulator::Simulator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;
Simulator::~Simulator() = default;

void Simulator::Impl::refresh_endpoints() {
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

std::int32_t Simulator::Impl::new_flight() {
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

void Simulator::Impl::hash_request(Flight& fl, const WorkloadRequest& r) {
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
  const std::size_t shared_tokens = r.shared_prefix_tokens < 0
                                        ? r.prompt.size()
                                        : std::min(r.prompt.size(), static_cast<std::size_t>(r.shared_prefix_tokens));
  const std::size_t n =
      hash_blocks(std::span<const TokenId>(r.prompt).first(shared_tokens), bs, kRootBlockHash, fl.hashes);
  fl.shared_blocks = announce_private ? static_cast<std::int32_t>(total) : static_cast<std::int32_t>(n);
  BlockHash h = n > 0 ? fl.hashes[n - 1] : kRootBlockHash;
  const std::uint64_t salt = mix64(r.index + 0x5bd1e995ULL);
  for (std::size_t i = n; i < total; ++i) {
    h = mix64(h ^ salt ^ i);
    fl.hashes[i] = h;
  }
}

bool Simulator::Impl::submit(std::int32_t w, std::int32_t f, RequestKind kind, SeqHandle* out) {
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

void Simulator::Impl::on_arrival(double now, const WorkloadRequest& r) {
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
void Simulator::Impl::drain_admission(double now) {
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

void Simulator::Impl::route(double now, double arrival, const WorkloadRequest& r) {
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

// A routed request reaches its engine (after the API server's time); refused: its legs end.
void Simulator::Impl::on_deliver(double now, std::int32_t f) {
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
void Simulator::Impl::deliver_decode(double now, std::int32_t f) {
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

void Simulator::Impl::start_step(double now, std::int32_t wi) {
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

void Simulator::Impl::on_step_done(double now, std::int32_t wi) {
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

void Simulator::Impl::finish(double now, std::int32_t f) {
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

Expected<SimulationResult, SimError> Simulator::run(Workload& workload, const SimProgressFn& progress) {
  Impl& s = *impl_;
  if (s.ran)
    return unexpected(SimError{SimErrc::invalid_config, "run() was already called on this Simulator; create another"});
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
  if (s.config.autoscale.report) s.report_scaling(now);
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
