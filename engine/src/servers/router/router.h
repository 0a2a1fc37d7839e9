// router.h — `disagg-engine router`: the OpenAI-compatible front, endpoint registry (static and
// DNS), health checks and load scraping, KV-event-fed index, routing and P/D orchestration.
//
// Threads: `threads` HTTP threads, each running its own io_context; client connections are spread
// over them round robin and a request (its upstream legs included) stays on its connection's
// thread; the first also runs the listener, health checks and scrapes. One KV-event subscriber
// thread; one DNS thread when
// a pool is discovered by DNS. The policy, the KV block index and the endpoint table are guarded by
// one mutex, held for a routing decision (microseconds) or one KV event batch; per-endpoint live
// state is atomic (endpoint_health.h).
//
// Request path: with router.apiKeys, the API key of a request to /v1/*, /tokenize or /detokenize
// (401 without a valid one; api_keys.h), then parse and validate (400 / 404), tokenize and hash
// the prompt's full blocks, admission (429 + Retry-After), decide (policy + PdDecider), optional
// prefill leg, upstream request with retries on another endpoint while nothing was received
// (connect failure, 5xx, first-byte timeout; never after the first byte), then relay: streamed
// byte for byte, or whole.
// A client that disconnects mid-stream cancels the upstream request. A worker that breaks
// mid-stream ends the client's stream with an OpenAI error event.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "disagg/expected.h"
#include "router_config.h"

namespace disagg::router {

class Router {
 public:
  static Expected<std::unique_ptr<Router>, std::string> create(RouterConfig config);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  /// The bound HTTP port.
  std::uint16_t port() const;
  /// Serves until a drain completes (SIGTERM / SIGINT or drain()). Blocks.
  void run();
  /// Starts a graceful drain: /ready fails, new requests get 503, in-flight ones finish. Thread-safe.
  void drain();

  struct Impl;

 private:
  explicit Router(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace disagg::router
