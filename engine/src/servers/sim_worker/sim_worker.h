// sim_worker.h — `disagg-engine sim-worker`: a vLLM OpenAI-server stand-in on the real clock.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (stream and non-stream),
// GET /v1/models, GET /health (503 while draining), GET /metrics (vLLM metric names).
// Prompts go through the fake tokenizer (fake_tokenizer.h); generated text is filler.
// P/D (vLLM NixlConnector protocol): `kv_transfer_params.do_remote_decode: true` on a prefill
// worker runs prefill only and answers with kv_transfer_params {do_remote_prefill: true,
// do_remote_decode: false, remote_block_ids, remote_engine_id, remote_request_id, remote_host,
// remote_port, tp_size}; `do_remote_prefill: true` with remote_block_ids on a decode worker
// charges the KV transfer (cost model) instead of the prefill. A decode request whose params
// lack remote_block_ids is prefilled locally, as vLLM does. --kv-load-fail-rate makes a share of
// those pulls fail, handled per --kv-load-failure-policy (KvLoadFailurePolicy).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "disagg/cost_model.h"
#include "disagg/expected.h"
#include "disagg/scheduler.h"
#include "lib/kv_events/kv_event_publisher.h"

namespace disagg::sim_worker {

/// What a decode worker does when a remote KV pull fails, as vLLM's `kv_load_failure_policy`
/// (vllm/config/kv_transfer.py, KVTransferConfig): `recompute` prefills the prompt locally and the
/// client sees a slower answer; `fail` finishes the request with finish_reason "error", which vLLM's
/// OpenAI server answers with HTTP 500 "Internal server error" (non-streaming) or, on a stream, an
/// error event in a 200 response (its `_raise_if_error`).
enum class KvLoadFailurePolicy : std::uint8_t { recompute, fail };

struct SimWorkerConfig {
  std::string config_path;         ///< --config FILE.json (model/hardware/parallel/efficiency)
  std::string host = "127.0.0.1";  ///< --host
  std::uint16_t port = 8000;       ///< --port (0 = ephemeral; the bound port is printed)
  std::string model_name;          ///< --model-name (default: model.name of the config, else "sim-model")
  std::string tokenizer_dir;  ///< --tokenizer DIR: the served model's tokenizer files (default: the made-up tokenizer)
  WorkerRole role = WorkerRole::aggregated;    ///< --role aggregated|prefill|decode
  std::int32_t kv_blocks = 8192;               ///< --kv-blocks
  std::int32_t block_size = 16;                ///< --block-size
  std::int32_t max_num_seqs = 256;             ///< --max-num-seqs
  std::int32_t max_num_batched_tokens = 8192;  ///< --max-num-batched-tokens
  std::int32_t max_waiting = 1024;             ///< --max-waiting: pending requests beyond running ones; 429 beyond
  std::int32_t max_model_len = 0;              ///< --max-model-len (0 = kv-blocks x block-size)
  std::int32_t default_max_tokens = 128;       ///< --default-max-tokens for chat requests without max_tokens
  bool prefix_caching = true;                  ///< --no-prefix-caching turns it off
  double speedup = 1.0;                        ///< --speedup: model time / wall time
  std::uint16_t kv_events_port = 0;            ///< --kv-events-port (0 = no KV events)
  std::uint16_t kv_events_replay_port = 0;     ///< --kv-events-replay-port (0 = no replay socket)
  /// --kv-events-buffer-steps: batches the replay socket keeps (vLLM's buffer_steps, 10,000).
  std::int64_t kv_events_buffer_steps = 10'000;
  /// --data-parallel-rank N: the global data-parallel rank this worker stands in for (vLLM
  /// `--data-parallel-rank`). Its KV-event batches carry it as `data_parallel_rank`, and, as vLLM's
  /// ZmqEventPublisher does (vllm/distributed/kv_events.py, offset_endpoint_port), the publisher
  /// and replay sockets bind kv_events_port + N and kv_events_replay_port + N.
  std::int32_t data_parallel_rank = 0;
  std::string kv_events_topic;  ///< --kv-events-topic (default kv@<host>:<port>@<model>)
  /// --vllm-version V: the vLLM release whose KV-event encoding and replay framing it imitates
  /// (lib/kv_events/vllm_release.h); default the newest row there.
  kv_wire::VllmRelease vllm_release = kv_wire::kNewestVllmRelease;
  /// --lora-adapter NAME (repeatable): LoRA adapters served besides the base model, as vLLM's
  /// --lora-modules; a request naming one is a LoRA request (lora_id = its position + 1).
  std::vector<std::string> lora_adapters;
  std::uint64_t kv_events_hash_salt = 0;  ///< --kv-events-hash-salt N: published hashes XOR N (vLLM's own hashing)
  double fail_rate = 0;                   ///< --fail-rate: share of requests answered 500 at once
  /// --kv-load-fail-rate: share of remote-prefill (do_remote_prefill) requests whose KV pull fails,
  /// handled as --kv-load-failure-policy says (vLLM's kv_transfer_config.kv_load_failure_policy).
  double kv_load_fail_rate = 0;
  KvLoadFailurePolicy kv_load_failure_policy = KvLoadFailurePolicy::fail;  ///< --kv-load-failure-policy
  std::int32_t stall_ms = 0;                   ///< --stall-ms: delay before each request is queued
  std::int64_t crash_after = 0;                ///< --crash-after N: exit(3) after N tokens were sent (0 = never)
  std::uint64_t seed = 1;                      ///< --seed of the failure injection
  std::size_t max_body_bytes = 8u << 20;       ///< --max-body-bytes (413 beyond)
  std::size_t max_connections = 10'000;        ///< --max-connections (idle ones reclaimed; 503 when all busy)
  std::int64_t keepalive_timeout_ms = 60'000;  ///< --keepalive-timeout-ms: idle wait for the next request
  std::int64_t header_timeout_ms = 10'000;     ///< --header-timeout-ms: a head's limit from its first byte (408)
  std::int64_t body_timeout_ms = 30'000;       ///< --body-timeout-ms: longest wait between body reads (408)
  int http_threads = 2;                        ///< --http-threads
  std::string engine_id;                       ///< --engine-id (default sim-<host>-<port>)
  std::string advertise_host;                  ///< --advertise-host for kv_transfer_params (default --host)
  std::uint16_t side_channel_port = 5600;      ///< --side-channel-port reported as remote_port
  std::int32_t drain_timeout_ms = 30000;       ///< --drain-timeout-ms
};

/// Parses the flags (argv[0] = role name). Error: a message naming the flag, value and fix.
/// `help` is set when --help was given.
Expected<SimWorkerConfig, std::string> parse_sim_worker_args(int argc, char** argv, bool* help);

/// The usage text.
const char* sim_worker_usage();

/// The port the KV-event publisher binds: kv_events_port + data_parallel_rank (vLLM's
/// offset_endpoint_port); 0 when KV events are off. parse_sim_worker_args keeps it <= 65535.
inline std::uint16_t kv_events_bound_port(const SimWorkerConfig& c) {
  return c.kv_events_port == 0 ? 0 : static_cast<std::uint16_t>(c.kv_events_port + c.data_parallel_rank);
}

/// Reads the cost model from config.config_path and fills the model name default.
Expected<CostModel, std::string> load_cost_model(SimWorkerConfig& config);

class SimWorker {
 public:
  static Expected<std::unique_ptr<SimWorker>, std::string> create(SimWorkerConfig config, const CostModel& cost);
  ~SimWorker();
  /// The bound HTTP port.
  std::uint16_t port() const;
  /// Serves until drain() completes. Blocks the calling thread (plus http_threads - 1 others).
  void run();
  /// Starts a graceful drain (thread-safe).
  void drain();

 private:
  struct Impl;
  explicit SimWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace disagg::sim_worker
