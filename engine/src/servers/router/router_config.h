// router_config.h — configuration of `disagg-engine router`: the JSON file the constructs write
// (engine/schema/engine-config.schema.json: `router`, `policy`, `pools`, `endpoints`) and flags,
// which override the file. See router_usage() for the flags.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "disagg/expected.h"
#include "disagg/routing.h"

namespace disagg::router {

/// One endpoint known in advance (config `endpoints[]` or --endpoint).
struct EndpointSpec {
  std::string pool;
  EndpointRole role = EndpointRole::aggregated;
  std::string host;
  std::uint16_t port = 0;
  /// ZMQ endpoint of its KV events ("tcp://host:port"); empty = none.
  std::string kv_events;
  /// ZMQ ROUTER endpoint for replays; empty = none (gaps then clear the endpoint's entries).
  std::string kv_replay;
  /// Global data-parallel rank of the engine behind it (config `endpoints[].dataParallelRank`),
  /// -1 when not known in advance (DNS endpoints: learned from the `data_parallel_rank` of its KV
  /// event batches). With a rank given, batches naming another rank describe another engine's cache
  /// and are dropped (EndpointTable::on_kv_batch).
  std::int32_t data_parallel_rank = -1;
};

/// Most HTTP ports of one DNS pool: one per local data-parallel rank of a pod, and every
/// address x port is an endpoint, so more could never fit the router's 64 endpoint slots.
inline constexpr std::size_t kMaxDnsPoolPorts = 64;

/// A pool whose endpoints are the A/AAAA records of a (headless Service) DNS name, each on every
/// port of `ports`: one endpoint per address x port, labelled host:port.
struct DnsPoolSpec {
  std::string pool;
  EndpointRole role = EndpointRole::aggregated;
  std::string host;
  /// HTTP ports of every address; `ports[j]` is the API server of the pod's local data-parallel
  /// rank j (vLLM "external load balancing": one `vllm serve` per rank). One entry for a pod with one
  /// server. Non-empty, distinct, at most kMaxDnsPoolPorts (apply_config_json checks).
  std::vector<std::uint16_t> ports;
  double refresh_seconds = 5;
  /// KV events port of `ports[0]` on every resolved address; 0 = none. See dns_kv_events_port().
  std::uint16_t kv_events_port = 0;
  /// KV-event replay (ZMQ ROUTER, vLLM's KVEventsConfig.replay_endpoint) port of `ports[0]` on every
  /// resolved address, offset by the port index as the events port is; 0 = none.
  std::uint16_t kv_replay_port = 0;
  std::string topic_prefix = "kv@";
};

/// The KV-events (ZMQ PUB) port of the endpoint on `pool.ports[port_index]`: kv_events_port +
/// port_index, 0 when the pool has no KV events. vLLM's ZmqEventPublisher binds the configured
/// endpoint's port plus the engine's data-parallel rank (vllm/distributed/kv_events.py,
/// `offset_endpoint_port`); the rank is the global one (`parallel_config.data_parallel_index`,
/// vllm/v1/core/sched/scheduler.py), so a pod whose first local rank is not rank 0 must configure
/// its endpoint port as base - first rank (src/k8s/expert-parallel-pool.ts does) to publish local
/// rank j on base + j. Precondition: port_index < pool.ports.size() and the sum fits 16 bits
/// (apply_config_json checks).
std::uint16_t dns_kv_events_port(const DnsPoolSpec& pool, std::size_t port_index);

/// The optional `autoscaling` block: the SLO and the capacity model the router's per-pool scaling
/// signals are computed against (scaling_signals.h; docs in README.md "Scaling signals"). Absent, the
/// signals are still exported, against these defaults.
struct AutoscalingSignalsConfig {
  /// The block was given. Then a request that finds no ready endpoint of its pool is also held (up
  /// to queue_timeout_ms) instead of refused at once, so that a pool scaled to zero can come back.
  bool configured = false;
  double ttft_slo_seconds = 2.0;  ///< slo.ttftSeconds
  double tpot_slo_seconds = 0.1;  ///< slo.tpotSeconds
  /// prefill.tokensPerSecond: prompt tokens one prefill endpoint processes per second.
  double prefill_tokens_per_second = 20'000;
  double prefill_fixed_seconds = 0.02;               ///< prefill.fixedSeconds: latency on top (>= 0)
  double decode_step_seconds_base = 0.012;           ///< decode.stepSecondsBase (>= 0)
  double decode_step_seconds_per_sequence = 0.0002;  ///< decode.stepSecondsPerSequence
  /// decode.maxSequences: sequences one decode endpoint holds at once (its KV capacity at the
  /// planned context, or vLLM's --max-num-seqs if lower); 0 = unknown, no sequence-slot term.
  double decode_max_sequences = 0;
};

struct RouterConfig {
  std::string config_path;
  std::string host = "0.0.0.0";
  std::uint16_t port = 8000;
  /// Model names served; requests naming another get 404. The first one is /v1/models' first.
  std::vector<std::string> served_models;
  std::int32_t block_size = 16;
  /// --lora-adapter / router.loraAdapters: LoRA adapters the workers serve besides the model (vLLM's
  /// --lora-modules names). A request naming one is accepted and its blocks are keyed under that
  /// adapter (disagg/block_hash.h chain_root), as vLLM keys them; requests naming another get 404.
  std::vector<std::string> lora_adapters;
  /// The adapters' paths, one per lora_adapters entry (NAME=PATH), empty where not given: the `root`
  /// of their /v1/models entries, as vLLM's.
  std::vector<std::string> lora_paths;
  /// --max-model-len / router.maxModelLen: the deployment's context length (vLLM --max-model-len),
  /// answered as /tokenize's max_model_len. 0: the tokenizer's model_max_length (tokenizer_config.json,
  /// when it is a real length), else null there (and a warning at start).
  std::int64_t max_model_len = 0;
  /// --tokenizer / router.tokenizer: a folder with the served model's tokenizer.json and
  /// tokenizer_config.json. Prompts then get the real token ids and chat template vLLM uses
  /// (precise prefix routing), and the router serves /tokenize and /detokenize. Empty: the
  /// made-up tokenizer of the sim-worker.
  std::string tokenizer_dir;
  /// --api-key-file / router.apiKeys.file: the file of API keys clients must send as
  /// `Authorization: Bearer <key>` (api_keys.h); empty: no keys asked for. Read at start (an error
  /// when it holds none) and again whenever it changes.
  std::string api_key_file;
  /// router.kvTransfer.backend: the pools' NIXL backend ("LIBFABRIC" or "UCX"), exported as
  /// disagg_router_kv_transport_info; empty: not configured.
  std::string kv_transfer_backend;
  /// router.kvTransfer.bytesPerToken: KV bytes of one token moved from prefill to decode (all layers,
  /// every rank's copy), for disagg_router_kv_transfer_bytes_total; 0: unknown, not exported.
  double kv_bytes_per_token = 0;

  /// Engine policy name (routing.h), after mapping the ConfigMap's names.
  std::string policy = "llm-d";
  PolicyOptions options;
  /// Whether maxEndpoints was set (config or flag). When it was not and every endpoint is static
  /// (no DNS pools), the approximate history is sized for the static endpoints instead of 16.
  bool max_endpoints_given = false;
  /// Prefix source: true = KV-event index, false = approximate history; unset = index when any
  /// endpoint publishes KV events.
  std::optional<bool> precise_prefix;
  /// prefixSource "auto": index when tokenizer_dir loads, else history (Router::create() decides
  /// and sets precise_prefix; a tokenizer that fails to load is then logged, not fatal).
  bool prefix_auto = false;
  /// --log-decisions / router.logDecisions: one log line per routing decision (the explanation a
  /// request gets with X-Disagg-Explain).
  bool log_decisions = false;
  PdDeciderConfig decider;

  std::vector<EndpointSpec> endpoints;
  std::vector<DnsPoolSpec> dns_pools;

  /// Header whose value pins a session to an endpoint (e.g. "x-session-id"); empty = none.
  std::string session_header;

  std::int64_t request_timeout_ms = 600'000;
  std::int64_t connect_timeout_ms = 2'000;
  /// Upstream silence limit while a response streams (not the client side: keepalive_timeout_ms).
  std::int64_t idle_timeout_ms = 60'000;
  /// Idle keep-alive connections kept per upstream endpoint; 0 = a new connection per request.
  std::int32_t upstream_keepalive = 64;
  /// Longest idle time of a kept connection. Below uvicorn's (vLLM's server) 5 s keep-alive
  /// default, so the router normally drops a connection before the worker closes it.
  std::int64_t upstream_keepalive_ms = 4'000;
  std::int32_t max_retries = 2;
  std::int32_t max_inflight = 4096;
  std::int32_t max_queue = 1024;
  std::int64_t queue_timeout_ms = 10'000;
  std::int64_t health_interval_ms = 1'000;
  std::int64_t health_timeout_ms = 1'000;
  std::int64_t scrape_interval_ms = 500;
  std::int32_t eject_after = 3;
  std::int64_t eject_ms = 5'000;
  std::size_t max_body_bytes = 8u << 20;
  /// Client connections (http::ServerOptions): at most this many open; the longest-idle ones are
  /// reclaimed at the limit, 503 only when all are busy.
  std::size_t max_connections = 10'000;
  /// Longest wait of a client connection for a request's first byte (nginx keepalive_timeout).
  std::int64_t keepalive_timeout_ms = 60'000;
  /// A request head's limit from its first byte; then 408.
  std::int64_t header_timeout_ms = 10'000;
  /// Longest wait between two reads of a request body; then 408.
  std::int64_t body_timeout_ms = 30'000;
  std::int32_t threads = 2;
  /// --pin-threads on: HTTP thread i runs only on the i-th CPU the process may use (modulo their
  /// number). See thread_pinning.h for when it pays.
  bool pin_threads = false;
  std::int64_t index_entries = 1 << 20;
  std::int64_t index_entries_per_endpoint = 0;
  std::int64_t replay_timeout_ms = 1'000;
  /// --peer-port / router.peerPort: the port of the peer-snapshot listener (peer_link.h), apart from
  /// the API port; 0 = none (no snapshot served).
  std::uint16_t peer_port = 0;
  /// --peers HOST[:PORT] / router.peers.{host, port}: the DNS name whose addresses are the peer
  /// routers (a headless Service), and their peer port (default peer_port); empty = no peers: no
  /// snapshot is fetched at start.
  std::string peers_host;
  std::uint16_t peers_port = 0;
  /// --peer-timeout-ms / router.peers.timeoutMs: limit of one snapshot exchange (each way).
  std::int64_t peer_timeout_ms = 2'000;
  /// --peer-snapshot-max-blocks / router.peers.maxBlocks: blocks in a snapshot served or loaded.
  std::int64_t peer_snapshot_max_blocks = 2'000'000;
  std::int64_t drain_timeout_ms = 30'000;
  AutoscalingSignalsConfig autoscaling;
};

/// Applies the JSON configuration `doc` onto `config`. Unknown top-level sections (the cost
/// model's, the simulator's) are ignored. Error: a message naming the field, value and fix.
Expected<void, std::string> apply_config_json(const nlohmann::json& doc, RouterConfig& config);

/// Parses flags (argv[0] = the role name); reads --config first, then applies the other flags.
/// `help` is set for --help. Error: a message naming the flag or field, the value and the fix.
Expected<RouterConfig, std::string> parse_router_args(int argc, char** argv, bool* help);

/// Parses "http://host[:port][/...]" into host and port. Error: the fix.
Expected<std::pair<std::string, std::uint16_t>, std::string> parse_http_url(const std::string& url);

/// The usage text (flags and config keys).
const char* router_usage();

}  // namespace disagg::router
