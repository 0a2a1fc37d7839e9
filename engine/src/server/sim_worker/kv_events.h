// kv_events.h — KV-cache events in vLLM's wire format, published over ZMQ.
//
// Wire format (vllm/distributed/kv_events.py, ZmqEventPublisher):
//   PUB multipart message: [topic, 8-byte big-endian sequence number (from 0), msgpack EventBatch]
//   EventBatch  = (ts: float seconds since the epoch, events: list, data_parallel_rank: int)
//   BlockStored = ("BlockStored", block_hashes, parent_block_hash|nil, token_ids, block_size,
//                  lora_id|nil, medium, lora_name|nil)
//   BlockRemoved = ("BlockRemoved", block_hashes, medium)
//   AllBlocksCleared = ("AllBlocksCleared",)
// Events are msgspec tagged structs. vLLM releases that declare them array_like (the form above;
// the tag is the first element) are the default; `map` encoding writes the other msgspec form,
// {"type": "BlockStored", "block_hashes": ..., ...} and {"ts", "events", "data_parallel_rank"},
// which newer vLLM versions emit. Fields with defaults (extra_keys, group_idx, ...) are omitted,
// as msgspec's omit_defaults does. Block hashes are unsigned 64-bit integers (the engine's
// chained hashes, disagg/block_hash.h), medium is "GPU".
// Replay (optional ROUTER socket): a request [identity, "", 8-byte big-endian start seq] is
// answered by [identity, "", seq, payload] for every buffered batch with seq >= start, then
// [identity, "", -1 as 8 bytes, ""].
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

namespace disagg::sim_worker {

enum class KvEventKind : std::uint8_t { block_stored, block_removed, all_blocks_cleared };

struct KvEvent {
  KvEventKind kind = KvEventKind::block_stored;
  std::vector<BlockHash> block_hashes;
  /// block_stored: hash of the block before the first one; nullopt for a sequence's first block.
  std::optional<BlockHash> parent_block_hash;
  /// block_stored: the tokens of all the blocks, block after block.
  std::vector<TokenId> token_ids;
  std::int32_t block_size = 0;
};

enum class KvEventEncoding : std::uint8_t { array_like, map_like };

/// msgpack bytes of EventBatch(ts, events, data_parallel_rank).
std::string encode_event_batch(double ts, std::span<const KvEvent> events,
                               std::int32_t data_parallel_rank, KvEventEncoding encoding);

/// 8-byte big-endian encoding of a sequence number (as vLLM's int.to_bytes(8, "big")).
std::string encode_seq(std::int64_t seq);

struct KvEventPublisherOptions {
  /// PUB endpoint, e.g. "tcp://127.0.0.1:5557" (bound).
  std::string endpoint;
  /// ROUTER endpoint for replay; empty = none.
  std::string replay_endpoint;
  std::string topic;
  KvEventEncoding encoding = KvEventEncoding::array_like;
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
  static Expected<std::unique_ptr<KvEventPublisher>, std::string> create(
      KvEventPublisherOptions options);
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
