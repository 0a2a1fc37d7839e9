// router.cc — the request entry (parse, tokenize, hash, admit, hand to the upstream legs), the
// routes the router serves, and its life: create, run, drain. The other jobs live in their own
// files: endpoint_table (endpoints, KV-event sink, the decision and leg accounting),
// dns_discovery, health_monitor (health checks and load scraping), upstream_legs (prefill leg,
// proxy with retries, relay), upstream_clients (keep-alive pools per thread), metrics_page.
#include "router.h"

#include <array>
#include <chrono>
#include <csignal>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "admission.h"
#include "api_keys.h"
#include "client_close.h"
#include "disagg/block_hash.h"
#include "disagg/fnv1a.h"
#include "dns_discovery.h"
#include "endpoint_table.h"
#include "health_monitor.h"
#include "kv_event_subscriber.h"
#include "lib/http/http_server.h"
#include "lib/openai/openai_error.h"
#include "lib/openai/request_parse.h"
#include "lib/openai/request_scan.h"
#include "metrics_page.h"
#include "request_phases.h"
#include "model_text.h"
#include "peer_link.h"
#include "router_log.h"
#include "router_metrics.h"
#include "thread_pinning.h"
#include "upstream_clients.h"
#include "upstream_legs.h"

namespace disagg::router {

namespace {

using json = nlohmann::json;
using http::Header;
using http::ResponseWriter;
using http::Task;
namespace net = http::net;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::uint64_t fnv64(std::string_view s) {
  return fnv1a64(s);
}

// Per-request buffers, recycled so steady-state requests do not allocate token and hash arrays.
struct Scratch {
  std::vector<TokenId> tokens;
  std::vector<BlockHash> hashes;
  std::string text;
};

// The real tokenizer's buffers, word cache and segment cache: per HTTP thread, not per request
// (tokenizing never spans a co_await). One per request in flight would keep as many cold caches of
// about 10 MB each; one per thread keeps two warm ones, which see every turn of a conversation.
text::EncodeScratch& encode_scratch() {
  thread_local text::EncodeScratch scratch;
  return scratch;
}

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

}  // namespace

struct Router::Impl {
  explicit Impl(RouterConfig c) : config(std::move(c)), admission(config.max_inflight, config.max_queue) {
    for (int i = 1; i < config.threads; ++i) extra_contexts.push_back(std::make_unique<net::io_context>(1));
  }

  RouterConfig config;
  // One io_context per HTTP thread, each run by that thread alone: a client connection and its
  // upstream requests stay on one thread, so a request wakes no other thread (on a shared
  // multi-threaded io_context, handing completions between threads was most of the router's
  // added latency). `ioc` (thread 1) also runs the listener, health checks and scrapes.
  // The others are declared first so that they outlive `ioc`, whose accept loop holds their sockets.
  std::vector<std::unique_ptr<net::io_context>> extra_contexts;
  net::io_context ioc{1};
  net::signal_set signals{ioc, SIGTERM, SIGINT};
  RouterMetrics metrics;
  Admission admission;
  ScratchPool scratch;
  std::unique_ptr<EndpointTable> table;
  // Keep-alive connections to the endpoints (every leg, health check and scrape), one pool per
  // io_context; destroyed before the contexts.
  std::unique_ptr<UpstreamClients> clients;
  std::unique_ptr<HealthMonitor> health;
  std::unique_ptr<RequestPhaseMetrics> phases;  // read by the legs and the metrics page
  std::unique_ptr<UpstreamLegs> legs;
  std::unique_ptr<http::HttpServer> server;
  std::unique_ptr<KvEventSubscriber> subscriber;
  std::unique_ptr<DnsDiscovery> dns;
  // The peer-snapshot listener (router.peerPort), and this process's random id in its snapshots.
  std::unique_ptr<PeerSnapshotServer> peer_server;
  std::uint64_t peer_instance = 0;
  std::atomic<bool> draining{false};
  // The prefill pool's mean prompt between two reads of /metrics or /scaling (scaling_signals.h).
  MeanPromptTracker prefill_mean;
  std::int64_t started_unix = 0;
  /// The served model's tokenizer and chat template (--tokenizer); empty: the made-up tokenizer.
  std::optional<text::ModelText> model_text;
  /// The names a request may use: the served models, then the LoRA adapters (set by create()).
  std::vector<std::string> request_models;
  /// /tokenize's max_model_len (router.maxModelLen, else the tokenizer's); 0: unknown (null).
  std::int64_t max_model_len = 0;
  /// GET /v1/models' answer, made once by create() (make_models_body()).
  std::string models_body;
  /// The API keys clients must send (router.apiKeys); null: none asked for.
  std::unique_ptr<ApiKeys> api_keys;

  // The parent of a request's first block: its LoRA adapter (when `model` names one) and its
  // cache_salt enter it as vLLM's extra keys enter its block hashes (disagg/block_hash.h).
  BlockHash chain_root_of(const GenerateRequest& g) const {
    std::uint64_t lora = 0;
    if (!config.lora_adapters.empty() &&
        std::find(config.served_models.begin(), config.served_models.end(), g.model) == config.served_models.end()) {
      lora = extra_key_digest(g.model);
    }
    return chain_root(lora, g.cache_salt);
  }
  // The served models, then each LoRA adapter as vLLM lists it (vllm/entrypoints/openai/serving_models.py,
  // show_available_models: id = the adapter's name, root = its path, parent = the base model).
  std::string make_models_body() const {
    json data = json::array();
    for (const std::string& m : config.served_models) {
      data.push_back(
          json{{"id", m}, {"object", "model"}, {"created", started_unix}, {"owned_by", "disagg"}, {"root", m}});
    }
    for (std::size_t i = 0; i < config.lora_adapters.size(); ++i) {
      const std::string& path = i < config.lora_paths.size() ? config.lora_paths[i] : std::string();
      data.push_back(json{{"id", config.lora_adapters[i]},
                          {"object", "model"},
                          {"created", started_unix},
                          {"owned_by", "vllm"},
                          {"root", path.empty() ? json(nullptr) : json(path)},
                          {"parent", config.served_models.front()}});
    }
    return json{{"object", "list"}, {"data", std::move(data)}}.dump();
  }

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

  // Re-reads the API key file when it changes (a rotated Secret), once a second on `ioc`: a stat,
  // and a read of a small file only after a change.
  Task<void> watch_api_keys() {
    net::steady_timer t(ioc);
    while (!ioc.stopped()) {
      t.expires_after(std::chrono::seconds(1));
      boost::system::error_code ec;
      co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
      if (ec) co_return;
      switch (api_keys->refresh()) {
        case ApiKeys::Refresh::reloaded: metrics.auth_key_reloads[0].fetch_add(1, std::memory_order_relaxed); break;
        case ApiKeys::Refresh::failed: metrics.auth_key_reloads[1].fetch_add(1, std::memory_order_relaxed); break;
        case ApiKeys::Refresh::unchanged: break;
      }
    }
  }

  void stop_contexts() {
    ioc.stop();
    for (auto& c : extra_contexts) c->stop();
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

  // 401 as OpenAI answers a bad key (type invalid_request_error, code invalid_api_key), with the
  // challenge RFC 6750 asks for. The message never repeats what the client sent.
  Task<void> unauthorized(ResponseWriter& w, AuthResult why) {
    static const std::string missing = http::openai_error_body(
        401, "You didn't provide an API key. Send it in the Authorization header: 'Authorization: Bearer <key>'.", "",
        "invalid_api_key", "invalid_request_error");
    static const std::string invalid = http::openai_error_body(
        401, "Incorrect API key provided: the key in the Authorization header matches none this router accepts.", "",
        "invalid_api_key", "invalid_request_error");
    const bool absent = why == AuthResult::missing;
    metrics.auth_rejected[absent ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
    const std::array<Header, 1> challenge = {Header{"WWW-Authenticate", "Bearer"}};
    co_await w.send(401, absent ? missing : invalid, "application/json", challenge);
  }

  Task<void> generate(http::Request& req, ResponseWriter& w, bool chat) {
    const auto t0 = Clock::now();
    const int route = chat ? 1 : 0;
    if (draining.load()) {
      co_await reject(w, route, 503, ErrorCause::draining, "the router is shutting down; retry on another replica", "",
                      "draining");
      co_return;
    }
    std::unique_ptr<Scratch> sc = scratch.acquire();
    GenerateRequest g;
    // The document is built only where it is needed: P/D rewrites the body for its legs, and the
    // slow path answers every request the fast scan declines (errors included).
    RequestJson body;
    const PromptTokenizer tokenizer{model_text ? &*model_text : nullptr, &encode_scratch()};
    if (table->pd_mode() ||
        !scan_generate_request(req.body(), chat, request_models, g, sc->tokens, sc->text, &tokenizer)) {
      auto doc = parse_request_json(req.body());  // the nesting-depth check, then json::parse
      if (!doc) {
        ApiError e = std::move(doc.error());
        scratch.release(std::move(sc));
        co_await reject(w, route, e.status, ErrorCause::bad_request, std::move(e.message), std::move(e.param),
                        std::move(e.code));
        co_return;
      }
      body = std::move(*doc);
      auto parsed = parse_generate_request(body, chat, request_models, g, sc->tokens, sc->text, &tokenizer);
      if (!parsed) {
        ApiError e = parsed.error();
        scratch.release(std::move(sc));
        co_await reject(w, route, e.status, e.status == 404 ? ErrorCause::unknown_model : ErrorCause::bad_request,
                        std::move(e.message), std::move(e.param), std::move(e.code));
        co_return;
      }
    }
    sc->hashes.resize(sc->tokens.size() / static_cast<std::size_t>(config.block_size));
    sc->hashes.resize(
        hash_blocks(sc->tokens, static_cast<std::size_t>(config.block_size), chain_root_of(g), sc->hashes));

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
    const ProxyOutcome outcome = co_await legs->proxy(req, w, body, g, rq, t0, queued);
    admission.release();
    scratch.release(std::move(sc));
    metrics.requests[static_cast<std::size_t>(route)][static_cast<std::size_t>(outcome)].fetch_add(
        1, std::memory_order_relaxed);
    metrics.e2e_seconds.observe(seconds_since(t0));
  }

  // vLLM's /tokenize and /detokenize for the served model, answered here (text::ModelText).
  Task<void> tokenize(http::Request& req, ResponseWriter& w, bool post, bool detokenize) {
    if (!post) {
      std::array<Header, 1> allow = {Header{"Allow", "POST"}};
      metrics.error(ErrorCause::not_found);
      co_await w.send_error(405, "use POST on " + std::string(detokenize ? "/detokenize" : "/tokenize"), "",
                            "method_not_allowed", allow);
      co_return;
    }
    if (!model_text) {
      metrics.error(ErrorCause::not_found);
      co_await w.send_error(
          404, "the router has no tokenizer for its model; start it with --tokenizer DIR (router.tokenizer)", "",
          "not_found");
      co_return;
    }
    auto doc = parse_request_json(req.body());
    if (!doc || !doc->is_object()) {
      metrics.error(ErrorCause::bad_request);
      co_await w.send_error(400, doc ? std::string("the request body must be a JSON object") : doc.error().message, "",
                            doc ? std::string() : doc.error().code);
      co_return;
    }
    if (auto m = doc->find("model"); m != doc->end() && !m->is_null() &&
                                     (!m->is_string() || std::find(request_models.begin(), request_models.end(),
                                                                   m->get<std::string>()) == request_models.end())) {
      metrics.error(ErrorCause::unknown_model);
      co_await w.send_error(404,
                            "The model `" + (m->is_string() ? m->get<std::string>() : m->dump()) + "` does not exist",
                            "model", "model_not_found");
      co_return;
    }
    std::unique_ptr<Scratch> sc = scratch.acquire();
    auto answer = model_text->serve_tokenize(*doc, detokenize, max_model_len, encode_scratch());
    scratch.release(std::move(sc));
    if (!answer) {
      metrics.error(ErrorCause::bad_request);
      co_await w.send_error(answer.error().status, answer.error().message, answer.error().param);
      co_return;
    }
    co_await w.send(200, answer->dump(-1, ' ', false, json::error_handler_t::replace));
  }

  Task<void> handle(http::Request& req, ResponseWriter& w) {
    const std::string_view path = http::target_path(req.target());
    const bool post = req.method() == http::bhttp::verb::post;
    const bool get = req.method() == http::bhttp::verb::get;
    // Before routing, as vLLM's middleware: a wrong method on a guarded path is a 401 too.
    if (api_keys && requires_api_key(path)) {
      if (const AuthResult auth = api_keys->check(req["Authorization"]); auth != AuthResult::ok) {
        co_await unauthorized(w, auth);
        co_return;
      }
    }
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
    if (path == "/tokenize" || path == "/detokenize") {
      co_await tokenize(req, w, post, path == "/detokenize");
      co_return;
    }
    const bool known =
        path == "/health" || path == "/ready" || path == "/metrics" || path == "/scaling" || path == "/v1/models";
    if (known && !get) {
      std::array<Header, 1> allow = {Header{"Allow", "GET"}};
      metrics.error(ErrorCause::not_found);
      co_await w.send_error(405, "use GET on " + std::string(path), "", "method_not_allowed", allow);
      co_return;
    }
    if (path == "/health") {
      if (draining.load()) co_await w.send_error(503, "draining", "", "draining");
      else co_await w.send(200, "{\"status\":\"ok\"}");
    } else if (path == "/ready") {
      const std::string why = draining.load() ? std::string("draining") : table->not_ready_reason();
      if (why.empty()) co_await w.send(200, "{\"ready\":true}");
      else co_await w.send_error(503, "not ready: " + why, "", "not_ready");
    } else if (path == "/metrics") {
      PoolSignals prefill, decode;
      compute_pool_signals(metrics, *table, config.autoscaling, prefill_mean, prefill, decode);
      co_await w.send(200, render_metrics_page(metrics, *phases, admission, *clients, *table, prefill, decode),
                      "text/plain; version=0.0.4; charset=utf-8");
    } else if (path == "/scaling") {
      // The scaling signals as JSON, for KEDA's metrics-api scaler (valueLocation pools.<pool>.pressure).
      PoolSignals prefill, decode;
      compute_pool_signals(metrics, *table, config.autoscaling, prefill_mean, prefill, decode);
      co_await w.send(200, pool_signals_json(prefill, decode));
    } else if (path == "/v1/models") {
      co_await w.send(200, models_body);
    } else {
      metrics.error(ErrorCause::not_found);
      co_await w.send_error(404,
                            "no route for " + std::string(path) +
                                "; the router serves /v1/completions, /v1/chat/completions, /v1/models, "
                                "/tokenize, /detokenize, /health, /ready, /metrics and /scaling",
                            "", "not_found");
    }
  }
};

Router::Router(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Router::~Router() {
  if (!impl_) return;
  if (impl_->subscriber) impl_->subscriber->stop();
  if (impl_->dns) impl_->dns->stop();
}

std::uint16_t Router::port() const {
  return impl_->server->port();
}

Expected<std::unique_ptr<Router>, std::string> Router::create(RouterConfig config) {
  auto impl = std::make_unique<Impl>(std::move(config));
  Impl& im = *impl;
  const RouterConfig& c = im.config;
  if (!c.tokenizer_dir.empty()) {
    auto loaded = text::ModelText::load(c.tokenizer_dir);
    if (loaded) {
      im.model_text = std::move(loaded).value();
      im.metrics.tokenizer_state = "loaded";
    } else if (c.prefix_auto) {
      // The constructs' default for vLLM pods: the tokenizer comes from an init container that
      // may fail (a gated model without a token, no egress). Routing goes on, approximately.
      log_line("warning: no usable tokenizer in '" + c.tokenizer_dir + "' (" + loaded.error() +
               "); prefix routing falls back to the router's own history (approximate): its hashes cannot "
               "match the block hashes in vLLM's KV events without the served model's token ids");
      im.metrics.tokenizer_state = "failed";
    } else {
      return unexpected("'--tokenizer' (" + c.tokenizer_dir + "): " + loaded.error());
    }
  }
  if (!c.api_key_file.empty()) {
    auto keys = ApiKeys::load(c.api_key_file);
    if (!keys) return unexpected(std::move(keys).error());
    im.api_keys = std::move(*keys);
    log_line("API keys: " + std::to_string(im.api_keys->size()) + " from " + c.api_key_file +
             " (re-read when it changes); /v1/*, /tokenize and /detokenize need Authorization: Bearer <key>");
  }
  im.request_models = c.served_models;
  im.request_models.insert(im.request_models.end(), c.lora_adapters.begin(), c.lora_adapters.end());
  im.max_model_len = c.max_model_len > 0 ? c.max_model_len : im.model_text ? im.model_text->model_max_length() : 0;
  if (im.model_text && im.max_model_len == 0) {
    log_line(
        "warning: the deployment's context length is unknown (no router.maxModelLen / --max-model-len, and "
        "the tokenizer's model_max_length is not a length): /tokenize answers max_model_len null");
  }
  // prefixSource auto: precise exactly when the tokenizer loaded (im.config is what `c` reads).
  if (c.prefix_auto) im.config.precise_prefix = im.model_text.has_value();
  im.started_unix =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();

  im.models_body = im.make_models_body();

  auto table = EndpointTable::create(c, im.metrics);
  if (!table) return unexpected(std::move(table).error());
  im.table = std::move(*table);
  im.metrics.prefix_source = im.table->precise() ? "index" : "history";
  log_line("prefix source: " + std::string(im.metrics.prefix_source) +
           (im.model_text ? " (token ids from the served model's tokenizer)" : ""));
  im.clients = std::make_unique<UpstreamClients>(im.contexts(), c);
  im.health = std::make_unique<HealthMonitor>(*im.table, im.ioc, *im.clients, c);
  im.phases = std::make_unique<RequestPhaseMetrics>(
      KvTransferInfo{c.kv_transfer_backend, c.kv_bytes_per_token},
      c.autoscaling.configured ? SloTargets{c.autoscaling.ttft_slo_seconds, c.autoscaling.tpot_slo_seconds}
                               : SloTargets{});
  im.legs = std::make_unique<UpstreamLegs>(*im.table, *im.clients, im.metrics, *im.phases, c);

  http::ServerOptions so;
  so.host = c.host;
  so.port = c.port;
  so.max_body_bytes = c.max_body_bytes;
  so.max_connections = c.max_connections;
  so.idle_timeout = std::chrono::milliseconds(c.keepalive_timeout_ms);
  so.header_timeout = std::chrono::milliseconds(c.header_timeout_ms);
  so.body_timeout = std::chrono::milliseconds(c.body_timeout_ms);
  so.drain_timeout = std::chrono::milliseconds(c.drain_timeout_ms);
  so.server_name = "disagg-engine router";
  so.connection_contexts = im.contexts();
  Impl* raw = impl.get();
  auto server = http::HttpServer::create(im.ioc, so,
                                         [raw](http::Request& req, ResponseWriter& w) { return raw->handle(req, w); });
  if (!server) return unexpected(server.error().message);
  im.server = std::move(*server);

  KvSubscriberOptions ko;
  ko.replay_timeout_ms = c.replay_timeout_ms;
  im.subscriber = std::make_unique<KvEventSubscriber>(*im.table, im.metrics, ko);
  im.dns = std::make_unique<DnsDiscovery>(*im.table, c.dns_pools);
  EndpointTable::Hooks hooks;
  hooks.added = [raw](EndpointId id, const EndpointSlot& s, const std::string& topic, std::int64_t resume_seq) {
    if (!s.spec.kv_events.empty()) {
      raw->subscriber->add(id, s.generation, s.spec.kv_events, s.spec.kv_replay, topic, resume_seq);
    }
    raw->health->wake();
  };
  hooks.removed = [raw](EndpointId id, const EndpointSlot& s) {
    raw->clients->drop(s.spec.host + ":" + std::to_string(s.spec.port));
    raw->subscriber->remove(id);
  };
  im.table->set_hooks(std::move(hooks));

  // Warm start from a peer router (peer_link.h): its snapshot, loaded as the endpoints are added.
  im.peer_instance = std::random_device{}() ^ (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^
                     static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  PeerSnapshotLimits limits;
  limits.max_blocks = static_cast<std::size_t>(c.peer_snapshot_max_blocks);
  limits.max_bytes = 64 +
                     static_cast<std::size_t>(c.peer_snapshot_max_blocks) * (2 + 8 + 8 * kPeerSnapshotMaxKeysPerBlock) +
                     kMaxRoutingEndpoints * (kPeerSnapshotMaxLabel + 32);
  if (c.peer_port != 0) {
    auto ps = PeerSnapshotServer::create(c.host, c.peer_port, c.peer_timeout_ms,
                                         [raw, max = limits.max_blocks](const std::vector<std::string>& only) {
                                           PeerSnapshot snap;
                                           raw->table->snapshot(snap, max, only.empty() ? nullptr : &only);
                                           snap.instance = raw->peer_instance;
                                           return encode_peer_snapshot(snap);
                                         });
    if (!ps) return unexpected(std::move(ps).error());
    im.peer_server = std::move(*ps);
    log_line("peer snapshot listener on port " + std::to_string(im.peer_server->port()));
  }
  if (!c.peers_host.empty()) {
    if (!im.table->precise()) {
      log_line("peers: not fetched (the prefix source is the routing history, not the KV-event index)");
    } else {
      if (auto snap = fetch_peer_snapshot(c.peers_host, c.peers_port, im.peer_instance, c.peer_timeout_ms, limits)) {
        im.table->set_peer_snapshot(std::move(*snap));
      } else {
        log_line("peers: no snapshot loaded, starting with an empty KV index (" + snap.error() + ")");
      }
      // An endpoint DNS brings after the snapshot's window gets one fetch of its own entries, all
      // the peers' addresses together bounded by one peer timeout (it runs on the DNS thread).
      im.table->set_late_peer_fetch(
          [host = c.peers_host, port = c.peers_port, own = im.peer_instance, timeout = c.peer_timeout_ms,
           limits](const std::vector<std::string>& labels) {
            return fetch_peer_snapshot(host, port, own, timeout, limits, labels, timeout);
          },
          now_ms() + kPeerSnapshotKeepMs);
    }
  }
  for (const EndpointSpec& e : c.endpoints) im.table->add(e, false, "");
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
  im.dns->start();
  if (im.peer_server) im.peer_server->start();
  im.server->start();
  net::co_spawn(im.ioc, im.health->run(), net::detached);
  net::co_spawn(im.ioc, Impl::timer_anchor(im.ioc), net::detached);
  if (im.api_keys) net::co_spawn(im.ioc, im.watch_api_keys(), net::detached);
  im.signals.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) drain();
  });
  // --pin-threads: HTTP thread i (this one is 0) on the i-th allowed CPU. The list is read before
  // any thread is pinned, and this thread pins itself last, so that the threads it starts do not
  // inherit one CPU. (Threads that it starts later, such as Asio's resolver thread, do inherit CPU 0.)
  const std::vector<int> cpus = im.config.pin_threads ? allowed_cpus() : std::vector<int>{};
  const auto cpu_of = [&cpus](std::size_t i) { return cpus.empty() ? -1 : cpus[i % cpus.size()]; };
  const auto pin = [](int cpu) {
    if (cpu >= 0 && !pin_this_thread(cpu))
      log_line("--pin-threads: CPU " + std::to_string(cpu) + " refused; this thread is not pinned");
  };
  if (im.config.pin_threads) {
    std::string list;
    for (std::size_t i = 0; i < static_cast<std::size_t>(im.config.threads); ++i) {
      // Appended, not operator+: g++ 12 reports a false -Wrestrict on the chain at -O2.
      list.append(i == 0 ? "" : ",").append(std::to_string(cpu_of(i)));
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
  im.dns->stop();
  if (im.peer_server) im.peer_server->stop();
}

}  // namespace disagg::router
