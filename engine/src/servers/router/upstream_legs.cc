// upstream_legs.cc — prefill leg, main leg with retries, relay (upstream_legs.h).
#include "upstream_legs.h"

#include <algorithm>
#include <array>
#include <span>
#include <string_view>

#include "client_close.h"
#include "lib/openai/openai_error.h"
#include "lib/openai/sse.h"
#include "retry_policy.h"
#include "router_log.h"

namespace disagg::router {

namespace {

using json = nlohmann::json;
using http::Header;
using http::ResponseWriter;
using http::Task;
namespace net = http::net;

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

// Sends `piece` as the next chunk of an SSE stream, with the response header when `started`
// is false (and sets it). False: the client is gone.
Task<bool> stream_piece(ResponseWriter& w, bool& started, std::span<const Header> hs, std::string_view piece) {
  if (started) co_return co_await w.write(piece);
  started = true;
  co_return co_await w.start_stream(200, "text/event-stream", hs, piece);
}

// How a decode stream that carried the prefill's KV transfer parameters opens.
enum class StreamOpening : std::uint8_t { content, error, broken, cancelled };

// Whether one SSE event says something: generated text, a finish, the end, or an error (`error`
// set). A chat stream's opening chunk carries only the role: it says nothing.
bool event_says_something(std::string_view event, bool& error) {
  const auto p = event.find("data:");
  if (p == std::string_view::npos) return false;  // a comment or a bare field
  std::string_view payload = event.substr(p + 5);
  while (!payload.empty() && payload.front() == ' ') payload.remove_prefix(1);
  if (payload.starts_with("[DONE]")) return true;
  const json doc = json::parse(payload, nullptr, false);
  if (!doc.is_object()) return true;  // not OpenAI's shape: relay it as it is
  if (doc.contains("error")) {
    error = true;
    return true;
  }
  const auto choices = doc.find("choices");
  if (choices == doc.end() || !choices->is_array()) return true;
  for (const json& c : *choices) {
    if (!c.is_object()) return true;
    if (auto f = c.find("finish_reason"); f != c.end() && !f->is_null()) return true;
    if (auto t = c.find("text"); t != c.end() && t->is_string() && !t->get_ref<const std::string&>().empty())
      return true;
    if (auto d = c.find("delta"); d != c.end() && d->is_object()) {
      for (const char* key : {"content", "reasoning_content", "reasoning", "tool_calls"}) {
        auto v = d->find(key);
        if (v == d->end() || v->is_null()) continue;
        if (!v->is_string() || !v->get_ref<const std::string&>().empty()) return true;
      }
    }
  }
  return false;
}

// Reads a decode stream into `head` until an event says something (or the stream ends, or 64 KiB
// came without one): `error` when that is an error event. vLLM under kv_load_failure_policy 'fail'
// answers a request whose KV pull failed with a 200 stream whose first word is an error event
// (after the role chunk on chat); nothing has been relayed, so the router can still retry.
// `broken`: the read failed (`err` says how); `cancelled`: the client left.
Task<StreamOpening> read_opening(http::ClientStream& up, std::string& head, http::ClientError& err) {
  std::size_t scanned = 0;  // bytes of `head` in events already classified
  while (true) {
    auto piece = co_await up.read_some();
    if (!piece) {
      err = piece.error();
      co_return err.code == http::ClientErrc::cancelled ? StreamOpening::cancelled : StreamOpening::broken;
    }
    if (piece->empty()) co_return StreamOpening::content;  // the end: relay what came
    head.append(*piece);
    for (auto end = head.find("\n\n", scanned); end != std::string::npos; end = head.find("\n\n", scanned)) {
      bool error = false;
      const bool says = event_says_something(std::string_view(head).substr(scanned, end - scanned), error);
      scanned = end + 2;
      if (says) co_return error ? StreamOpening::error : StreamOpening::content;
    }
    if (up.done() || head.size() > (64u << 10)) co_return StreamOpening::content;
  }
}

}  // namespace

// Sends the prefill leg; returns the kv_transfer_params of its answer, or null on any failure.
// `cancel` (the client-close watch's) aborts the leg when the client leaves: the prefill worker
// then sees its connection close and aborts; that is not the endpoint's failure.
http::Task<json> UpstreamLegs::run_prefill(net::any_io_executor ex, Pick& p, const RequestJson& body,
                                           std::string target, std::string request_id, Clock::time_point deadline,
                                           http::ClientCancel* cancel, bool* drained) {
  RequestJson pb = body;
  pb["max_tokens"] = 1;
  if (pb.contains("max_completion_tokens")) pb["max_completion_tokens"] = 1;
  pb["stream"] = false;
  pb.erase("stream_options");
  pb["kv_transfer_params"] =
      json{{"do_remote_decode", true},    {"do_remote_prefill", false}, {"remote_engine_id", nullptr},
           {"remote_block_ids", nullptr}, {"remote_host", nullptr},     {"remote_port", nullptr}};
  http::ClientRequest r;
  r.method = http::bhttp::verb::post;
  r.target = std::move(target);
  r.body = pb.dump();
  r.headers.emplace_back("X-Request-Id", request_id);
  http::ClientOptions o = clients_.options(ex);
  o.connect_timeout = std::chrono::milliseconds(config_.connect_timeout_ms);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  o.first_byte_timeout = std::max(std::chrono::milliseconds(1), left);
  o.idle_timeout = std::chrono::milliseconds(config_.idle_timeout_ms);
  o.cancel = cancel;
  auto res = co_await http::fetch(ex, p.host, p.port, std::move(r), o);
  json params;  // null
  if (!res && res.error().code == http::ClientErrc::cancelled) {
    co_return params;  // the client left; the caller sees cancel->cancelled()
  }
  if (!res) {
    table_.upstream_failed(p, res.error().code == http::ClientErrc::connect_failed, res.error().message());
  } else if (res->status == 503) {
    // Draining (scaled down): not a failure; the caller routes the request again.
    table_.upstream_draining(p);
    *drained = true;
  } else if (res->status >= 500) {
    table_.upstream_failed(p, false, "HTTP " + std::to_string(res->status));
  } else if (res->status == 200) {
    table_.upstream_ok(p);
    json answer = json::parse(res->body, nullptr, false);
    if (answer.is_object()) {
      auto kv = answer.find("kv_transfer_params");
      if (kv != answer.end() && kv->is_object()) params = *kv;
    }
  }
  co_return params;
}

http::Task<ProxyOutcome> UpstreamLegs::proxy(http::Request& req, ResponseWriter& w, const RequestJson& body,
                                             const GenerateRequest& g, const RouteRequest& rq, Clock::time_point t0,
                                             double queued) {
  const auto deadline = t0 + std::chrono::milliseconds(config_.request_timeout_ms);
  const std::string_view target = req.target();  // `req` outlives this call
  const std::string request_id = "disagg-" + std::to_string(rq.request_id);
  std::uint64_t exclude = 0;
  json kv_params;  // from the prefill leg
  std::string prefill_label;
  std::string last_error;  // set by each failed attempt (not up front: a served request allocates none)
  ErrorCause last_cause = ErrorCause::no_endpoint;
  unsigned last_status = 503;
  std::string last_body;  // a 5xx body to pass through when every attempt failed
  // Why the request went where it went: asked for by the request, or logged for every one.
  const std::string_view explain_header = req["X-Disagg-Explain"];
  const bool explain_asked = explain_header == "1" || explain_header == "true";
  std::string decision;
  PhaseClock clock;
  clock.arrived = t0;
  clock.queued = queued;
  http::ClientCancel client_left;
  w.watch_close(CancelOnClientClose(&client_left));
  const CloseWatchGuard watch_guard(w);
  // Counted in the prefill pool's queued_requests while it is served decode-only for lack of a
  // ready prefill endpoint (scaling_signals.h): what brings a prefill pool back from zero.
  struct PrefillStarved {
    std::atomic<std::int64_t>* gauge = nullptr;
    void set(std::atomic<std::int64_t>& g) {
      if (gauge == nullptr) (gauge = &g)->fetch_add(1, std::memory_order_relaxed);
    }
    ~PrefillStarved() {
      if (gauge != nullptr) gauge->fetch_sub(1, std::memory_order_relaxed);
    }
  } prefill_starved;
  bool held = false;  // waited once for a ready endpoint (autoscaling)
  bool overhead_seen = false;
  for (int attempt = 0; attempt <= config_.max_retries; ++attempt) {
    const auto now = Clock::now();
    if (now >= deadline) {
      last_cause = ErrorCause::request_timeout;
      last_status = 504;
      last_error = "the request timed out after " + std::to_string(config_.request_timeout_ms) + " ms";
      last_body.clear();
      break;
    }
    Plan plan_result = table_.plan(rq, exclude, attempt == 0, now, explain_asked || config_.log_decisions);
    if (!plan_result.decision.empty()) {
      if (config_.log_decisions)
        log_line("decision " + request_id + " attempt " + std::to_string(attempt) + " " + plan_result.decision);
      if (explain_asked) decision = std::move(plan_result.decision);
    }
    if (!plan_result.main.ok() && config_.autoscaling.configured && !held) {
      // No ready endpoint of the pool: it may be scaled to zero, or every endpoint drains. Hold the
      // request (up to queue_timeout_ms) while the autoscaler, which sees it in queued_requests,
      // brings one up. Polled: the endpoint table has no waiters to wake.
      held = true;
      const auto hold_until = std::min(deadline, Clock::now() + std::chrono::milliseconds(config_.queue_timeout_ms));
      metrics_.waiting_for_endpoint.fetch_add(1, std::memory_order_relaxed);
      net::steady_timer timer(w.executor());
      while (!plan_result.main.ok() && Clock::now() < hold_until && !client_left.cancelled()) {
        timer.expires_after(std::chrono::milliseconds(50));
        boost::system::error_code ec;
        co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
        plan_result = table_.plan(rq, exclude, attempt == 0, Clock::now(), false);
      }
      metrics_.waiting_for_endpoint.fetch_sub(1, std::memory_order_relaxed);
      if (client_left.cancelled()) {
        if (plan_result.main.ok()) {
          table_.finish(plan_result.prefill, rq.request_id);
          table_.finish(plan_result.main, rq.request_id);
        }
        metrics_.error(ErrorCause::client_gone);
        w.abort();
        co_return ProxyOutcome::client_gone;
      }
    }
    Pick& pick = plan_result.main;
    if (plan_result.pd_evaluated && plan_result.reason == PdReason::no_prefill_endpoint && table_.need_prefill()) {
      prefill_starved.set(metrics_.waiting_for_prefill);
    }
    if (!pick.ok()) {
      if (attempt == 0 && exclude == 0) {
        last_error = std::string("no healthy ") + (table_.pd_mode() ? "decode" : "aggregated") +
                     " endpoint to serve the request";
        last_cause = ErrorCause::no_endpoint;
        last_status = 503;
        last_body.clear();
      }
      break;
    }
    if (!overhead_seen) {
      overhead_seen = true;
      // Router-added latency before the first upstream request: parse, tokenize, hash, admit,
      // decide (queueing excluded; the prefill leg is the workers' time).
      metrics_.overhead_seconds.observe(
          std::max(0.0, std::chrono::duration<double>(plan_result.decided - t0).count() - queued));
    }
    // P/D: prefill leg first.
    if (plan_result.prefill.ok()) {
      Pick& pf = plan_result.prefill;
      prefill_label = pf.label;
      bool prefill_drained = false;
      clock.prefill_sent = Clock::now();
      kv_params = co_await run_prefill(w.executor(), pf, body, std::string(target), request_id, deadline, &client_left,
                                       &prefill_drained);
      clock.prefill_done = Clock::now();
      const int prefill_slot = pf.slot;
      // A prefill that failed or drained computed nothing there.
      if (kv_params.is_null() && !client_left.cancelled()) {
        table_.finish_failed(rq, pf, /*prefill_leg=*/true);
      } else {
        table_.finish(pf, rq.request_id);
      }
      if (client_left.cancelled()) {  // the client left during the prefill: no decode leg
        table_.finish(pick, rq.request_id);
        metrics_.error(ErrorCause::client_gone);
        w.abort();
        co_return ProxyOutcome::client_gone;
      }
      if (prefill_drained) {
        // The prefill endpoint drains: decide again without it (P/D still allowed; not a failure,
        // so the retry budget is kept; each endpoint is excluded once, which bounds this).
        exclude |= std::uint64_t{1} << prefill_slot;
        table_.finish(pick, rq.request_id);
        prefill_label.clear();
        metrics_.drained_retries.fetch_add(1, std::memory_order_relaxed);
        --attempt;
        continue;
      }
      if (kv_params.is_null()) {
        metrics_.prefill_fallbacks.fetch_add(1, std::memory_order_relaxed);
        metrics_.error(ErrorCause::prefill_failed);
        log_line("prefill on " + prefill_label + " failed for " + request_id + "; serving it decode-only");
        prefill_label.clear();
      }
    }
    // This leg carries the prefill's KV transfer parameters: the decode worker pulls the KV.
    const bool with_transfer = !kv_params.is_null();
    http::ClientRequest creq;
    creq.method = http::bhttp::verb::post;
    creq.target = target;
    if (kv_params.is_null()) {
      creq.body_view = req.body();  // the client's bytes as they are, not copied (kept for a retry)
    } else {
      RequestJson db = body;
      db["kv_transfer_params"] = kv_params;
      creq.body = db.dump();
    }
    // The only header passed on: none of the client's go to the worker (its Authorization with the
    // router's API key least of all: workers take no key, and must not log one).
    creq.headers.emplace_back("X-Request-Id", request_id);
    http::ClientOptions o = clients_.options(w.executor());
    o.connect_timeout = std::chrono::milliseconds(config_.connect_timeout_ms);
    // The leg's send time (its phase boundary), read once; the first-byte limit counts from the
    // decision's time, or after a prefill leg (which took its own) from now.
    clock.main_sent = Clock::now();
    const auto sent = plan_result.prefill.ok() ? clock.main_sent : plan_result.decided;
    o.first_byte_timeout =
        std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(deadline - sent));
    o.idle_timeout = std::chrono::milliseconds(config_.idle_timeout_ms);
    o.cancel = &client_left;
    auto opened = co_await http::ClientStream::open(w.executor(), pick.host, pick.port, std::move(creq), o);
    if (!opened && opened.error().code == http::ClientErrc::cancelled) {
      table_.finish(pick, rq.request_id);
      metrics_.error(ErrorCause::client_gone);
      w.abort();
      co_return ProxyOutcome::client_gone;
    }
    if (!opened) {
      const http::ClientError& e = opened.error();
      last_cause = cause_of(e);
      last_status = last_cause == ErrorCause::upstream_timeout ? 504 : 502;
      last_error = "endpoint " + pick.label + " failed before answering: " + e.message();
      last_body.clear();
      metrics_.error(last_cause);
      table_.upstream_failed(pick, e.code == http::ClientErrc::connect_failed, e.message());
      exclude |= std::uint64_t{1} << pick.slot;
      table_.finish_failed(rq, pick, /*prefill_leg=*/false);
      const AttemptResult result =
          e.code == http::ClientErrc::connect_failed || e.code == http::ClientErrc::connect_timeout ||
                  e.code == http::ClientErrc::resolve_failed || e.code == http::ClientErrc::write_failed
              ? AttemptResult::connect_failed
              : AttemptResult::failed_before_response;
      // A request that never reached the worker may take its transfer parameters elsewhere (the
      // prefill still holds the blocks); one the worker took may have begun the pull: never again.
      if (with_transfer && result != AttemptResult::connect_failed) {
        kv_params = nullptr;
        prefill_label.clear();
        metrics_.kv_transfer_fallbacks.fetch_add(1, std::memory_order_relaxed);
        log_line("decode leg on " + pick.label + " with KV transfer parameters failed for " + request_id +
                 "; retrying decode-only");
      }
      if (!should_retry(result, attempt, config_.max_retries, Clock::now() >= deadline)) break;
      metrics_.retries.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    http::ClientStream& up = **opened;
    const unsigned status = up.status();
    if (status == 503) {
      // The endpoint drains (scaled down; it answers new requests 503 + Retry-After while its
      // requests in flight finish): send the request elsewhere at once and route nothing more
      // there. Not a failure: no health strike, and the retry budget (for failures) is kept; each
      // endpoint is excluded once, which bounds this. The worker did not take the request, so KV
      // transfer parameters stay valid for the next decode endpoint.
      for (std::size_t drained_bytes = 0;
           drained_bytes < (64u << 10);) {  // read the answer: the connection stays usable
        auto piece = co_await up.read_some();
        if (!piece || piece->empty()) break;
        drained_bytes += piece->size();
      }
      table_.upstream_draining(pick);
      exclude |= std::uint64_t{1} << pick.slot;
      table_.finish_failed(rq, pick, /*prefill_leg=*/false);
      last_cause = ErrorCause::no_endpoint;
      last_status = 503;
      last_error = "every endpoint able to serve the request is draining (the last: " + pick.label + ")";
      last_body.clear();
      metrics_.drained_retries.fetch_add(1, std::memory_order_relaxed);
      if (Clock::now() >= deadline) break;
      --attempt;
      continue;
    }
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
      metrics_.error(last_cause);
      if (with_transfer) {
        // vLLM with kv_load_failure_policy 'fail' answers a failed KV pull with 500: the transfer
        // failed, not (as far as the router can tell) the decode worker, which stays a candidate.
        // The retry goes decode-only: the worker prefills the prompt itself (a full local prefill)
        // instead of repeating a pull whose blocks may be gone.
        kv_params = nullptr;
        prefill_label.clear();
        metrics_.kv_transfer_fallbacks.fetch_add(1, std::memory_order_relaxed);
        log_line("decode on " + pick.label + " answered HTTP " + std::to_string(status) + " to " + request_id +
                 " with KV transfer parameters (a failed KV pull?); retrying decode-only");
      } else {
        table_.upstream_failed(pick, false, last_error);
        exclude |= std::uint64_t{1} << pick.slot;
      }
      table_.finish_failed(rq, pick, /*prefill_leg=*/false);
      if (!should_retry(AttemptResult::status_5xx, attempt, config_.max_retries, Clock::now() >= deadline)) break;
      metrics_.retries.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    std::string head;  // the stream's opening, read before anything is relayed
    if (with_transfer && g.stream && status == 200 &&
        up.headers()["Content-Type"].find("text/event-stream") != std::string_view::npos) {
      // On a stream the failed pull shows as an opening error event (read_opening).
      http::ClientError err;
      const StreamOpening opening = co_await read_opening(up, head, err);
      if (opening == StreamOpening::cancelled) {
        table_.finish(pick, rq.request_id);
        metrics_.error(ErrorCause::client_gone);
        w.abort();
        co_return ProxyOutcome::client_gone;
      }
      const AttemptResult result =
          opening == StreamOpening::broken ? AttemptResult::failed_before_response : AttemptResult::status_5xx;
      if (opening != StreamOpening::content &&
          should_retry(result, attempt, config_.max_retries, Clock::now() >= deadline)) {
        if (opening == StreamOpening::broken) {
          last_cause = cause_of(err);
          last_status = last_cause == ErrorCause::upstream_timeout ? 504 : 502;
          last_error = "endpoint " + pick.label + " failed before answering: " + err.message();
          table_.upstream_failed(pick, false, err.message());
          exclude |= std::uint64_t{1} << pick.slot;
        } else {
          last_cause = ErrorCause::upstream_5xx;
          last_status = 500;
          last_error = "endpoint " + pick.label + " opened its stream with an error";
        }
        last_body.clear();
        metrics_.error(last_cause);
        kv_params = nullptr;
        prefill_label.clear();
        metrics_.kv_transfer_fallbacks.fetch_add(1, std::memory_order_relaxed);
        log_line("decode stream on " + pick.label + " for " + request_id +
                 " with KV transfer parameters opened with an error (a failed KV pull?); retrying decode-only");
        table_.finish_failed(rq, pick, /*prefill_leg=*/false);
        metrics_.retries.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      // Content, or no retry left: relay the opening as it came (an error event reaches the client).
    }
    table_.upstream_ok(pick);
    const ProxyOutcome outcome = co_await relay(w, up, pick, g, t0, prefill_label, decision, clock, std::move(head));
    table_.finish(pick, rq.request_id);
    if (outcome == ProxyOutcome::ok && status < 400) {
      clock.transferred = with_transfer;
      phases_.observe(clock, prefill_label, pick.label,
                      with_transfer ? transferred_kv_tokens(rq.prompt_tokens, rq.block_size, pick.cached_blocks) : 0);
    }
    co_return outcome;
  }
  // Every attempt failed before any byte was relayed.
  // Upstream causes were counted per attempt; these two were not.
  if (last_cause == ErrorCause::request_timeout || last_cause == ErrorCause::no_endpoint) metrics_.error(last_cause);
  if (!last_body.empty() && last_cause == ErrorCause::upstream_5xx) {
    co_await w.send(last_status, last_body);
  } else {
    std::array<Header, 1> retry = {Header{"Retry-After", "1"}};
    const std::string code = std::string(to_string(last_cause));
    co_await w.send_error(last_status, last_error.empty() ? "no healthy endpoint" : last_error, "", code,
                          last_status == 503 ? std::span<const Header>(retry) : std::span<const Header>());
  }
  co_return ProxyOutcome::error;
}

http::Task<ProxyOutcome> UpstreamLegs::relay(ResponseWriter& w, http::ClientStream& up, Pick& pick,
                                             const GenerateRequest& g, Clock::time_point t0,
                                             const std::string& prefill_label, const std::string& decision,
                                             PhaseClock& clock, std::string head) {
  const unsigned status = up.status();
  // Why it went there, for "why is my hit rate low": the prompt blocks the router found cached on
  // the chosen endpoint (its KV-event index, or its routing history).
  const std::string cached = std::to_string(pick.cached_blocks);
  std::array<Header, 4> headers = {Header{"X-Disagg-Endpoint", pick.label}, Header{"X-Disagg-Cached-Blocks", cached}};
  std::size_t header_count = 2;
  if (!prefill_label.empty()) headers[header_count++] = Header{"X-Disagg-Prefill-Endpoint", prefill_label};
  // Every candidate's cached blocks, cost and load, when the request sent X-Disagg-Explain: 1.
  if (!decision.empty()) headers[header_count++] = Header{"X-Disagg-Decision", decision};
  const std::span<const Header> hs(headers.data(), header_count);
  const auto content_type = up.headers()["Content-Type"];
  const bool sse = content_type.find("text/event-stream") != std::string_view::npos;
  const auto deadline = t0 + std::chrono::milliseconds(config_.request_timeout_ms);
  if (status == 200 && g.stream && sse) {
    // Bytes go out as they arrive, in as few writes as nginx's: each piece is everything received
    // so far, the header goes with the first piece when that came with the upstream's header
    // (else at once, so that the client sees the stream start before the first token), and the
    // last piece with the end of the stream.
    bool started = false;
    if (!up.buffered() && head.empty()) {
      if (!co_await w.start_stream(200, "text/event-stream", hs)) {
        up.cancel();
        metrics_.error(ErrorCause::client_gone);
        co_return ProxyOutcome::client_gone;
      }
      started = true;
    }
    bool first = true;
    bool ended = false;  // the end of the stream went out with the last piece
    std::string batch;   // the error event when the stream breaks
    std::size_t events = 0;
    Clock::time_point t_first{}, t_last{};
    bool head_sent = head.empty();  // the opening already read (proxy's read_opening) goes first
    while (true) {
      std::string_view data;
      if (!head_sent) {
        head_sent = true;
        data = head;
      } else {
        auto piece = co_await up.read_some();
        if (!piece && piece.error().code == http::ClientErrc::cancelled) {  // the client left
          metrics_.error(ErrorCause::client_gone);
          w.abort();
          co_return ProxyOutcome::client_gone;
        }
        if (!piece || Clock::now() >= deadline) {
          // The stream started: never retried. End it with an OpenAI error event the SDKs raise.
          ErrorCause cause = ErrorCause::request_timeout;
          std::string message = "the request timed out after " + std::to_string(config_.request_timeout_ms) + " ms";
          if (!piece) {
            cause = piece.error().code == http::ClientErrc::idle_timeout ? ErrorCause::upstream_timeout
                                                                         : ErrorCause::upstream_broken;
            message = "endpoint " + pick.label + " failed mid-stream (" + piece.error().message() +
                      "); the response is incomplete";
            table_.upstream_failed(pick, false, piece.error().message());
          } else {
            up.cancel();
          }
          metrics_.error(cause);
          http::append_sse_event(batch, http::openai_error_body(502, message, "", "upstream_stream_broken"));
          if (co_await stream_piece(w, started, hs, batch)) co_await w.finish();
          co_return ProxyOutcome::error;
        }
        if (piece->empty()) break;
        data = *piece;
      }
      const auto now = Clock::now();
      if (first) {
        first = false;
        t_first = now;
        table_.first_byte(pick);
        metrics_.ttft_seconds.observe(std::chrono::duration<double>(now - t0).count());
      }
      events += count_events(data);
      t_last = now;
      // read_some() already joined every body byte received so far into this piece: send it now
      // (holding it back for bytes not yet received would delay tokens).
      const bool last = up.done();
      const std::string_view out = data;
      bool sent = false;
      if (last && started) {
        sent = co_await w.finish(out);
      } else {
        sent = co_await stream_piece(w, started, hs, out);
        if (sent && last) sent = co_await w.finish();
      }
      if (!sent) {
        up.cancel();  // closes the upstream connection: the worker sees the client leave
        metrics_.error(ErrorCause::client_gone);
        co_return ProxyOutcome::client_gone;
      }
      if (last) {
        ended = true;
        break;
      }
    }
    // Events: tokens plus the final usage chunk and [DONE]; TPOT over the gaps between tokens.
    clock.streamed = true;
    clock.first_byte = t_first;
    clock.end = Clock::now();
    if (events > 3) {
      clock.inter_token_seconds =
          std::chrono::duration<double>(t_last - t_first).count() / static_cast<double>(events - 3);
      metrics_.tpot_seconds.observe(clock.inter_token_seconds);
    }
    if (ended) co_return ProxyOutcome::ok;
    if (!started && !co_await w.start_stream(200, "text/event-stream", hs, batch)) co_return ProxyOutcome::client_gone;
    co_return co_await w.finish(started ? std::string_view(batch) : std::string_view()) ? ProxyOutcome::ok
                                                                                        : ProxyOutcome::client_gone;
  }
  // Whole body (non-streaming, or an error answer). A body that arrives in one piece, as a small
  // one does, is sent from the upstream's buffer; only one in several pieces is gathered.
  std::string out;
  std::string_view body;
  while (true) {
    auto piece = co_await up.read_some();
    if (!piece && piece.error().code == http::ClientErrc::cancelled) {  // the client left
      metrics_.error(ErrorCause::client_gone);
      w.abort();
      co_return ProxyOutcome::client_gone;
    }
    if (!piece) {
      metrics_.error(cause_of(piece.error()));
      table_.upstream_failed(pick, false, piece.error().message());
      const std::string message =
          "endpoint " + pick.label + " failed while sending its answer (" + piece.error().message() + ")";
      co_await w.send_error(502, message, "", "upstream_broken");
      co_return ProxyOutcome::error;
    }
    if (piece->empty()) break;
    if (out.size() + piece->size() > (256u << 20)) {
      up.cancel();
      const std::string message = "endpoint " + pick.label + " answered more than 256 MiB";
      co_await w.send_error(502, message, "", "upstream_broken");
      co_return ProxyOutcome::error;
    }
    if (out.empty() && up.done()) {
      body = *piece;
      break;
    }
    out.append(*piece);
    if (up.done()) break;  // no read for the end: the stream knows it already
  }
  if (body.empty()) body = out;
  table_.first_byte(pick);
  clock.first_byte = Clock::now();
  if (status >= 400) metrics_.error(ErrorCause::upstream_4xx);
  const std::string_view ct = content_type.empty() ? std::string_view("application/json") : content_type;
  const bool sent = co_await w.send(status, body, ct, hs);
  clock.end = Clock::now();
  co_return sent ? (status < 400 ? ProxyOutcome::ok : ProxyOutcome::error) : ProxyOutcome::client_gone;
}

}  // namespace disagg::router
