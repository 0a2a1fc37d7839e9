// kv_event_subscriber.h — one thread that subscribes (ZMQ SUB) to every endpoint's KV events,
// decodes them (kv_event_decoder.h), checks sequence numbers (kv_event_sequence.h) and hands
// batches to a sink (the router, which feeds its KvBlockIndex under its lock).
//
// On a gap: when the endpoint has a replay socket (vLLM's optional ROUTER endpoint), request the
// missing batches (a DEALER sends ["", 8-byte start]; replies are ["", seq, payload] from vLLM
// before 0.26 and ["", topic, seq, payload] since, until seq -1; told apart per reply by frame count,
// kv_event_wire.h parse_replay_reply) and apply them in order; when the replay is missing or does
// not reach back to the gap, the endpoint's entries are cleared first. A reply of neither form is
// skipped, counted (kv_replay_malformed) and logged once per subscription. Without replay: clear
// and go on. A sequence that goes back means the publisher restarted: clear. A message that cannot
// be decoded is dropped and counted.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "disagg/kv_block_index.h"
#include "kv_event_decoder.h"
#include "router_metrics.h"

namespace disagg::router {

/// Receives decoded batches, on the subscriber thread. `generation` identifies the endpoint
/// incarnation the subscription was made for (ids are reused).
class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  virtual void on_kv_batch(EndpointId id, std::uint32_t generation, const KvEventBatch& batch) = 0;
  virtual void on_kv_clear(EndpointId id, std::uint32_t generation, std::string_view why) = 0;
};

struct KvSubscriberOptions {
  std::int64_t replay_timeout_ms = 1'000;
  KvDecodeLimits limits;
  /// ZMQ receive high-water mark per subscription (messages).
  int rcvhwm = 100'000;
};

class KvEventSubscriber {
 public:
  KvEventSubscriber(KvEventSink& sink, RouterMetrics& metrics, KvSubscriberOptions options);
  ~KvEventSubscriber();
  KvEventSubscriber(const KvEventSubscriber&) = delete;
  KvEventSubscriber& operator=(const KvEventSubscriber&) = delete;

  void start();
  /// Stops and joins the thread (idempotent).
  void stop();
  /// Subscribes to `endpoint` (tcp://...) with `topic_prefix` for endpoint `id` (replaces an
  /// earlier subscription of the same id). `replay`: ROUTER endpoint or empty. Thread-safe.
  void add(EndpointId id, std::uint32_t generation, std::string endpoint, std::string replay,
           std::string topic_prefix);
  /// Unsubscribes `id`. Thread-safe.
  void remove(EndpointId id);

 private:
  struct Command {
    bool add = true;
    EndpointId id = 0;
    std::uint32_t generation = 0;
    std::string endpoint, replay, topic;
  };
  struct Sub;
  void run();
  void handle(Sub& s, std::vector<std::string>& frames);
  bool replay(Sub& s, std::int64_t start, std::int64_t* last_applied);
  void apply(Sub& s, std::string_view payload);

  KvEventSink& sink_;
  RouterMetrics& metrics_;
  KvSubscriberOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Command> commands_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  KvEventBatch batch_;  // reused by the thread
};

}  // namespace disagg::router
