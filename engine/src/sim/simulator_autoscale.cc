// simulator_autoscale.cc — replica lifecycle and autoscaling in the simulator: the scaling rule's
// ticks and the pressure it reads from the pools' ready replicas, provisioning a replica in an off
// slot, cancelling or draining one and switching it off, billed GPU time integrated over the
// report's windows, and the scaling report at the end of a run. Apart from the request path
// because only autoscaled runs (and those with a report) do any of it; it runs on its own events
// (ticks, replicas getting ready) and on a drain check after an event while a replica drains.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "disagg/pool_pressure.h"
#include "simulator_impl.h"

namespace disagg {

// Integrates billed replicas x GPUs (and the windows' replica-seconds) up to `now`. Called
// before every change of a pool's counts.
void Simulator::Impl::account(double now) {
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

// The pool's SLO pressure: the engine's one rule (disagg/pool_pressure.h), on what the simulator
// knows of the pool's ready replicas; the router computes it from what it observes.
double Simulator::Impl::pressure(const PoolRun& pr) const {
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
  return decode_pressure(load, [&cm, context](double batch) { return decode_step_seconds(cm, batch, context); })
      .pressure;
}

void Simulator::Impl::on_tick(double now) {
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
  const bool work =
      arrivals_pending || in_flight > 0 || !held.empty() || !admission_queue.empty() || draining_total > 0;
  bool provisioning = false;
  for (const PoolRun& pr : pools) provisioning = provisioning || pr.provisioning > 0;
  const double next = now + config.autoscale.evaluation_interval_seconds;
  if (work || provisioning || next <= config.autoscale.horizon_seconds) push(next, EvKind::autoscale_tick, -1);
}

// A new replica in an off slot of `pr`: a fresh scheduler (empty cache), provisioning until
// now + provisioning time. False when every slot is taken (replicas still draining).
bool Simulator::Impl::start_replica(double now, PoolRun& pr) {
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
void Simulator::Impl::stop_replica(double now, PoolRun& pr) {
  account(now);
  std::int32_t pick = -1;
  for (std::int32_t i = pr.first; i < pr.first + pr.slots; ++i) {
    const Worker& w = workers[static_cast<std::size_t>(i)];
    if (w.state == SlotState::provisioning &&
        (pick < 0 || w.ready_at > workers[static_cast<std::size_t>(pick)].ready_at))
      pick = i;
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
    const std::int64_t load =
        std::int64_t{w.sched.num_unfinished()} + eps()[static_cast<std::size_t>(i)].routed_requests;
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

void Simulator::Impl::on_replica_ready(double now, std::int32_t wi) {
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
void Simulator::Impl::check_drained(double now) {
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

// The end of a run: GPU time integrated to the horizon, the windows' replica-seconds as means
// and their latency percentiles, each pool's report.
void Simulator::Impl::report_scaling(double now) {
  const double horizon = std::max(now, config.autoscale.horizon_seconds);
  account(horizon);
  ScalingReport& r = result.scaling;
  r.horizon_seconds = horizon;
  r.window_seconds = config.autoscale.window_seconds;
  // Window sums of replica-seconds become means over each window's length (the last may be short).
  for (std::size_t w = 0; w < r.windows.size(); ++w) {
    const double len = std::min(r.window_seconds, horizon - r.windows[w].start_seconds);
    for (std::size_t p = 0; p < pools.size(); ++p) {
      const std::size_t k = w * pools.size() + p;
      r.window_replicas[k] = len > 0 ? r.window_replicas[k] / len : 0;
      r.window_ready[k] = len > 0 ? r.window_ready[k] / len : 0;
    }
  }
  // Latency over time: each window's completed arrivals, from the records the summary reads too.
  {
    std::vector<std::vector<double>> ttft(r.windows.size());
    std::vector<std::vector<double>> tpot(r.windows.size());
    for (const RequestRecord& rec : metrics.records()) {
      const std::int64_t w = window_of(rec.arrival);
      if (w < 0 || w >= static_cast<std::int64_t>(r.windows.size())) continue;
      ttft[static_cast<std::size_t>(w)].push_back(rec.first_token - rec.arrival);
      if (rec.output_tokens >= 2)
        tpot[static_cast<std::size_t>(w)].push_back((rec.finish - rec.first_token) / (rec.output_tokens - 1));
    }
    for (std::size_t w = 0; w < r.windows.size(); ++w) {
      std::sort(ttft[w].begin(), ttft[w].end());
      std::sort(tpot[w].begin(), tpot[w].end());
      if (!ttft[w].empty()) r.windows[w].ttft_p90 = percentile_sorted(ttft[w], 0.90);
      if (!tpot[w].empty()) r.windows[w].tpot_p90 = percentile_sorted(tpot[w], 0.90);
    }
  }
  for (PoolRun& pr : pools) {
    // Replicas still draining at the end hold work that counts as unfinished, not lost.
    r.pools.push_back(pr.report);
  }
  result.has_scaling = true;
}

}  // namespace disagg
