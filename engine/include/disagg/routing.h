// disagg/routing.h — routing policies behind one interface, and the prefill/decode decider.
//
// The router (real clock) and the simulator (virtual clock) do not call a policy directly: both
// route through RoutePlanner (disagg/route_plan.h), which calls it in one sequence per request:
//   1. a RouteRequest (prompt length, chained block hashes of its full blocks) and a span of
//      EndpointState (one per endpoint, refreshed from metrics or from the simulation);
//   2. choose() — const, never allocates, never throws — once per role the request needs;
//   3. on_routed() with each chosen endpoint (round robin advances in that role, approximate
//      prefix histories learn the request, precise ones remember it as pending until its KV
//      events can have arrived); on_finished() when a leg ends.
// Policies keep their state per role: picks in one role never move another role's rotation.
//
// Scores are costs: lower is better; +infinity marks an endpoint that must not be chosen (unhealthy,
// other role). choose() returns the eligible endpoint of least cost; among k endpoints of equal
// least cost it takes the (seed mod k)-th in span order, seed = session_key, or request_id when
// session_key is 0: equal endpoints share load evenly (an endpoint that loses on cost does not
// hand its share to its neighbour) and a session sticks to one of equals.
//
// Policies (names for make_routing_policy):
//   "round-robin"  next healthy endpoint after the last one routed to
//   "least-load"   fewest running + waiting requests, ties by KV usage
//   "llm-d"        weighted scorers: queue 2, KV utilization 2, prefix 3 (precise on a KvBlockIndex
//                  plus the blocks routed in the last pendingBlocksMs, or approximate on an LRU
//                  history of 31,250 blocks per endpoint)
//   "sglang"       cache-aware: best prefix match when match ratio > 0.3, else smallest history;
//                  shortest queue while loads are imbalanced (max - min > 64 and max > 1.5 min)
//   "dynamo"       prefill_blocks - overlap_credit x tier-weighted cached blocks + decode_blocks
//   "disagg"       ours: expected time to first token (queueing + uncached prefill - tier-weighted
//                  reuse) plus a KV-pressure penalty, behind a load-balance guard (engine/README.md)
//
// Preconditions for every policy: endpoints.size() <= kMaxRoutingEndpoints and every
// EndpointState::id < kMaxRoutingEndpoints and unique; with a precise index, endpoints whose ids it
// does not cover (>= its config().max_endpoints) are routed as if the index held no prefix for them
// (the approximate history and the precise source's pending routes cover every id). Positions
// beyond kMaxRoutingEndpoints are ignored.
//
// Thread-safety: not thread-safe. choose()/score() are const and may run concurrently with each
// other, but not with on_routed()/on_finished() or with writes to a KvBlockIndex the policy reads.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "disagg/block_hash.h"
#include "disagg/expected.h"
#include "disagg/kv_block_index.h"

namespace disagg {

/// What an endpoint serves.
enum class EndpointRole : std::uint8_t {
  aggregated = 0,  ///< prefill and decode in one worker
  prefill = 1,     ///< prefill only; hands KV to a decode endpoint
  decode = 2,      ///< decode; also prefills locally when the decider keeps a request whole
};

/// Stable lower-case name of a role, e.g. "prefill".
std::string_view to_string(EndpointRole role);

/// What the router knows about one endpoint when it routes a request (a snapshot; may be stale).
struct EndpointState {
  /// Dense id (< kMaxRoutingEndpoints), the same id the KvBlockIndex and policy histories use.
  EndpointId id = 0;
  EndpointRole role = EndpointRole::aggregated;
  /// False after failed health checks or passive ejection: never chosen.
  bool healthy = true;
  /// Requests being decoded or prefilled (vllm:num_requests_running).
  std::int32_t running_requests = 0;
  /// Requests queued, not yet scheduled (vllm:num_requests_waiting).
  std::int32_t waiting_requests = 0;
  /// Fraction of KV blocks in use, in [0, 1] (vllm:kv_cache_usage_perc).
  double kv_usage = 0;
  /// KV blocks free now (0 when unknown; then kv_usage is used alone).
  std::int64_t free_kv_blocks = 0;
  /// KV blocks in all (0 when unknown).
  std::int64_t total_kv_blocks = 0;
  /// Prompt tokens routed here and not yet prefilled (queued and in-progress prefill work).
  std::int64_t inflight_prefill_tokens = 0;
  /// Estimated prefill throughput in tokens/s (e.g. from the cost model); 0 = the policy default.
  double prefill_tokens_per_second = 0;
  /// Legs this router has in flight on the endpoint, counted from dispatch to the leg's end (a
  /// prefill leg counts on the prefill endpoint, the request on its decode endpoint from the
  /// decision on). Exact and immediate, unlike running/waiting, which are the endpoint's last load
  /// report: RoutePlanner counts the ones that report does not show yet as waiting (route_plan.h).
  std::int32_t routed_requests = 0;
  /// Changes when the id is given to another endpoint (a router reuses ids): a session pinned to
  /// an earlier generation of the id is not kept there.
  std::uint32_t generation = 0;

  /// running + waiting: the load most policies balance.
  std::int64_t load() const { return std::int64_t{running_requests} + waiting_requests; }
};

/// One request to place.
struct RouteRequest {
  /// Unique per request; also spreads ties between equal endpoints.
  std::uint64_t request_id = 0;
  /// Prompt length in tokens (including tokens not covered by full blocks).
  std::int64_t prompt_tokens = 0;
  /// Expected output tokens (max_tokens when known); 0 = unknown.
  std::int64_t output_tokens = 0;
  /// Chained hashes of the prompt's full blocks, in order (block_hash.h, or vLLM's from KV events).
  /// Must stay valid during choose() and on_routed().
  std::span<const BlockHash> block_hashes;
  /// Tokens per hashed block. Precondition: >= 1.
  std::int32_t block_size = 16;
  /// Endpoints of this role are eligible.
  EndpointRole role = EndpointRole::aggregated;
  /// Session affinity key (e.g. a hashed header); 0 = none. Used by "disagg" as a tie-breaker.
  std::uint64_t session_key = 0;
  /// Tenant (e.g. of a multi-tenant system prompt); informational for now.
  std::uint32_t tenant = 0;
  /// The caller's clock at the decision, in milliseconds: the router's steady clock, the
  /// simulator's virtual one. Any origin; must not decrease from one request to the next. Read by
  /// precise prefix sources to expire the blocks they routed but have not yet seen in a KV event
  /// (PolicyOptions::pending_blocks_ms); a caller that leaves it 0 never expires them by time.
  std::int64_t now_ms = 0;
};

/// Result of choose().
struct RouteDecision {
  /// Position of the chosen endpoint in the span; -1 when no endpoint is eligible.
  std::int32_t index = -1;
  /// Its id (valid when index >= 0).
  EndpointId endpoint = 0;
  /// Leading prompt blocks the policy believes the endpoint holds (any tier); 0 for policies that
  /// do not track prefixes.
  std::int32_t cached_blocks = 0;
  /// Its cost (lower is better).
  double score = std::numeric_limits<double>::infinity();

  bool ok() const { return index >= 0; }
};

/// Cost of an endpoint that must not be chosen.
inline constexpr double kIneligible = std::numeric_limits<double>::infinity();

/// Whether `e` may serve `request`: healthy and of the requested role.
inline bool eligible(const EndpointState& e, const RouteRequest& request) {
  return e.healthy && e.role == request.role;
}

/// A routing policy. See the file comment for the call sequence and contracts.
class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;

  /// The name it was made with, e.g. "llm-d".
  virtual std::string_view name() const noexcept = 0;

  /// Writes the cost of each endpoint to out[i] for i < min(endpoints.size(), out.size(),
  /// kMaxRoutingEndpoints); kIneligible for endpoints that must not be chosen. Never allocates.
  virtual void score(const RouteRequest& request, std::span<const EndpointState> endpoints,
                     std::span<double> out) const noexcept = 0;

  /// The eligible endpoint of least cost (ties: see the file comment), or index -1. Never allocates.
  virtual RouteDecision choose(const RouteRequest& request, std::span<const EndpointState> endpoints) const noexcept;

  /// The request was dispatched to `chosen`. Approximate policies learn from it here; may allocate
  /// nothing beyond what create-time bounds allow.
  virtual void on_routed(const RouteRequest& request, const EndpointState& chosen) {
    (void)request;
    (void)chosen;
  }

  /// Leading prompt blocks the policy believes `endpoint` holds (any tier), as choose() reports in
  /// RouteDecision::cached_blocks had it chosen that endpoint; 0 for policies that do not track
  /// prefixes. Used when session affinity keeps a request off the policy's pick. Never allocates.
  virtual std::int32_t cached_prefix(const RouteRequest& request, const EndpointState& endpoint) const noexcept {
    (void)request;
    (void)endpoint;
    return 0;
  }

  /// The request's leg on `endpoint` (of request.role) failed before the worker answered it: the
  /// worker never computed its prompt, so a policy that learnt the route in on_routed() unlearns
  /// what it can of it (precise pending routes are forgotten; an approximate history is not
  /// touched, since it cannot tell this request's blocks from the same blocks an earlier request
  /// left there). Called at most once per on_routed(), with the same request; never allocates.
  virtual void on_failed(const RouteRequest& request, EndpointId endpoint) noexcept {
    (void)request;
    (void)endpoint;
  }

  /// The request ended on `endpoint` (finished, failed or cancelled).
  virtual void on_finished(std::uint64_t request_id, EndpointId endpoint) {
    (void)request_id;
    (void)endpoint;
  }

  /// Whether on_finished() does anything. A policy that overrides it must return true; a caller
  /// that would take a lock only to call it (the router, once per request) skips both when false.
  virtual bool tracks_finished() const noexcept { return false; }
};

/// Knobs of every policy; each policy reads its own. Keys for set_policy_option() in brackets.
struct PolicyOptions {
  /// Precise prefix source for "llm-d", "sglang", "dynamo" and "disagg": a KvBlockIndex fed by KV
  /// events, not owned, must outlive the policy. nullptr = approximate: the policy keeps its own
  /// LRU history of routed block hashes per endpoint.
  const KvBlockIndex* index = nullptr;
  /// [maxEndpoints] Endpoints the approximate history is sized for: it holds
  /// historyBlocksPerEndpoint x maxEndpoints blocks, shared by every endpoint id (each holds at most
  /// historyBlocksPerEndpoint; when all are used, the endpoint holding the most gives up its least
  /// recent, as in KvBlockIndex). Range [1, 64].
  int max_endpoints = 16;
  /// [historyBlocksPerEndpoint] Capacity of the approximate history per endpoint. llm-d's
  /// approximate prefix index: LRU of 31,250 blocks per server (REFERENCE.md section 6).
  std::int64_t history_blocks_per_endpoint = 31'250;
  /// [pendingBlocksMs] Precise source only: how long a prompt's blocks count as cached on the
  /// endpoint they were routed to before any KV event confirms them (the index learns a block
  /// only once the worker has computed it, so without this a burst of requests sharing a prefix
  /// spreads over the workers). An endpoint's cached prefix is the longer of the index's and the
  /// one it was routed within this many milliseconds of RouteRequest::now_ms. Kept for the last
  /// 1,024 routes (up to 262,144 of their blocks), 2 MiB allocated at creation. 0 = off (the
  /// index alone). Range [0, 600000]. The default covers the queueing and prefill a request waits
  /// before its KV events arrive under load (TTFT p90 0.1-1.1 s in bench/local-routing.sh),
  /// while a block that was never stored or was evicted at once is believed 2 s at most.
  double pending_blocks_ms = 2000;

  // --- "llm-d": weighted scorers (REFERENCE.md section 6: queue 2, kv-cache-utilization 2, prefix 3)
  /// [queueWeight] Weight of the queue scorer (fewest waiting requests scores 1).
  double queue_weight = 2;
  /// [kvUtilizationWeight] Weight of the KV-utilization scorer (1 - kv_usage).
  double kv_utilization_weight = 2;
  /// [prefixWeight] Weight of the prefix scorer (matched blocks / prompt blocks).
  double prefix_weight = 3;

  // --- "sglang": cache-aware (REFERENCE.md section 6)
  /// [cacheThreshold] Match ratio above which the best-matching endpoint wins.
  double cache_threshold = 0.3;
  /// [balanceAbsThreshold] Imbalanced when max load - min load exceeds this ...
  double balance_abs_threshold = 64;
  /// [balanceRelThreshold] ... and max load exceeds this times min load.
  double balance_rel_threshold = 1.5;

  // --- "dynamo": cost in blocks (REFERENCE.md section 6)
  /// [overlapCredit] Blocks of prefill saved per cached GPU block.
  double overlap_credit = 1.0;

  // --- tier credits, shared by "dynamo" and "disagg": share of a block's prefill saved when it is
  // cached in that tier (loading from a lower tier costs time). GPU is always 1.
  /// [cpuTierCredit]
  double cpu_tier_credit = 0.8;
  /// [diskTierCredit]
  double disk_tier_credit = 0.5;
  /// [remoteTierCredit]
  double remote_tier_credit = 0.3;

  // --- "disagg" (ours)
  /// [prefillTokensPerSecond] Prefill throughput assumed for endpoints that report none.
  double prefill_tokens_per_second = 10'000;
  /// [requestQueueSeconds] Expected delay per running or waiting request ahead (a step's share).
  double request_queue_seconds = 0.002;
  /// [kvPressureKnee] KV usage above which the pressure penalty starts.
  double kv_pressure_knee = 0.8;
  /// [kvPressureSeconds] Penalty at full KV usage (grows quadratically from the knee).
  double kv_pressure_seconds = 1.0;
  /// [guardRatio] Load guard: endpoints with load > guardRatio x min load + guardSlack are not
  /// chosen while a lighter eligible endpoint exists.
  double guard_ratio = 1.5;
  /// [guardSlack]
  double guard_slack = 8;
};

/// Why a policy or option was refused.
enum class RoutingErrc {
  unknown_policy,  ///< make_routing_policy(): the name is not one of routing_policy_names()
  unknown_option,  ///< set_policy_option(): the key is not a PolicyOptions key
  invalid_option,  ///< a value outside its range
};

/// Stable lower-case name of an error code, e.g. "unknown_policy".
std::string_view to_string(RoutingErrc code);

/// An error code and a message that names the field, the value received and the fix.
struct RoutingError {
  RoutingErrc code;
  std::string message;
};

/// The policy names make_routing_policy() accepts.
std::span<const std::string_view> routing_policy_names();

/// The engine's name of a policy as a deployment's configuration names it ("kv-aware" -> "llm-d",
/// "least-loaded" -> "least-load", the constructs' RoutingPolicy names); any other name unchanged.
/// The one alias map: the router's and the simulator's configuration readers both call it.
std::string_view routing_policy_engine_name(std::string_view name);

/// Whether `engine_name` (after routing_policy_engine_name) is one of routing_policy_names().
bool routing_policy_known(std::string_view engine_name);

/// routing_policy_names() as error messages list them: "round-robin, least-load, ... or disagg".
std::string routing_policy_names_text();

/// Whether policy `name` reads cached prefixes (a KvBlockIndex or its own history): false for
/// "round-robin" and "least-load", true for the others.
bool routing_policy_reads_prefixes(std::string_view name);

/// Sets the option named `key` (the bracketed names in PolicyOptions, e.g. "prefixWeight").
/// Failure modes: unknown_option, invalid_option (options unchanged).
Expected<void, RoutingError> set_policy_option(PolicyOptions& options, std::string_view key, double value);

/// Makes the policy `name` with `options` (validated here). Approximate histories are allocated
/// now, sized max_endpoints x history_blocks_per_endpoint. Failure modes: unknown_policy,
/// invalid_option.
Expected<std::unique_ptr<RoutingPolicy>, RoutingError> make_routing_policy(std::string_view name,
                                                                           const PolicyOptions& options = {});

// ---- prefill/decode decider ---------------------------------------------------------------------

/// Knobs of the PdDecider.
struct PdDeciderConfig {
  /// Disaggregate only when the prompt tokens not cached on the chosen decode endpoint are at
  /// least this many (short prefills are cheaper done in place than moved). >= 0.
  std::int64_t min_uncached_tokens = 512;
  /// A prefill endpoint is saturated when its inflight_prefill_tokens reach this; 0 = never.
  std::int64_t saturation_prefill_tokens = 0;
  /// ... or when its waiting requests reach this; 0 = never.
  std::int32_t saturation_waiting_requests = 0;
};

/// Why the decider decided so.
enum class PdReason : std::uint8_t {
  disaggregate,         ///< prefill on a prefill endpoint, then decode
  below_threshold,      ///< uncached prompt tokens < min_uncached_tokens: decode endpoint does it all
  prefill_saturated,    ///< every healthy prefill endpoint is saturated
  no_prefill_endpoint,  ///< no healthy prefill endpoint
};

/// Stable lower-case name, e.g. "below_threshold".
std::string_view to_string(PdReason reason);

/// Decides per request whether to disaggregate. Stateless, const, never allocates; thread-safe.
class PdDecider {
 public:
  explicit PdDecider(PdDeciderConfig config = {}) : config_(config) {}

  /// `prompt_tokens` of the request, `cached_tokens` of it held by the chosen decode endpoint,
  /// `endpoints` the pool (only healthy prefill endpoints are read).
  PdReason decide(std::int64_t prompt_tokens, std::int64_t cached_tokens,
                  std::span<const EndpointState> endpoints) const noexcept;

  const PdDeciderConfig& config() const { return config_; }

 private:
  PdDeciderConfig config_;
};

}  // namespace disagg
