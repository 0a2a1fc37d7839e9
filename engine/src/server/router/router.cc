#include "router.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <array>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "admission.h"
#include "disagg/block_hash.h"
#include "disagg/kv_block_index.h"
#include "disagg/routing.h"
#include "endpoint_health.h"
#include "kv_event_subscriber.h"
#include "request_parse.h"
#include "request_scan.h"
#include "retry_policy.h"
#include "router_metrics.h"
#include "spin_then_block_mutex.h"
#include "server/http/http_client.h"
#include "server/http/http_server.h"
#include "server/http/openai_error.h"
#include "server/http/sse.h"
#include "thread_pinning.h"

namespace disagg::router {

namespace {

using json = nlohmann::json;
using http::Header;
using http::ResponseWriter;
using http::Task;
namespace net = http::net;
using Clock = std::chrono::steady_clock;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::uint64_t fnv64(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

void log_line(const std::string& line) {
  std::fprintf(stderr, "disagg-engine router: %s\n", line.c_str());
  std::fflush(stderr);
}

// Per-request buffers, recycled so steady-state requests do not allocate token and hash arrays.
struct Scratch {
  std::vector<TokenId> tokens;
  std::vector<BlockHash> hashes;
  std::string text;
};

// Per thread: a request takes and returns its scratch on the thread that serves its connection, so
// the free list needs no lock (a shared one passed its mutex between the HTTP threads' cores on
// every request). A scratch released on another thread (a strand that moved) joins that thread's
// list.
class ScratchPool {
 public:
  std::unique_ptr<Scratch> acquire() {
    auto& free = free_list();
    if (free.empty()) return std::make_unique<Scratch>();
    auto s = std::move(free.back());
    free.pop_back();
    return s;
  }
  void release(std::unique_ptr<Scratch> s) {
    if (!s) return;
    s->tokens.clear();
    s->hashes.clear();
    s->text.clear();
    // Very large prompts do not pin their memory.
    if (s->tokens.capacity() > (1u << 20)) return;
    auto& free = free_list();
    if (free.size() < 256) free.push_back(std::move(s));
  }

 private:
  static std::vector<std::unique_ptr<Scratch>>& free_list() {
    thread_local std::vector<std::unique_ptr<Scratch>> free;
    return free;
  }
};

constexpr std::size_t kSessionSlots = 1 << 14;

struct SessionEntry {
  std::uint64_t key = 0;
  std::uint32_t generation = 0;
  std::int32_t slot = -1;
};

// One endpoint chosen for one leg of a request.
struct Pick {
  std::int32_t slot = -1;
  std::uint32_t generation = 0;
  std::int32_t cached_blocks = 0;
  std::int64_t prefill_tokens = 0;  // counted in the slot's inflight_prefill_tokens until first byte
  std::string host;
  std::uint16_t port = 0;
  std::string label;
  bool ok() const { return slot >= 0; }
};

struct Plan {
  Pick main;     // decode (P/D) or aggregated endpoint
  Pick prefill;  // P/D prefill endpoint, when disaggregating
  bool pd_evaluated = false;
  PdReason reason = PdReason::below_threshold;
  Clock::time_point decided;  // when the decision was made (its latency's end)
};

// A client that closes its connection cancels what its request waits on
// (ResponseWriter::watch_close): the upstream request while it is proxied, whatever phase it is in
// (waiting for the answer's header, reading a whole answer, or streaming; the worker then sees its
// connection close and aborts), or its place in the admission queue. `T` has cancel(); the callback
// holds one pointer, so the watch keeps it in place.
template <class T>
class CancelOnClientClose {
 public:
  explicit CancelOnClientClose(T* target) : target_(target) {}
  void operator()() const { target_->cancel(); }

 private:
  T* target_;
};

// Ends the watch before what its callback refers to goes away.
class CloseWatchGuard {
 public:
  explicit CloseWatchGuard(ResponseWriter& w) : w_(w) {}
  ~CloseWatchGuard() { w_.unwatch_close(); }
  CloseWatchGuard(const CloseWatchGuard&) = delete;
  CloseWatchGuard& operator=(const CloseWatchGuard&) = delete;

 private:
  ResponseWriter& w_;
};

ErrorCause cause_of(const http::ClientError& e) {
  switch (e.code) {
    case http::ClientErrc::resolve_failed:
    case http::ClientErrc::connect_failed:
    case http::ClientErrc::connect_timeout:
    case http::ClientErrc::write_failed: return ErrorCause::upstream_connect;
    case http::ClientErrc::first_byte_timeout:
    case http::ClientErrc::idle_timeout: return ErrorCause::upstream_timeout;
    default: return ErrorCause::upstream_broken;
  }
}


std::size_t count_events(std::string_view piece) {
  std::size_t n = 0;
  for (std::size_t p = piece.find("data:"); p != std::string_view::npos; p = piece.find("data:", p + 5)) ++n;
  return n;
}

}  // namespace

struct Router::Impl final : KvEventSink {
  explicit Impl(RouterConfig c)
      : config(std::move(c)),
        admission(config.max_inflight, config.max_queue),
        decider(config.decider) {
    health.eject_after = config.eject_after;
    health.eject_ms = config.eject_ms;
    for (int i = 1; i < config.threads; ++i) extra_contexts.push_back(std::make_unique<net::io_context>(1));
    // Each context is run by one thread (run()), as the client's skipped first read requires.
    for (net::io_context* ctx : contexts()) reactors.emplace_back(*ctx);
    if (config.upstream_keepalive > 0) {
      http::ConnectionPool::Options po;
      po.max_idle_per_endpoint = static_cast<std::size_t>(config.upstream_keepalive);
      po.idle_ttl = std::chrono::milliseconds(config.upstream_keepalive_ms);
      po.keep_registered = true;  // each pool serves one single-threaded context
      for (int i = 0; i < config.threads; ++i) upstream_pools.push_back(std::make_unique<http::ConnectionPool>(po));
    }
  }

  RouterConfig config;
  HealthPolicy health;
  // One io_context per HTTP thread, each run by that thread alone: a client connection and its
  // upstream requests stay on one thread, so a request wakes no other thread (on a shared
  // multi-threaded io_context, handing completions between threads was most of the router's
  // added latency). `ioc` (thread 1) also runs the listener, health checks and scrapes.
  // The others are declared first so that they outlive `ioc`, whose accept loop holds their sockets.
  std::vector<std::unique_ptr<net::io_context>> extra_contexts;
  net::io_context ioc{1};
  // The health loop sleeps on it until its next probe or scrape is due; add_endpoint() cancels it
  // so that a new endpoint is checked at once.
  net::steady_timer health_timer{ioc};
  net::signal_set signals{ioc, SIGTERM, SIGINT};
  std::unique_ptr<http::HttpServer> server;
  RouterMetrics metrics;
  Admission admission;
  PdDecider decider;
  ScratchPool scratch;
  // Keep-alive connections to the endpoints (every leg, health check and scrape): a new TCP
  // connection per request was most of the latency the router added. One pool per io_context
  // (index 0 = `ioc`, then extra_contexts), so a parked connection stays registered with its
  // thread's reactor; destroyed before the contexts. Empty = reuse off.
  std::vector<std::unique_ptr<http::ConnectionPool>> upstream_pools;
  // The reactor of each context in contexts(), looked up once (read_response.h).
  std::vector<http::SocketReactor> reactors;
  std::int64_t started_unix = 0;

  SpinThenBlockMutex mu;  // slots' identity, policy, index, sessions (held ~1-2 us per request)
  std::array<EndpointSlot, kMaxRoutingEndpoints> slots;
  // Bit i set while slots[i].present (guarded by mu): plan() visits the present slots only, instead
  // of reading a flag in each of the 64 slots (a cache line apiece) on every request.
  std::uint64_t present_ids = 0;
  std::optional<KvBlockIndex> index;
  std::unique_ptr<RoutingPolicy> policy;
  std::array<SessionEntry, kSessionSlots> sessions{};
  bool pd_mode = false;
  bool need_prefill = false;

  std::unique_ptr<KvEventSubscriber> subscriber;
  std::atomic<bool> draining{false};
  // The next block of request ids (see take_request_id()).
  std::atomic<std::uint64_t> next_request_id{1};
  // Tells this router's blocks from another's in a thread's cache (tests run several routers).
  const std::uint64_t instance = [] {
    static std::atomic<std::uint64_t> routers{0};
    return routers.fetch_add(1, std::memory_order_relaxed) + 1;
  }();

  // A request id, unique within the router: each thread takes kRequestIdBlock ids at a time, so
  // that a request does not take a shared counter's line from the other HTTP thread's core. Ids
  // rise per thread, not router-wide.
  static constexpr std::uint64_t kRequestIdBlock = 1024;
  std::uint64_t take_request_id() {
    struct Block {
      std::uint64_t router = 0;
      std::uint64_t next = 0;
      std::uint64_t end = 0;
    };
    thread_local Block block;
    if (block.router != instance || block.next == block.end) {
      block.router = instance;
      block.next = next_request_id.fetch_add(kRequestIdBlock, std::memory_order_relaxed);
      block.end = block.next + kRequestIdBlock;
    }
    return block.next++;
  }

  std::thread dns_thread;
  std::mutex dns_mu;
  std::condition_variable dns_cv;
  bool dns_stop = false;

  // Index of the io_context that runs `ex` in contexts().
  std::size_t context_index(const net::any_io_executor& ex) const {
    const net::execution_context* ctx = &net::query(ex, net::execution::context);
    for (std::size_t i = 0; i < extra_contexts.size(); ++i) {
      if (ctx == extra_contexts[i].get()) return i + 1;
    }
    return 0;
  }

  // Client options for a request on the io_context that runs `ex`: its upstream pool (none when
  // reuse is off) and its reactor.
  http::ClientOptions client_options(const net::any_io_executor& ex) {
    http::ClientOptions o;
    const std::size_t i = context_index(ex);
    o.pool = upstream_pools.empty() ? nullptr : upstream_pools[i].get();
    o.one_thread_reactor = reactors[i];
    return o;
  }

  std::vector<net::io_context*> contexts() {
    std::vector<net::io_context*> out{&ioc};
    for (auto& c : extra_contexts) out.push_back(c.get());
    return out;
  }

  // A timer that is always the next to expire on `ctx`: the reactor reprograms its timerfd when a
  // new timer becomes the earliest, which every socket timeout of a request did on threads without
  // this (4 system calls per request). Every context runs one, `ioc` included.
  static Task<void> timer_anchor(net::io_context& ctx) {
    net::steady_timer t(ctx);
    while (!ctx.stopped()) {
      t.expires_after(std::chrono::milliseconds(250));
      boost::system::error_code ec;
      co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
  }

  void stop_contexts() {
    ioc.stop();
    for (auto& c : extra_contexts) c->stop();
  }

  // ---- endpoints ------------------------------------------------------------------------------

  int add_endpoint(const EndpointSpec& spec, bool from_dns, const std::string& topic) {
    for (int id = 0; id < kMaxRoutingEndpoints; ++id) {
      EndpointSlot& s = slots[static_cast<std::size_t>(id)];
      if (s.present || s.inflight.load() != 0) continue;
      s.present = true;
      present_ids |= std::uint64_t{1} << id;
      ++s.generation;
      s.spec = spec;
      s.from_dns = from_dns;
      s.label = (spec.host.find(':') != std::string::npos ? "[" + spec.host + "]" : spec.host) + ":" +
                std::to_string(spec.port);
      s.reset_live();
      if (index) index->clear(static_cast<EndpointId>(id));
      if (!spec.kv_events.empty() && subscriber) {
        subscriber->add(static_cast<EndpointId>(id), s.generation, spec.kv_events, spec.kv_replay, topic);
      }
      net::post(ioc, [this] { health_timer.cancel(); });
      log_line("endpoint " + s.label + " added (pool " + spec.pool + ", role " +
               std::string(to_string(spec.role)) + (spec.kv_events.empty() ? "" : ", kv events " + spec.kv_events) + ")");
      return id;
    }
    log_line("endpoint " + spec.host + ":" + std::to_string(spec.port) + " not added: all " +
             std::to_string(kMaxRoutingEndpoints) + " endpoint slots are in use");
    return -1;
  }

  void remove_endpoint(int id) {
    EndpointSlot& s = slots[static_cast<std::size_t>(id)];
    if (!s.present) return;
    s.present = false;
    present_ids &= ~(std::uint64_t{1} << id);
    if (index) index->clear(static_cast<EndpointId>(id));
    for (auto& pool : upstream_pools) pool->drop(s.spec.host + ":" + std::to_string(s.spec.port));
    if (subscriber) subscriber->remove(static_cast<EndpointId>(id));
    log_line("endpoint " + s.label + " removed (no longer in DNS)");
  }

  // ---- KV events (subscriber thread) ------------------------------------------------------------

  void on_kv_batch(EndpointId id, std::uint32_t generation, const KvEventBatch& batch) override {
    std::lock_guard lock(mu);
    const EndpointSlot& s = slots[id];
    if (!index || !s.present || s.generation != generation) return;
    for (const KvEventRecord& e : batch.events) {
      switch (e.type) {
        case KvEventType::block_stored: (void)index->apply_stored(id, e.tier, batch.hashes_of(e)); break;
        case KvEventType::block_removed: (void)index->apply_removed(id, e.tier, batch.hashes_of(e)); break;
        case KvEventType::all_blocks_cleared: index->clear(id); break;
      }
    }
  }

  void on_kv_clear(EndpointId id, std::uint32_t generation, std::string_view why) override {
    std::lock_guard lock(mu);
    const EndpointSlot& s = slots[id];
    if (!index || !s.present || s.generation != generation) return;
    const std::int64_t dropped = index->clear(id);
    log_line("KV index entries of " + s.label + " cleared (" + std::string(why) + "): " + std::to_string(dropped));
  }

  // ---- DNS discovery (own thread) -----------------------------------------------------------------

  static std::optional<std::set<std::string>> resolve(const std::string& host) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return std::nullopt;
    std::set<std::string> out;
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      char buf[INET6_ADDRSTRLEN] = {};
      if (a->ai_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf, sizeof buf);
      } else if (a->ai_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, buf, sizeof buf);
      } else {
        continue;
      }
      out.insert(buf);
    }
    freeaddrinfo(res);
    return out;
  }

  void sync_pool(const DnsPoolSpec& pool, const std::set<std::string>& addresses) {
    // One endpoint per address x port (a pod serving one vLLM API server per local data-parallel
    // rank lists every rank's port); the pool's ports never change, so only addresses come and go.
    std::lock_guard lock(mu);
    std::set<std::pair<std::string, std::uint16_t>> have;
    for (int id = 0; id < kMaxRoutingEndpoints; ++id) {
      EndpointSlot& s = slots[static_cast<std::size_t>(id)];
      if (!s.present || !s.from_dns || s.spec.pool != pool.pool) continue;
      if (addresses.count(s.spec.host) == 0) remove_endpoint(id);
      else have.emplace(s.spec.host, s.spec.port);
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
        }
        add_endpoint(e, true, pool.topic_prefix);
      }
    }
  }

  void dns_loop() {
    std::vector<std::int64_t> next(config.dns_pools.size(), 0);
    std::vector<bool> failing(config.dns_pools.size(), false);
    while (true) {
      const std::int64_t now = now_ms();
      for (std::size_t i = 0; i < config.dns_pools.size(); ++i) {
        const DnsPoolSpec& p = config.dns_pools[i];
        if (now < next[i]) continue;
        next[i] = now + static_cast<std::int64_t>(p.refresh_seconds * 1000);
        auto addrs = resolve(p.host);
        if (!addrs) {
          // A failed lookup keeps the endpoints known so far (DNS hiccups must not empty a pool).
          if (!failing[i]) log_line("cannot resolve " + p.host + " (pool " + p.pool + "); keeping its known endpoints");
          failing[i] = true;
          continue;
        }
        failing[i] = false;
        sync_pool(p, *addrs);
      }
      // Sleep until the next pool's refresh is due (lookups may have taken a while); stop wakes it.
      const std::int64_t due = *std::min_element(next.begin(), next.end());
      const auto wait = std::chrono::milliseconds(std::max<std::int64_t>(due - now_ms(), 10));
      std::unique_lock lock(dns_mu);
      if (dns_cv.wait_for(lock, wait, [&] { return dns_stop; })) return;
    }
  }

  // ---- routing ----------------------------------------------------------------------------------

  // Fills `out` from the slot of `id` (lock held).
  void fill_pick(Pick& out, int id, std::int32_t cached_blocks) {
    const EndpointSlot& s = slots[static_cast<std::size_t>(id)];
    out.slot = id;
    out.generation = s.generation;
    out.cached_blocks = cached_blocks;
    out.host = s.spec.host;
    out.port = s.spec.port;
    out.label = s.label;
  }

  // `t`: now, as the caller has just read it (each clock read costs tens of nanoseconds, and a
  // request would otherwise read it 14 times).
  Plan plan(RouteRequest& rq, std::uint64_t exclude, bool allow_pd, Clock::time_point t) {
    const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    std::size_t n = 0;
    Plan out;
    std::lock_guard lock(mu);
    // The endpoint snapshot: per thread, not per request (64 EndpointStates are 4 KiB, of which a
    // request fills two or three), and not one per router, whose lines each request would take
    // from the other HTTP thread's core. Used only inside this call.
    thread_local std::array<EndpointState, kMaxRoutingEndpoints> states;
    for (std::uint64_t ids = present_ids; ids != 0; ids &= ids - 1) {
      const int id = std::countr_zero(ids);
      const EndpointSlot& s = slots[static_cast<std::size_t>(id)];
      EndpointState& e = states[n++];
      e = EndpointState{};
      e.id = static_cast<EndpointId>(id);
      e.role = s.spec.role;
      e.healthy = routable(s, now) && ((exclude >> id) & 1U) == 0;
      // Scraped numbers lag; the router's own count of requests in flight does not.
      e.running_requests = std::max(s.running.load(std::memory_order_relaxed), s.inflight.load(std::memory_order_relaxed));
      e.waiting_requests = s.waiting.load(std::memory_order_relaxed);
      e.kv_usage = s.kv_usage.load(std::memory_order_relaxed);
      e.inflight_prefill_tokens = std::max<std::int64_t>(0, s.inflight_prefill_tokens.load(std::memory_order_relaxed));
    }
    const std::span<const EndpointState> st(states.data(), n);
    rq.role = pd_mode ? EndpointRole::decode : EndpointRole::aggregated;
    RouteDecision d = policy->choose(rq, st);
    if (!d.ok()) {
      out.decided = Clock::now();
      metrics.decision_seconds.observe(std::chrono::duration<double>(out.decided - t).count());
      return out;
    }
    // Session affinity: keep a session on its endpoint while that endpoint is eligible and not
    // far more loaded than the least loaded one (the same guard as the "disagg" policy's).
    SessionEntry* session = nullptr;
    if (rq.session_key != 0) {
      session = &sessions[rq.session_key % kSessionSlots];
      if (session->key == rq.session_key && session->slot >= 0 && session->slot != d.endpoint &&
          slots[static_cast<std::size_t>(session->slot)].present &&
          slots[static_cast<std::size_t>(session->slot)].generation == session->generation) {
        std::int64_t min_load = INT64_MAX;
        std::int32_t pos = -1;
        for (std::size_t i = 0; i < n; ++i) {
          if (!eligible(st[i], rq)) continue;
          min_load = std::min(min_load, st[i].load());
          if (st[i].id == session->slot) pos = static_cast<std::int32_t>(i);
        }
        if (pos >= 0 && static_cast<double>(st[static_cast<std::size_t>(pos)].load()) <=
                            config.options.guard_ratio * static_cast<double>(min_load) + config.options.guard_slack) {
          d.index = pos;
          d.endpoint = st[static_cast<std::size_t>(pos)].id;
          d.cached_blocks = 0;
          if (index && !rq.block_hashes.empty()) {
            std::array<PrefixOverlap, kMaxRoutingEndpoints> overlaps{};
            index->longest_prefix(rq.block_hashes, overlaps);
            d.cached_blocks = overlaps[d.endpoint].blocks;
          }
        }
      }
    }
    policy->on_routed(rq, st[static_cast<std::size_t>(d.index)]);
    fill_pick(out.main, d.endpoint, d.cached_blocks);
    if (session != nullptr) *session = SessionEntry{rq.session_key, out.main.generation, out.main.slot};
    const std::int64_t cached_tokens = std::int64_t{d.cached_blocks} * rq.block_size;
    if (pd_mode && allow_pd) {
      out.pd_evaluated = true;
      out.reason = decider.decide(rq.prompt_tokens, cached_tokens, st);
      if (out.reason == PdReason::disaggregate) {
        RouteRequest pr = rq;
        pr.role = EndpointRole::prefill;
        const RouteDecision p = policy->choose(pr, st);
        if (p.ok()) {
          policy->on_routed(pr, st[static_cast<std::size_t>(p.index)]);
          fill_pick(out.prefill, p.endpoint, p.cached_blocks);
        } else {
          out.reason = PdReason::no_prefill_endpoint;
        }
      }
      metrics.pd_decisions[static_cast<int>(out.reason)].fetch_add(1, std::memory_order_relaxed);
    }
    // Count the request against the endpoints now, so the next decision sees it.
    Pick& prefiller = out.prefill.ok() ? out.prefill : out.main;
    prefiller.prefill_tokens =
        std::max<std::int64_t>(0, rq.prompt_tokens - std::int64_t{prefiller.cached_blocks} * rq.block_size);
    for (Pick* p : {&out.main, &out.prefill}) {
      if (!p->ok()) continue;
      EndpointSlot& s = slots[static_cast<std::size_t>(p->slot)];
      s.inflight.fetch_add(1, std::memory_order_relaxed);
      s.requests.fetch_add(1, std::memory_order_relaxed);
      s.inflight_prefill_tokens.fetch_add(p->prefill_tokens, std::memory_order_relaxed);
    }
    metrics.prefix_query_blocks.fetch_add(rq.block_hashes.size(), std::memory_order_relaxed);
    metrics.prefix_hit_blocks.fetch_add(static_cast<std::uint64_t>(std::max(0, d.cached_blocks)), std::memory_order_relaxed);
    out.decided = Clock::now();
    metrics.decision_seconds.observe(std::chrono::duration<double>(out.decided - t).count());
    return out;
  }

  // The leg's first byte arrived: its prefill is done.
  void first_byte(Pick& p) {
    if (!p.ok() || p.prefill_tokens == 0) return;
    slots[static_cast<std::size_t>(p.slot)].inflight_prefill_tokens.fetch_sub(p.prefill_tokens, std::memory_order_relaxed);
    p.prefill_tokens = 0;
  }

  // The leg ended (any outcome).
  void finish(Pick& p, std::uint64_t request_id) {
    if (!p.ok()) return;
    first_byte(p);
    EndpointSlot& s = slots[static_cast<std::size_t>(p.slot)];
    // Atomic, and not reset when the slot changes hands (the old endpoint's requests still end
    // here), so no lock: the lock is for the policy's hook alone, which the built-in policies do
    // not have. (Taking it anyway passed its line between the HTTP threads' cores per request.)
    s.inflight.fetch_sub(1, std::memory_order_relaxed);
    if (policy->tracks_finished()) {
      std::lock_guard lock(mu);
      if (s.present && s.generation == p.generation) policy->on_finished(request_id, static_cast<EndpointId>(p.slot));
    }
    p.slot = -1;
  }

  void upstream_failed(const Pick& p, bool definitive, std::string_view what) {
    EndpointSlot& s = slots[static_cast<std::size_t>(p.slot)];
    if (s.generation != p.generation) return;
    const bool was_up = s.up.load();
    if (record_failure(s, now_ms(), health, definitive)) {
      log_line("endpoint " + p.label + " ejected for " + std::to_string(health.eject_ms) + " ms after " +
               std::to_string(s.failures.load()) + " consecutive failures (last: " + std::string(what) + ")");
    } else if (definitive && was_up) {
      log_line("endpoint " + p.label + " marked down (" + std::string(what) + ")");
    }
  }

  void upstream_ok(const Pick& p) {
    EndpointSlot& s = slots[static_cast<std::size_t>(p.slot)];
    if (s.generation == p.generation) record_success(s);
  }

  // ---- readiness and metrics ----------------------------------------------------------------------

  // Empty when ready; otherwise why not.
  std::string not_ready_reason() {
    if (draining.load()) return "draining";
    const std::int64_t now = now_ms();
    bool have_main = false, have_prefill = false;
    std::lock_guard lock(mu);
    for (const EndpointSlot& s : slots) {
      if (!s.present || !routable(s, now)) continue;
      const EndpointRole main_role = pd_mode ? EndpointRole::decode : EndpointRole::aggregated;
      have_main = have_main || s.spec.role == main_role;
      have_prefill = have_prefill || s.spec.role == EndpointRole::prefill;
    }
    if (!have_main) return std::string("no healthy ") + (pd_mode ? "decode" : "aggregated") + " endpoint";
    if (need_prefill && !have_prefill) return "no healthy prefill endpoint";
    return "";
  }

  std::string metrics_text() {
    std::string out;
    out.reserve(16 << 10);
    metrics.write(out);
    write_metric(out, "disagg_router_inflight_requests", "gauge", "Requests being proxied now.", "",
                 admission.active());
    write_metric(out, "disagg_router_queued_requests", "gauge", "Requests waiting for an admission slot.", "",
                 admission.queued());
    double reused = 0, idle = 0;
    for (const auto& pool : upstream_pools) {
      reused += static_cast<double>(pool->reused());
      idle += static_cast<double>(pool->idle());
    }
    write_metric(out, "disagg_router_upstream_connections_reused_total", "counter",
                 "Upstream requests sent over a kept-alive connection.", "", reused);
    write_metric(out, "disagg_router_upstream_idle_connections", "gauge",
                 "Kept-alive upstream connections waiting for a request.", "", idle);
    write_metric(out, "disagg_router_routing_lock_sleeps_total", "counter",
                 "Times a thread slept waiting for the routing lock (scoring is serialized; spinning covers short waits).",
                 "", static_cast<double>(mu.sleeps()));
    std::lock_guard lock(mu);
    write_metric(out, "disagg_router_kv_index_entries", "gauge", "Entries (block x endpoint x tier) in the KV block index.",
                 "", index ? static_cast<double>(index->size()) : 0);
    write_metric(out, "disagg_router_kv_index_evictions_total", "counter", "Index entries evicted by its bounds.", "",
                 index ? static_cast<double>(index->evictions()) : 0);
    struct Family {
      const char* name;
      const char* type;
      const char* help;
    };
    constexpr std::array<Family, 8> families = {{
        {"disagg_router_endpoint_healthy", "gauge", "1 when the endpoint receives requests (health check passed, not ejected)."},
        {"disagg_router_endpoint_inflight", "gauge", "Requests the router has in flight on the endpoint."},
        {"disagg_router_endpoint_running", "gauge", "vllm:num_requests_running last scraped."},
        {"disagg_router_endpoint_waiting", "gauge", "vllm:num_requests_waiting last scraped."},
        {"disagg_router_endpoint_kv_usage", "gauge", "vllm:kv_cache_usage_perc last scraped."},
        {"disagg_router_endpoint_kv_index_entries", "gauge", "KV block index entries of the endpoint."},
        {"disagg_router_endpoint_requests_total", "counter", "Requests (legs) routed to the endpoint."},
        {"disagg_router_endpoint_ejections_total", "counter", "Times the endpoint was ejected after consecutive failures."},
    }};
    const std::int64_t now = now_ms();
    for (std::size_t f = 0; f < families.size(); ++f) {
      out.append("# HELP ").append(families[f].name).append(" ").append(families[f].help).append("\n");
      out.append("# TYPE ").append(families[f].name).append(" ").append(families[f].type).append("\n");
      for (int id = 0; id < kMaxRoutingEndpoints; ++id) {
        const EndpointSlot& s = slots[static_cast<std::size_t>(id)];
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
          case 5: v = index ? static_cast<double>(index->size(static_cast<EndpointId>(id))) : 0; break;
          case 6: v = static_cast<double>(s.requests.load()); break;
          default: v = static_cast<double>(s.ejections.load()); break;
        }
        write_sample(out, families[f].name, labels, v);
      }
    }
    return out;
  }

  // ---- health checks and load scraping (coroutines on the io_context) -----------------------------

  Task<void> probe(int id, std::uint32_t generation, std::string host, std::uint16_t port) {
    http::ClientOptions o = client_options(ioc.get_executor());
    o.connect_timeout = o.first_byte_timeout = o.idle_timeout = std::chrono::milliseconds(config.health_timeout_ms);
    o.max_body_bytes = 64 << 10;
    http::ClientRequest r;
    r.method = http::bhttp::verb::get;
    r.target = "/health";
    auto res = co_await http::fetch(ioc.get_executor(), host, port, std::move(r), o);
    const bool ok = res && res->status == 200;
    EndpointSlot& s = slots[static_cast<std::size_t>(id)];
    {
      std::lock_guard lock(mu);
      if (s.present && s.generation == generation) {
        const bool was_checked = s.checked.load();
        const bool was_up = s.up.load();
        if (record_health(s, ok, now_ms(), health)) {
          log_line("endpoint " + s.label + (was_checked ? " healthy again" : " healthy"));
        } else if (!ok && (was_up || !was_checked)) {
          log_line("endpoint " + s.label + " failed its health check (" +
                   (res ? "HTTP " + std::to_string(res->status) : res.error().message()) + ")");
        }
      }
    }
    s.probing.store(false);
  }

  Task<void> scrape(int id, std::uint32_t generation, std::string host, std::uint16_t port) {
    http::ClientOptions o = client_options(ioc.get_executor());
    o.connect_timeout = o.first_byte_timeout = o.idle_timeout = std::chrono::milliseconds(config.health_timeout_ms);
    o.max_body_bytes = 4 << 20;
    http::ClientRequest r;
    r.method = http::bhttp::verb::get;
    r.target = "/metrics";
    auto res = co_await http::fetch(ioc.get_executor(), host, port, std::move(r), o);
    EndpointSlot& s = slots[static_cast<std::size_t>(id)];
    if (res && res->status == 200 && s.generation == generation) {
      const ScrapedLoad load = parse_vllm_load(res->body);
      if (load.found) {
        s.running.store(static_cast<std::int32_t>(load.running), std::memory_order_relaxed);
        s.waiting.store(static_cast<std::int32_t>(load.waiting), std::memory_order_relaxed);
        s.kv_usage.store(load.kv_usage, std::memory_order_relaxed);
      }
    }
    s.scraping.store(false);
  }

  // Probes and scrapes each present endpoint when they are due, then sleeps until the next one is
  // (at least 20 ms, so a probe that outlives its interval is not polled in a busy loop), instead
  // of waking every 20 ms to look.
  Task<void> health_loop() {
    std::array<std::int64_t, kMaxRoutingEndpoints> next_probe{};
    std::array<std::int64_t, kMaxRoutingEndpoints> next_scrape{};
    std::array<std::uint32_t, kMaxRoutingEndpoints> seen_generation{};
    struct Present {
      int id = 0;
      std::string host;
      std::uint16_t port = 0;
      std::uint32_t generation = 0;
    };
    std::vector<Present> present;
    present.reserve(kMaxRoutingEndpoints);
    while (!ioc.stopped()) {
      const std::int64_t now = now_ms();
      std::int64_t due = now + 60'000;  // none present: add_endpoint() wakes the loop
      // One hold of the router's lock per tick (the request path takes it for every decision),
      // not one per slot.
      present.clear();
      {
        std::lock_guard lock(mu);
        for (int id = 0; id < kMaxRoutingEndpoints; ++id) {
          const EndpointSlot& s = slots[static_cast<std::size_t>(id)];
          if (!s.present) continue;
          // Field by field: g++ 12 mishandles braced temporaries in coroutines (http/README.md).
          Present& e = present.emplace_back();
          e.id = id;
          e.host = s.spec.host;
          e.port = s.spec.port;
          e.generation = s.generation;
        }
      }
      for (Present& e : present) {
        const auto i = static_cast<std::size_t>(e.id);
        EndpointSlot& s = slots[i];
        if (seen_generation[i] != e.generation) {  // new endpoint: check at once
          seen_generation[i] = e.generation;
          next_probe[i] = 0;
          next_scrape[i] = 0;
        }
        if (now >= next_probe[i] && !s.probing.exchange(true)) {
          next_probe[i] = now + config.health_interval_ms;
          net::co_spawn(ioc, probe(e.id, e.generation, e.host, e.port), net::detached);
        }
        if (now >= next_scrape[i] && !s.scraping.exchange(true)) {
          next_scrape[i] = now + config.scrape_interval_ms;
          net::co_spawn(ioc, scrape(e.id, e.generation, std::move(e.host), e.port), net::detached);
        }
        due = std::min({due, next_probe[i], next_scrape[i]});
      }
      health_timer.expires_after(std::chrono::milliseconds(std::max<std::int64_t>(due - now, 20)));
      boost::system::error_code ec;
      co_await health_timer.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
  }

  // ---- HTTP ---------------------------------------------------------------------------------------

  Task<void> reject(ResponseWriter& w, int route, unsigned status, ErrorCause cause, std::string message,
                    std::string param, std::string code) {
    metrics.error(cause);
    if (route >= 0) metrics.requests[static_cast<std::size_t>(route)][1].fetch_add(1, std::memory_order_relaxed);
    std::array<Header, 1> retry = {Header{"Retry-After", "1"}};
    const bool with_retry = status == 429 || status == 503;
    co_await w.send_error(status, message, param, code,
                          with_retry ? std::span<const Header>(retry) : std::span<const Header>());
  }

  // Sends the prefill leg; returns the kv_transfer_params of its answer, or null on any failure.
  // `cancel` (the client-close watch's) aborts the leg when the client leaves: the prefill worker
  // then sees its connection close and aborts; that is not the endpoint's failure.
  Task<json> run_prefill(net::any_io_executor ex, Pick& p, const json& body, std::string target,
                         std::string request_id, Clock::time_point deadline, http::ClientCancel* cancel) {
    json pb = body;
    pb["max_tokens"] = 1;
    if (pb.contains("max_completion_tokens")) pb["max_completion_tokens"] = 1;
    pb["stream"] = false;
    pb.erase("stream_options");
    pb["kv_transfer_params"] = json{{"do_remote_decode", true}, {"do_remote_prefill", false},
                                    {"remote_engine_id", nullptr}, {"remote_block_ids", nullptr},
                                    {"remote_host", nullptr}, {"remote_port", nullptr}};
    http::ClientRequest r;
    r.method = http::bhttp::verb::post;
    r.target = std::move(target);
    r.body = pb.dump();
    r.headers.emplace_back("X-Request-Id", request_id);
    http::ClientOptions o = client_options(ex);
    o.connect_timeout = std::chrono::milliseconds(config.connect_timeout_ms);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    o.first_byte_timeout = std::max(std::chrono::milliseconds(1), left);
    o.idle_timeout = std::chrono::milliseconds(config.idle_timeout_ms);
    o.cancel = cancel;
    auto res = co_await http::fetch(ex, p.host, p.port, std::move(r), o);
    json params;  // null
    if (!res && res.error().code == http::ClientErrc::cancelled) {
      co_return params;  // the client left; the caller sees cancel->cancelled()
    }
    if (!res) {
      upstream_failed(p, res.error().code == http::ClientErrc::connect_failed, res.error().message());
    } else if (res->status >= 500) {
      upstream_failed(p, false, "HTTP " + std::to_string(res->status));
    } else if (res->status == 200) {
      upstream_ok(p);
      json answer = json::parse(res->body, nullptr, false);
      if (answer.is_object()) {
        auto kv = answer.find("kv_transfer_params");
        if (kv != answer.end() && kv->is_object()) params = *kv;
      }
    }
    co_return params;
  }

  Task<void> generate(http::Request& req, ResponseWriter& w, bool chat) {
    const auto t0 = Clock::now();
    const int route = chat ? 1 : 0;
    if (draining.load()) {
      co_await reject(w, route, 503, ErrorCause::draining, "the router is shutting down; retry on another replica", "", "draining");
      co_return;
    }
    std::unique_ptr<Scratch> sc = scratch.acquire();
    GenerateRequest g;
    // The document is built only where it is needed: P/D rewrites the body for its legs, and the
    // slow path answers every request the fast scan declines (errors included).
    json body;
    if (pd_mode || !scan_generate_request(req.body(), chat, config.served_models, g, sc->tokens, sc->text)) {
      body = json::parse(req.body(), nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded()) {
        scratch.release(std::move(sc));
        co_await reject(w, route, 400, ErrorCause::bad_request, "the request body is not valid JSON", "", "");
        co_return;
      }
      auto parsed = parse_generate_request(body, chat, config.served_models, g, sc->tokens, sc->text);
      if (!parsed) {
        ApiError e = parsed.error();
        scratch.release(std::move(sc));
        co_await reject(w, route, e.status, e.status == 404 ? ErrorCause::unknown_model : ErrorCause::bad_request,
                        std::move(e.message), std::move(e.param), std::move(e.code));
        co_return;
      }
    }
    sc->hashes.resize(sc->tokens.size() / static_cast<std::size_t>(config.block_size));
    sc->hashes.resize(hash_blocks(sc->tokens, static_cast<std::size_t>(config.block_size), kRootBlockHash, sc->hashes));

    RouteRequest rq;
    rq.request_id = take_request_id();
    rq.prompt_tokens = static_cast<std::int64_t>(sc->tokens.size());
    rq.output_tokens = g.max_tokens;
    rq.block_hashes = sc->hashes;
    rq.block_size = config.block_size;
    if (!config.session_header.empty()) {
      const std::string_view session = req[config.session_header];
      if (!session.empty()) rq.session_key = fnv64(session) | 1U;
    }

    // A free slot is taken without a coroutine; only a wait for one needs acquire(). A client that
    // leaves while queued gives its place up at once (the connection's close watch wakes the wait).
    // Only a wait reads the clock: a request admitted at once was queued for 0 s.
    bool admitted = admission.try_acquire();
    double queued = 0;
    if (!admitted) {
      const auto tq = Clock::now();
      Admission::Cancel left;
      {
        w.watch_close(CancelOnClientClose(&left));
        const CloseWatchGuard watch_guard(w);
        admitted = co_await admission.acquire(w.executor(), std::chrono::milliseconds(config.queue_timeout_ms), &left);
      }
      queued = seconds_since(tq);
      if (w.client_closed()) {
        if (admitted) admission.release();
        scratch.release(std::move(sc));
        metrics.queue_seconds.observe(queued);
        metrics.error(ErrorCause::client_gone);
        metrics.requests[static_cast<std::size_t>(route)][2].fetch_add(1, std::memory_order_relaxed);
        w.abort();
        co_return;
      }
    }
    metrics.queue_seconds.observe(queued);
    if (!admitted) {
      scratch.release(std::move(sc));
      co_await reject(w, route, 429, ErrorCause::queue_full,
                      "the router's queue is full (" + std::to_string(config.max_inflight) + " in flight, " +
                          std::to_string(config.max_queue) + " waiting); retry later",
                      "", "queue_full");
      co_return;
    }
    const int outcome = co_await proxy(req, w, body, g, rq, t0, queued);
    admission.release();
    scratch.release(std::move(sc));
    metrics.requests[static_cast<std::size_t>(route)][static_cast<std::size_t>(outcome)].fetch_add(1, std::memory_order_relaxed);
    metrics.e2e_seconds.observe(seconds_since(t0));
  }

  // Returns the outcome: 0 ok, 1 error, 2 client gone.
  Task<int> proxy(http::Request& req, ResponseWriter& w, const json& body, const GenerateRequest& g,
                  RouteRequest& rq, Clock::time_point t0, double queued) {
    const auto deadline = t0 + std::chrono::milliseconds(config.request_timeout_ms);
    const std::string_view target = req.target();  // `req` outlives this call
    const std::string request_id = "disagg-" + std::to_string(rq.request_id);
    std::uint64_t exclude = 0;
    json kv_params;  // from the prefill leg
    std::string prefill_label;
    std::string last_error;  // set by each failed attempt (not up front: a served request allocates none)
    ErrorCause last_cause = ErrorCause::no_endpoint;
    unsigned last_status = 503;
    std::string last_body;  // a 5xx body to pass through when every attempt failed
    http::ClientCancel client_left;
    w.watch_close(CancelOnClientClose(&client_left));
    const CloseWatchGuard watch_guard(w);
    for (int attempt = 0; attempt <= config.max_retries; ++attempt) {
      const auto now = Clock::now();
      if (now >= deadline) {
        last_cause = ErrorCause::request_timeout;
        last_status = 504;
        last_error = "the request timed out after " + std::to_string(config.request_timeout_ms) + " ms";
        last_body.clear();
        break;
      }
      Plan plan_result = plan(rq, exclude, attempt == 0, now);
      Pick& pick = plan_result.main;
      if (!pick.ok()) {
        if (attempt == 0) {
          last_error = std::string("no healthy ") + (pd_mode ? "decode" : "aggregated") + " endpoint to serve the request";
          last_cause = ErrorCause::no_endpoint;
          last_status = 503;
          last_body.clear();
        }
        break;
      }
      if (attempt == 0) {
        // Router-added latency before the first upstream request: parse, tokenize, hash, admit,
        // decide (queueing excluded; the prefill leg is the workers' time).
        metrics.overhead_seconds.observe(std::max(0.0, std::chrono::duration<double>(plan_result.decided - t0).count() - queued));
      }
      // P/D: prefill leg first.
      if (plan_result.prefill.ok()) {
        Pick& pf = plan_result.prefill;
        prefill_label = pf.label;
        kv_params = co_await run_prefill(w.executor(), pf, body, std::string(target), request_id, deadline, &client_left);
        finish(pf, rq.request_id);
        if (client_left.cancelled()) {  // the client left during the prefill: no decode leg
          finish(pick, rq.request_id);
          metrics.error(ErrorCause::client_gone);
          w.abort();
          co_return 2;
        }
        if (kv_params.is_null()) {
          metrics.prefill_fallbacks.fetch_add(1, std::memory_order_relaxed);
          metrics.error(ErrorCause::prefill_failed);
          log_line("prefill on " + prefill_label + " failed for " + request_id + "; serving it decode-only");
          prefill_label.clear();
        }
      }
      http::ClientRequest creq;
      creq.method = http::bhttp::verb::post;
      creq.target = target;
      if (kv_params.is_null()) {
        creq.body_view = req.body();  // the client's bytes as they are, not copied (kept for a retry)
      } else {
        json db = body;
        db["kv_transfer_params"] = kv_params;
        creq.body = db.dump();
      }
      creq.headers.emplace_back("X-Request-Id", request_id);
      http::ClientOptions o = client_options(w.executor());
      o.connect_timeout = std::chrono::milliseconds(config.connect_timeout_ms);
      // From the decision's time: the prefill leg, if any, took its own and is read again.
      const auto sent = plan_result.prefill.ok() ? Clock::now() : plan_result.decided;
      o.first_byte_timeout = std::max(std::chrono::milliseconds(1),
                                      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - sent));
      o.idle_timeout = std::chrono::milliseconds(config.idle_timeout_ms);
      o.cancel = &client_left;
      auto opened = co_await http::ClientStream::open(w.executor(), pick.host, pick.port, std::move(creq), o);
      if (!opened && opened.error().code == http::ClientErrc::cancelled) {
        finish(pick, rq.request_id);
        metrics.error(ErrorCause::client_gone);
        w.abort();
        co_return 2;
      }
      if (!opened) {
        const http::ClientError& e = opened.error();
        last_cause = cause_of(e);
        last_status = last_cause == ErrorCause::upstream_timeout ? 504 : 502;
        last_error = "endpoint " + pick.label + " failed before answering: " + e.message();
        last_body.clear();
        metrics.error(last_cause);
        upstream_failed(pick, e.code == http::ClientErrc::connect_failed, e.message());
        exclude |= std::uint64_t{1} << pick.slot;
        finish(pick, rq.request_id);
        const AttemptResult result = e.code == http::ClientErrc::connect_failed ||
                                             e.code == http::ClientErrc::connect_timeout ||
                                             e.code == http::ClientErrc::resolve_failed ||
                                             e.code == http::ClientErrc::write_failed
                                         ? AttemptResult::connect_failed
                                         : AttemptResult::failed_before_response;
        if (!should_retry(result, attempt, config.max_retries, Clock::now() >= deadline)) break;
        metrics.retries.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      http::ClientStream& up = **opened;
      const unsigned status = up.status();
      if (status >= 500) {
        // Nothing was relayed yet: read the error (bounded) and try another endpoint.
        std::string err_body;
        while (err_body.size() < (64u << 10)) {
          auto piece = co_await up.read_some();
          if (!piece || piece->empty()) break;
          err_body.append(*piece);
        }
        last_cause = ErrorCause::upstream_5xx;
        last_status = status;
        last_error = "endpoint " + pick.label + " answered HTTP " + std::to_string(status);
        last_body = std::move(err_body);
        metrics.error(last_cause);
        upstream_failed(pick, false, last_error);
        exclude |= std::uint64_t{1} << pick.slot;
        finish(pick, rq.request_id);
        if (!should_retry(AttemptResult::status_5xx, attempt, config.max_retries, Clock::now() >= deadline)) break;
        metrics.retries.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      upstream_ok(pick);
      const int outcome = co_await relay(w, up, pick, g, t0, prefill_label);
      finish(pick, rq.request_id);
      co_return outcome;
    }
    // Every attempt failed before any byte was relayed.
    // Upstream causes were counted per attempt; these two were not.
    if (last_cause == ErrorCause::request_timeout || last_cause == ErrorCause::no_endpoint) metrics.error(last_cause);
    if (!last_body.empty() && last_cause == ErrorCause::upstream_5xx) {
      co_await w.send(last_status, last_body);
    } else {
      std::array<Header, 1> retry = {Header{"Retry-After", "1"}};
      const std::string code = std::string(to_string(last_cause));
      co_await w.send_error(last_status, last_error.empty() ? "no healthy endpoint" : last_error, "", code,
                            last_status == 503 ? std::span<const Header>(retry) : std::span<const Header>());
    }
    co_return 1;
  }

  // Sends `piece` as the next chunk of an SSE stream, with the response header when `started`
  // is false (and sets it). False: the client is gone.
  static Task<bool> stream_piece(ResponseWriter& w, bool& started, std::span<const Header> hs,
                                 std::string_view piece) {
    if (started) co_return co_await w.write(piece);
    started = true;
    co_return co_await w.start_stream(200, "text/event-stream", hs, piece);
  }

  Task<int> relay(ResponseWriter& w, http::ClientStream& up, Pick& pick, const GenerateRequest& g,
                  Clock::time_point t0, const std::string& prefill_label) {
    const unsigned status = up.status();
    std::array<Header, 2> headers = {Header{"X-Disagg-Endpoint", pick.label},
                                     Header{"X-Disagg-Prefill-Endpoint", prefill_label}};
    const std::span<const Header> hs(headers.data(), prefill_label.empty() ? 1 : 2);
    const auto content_type = up.headers()["Content-Type"];
    const bool sse = content_type.find("text/event-stream") != std::string_view::npos;
    const auto deadline = t0 + std::chrono::milliseconds(config.request_timeout_ms);
    if (status == 200 && g.stream && sse) {
      // Bytes go out as they arrive, in as few writes as nginx's: each piece is everything received
      // so far, the header goes with the first piece when that came with the upstream's header
      // (else at once, so that the client sees the stream start before the first token), and the
      // last piece with the end of the stream.
      bool started = false;
      if (!up.buffered()) {
        if (!co_await w.start_stream(200, "text/event-stream", hs)) {
          up.cancel();
          metrics.error(ErrorCause::client_gone);
          co_return 2;
        }
        started = true;
      }
      bool first = true;
      bool ended = false;  // the end of the stream went out with the last piece
      std::string batch;   // the error event when the stream breaks
      std::size_t events = 0;
      Clock::time_point t_first{}, t_last{};
      while (true) {
        auto piece = co_await up.read_some();
        if (!piece && piece.error().code == http::ClientErrc::cancelled) {  // the client left
          metrics.error(ErrorCause::client_gone);
          w.abort();
          co_return 2;
        }
        if (!piece || Clock::now() >= deadline) {
          // The stream started: never retried. End it with an OpenAI error event the SDKs raise.
          ErrorCause cause = ErrorCause::request_timeout;
          std::string message = "the request timed out after " + std::to_string(config.request_timeout_ms) + " ms";
          if (!piece) {
            cause = piece.error().code == http::ClientErrc::idle_timeout ? ErrorCause::upstream_timeout
                                                                          : ErrorCause::upstream_broken;
            message = "endpoint " + pick.label + " failed mid-stream (" + piece.error().message() +
                      "); the response is incomplete";
            upstream_failed(pick, false, piece.error().message());
          } else {
            up.cancel();
          }
          metrics.error(cause);
          http::append_sse_event(batch, http::openai_error_body(502, message, "", "upstream_stream_broken"));
          if (co_await stream_piece(w, started, hs, batch)) co_await w.finish();
          co_return 1;
        }
        if (piece->empty()) break;
        const auto now = Clock::now();
        if (first) {
          first = false;
          t_first = now;
          first_byte(pick);
          metrics.ttft_seconds.observe(std::chrono::duration<double>(now - t0).count());
        }
        events += count_events(*piece);
        t_last = now;
        // read_some() already joined every body byte received so far into this piece: send it now
        // (holding it back for bytes not yet received would delay tokens).
        const bool last = up.done();
        const std::string_view out = *piece;
        bool sent = false;
        if (last && started) {
          sent = co_await w.finish(out);
        } else {
          sent = co_await stream_piece(w, started, hs, out);
          if (sent && last) sent = co_await w.finish();
        }
        if (!sent) {
          up.cancel();  // closes the upstream connection: the worker sees the client leave
          metrics.error(ErrorCause::client_gone);
          co_return 2;
        }
        if (last) {
          ended = true;
          break;
        }
      }
      // Events: tokens plus the final usage chunk and [DONE]; TPOT over the gaps between tokens.
      if (events > 3) {
        metrics.tpot_seconds.observe(std::chrono::duration<double>(t_last - t_first).count() /
                                     static_cast<double>(events - 3));
      }
      if (ended) co_return 0;
      if (!started && !co_await w.start_stream(200, "text/event-stream", hs, batch)) co_return 2;
      co_return co_await w.finish(started ? std::string_view(batch) : std::string_view()) ? 0 : 2;
    }
    // Whole body (non-streaming, or an error answer). A body that arrives in one piece, as a small
    // one does, is sent from the upstream's buffer; only one in several pieces is gathered.
    std::string out;
    std::string_view body;
    while (true) {
      auto piece = co_await up.read_some();
      if (!piece && piece.error().code == http::ClientErrc::cancelled) {  // the client left
        metrics.error(ErrorCause::client_gone);
        w.abort();
        co_return 2;
      }
      if (!piece) {
        metrics.error(cause_of(piece.error()));
        upstream_failed(pick, false, piece.error().message());
        const std::string message = "endpoint " + pick.label + " failed while sending its answer (" +
                                    piece.error().message() + ")";
        co_await w.send_error(502, message, "", "upstream_broken");
        co_return 1;
      }
      if (piece->empty()) break;
      if (out.size() + piece->size() > (256u << 20)) {
        up.cancel();
        const std::string message = "endpoint " + pick.label + " answered more than 256 MiB";
        co_await w.send_error(502, message, "", "upstream_broken");
        co_return 1;
      }
      if (out.empty() && up.done()) {
        body = *piece;
        break;
      }
      out.append(*piece);
      if (up.done()) break;  // no read for the end: the stream knows it already
    }
    if (body.empty()) body = out;
    first_byte(pick);
    if (status >= 400) metrics.error(ErrorCause::upstream_4xx);
    const std::string_view ct = content_type.empty() ? std::string_view("application/json") : content_type;
    const bool sent = co_await w.send(status, body, ct, hs);
    co_return sent ? (status < 400 ? 0 : 1) : 2;
  }

  Task<void> handle(http::Request& req, ResponseWriter& w) {
    const std::string_view path = http::target_path(req.target());
    const bool post = req.method() == http::bhttp::verb::post;
    const bool get = req.method() == http::bhttp::verb::get;
    if (path == "/v1/completions" || path == "/v1/chat/completions") {
      if (!post) {
        std::array<Header, 1> allow = {Header{"Allow", "POST"}};
        metrics.error(ErrorCause::not_found);
        co_await w.send_error(405, "use POST on " + std::string(path), "", "method_not_allowed", allow);
        co_return;
      }
      co_await generate(req, w, path == "/v1/chat/completions");
      co_return;
    }
    if (!get) {
      std::array<Header, 1> allow = {Header{"Allow", "GET"}};
      metrics.error(ErrorCause::not_found);
      co_await w.send_error(405, "use GET on " + std::string(path), "", "method_not_allowed", allow);
      co_return;
    }
    if (path == "/health") {
      if (draining.load()) co_await w.send_error(503, "draining", "", "draining");
      else co_await w.send(200, "{\"status\":\"ok\"}");
    } else if (path == "/ready") {
      const std::string why = not_ready_reason();
      if (why.empty()) co_await w.send(200, "{\"ready\":true}");
      else co_await w.send_error(503, "not ready: " + why, "", "not_ready");
    } else if (path == "/metrics") {
      co_await w.send(200, metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
    } else if (path == "/v1/models") {
      json data = json::array();
      for (const std::string& m : config.served_models) {
        data.push_back(json{{"id", m}, {"object", "model"}, {"created", started_unix}, {"owned_by", "disagg"}, {"root", m}});
      }
      json models = json{{"object", "list"}, {"data", std::move(data)}};
      co_await w.send(200, models.dump());
    } else {
      metrics.error(ErrorCause::not_found);
      co_await w.send_error(404, "no route for " + std::string(path) +
                                     "; the router serves /v1/completions, /v1/chat/completions, /v1/models, "
                                     "/health, /ready and /metrics",
                            "", "not_found");
    }
  }
};

Router::Router(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Router::~Router() {
  if (!impl_) return;
  if (impl_->subscriber) impl_->subscriber->stop();
  {
    std::lock_guard lock(impl_->dns_mu);
    impl_->dns_stop = true;
  }
  impl_->dns_cv.notify_all();
  if (impl_->dns_thread.joinable()) impl_->dns_thread.join();
}

std::uint16_t Router::port() const { return impl_->server->port(); }

Expected<std::unique_ptr<Router>, std::string> Router::create(RouterConfig config) {
  auto impl = std::make_unique<Impl>(std::move(config));
  Impl& im = *impl;
  const RouterConfig& c = im.config;
  im.started_unix = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();

  // Roles: P/D when any decode endpoint or pool is configured.
  bool any_events = false, any_aggregated = false;
  auto note_role = [&](EndpointRole r) {
    if (r == EndpointRole::decode) im.pd_mode = true;
    if (r == EndpointRole::prefill) im.need_prefill = true;
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
  if (im.need_prefill && !im.pd_mode) {
    return unexpected(std::string("prefill endpoints need decode endpoints to hand their KV to; add a decode pool or endpoint"));
  }
  if (im.pd_mode && any_aggregated) {
    log_line("warning: aggregated endpoints are ignored while decode endpoints exist (P/D mode)");
  }

  // Index and policy.
  const bool precise = c.precise_prefix.value_or(any_events);
  if (any_events || precise) {
    KvIndexConfig ic;
    ic.max_endpoints = kMaxRoutingEndpoints;
    ic.max_entries = c.index_entries;
    ic.max_entries_per_endpoint = c.index_entries_per_endpoint;
    auto idx = KvBlockIndex::create(ic);
    if (!idx) {
      return unexpected("'--index-entries' (" + std::to_string(c.index_entries) + ") refused by the KV block index: " +
                        std::string(to_string(idx.error())));
    }
    im.index.emplace(std::move(*idx));
  }
  PolicyOptions options = c.options;
  if (precise) {
    options.index = &*im.index;
    options.max_endpoints = kMaxRoutingEndpoints;
  } else if (!c.max_endpoints_given && c.dns_pools.empty()) {
    // Only the static endpoints can ever be routed to: the history's block pool is sized for them
    // (less memory, and a table that stays in cache: about 1.5 us less router user time per
    // request at concurrency 32 with 2 endpoints, bench/RESULTS.md).
    options.max_endpoints = std::clamp(static_cast<int>(c.endpoints.size()), 1, kMaxRoutingEndpoints);
  }
  auto policy = make_routing_policy(c.policy, options);
  if (!policy) return unexpected("policy '" + c.policy + "': " + policy.error().message);
  im.policy = std::move(*policy);
  if (!precise && routing_policy_reads_prefixes(c.policy)) {
    log_line("prefix history: " + std::to_string(options.history_blocks_per_endpoint * options.max_endpoints) +
             " blocks, sized for " + std::to_string(options.max_endpoints) +
             (options.max_endpoints == 1 ? " endpoint" : " endpoints") + " (at most " +
             std::to_string(options.history_blocks_per_endpoint) + " each)");
  }

  http::ServerOptions so;
  so.host = c.host;
  so.port = c.port;
  so.max_body_bytes = c.max_body_bytes;
  so.drain_timeout = std::chrono::milliseconds(c.drain_timeout_ms);
  so.idle_timeout = std::chrono::milliseconds(std::max<std::int64_t>(c.idle_timeout_ms, 1000));
  so.server_name = "disagg-engine router";
  so.connection_contexts = im.contexts();
  Impl* raw = impl.get();
  auto server = http::HttpServer::create(im.ioc, so, [raw](http::Request& req, ResponseWriter& w) {
    return raw->handle(req, w);
  });
  if (!server) return unexpected(server.error().message);
  im.server = std::move(*server);

  KvSubscriberOptions ko;
  ko.replay_timeout_ms = c.replay_timeout_ms;
  im.subscriber = std::make_unique<KvEventSubscriber>(im, im.metrics, ko);
  {
    std::lock_guard lock(im.mu);
    for (const EndpointSpec& e : c.endpoints) im.add_endpoint(e, false, "");
  }
  return std::unique_ptr<Router>(new Router(std::move(impl)));
}

void Router::drain() {
  Impl* im = impl_.get();
  if (im->draining.exchange(true)) return;
  log_line("draining: refusing new requests, finishing " + std::to_string(im->admission.active()) + " in flight");
  im->server->drain([im] { im->stop_contexts(); });
}

void Router::run() {
  Impl& im = *impl_;
  im.subscriber->start();
  if (!im.config.dns_pools.empty()) im.dns_thread = std::thread([&im] { im.dns_loop(); });
  im.server->start();
  net::co_spawn(im.ioc, im.health_loop(), net::detached);
  net::co_spawn(im.ioc, Impl::timer_anchor(im.ioc), net::detached);
  im.signals.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) drain();
  });
  // --pin-threads: HTTP thread i (this one is 0) on the i-th allowed CPU. The list is read before
  // any thread is pinned, and this thread pins itself last, so that the threads it starts do not
  // inherit one CPU. (Threads that it starts later, such as Asio's resolver thread, do inherit CPU 0.)
  const std::vector<int> cpus = im.config.pin_threads ? allowed_cpus() : std::vector<int>{};
  const auto cpu_of = [&cpus](std::size_t i) { return cpus.empty() ? -1 : cpus[i % cpus.size()]; };
  const auto pin = [](int cpu) {
    if (cpu >= 0 && !pin_this_thread(cpu)) log_line("--pin-threads: CPU " + std::to_string(cpu) + " refused; this thread is not pinned");
  };
  if (im.config.pin_threads) {
    std::string list;
    for (std::size_t i = 0; i < static_cast<std::size_t>(im.config.threads); ++i) {
      list += (i == 0 ? "" : ",") + std::to_string(cpu_of(i));
    }
    log_line("pinning HTTP threads to CPUs " + list + " (of " + std::to_string(cpus.size()) + " allowed)" +
             (cpus.size() < static_cast<std::size_t>(im.config.threads) ? "; some threads share a CPU" : ""));
  }
  // The other contexts have no work of their own until a connection arrives: keep them running.
  std::vector<net::executor_work_guard<net::io_context::executor_type>> keep;
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < im.extra_contexts.size(); ++i) {
    net::io_context* ctx = im.extra_contexts[i].get();
    keep.push_back(net::make_work_guard(*ctx));
    net::co_spawn(*ctx, Impl::timer_anchor(*ctx), net::detached);
    threads.emplace_back([ctx, cpu = cpu_of(i + 1), pin] {
      pin(cpu);
      ctx->run();
    });
  }
  pin(cpu_of(0));
  im.ioc.run();
  im.stop_contexts();
  for (auto& t : threads) t.join();
  im.subscriber->stop();
  {
    std::lock_guard lock(im.dns_mu);
    im.dns_stop = true;
  }
  im.dns_cv.notify_all();
  if (im.dns_thread.joinable()) im.dns_thread.join();
}

}  // namespace disagg::router
