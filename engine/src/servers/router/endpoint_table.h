// endpoint_table.h — the router's endpoints and the routing decision over them.
//
// Owns: the kMaxRoutingEndpoints endpoint slots (an id is reused when its endpoint leaves; the
// slot's generation tells the incarnations apart), which of them are present, their live state
// (health and load: endpoint_health.h), the KV block index fed by KV events (this table is the
// KvEventSubscriber's sink), and the RoutePlanner (disagg/route_plan.h: policy, P/D decider,
// sessions) together with the accounting of every leg in flight (EndpointSlot::inflight from the
// decision to the leg's end, and the prompt tokens still to prefill until its first byte).
//
// Locking: one lock (SpinThenBlockMutex) guards slot identity, the index and the planner. It is
// held for one decision (plan + apply, about 1-2 us), one KV event batch, one add or removal, or one
// health-check result. Live state is atomic and read and written without it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/expected.h"
#include "disagg/kv_block_index.h"
#include "lib/kv_events/block_keyer.h"
#include "disagg/route_plan.h"
#include "endpoint_health.h"
#include "kv_event_subscriber.h"
#include "peer_snapshot.h"
#include "router_config.h"
#include "router_log.h"
#include "router_metrics.h"
#include "scaling_signals.h"
#include "spin_then_block_mutex.h"

namespace disagg::router {

/// One endpoint chosen for one leg of a request.
struct Pick {
  std::int32_t slot = -1;
  std::uint32_t generation = 0;
  std::int32_t cached_blocks = 0;
  std::int64_t prefill_tokens = 0;  ///< counted in the slot's inflight_prefill_tokens until first byte
  std::string host;
  std::uint16_t port = 0;
  std::string label;
  bool ok() const { return slot >= 0; }
};

/// A request's legs, as the table decided and counted them.
struct Plan {
  Pick main;     ///< decode (P/D) or aggregated endpoint
  Pick prefill;  ///< P/D prefill endpoint, when disaggregating
  bool pd_evaluated = false;
  PdReason reason = PdReason::below_threshold;
  Clock::time_point decided;  ///< when the decision was made (its latency's end)
  /// The decision explained (plan() with explain): one JSON object on one line; empty otherwise.
  std::string decision;
};

/// How long a peer's snapshot is kept for the endpoints added after it was loaded (DNS brings them
/// within a refresh or two of the start).
inline constexpr std::int64_t kPeerSnapshotKeepMs = 60'000;
/// Endpoint labels a late peer fetch was made for (EndpointTable::set_late_peer_fetch).
inline constexpr std::size_t kMaxLatePeerLabels = 4096;

class EndpointTable final : public KvEventSink {
 public:
  /// Reads the roles of `config`'s endpoints and pools (P/D when any is decode), builds the index
  /// (when any endpoint publishes KV events, or precise prefixes are asked for) and the planner.
  /// Does not add the static endpoints (add() them once the hooks are set). Error: a message that
  /// names the option, the value and the fix. `metrics` must outlive the table.
  static Expected<std::unique_ptr<EndpointTable>, std::string> create(const RouterConfig& config,
                                                                      RouterMetrics& metrics);

  /// Told of each endpoint added (with its KV-event topic prefix, and the KV-event sequence its
  /// entries loaded from a peer snapshot reach, -1 for none) and removed, under the lock.
  struct Hooks {
    std::function<void(EndpointId, const EndpointSlot&, const std::string& topic, std::int64_t resume_seq)> added;
    std::function<void(EndpointId, const EndpointSlot&)> removed;
  };
  /// Call before the first add().
  void set_hooks(Hooks hooks) { hooks_ = std::move(hooks); }

  /// Adds an endpoint in the first free slot (one that is absent with no leg in flight); returns
  /// its id, or -1 when every slot is taken (logged). Takes the lock.
  int add(const EndpointSpec& spec, bool from_dns, const std::string& topic);
  /// Makes `pool`'s DNS endpoints those of `addresses` x the pool's ports: adds the new ones,
  /// removes those whose address is gone. Takes the lock.
  void sync_dns_pool(const DnsPoolSpec& pool, const std::set<std::string>& addresses);

  /// Decides where `rq` goes (RoutePlanner::plan_route + apply_route) over the present endpoints
  /// that are routable at `t` and not in `exclude` (bit i = endpoint id i), and counts its legs
  /// in flight. `allow_pd` false keeps a P/D request on a decode endpoint (retries). No leg is
  /// picked (main.ok() false) when no endpoint of the needed role is eligible.
  /// `explain`: also fill Plan::decision (RoutePlanner::explain_route over the same snapshot, under
  /// the same lock hold; one more scoring pass and a JSON line, so only when asked).
  /// The policy sees `rq` with now_ms = `t` in steady-clock milliseconds (rq.now_ms is ignored).
  Plan plan(const RouteRequest& rq, std::uint64_t exclude, bool allow_pd, Clock::time_point t, bool explain = false);
  /// The leg's first byte arrived: its prefill is done.
  void first_byte(Pick& p);
  /// The leg ended (any outcome); `p` is no longer a leg after this.
  void finish(Pick& p, std::uint64_t request_id);
  /// The leg `p` of `rq` (as given to plan()) failed before its worker answered, or the worker
  /// drains: first the policy forgets that the worker holds the prompt (RoutePlanner::on_failed
  /// with `prefill_leg`, unless the endpoint changed hands), so that a precise policy's pending
  /// route does not draw the prompt's next requests there; then the leg ends as finish(p,
  /// rq.request_id) ends it. `p` is no longer a leg after this. No-op when `p` is not ok.
  void finish_failed(const RouteRequest& rq, Pick& p, bool prefill_leg);
  /// The leg's endpoint failed (definitive: nothing listens) or served it.
  void upstream_failed(const Pick& p, bool definitive, std::string_view what);
  void upstream_ok(const Pick& p);
  /// The leg's endpoint answered 503: it is draining (endpoint_health.h record_draining): no new
  /// requests go there, and that is not a failure. Legs in flight there run to their end.
  void upstream_draining(const Pick& p);

  /// Requests go to decode endpoints (some endpoint or pool is decode).
  bool pd_mode() const { return pd_mode_; }
  /// Prefix scorers read the KV-event index (else the policy's own routing history).
  bool precise() const { return precise_; }
  /// Some endpoint or pool is prefill: readiness needs a healthy one.
  bool need_prefill() const { return need_prefill_; }
  /// Empty when some endpoint of each needed role is routable; otherwise why not.
  std::string not_ready_reason();

  // ---- the health loop's view ------------------------------------------------------------------
  struct Present {
    int id = 0;
    std::string host;
    std::uint16_t port = 0;
    std::uint32_t generation = 0;
  };
  /// The present endpoints (one hold of the lock).
  void present(std::vector<Present>& out);
  /// Live state of slot `id` (atomics: no lock needed).
  EndpointSlot& slot(int id) { return slots_[static_cast<std::size_t>(id)]; }
  /// A health check of endpoint `id` (if still that generation), sent at `started_ms`, passed or
  /// not; `draining`: it answered 503, which is no failure from an endpoint already marked
  /// draining (upstream_draining); `says_draining`: the 503 said "draining", which marks it so.
  /// Logs transitions.
  void health_checked(int id, std::uint32_t generation, bool ok, const std::string& failure,
                      std::int64_t started_ms = 0, bool draining = false, bool says_draining = false);
  /// A load report (vLLM's gauges) of endpoint `id`, if still that generation.
  void load_reported(int id, std::uint32_t generation, const ScrapedLoad& load);

  // ---- scaling signals (scaling_signals.h) ------------------------------------------------------
  /// The present endpoints' state by pool: prefill endpoints, and decode endpoints (aggregated ones
  /// when not in P/D mode). Takes the lock once; queued_requests is left to the caller.
  void observe_pools(PoolObservation& prefill, PoolObservation& decode);

  // ---- peer snapshots (peer_snapshot.h) --------------------------------------------------------------
  /// The index as a peer snapshot: per present endpoint with KV events (only those labelled as one
  /// of `only`, when given), its label, last applied sequence, routing group and the blocks its
  /// keyers translate (oldest first). At most `max_blocks` blocks in all: an equal share per
  /// endpoint, GPU tier first, each endpoint's newest kept. Takes the lock (O(blocks)).
  void snapshot(PeerSnapshot& out, std::size_t max_blocks, const std::vector<std::string>* only = nullptr);
  /// Keeps `snapshot` (a peer's) for the endpoints added from now on, for `keep_ms`: an endpoint
  /// whose label matches one of its endpoints gets its blocks (keyers and index) as it is added, and
  /// the hooks' resume_seq. Refused (false, logged) when the block size differs. Takes the lock.
  bool set_peer_snapshot(PeerSnapshot snapshot, std::int64_t keep_ms = kPeerSnapshotKeepMs);

  /// Asks a peer router for the entries of the endpoints `labels` (peer_link.h
  /// fetch_peer_snapshot with their labels); error: why not, in words.
  using LatePeerFetch = std::function<Expected<PeerSnapshot, std::string>(const std::vector<std::string>& labels)>;
  /// A DNS endpoint with KV events first seen at or after `from_ms` (now_ms() clock; the start-time
  /// snapshot's window ends there), and absent from any snapshot still kept, gets its entries from
  /// `fetch` before it is added: sync_dns_pool() calls it off the lock, on the DNS thread, once per
  /// refresh for that refresh's new endpoints. Bounded: one fetch per endpoint label ever (at most
  /// kMaxLatePeerLabels labels; later ones start cold); `fetch` bounds its own time. A failure is
  /// logged and the endpoints start cold. Call before DNS discovery starts.
  void set_late_peer_fetch(LatePeerFetch fetch, std::int64_t from_ms);

  // ---- metrics -----------------------------------------------------------------------------------
  /// Appends the index gauges and the per-endpoint families (takes the lock).
  void write_metrics(std::string& out);
  /// Times a thread slept waiting for the lock.
  std::uint64_t lock_sleeps() const { return mu_.sleeps(); }

  // ---- KvEventSink (the subscriber's thread) ------------------------------------------------------
  void on_kv_batch(EndpointId id, std::uint32_t generation, const KvEventBatch& batch) override;
  void on_kv_clear(EndpointId id, std::uint32_t generation, std::string_view why) override;

  EndpointTable(const EndpointTable&) = delete;
  EndpointTable& operator=(const EndpointTable&) = delete;

 private:
  EndpointTable(RouterMetrics& metrics, HealthPolicy health) : metrics_(metrics), health_(health) {}
  void remove(int id);  // lock held
  // Whether a batch of `rank` (-1: absent) belongs to endpoint `id`; learns or changes a DNS
  // endpoint's rank (lock held). See endpoint_table.cc.
  bool rank_matches(EndpointId id, std::int32_t rank);
  void fill_pick(Pick& out, int id, std::int32_t cached_blocks) const;
  // Plan::decision for `rp` over `st` (lock held, before apply_route).
  void explain(const RouteRequest& rq, std::span<const EndpointState> st, const RoutePlan& rp, std::string& out) const;

  RouterMetrics& metrics_;
  HealthPolicy health_;
  Hooks hooks_;
  bool pd_mode_ = false;
  bool need_prefill_ = false;
  bool precise_ = false;
  std::string policy_name_;

  SpinThenBlockMutex mu_;
  std::array<EndpointSlot, kMaxRoutingEndpoints> slots_;
  // Bit i set while slots_[i].present (guarded by mu_): plan() visits the present slots only,
  // instead of reading a flag in each of the 64 slots (a cache line apiece) on every request.
  std::uint64_t present_ids_ = 0;
  std::optional<KvBlockIndex> index_;
  std::optional<RoutePlanner> planner_;
  // KV events -> the router's own block keys, one keyer per endpoint and tier (made at the first
  // store of that tier: a GPU-only deployment never allocates the others). Per tier because vLLM's
  // offloading connectors publish a copy under the GPU block's hash (block_keyer.h).
  BlockKeyer& keyer(EndpointId id, KvTier tier);
  const BlockKeyer* find_keyer(EndpointId id, KvTier tier) const {
    return keyers_[id][static_cast<std::size_t>(tier)].get();
  }
  void reset_keyers(EndpointId id) {
    for (auto& k : keyers_[id]) k.reset();
  }
  std::array<std::array<std::unique_ptr<BlockKeyer>, kKvTierCount>, kMaxRoutingEndpoints> keyers_;
  std::size_t keyer_capacity_ = 1 << 16;
  // Bit i set once endpoint i stored blocks under the publisher's own hashes (events without token
  // ids); until then a removal need not probe the index for them (a cache miss per block).
  std::uint64_t publisher_keyed_ids_ = 0;
  std::int32_t block_size_ = 16;
  std::uint64_t keyed_blocks_ = 0;
  std::array<std::uint64_t, BlockKeyer::kSkipCount> unkeyed_blocks_{};
  // KV-event batches whose data_parallel_rank differs from the endpoint's (on_kv_batch).
  std::uint64_t rank_mismatch_batches_ = 0;
  // The last KV-event sequence applied per endpoint (-1: none); what a peer snapshot resumes from.
  std::array<std::int64_t, kMaxRoutingEndpoints> kv_seq_{};
  // A peer's snapshot waiting for its endpoints to be added (set_peer_snapshot), until peer_until_ms_.
  std::optional<PeerSnapshot> peer_;
  std::int64_t peer_until_ms_ = 0;
  // Loads peer_'s entry for slot `id` (lock held); returns its sequence, -1 when there is none.
  std::int64_t load_peer_entry(EndpointId id);
  // Late peer fetches (set_late_peer_fetch): the labels fetched for so far (guarded by mu_).
  LatePeerFetch late_fetch_;
  std::int64_t late_from_ms_ = 0;
  std::set<std::string> late_tried_;
  bool late_full_logged_ = false;
  // Fetches peer entries for those of `fresh` that qualify (sync_dns_pool, off the lock).
  void late_peer_load(const std::vector<EndpointSpec>& fresh);
};

}  // namespace disagg::router
