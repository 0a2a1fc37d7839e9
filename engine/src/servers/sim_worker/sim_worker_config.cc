// Flags and the configuration file of `disagg-engine sim-worker`.
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "disagg/cost_model_config.h"
#include "lib/config/nlohmann_config_source.h"
#include "sim_worker.h"

namespace disagg::sim_worker {

namespace {

constexpr const char* kUsage =
    "usage: disagg-engine sim-worker --config FILE.json [flags]\n"
    "A vLLM OpenAI-server stand-in driven by the engine's scheduler and cost model.\n"
    "  --config FILE.json           engine configuration (model, hardware, parallel, efficiency;\n"
    "                               engine/schema/engine-config.schema.json)   [required]\n"
    "  --host ADDR                  listen address (127.0.0.1)\n"
    "  --port N                     HTTP port (8000; 0 = any free port, printed at start)\n"
    "  --model-name NAME            served model name (model.name of the config, else sim-model)\n"
    "  --tokenizer DIR              the model's tokenizer.json and tokenizer_config.json: prompts get its\n"
    "                               real token ids and chat template, as in vLLM (default: a made-up tokenizer)\n"
    "  --role R                     aggregated | prefill | decode (aggregated)\n"
    "  --kv-blocks N                KV blocks of the replica (8192)\n"
    "  --block-size N               tokens per KV block (16)\n"
    "  --max-num-seqs N             running sequences at most (256)\n"
    "  --max-num-batched-tokens N   tokens per step (8192)\n"
    "  --max-waiting N              queued requests beyond the running ones; then 429 (1024)\n"
    "  --max-model-len N            prompt + max_tokens limit (kv-blocks x block-size)\n"
    "  --default-max-tokens N       output tokens when a chat request sets none (128)\n"
    "  --no-prefix-caching          compute every prompt in full\n"
    "  --speedup X                  model seconds per wall second (1)\n"
    "  --kv-events-port N           ZMQ PUB port for vLLM KV events (0 = off)\n"
    "  --kv-events-replay-port N    ZMQ ROUTER port for replay requests (0 = off)\n"
    "  --kv-events-buffer-steps N   batches kept for replay, the oldest dropped first (vLLM's\n"
    "                               KVEventsConfig.buffer_steps, 10000)\n"
    "  --data-parallel-rank N       the data-parallel rank it stands in for, as vLLM's: KV-event batches\n"
    "                               carry it, and the KV-event (and replay) ports are offset by it (0)\n"
    "  --kv-events-topic T          topic (kv@<host>:<port>@<model>)\n"
    "  --vllm-version V             the vLLM release whose KV-event encoding and replay framing it\n"
    "                               imitates: 0.19 (array-like), 0.24 (map-like events), 0.26 (replay\n"
    "                               answers carry the topic); a later release takes the newest (0.26)\n"
    "  --lora-adapter NAME          a LoRA adapter served besides the model (repeatable), as vLLM's\n"
    "                               --lora-modules: its requests' blocks are keyed apart (none)\n"
    "  --kv-events-hash-salt N      publish block hashes XOR N, as vLLM hashes with its own function\n"
    "                               and seed (the router keys blocks by token ids) (0)\n"
    "  --fail-rate P                answer this share of requests with 500 at once (0)\n"
    "  --kv-load-fail-rate P        fail this share of remote KV pulls (decode role) (0)\n"
    "  --kv-load-failure-policy X   what a failed pull does, as vLLM's kv_load_failure_policy:\n"
    "                               fail (500, or an error event on a stream) | recompute (prefill\n"
    "                               locally) (fail)\n"
    "  --stall-ms N                 delay every request by N ms before queueing it (0)\n"
    "  --crash-after N              exit with code 3 once N tokens were sent (0 = never)\n"
    "  --seed N                     seed of --fail-rate and --kv-load-fail-rate (1)\n"
    "  --max-body-bytes N           request body limit; 413 beyond (8388608)\n"
    "  --max-connections N          connections open at once; at the limit the longest-idle\n"
    "                               keep-alive ones are closed, 503 only when all are busy (10000)\n"
    "  --keepalive-timeout-ms N     a connection's longest wait for its next request (60000)\n"
    "  --header-timeout-ms N        a request head's limit from its first byte; then 408 (10000)\n"
    "  --body-timeout-ms N          longest wait between two reads of a request body; then 408 (30000)\n"
    "  --http-threads N             threads serving HTTP (2)\n"
    "  --engine-id ID               remote_engine_id in kv_transfer_params (sim-<host>-<port>)\n"
    "  --advertise-host H           remote_host in kv_transfer_params (--host)\n"
    "  --side-channel-port N        remote_port in kv_transfer_params (5600)\n"
    "  --drain-timeout-ms N         graceful drain limit after SIGTERM (30000)\n";

template <class T>
bool parse_num(std::string_view text, T* out) {
  if constexpr (std::is_floating_point_v<T>) {
    // from_chars for double is available in g++ 12.
    auto res = std::from_chars(text.data(), text.data() + text.size(), *out);
    return res.ec == std::errc() && res.ptr == text.data() + text.size();
  } else {
    auto res = std::from_chars(text.data(), text.data() + text.size(), *out);
    return res.ec == std::errc() && res.ptr == text.data() + text.size();
  }
}

}  // namespace

const char* sim_worker_usage() {
  return kUsage;
}

Expected<SimWorkerConfig, std::string> parse_sim_worker_args(int argc, char** argv, bool* help) {
  SimWorkerConfig c;
  *help = false;
  auto bad = [](std::string_view flag, std::string_view value, std::string_view fix) {
    return unexpected("'" + std::string(flag) + "' (" + std::string(value) + ") " + std::string(fix));
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      *help = true;
      return c;
    }
    if (flag == "--no-prefix-caching") {
      c.prefix_caching = false;
      continue;
    }
    if (i + 1 >= argc) return unexpected("'" + std::string(flag) + "' needs a value; see --help");
    const std::string_view v = argv[++i];
    auto positive = [&](auto* out) { return parse_num(v, out) && *out >= 1; };
    auto non_negative = [&](auto* out) { return parse_num(v, out) && *out >= 0; };
    if (flag == "--config") {
      c.config_path = v;
    } else if (flag == "--host") {
      c.host = v;
    } else if (flag == "--port") {
      if (!parse_num(v, &c.port)) return bad(flag, v, "must be a port number 0..65535");
    } else if (flag == "--model-name") {
      c.model_name = v;
    } else if (flag == "--tokenizer") {
      c.tokenizer_dir = v;
    } else if (flag == "--role") {
      if (v == "aggregated") c.role = WorkerRole::aggregated;
      else if (v == "prefill") c.role = WorkerRole::prefill;
      else if (v == "decode") c.role = WorkerRole::decode;
      else return bad(flag, v, "must be aggregated, prefill or decode");
    } else if (flag == "--kv-blocks") {
      if (!positive(&c.kv_blocks)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--block-size") {
      if (!positive(&c.block_size)) return bad(flag, v, "must be a whole number >= 1, e.g. 16");
    } else if (flag == "--max-num-seqs") {
      if (!positive(&c.max_num_seqs)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--max-num-batched-tokens") {
      if (!positive(&c.max_num_batched_tokens)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--max-waiting") {
      if (!positive(&c.max_waiting)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--max-model-len") {
      if (!positive(&c.max_model_len)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--default-max-tokens") {
      if (!positive(&c.default_max_tokens)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--speedup") {
      if (!parse_num(v, &c.speedup) || !(c.speedup > 0)) return bad(flag, v, "must be > 0, e.g. 100");
    } else if (flag == "--kv-events-port") {
      if (!parse_num(v, &c.kv_events_port)) return bad(flag, v, "must be a port number (0 = off)");
    } else if (flag == "--kv-events-replay-port") {
      if (!parse_num(v, &c.kv_events_replay_port)) return bad(flag, v, "must be a port number (0 = off)");
    } else if (flag == "--kv-events-buffer-steps") {
      if (!parse_num(v, &c.kv_events_buffer_steps) || c.kv_events_buffer_steps < 1 ||
          c.kv_events_buffer_steps > 10'000'000) {
        return bad(flag, v, "must be a whole number in 1..10000000 (vLLM's buffer_steps, 10000)");
      }
    } else if (flag == "--data-parallel-rank") {
      if (!parse_num(v, &c.data_parallel_rank) || c.data_parallel_rank < 0 || c.data_parallel_rank > 65535) {
        return bad(flag, v, "must be a whole number in 0..65535");
      }
    } else if (flag == "--kv-events-topic") {
      c.kv_events_topic = v;
    } else if (flag == "--kv-events-hash-salt") {
      if (!parse_num(v, &c.kv_events_hash_salt)) return bad(flag, v, "must be a whole number >= 0");
    } else if (flag == "--vllm-version") {
      const auto release = kv_wire::vllm_release(v);
      if (!release) {
        return bad(flag, v, "must be a vLLM release MAJOR.MINOR[.PATCH] from 0.19 on, e.g. 0.19.1 or 0.26");
      }
      c.vllm_release = *release;
    } else if (flag == "--lora-adapter") {
      if (v.empty()) return bad(flag, v, "must name the adapter, e.g. sql-lora");
      c.lora_adapters.emplace_back(v);
    } else if (flag == "--fail-rate") {
      if (!parse_num(v, &c.fail_rate) || c.fail_rate < 0 || c.fail_rate > 1) {
        return bad(flag, v, "must be in [0, 1], e.g. 0.1");
      }
    } else if (flag == "--kv-load-fail-rate") {
      if (!parse_num(v, &c.kv_load_fail_rate) || c.kv_load_fail_rate < 0 || c.kv_load_fail_rate > 1) {
        return bad(flag, v, "must be in [0, 1], e.g. 0.1");
      }
    } else if (flag == "--kv-load-failure-policy") {
      if (v == "fail") c.kv_load_failure_policy = KvLoadFailurePolicy::fail;
      else if (v == "recompute") c.kv_load_failure_policy = KvLoadFailurePolicy::recompute;
      else return bad(flag, v, "must be fail or recompute");
    } else if (flag == "--stall-ms") {
      if (!non_negative(&c.stall_ms)) return bad(flag, v, "must be a whole number >= 0");
    } else if (flag == "--crash-after") {
      if (!non_negative(&c.crash_after)) return bad(flag, v, "must be a whole number >= 0 (0 = never)");
    } else if (flag == "--seed") {
      if (!parse_num(v, &c.seed)) return bad(flag, v, "must be a whole number >= 0");
    } else if (flag == "--max-body-bytes") {
      if (!positive(&c.max_body_bytes)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--max-connections") {
      if (!positive(&c.max_connections)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--keepalive-timeout-ms") {
      if (!positive(&c.keepalive_timeout_ms)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--header-timeout-ms") {
      if (!positive(&c.header_timeout_ms)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--body-timeout-ms") {
      if (!positive(&c.body_timeout_ms)) return bad(flag, v, "must be a whole number >= 1");
    } else if (flag == "--http-threads") {
      if (!positive(&c.http_threads) || c.http_threads > 256) return bad(flag, v, "must be in 1..256");
    } else if (flag == "--engine-id") {
      c.engine_id = v;
    } else if (flag == "--advertise-host") {
      c.advertise_host = v;
    } else if (flag == "--side-channel-port") {
      if (!parse_num(v, &c.side_channel_port)) return bad(flag, v, "must be a port number");
    } else if (flag == "--drain-timeout-ms") {
      if (!non_negative(&c.drain_timeout_ms)) return bad(flag, v, "must be a whole number >= 0");
    } else {
      return unexpected("unknown flag '" + std::string(flag) + "'; see --help");
    }
  }
  if (c.config_path.empty()) {
    return unexpected(
        std::string("'--config' is required: pass the engine configuration, e.g. "
                    "--config engine/examples/llama-3.3-70b-p5en.json"));
  }
  const std::int64_t capacity = static_cast<std::int64_t>(c.kv_blocks) * c.block_size;
  if (c.max_model_len == 0) {
    c.max_model_len =
        static_cast<std::int32_t>(std::min<std::int64_t>(capacity, std::numeric_limits<std::int32_t>::max()));
  } else if (c.max_model_len > capacity) {
    return unexpected("'--max-model-len' (" + std::to_string(c.max_model_len) + ") exceeds the KV capacity of " +
                      std::to_string(capacity) + " tokens (--kv-blocks x --block-size); lower it or add blocks");
  }
  // vLLM binds its KV-event sockets at the configured port plus the data-parallel rank.
  for (const auto& [flag, port] : {std::pair{"--kv-events-port", c.kv_events_port},
                                   std::pair{"--kv-events-replay-port", c.kv_events_replay_port}}) {
    if (port != 0 && port + c.data_parallel_rank > 65535) {
      return unexpected("'" + std::string(flag) + "' (" + std::to_string(port) + ") plus '--data-parallel-rank' (" +
                        std::to_string(c.data_parallel_rank) +
                        ") exceeds 65535; use a port <= " + std::to_string(65535 - c.data_parallel_rank));
    }
  }
  if (c.advertise_host.empty()) c.advertise_host = c.host;
  return c;
}

Expected<CostModel, std::string> load_cost_model(SimWorkerConfig& config) {
  std::ifstream in(config.config_path);
  if (!in) { return unexpected("cannot read '--config' (" + config.config_path + "): " + std::strerror(errno)); }
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return unexpected("'--config' (" + config.config_path + ") is not a JSON object");
  }
  auto cost = read_cost_model(NlohmannConfigSource(doc));
  if (!cost) return unexpected(config.config_path + ": " + cost.error().message());
  if (config.model_name.empty()) {
    const auto m = doc.find("model");
    if (m != doc.end() && m->is_object() && m->contains("name") && (*m)["name"].is_string()) {
      config.model_name = (*m)["name"].get<std::string>();
    } else {
      config.model_name = "sim-model";
    }
  }
  return *cost;
}

}  // namespace disagg::sim_worker
