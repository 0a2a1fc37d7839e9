// disagg/planner.h — search for the deployment with the highest goodput per accelerator-dollar.
//
// Goodput of a deployment = the highest arrival rate at which at least `target_share` of the
// requests meet both SLOs (TTFT and TPOT; disagg/metrics.h). The planner finds it per candidate by
// simulating the workload at a rate and checking attainment, on a fixed geometric grid of rates
// (rate(i) = min_rate x growth^i): exponential search from a start index, then bisection between
// the last passing and the first failing index. Under an attainment that does not rise with the
// rate, the answer is the exact knee index whatever the probe order, so results are deterministic
// and independent of which other candidates were searched.
//
// Candidates: every split of at most max_accelerators over
//   aggregated     n replicas of one tensor-parallel option (role both), and
//   disaggregated  p prefill replicas of option a and d decode replicas of option b (p, d >= 1).
// The options (one per tensor-parallel size, possibly per instance type) are resolved by the
// TypeScript side from src/catalog and src/sizing: the engine keeps no hardware table.
//
// Score = goodput x 3600 / (accelerators x price per accelerator-hour): requests per dollar (or per
// accelerator-hour when no price is given). Ranking: candidates reaching required_rate first, then
// score (higher first), then fewer accelerators, then enumeration order.
//
// Pruning (exact for the top rank_depth): each candidate's search is capped at slack x its roofline
// bound (a rate above which the hardware cannot keep up: decode tokens/s under the TPOT target,
// prefill tokens/s of the fresh prompt text). Candidates are searched in descending bound-score
// order; one whose capped score is below the rank_depth-th best score found so far is not
// simulated, because its search could not return more than the cap; a search stops as soon as a
// failing probe shows the same. A search that still passes at the cap reports `capped`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "disagg/expected.h"
#include "disagg/metrics.h"
#include "disagg/simulator.h"
#include "disagg/workload.h"

namespace disagg {

/// Geometric grid of arrival rates shared by every candidate, so their goodputs compare exactly.
struct RateGrid {
  double min_rate = 0.05;  ///< rate(0), arrivals per second
  double growth = 1.05;    ///< rate(i+1) / rate(i); the relative resolution of a goodput
  double rate(int index) const;
  /// Largest index whose rate is <= `rate` (-1 when below min_rate).
  int index_at_most(double rate) const;
};

/// Largest index i in [0, hi] with passes(i), for a `passes` that is true up to a knee and false
/// after it; -1 when passes(0) is false (or hi < 0). Starts at `start` (clamped to [0, hi]),
/// doubles its step until it brackets the knee, then bisects. Each index is probed at most once;
/// O(log hi) probes.
int find_knee(int start, int hi, const std::function<bool(int)>& passes);

/// find_knee that gives up: after each failing probe at index `fail`, when hopeless(fail) is true
/// (the knee, now known to be below `fail`, cannot matter), it stops and returns -2.
int find_knee(int start, int hi, const std::function<bool(int)>& passes, const std::function<bool(int)>& hopeless);

enum class PlanMode : std::uint8_t { aggregated, disaggregated };
std::string_view to_string(PlanMode mode);

/// Which pools a tensor-parallel option may serve.
enum class OptionRole : std::uint8_t { any, prefill, decode, aggregated };

/// One tensor-parallel choice: a pool template whose `replicas` and `role` the planner sets.
struct PlanOption {
  PoolSpec pool;
  std::int32_t accelerators_per_replica = 1;  ///< default tensorParallel x pipelineParallel
  double price_per_accelerator_hour = 1;
  OptionRole role = OptionRole::any;
  std::string label;  ///< for reports, e.g. "tp4"
};

struct PlannerSpec {
  std::vector<PlanOption> options;
  std::int32_t max_accelerators = 8;
  std::int32_t min_accelerators = 1;
  bool aggregated = true;
  bool disaggregated = true;
  /// Share of requests that must meet both SLOs.
  double target_share = 0.9;
  RateGrid grid;
  /// Search cap = slack x roofline bound (>= 1).
  double bound_slack = 1.5;
  /// Candidates below this goodput rank after those that reach it (0: none).
  double required_rate = 0;
  /// Skip candidates that cannot enter the top `rank_depth` (exact; off for tests and audits).
  bool prune = true;
  /// Candidates searched at once when the evaluator is thread-safe: each batch probes them against
  /// the top as it stands, then they are committed in order, each re-checked against the top its
  /// predecessors left (probes are pure, so a changed top re-uses them and probes only what differs).
  /// The result is the sequential search's, to the digit. 0: one per hardware thread, at most 8.
  std::int32_t threads = 0;
  /// How many of the best candidates are searched to the end (their goodputs exact); the others
  /// stop as soon as they are known to rank lower.
  std::int32_t rank_depth = 3;
  /// Each probe's arrivals span at least this long (requests = max(workload requests, rate x
  /// window)): an overloaded deployment fails only once its queue has grown past the TTFT target,
  /// which a short run at a high rate never shows. The window is the longer of this and
  /// kProbeLifetimes request lifetimes at the SLO's edge (TTFT + mean output x TPOT), at most
  /// kMaxProbeSeconds (never below this): decode batches fill over one lifetime, so a shorter run
  /// judges a deployment before its TPOT has grown (PlanResult::probe_seconds is the one used).
  /// 0: no window (each probe simulates the workload's requests only).
  double probe_seconds = 30;
  /// At most this many candidates in the result's ranked list (0: all).
  std::int32_t keep = 0;
};

enum class CandidateStatus : std::uint8_t { evaluated, pruned, infeasible };
std::string_view to_string(CandidateStatus status);

/// One deployment of the search space and what the search found about it.
struct PlanCandidate {
  PlanMode mode = PlanMode::aggregated;
  std::int32_t prefill_option = -1;   ///< option index; -1 when aggregated
  std::int32_t decode_option = -1;    ///< option index (aggregated: the one option)
  std::int32_t prefill_replicas = 0;  ///< 0 when aggregated
  std::int32_t decode_replicas = 0;   ///< aggregated: the replicas
  std::int32_t accelerators = 0;
  double cost_per_hour = 0;
  std::int32_t order = 0;  ///< enumeration order (last tie-break)

  double bound_rate = 0;        ///< roofline bound of the arrival rate
  std::int32_t cap_index = -1;  ///< search cap on the grid (slack x bound)
  CandidateStatus status = CandidateStatus::infeasible;
  std::int32_t knee_index = -1;
  double goodput_rate = 0;  ///< grid rate at the knee (0: no rate on the grid meets the SLO)
  bool capped = false;      ///< passed at the cap: the goodput may be higher
  double score = 0;         ///< goodput x 3600 / cost_per_hour
  bool meets_required = true;
  std::int32_t simulations = 0;
  bool has_summary = false;
  MetricsSummary summary;  ///< the run at the knee rate (has_summary)
};

struct PlanProgress {
  std::int32_t candidates_done = 0;
  std::int32_t candidates_total = 0;
  std::int64_t simulations = 0;
  double best_score = 0;
};
using PlanProgressFn = std::function<void(const PlanProgress&)>;

/// A trace to plan for (`plan --simulate --trace`): its text, kept for every probe, and what the
/// search needs to know of it. Each probe replays the trace compressed or stretched in time so that
/// its mean arrival rate is the probe's rate (TraceSpec::time_scale), its first probeSeconds x rate
/// records (at least 1,000); the trace's own rate becomes the rate the deployment must reach.
struct PlanTrace {
  std::string jsonl;
  TraceSpec spec;
  std::int64_t records = 0;
  /// Offset in jsonl just past each record's line: a probe replays jsonl's first k records.
  std::vector<std::size_t> record_ends;
  /// Mean arrival rate of the records as given (after spec.time_scale), requests/s.
  double rate_per_second = 0;
  double mean_input_tokens = 0, mean_output_tokens = 0;
  /// Mean prompt tokens not in an earlier record's blocks (an ideal prefix cache's misses).
  double mean_fresh_tokens = 0;
};

/// Request lifetimes at the SLO's edge each probe's arrivals span (PlannerSpec::probe_seconds):
/// a third of them ramp up, the rest run at the load's own batch sizes. Measured: OPT-13B under
/// vLLM V0 on A100 (190-token outputs, TPOT 100 ms) read 2.3x its goodput with a 30 s window, 1.2x
/// with 60 s, against 120 s (bench/notes/validation-pd.md).
inline constexpr double kProbeLifetimes = 4;
/// The most a lifetime-scaled window grows to (bounds a probe of very long outputs).
inline constexpr double kMaxProbeSeconds = 600;

/// The arrivals window of each probe: PlannerSpec::probe_seconds or kProbeLifetimes lifetimes of a
/// request of `mean_output_tokens` at the SLO's edge, whichever is longer, capped at
/// kMaxProbeSeconds (or at probe_seconds when that is larger); 0 when probe_seconds is 0.
double probe_window_seconds(double probe_seconds, const Slo& slo, double mean_output_tokens);

struct PlanResult {
  /// Evaluated candidates in rank order, then pruned, then infeasible ones.
  std::vector<PlanCandidate> candidates;
  /// The arrivals window each probe spanned (probe_window_seconds).
  double probe_seconds = 0;
  std::int32_t total = 0, evaluated = 0, pruned = 0, infeasible = 0;
  std::int64_t simulations = 0;
  /// Planned for a trace: its records and own arrival rate (0 otherwise).
  std::int64_t trace_records = 0;
  double trace_rate_per_second = 0;
};

enum class PlanErrc { invalid_spec, simulation_failed };
struct PlanError {
  PlanErrc code = PlanErrc::invalid_spec;
  std::string message;  ///< names the field, the value and the fix
};

/// Reads and measures a JSONL trace (the simulator's format) for planning. Failure: invalid_spec
/// naming the file or line (unreadable, empty, a syntax error, all arrivals at one instant).
Expected<PlanTrace, PlanError> load_plan_trace(const std::string& path, const TraceSpec& spec);

/// What the search needs to know about candidates; the simulator-backed one is made by
/// run_planner, tests pass synthetic ones.
class CandidateEvaluator {
 public:
  virtual ~CandidateEvaluator() = default;
  /// Roofline bound of the arrival rate (0: the candidate can never meet the SLO).
  virtual double bound_rate(const PlanCandidate& candidate) = 0;
  /// Whether the target share meets the SLOs at `rate`; fills *summary when it ran a simulation.
  virtual Expected<bool, PlanError> passes(const PlanCandidate& candidate, double rate, MetricsSummary* summary) = 0;
  /// Whether passes() may run on several threads at once (then search_plan uses PlannerSpec::threads).
  virtual bool thread_safe() const { return false; }
};

/// Every candidate of the spec's search space, in enumeration order (costs filled in).
std::vector<PlanCandidate> enumerate_candidates(const PlannerSpec& spec);

/// Validates the spec: at least one option, limits >= 1, share in (0, 1], grid and slack sane.
Expected<void, PlanError> validate(const PlannerSpec& spec);

/// The search over `enumerate_candidates(spec)` with `evaluator`. `progress` (optional) is called
/// after each candidate, on the calling thread.
Expected<PlanResult, PlanError> search_plan(const PlannerSpec& spec, CandidateEvaluator& evaluator,
                                            const PlanProgressFn& progress = {});

/// The planner on the simulator: each probe runs `workload` (its arrival rate replaced by the probe
/// rate, same seed for every probe) on the candidate's pools with `base`'s router and SLO.
/// With `trace`, each probe replays the trace at the probe's rate instead (see PlanTrace), and the
/// required rate is at least the trace's own. A trace workload without `trace` is refused.
/// Deterministic for a seed.
Expected<PlanResult, PlanError> run_planner(const PlannerSpec& spec, const SimulationConfig& base,
                                            const WorkloadSpec& workload, const PlanProgressFn& progress = {},
                                            const PlanTrace* trace = nullptr);

/// Roofline bound of a candidate's arrival rate for `workload` under `slo` (see the header comment).
double roofline_bound_rate(const PlannerSpec& spec, const PlanCandidate& candidate, const WorkloadSpec& workload,
                           const Slo& slo);

/// The simulation of one candidate at one rate (pools from the options, router and SLO from `base`).
SimulationConfig candidate_config(const PlannerSpec& spec, const PlanCandidate& candidate,
                                  const SimulationConfig& base);

/// The result as JSON: {"candidates": [...], "total", "evaluated", "pruned", "infeasible",
/// "simulations", "grid": {...}, "targetShare"}; each candidate names its options' labels.
std::string to_json(const PlanResult& result, const PlannerSpec& spec);

}  // namespace disagg
