#include "disagg/planner.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <thread>
#include <unordered_set>

#include "disagg/cost_model.h"
#include "disagg/json_value.h"
#include "disagg/kv_block_index.h"

namespace disagg {

double RateGrid::rate(int index) const {
  return min_rate * std::pow(growth, index);
}

int RateGrid::index_at_most(double r) const {
  if (!(r >= min_rate)) return -1;
  int i = static_cast<int>(std::floor(std::log(r / min_rate) / std::log(growth)));
  // Guard the floating-point floor in both directions.
  while (i > 0 && rate(i) > r) --i;
  while (rate(i + 1) <= r) ++i;
  return i;
}

int find_knee(int start, int hi, const std::function<bool(int)>& passes) {
  return find_knee(start, hi, passes, [](int) { return false; });
}

int find_knee(int start, int hi, const std::function<bool(int)>& passes_fn, const std::function<bool(int)>& hopeless) {
  if (hi < 0) return -1;
  bool gave_up = false;
  auto passes = [&](int i) {
    if (passes_fn(i)) return true;
    gave_up = gave_up || hopeless(i);
    return false;
  };
#define DISAGG_KNEE_CHECK() \
  if (gave_up) return -2
  start = std::clamp(start, 0, hi);
  int lo = -1, fail = hi + 1;  // invariant: passes(lo) (or lo = -1), !passes(fail) (or fail = hi + 1)
  if (passes(start)) {
    lo = start;
    for (int step = 4; fail > lo + 1;) {  // gallop up
      const int next = std::min(lo + step, hi);
      if (next == lo) break;
      if (passes(next)) {
        lo = next;
      } else {
        fail = next;
        DISAGG_KNEE_CHECK();
        break;
      }
      step *= 2;
    }
    if (lo == hi) return hi;
  } else {
    fail = start;
    DISAGG_KNEE_CHECK();
    for (int step = 4;;) {  // gallop down
      if (fail == 0) return -1;
      const int next = std::max(fail - step, 0);
      if (passes(next)) {
        lo = next;
        break;
      }
      fail = next;
      DISAGG_KNEE_CHECK();
      step *= 2;
    }
  }
  while (fail - lo > 1) {  // bisect
    const int mid = lo + (fail - lo) / 2;
    if (passes(mid)) {
      lo = mid;
    } else {
      fail = mid;
      DISAGG_KNEE_CHECK();
    }
  }
  return lo;
#undef DISAGG_KNEE_CHECK
}

std::string_view to_string(PlanMode mode) {
  return mode == PlanMode::aggregated ? "aggregated" : "disaggregated";
}

std::string_view to_string(CandidateStatus status) {
  switch (status) {
    case CandidateStatus::evaluated: return "evaluated";
    case CandidateStatus::pruned: return "pruned";
    case CandidateStatus::infeasible: return "infeasible";
  }
  return "unknown";
}

namespace {

bool serves_prefill(OptionRole r) {
  return r == OptionRole::any || r == OptionRole::prefill;
}
bool serves_decode(OptionRole r) {
  return r == OptionRole::any || r == OptionRole::decode;
}
bool serves_aggregated(OptionRole r) {
  return r == OptionRole::any || r == OptionRole::aggregated;
}

PlanError spec_error(std::string m) {
  return PlanError{PlanErrc::invalid_spec, std::move(m)};
}

}  // namespace

Expected<void, PlanError> validate(const PlannerSpec& spec) {
  if (spec.options.empty()) {
    return unexpected(
        spec_error("'planner.tensorParallelOptions' is empty; give one pool template per tensor-parallel size"));
  }
  if (spec.max_accelerators < 1 || spec.min_accelerators < 1 || spec.min_accelerators > spec.max_accelerators) {
    return unexpected(spec_error("'planner.minAccelerators' (" + std::to_string(spec.min_accelerators) +
                                 ") must be >= 1 and <= 'planner.maxAccelerators' (" +
                                 std::to_string(spec.max_accelerators) + ")"));
  }
  if (!(spec.target_share > 0 && spec.target_share <= 1)) {
    return unexpected(
        spec_error("'planner.targetShare' (" + json_number(spec.target_share) + ") must be in (0, 1]; e.g. 0.9"));
  }
  if (!(spec.grid.min_rate > 0) || !(spec.grid.growth > 1.0005) || !(spec.grid.growth <= 2)) {
    return unexpected(spec_error("'planner.rateResolution' (" + json_number(spec.grid.growth - 1) +
                                 ") must be in [0.001, 1] and 'planner.minRatePerSecond' > 0; e.g. 0.05 and 0.05"));
  }
  if (!(spec.probe_seconds >= 0)) {
    return unexpected(
        spec_error("'planner.probeSeconds' (" + json_number(spec.probe_seconds) + ") must be >= 0; e.g. 30"));
  }
  if (!(spec.bound_slack >= 1)) {
    return unexpected(
        spec_error("'planner.boundSlack' (" + json_number(spec.bound_slack) + ") must be >= 1; e.g. 1.5"));
  }
  if (!spec.aggregated && !spec.disaggregated) {
    return unexpected(
        spec_error("'planner.modes' allows neither aggregated nor disaggregated serving; give at least one"));
  }
  std::int32_t smallest = spec.options.front().accelerators_per_replica;
  for (std::size_t i = 0; i < spec.options.size(); ++i) {
    const PlanOption& o = spec.options[i];
    smallest = std::min(smallest, o.accelerators_per_replica);
    if (o.accelerators_per_replica < 1 || !(o.price_per_accelerator_hour > 0)) {
      return unexpected(spec_error("'planner.tensorParallelOptions[" + std::to_string(i) +
                                   "]' needs acceleratorsPerReplica >= 1 and pricePerAcceleratorHour > 0"));
    }
    if (auto cm = CostModel::create(o.pool.cost); !cm) {
      return unexpected(
          spec_error("'planner.tensorParallelOptions[" + std::to_string(i) + "]': " + cm.error().message()));
    }
  }
  const std::int32_t least = spec.disaggregated && !spec.aggregated ? 2 * smallest : smallest;
  if (least > spec.max_accelerators) {
    return unexpected(spec_error("'planner.maxAccelerators' (" + std::to_string(spec.max_accelerators) +
                                 ") is below the smallest deployment (" + std::to_string(least) +
                                 " accelerators); raise it to at least " + std::to_string(least)));
  }
  return {};
}

std::vector<PlanCandidate> enumerate_candidates(const PlannerSpec& spec) {
  std::vector<PlanCandidate> out;
  const auto& opts = spec.options;
  auto cost_of = [&](int option, int replicas) {
    return replicas * opts[option].accelerators_per_replica * opts[option].price_per_accelerator_hour;
  };
  if (spec.aggregated) {
    for (int o = 0; o < static_cast<int>(opts.size()); ++o) {
      if (!serves_aggregated(opts[o].role)) continue;
      for (int n = 1; n <= kMaxRoutingEndpoints && n * opts[o].accelerators_per_replica <= spec.max_accelerators; ++n) {
        const int acc = n * opts[o].accelerators_per_replica;
        if (acc < spec.min_accelerators) continue;
        PlanCandidate c;
        c.mode = PlanMode::aggregated;
        c.decode_option = o;
        c.decode_replicas = n;
        c.accelerators = acc;
        c.cost_per_hour = cost_of(o, n);
        c.order = static_cast<int>(out.size());
        out.push_back(c);
      }
    }
  }
  if (spec.disaggregated) {
    for (int a = 0; a < static_cast<int>(opts.size()); ++a) {
      if (!serves_prefill(opts[a].role)) continue;
      for (int b = 0; b < static_cast<int>(opts.size()); ++b) {
        if (!serves_decode(opts[b].role)) continue;
        const int pa = opts[a].accelerators_per_replica, pb = opts[b].accelerators_per_replica;
        for (int p = 1; p * pa + pb <= spec.max_accelerators; ++p) {
          for (int d = 1; p * pa + d * pb <= spec.max_accelerators && p + d <= kMaxRoutingEndpoints; ++d) {
            const int acc = p * pa + d * pb;
            if (acc < spec.min_accelerators) continue;
            PlanCandidate c;
            c.mode = PlanMode::disaggregated;
            c.prefill_option = a;
            c.decode_option = b;
            c.prefill_replicas = p;
            c.decode_replicas = d;
            c.accelerators = acc;
            c.cost_per_hour = cost_of(a, p) + cost_of(b, d);
            c.order = static_cast<int>(out.size());
            out.push_back(c);
          }
        }
      }
    }
  }
  return out;
}

namespace {

// Mean of a length distribution before clamping (the bound is a cap for the search, not a fact).
double mean_of(const LengthDist& d) {
  double m = d.kind == LengthDist::Kind::uniform ? 0.5 * (d.min + d.max) : d.mean;
  return std::clamp(m, static_cast<double>(d.min), static_cast<double>(d.max));
}

struct WorkloadShape {
  double fresh_prompt_tokens = 1;  // prompt tokens per request no prefix cache can hold
  double output_tokens = 1;
  double requests_per_arrival = 1;
};

WorkloadShape shape_of(const WorkloadSpec& w) {
  WorkloadShape s;
  s.output_tokens = std::max(1.0, mean_of(w.output));
  const double input = std::max(1.0, mean_of(w.input));
  switch (w.kind) {
    case WorkloadKind::single:
    case WorkloadKind::trace:
      // Users who repeat their fixed question find their whole prompt cached but the last token:
      // the bound (a cap on the search) must not count it as fresh.
      s.fresh_prompt_tokens = w.users_per_tenant > 0 && w.tenants > 0 ? 1.0 : input;
      break;
    case WorkloadKind::chat:
      s.fresh_prompt_tokens = std::min(input, std::max(1.0, mean_of(w.followup_input)));
      s.requests_per_arrival = std::max(1.0, mean_of(w.turns));
      break;
    case WorkloadKind::agentic:
      s.fresh_prompt_tokens = std::min(input, std::max(1.0, mean_of(w.tool_output)));
      s.requests_per_arrival = 1.0 + static_cast<double>(w.fanout) * w.depth;
      break;
  }
  return s;
}

// Decode tokens/s of one replica with every step within the TPOT target (0 when not even one
// sequence decodes that fast), and prefill tokens/s at full chunks.
struct ReplicaSpeed {
  double decode_tokens_per_second = 0;
  double prefill_tokens_per_second = 0;
};

ReplicaSpeed speed_of(const PoolSpec& pool, const WorkloadShape& shape, const Slo& slo) {
  ReplicaSpeed r;
  auto cm = CostModel::create(pool.cost);
  if (!cm) return r;
  const double chunk = std::max(1, pool.scheduler.max_num_batched_tokens);
  const double t_prefill = cm->prefill_chunk_time(static_cast<std::int64_t>(chunk), 0).total_seconds;
  // Pipeline stages prefill one chunk each at a time (disagg/cost_model.h): pp chunks per chunk time.
  r.prefill_tokens_per_second = t_prefill > 0 ? chunk * pool.cost.pipeline_parallel / t_prefill : 0;
  const auto ctx = static_cast<std::int64_t>(shape.fresh_prompt_tokens);
  const double kv_tokens = static_cast<double>(pool.scheduler.num_blocks) * pool.scheduler.block_size;
  const std::int64_t kv_limit =
      static_cast<std::int64_t>(kv_tokens / (shape.fresh_prompt_tokens + shape.output_tokens));
  std::int64_t hi = std::min<std::int64_t>(pool.scheduler.max_num_seqs, std::max<std::int64_t>(1, kv_limit));
  auto step = [&](std::int64_t b) { return cm->decode_batch_time(b, b * ctx).total_seconds; };
  if (shape.output_tokens <= 1) {
    r.decode_tokens_per_second = static_cast<double>(hi) / step(hi);
    return r;
  }
  if (step(1) > slo.tpot_seconds) return r;
  std::int64_t lo = 1;  // largest batch whose step meets the TPOT target
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo + 1) / 2;
    if (step(mid) <= slo.tpot_seconds) lo = mid;
    else hi = mid - 1;
  }
  r.decode_tokens_per_second = static_cast<double>(lo) / step(lo);
  return r;
}

}  // namespace

double roofline_bound_rate(const PlannerSpec& spec, const PlanCandidate& c, const WorkloadSpec& workload,
                           const Slo& slo) {
  const WorkloadShape shape = shape_of(workload);
  const ReplicaSpeed dec = speed_of(spec.options[c.decode_option].pool, shape, slo);
  double requests_per_second = 0;
  if (c.mode == PlanMode::aggregated) {
    if (dec.decode_tokens_per_second <= 0 || dec.prefill_tokens_per_second <= 0) return 0;
    // Prefill chunks ride along memory-bound decode steps, so the two works overlap: each caps the
    // rate on its own (a sum of their times would be no bound).
    requests_per_second = c.decode_replicas * std::min(dec.prefill_tokens_per_second / shape.fresh_prompt_tokens,
                                                       dec.decode_tokens_per_second / shape.output_tokens);
  } else {
    const ReplicaSpeed pre = speed_of(spec.options[c.prefill_option].pool, shape, slo);
    if (dec.decode_tokens_per_second <= 0) return 0;
    const double decode_rate = c.decode_replicas * dec.decode_tokens_per_second / shape.output_tokens;
    const double prefill_rate =
        (c.prefill_replicas * pre.prefill_tokens_per_second + c.decode_replicas * dec.prefill_tokens_per_second) /
        shape.fresh_prompt_tokens;
    requests_per_second = std::min(decode_rate, prefill_rate);
  }
  return requests_per_second / shape.requests_per_arrival;
}

SimulationConfig candidate_config(const PlannerSpec& spec, const PlanCandidate& c, const SimulationConfig& base) {
  SimulationConfig cfg = base;
  cfg.pools.clear();
  auto pool = [&](int option, WorkerRole role, int replicas, const char* name) {
    PoolSpec p = spec.options[option].pool;
    p.role = role;
    p.replicas = replicas;
    p.name = name;
    cfg.pools.push_back(std::move(p));
  };
  if (c.mode == PlanMode::aggregated) {
    pool(c.decode_option, WorkerRole::aggregated, c.decode_replicas, "workers");
  } else {
    pool(c.prefill_option, WorkerRole::prefill, c.prefill_replicas, "prefill");
    pool(c.decode_option, WorkerRole::decode, c.decode_replicas, "decode");
  }
  return cfg;
}

Expected<PlanResult, PlanError> search_plan(const PlannerSpec& spec, CandidateEvaluator& evaluator,
                                            const PlanProgressFn& progress) {
  if (auto valid = validate(spec); !valid) return unexpected(valid.error());
  std::vector<PlanCandidate> all = enumerate_candidates(spec);
  PlanResult result;
  result.total = static_cast<std::int32_t>(all.size());
  auto score_of = [](double rate, double cost) { return cost > 0 ? rate * 3600.0 / cost : 0.0; };
  for (PlanCandidate& c : all) {
    c.bound_rate = evaluator.bound_rate(c);
    c.cap_index = spec.grid.index_at_most(spec.bound_slack * c.bound_rate);
  }
  // Most promising first, so that the best is found early and prunes the rest.
  std::vector<std::size_t> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  auto cap_score = [&](const PlanCandidate& c) {
    return c.cap_index < 0 ? 0.0 : score_of(spec.grid.rate(c.cap_index), c.cost_per_hour);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return cap_score(all[a]) > cap_score(all[b]); });

  // Best scores among candidates reaching the required rate, highest first, at most rank_depth.
  std::vector<double> top;
  const std::size_t depth = static_cast<std::size_t>(std::max(1, spec.rank_depth));
  auto threshold_of = [&](const std::vector<double>& t) { return t.size() >= depth ? t.back() : -1.0; };
  auto pruned_before_search = [&](const PlanCandidate& c, const std::vector<double>& t) {
    return spec.prune && t.size() >= depth &&
           (cap_score(c) < threshold_of(t) || spec.grid.rate(c.cap_index) < spec.required_rate);
  };
  // Probes are pure functions of (candidate, rate index): each candidate's are kept, so that a
  // search repeated against another top (see PlannerSpec::threads) probes only what it did not.
  struct Probe {
    bool ok = false;
    MetricsSummary summary;
    std::optional<PlanError> error;
  };
  std::vector<std::map<int, Probe>> memo(all.size());
  // The knee search of one candidate against `t`: -2 pruned during the search, else the knee.
  // Counts requested probes in *simulations and keeps each probe's summary in *runs.
  auto search = [&](std::size_t idx, const std::vector<double>& t, std::int32_t* simulations,
                    std::map<int, MetricsSummary>* runs, std::optional<PlanError>* failure) {
    const PlanCandidate& c = all[idx];
    std::map<int, Probe>& m = memo[idx];
    auto passes = [&](int i) {
      if (*failure) return false;
      ++*simulations;
      auto it = m.find(i);
      if (it == m.end()) {
        Probe pr;
        auto ok = evaluator.passes(c, spec.grid.rate(i), &pr.summary);
        if (ok) pr.ok = *ok;
        else pr.error = ok.error();
        it = m.emplace(i, std::move(pr)).first;
      }
      if (it->second.error) {
        *failure = it->second.error;
        return false;
      }
      if (runs) (*runs)[i] = it->second.summary;
      return it->second.ok;
    };
    const bool full = spec.prune && t.size() >= depth;
    int start = spec.grid.index_at_most(0.7 * c.bound_rate);
    if (full) {
      // Probe first where the candidate would just enter the top: one failing probe there ends it.
      const double needed = std::max(threshold_of(t) * c.cost_per_hour / 3600.0, spec.required_rate);
      start = std::max(start, spec.grid.index_at_most(needed) + 1);
    }
    // Once a failing probe puts the knee below the top's threshold, the rest does not matter.
    auto hopeless = [&](int fail) {
      return full && (fail == 0 || score_of(spec.grid.rate(fail - 1), c.cost_per_hour) < threshold_of(t) ||
                      spec.grid.rate(fail - 1) < spec.required_rate);
    };
    return find_knee(start < 0 ? 0 : start, c.cap_index, passes, hopeless);
  };
  int threads = spec.threads > 0 ? spec.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = evaluator.thread_safe() ? std::clamp(threads, 1, 8) : 1;

  PlanProgress prog;
  prog.candidates_total = result.total;
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const std::size_t idx = order[pos];
    PlanCandidate& c = all[idx];
    if (c.cap_index < 0) {
      c.status = CandidateStatus::infeasible;
    } else if (pruned_before_search(c, top)) {
      c.status = CandidateStatus::pruned;
    } else {
      if (threads > 1 && memo[idx].empty()) {
        // Speculate: this candidate and the next ones the current top would search, in parallel.
        std::vector<std::size_t> batch;
        for (std::size_t q = pos; q < order.size() && batch.size() < static_cast<std::size_t>(threads); ++q) {
          const PlanCandidate& d = all[order[q]];
          if (d.cap_index >= 0 && !pruned_before_search(d, top) && memo[order[q]].empty()) batch.push_back(order[q]);
        }
        std::vector<std::thread> pool;
        for (std::size_t b = 1; b < batch.size(); ++b) {
          pool.emplace_back([&, b] {
            std::int32_t ignored = 0;
            std::optional<PlanError> failure;
            search(batch[b], top, &ignored, nullptr, &failure);
          });
        }
        {
          std::int32_t ignored = 0;
          std::optional<PlanError> failure;
          search(batch[0], top, &ignored, nullptr, &failure);
        }
        for (std::thread& th : pool) th.join();
      }
      // The sequential search, against the top its predecessors left (probes mostly remembered).
      std::map<int, MetricsSummary> runs;
      std::optional<PlanError> failure;
      c.knee_index = search(idx, top, &c.simulations, &runs, &failure);
      if (failure) return unexpected(*failure);
      result.simulations += c.simulations;
      if (c.knee_index == -2) {
        c.knee_index = -1;
        c.status = CandidateStatus::pruned;
        memo[idx].clear();
        ++prog.candidates_done;
        prog.simulations = result.simulations;
        if (progress) progress(prog);
        continue;
      }
      c.status = CandidateStatus::evaluated;
      c.goodput_rate = c.knee_index >= 0 ? spec.grid.rate(c.knee_index) : 0;
      c.capped = c.knee_index == c.cap_index;
      c.score = score_of(c.goodput_rate, c.cost_per_hour);
      c.meets_required = c.knee_index >= 0 && c.goodput_rate >= spec.required_rate;
      if (auto it = runs.find(c.knee_index); it != runs.end()) {
        c.has_summary = true;
        c.summary = it->second;
      }
      if (c.meets_required) {
        top.insert(std::upper_bound(top.begin(), top.end(), c.score, std::greater<double>()), c.score);
        if (top.size() > depth) top.pop_back();
      }
    }
    memo[idx].clear();  // its probes are no longer needed
    ++prog.candidates_done;
    prog.simulations = result.simulations;
    prog.best_score = top.empty() ? 0 : top.front();
    if (progress) progress(prog);
  }
  auto rank_key = [](const PlanCandidate& c) { return static_cast<int>(c.status); };
  std::stable_sort(all.begin(), all.end(), [&](const PlanCandidate& a, const PlanCandidate& b) {
    if (rank_key(a) != rank_key(b)) return rank_key(a) < rank_key(b);
    if (a.status == CandidateStatus::evaluated) {
      if (a.meets_required != b.meets_required) return a.meets_required;
      if (a.score != b.score) return a.score > b.score;
      if (a.accelerators != b.accelerators) return a.accelerators < b.accelerators;
      return a.order < b.order;
    }
    const double sa = cap_score(a), sb = cap_score(b);
    if (sa != sb) return sa > sb;
    return a.order < b.order;
  });
  for (const PlanCandidate& c : all) {
    if (c.status == CandidateStatus::evaluated) ++result.evaluated;
    else if (c.status == CandidateStatus::pruned) ++result.pruned;
    else ++result.infeasible;
  }
  if (spec.keep > 0 && static_cast<std::int32_t>(all.size()) > spec.keep)
    all.resize(static_cast<std::size_t>(spec.keep));
  result.candidates = std::move(all);
  return result;
}

namespace {

// Records a trace probe replays at least (its window of probeSeconds may be shorter).
constexpr std::int64_t kMinTraceProbeRecords = 1000;

// The simulator-backed evaluator: one Simulator and Workload per probe, same seed every time.
class SimulatorEvaluator final : public CandidateEvaluator {
 public:
  SimulatorEvaluator(const PlannerSpec& spec, const SimulationConfig& base, const WorkloadSpec& workload,
                     const PlanTrace* trace)
      : spec_(spec), base_(base), workload_(workload), trace_(trace) {}

  double bound_rate(const PlanCandidate& c) override { return roofline_bound_rate(spec_, c, workload_, base_.slo); }

  // Each probe builds its own Simulator and Workload from read-only inputs.
  bool thread_safe() const override { return true; }

  Expected<bool, PlanError> passes(const PlanCandidate& c, double rate, MetricsSummary* summary) override {
    auto sim = Simulator::create(candidate_config(spec_, c, base_));
    if (!sim) return unexpected(PlanError{PlanErrc::invalid_spec, sim.error().message});
    const auto window = static_cast<std::int64_t>(std::ceil(rate * spec_.probe_seconds));
    Expected<Workload, WorkloadError> workload = unexpected(WorkloadError{});
    if (trace_ != nullptr) {
      // The trace at the probe's rate: its gaps scaled by own rate / probe rate.
      // A probe replays the trace's first probe-window of records (at least kMinTraceProbeRecords),
      // as a generated probe simulates a window of arrivals.
      TraceSpec ts = trace_->spec;
      ts.time_scale = trace_->spec.time_scale * trace_->rate_per_second / rate;
      const std::int64_t n = std::min(trace_->records, std::max(window, kMinTraceProbeRecords));
      const std::size_t bytes = trace_->record_ends[static_cast<std::size_t>(n - 1)];
      workload = Workload::from_trace(std::string_view(trace_->jsonl).substr(0, bytes), ts);
    } else {
      WorkloadSpec w = workload_;
      w.fresh_text = false;  // the simulator hashes shared prefixes only
      w.arrival.rate_per_second = rate;
      if (w.max_requests > 0) w.max_requests = std::max(w.max_requests, window);
      workload = Workload::create(w);
    }
    if (!workload) return unexpected(PlanError{PlanErrc::invalid_spec, workload.error().message});
    auto run = sim->run(*workload);
    if (!run) return unexpected(PlanError{PlanErrc::simulation_failed, run.error().message});
    *summary = run->summary;
    return run->summary.goodput_share >= spec_.target_share;
  }

 private:
  const PlannerSpec& spec_;
  const SimulationConfig& base_;
  const WorkloadSpec& workload_;
  const PlanTrace* trace_;
};

}  // namespace

Expected<PlanTrace, PlanError> load_plan_trace(const std::string& path, const TraceSpec& spec) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return unexpected(spec_error("'workload.trace.path' (" + path + ") cannot be read; give a JSONL trace file"));
  PlanTrace t;
  t.spec = spec;
  t.jsonl.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::unordered_set<std::int64_t> seen;
  double first = 0, last = 0, input = 0, output = 0, fresh = 0;
  std::size_t pos = 0;
  std::int64_t line_no = 0;
  while (pos < t.jsonl.size() && t.records < spec.max_records) {
    std::size_t end = t.jsonl.find('\n', pos);
    if (end == std::string::npos) end = t.jsonl.size();
    const std::string_view line(t.jsonl.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto rec = parse_trace_line(line);
    if (!rec) return unexpected(spec_error(path + ":" + std::to_string(line_no) + ": " + rec.error()));
    if (t.records == 0) first = rec->timestamp_ms;
    last = rec->timestamp_ms;
    ++t.records;
    t.record_ends.push_back(std::min(pos, t.jsonl.size()));
    input += rec->input_length;
    output += rec->output_length;
    std::int64_t reused = 0;
    for (const std::int64_t h : rec->hash_ids) reused += seen.insert(h).second ? 0 : 1;
    fresh += std::max(1.0, rec->input_length - static_cast<double>(reused) * spec.trace_block_tokens);
  }
  const double span_seconds = (last - first) / 1000.0 * spec.time_scale;
  if (t.records < 2 || !(span_seconds > 0)) {
    return unexpected(spec_error("'workload.trace.path' (" + path + ") has " + std::to_string(t.records) +
                                 " records over " + json_number(span_seconds) +
                                 " s; planning needs at least two records at different times (the trace's rate)"));
  }
  const double n = static_cast<double>(t.records);
  t.rate_per_second = (n - 1) / span_seconds;
  t.mean_input_tokens = input / n;
  t.mean_output_tokens = output / n;
  t.mean_fresh_tokens = fresh / n;
  return t;
}

double probe_window_seconds(double probe_seconds, const Slo& slo, double mean_output_tokens) {
  if (!(probe_seconds > 0)) return 0;
  const double lifetime = slo.ttft_seconds + std::max(1.0, mean_output_tokens) * slo.tpot_seconds;
  return std::max(probe_seconds, std::min(kProbeLifetimes * lifetime, kMaxProbeSeconds));
}

Expected<PlanResult, PlanError> run_planner(const PlannerSpec& given, const SimulationConfig& base,
                                            const WorkloadSpec& workload, const PlanProgressFn& progress,
                                            const PlanTrace* trace) {
  PlannerSpec spec = given;
  spec.probe_seconds = probe_window_seconds(
      given.probe_seconds, base.slo, trace != nullptr ? trace->mean_output_tokens : shape_of(workload).output_tokens);
  const auto finish = [&](Expected<PlanResult, PlanError> r) {
    if (r) r->probe_seconds = spec.probe_seconds;
    return r;
  };
  if (trace != nullptr) {
    // The bound sees the trace as one-shot requests of its mean shape, counting as fresh only what
    // no earlier record's blocks hold; the deployment must carry the trace's own rate.
    WorkloadSpec shape;
    shape.kind = WorkloadKind::single;
    shape.input = {LengthDist::Kind::fixed, trace->mean_fresh_tokens, 0, 1, 1 << 30};
    shape.output = {LengthDist::Kind::fixed, std::max(1.0, trace->mean_output_tokens), 0, 1, 1 << 30};
    PlannerSpec traced = spec;
    traced.required_rate = std::max(spec.required_rate, trace->rate_per_second);
    SimulatorEvaluator evaluator(traced, base, shape, trace);
    auto result = search_plan(traced, evaluator, progress);
    if (result) {
      result->trace_records = trace->records;
      result->trace_rate_per_second = trace->rate_per_second;
    }
    return finish(std::move(result));
  }
  if (workload.kind == WorkloadKind::trace) {
    return unexpected(
        spec_error("'workload.kind' (\"trace\") is planned from its file: pass the trace "
                   "(load_plan_trace) to run_planner"));
  }
  if (!workload.arrival.stages.empty()) {
    return unexpected(
        spec_error("'workload.arrival.stages' cannot be planned: stages fix their own arrival rates, and "
                   "the planner searches the rate; plan with one ratePerSecond, then check the result "
                   "with `simulate` on the stages"));
  }
  if (workload.max_requests <= 0 && workload.duration_seconds <= 0) {
    return unexpected(
        spec_error("'workload.requests' must be > 0 for planning (each probe simulates that many requests); e.g. 500"));
  }
  SimulatorEvaluator evaluator(spec, base, workload, nullptr);
  return finish(search_plan(spec, evaluator, progress));
}

namespace {

void put_pool(std::string& o, const PlannerSpec& spec, const char* role, int option, int replicas) {
  const PlanOption& opt = spec.options[static_cast<std::size_t>(option)];
  o += "{\"role\":";
  o += json_quote(role);
  o += ",\"option\":";
  o += json_quote(opt.label);
  o += ",\"tensorParallel\":" + std::to_string(opt.pool.cost.tensor_parallel);
  o += ",\"acceleratorsPerReplica\":" + std::to_string(opt.accelerators_per_replica);
  o += ",\"replicas\":" + std::to_string(replicas) + "}";
}

}  // namespace

std::string to_json(const PlanResult& r, const PlannerSpec& spec) {
  std::string o = "{\"total\":" + std::to_string(r.total) + ",\"evaluated\":" + std::to_string(r.evaluated) +
                  ",\"pruned\":" + std::to_string(r.pruned) + ",\"infeasible\":" + std::to_string(r.infeasible) +
                  ",\"simulations\":" + std::to_string(r.simulations) +
                  ",\"targetShare\":" + json_number(spec.target_share) +
                  ",\"probeSeconds\":" + json_number(r.probe_seconds > 0 ? r.probe_seconds : spec.probe_seconds) +
                  ",\"grid\":{\"minRatePerSecond\":" + json_number(spec.grid.min_rate) +
                  ",\"rateResolution\":" + json_number(spec.grid.growth - 1) + "}";
  if (r.trace_records > 0) {
    o += ",\"trace\":{\"records\":" + std::to_string(r.trace_records) +
         ",\"ratePerSecond\":" + json_number(r.trace_rate_per_second) + "}";
  }
  o += ",\"candidates\":[";
  int rank = 0;
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const PlanCandidate& c = r.candidates[i];
    if (i) o += ',';
    o += "{\"rank\":";
    o += c.status == CandidateStatus::evaluated ? std::to_string(++rank) : "null";
    o += ",\"mode\":";
    o += json_quote(to_string(c.mode));
    o += ",\"pools\":[";
    if (c.mode == PlanMode::aggregated) {
      put_pool(o, spec, "both", c.decode_option, c.decode_replicas);
    } else {
      put_pool(o, spec, "prefill", c.prefill_option, c.prefill_replicas);
      o += ',';
      put_pool(o, spec, "decode", c.decode_option, c.decode_replicas);
    }
    o += "],\"accelerators\":" + std::to_string(c.accelerators);
    o += ",\"costPerHour\":" + json_number(c.cost_per_hour);
    o += ",\"status\":" + json_quote(to_string(c.status));
    o += ",\"boundRatePerSecond\":" + json_number(c.bound_rate);
    o += ",\"goodputRatePerSecond\":" + json_number(c.goodput_rate);
    o += ",\"capped\":";
    o += c.capped ? "true" : "false";
    o += ",\"score\":" + json_number(c.score);
    o += ",\"meetsRequiredRate\":";
    o += c.meets_required ? "true" : "false";
    o += ",\"simulations\":" + std::to_string(c.simulations);
    o += ",\"summary\":";
    o += c.has_summary ? to_json(c.summary) : "null";
    o += '}';
  }
  return o + "]}";
}

}  // namespace disagg
