// upstream_legs.cc — prefill leg, main leg with retries, relay (upstream_legs.h).
#include "upstream_legs.h"

#include <algorithm>
#include <array>
#include <span>
#include <string_view>

#include "client_close.h"
#include "retry_policy.h"
#include "router_log.h"
#include "server/http/openai_error.h"
#include "server/http/sse.h"

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
Task<bool> stream_piece(ResponseWriter& w, bool& started, std::span<const Header> hs,
                               std::string_view piece) {
  if (started) co_return co_await w.write(piece);
  started = true;
  co_return co_await w.start_stream(200, "text/event-stream", hs, piece);
}

}  // namespace

// Sends the prefill leg; returns the kv_transfer_params of its answer, or null on any failure.
// `cancel` (the client-close watch's) aborts the leg when the client leaves: the prefill worker
// then sees its connection close and aborts; that is not the endpoint's failure.
http::Task<json> UpstreamLegs::run_prefill(net::any_io_executor ex, Pick& p, const RequestJson& body, std::string target,
                       std::string request_id, Clock::time_point deadline, http::ClientCancel* cancel) {
  RequestJson pb = body;
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
                                              const GenerateRequest& g, const RouteRequest& rq, Clock::time_point t0, double queued) {
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
  http::ClientCancel client_left;
  w.watch_close(CancelOnClientClose(&client_left));
  const CloseWatchGuard watch_guard(w);
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
      if (config_.log_decisions) log_line("decision " + request_id + " attempt " + std::to_string(attempt) + " " + plan_result.decision);
      if (explain_asked) decision = std::move(plan_result.decision);
    }
    Pick& pick = plan_result.main;
    if (!pick.ok()) {
      if (attempt == 0) {
        last_error = std::string("no healthy ") + (table_.pd_mode() ? "decode" : "aggregated") + " endpoint to serve the request";
        last_cause = ErrorCause::no_endpoint;
        last_status = 503;
        last_body.clear();
      }
      break;
    }
    if (attempt == 0) {
      // Router-added latency before the first upstream request: parse, tokenize, hash, admit,
      // decide (queueing excluded; the prefill leg is the workers' time).
      metrics_.overhead_seconds.observe(std::max(0.0, std::chrono::duration<double>(plan_result.decided - t0).count() - queued));
    }
    // P/D: prefill leg first.
    if (plan_result.prefill.ok()) {
      Pick& pf = plan_result.prefill;
      prefill_label = pf.label;
      kv_params = co_await run_prefill(w.executor(), pf, body, std::string(target), request_id, deadline, &client_left);
      table_.finish(pf, rq.request_id);
      if (client_left.cancelled()) {  // the client left during the prefill: no decode leg
        table_.finish(pick, rq.request_id);
        metrics_.error(ErrorCause::client_gone);
        w.abort();
        co_return ProxyOutcome::client_gone;
      }
      if (kv_params.is_null()) {
        metrics_.prefill_fallbacks.fetch_add(1, std::memory_order_relaxed);
        metrics_.error(ErrorCause::prefill_failed);
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
      RequestJson db = body;
      db["kv_transfer_params"] = kv_params;
      creq.body = db.dump();
    }
    creq.headers.emplace_back("X-Request-Id", request_id);
    http::ClientOptions o = clients_.options(w.executor());
    o.connect_timeout = std::chrono::milliseconds(config_.connect_timeout_ms);
    // From the decision's time: the prefill leg, if any, took its own and is read again.
    const auto sent = plan_result.prefill.ok() ? Clock::now() : plan_result.decided;
    o.first_byte_timeout = std::max(std::chrono::milliseconds(1),
                                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - sent));
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
      table_.finish(pick, rq.request_id);
      const AttemptResult result = e.code == http::ClientErrc::connect_failed ||
                                           e.code == http::ClientErrc::connect_timeout ||
                                           e.code == http::ClientErrc::resolve_failed ||
                                           e.code == http::ClientErrc::write_failed
                                       ? AttemptResult::connect_failed
                                       : AttemptResult::failed_before_response;
      if (!should_retry(result, attempt, config_.max_retries, Clock::now() >= deadline)) break;
      metrics_.retries.fetch_add(1, std::memory_order_relaxed);
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
      metrics_.error(last_cause);
      table_.upstream_failed(pick, false, last_error);
      exclude |= std::uint64_t{1} << pick.slot;
      table_.finish(pick, rq.request_id);
      if (!should_retry(AttemptResult::status_5xx, attempt, config_.max_retries, Clock::now() >= deadline)) break;
      metrics_.retries.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    table_.upstream_ok(pick);
    const ProxyOutcome outcome = co_await relay(w, up, pick, g, t0, prefill_label, decision);
    table_.finish(pick, rq.request_id);
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

http::Task<ProxyOutcome> UpstreamLegs::relay(ResponseWriter& w, http::ClientStream& up, Pick& pick, const GenerateRequest& g,
                Clock::time_point t0, const std::string& prefill_label, const std::string& decision) {
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
    if (!up.buffered()) {
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
    while (true) {
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
      const auto now = Clock::now();
      if (first) {
        first = false;
        t_first = now;
        table_.first_byte(pick);
        metrics_.ttft_seconds.observe(std::chrono::duration<double>(now - t0).count());
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
        metrics_.error(ErrorCause::client_gone);
        co_return ProxyOutcome::client_gone;
      }
      if (last) {
        ended = true;
        break;
      }
    }
    // Events: tokens plus the final usage chunk and [DONE]; TPOT over the gaps between tokens.
    if (events > 3) {
      metrics_.tpot_seconds.observe(std::chrono::duration<double>(t_last - t_first).count() /
                                   static_cast<double>(events - 3));
    }
    if (ended) co_return ProxyOutcome::ok;
    if (!started && !co_await w.start_stream(200, "text/event-stream", hs, batch)) co_return ProxyOutcome::client_gone;
    co_return co_await w.finish(started ? std::string_view(batch) : std::string_view()) ? ProxyOutcome::ok : ProxyOutcome::client_gone;
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
      const std::string message = "endpoint " + pick.label + " failed while sending its answer (" +
                                  piece.error().message() + ")";
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
  if (status >= 400) metrics_.error(ErrorCause::upstream_4xx);
  const std::string_view ct = content_type.empty() ? std::string_view("application/json") : content_type;
  const bool sent = co_await w.send(status, body, ct, hs);
  co_return sent ? (status < 400 ? ProxyOutcome::ok : ProxyOutcome::error) : ProxyOutcome::client_gone;
}

}  // namespace disagg::router
