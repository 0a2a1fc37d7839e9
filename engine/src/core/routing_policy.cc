// routing_policy.cc — the policy interface's shared parts: choose(), options, factory, names.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "disagg/routing.h"
#include "routing_internal.h"

namespace disagg {

namespace routing_detail {

std::int32_t argmin_rotated(std::span<const double> costs, std::uint64_t seed) noexcept {
  // Pass 1: the least cost and how many share it (NaN and +infinity never count).
  double best_cost = kIneligible;
  std::size_t ties = 0;
  for (const double c : costs) {
    if (c < best_cost) {
      best_cost = c;
      ties = 1;
    } else if (c == best_cost && c < kIneligible) {
      ++ties;
    }
  }
  if (ties == 0) return -1;
  // Pass 2: the (seed mod ties)-th of them. Rotating a start position instead (the first minimum
  // at or after seed mod n) gave an endpoint that lost on cost's share to its next neighbour.
  std::size_t skip = static_cast<std::size_t>(seed % ties);
  for (std::size_t i = 0; i < costs.size(); ++i) {
    if (costs[i] == best_cost && skip-- == 0) return static_cast<std::int32_t>(i);
  }
  return -1;  // unreachable
}

std::int64_t prompt_blocks(const RouteRequest& r) noexcept {
  const std::int64_t bs = r.block_size > 0 ? r.block_size : 1;
  const std::int64_t by_tokens = (r.prompt_tokens + bs - 1) / bs;
  const auto by_hashes = static_cast<std::int64_t>(r.block_hashes.size());
  return by_tokens > by_hashes ? by_tokens : by_hashes;
}

PendingRoutes::PendingRoutes(double ttl_ms)
    : ttl_ms_(ttl_ms), first_(kRoutes), time_ms_(kRoutes), extent_(kRoutes), hashes_(kHashes) {}

void PendingRoutes::add(EndpointId id, std::span<const BlockHash> hashes, std::int64_t now_ms) noexcept {
  if (hashes.empty()) return;
  const std::size_t n = std::min(hashes.size(), kHashes);
  // Times stay sorted by seq, so overlay() finds the first live route by binary search.
  if (routes_added_ > 0) now_ms = std::max(now_ms, time_ms_[(routes_added_ - 1) & kRouteMask]);
  const std::size_t at = routes_added_ & kRouteMask;
  first_[at] = hashes[0];
  time_ms_[at] = now_ms;
  extent_[at] = Extent{hashes_added_, static_cast<std::uint32_t>(n), id};
  for (std::size_t i = 0; i < n; ++i) hashes_[(hashes_added_ + i) & kHashMask] = hashes[i];
  hashes_added_ += n;
  ++routes_added_;
  // Forget the routes this one pushed out of either ring (the new one always fits).
  if (routes_added_ - oldest_kept_ > kRoutes) oldest_kept_ = routes_added_ - kRoutes;
  while (hashes_added_ - extent_[oldest_kept_ & kRouteMask].start > kHashes) ++oldest_kept_;
}

void PendingRoutes::forget(EndpointId id, std::span<const BlockHash> hashes) noexcept {
  if (hashes.empty()) return;
  const auto n = static_cast<std::uint32_t>(std::min(hashes.size(), kHashes));
  for (std::uint64_t seq = routes_added_; seq > oldest_kept_; --seq) {
    const std::size_t at = (seq - 1) & kRouteMask;
    Extent& e = extent_[at];
    if (first_[at] != hashes[0] || e.endpoint != id || e.blocks != n) continue;
    // Chained hashes: the same first and last block means the same prompt.
    if (hashes_[(e.start + n - 1) & kHashMask] != hashes[n - 1]) continue;
    e.blocks = 0;  // overlay() skips a route with no blocks
    return;
  }
}

std::int32_t PendingRoutes::overlay(std::span<const BlockHash> hashes, std::int64_t now_ms,
                                    std::span<PrefixOverlap> out) const noexcept {
  if (hashes.empty()) return 0;
  // The first route younger than the TTL: times are sorted by seq.
  std::uint64_t lo = oldest_kept_;
  std::uint64_t hi = routes_added_;
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (static_cast<double>(now_ms - time_ms_[mid & kRouteMask]) >= ttl_ms_) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  std::int32_t longest = 0;
  const BlockHash first = hashes[0];
  const auto visit = [&](std::uint64_t seq) {
    const Extent& e = extent_[seq & kRouteMask];
    if (e.endpoint >= out.size()) return;
    PrefixOverlap& o = out[e.endpoint];
    const auto have = static_cast<std::size_t>(o.blocks);
    const std::size_t cap = std::min<std::size_t>(e.blocks, hashes.size());
    if (cap <= have) return;
    const auto routed = [&](std::size_t k) { return hashes_[(e.start + k) & kHashMask]; };
    // Chained hashes: agreeing on block `have` means agreeing on all before it, and a route that
    // differs there cannot lengthen the overlap (one read for most routes of a shared prefix).
    if (have > 0 && routed(have) != hashes[have]) return;
    // The route agrees on the first `agree` blocks; find the last block it agrees on below `cap`.
    std::size_t agree = have + 1;
    std::size_t limit = cap;
    while (agree < limit) {
      const std::size_t mid = agree + (limit - agree + 1) / 2;
      if (routed(mid - 1) == hashes[mid - 1]) {
        agree = mid;
      } else {
        limit = mid - 1;
      }
    }
    o = PrefixOverlap{};
    o.blocks = static_cast<std::int32_t>(agree);
    o.by_tier[0] = o.blocks;
    longest = std::max(longest, o.blocks);
  };
  // Newest first, over the live routes' first hashes: at most two contiguous runs of the ring. Most
  // routes start with another block, so eight are compared per branch, without branches between
  // them: the compiler vectorizes that (1,024 routes in 0.28 us instead of 0.65 at -O3).
  const BlockHash* f = first_.data();
  std::uint64_t seq = routes_added_;
  while (seq > lo) {
    const std::size_t end = ((seq - 1) & kRouteMask) + 1;  // one past the newest's position
    const std::size_t begin = end - static_cast<std::size_t>(std::min<std::uint64_t>(seq - lo, end));
    const std::uint64_t seq_of_0 = seq - end;  // the seq at position p is seq_of_0 + p
    std::size_t i = end;
    for (; i >= begin + 8; i -= 8) {
      bool any = false;
      for (std::size_t j = 1; j <= 8; ++j) any |= f[i - j] == first;
      if (!any) continue;
      for (std::size_t j = 1; j <= 8; ++j) {
        if (f[i - j] == first) visit(seq_of_0 + i - j);
      }
    }
    for (; i > begin; --i) {
      if (f[i - 1] == first) visit(seq_of_0 + i - 1);
    }
    seq = seq_of_0 + begin;
  }
  return longest;
}

PrefixSource::PrefixSource(const PolicyOptions& options) : index_(options.index) {
  if (index_ != nullptr && options.pending_blocks_ms > 0) pending_.emplace(options.pending_blocks_ms);
  if (index_ == nullptr) {
    // Every endpoint id is covered; max_endpoints sizes the pool of blocks they share (when it is
    // full, the endpoint holding the most gives up its least recent).
    KvIndexConfig config;
    config.max_endpoints = kMaxRoutingEndpoints;
    config.max_entries = options.history_blocks_per_endpoint * options.max_endpoints;
    config.max_entries_per_endpoint = options.history_blocks_per_endpoint;
    history_.emplace(std::move(KvBlockIndex::create(config).value()));  // validated by the factory
  }
}

std::int32_t PrefixSource::overlaps(const RouteRequest& r, OverlapArray& out, std::size_t id_limit) const noexcept {
  const KvBlockIndex& index = history_ ? *history_ : *index_;
  const std::size_t limit = std::min(id_limit, out.size());
  // Ids the index does not cover read as "no prefix".
  for (std::size_t i = static_cast<std::size_t>(index.config().max_endpoints); i < limit; ++i) {
    out[i] = PrefixOverlap{};
  }
  const std::int32_t longest = index.longest_prefix(r.block_hashes, std::span<PrefixOverlap>(out.data(), limit));
  if (!pending_) return longest;
  return std::max(longest, pending_->overlay(r.block_hashes, r.now_ms, std::span<PrefixOverlap>(out.data(), limit)));
}

std::int64_t PrefixSource::size_of(EndpointId id) const {
  return (history_ ? *history_ : *index_).size(id);
}

void PrefixSource::learn(const RouteRequest& r, EndpointId id) {
  // The history covers every id below kMaxRoutingEndpoints (a precondition of every policy).
  if (history_) {
    (void)history_->apply_stored(id, KvTier::gpu, r.block_hashes);
  } else if (pending_) {
    pending_->add(id, r.block_hashes, r.now_ms);
  }
}

double weighted_cached_blocks(const PrefixOverlap& o, const PolicyOptions& options) noexcept {
  return o.by_tier[0] + options.cpu_tier_credit * o.by_tier[1] + options.disk_tier_credit * o.by_tier[2] +
         options.remote_tier_credit * o.by_tier[3];
}

void PrefixAwarePolicy::score(const RouteRequest& request, std::span<const EndpointState> endpoints,
                              std::span<double> out) const noexcept {
  OverlapArray overlaps;
  const std::size_t n = considered(endpoints);
  source_.overlaps(request, overlaps, id_limit(endpoints.first(n)));
  CostArray all;
  costs(request, endpoints.first(n), overlaps, std::span<double>(all.data(), n));
  for (std::size_t i = 0; i < n && i < out.size(); ++i) out[i] = all[i];
}

std::int32_t PrefixAwarePolicy::cached_prefix(const RouteRequest& request,
                                              const EndpointState& endpoint) const noexcept {
  if (endpoint.id >= kMaxRoutingEndpoints) return 0;
  OverlapArray overlaps;
  source_.overlaps(request, overlaps, std::size_t{endpoint.id} + 1);
  return overlaps[endpoint.id].blocks;
}

RouteDecision PrefixAwarePolicy::choose(const RouteRequest& request,
                                        std::span<const EndpointState> endpoints) const noexcept {
  OverlapArray overlaps;
  const std::size_t n = considered(endpoints);
  source_.overlaps(request, overlaps, id_limit(endpoints.first(n)));
  CostArray all;
  costs(request, endpoints.first(n), overlaps, std::span<double>(all.data(), n));
  RouteDecision d;
  d.index = argmin_rotated(std::span<const double>(all.data(), n), tie_seed(request));
  if (d.index >= 0) {
    const EndpointState& e = endpoints[static_cast<std::size_t>(d.index)];
    d.endpoint = e.id;
    d.score = all[static_cast<std::size_t>(d.index)];
    d.cached_blocks = overlap_of(overlaps, e).blocks;
  }
  return d;
}

}  // namespace routing_detail

using namespace routing_detail;

RouteDecision RoutingPolicy::choose(const RouteRequest& request,
                                    std::span<const EndpointState> endpoints) const noexcept {
  CostArray costs;
  const std::size_t n = considered(endpoints);
  score(request, endpoints, std::span<double>(costs.data(), n));
  RouteDecision d;
  d.index = argmin_rotated(std::span<const double>(costs.data(), n), tie_seed(request));
  if (d.index >= 0) {
    d.endpoint = endpoints[static_cast<std::size_t>(d.index)].id;
    d.score = costs[static_cast<std::size_t>(d.index)];
  }
  return d;
}

std::string_view to_string(EndpointRole role) {
  switch (role) {
    case EndpointRole::aggregated: return "aggregated";
    case EndpointRole::prefill: return "prefill";
    case EndpointRole::decode: return "decode";
  }
  return "unknown";
}

std::string_view to_string(RoutingErrc code) {
  switch (code) {
    case RoutingErrc::unknown_policy: return "unknown_policy";
    case RoutingErrc::unknown_option: return "unknown_option";
    case RoutingErrc::invalid_option: return "invalid_option";
  }
  return "unknown";
}

namespace {

constexpr std::array<std::string_view, 6> kPolicyNames = {"round-robin", "least-load", "llm-d",
                                                          "sglang",      "dynamo",     "disagg"};

std::string join_names() {
  std::string s;
  for (const auto name : kPolicyNames) {
    if (!s.empty()) s += ", ";
    s += name;
  }
  return s;
}

std::string number(double v) {
  std::string s = std::to_string(v);
  // Trim trailing zeros of std::to_string's fixed notation for readable messages.
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  return s;
}

RoutingError invalid(std::string_view key, double value, std::string_view rule) {
  // Appends rather than operator+ chains: g++ 12 reports a false -Wrestrict on those at -O2.
  std::string message;
  message.append("'").append(key).append("' (").append(number(value)).append(") ").append(rule);
  return RoutingError{RoutingErrc::invalid_option, std::move(message)};
}

// One row per option: key, member, lower bound, upper bound, rule text for messages.
struct OptionRow {
  std::string_view key;
  double PolicyOptions::*member;
  double lo;
  double hi;
  std::string_view rule;
};

constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr std::string_view kHistoryRule =
    "must be an integer in [1, 4194304]; e.g. 31250 (llm-d's approximate prefix index per server)";
constexpr std::string_view kEndpointsRule = "must be an integer in [1, 64]; pass the number of endpoints in the pool";

constexpr std::array<OptionRow, 17> kDoubleOptions = {{
    {"queueWeight", &PolicyOptions::queue_weight, 0, kInf, "must be >= 0; e.g. 2 (llm-d default)"},
    {"kvUtilizationWeight", &PolicyOptions::kv_utilization_weight, 0, kInf, "must be >= 0; e.g. 2 (llm-d default)"},
    {"prefixWeight", &PolicyOptions::prefix_weight, 0, kInf, "must be >= 0; e.g. 3 (llm-d default)"},
    {"cacheThreshold", &PolicyOptions::cache_threshold, 0, 1, "must be in [0, 1]; e.g. 0.3 (SGLang default)"},
    {"balanceAbsThreshold", &PolicyOptions::balance_abs_threshold, 0, kInf, "must be >= 0; e.g. 64 (SGLang default)"},
    {"balanceRelThreshold", &PolicyOptions::balance_rel_threshold, 1, kInf, "must be >= 1; e.g. 1.5 (SGLang default)"},
    {"overlapCredit", &PolicyOptions::overlap_credit, 0, kInf, "must be >= 0; e.g. 1"},
    {"cpuTierCredit", &PolicyOptions::cpu_tier_credit, 0, 1, "must be in [0, 1]; e.g. 0.8"},
    {"diskTierCredit", &PolicyOptions::disk_tier_credit, 0, 1, "must be in [0, 1]; e.g. 0.5"},
    {"remoteTierCredit", &PolicyOptions::remote_tier_credit, 0, 1, "must be in [0, 1]; e.g. 0.3"},
    {"prefillTokensPerSecond", &PolicyOptions::prefill_tokens_per_second, 1e-9, kInf,
     "must be > 0; pass the pool's prefill throughput in tokens/s, e.g. 10000"},
    {"requestQueueSeconds", &PolicyOptions::request_queue_seconds, 0, kInf, "must be >= 0; e.g. 0.002"},
    {"kvPressureKnee", &PolicyOptions::kv_pressure_knee, 0, 0.999, "must be in [0, 0.999]; e.g. 0.8"},
    {"kvPressureSeconds", &PolicyOptions::kv_pressure_seconds, 0, kInf, "must be >= 0; e.g. 1"},
    {"guardRatio", &PolicyOptions::guard_ratio, 1, kInf, "must be >= 1; e.g. 1.5"},
    {"guardSlack", &PolicyOptions::guard_slack, 0, kInf, "must be >= 0; e.g. 8"},
    {"pendingBlocksMs", &PolicyOptions::pending_blocks_ms, 0, 600'000,
     "must be in [0, 600000] milliseconds; e.g. 2000, or 0 to read the KV-event index alone"},
}};

Expected<void, RoutingError> validate(const PolicyOptions& o) {
  for (const OptionRow& row : kDoubleOptions) {
    const double v = o.*row.member;
    if (!std::isfinite(v) || v < row.lo || v > row.hi) return unexpected(invalid(row.key, v, row.rule));
  }
  if (o.max_endpoints < 1 || o.max_endpoints > kMaxRoutingEndpoints) {
    return unexpected(invalid("maxEndpoints", o.max_endpoints, kEndpointsRule));
  }
  if (o.history_blocks_per_endpoint < 1 || o.history_blocks_per_endpoint > (1 << 22)) {
    return unexpected(
        invalid("historyBlocksPerEndpoint", static_cast<double>(o.history_blocks_per_endpoint), kHistoryRule));
  }
  if (o.history_blocks_per_endpoint * o.max_endpoints > (std::int64_t{1} << 28)) {
    return unexpected(invalid("historyBlocksPerEndpoint", static_cast<double>(o.history_blocks_per_endpoint),
                              "times 'maxEndpoints' must not exceed 268435456 history entries; lower either"));
  }
  return {};
}

}  // namespace

std::span<const std::string_view> routing_policy_names() {
  return kPolicyNames;
}

std::string_view routing_policy_engine_name(std::string_view name) {
  if (name == "kv-aware") return "llm-d";
  if (name == "least-loaded") return "least-load";
  return name;
}

bool routing_policy_known(std::string_view engine_name) {
  for (std::string_view n : routing_policy_names()) {
    if (n == engine_name) return true;
  }
  return false;
}

std::string routing_policy_names_text() {
  const auto names = routing_policy_names();
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out.append(i + 1 == names.size() ? " or " : ", ");
    out.append(names[i]);
  }
  return out;
}

bool routing_policy_reads_prefixes(std::string_view name) {
  return name != "round-robin" && name != "least-load";
}

Expected<void, RoutingError> set_policy_option(PolicyOptions& options, std::string_view key, double value) {
  PolicyOptions next = options;
  bool known = false;
  for (const OptionRow& row : kDoubleOptions) {
    if (row.key == key) {
      next.*row.member = value;
      known = true;
    }
  }
  const auto is_integer = [](double v) { return std::isfinite(v) && v == std::floor(v); };
  if (key == "maxEndpoints") {
    if (!is_integer(value) || value < 1 || value > kMaxRoutingEndpoints) {
      return unexpected(invalid(key, value, kEndpointsRule));
    }
    next.max_endpoints = static_cast<int>(value);
    known = true;
  } else if (key == "historyBlocksPerEndpoint") {
    if (!is_integer(value) || value < 1 || value > (1 << 22)) { return unexpected(invalid(key, value, kHistoryRule)); }
    next.history_blocks_per_endpoint = static_cast<std::int64_t>(value);
    known = true;
  }
  if (!known) {
    std::string keys;
    for (const OptionRow& row : kDoubleOptions) {
      keys += keys.empty() ? "" : ", ";
      keys += row.key;
    }
    std::string message;
    message.append("unknown routing option '").append(key).append("'; use one of ").append(keys);
    message.append(", maxEndpoints, historyBlocksPerEndpoint");
    return unexpected(RoutingError{RoutingErrc::unknown_option, std::move(message)});
  }
  if (auto ok = validate(next); !ok) return unexpected(ok.error());
  options = next;
  return {};
}

Expected<std::unique_ptr<RoutingPolicy>, RoutingError> make_routing_policy(std::string_view name,
                                                                           const PolicyOptions& options) {
  if (auto ok = validate(options); !ok) return unexpected(ok.error());
  if (name == "round-robin") return make_round_robin();
  if (name == "least-load") return make_least_load();
  if (name == "llm-d") return make_llmd(options);
  if (name == "sglang") return make_sglang(options);
  if (name == "dynamo") return make_dynamo(options);
  if (name == "disagg") return make_disagg(options);
  std::string message;
  message.append("unknown routing policy '").append(name).append("'; use one of ").append(join_names());
  return unexpected(RoutingError{RoutingErrc::unknown_policy, std::move(message)});
}

}  // namespace disagg
