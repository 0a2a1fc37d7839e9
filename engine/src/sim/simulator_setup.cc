// simulator_setup.cc — Simulator::create(): the deployment's checks (pools and roles, block sizes,
// endpoint and tier bounds, the autoscaling rules and provisioning times, the router's admission
// bounds; messages in the JSON configuration's terms) and what a run starts from: pools, workers
// and their schedulers, the router and its index, lower tiers and the feeds into the index.
// Apart from the event loop because it runs once, before any event.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "disagg/json_value.h"
#include "disagg/route_plan.h"
#include "simulator_impl.h"

namespace disagg {

using sim_detail::IndexFeed;
using sim_detail::SlotState;
using sim_detail::TierIndexFeed;
using sim_detail::WorkerTiers;

namespace {

EndpointRole endpoint_role(WorkerRole r) {
  switch (r) {
    case WorkerRole::aggregated: return EndpointRole::aggregated;
    case WorkerRole::prefill: return EndpointRole::prefill;
    case WorkerRole::decode: return EndpointRole::decode;
  }
  return EndpointRole::aggregated;
}

std::string tier_name(KvTier t) {
  switch (t) {
    case KvTier::gpu: return "gpu";
    case KvTier::cpu: return "host";
    case KvTier::disk: return "disk";
    case KvTier::remote: return "remote";
  }
  return "unknown";
}

std::string num(double v) {
  return json_number(v);
}

// Checks the lower tiers of every pool (messages in the JSON configuration's terms) and returns
// the blocks each tier entry holds (per worker; the store's total for remote), pool by pool.
Expected<std::vector<std::vector<std::int64_t>>, std::string> check_tiers(const SimulationConfig& config,
                                                                          std::int32_t block_size) {
  std::vector<std::vector<std::int64_t>> blocks(config.pools.size());
  std::int64_t total = 0;
  double remote_capacity = -1;
  std::size_t remote_pool = 0;
  bool remote_counted = false;
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolSpec& p = config.pools[i];
    const double block_bytes = kv_replica_bytes_per_token(p.cost) * block_size;
    int last = 0;
    for (std::size_t j = 0; j < p.kv_tiers.size(); ++j) {
      const KvTierSpec& t = p.kv_tiers[j];
      const std::string f = "'pools[" + std::to_string(i) + "].kvTiers[" + std::to_string(j) + "]";
      const int rank = static_cast<int>(t.tier);
      if (t.tier == KvTier::gpu || rank >= kKvTierCount) {
        return unexpected(f + ".tier' (" + tier_name(t.tier) + ") must be host, disk or remote");
      }
      if (rank <= last) {
        return unexpected("'pools[" + std::to_string(i) + "].kvTiers' lists " + tier_name(t.tier) + " after " +
                          tier_name(static_cast<KvTier>(last)) +
                          "; list host, disk, remote in that order, each at most once");
      }
      last = rank;
      if (!(t.read_bytes_per_second > 0) || !std::isfinite(t.read_bytes_per_second)) {
        return unexpected(f + ".readBytesPerSecond' (" + num(t.read_bytes_per_second) +
                          ") must be > 0; e.g. 5e10 for host memory over PCIe Gen5 x16");
      }
      if (!(t.write_bytes_per_second > 0) || !std::isfinite(t.write_bytes_per_second)) {
        return unexpected(f + ".writeBytesPerSecond' (" + num(t.write_bytes_per_second) +
                          ") must be > 0; e.g. 5e10 for host memory over PCIe Gen5 x16");
      }
      if (!(t.latency_seconds >= 0) || !std::isfinite(t.latency_seconds)) {
        return unexpected(f + ".latencySeconds' (" + num(t.latency_seconds) + ") must be >= 0");
      }
      if (!(t.max_write_backlog_seconds >= 0)) {
        return unexpected(f + ".maxWriteBacklogSeconds' (" + num(t.max_write_backlog_seconds) + ") must be >= 0");
      }
      if (!(block_bytes > 0)) continue;  // the cost model's own check reports kvBytesPerToken
      if (!(t.capacity_bytes >= block_bytes) || !std::isfinite(t.capacity_bytes)) {
        return unexpected(f + ".capacityBytes' (" + num(t.capacity_bytes) + ") must hold at least one KV block of " +
                          num(block_bytes) + " bytes (" + std::to_string(block_size) + " tokens x " +
                          num(kv_replica_bytes_per_token(p.cost)) + " bytes per token)");
      }
      const double n = std::floor(t.capacity_bytes / block_bytes);
      if (n > static_cast<double>(KvTierCache::kMaxBlocks)) {
        return unexpected(f + ".capacityBytes' (" + num(t.capacity_bytes) + ") is " + num(n) +
                          " KV blocks; the simulator holds at most " + std::to_string(KvTierCache::kMaxBlocks) +
                          " per tier; give less (a tier larger than the workload's working set behaves the same)");
      }
      const auto nb = static_cast<std::int64_t>(n);
      blocks[i].push_back(nb);
      if (t.tier == KvTier::remote) {
        if (remote_capacity >= 0 && t.capacity_bytes != remote_capacity) {
          return unexpected(f + ".capacityBytes' (" + num(t.capacity_bytes) +
                            ") differs from the remote store's capacity in pools[" + std::to_string(remote_pool) +
                            "] (" + num(remote_capacity) +
                            "); the store is shared: give every pool the same capacityBytes");
        }
        remote_capacity = t.capacity_bytes;
        remote_pool = i;
        if (!remote_counted) total += nb;
        remote_counted = true;
      } else {
        total += nb * p.replicas;
      }
      if (total > kMaxSimTierBlocks) {
        return unexpected(f + ".capacityBytes' (" + num(t.capacity_bytes) +
                          ") brings the lower tiers of all workers to " + std::to_string(total) +
                          " KV blocks; the simulator holds at most " + std::to_string(kMaxSimTierBlocks) +
                          " (about 50 bytes each); give smaller capacities");
      }
    }
  }
  return blocks;
}

// Router-index entries the lower tiers can add, beyond the GPU pools': bounded, so that a large
// store costs no more than ~400 MB of index (beyond it the index evicts, as a real router's does).
constexpr std::int64_t kMaxTierIndexEntries = std::int64_t{1} << 22;

}  // namespace

Expected<Simulator, SimError> Simulator::create(const SimulationConfig& config) {
  auto bad = [](std::string m) { return unexpected(SimError{SimErrc::invalid_config, std::move(m)}); };
  if (config.pools.empty()) return bad("'pools' is empty; declare at least one pool with role 'both' (aggregated)");
  int aggregated = 0, prefill = 0, decode = 0;
  std::int64_t total_workers = 0;
  std::int64_t total_blocks = 0;
  const std::int32_t block_size = config.pools.front().scheduler.block_size;
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolSpec& p = config.pools[i];
    const std::string field = "'pools[" + std::to_string(i) + "]";
    const bool scaled = p.autoscaling.enabled;
    if (p.replicas < (scaled ? 0 : 1)) {
      return bad(field + ".replicas' (" + std::to_string(p.replicas) + ") must be >= " + (scaled ? "0" : "1"));
    }
    if (p.scheduler.block_size != block_size) {
      return bad(field + "' block size (" + std::to_string(p.scheduler.block_size) +
                 ") differs from the first pool's (" + std::to_string(block_size) + "); use one block size");
    }
    (p.role == WorkerRole::aggregated ? aggregated : p.role == WorkerRole::prefill ? prefill : decode) += 1;
    const std::int64_t slots = scaled ? 2 * std::int64_t{std::max(p.autoscaling.policy.max_replicas, 1)} : p.replicas;
    total_workers += slots;
    total_blocks += slots * p.scheduler.num_blocks;
  }
  if (aggregated > 0 && (prefill > 0 || decode > 0)) {
    return bad(
        "'pools' mixes role 'both' with 'prefill'/'decode'; simulate either aggregated or disaggregated serving");
  }
  if (aggregated == 0 && (prefill == 0 || decode == 0)) {
    return bad(
        "'pools' needs a 'prefill' and a 'decode' pool for disaggregated serving (or one pool with role 'both')");
  }
  if (total_workers > kMaxRoutingEndpoints) {
    return bad("'pools' declare " + std::to_string(total_workers) +
               " replicas in all (an autoscaled pool counts 2 x maxReplicas: "
               "replicas draining beside new ones); the router tracks at most " +
               std::to_string(kMaxRoutingEndpoints) + " endpoints; use fewer, larger replicas");
  }
  const AutoscaleRun& ar = config.autoscale;
  if (!(ar.evaluation_interval_seconds > 0) || !std::isfinite(ar.evaluation_interval_seconds)) {
    return bad("'autoscaling.evaluationIntervalSeconds' (" + num(ar.evaluation_interval_seconds) +
               ") must be > 0; HPA evaluates every 15 s");
  }
  if (!(ar.window_seconds > 0) || !std::isfinite(ar.window_seconds)) {
    return bad("'autoscaling.windowSeconds' (" + num(ar.window_seconds) + ") must be > 0, e.g. 300");
  }
  if (!(ar.horizon_seconds >= 0) || !std::isfinite(ar.horizon_seconds)) {
    return bad("'autoscaling.horizonSeconds' (" + num(ar.horizon_seconds) + ") must be >= 0 (0: the run's end)");
  }
  if (ar.horizon_seconds / ar.window_seconds > static_cast<double>(kMaxScaleWindows)) {
    return bad("'autoscaling.windowSeconds' (" + num(ar.window_seconds) + ") cuts the horizon of " +
               num(ar.horizon_seconds) + " s into more than " + std::to_string(kMaxScaleWindows) +
               " windows; give wider windows");
  }
  std::vector<std::optional<PoolAutoscaler>> scalers(config.pools.size());
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolAutoscaling& a = config.pools[i].autoscaling;
    if (!a.enabled) continue;
    const std::string f = "pools[" + std::to_string(i) + "].autoscaling";
    auto sc = PoolAutoscaler::create(a.policy, ar.evaluation_interval_seconds, f);
    if (!sc) return bad(sc.error());
    const ProvisioningSpec& v = a.provisioning;
    for (const auto& [key, x] : {std::pair<const char*, double>{"nodeStartSeconds", v.node_start_seconds},
                                 {"imagePullSeconds", v.image_pull_seconds},
                                 {"checkpointBytes", v.checkpoint_bytes},
                                 {"networkBytesPerSecond", v.network_bytes_per_second},
                                 {"nvmeBytesPerSecond", v.nvme_bytes_per_second},
                                 {"engineStartSeconds", v.engine_start_seconds}}) {
      if (!(x >= 0) || !std::isfinite(x))
        return bad("'" + f + ".provisioning." + key + "' (" + num(x) + ") must be >= 0");
    }
    if (!config.pools[i].kv_tiers.empty()) {
      return bad("'" + f +
                 "': autoscaled pools cannot have kvTiers yet (a new replica's host and disk tiers would start warm); "
                 "drop one of them");
    }
    scalers[i].emplace(std::move(*sc));
  }
  if (config.max_in_flight < 1) return bad("'maxInFlight' must be >= 1");
  if (config.router.max_inflight < 1) return bad("'router.maxInflight' must be >= 1 (the router's --max-inflight)");
  if (config.router.max_queue < 0) return bad("'router.maxQueue' must be >= 0 (the router's --max-queue)");
  if (!(config.router.queue_timeout_seconds >= 0)) {
    return bad("'router.queueTimeoutSeconds' must be >= 0 (the router's --queue-timeout-ms / 1000)");
  }
  if (!(config.max_seconds >= 0)) return bad("'maxSeconds' must be >= 0");
  auto tier_blocks = check_tiers(config, block_size);
  if (!tier_blocks) return bad(tier_blocks.error());
  // Index entries the tiers may add: host and disk per worker, the store once per endpoint reaching it.
  std::int64_t tier_entries = 0, remote_endpoints = 0, remote_blocks = 0;
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    for (std::size_t j = 0; j < config.pools[i].kv_tiers.size(); ++j) {
      const std::int64_t nb = (*tier_blocks)[i][j];
      if (config.pools[i].kv_tiers[j].tier == KvTier::remote) {
        remote_blocks = nb;
        remote_endpoints += config.pools[i].replicas;
      } else {
        tier_entries += nb * config.pools[i].replicas;
      }
    }
  }
  tier_entries = std::min(tier_entries + remote_blocks * remote_endpoints, kMaxTierIndexEntries);

  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->block_size = block_size;
  impl->announce_private = config.router.announce_unique_blocks;
  PolicyOptions options = config.router.options;
  options.max_endpoints = static_cast<int>(total_workers);
  options.index = nullptr;
  // Only prefix-aware policies read the index; feeding it costs time per cached block.
  const bool reads_prefixes = routing_policy_reads_prefixes(config.router.policy);
  if (config.router.precise_prefix && reads_prefixes) {
    KvIndexConfig ic;
    ic.max_endpoints = static_cast<int>(total_workers);
    // Every block of every pool, once: the index never needs to evict.
    ic.max_entries = std::min<std::int64_t>(std::max<std::int64_t>(total_blocks, 1) + tier_entries, 1LL << 28);
    auto idx = KvBlockIndex::create(ic);
    if (!idx) return bad("router index: " + std::string(to_string(idx.error())));
    impl->index.emplace(std::move(*idx));
    options.index = &*impl->index;
  }
  RoutePlanConfig route_config;
  route_config.disaggregated = aggregated == 0;
  route_config.decider = config.router.decider;
  route_config.session_affinity = config.router.session_affinity;
  auto planner = RoutePlanner::create(config.router.policy, options, route_config);
  if (!planner) return bad(planner.error().message);
  std::vector<EndpointState> endpoints;

  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolSpec& p = config.pools[i];
    auto cm = CostModel::create(p.cost);
    if (!cm) return bad("'pools[" + std::to_string(i) + "]' (" + p.name + "): " + cm.error().message());
    SchedulerConfig sc = p.scheduler;
    sc.role = p.role;
    Impl::PoolRun pr;
    pr.first = static_cast<std::int32_t>(impl->workers.size());
    pr.sched = sc;
    pr.cost.emplace(*cm);
    pr.report.name = p.name;
    pr.report.role = p.role;
    pr.report.gpus_per_replica = static_cast<std::int32_t>(
        std::min<std::int64_t>(std::int64_t{p.cost.tensor_parallel} * p.cost.pipeline_parallel, INT32_MAX));
    std::int32_t initial = p.replicas;
    if (scalers[i]) {
      const AutoscalePolicy& ap = p.autoscaling.policy;
      pr.slots = 2 * ap.max_replicas;
      initial =
          std::clamp(p.replicas, ap.scale_to_zero ? ap.min_replicas : std::max(ap.min_replicas, 1), ap.max_replicas);
      pr.scaler = std::move(scalers[i]);
      pr.report.provision_seconds = p.autoscaling.provisioning.seconds();
      impl->autoscaled = true;
    } else {
      pr.slots = p.replicas;
    }
    pr.ready = initial;
    pr.report.peak_replicas = initial;
    impl->pools.push_back(std::move(pr));
    for (std::int32_t r = 0; r < impl->pools.back().slots; ++r) {
      auto s = Scheduler::create(sc, *cm);
      if (!s) {
        return bad("'pools[" + std::to_string(i) + "]' (" + p.name +
                   "): scheduler limits (maxConcurrencyPerReplica, maxBatchedTokens, KV blocks) must be >= 1");
      }
      const EndpointId id = static_cast<EndpointId>(impl->workers.size());
      const double chunk = static_cast<double>(sc.max_num_batched_tokens);
      const double chunk_seconds = cm->prefill_chunk_time(sc.max_num_batched_tokens, 0).total_seconds;
      impl->workers.push_back(Impl::Worker{std::move(*s), p.role, false, 0, 0, 0, 0, nullptr});
      Impl::Worker& w = impl->workers.back();
      // Pipeline stages prefill one chunk each at a time (disagg/cost_model.h): pp chunks per chunk time.
      w.prefill_tokens_per_second = chunk_seconds > 0 ? chunk * p.cost.pipeline_parallel / chunk_seconds : 0;
      w.pool = static_cast<std::int32_t>(i);
      w.state = r < initial ? SlotState::ready : SlotState::off;
      EndpointState e;
      e.id = id;
      e.healthy = w.state == SlotState::ready;
      e.role = endpoint_role(p.role);
      e.prefill_tokens_per_second = w.prefill_tokens_per_second;
      endpoints.push_back(e);
    }
  }
  impl->routing.emplace(std::move(*planner), std::move(endpoints));
  // Lower tiers: per worker host and disk caches of its own, links to every tier, one shared store.
  std::array<TierIndexFeed*, kKvTierCount> remote_feed{};
  std::size_t worker = 0;
  for (std::size_t i = 0; i < config.pools.size(); ++i) {
    const PoolSpec& p = config.pools[i];
    for (std::int32_t r = 0; r < impl->pools[i].slots; ++r, ++worker) {
      if (p.kv_tiers.empty()) continue;
      impl->has_tiers = true;
      Impl::Worker& w = impl->workers[worker];
      const double block_bytes = w.sched.cost_model().kv_transfer_bytes(block_size);
      w.tiers = std::make_unique<WorkerTiers>(&impl->clock, block_bytes, &impl->tier_totals);
      for (std::size_t j = 0; j < p.kv_tiers.size(); ++j) {
        const KvTierSpec& t = p.kv_tiers[j];
        const auto k = static_cast<std::size_t>(t.tier);
        const std::int64_t nb = (*tier_blocks)[i][j];
        KvTierCache* cache = nullptr;
        TierIndexFeed* feed = nullptr;
        if (t.tier == KvTier::remote) {
          if (!impl->remote_store) {
            auto c = KvTierCache::create(nb);
            if (!c)
              return bad("'pools[" + std::to_string(i) + "].kvTiers[" + std::to_string(j) +
                         "].capacityBytes': cannot size the remote store");
            impl->remote_store = std::make_unique<KvTierCache>(std::move(*c));
            if (impl->index) {
              impl->tier_feeds.push_back(std::make_unique<TierIndexFeed>(&*impl->index, KvTier::remote));
              remote_feed[k] = impl->tier_feeds.back().get();
              impl->remote_store->set_listener(remote_feed[k]);
            }
          }
          cache = impl->remote_store.get();
          feed = remote_feed[k];
        } else {
          auto c = KvTierCache::create(nb);
          if (!c)
            return bad("'pools[" + std::to_string(i) + "].kvTiers[" + std::to_string(j) +
                       "].capacityBytes': cannot size the tier");
          w.tiers->own[k] = std::make_unique<KvTierCache>(std::move(*c));
          cache = w.tiers->own[k].get();
          if (impl->index) {
            impl->tier_feeds.push_back(std::make_unique<TierIndexFeed>(&*impl->index, t.tier));
            feed = impl->tier_feeds.back().get();
            cache->set_listener(feed);
          }
        }
        if (feed != nullptr) feed->add_endpoint(static_cast<EndpointId>(worker));
        w.tiers->links[k].cache = cache;
        w.tiers->links[k].spec = t;
      }
      w.sched.set_tier_hook(w.tiers.get());
    }
  }
  if (impl->index) {
    // Listeners point into `workers`, which no longer grows.
    for (std::size_t i = 0; i < impl->workers.size(); ++i) {
      impl->workers[i].feed = std::make_unique<IndexFeed>(&*impl->index, static_cast<EndpointId>(i));
      impl->workers[i].sched.set_pool_listener(impl->workers[i].feed.get());
    }
  }
  return Simulator(std::move(impl));
}

}  // namespace disagg
