// kv_event_publisher.h — KV-cache events in vLLM's wire format, published over ZMQ.
//
// The wire format (frames, sequence numbers, replay and its end marker, event tags, field order)
// is described once, in lib/kv_events/kv_event_wire.h; this encoder writes by it and the
// router's decoder reads by it. What the sim-worker writes imitates one vLLM release
// (lib/kv_events/vllm_release.h: the batch and event encodings, the replay framing); defaulted
// fields (group_idx, ...) are omitted, as msgspec's omit_defaults does, and extra_keys is written
// only for blocks of a LoRA or salted request; block hashes are unsigned 64-bit integers (the
// engine's chained hashes, disagg/block_hash.h); lora_id and lora_name are nil unless the request
// named a LoRA adapter; medium is "GPU". The optional replay socket answers a request for a start
// sequence with every buffered batch from it, then the end marker, framed as the release frames them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "disagg/block_hash.h"
#include "disagg/expected.h"
#include "lib/kv_events/kv_event_wire.h"
#include "lib/kv_events/vllm_release.h"

namespace disagg::sim_worker {

/// The event types of the wire format (block_stored, block_removed, all_blocks_cleared).
using KvEventKind = kv_wire::EventTag;

struct KvEvent {
  KvEventKind kind = KvEventKind::block_stored;
  std::vector<BlockHash> block_hashes;
  /// block_stored: hash of the block before the first one; nullopt for a sequence's first block.
  std::optional<BlockHash> parent_block_hash;
  /// block_stored: the tokens of all the blocks, block after block.
  std::vector<TokenId> token_ids;
  std::int32_t block_size = 0;
  /// block_stored: the LoRA adapter of the request (vLLM's lora_name, in every block's extra_keys)
  /// and its lora_id; empty / 0 without one.
  std::string lora_name;
  std::int32_t lora_id = 0;
  /// block_stored: the request's cache_salt, in the first block's extra_keys; only on an event
  /// whose first block starts a sequence (no parent), as vLLM salts only that block.
  std::string cache_salt;
};

/// array_like or map_like (see kv_event_wire.h).
using KvEventEncoding = kv_wire::Encoding;

/// msgpack bytes of EventBatch(ts, events, data_parallel_rank), the batch written `batch`, its
/// events written `events`.
std::string encode_event_batch(double ts, std::span<const KvEvent> events, std::int32_t data_parallel_rank,
                               KvEventEncoding batch, KvEventEncoding events_encoding);
/// The same with one encoding for the batch and its events.
inline std::string encode_event_batch(double ts, std::span<const KvEvent> events, std::int32_t data_parallel_rank,
                                      KvEventEncoding encoding) {
  return encode_event_batch(ts, events, data_parallel_rank, encoding, encoding);
}
/// The same as vLLM `release` writes it.
inline std::string encode_event_batch(double ts, std::span<const KvEvent> events, std::int32_t data_parallel_rank,
                                      const kv_wire::VllmRelease& release) {
  return encode_event_batch(ts, events, data_parallel_rank, release.batch, release.events);
}

/// The 8-byte sequence frame (the wire module's; -1 = the replay end marker).
using kv_wire::encode_seq;

struct KvEventPublisherOptions {
  /// PUB endpoint, e.g. "tcp://127.0.0.1:5557" (bound).
  std::string endpoint;
  /// ROUTER endpoint for replay; empty = none.
  std::string replay_endpoint;
  std::string topic;
  /// The vLLM release imitated: encodings and replay framing.
  kv_wire::VllmRelease release = kv_wire::kNewestVllmRelease;
  std::int32_t data_parallel_rank = 0;
  /// Batches kept for replay (vLLM's buffer_steps default is 10,000).
  std::size_t buffer_steps = 10'000;
  /// Batches waiting to be sent; publish() drops beyond it (counted in dropped()).
  std::size_t max_queue = 100'000;
  /// ZMQ send high-water mark of the PUB socket.
  int hwm = 100'000;
};

/// Owns the ZMQ sockets and a sender thread; publish() only queues (thread-safe, non-blocking).
class KvEventPublisher {
 public:
  static Expected<std::unique_ptr<KvEventPublisher>, std::string> create(KvEventPublisherOptions options);
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  /// Queues one batch (ts now). Empty batches are not sent.
  void publish(std::vector<KvEvent> events);
  /// Sends what is queued, then stops the thread.
  void stop();

  std::uint64_t published() const { return published_.load(std::memory_order_relaxed); }
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Impl;
  explicit KvEventPublisher(KvEventPublisherOptions options);
  void run();

  KvEventPublisherOptions options_;
  std::unique_ptr<Impl> impl_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<double, std::vector<KvEvent>>> queue_;
  bool stopping_ = false;
  std::atomic<std::uint64_t> published_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace disagg::sim_worker
