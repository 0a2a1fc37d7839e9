// kv_event_subscriber.h — one thread that subscribes (ZMQ SUB) to every endpoint's KV events,
// decodes them (kv_event_decoder.h), checks sequence numbers (kv_event_sequence.h) and hands
// batches to a sink (the router, which feeds its KvBlockIndex under its lock).
//
// On a gap: when the endpoint has a replay socket (vLLM's optional ROUTER endpoint), request the
// missing batches (a DEALER sends ["", 8-byte start]; replies are ["", seq, payload] from vLLM
// before 0.26 and ["", topic, seq, payload] since, until seq -1; told apart per reply by frame count,
// kv_event_wire.h parse_replay_reply) and apply them in order. A replay that goes unanswered clears
// the endpoint's entries. An answer with holes (the buffer no longer reaches back to the gap, or
// batches lost on the way) clears them too, then applies the batches it has (counted in
// kv_replay_holes). An answer cut short (no end marker in time) is applied as far as it came; the
// batches after it show as the next gap. A reply of neither form is skipped, counted
// (kv_replay_malformed) and logged once per subscription. Without replay: clear and go on. A
// sequence that goes back means the publisher restarted: clear. A message that cannot be decoded
// is dropped and counted.
//
// Replays never block the thread: a replay in flight holds only its own endpoint's live batches
// (they wait in its SUB socket's queue, read again once the replay ends) while the other endpoints'
// batches flow; each replay has its own deadline (replay_timeout_ms of silence, at most ten times
// that in all).
//
// Warm start (a router that restarts, or an endpoint newly discovered): a subscription whose
// endpoint has a replay socket first asks it for everything from sequence 0. vLLM's publisher
// answers every buffered batch whose sequence is >= the start (its last `buffer_steps`, 10,000 by
// default), so a start older than its oldest batch yields the whole buffer
// (vllm/distributed/kv_events.py, ZmqEventPublisher._service_replay, vllm-project/vllm
// b4e69e0af33f4698e157a262cc787fe61983cd3d). Those batches are applied in order before the live
// ones queued meanwhile, which are then duplicates up to the last replayed number and dropped. A
// buffer that does not start at 0 clears nothing (the index was empty). A replay socket that does
// not answer is asked once more at the first live batch. A subscription that resumes from a peer
// router's snapshot (`resume_seq` >= 0: its entries are loaded already) asks for resume_seq + 1 on:
// a buffer that no longer reaches back clears the endpoint as a gap does; without a replay socket
// (or one that does not answer) the first gap is accepted as is, the loaded entries kept.
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
#include "lib/kv_events/kv_event_decoder.h"
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
  /// `resume_seq`: the last sequence a peer's snapshot applied for this endpoint (its entries are
  /// in the index already), -1 for none (then a replay from the start of the publisher's buffer).
  void add(EndpointId id, std::uint32_t generation, std::string endpoint, std::string replay, std::string topic_prefix,
           std::int64_t resume_seq = -1);
  /// Unsubscribes `id`. Thread-safe.
  void remove(EndpointId id);

 private:
  struct Command {
    bool add = true;
    EndpointId id = 0;
    std::uint32_t generation = 0;
    std::string endpoint, replay, topic;
    std::int64_t resume_seq = -1;
  };
  // gap: from the first lost batch (clear unless the answer starts there); initial: from the start
  // of the buffer (clear nothing); resume: after a peer snapshot's sequence (clear when the answer
  // does not reach back to it; an empty answer is fine).
  enum class ReplayMode : std::uint8_t { gap, initial, resume };
  struct Replay;
  struct Sub;
  void run();
  // A message from the SUB socket: checks its framing and sequence, then on_live() (or first the
  // retried warm start).
  void handle(Sub& s, std::vector<std::string>& frames);
  // A live batch in sequence order: applied, or held while the replay its gap asks for runs.
  void on_live(Sub& s, std::vector<std::string>& frames, std::int64_t seq);
  void apply(Sub& s, std::string_view payload, std::int64_t seq);
  void warm_start(Sub& s, std::int64_t resume_seq);
  // Sends a replay request and returns (never blocks); `held` (the live message that asked, if any)
  // is handled when the replay ends. Precondition: no replay of `s` in flight.
  void begin_replay(Sub& s, std::int64_t start, ReplayMode mode, std::vector<std::string> held, std::int64_t held_seq);
  // Reads what the replay socket has; ends the replay at its end marker.
  void read_replay(Sub& s);
  // Ends the replay of `s` (`ended`: its end marker came; else its deadline passed): applies what
  // came, then the held message.
  void finish_replay(Sub& s, bool ended);
  // Applies an answer (clearing the endpoint first when it has holes); returns the last sequence applied.
  std::int64_t apply_replay(Sub& s, Replay& r);

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
  KvEventBatch batch_;                      // reused by the thread
  std::vector<std::string> replay_frames_;  // reused by the thread
  bool counting_warm_ = false;              // blocks applied now count as loaded by a warm-start replay
};

}  // namespace disagg::router
