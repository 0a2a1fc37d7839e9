// router_config.cc — the router's flags (parse_router_args, router_usage) and the small public
// helpers (ports of DNS pools, policy names, http URLs). The JSON file is read in
// router_config_json.cc.
#include "router_config.h"
#include "router_config_detail.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace disagg::router {

namespace {

using json = nlohmann::json;
using config_detail::add_lora_adapter;
using config_detail::role_of;
using config_detail::set_option;

constexpr const char* kUsage =
    "usage: disagg-engine router [--config FILE.json] [flags]\n"
    "KV-aware OpenAI-compatible router in front of vLLM (or sim-worker) endpoints.\n"
    "Config keys (engine/schema/engine-config.schema.json): router.{listenPort, servedModelName,\n"
    "kvBlockSize, requestTimeoutSeconds, maxInflight, maxQueue, queueTimeoutSeconds, tokenizer, logDecisions,\n"
    "maxModelLen, loraAdapters, apiKeys{file}, kvTransfer{backend, bytesPerToken}},\n"
    "policy.{name, weights, options, prefixSource,\n"
    "disaggregation.minUncachedPromptTokens}, pools[].{name, role, discovery{type dns, host, port or\n"
    "ports (one per local data-parallel rank; KV events of ports[j] on kvEvents.port + j),\n"
    "refreshSeconds}, kvEvents{port, topicPrefix}}, endpoints[].{pool, url, kvEventsEndpoint,\n"
    "kvEventsReplayEndpoint}, router.{peerPort, peers{host, port, timeoutMs, maxBlocks}},\n"
    "pools[].kvEvents.replayPort, autoscaling.{slo{ttftSeconds, tpotSeconds}, prefill{tokensPerSecond,\n"
    "fixedSeconds}, decode{stepSecondsBase, stepSecondsPerSequence}} (the scaling signals: GET /scaling).\n"
    "Flags override the file:\n"
    "  --config FILE.json            engine configuration written by the constructs\n"
    "  --host ADDR                   listen address (0.0.0.0)\n"
    "  --port N                      HTTP port (router.listenPort, 8000; 0 = any free port)\n"
    "  --model-name NAME             served model name (router.servedModelName); repeatable\n"
    "  --policy NAME                 round-robin | least-load | llm-d | sglang | dynamo | disagg\n"
    "                                (kv-aware = llm-d, least-loaded = least-load; default llm-d)\n"
    "  --policy-option KEY=VALUE     a PolicyOptions knob, e.g. prefixWeight=3; repeatable\n"
    "  --prefix-source S             index (KV events) | history (approximate) | auto (index when the\n"
    "                                --tokenizer loads, else history, said in the log and metrics);\n"
    "                                index also counts the prompts routed in the last pendingBlocksMs\n"
    "                                (2000; --policy-option pendingBlocksMs=0: the events alone)\n"
    "  --block-size N                tokens per KV block (router.kvBlockSize, 16)\n"
    "  --min-uncached-tokens N       P/D: disaggregate when this many prompt tokens are uncached (512)\n"
    "  --prefill-saturation-tokens N P/D: a prefill endpoint with this many in-flight prompt tokens\n"
    "                                is saturated (0 = never)\n"
    "  --endpoint SPEC               role=R,url=http://H:P[,pool=NAME][,kv=tcp://H:P][,replay=tcp://H:P]\n"
    "                                R = aggregated | both | prefill | decode; repeatable\n"
    "  --dns-pool SPEC               role=R,host=NAME,port=P[,pool=NAME][,kv-port=P][,replay-port=P]\n"
    "                                [,refresh=SECONDS] (replay-port: vLLM's KV-event replay socket);\n"
    "                                ports=FIRST-LAST instead of port: one endpoint per address x port,\n"
    "                                port FIRST+j with KV events on kv-port+j; repeatable\n"
    "  --log-decisions on|off        log each routing decision: every endpoint's cached prefix blocks,\n"
    "                                cost and load, and the pick (off; a request asks for the same in its\n"
    "                                response with the header X-Disagg-Explain: 1)\n"
    "  --session-header NAME         header whose value pins a session to an endpoint (none)\n"
    "  --tokenizer DIR               the served model's tokenizer.json + tokenizer_config.json: real token\n"
    "                                ids and chat template for precise prefix routing (router.tokenizer)\n"
    "  --max-model-len N             the deployment's context length, /tokenize's max_model_len\n"
    "                                (router.maxModelLen; default the tokenizer's model_max_length)\n"
    "  --api-key-file PATH           API keys, one per line (router.apiKeys.file; a mounted Secret, re-read\n"
    "                                when it changes): /v1/*, /tokenize and /detokenize then need\n"
    "                                Authorization: Bearer <key> (401 otherwise); none by default\n"
    "  --lora-adapter NAME[=PATH]    a LoRA adapter the workers serve, as vLLM's --lora-modules (router.\n"
    "                                loraAdapters; repeatable): its requests are accepted and keyed apart,\n"
    "                                as vLLM keys them; /v1/models lists it (root: PATH)\n"
    "  --request-timeout-ms N        whole request limit (router.requestTimeoutSeconds, 600000)\n"
    "  --connect-timeout-ms N        upstream connect limit (2000)\n"
    "  --idle-timeout-ms N           upstream silence limit while streaming (60000)\n"
    "  --upstream-keepalive N        idle keep-alive connections kept per endpoint (64; 0 = a new\n"
    "                                connection per request)\n"
    "  --upstream-keepalive-ms N     longest idle time of a kept connection (4000; vLLM's uvicorn\n"
    "                                closes idle ones after 5 s)\n"
    "  --max-retries N               other endpoints tried after a connect failure or a 5xx\n"
    "                                before the first byte (2)\n"
    "  --max-inflight N              requests proxied at once (4096)\n"
    "  --max-queue N                 requests waiting for a slot; 429 beyond (1024)\n"
    "  --queue-timeout-ms N          longest wait for a slot; then 429 (10000)\n"
    "  --health-interval-ms N        active GET /health period (1000)\n"
    "  --health-timeout-ms N         its timeout (1000)\n"
    "  --scrape-interval-ms N        GET /metrics period for load (500)\n"
    "  --eject-after N               consecutive failures that eject an endpoint (3)\n"
    "  --eject-ms N                  ejection time before health checks may restore it (5000)\n"
    "  --max-body-bytes N            request body limit; 413 beyond (8388608)\n"
    "  --max-connections N           client connections open at once; at the limit the longest-idle\n"
    "                                keep-alive ones are closed, 503 only when all are busy (10000)\n"
    "  --keepalive-timeout-ms N      a client connection's longest wait for its next request (60000)\n"
    "  --header-timeout-ms N         a request head's limit from its first byte; then 408 (10000)\n"
    "  --body-timeout-ms N           longest wait between two reads of a request body; then 408 (30000)\n"
    "  --threads N                   HTTP threads (2)\n"
    "  --pin-threads on|off          run HTTP thread i on the i-th allowed CPU only; for CPUs the\n"
    "                                router does not share (off)\n"
    "  --index-entries N             KV block index capacity, entries (1048576)\n"
    "  --index-entries-per-endpoint N  per-endpoint cap (0 = none)\n"
    "  --replay-timeout-ms N         wait for a KV event replay (1000)\n"
    "  --drain-timeout-ms N          graceful drain limit after SIGTERM (30000)\n"
    "  --peer-port N                 listener of the peer snapshot (router.peerPort; 0 = none, the\n"
    "                                default): GET /snapshot, the KV index for a restarting peer router\n"
    "  --peers HOST[:PORT]           peer routers (router.peers): DNS name whose addresses are peers,\n"
    "                                port default --peer-port; at start one live peer's snapshot warms\n"
    "                                the KV index (a failing peer: a cold start and a log line)\n"
    "  --peer-timeout-ms N           one snapshot exchange's limit (router.peers.timeoutMs, 2000)\n"
    "  --peer-snapshot-max-blocks N  blocks in a snapshot served or loaded (router.peers.maxBlocks,\n"
    "                                2000000; 18 bytes each with one router key)\n";

template <class T>
bool parse_num(std::string_view text, T* out) {
  auto res = std::from_chars(text.data(), text.data() + text.size(), *out);
  return res.ec == std::errc() && res.ptr == text.data() + text.size();
}

std::vector<std::pair<std::string, std::string>> split_spec(const std::string& spec) {
  std::vector<std::pair<std::string, std::string>> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) out.emplace_back(item, "");
    else out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return out;
}

Expected<EndpointSpec, std::string> endpoint_from_flag(const std::string& spec) {
  EndpointSpec e;
  std::string url;
  bool has_role = false;
  for (const auto& [k, v] : split_spec(spec)) {
    if (k == "role") {
      auto r = role_of("--endpoint role", v);
      if (!r) return unexpected(r.error());
      e.role = *r;
      has_role = true;
    } else if (k == "url") {
      url = v;
    } else if (k == "pool") {
      e.pool = v;
    } else if (k == "kv") {
      e.kv_events = v;
    } else if (k == "replay") {
      e.kv_replay = v;
    } else {
      return unexpected("'--endpoint' (" + spec + ") has an unknown key '" + k +
                        "'; use role=R,url=http://H:P[,pool=NAME][,kv=tcp://H:P][,replay=tcp://H:P]");
    }
  }
  if (url.empty()) {
    return unexpected("'--endpoint' (" + spec +
                      ") needs url=http://HOST:PORT, e.g. role=decode,url=http://127.0.0.1:8001");
  }
  auto hp = parse_http_url(url);
  if (!hp) return unexpected("'--endpoint' url (" + url + "): " + hp.error());
  e.host = hp->first;
  e.port = hp->second;
  if (!has_role) e.role = EndpointRole::aggregated;
  if (e.pool.empty()) e.pool = std::string(to_string(e.role));
  for (const std::string* z : {&e.kv_events, &e.kv_replay}) {
    if (!z->empty() && z->rfind("tcp://", 0) != 0) {
      return unexpected("'--endpoint' (" + spec + "): ZMQ endpoints must look like tcp://HOST:PORT, got " + *z);
    }
  }
  return e;
}

Expected<DnsPoolSpec, std::string> dns_pool_from_flag(const std::string& spec) {
  DnsPoolSpec p;
  for (const auto& [k, v] : split_spec(spec)) {
    std::int64_t n = 0;
    if (k == "role") {
      auto r = role_of("--dns-pool role", v);
      if (!r) return unexpected(r.error());
      p.role = *r;
    } else if (k == "host") {
      p.host = v;
    } else if (k == "pool") {
      p.pool = v;
    } else if (k == "port" || k == "kv-port") {
      if (!parse_num(v, &n) || n < (k == "port" ? 1 : 0) || n > 65535) {
        return unexpected("'--dns-pool' " + k + " (" + v + ") must be a port number");
      }
      if (k == "port") p.ports.assign(1, static_cast<std::uint16_t>(n));
      else p.kv_events_port = static_cast<std::uint16_t>(n);
    } else if (k == "replay-port") {
      if (!parse_num(v, &n) || n < 0 || n > 65535)
        return unexpected("'--dns-pool' replay-port (" + v + ") must be a port number");
      p.kv_replay_port = static_cast<std::uint16_t>(n);
    } else if (k == "ports") {
      // FIRST-LAST: one port per local data-parallel rank (commas separate the spec's keys).
      const auto dash = v.find('-');
      std::int64_t first = 0, last = 0;
      if (dash == std::string::npos || !parse_num(std::string_view(v).substr(0, dash), &first) ||
          !parse_num(std::string_view(v).substr(dash + 1), &last) || first < 1 || last > 65535 || last < first ||
          last - first + 1 > static_cast<std::int64_t>(kMaxDnsPoolPorts)) {
        return unexpected("'--dns-pool' ports (" + v + ") must be FIRST-LAST, 1 to " +
                          std::to_string(kMaxDnsPoolPorts) + " ports in [1, 65535], e.g. ports=8000-8007");
      }
      p.ports.clear();
      for (std::int64_t port = first; port <= last; ++port) p.ports.push_back(static_cast<std::uint16_t>(port));
    } else if (k == "refresh") {
      if (!parse_num(v, &p.refresh_seconds) || !(p.refresh_seconds > 0)) {
        return unexpected("'--dns-pool' refresh (" + v + ") must be seconds > 0, e.g. 5");
      }
    } else {
      return unexpected(
          "'--dns-pool' (" + spec + ") has an unknown key '" + k +
          "'; use role=R,host=NAME,port=P|ports=FIRST-LAST[,pool=NAME][,kv-port=P][,replay-port=P][,refresh=SECONDS]");
    }
  }
  if (p.host.empty() || p.ports.empty()) {
    return unexpected("'--dns-pool' (" + spec + ") needs host=NAME and port=P (or ports=FIRST-LAST)");
  }
  if (p.kv_events_port != 0 && p.kv_events_port + p.ports.size() - 1 > 65535) {
    return unexpected("'--dns-pool' kv-port (" + std::to_string(p.kv_events_port) +
                      ") plus one per further port exceeds 65535");
  }
  if (p.kv_replay_port != 0 && p.kv_replay_port + p.ports.size() - 1 > 65535) {
    return unexpected("'--dns-pool' replay-port (" + std::to_string(p.kv_replay_port) +
                      ") plus one per further port exceeds 65535");
  }
  if (p.pool.empty()) p.pool = std::string(to_string(p.role));
  return p;
}

}  // namespace

const char* router_usage() {
  return kUsage;
}

std::uint16_t dns_kv_events_port(const DnsPoolSpec& pool, std::size_t port_index) {
  if (pool.kv_events_port == 0) return 0;
  return static_cast<std::uint16_t>(pool.kv_events_port + port_index);
}

Expected<std::pair<std::string, std::uint16_t>, std::string> parse_http_url(const std::string& url) {
  constexpr std::string_view scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    return unexpected(
        std::string("must start with http:// (TLS to workers is not supported), e.g. http://10.0.0.7:8000"));
  }
  std::string rest = url.substr(scheme.size());
  if (const auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  std::string host = rest;
  std::uint16_t port = 80;
  if (!rest.empty() && rest[0] == '[') {  // [v6]:port
    const auto close = rest.find(']');
    if (close == std::string::npos) return unexpected(std::string("has an unclosed [ in the host"));
    host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return unexpected(std::string("has junk after the host"));
    if (!rest.empty()) rest = rest.substr(1);
    else rest.clear();
    if (!rest.empty() && !parse_num(rest, &port)) return unexpected("has a bad port '" + rest + "'");
  } else if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    const std::string p = rest.substr(colon + 1);
    if (!parse_num(p, &port) || port == 0) return unexpected("has a bad port '" + p + "'");
  }
  if (host.empty()) return unexpected(std::string("has no host"));
  return std::make_pair(host, port);
}

namespace config_detail {

Expected<EndpointRole, std::string> role_of(const std::string& field, const std::string& value) {
  if (value == "aggregated" || value == "both") return EndpointRole::aggregated;
  if (value == "prefill") return EndpointRole::prefill;
  if (value == "decode") return EndpointRole::decode;
  return unexpected("'" + field + "' (\"" + value + "\") must be both (aggregated), prefill or decode");
}

Expected<void, std::string> add_lora_adapter(RouterConfig& c, const std::string& field, const std::string& value) {
  const std::size_t eq = value.find('=');
  const std::string name = value.substr(0, eq);
  const std::string path = eq == std::string::npos ? std::string() : value.substr(eq + 1);
  if (name.empty() || (eq != std::string::npos && path.empty())) {
    return unexpected(
        "'" + field + "' (\"" + value +
        "\") must be NAME or NAME=PATH, as vLLM's --lora-modules, e.g. sql-lora or sql-lora=/adapters/sql");
  }
  if (std::find(c.lora_adapters.begin(), c.lora_adapters.end(), name) != c.lora_adapters.end()) {
    return unexpected("'" + field + "' (\"" + value + "\") names the adapter " + name +
                      " again; list each adapter once");
  }
  c.lora_adapters.push_back(name);
  c.lora_paths.push_back(path);
  return {};
}

// set_policy_option on c.options, remembering an explicit maxEndpoints
// (RouterConfig::max_endpoints_given).
Expected<void, RoutingError> set_option(RouterConfig& c, std::string_view key, double value) {
  auto set = set_policy_option(c.options, key, value);
  if (set && key == "maxEndpoints") c.max_endpoints_given = true;
  return set;
}

}  // namespace config_detail

Expected<RouterConfig, std::string> parse_router_args(int argc, char** argv, bool* help) {
  RouterConfig c;
  *help = false;
  // Pass 1: --help and --config (the file is applied before the flags that override it).
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      *help = true;
      return c;
    }
    if (a == "--config") {
      if (i + 1 >= argc) return unexpected(std::string("'--config' needs a value: --config FILE.json"));
      c.config_path = argv[++i];
    }
  }
  if (!c.config_path.empty()) {
    std::ifstream in(c.config_path);
    if (!in) return unexpected("'--config' (" + c.config_path + ") cannot be read; pass an existing JSON file");
    const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/false);
    if (doc.is_discarded()) return unexpected("'--config' (" + c.config_path + ") is not valid JSON");
    auto applied = apply_config_json(doc, c);
    if (!applied) return unexpected(c.config_path + ": " + applied.error());
  }
  std::vector<std::string> flag_models;
  bool flag_lora = false;
  bool flag_endpoints = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--config") {
      ++i;
      continue;
    }
    if (flag.rfind("--", 0) != 0) return unexpected("unexpected argument '" + flag + "'; see --help");
    if (i + 1 >= argc) return unexpected("'" + flag + "' needs a value; see --help");
    const std::string v = argv[++i];
    auto bad = [&](const std::string& fix) { return unexpected("'" + flag + "' (" + v + ") " + fix); };
    auto integer = [&](auto* out, std::int64_t lo, std::int64_t hi) -> bool {
      std::int64_t n = 0;
      if (!parse_num(v, &n) || n < lo || n > hi) return false;
      *out = static_cast<std::remove_pointer_t<decltype(out)>>(n);
      return true;
    };
    const std::string range_any = "must be a whole number >= 1";
    if (flag == "--host") {
      c.host = v;
    } else if (flag == "--port") {
      if (!integer(&c.port, 0, 65535)) return bad("must be a port number in [0, 65535]");
    } else if (flag == "--model-name") {
      flag_models.push_back(v);
    } else if (flag == "--tokenizer") {
      c.tokenizer_dir = v;
    } else if (flag == "--max-model-len") {
      if (!integer(&c.max_model_len, 1, (1LL << 31) - 1)) return bad("must be a whole number >= 1, e.g. 32768");
    } else if (flag == "--api-key-file") {
      if (v.empty()) return bad("must be the path of a file of API keys, one per line");
      c.api_key_file = v;
    } else if (flag == "--lora-adapter") {
      if (!flag_lora) {  // flags replace the file's list
        c.lora_adapters.clear();
        c.lora_paths.clear();
      }
      flag_lora = true;
      auto added = add_lora_adapter(c, "--lora-adapter", v);
      if (!added) return unexpected(added.error());
    } else if (flag == "--policy") {
      const std::string engine(routing_policy_engine_name(v));
      if (!routing_policy_known(engine)) return bad("is not a policy; use " + routing_policy_names_text());
      c.policy = engine;
    } else if (flag == "--policy-option") {
      const auto eq = v.find('=');
      double value = 0;
      if (eq == std::string::npos || !parse_num(std::string_view(v).substr(eq + 1), &value)) {
        return bad("must be KEY=NUMBER, e.g. prefixWeight=3");
      }
      auto set = set_option(c, v.substr(0, eq), value);
      if (!set) return unexpected("'--policy-option': " + set.error().message);
    } else if (flag == "--prefix-source") {
      if (v != "index" && v != "history" && v != "auto") return bad("must be index, history or auto");
      c.prefix_auto = v == "auto";
      c.precise_prefix = c.prefix_auto ? std::optional<bool>() : std::optional<bool>(v == "index");
    } else if (flag == "--log-decisions") {
      if (v != "on" && v != "off") return bad("must be on or off");
      c.log_decisions = v == "on";
    } else if (flag == "--block-size") {
      if (!integer(&c.block_size, 1, 1024)) return bad("must be a whole number in [1, 1024], e.g. 16");
    } else if (flag == "--min-uncached-tokens") {
      if (!integer(&c.decider.min_uncached_tokens, 0, 1LL << 40)) return bad("must be a whole number >= 0");
    } else if (flag == "--prefill-saturation-tokens") {
      if (!integer(&c.decider.saturation_prefill_tokens, 0, 1LL << 40)) return bad("must be a whole number >= 0");
    } else if (flag == "--endpoint") {
      auto e = endpoint_from_flag(v);
      if (!e) return unexpected(e.error());
      if (!flag_endpoints) c.endpoints.clear();  // flags replace the file's static list
      flag_endpoints = true;
      c.endpoints.push_back(std::move(*e));
    } else if (flag == "--dns-pool") {
      auto p = dns_pool_from_flag(v);
      if (!p) return unexpected(p.error());
      c.dns_pools.push_back(std::move(*p));
    } else if (flag == "--session-header") {
      c.session_header = v;
    } else if (flag == "--request-timeout-ms") {
      if (!integer(&c.request_timeout_ms, 1, 1LL << 40)) return bad(range_any);
    } else if (flag == "--connect-timeout-ms") {
      if (!integer(&c.connect_timeout_ms, 1, 1LL << 40)) return bad(range_any);
    } else if (flag == "--idle-timeout-ms") {
      if (!integer(&c.idle_timeout_ms, 1, 1LL << 40)) return bad(range_any);
    } else if (flag == "--upstream-keepalive") {
      if (!integer(&c.upstream_keepalive, 0, 1 << 16))
        return bad("must be a whole number in [0, 65536]; 0 turns reuse off");
    } else if (flag == "--upstream-keepalive-ms") {
      if (!integer(&c.upstream_keepalive_ms, 1, 1LL << 40)) return bad(range_any);
    } else if (flag == "--max-retries") {
      if (!integer(&c.max_retries, 0, 16)) return bad("must be a whole number in [0, 16]");
    } else if (flag == "--max-inflight") {
      if (!integer(&c.max_inflight, 1, 1 << 24)) return bad(range_any);
    } else if (flag == "--max-queue") {
      if (!integer(&c.max_queue, 0, 1 << 24)) return bad("must be a whole number >= 0");
    } else if (flag == "--queue-timeout-ms") {
      if (!integer(&c.queue_timeout_ms, 0, 1LL << 40)) return bad("must be a whole number >= 0");
    } else if (flag == "--health-interval-ms") {
      if (!integer(&c.health_interval_ms, 10, 1LL << 40)) return bad("must be a whole number >= 10");
    } else if (flag == "--health-timeout-ms") {
      if (!integer(&c.health_timeout_ms, 1, 1LL << 40)) return bad(range_any);
    } else if (flag == "--scrape-interval-ms") {
      if (!integer(&c.scrape_interval_ms, 10, 1LL << 40)) return bad("must be a whole number >= 10");
    } else if (flag == "--eject-after") {
      if (!integer(&c.eject_after, 1, 1 << 20)) return bad(range_any);
    } else if (flag == "--eject-ms") {
      if (!integer(&c.eject_ms, 0, 1LL << 40)) return bad("must be a whole number >= 0");
    } else if (flag == "--max-body-bytes") {
      if (!integer(&c.max_body_bytes, 1, 1LL << 40)) return bad(range_any);
    } else if (flag == "--max-connections") {
      if (!integer(&c.max_connections, 1, 1 << 24)) return bad("must be a whole number in [1, 16777216]");
    } else if (flag == "--keepalive-timeout-ms") {
      if (!integer(&c.keepalive_timeout_ms, 1, 1LL << 40)) return bad(range_any);
    } else if (flag == "--header-timeout-ms") {
      if (!integer(&c.header_timeout_ms, 1, 1LL << 40)) return bad(range_any);
    } else if (flag == "--body-timeout-ms") {
      if (!integer(&c.body_timeout_ms, 1, 1LL << 40)) return bad(range_any);
    } else if (flag == "--threads") {
      if (!integer(&c.threads, 1, 256)) return bad("must be a whole number in [1, 256]");
    } else if (flag == "--pin-threads") {
      if (v != "on" && v != "off") return bad("must be on or off");
      c.pin_threads = v == "on";
    } else if (flag == "--index-entries") {
      if (!integer(&c.index_entries, 1, 1LL << 28)) return bad("must be a whole number in [1, 2^28]");
    } else if (flag == "--index-entries-per-endpoint") {
      if (!integer(&c.index_entries_per_endpoint, 0, 1LL << 28)) return bad("must be a whole number >= 0");
    } else if (flag == "--replay-timeout-ms") {
      if (!integer(&c.replay_timeout_ms, 1, 1LL << 40)) return bad(range_any);
    } else if (flag == "--peer-port") {
      if (!integer(&c.peer_port, 0, 65535)) return bad("must be a port number (0 = no peer-snapshot listener)");
    } else if (flag == "--peers") {
      // HOST, HOST:PORT, [V6] or [V6]:PORT (a bare IPv6 address has no port).
      std::string host = v, port_text;
      if (!v.empty() && v.front() == '[') {
        const auto close = v.find(']');
        if (close == std::string::npos) return bad("must be HOST[:PORT], e.g. router-peers.default.svc:8100");
        host = v.substr(1, close - 1);
        if (close + 1 < v.size()) {
          if (v[close + 1] != ':') return bad("must be HOST[:PORT], e.g. router-peers.default.svc:8100");
          port_text = v.substr(close + 2);
        }
      } else if (const auto colon = v.find(':');
                 colon != std::string::npos && v.find(':', colon + 1) == std::string::npos) {
        host = v.substr(0, colon);
        port_text = v.substr(colon + 1);
      }
      std::int64_t port = 0;
      if (host.empty() || (!port_text.empty() && (!parse_num(port_text, &port) || port < 1 || port > 65535))) {
        return bad("must be HOST[:PORT], e.g. router-peers.default.svc:8100");
      }
      c.peers_host = host;
      c.peers_port = static_cast<std::uint16_t>(port);
    } else if (flag == "--peer-timeout-ms") {
      if (!integer(&c.peer_timeout_ms, 1, 600'000)) return bad("must be a whole number in [1, 600000]");
    } else if (flag == "--peer-snapshot-max-blocks") {
      if (!integer(&c.peer_snapshot_max_blocks, 0, 1LL << 26)) return bad("must be a whole number in [0, 2^26]");
    } else if (flag == "--drain-timeout-ms") {
      if (!integer(&c.drain_timeout_ms, 0, 1LL << 40)) return bad("must be a whole number >= 0");
    } else {
      return unexpected("unknown flag '" + flag + "'; see --help");
    }
  }
  if (!flag_models.empty()) c.served_models = flag_models;
  if (c.served_models.empty()) {
    return unexpected(
        std::string("no served model name: set router.servedModelName in the config or pass --model-name NAME"));
  }
  if (!c.peers_host.empty() && c.peers_port == 0) c.peers_port = c.peer_port;
  if (!c.peers_host.empty() && c.peers_port == 0) {
    return unexpected(
        std::string("router.peers needs a port: give router.peers.port, --peers HOST:PORT or --peer-port"));
  }
  if (c.peer_port != 0 && c.peer_port == c.port) {
    return unexpected("'--peer-port' (" + std::to_string(c.peer_port) +
                      ") is the API port; the peer-snapshot listener needs a port of its own, e.g. 8100");
  }
  if (c.endpoints.empty() && c.dns_pools.empty()) {
    return unexpected(
        std::string("no endpoints: give pools[].discovery or endpoints[] in the config, or "
                    "--endpoint role=decode,url=http://HOST:PORT / --dns-pool ..."));
  }
  if (c.endpoints.size() > static_cast<std::size_t>(kMaxRoutingEndpoints)) {
    return unexpected("too many static endpoints (" + std::to_string(c.endpoints.size()) + "); at most " +
                      std::to_string(kMaxRoutingEndpoints));
  }
  return c;
}

}  // namespace disagg::router
