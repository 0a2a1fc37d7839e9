#include "sim_worker.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "disagg/json_depth.h"
#include "disagg/json_parse.h"
#include "fake_tokenizer.h"
#include "model_text.h"
#include "request_validation.h"
#include "lib/http/http_server.h"
#include "lib/openai/openai_error.h"
#include "lib/openai/sse.h"
#include "sim_engine.h"
#include "sim_worker_main.h"

namespace disagg::sim_worker {

namespace {

using json = nlohmann::json;
// A request's document: ordered, because the chat template sees keys in the client's order (tojson
// of tool schemas), and parsed once, by parse_json_into (json_parse.h).
using Body = nlohmann::ordered_json;
using http::Header;
using http::ResponseWriter;
using http::Task;
namespace net = http::net;

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// What a response needs to know about its request (the JSON is built outside coroutines:
// g++ 12 miscompiles braced initializer lists inside coroutine bodies).
struct ResponseCtx {
  std::string id;
  std::string model;
  std::int64_t created = 0;
  std::uint64_t seed = 0;
  bool chat = false;
  bool include_usage = false;
  std::int32_t prompt_len = 0;
  RequestKind kind = RequestKind::full;
  json kv_params;  // prefill_only: filled when the request finished
};

json usage_json(const ResponseCtx& c, const RequestState& st, std::int32_t completion) {
  return json{{"prompt_tokens", c.prompt_len},
              {"total_tokens", c.prompt_len + completion},
              {"completion_tokens", completion},
              {"prompt_tokens_details", {{"cached_tokens", st.cached_tokens.load()}}}};
}

std::string full_response(const ResponseCtx& c, const RequestState& st, std::int32_t produced) {
  std::string text;
  for (std::int32_t k = 0; k < produced; ++k) text.append(filler_word(c.seed, k)).append(" ");
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", "length"}, {"stop_reason", nullptr}};
  if (c.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}, {"tool_calls", json::array()}};
  } else {
    choice["text"] = text;
  }
  json res = {{"id", c.id},
              {"object", c.chat ? "chat.completion" : "text_completion"},
              {"created", c.created},
              {"model", c.model},
              {"choices", json::array({choice})},
              {"usage", usage_json(c, st, produced)},
              {"kv_transfer_params", c.kv_params}};
  return dump(res);
}

// Appends the SSE events of tokens [from, to); `done`: the request finished at `to`.
void append_stream_events(std::string& buf, const ResponseCtx& c, const RequestState& st, std::int32_t from,
                          std::int32_t to, bool done) {
  const char* object = c.chat ? "chat.completion.chunk" : "text_completion";
  for (std::int32_t k = from; k < to; ++k) {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}, {"stop_reason", nullptr}};
    const std::string piece = std::string(filler_word(c.seed, k)) + " ";
    if (c.chat) {
      if (k == 0) {
        json first = {{"id", c.id},
                      {"object", object},
                      {"created", c.created},
                      {"model", c.model},
                      {"choices", json::array({{{"index", 0},
                                                {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                {"logprobs", nullptr},
                                                {"finish_reason", nullptr}}})}};
        http::append_sse_event(buf, dump(first));
      }
      choice["delta"] = {{"content", piece}};
    } else {
      choice["text"] = piece;
    }
    const bool last = done && k + 1 == to;
    if (last) choice["finish_reason"] = "length";
    json chunk = {{"id", c.id},
                  {"object", object},
                  {"created", c.created},
                  {"model", c.model},
                  {"choices", json::array({choice})}};
    if (last && c.kind == RequestKind::prefill_only) chunk["kv_transfer_params"] = c.kv_params;
    http::append_sse_event(buf, dump(chunk));
  }
  if (done) {
    if (c.include_usage) {
      json u = {{"id", c.id},       {"object", object},         {"created", c.created},
                {"model", c.model}, {"choices", json::array()}, {"usage", usage_json(c, st, to)}};
      http::append_sse_event(buf, dump(u));
    }
    buf.append(http::kSseDone);
  }
}

// Wakes a request's coroutine when its client leaves (ResponseWriter::watch_close). Made outside
// the coroutine (see ResponseCtx on g++ 12 and braced initializers).
struct WakeOnClose {
  http::WakeSignal signal;
  void operator()() const { signal.notify(); }
};
WakeOnClose wake_on_close(const RequestState& st) {
  return WakeOnClose{st.signal};
}

// A stream that opens with an error, as vLLM's OpenAI server sends a request that finished with
// finish_reason "error" (a failed KV pull under kv_load_failure_policy 'fail'): a chat stream's
// first chunk, the role, goes out before the error is seen; then the error event and [DONE].
std::string error_stream(bool chat, const std::string& model, std::int64_t created) {
  std::string buf;
  if (chat) {
    json delta = json::object();
    delta["role"] = "assistant";
    delta["content"] = "";
    json choice = json::object();
    choice["index"] = 0;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = nullptr;
    json chunk = json::object();
    chunk["id"] = "chatcmpl-kv-load-failed";
    chunk["object"] = "chat.completion.chunk";
    chunk["created"] = created;
    chunk["model"] = model;
    chunk["choices"] = json::array();
    chunk["choices"].push_back(std::move(choice));
    http::append_sse_event(buf, chunk.dump());
  }
  http::append_sse_event(buf, http::openai_error_body(500, "Internal server error", "", "kv_load_failed"));
  buf.append(http::kSseDone);
  return buf;
}

std::string models_body(const std::string& model, std::int32_t max_model_len) {
  json m = {{"id", model},   {"object", "model"}, {"created", unix_seconds()},     {"owned_by", "vllm"},
            {"root", model}, {"parent", nullptr}, {"max_model_len", max_model_len}};
  return dump(json{{"object", "list"}, {"data", json::array({m})}});
}

}  // namespace

struct SimWorker::Impl {
  SimWorkerConfig config;
  CostModel cost;
  net::io_context ioc;
  std::unique_ptr<KvEventPublisher> publisher;
  std::unique_ptr<SimEngine> engine;
  std::unique_ptr<http::HttpServer> server;
  net::signal_set signals{ioc, SIGTERM, SIGINT};
  std::atomic<std::uint64_t> request_counter{0};
  std::atomic<std::int64_t> tokens_sent{0};
  // Drain (SIGTERM): new generations get 503 + Retry-After, /health and /ready 503; the server
  // closes once no generation is in flight and no KV transfer is held (see SimWorker::drain()).
  std::atomic<bool> draining{false};
  std::atomic<std::int32_t> generating{0};  // generate() calls in flight
  Task<void> drain_when_idle();

  /// The served model's tokenizer and chat template (--tokenizer); empty: the made-up tokenizer.
  std::optional<text::ModelText> model_text;

  Impl(SimWorkerConfig c, const CostModel& m) : config(std::move(c)), cost(m) {}

  Task<void> handle(http::Request& req, ResponseWriter& w);
  Task<void> generate(http::Request& req, ResponseWriter& w, bool chat);
  Task<void> tokenize(http::Request& req, ResponseWriter& w, bool detokenize);
  void count_sent(std::int64_t tokens);
  json kv_params_for(const RequestState& st, const std::string& request_id) const;
};

// ---- responses ------------------------------------------------------------------------------

void SimWorker::Impl::count_sent(std::int64_t tokens) {
  if (config.crash_after <= 0 || tokens <= 0) return;
  if (tokens_sent.fetch_add(tokens) + tokens >= config.crash_after) {
    std::fprintf(stderr, "disagg-engine sim-worker: --crash-after %lld reached; exiting with code 3\n",
                 static_cast<long long>(config.crash_after));
    std::fflush(stderr);
    std::_Exit(3);
  }
}

json SimWorker::Impl::kv_params_for(const RequestState& st, const std::string& request_id) const {
  return json{{"do_remote_prefill", true},
              {"do_remote_decode", false},
              {"remote_block_ids", st.held_block_ids},
              {"remote_engine_id", config.engine_id},
              {"remote_request_id", request_id},
              {"remote_host", config.advertise_host},
              {"remote_port", config.side_channel_port},
              {"tp_size", cost.params().tensor_parallel}};
}

// vLLM's POST /tokenize ({prompt} or {messages}, as the completions and chat endpoints would
// tokenize them) and POST /detokenize ({tokens} -> {prompt}).
Task<void> SimWorker::Impl::tokenize(http::Request& req, ResponseWriter& w, bool detokenize) {
  if (!json_depth_within(req.body(), kMaxRequestJsonDepth)) {
    co_await w.send_error(400, json_depth_error(kMaxRequestJsonDepth), "", "json_too_deep");
    co_return;
  }
  Body body;
  if (!parse_json_into(req.body(), body) || !body.is_object()) {
    co_await w.send_error(400, "the request body must be a JSON object");
    co_return;
  }
  if (auto m = body.find("model"); m != body.end() && !m->is_null() && (!m->is_string() || *m != config.model_name)) {
    co_await w.send_error(404,
                          "The model `" + (m->is_string() ? m->get<std::string>() : m->dump()) +
                              "` does not exist; this worker serves `" + config.model_name + "`",
                          "model", "model_not_found");
    co_return;
  }
  if (model_text) {
    auto answer = model_text->serve_tokenize(body, detokenize, config.max_model_len, thread_encode_scratch());
    if (!answer) {
      co_await w.send_error(answer.error().status, answer.error().message, answer.error().param);
      co_return;
    }
    co_await w.send(200, answer->dump(-1, ' ', false, json::error_handler_t::replace));
    co_return;
  }
  // The made-up tokenizer: ids, but no text back.
  const auto p = body.find("prompt");
  if (detokenize || body.contains("messages") || p == body.end() || !p->is_string()) {
    co_await w.send_error(400,
                          detokenize ? "the made-up tokenizer cannot detokenize; start sim-worker with --tokenizer DIR"
                                     : "a tokenize request needs 'prompt' (a string); chat needs --tokenizer DIR",
                          detokenize ? "tokens" : "prompt");
    co_return;
  }
  std::vector<TokenId> ids;
  fake_tokenize(p->get_ref<const std::string&>(), ids);
  const json out{
      {"count", ids.size()}, {"max_model_len", config.max_model_len}, {"tokens", ids}, {"token_strs", nullptr}};
  co_await w.send(200, out.dump());
}

Task<void> SimWorker::Impl::generate(http::Request& req, ResponseWriter& w, bool chat) {
  // Counted before the drain flag is read: drain_when_idle() then never misses a request that got in.
  struct InFlight {
    std::atomic<std::int32_t>& n;
    explicit InFlight(std::atomic<std::int32_t>& c) : n(c) { n.fetch_add(1, std::memory_order_acq_rel); }
    ~InFlight() { n.fetch_sub(1, std::memory_order_acq_rel); }
  } in_flight(generating);
  if (draining.load(std::memory_order_acquire)) {
    const std::array<Header, 1> retry = {Header{"Retry-After", "1"}};
    co_await w.send_error(503, "the worker is draining (shutting down); send the request to another worker", "",
                          "draining", retry);
    co_return;
  }
  const std::uint64_t n = request_counter.fetch_add(1);
  if (config.fail_rate > 0) {
    const double u = static_cast<double>(splitmix64(config.seed ^ (n * 0x9e3779b97f4a7c15ULL)) >> 11) * 0x1.0p-53;
    if (u < config.fail_rate) {
      co_await w.send_error(500, "injected failure (--fail-rate)", "", "injected_failure");
      co_return;
    }
  }
  // The depth check, the parse and every field (request_validation.h).
  auto parsed = validate_generate_request(req.body(), chat, config, model_text ? &*model_text : nullptr);
  if (!parsed) {
    const ApiError& e = parsed.error();
    co_await w.send_error(e.status, e.message, e.param, e.code);
    co_return;
  }
  Generation g = std::move(*parsed);
  if (g.kind == RequestKind::remote_kv && config.kv_load_fail_rate > 0) {
    // A failed KV pull (its own draw, apart from --fail-rate's).
    const double u =
        static_cast<double>(splitmix64(config.seed ^ 0x6b765f6c6f6164ULL ^ (n * 0xbf58476d1ce4e5b9ULL)) >> 11) *
        0x1.0p-53;
    if (u < config.kv_load_fail_rate) {
      engine->record_failed_kv_transfer();
      if (config.kv_load_failure_policy == KvLoadFailurePolicy::recompute) {
        g.kind = RequestKind::full;  // vLLM reschedules the request and computes the prompt here
      } else if (!g.stream) {
        co_await w.send_error(500, "Internal server error", "", "kv_load_failed");
        co_return;
      } else {
        const std::string buf = error_stream(chat, config.model_name, unix_seconds());
        if (co_await w.start_stream()) {
          if (co_await w.write(buf)) co_await w.finish();
        }
        co_return;
      }
    }
  }
  if (config.stall_ms > 0) {
    net::steady_timer t(w.executor(), std::chrono::milliseconds(config.stall_ms));
    boost::system::error_code ec;
    co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
  }

  char idbuf[40];
  std::snprintf(idbuf, sizeof idbuf, "%s%016llx", chat ? "chatcmpl-" : "cmpl-",
                static_cast<unsigned long long>(splitmix64(n ^ (config.seed << 32))));
  const std::string id = idbuf;
  const std::int64_t created = unix_seconds();
  const std::uint64_t seed = filler_seed(g.prompt);
  const auto prompt_len = static_cast<std::int32_t>(g.prompt.size());
  const std::int32_t out_len = g.kind == RequestKind::prefill_only ? 1 : g.max_tokens;

  auto state = std::make_shared<RequestState>(w.executor());
  EngineRequest er;
  er.state = state;
  er.kind = g.kind;
  er.prompt_tokens = prompt_len;
  er.output_tokens = out_len;
  er.tokens = std::move(g.prompt);
  er.lora_name = std::move(g.lora_name);
  er.lora_id = g.lora_id;
  er.cache_salt = std::move(g.cache_salt);
  for (std::int32_t k = 0; k < out_len; ++k) er.tokens.push_back(filler_token(seed, k));
  if (!engine->submit(std::move(er))) {
    const std::array<Header, 1> retry = {Header{"Retry-After", "1"}};
    co_await w.send_error(429,
                          "the worker's queue is full (" + std::to_string(engine->options().max_pending) +
                              " requests pending); retry later",
                          "", "queue_full", retry);
    co_return;
  }

  auto fail_response = [&]() -> ApiError {
    if (state->shutdown) return {503, "the worker is shutting down", "", ""};
    switch (state->error) {
      case SchedErrc::queue_full: return {429, "the scheduler's waiting queue is full; retry later", "", "queue_full"};
      case SchedErrc::too_long:
        return {400, "prompt + max_tokens need more KV blocks than the worker has", "max_tokens", ""};
      case SchedErrc::wrong_role:
        return {400, "this " + std::string(to_string(config.role)) + " worker does not accept this request kind",
                "kv_transfer_params", ""};
      default: return {400, "the scheduler refused the request (" + std::string(to_string(state->error)) + ")", "", ""};
    }
  };
  ResponseCtx ctx;
  ctx.id = id;
  ctx.model = config.model_name;
  ctx.created = created;
  ctx.seed = seed;
  ctx.chat = chat;
  ctx.include_usage = g.include_usage;
  ctx.prompt_len = prompt_len;
  ctx.kind = g.kind;
  const std::array<Header, 1> retry = {Header{"Retry-After", "1"}};

  // A client that leaves before its response is complete has its request aborted in the engine
  // (blocks and batch slot freed), as vLLM aborts a request whose connection closed.
  w.watch_close(wake_on_close(*state));
  if (!g.stream) {
    while (state->status.load(std::memory_order_acquire) == RequestState::running && !w.client_closed()) {
      co_await state->signal.wait();
    }
    if (w.client_closed()) {
      engine->cancel(state);
      w.abort();
      co_return;
    }
    if (state->status.load(std::memory_order_acquire) == RequestState::failed) {
      const ApiError e = fail_response();
      co_await w.send_error(e.status, e.message, e.param, e.code,
                            e.status == 429 ? std::span<const Header>(retry) : std::span<const Header>());
      co_return;
    }
    const std::int32_t produced = state->tokens.load(std::memory_order_acquire);
    if (g.kind == RequestKind::prefill_only) ctx.kv_params = kv_params_for(*state, id);
    count_sent(produced);
    co_await w.send(200, full_response(ctx, *state, produced));
    co_return;
  }

  // Streaming: the header goes out with the first token (or the error status instead).
  std::int32_t sent = 0;
  bool started = false;
  std::string buf;
  while (!w.client_closed()) {
    const int status = state->status.load(std::memory_order_acquire);
    const std::int32_t produced = state->tokens.load(std::memory_order_acquire);
    if (status == RequestState::failed) {
      const ApiError e = fail_response();
      if (!started) {
        co_await w.send_error(e.status, e.message, e.param, e.code,
                              e.status == 429 ? std::span<const Header>(retry) : std::span<const Header>());
      } else {
        buf.clear();
        http::append_sse_event(buf, http::openai_error_body(e.status, e.message, e.param, e.code));
        buf.append(http::kSseDone);
        if (co_await w.write(buf)) co_await w.finish();
      }
      co_return;
    }
    // The engine publishes a request's last token before it marks the request finished, so a
    // wake-up can see every token while the status still reads running. A request that has all its
    // tokens is done: its last token chunk carries finish_reason (as vLLM's does) instead of the
    // stream ending without one. Prefill-only requests wait for the status: their transfer
    // parameters are written just before it.
    const bool done = status == RequestState::finished || (g.kind != RequestKind::prefill_only && produced >= out_len);
    if (produced > sent || done) {
      if (!started) {
        started = true;
        if (!co_await w.start_stream()) break;
      }
      buf.clear();
      if (done && g.kind == RequestKind::prefill_only) ctx.kv_params = kv_params_for(*state, id);
      append_stream_events(buf, ctx, *state, sent, produced, done);
      const std::int32_t new_tokens = produced - sent;
      sent = produced;
      if (!co_await w.write(buf)) break;
      count_sent(new_tokens);
      if (done) {
        co_await w.finish();
        co_return;
      }
      continue;
    }
    co_await state->signal.wait();
  }
  // The client left (the connection closed, or a write failed): abort the request.
  engine->cancel(state);
  w.abort();
}

Task<void> SimWorker::Impl::handle(http::Request& req, ResponseWriter& w) {
  const std::string_view path = http::target_path(req.target());
  const auto method = req.method();
  auto only = [&](http::bhttp::verb allowed, std::string_view allow) -> Task<bool> {
    if (method == allowed) co_return true;
    const std::array<Header, 1> h = {Header{"Allow", allow}};
    co_await w.send_error(405,
                          "method " + std::string(req.method_string()) + " is not allowed on " + std::string(path) +
                              "; use " + std::string(allow),
                          "", "method_not_allowed", h);
    co_return false;
  };
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!co_await only(http::bhttp::verb::post, "POST")) co_return;
    co_await generate(req, w, path == "/v1/chat/completions");
  } else if (path == "/tokenize" || path == "/detokenize") {
    if (!co_await only(http::bhttp::verb::post, "POST")) co_return;
    co_await tokenize(req, w, path == "/detokenize");
  } else if (path == "/health" || path == "/ready") {
    if (!co_await only(http::bhttp::verb::get, "GET")) co_return;
    if (draining.load(std::memory_order_acquire) || server->draining()) {
      co_await w.send_error(503, "draining", "", "draining");
    } else {
      co_await w.send(200, "", "text/plain");
    }
  } else if (path == "/v1/models") {
    if (!co_await only(http::bhttp::verb::get, "GET")) co_return;
    co_await w.send(200, models_body(config.model_name, config.max_model_len));
  } else if (path == "/metrics") {
    if (!co_await only(http::bhttp::verb::get, "GET")) co_return;
    std::string text = engine->metrics_text();
    co_await w.send(200, text, "text/plain; version=0.0.4; charset=utf-8");
  } else {
    co_await w.send_error(404,
                          "no route for " + std::string(path) +
                              "; sim-worker serves /v1/completions, /v1/chat/completions, "
                              "/tokenize, /detokenize, /v1/models, /health, /ready and /metrics",
                          "", "not_found");
  }
}

// ---- SimWorker ------------------------------------------------------------------------------

SimWorker::SimWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SimWorker::~SimWorker() {
  if (impl_ && impl_->engine) impl_->engine->stop();
  if (impl_ && impl_->publisher) impl_->publisher->stop();
}

std::uint16_t SimWorker::port() const {
  return impl_->server->port();
}

Expected<std::unique_ptr<SimWorker>, std::string> SimWorker::create(SimWorkerConfig config, const CostModel& cost) {
  auto impl = std::make_unique<Impl>(std::move(config), cost);
  SimWorkerConfig& c = impl->config;
  if (c.model_name.empty()) c.model_name = "sim-model";
  if (!c.tokenizer_dir.empty()) {
    auto loaded = text::ModelText::load(c.tokenizer_dir);
    if (!loaded) return unexpected("'--tokenizer' (" + c.tokenizer_dir + "): " + loaded.error());
    impl->model_text = std::move(loaded).value();
  }

  http::ServerOptions so;
  so.host = c.host;
  so.port = c.port;
  so.max_body_bytes = c.max_body_bytes;
  so.max_connections = c.max_connections;
  so.idle_timeout = std::chrono::milliseconds(c.keepalive_timeout_ms);
  so.header_timeout = std::chrono::milliseconds(c.header_timeout_ms);
  so.body_timeout = std::chrono::milliseconds(c.body_timeout_ms);
  so.drain_timeout = std::chrono::milliseconds(c.drain_timeout_ms);
  so.server_name = "disagg-engine sim-worker";
  Impl* raw = impl.get();
  auto server = http::HttpServer::create(impl->ioc, so,
                                         [raw](http::Request& req, ResponseWriter& w) { return raw->handle(req, w); });
  if (!server) return unexpected(server.error().message);
  impl->server = std::move(*server);
  const std::uint16_t port = impl->server->port();
  if (c.engine_id.empty()) c.engine_id = "sim-" + c.host + "-" + std::to_string(port);

  if (c.kv_events_port != 0) {
    KvEventPublisherOptions po;
    // The rank offsets both sockets, as vLLM's offset_endpoint_port (range checked by the flags).
    po.endpoint = "tcp://" + c.host + ":" + std::to_string(kv_events_bound_port(c));
    if (c.kv_events_replay_port != 0) {
      po.replay_endpoint = "tcp://" + c.host + ":" + std::to_string(c.kv_events_replay_port + c.data_parallel_rank);
      po.buffer_steps = static_cast<std::size_t>(c.kv_events_buffer_steps);
    }
    po.data_parallel_rank = c.data_parallel_rank;
    po.topic = c.kv_events_topic.empty() ? "kv@" + c.advertise_host + ":" + std::to_string(port) + "@" + c.model_name
                                         : c.kv_events_topic;
    po.release = c.vllm_release;
    auto pub = KvEventPublisher::create(po);
    if (!pub) return unexpected(pub.error());
    impl->publisher = std::move(*pub);
  }

  SimEngineOptions eo;
  eo.scheduler.role = c.role;
  eo.scheduler.max_num_seqs = c.max_num_seqs;
  eo.scheduler.max_num_batched_tokens = c.max_num_batched_tokens;
  // The bound that clients see is max_pending (checked at submit, answered 429 at once); the
  // scheduler's own queue is sized so that it never refuses what was admitted to the inbox.
  eo.scheduler.max_waiting = c.max_waiting + c.max_num_seqs;
  eo.scheduler.num_blocks = c.kv_blocks;
  eo.scheduler.block_size = c.block_size;
  eo.scheduler.enable_prefix_caching = c.prefix_caching;
  eo.speedup = c.speedup;
  eo.max_pending = c.max_waiting + c.max_num_seqs;
  eo.model_name = c.model_name;
  eo.kv_hash_salt = c.kv_events_hash_salt;
  auto engine = SimEngine::create(eo, cost, impl->publisher.get());
  if (!engine) return unexpected(engine.error());
  impl->engine = std::move(*engine);
  return std::unique_ptr<SimWorker>(new SimWorker(std::move(impl)));
}

void SimWorker::drain() {
  Impl* im = impl_.get();
  if (im->draining.exchange(true, std::memory_order_acq_rel)) return;
  std::cout << "disagg-engine sim-worker: draining: new requests get 503, finishing " << im->generating.load()
            << " in flight and " << im->engine->held_transfers() << " held KV transfers" << std::endl;
  net::co_spawn(im->ioc, im->drain_when_idle(), net::detached);
}

// The listener stays open while requests finish, so that a client (the router) that sends a new
// request hears 503 (go elsewhere) rather than a refused connection; then the server drains
// (keep-alive connections close) and the process exits. Bounded by --drain-timeout-ms.
Task<void> SimWorker::Impl::drain_when_idle() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(config.drain_timeout_ms);
  net::steady_timer timer(ioc);
  while ((generating.load(std::memory_order_acquire) > 0 || engine->held_transfers() > 0) &&
         std::chrono::steady_clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(20));
    boost::system::error_code ec;
    co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  server->drain([this] { ioc.stop(); });
}

void SimWorker::run() {
  Impl& im = *impl_;
  im.engine->start();
  im.server->start();
  im.signals.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) drain();
  });
  std::vector<std::thread> threads;
  for (int i = 1; i < im.config.http_threads; ++i) threads.emplace_back([&im] { im.ioc.run(); });
  im.ioc.run();
  for (auto& t : threads) t.join();
  im.engine->stop();
  if (im.publisher) im.publisher->stop();
}

int run(int argc, char** argv) {
  bool help = false;
  auto config = parse_sim_worker_args(argc, argv, &help);
  if (help) {
    std::cout << sim_worker_usage();
    return 0;
  }
  if (!config) {
    std::cerr << "disagg-engine sim-worker: " << config.error() << "\n";
    return 2;
  }
  auto cost = load_cost_model(*config);
  if (!cost) {
    std::cerr << "disagg-engine sim-worker: " << cost.error() << "\n";
    return 2;
  }
  const SimWorkerConfig& c = *config;
  auto worker = SimWorker::create(c, *cost);
  if (!worker) {
    std::cerr << "disagg-engine sim-worker: " << worker.error() << "\n";
    return 1;
  }
  std::signal(SIGPIPE, SIG_IGN);
  std::cout << "disagg-engine sim-worker: listening on http://" << c.host << ":" << (*worker)->port()
            << " role=" << to_string(c.role) << " model=" << c.model_name << " speedup=" << c.speedup;
  if (c.kv_events_port != 0) {
    std::cout << " kv-events=tcp://" << c.host << ":" << kv_events_bound_port(c)
              << " data-parallel-rank=" << c.data_parallel_rank;
  }
  std::cout << std::endl;
  (*worker)->run();
  std::cout << "disagg-engine sim-worker: drained, exiting" << std::endl;
  return 0;
}

}  // namespace disagg::sim_worker
