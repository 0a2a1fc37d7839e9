// Configuration: the shape src/k8s/private/router-config.ts writes, static endpoints, flags that
// override the file, and every refusal naming its field and a fix. Also a DNS pool with several
// ports (one per local data-parallel rank) run through a real Router: one endpoint per address x port.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "router.h"
#include "router_config.h"

namespace disagg::router {
namespace {

using json = nlohmann::json;

// What routerConfig() in src/k8s/private/router-config.ts produces (cost-model sections trimmed).
json construct_config() {
  return json::parse(R"({
    "model": {"weightBytesPerRank": 1, "kvBytesPerToken": 1, "activeParameters": 1, "layers": 1, "hiddenSize": 1},
    "hardware": {"peakFlopsPerSecond": 1, "hbmBytesPerSecond": 1, "fabricBytesPerSecond": 1},
    "parallel": {"tensorParallel": 4},
    "router": {"listenPort": 8000, "servedModelName": "llama-3.3-70b", "kvBlockSize": 16, "kvTransfer": "nixl-libfabric"},
    "policy": {"name": "kv-aware", "weights": {"prefix": 3, "queue": 2, "kvUsage": 1},
               "disaggregation": {"minUncachedPromptTokens": 256}},
    "pools": [
      {"name": "prefill", "role": "prefill", "discovery": {"type": "dns", "host": "p.ns.svc.cluster.local", "port": 8000},
       "kvEvents": {"port": 5557, "topicPrefix": "kv@"}, "replicas": 2, "tensorParallel": 4},
      {"name": "decode", "role": "decode", "discovery": {"type": "dns", "host": "d.ns.svc.cluster.local", "port": 8000, "refreshSeconds": 2},
       "kvEvents": {"port": 5557, "topicPrefix": "kv@"}, "replicas": 1}
    ]
  })");
}

TEST(RouterConfig, ReadsTheConstructsShape) {
  RouterConfig c;
  auto r = apply_config_json(construct_config(), c);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(c.port, 8000);
  ASSERT_EQ(c.served_models.size(), 1u);
  EXPECT_EQ(c.served_models[0], "llama-3.3-70b");
  EXPECT_EQ(c.block_size, 16);
  EXPECT_EQ(c.policy, "llm-d");
  EXPECT_EQ(c.options.prefix_weight, 3);
  EXPECT_EQ(c.options.kv_utilization_weight, 1);
  EXPECT_EQ(c.decider.min_uncached_tokens, 256);
  ASSERT_EQ(c.dns_pools.size(), 2u);
  EXPECT_EQ(c.dns_pools[0].role, EndpointRole::prefill);
  EXPECT_EQ(c.dns_pools[0].host, "p.ns.svc.cluster.local");
  EXPECT_EQ(c.dns_pools[0].kv_events_port, 5557);
  EXPECT_EQ(c.dns_pools[1].role, EndpointRole::decode);
  EXPECT_DOUBLE_EQ(c.dns_pools[1].refresh_seconds, 2);
  EXPECT_TRUE(c.endpoints.empty());
  // the older string form of kvTransfer names the backend alone
  EXPECT_EQ(c.kv_transfer_backend, "LIBFABRIC");
  EXPECT_EQ(c.kv_bytes_per_token, 0);
}

TEST(RouterConfig, KvTransferTakesTheBackendAndTheBytesOfATokenOrSaysWhatIsWrong) {
  // GIVEN the constructs' object form
  json doc = construct_config();
  doc["router"]["kvTransfer"] = json{{"backend", "UCX"}, {"bytesPerToken", 163840}};
  RouterConfig c;
  auto r = apply_config_json(doc, c);
  // THEN both are read
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(c.kv_transfer_backend, "UCX");
  EXPECT_EQ(c.kv_bytes_per_token, 163840);
  // AND each mistake names the field, the value and the fix
  const std::pair<json, std::string> bad[] = {
      {json{{"backend", "TCP"}},
       "'router.kvTransfer.backend' (\"TCP\") must be the pools' NIXL backend: LIBFABRIC (EFA) or UCX"},
      {json{{"backend", "UCX"}, {"bytesPerToken", 0}}, "'router.kvTransfer.bytesPerToken' (0) must be a number > 0"},
      {json{{"backend", "UCX"}, {"bytes", 1}},
       "'router.kvTransfer.bytes' is not a field of this block; use backend, bytesPerToken"},
      {json("nixl-efa"), "'router.kvTransfer' (\"nixl-efa\") must be an object"},
      {json{{"bytesPerToken", 1}}, "'router.kvTransfer.backend' (\"\") must be the pools' NIXL backend"},
  };
  for (const auto& [value, message] : bad) {
    json d = construct_config();
    d["router"]["kvTransfer"] = value;
    RouterConfig rc;
    auto e = apply_config_json(d, rc);
    ASSERT_FALSE(e) << value.dump();
    EXPECT_EQ(e.error().rfind(message, 0), 0u) << e.error();
  }
}

TEST(RouterConfig, AdmissionBoundFromTheFileAsTheSimulatorReadsIt) {
  // GIVEN the router section's admission keys (the simulator reads the same ones)
  json doc = json::parse(R"({"router": {"maxInflight": 64, "maxQueue": 8, "queueTimeoutSeconds": 2.5}})");
  RouterConfig c;
  // WHEN read THEN they are the --max-inflight, --max-queue and --queue-timeout-ms values
  ASSERT_TRUE(apply_config_json(doc, c));
  EXPECT_EQ(c.max_inflight, 64);
  EXPECT_EQ(c.max_queue, 8);
  EXPECT_EQ(c.queue_timeout_ms, 2500);
  // AND out-of-range values are refused by name
  RouterConfig d;
  auto r = apply_config_json(json::parse(R"({"router": {"maxInflight": 0}})"), d);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("router.maxInflight"), std::string::npos) << r.error();
}

TEST(RouterConfig, MaxModelLenAndLoraAdaptersFromTheFile) {
  // GIVEN the deployment's context length and its LoRA adapters in the router section
  json doc =
      json::parse(R"({"router": {"maxModelLen": 32768, "loraAdapters": ["sql-lora", "chat-lora=/adapters/chat"]}})");
  RouterConfig c;
  // WHEN read THEN they are /tokenize's max_model_len and the adapter names requests may use, with
  // their paths where given (NAME=PATH, as vLLM's --lora-modules)
  ASSERT_TRUE(apply_config_json(doc, c));
  EXPECT_EQ(c.max_model_len, 32768);
  EXPECT_EQ(c.lora_adapters, (std::vector<std::string>{"sql-lora", "chat-lora"}));
  EXPECT_EQ(c.lora_paths, (std::vector<std::string>{"", "/adapters/chat"}));
  // AND wrong values are refused by name
  for (const char* bad :
       {R"({"router": {"maxModelLen": 0}})", R"({"router": {"loraAdapters": "sql-lora"}})",
        R"({"router": {"loraAdapters": [""]}})", R"({"router": {"loraAdapters": ["=/a"]}})",
        R"({"router": {"loraAdapters": ["a="]}})", R"({"router": {"loraAdapters": ["a", "a=/p"]}})"}) {
    RouterConfig d;
    auto r = apply_config_json(json::parse(bad), d);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find("router."), std::string::npos) << r.error();
  }
}

TEST(RouterConfig, PeersAndReplayPortsFromTheFile) {
  // GIVEN a peer-snapshot port, the peers' name, and a pool whose workers serve vLLM's replay socket
  json doc = json::parse(R"({"router": {"peerPort": 8100, "peers": {"host": "router-peers.ns.svc", "timeoutMs": 500,
    "maxBlocks": 1000}}, "pools": [{"name": "d", "role": "decode", "discovery": {"type": "dns", "host": "d.ns.svc",
    "ports": [8000, 8001]}, "kvEvents": {"port": 5557, "replayPort": 5657}}]})");
  RouterConfig c;
  // WHEN read
  auto r = apply_config_json(doc, c);
  ASSERT_TRUE(r) << r.error();
  // THEN the fields land where the router reads them
  EXPECT_EQ(c.peer_port, 8100);
  EXPECT_EQ(c.peers_host, "router-peers.ns.svc");
  EXPECT_EQ(c.peer_timeout_ms, 500);
  EXPECT_EQ(c.peer_snapshot_max_blocks, 1000);
  ASSERT_EQ(c.dns_pools.size(), 1u);
  EXPECT_EQ(c.dns_pools[0].kv_replay_port, 5657);
  // AND a peers block without a host is refused with the field's name
  RouterConfig bad;
  auto refused = apply_config_json(json::parse(R"({"router": {"peers": {"port": 8100}}})"), bad);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("router.peers.host"), std::string::npos) << refused.error();
}

TEST(RouterConfig, StaticEndpointsTakeTheirPoolsRole) {
  json doc = json::parse(R"({
    "router": {"servedModelName": "m"},
    "pools": [{"name": "workers", "role": "both"}],
    "endpoints": [{"pool": "workers", "url": "http://127.0.0.1:8001/v1", "kvEventsEndpoint": "tcp://127.0.0.1:5557"},
                  {"pool": "workers", "url": "http://[::1]:8002"}]
  })");
  RouterConfig c;
  ASSERT_TRUE(apply_config_json(doc, c));
  ASSERT_EQ(c.endpoints.size(), 2u);
  EXPECT_EQ(c.endpoints[0].role, EndpointRole::aggregated);
  EXPECT_EQ(c.endpoints[0].host, "127.0.0.1");
  EXPECT_EQ(c.endpoints[0].port, 8001);
  EXPECT_EQ(c.endpoints[0].kv_events, "tcp://127.0.0.1:5557");
  EXPECT_EQ(c.endpoints[1].host, "::1");
  EXPECT_EQ(c.endpoints[1].port, 8002);
}

TEST(RouterConfig, RefusalsNameTheFieldAndTheFix) {
  struct Case {
    const char* patch;  // merged into a valid document
    const char* expect;
  };
  const std::vector<Case> cases = {
      {R"({"router": {"listenPort": 70000}})", "'router.listenPort' (70000) must be a whole number in [1, 65535]"},
      {R"({"router": {"kvBlockSize": 0}})", "'router.kvBlockSize' (0)"},
      {R"({"router": {"servedModelName": ""}})", "'router.servedModelName'"},
      {R"({"policy": {"name": "fastest"}})", "'policy.name' (\"fastest\") is not a routing policy"},
      {R"({"policy": {"weights": {"prefix": -1}}})", "'policy.weights.prefix'"},
      {R"({"policy": {"weights": {"latency": 1}}})",
       "'policy.weights.latency' is not a field here; use prefix, queue, kvUsage"},
      {R"({"policy": {"options": {"noSuchKnob": 1}}})", "'policy.options.noSuchKnob'"},
      {R"({"policy": {"prefixSource": "guess"}})", "'policy.prefixSource' (\"guess\")"},
      {R"({"pools": [{"name": "x", "role": "mixer"}]})", "'pools[0].role' (\"mixer\") must be both"},
      {R"({"pools": [{"name": "x", "role": "decode", "discovery": {"type": "consul", "host": "h", "port": 1}}]})",
       "'pools[0].discovery.type' (\"consul\") must be dns"},
      {R"({"pools": [{"name": "x", "role": "decode"}], "endpoints": [{"pool": "y", "url": "http://h:1"}]})",
       "'endpoints[0].pool' (\"y\") names no pool in 'pools'"},
      {R"({"pools": [{"name": "x", "role": "decode"}], "endpoints": [{"pool": "x", "url": "https://h:1"}]})",
       "'endpoints[0].url' (\"https://h:1\") must start with http://"},
      {R"({"pools": [{"name": "x", "role": "decode"}], "endpoints": [{"pool": "x", "url": "http://h:1", "kvEventsEndpoint": "ipc://x"}]})",
       "must look like tcp://"},
  };
  for (const Case& k : cases) {
    json doc = construct_config();
    doc.merge_patch(json::parse(k.patch));
    RouterConfig c;
    auto r = apply_config_json(doc, c);
    ASSERT_FALSE(r) << k.patch;
    EXPECT_NE(r.error().find(k.expect), std::string::npos) << r.error();
  }
}

Expected<RouterConfig, std::string> parse_flags(std::vector<std::string> args) {
  args.insert(args.begin(), "router");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  bool help = false;
  return parse_router_args(static_cast<int>(argv.size()), argv.data(), &help);
}

TEST(RouterConfig, PeerFlags) {
  // --peers takes HOST, HOST:PORT or [V6]:PORT; its port defaults to --peer-port
  auto a = parse_flags({"--model-name", "m", "--endpoint", "role=both,url=http://h:1", "--peer-port", "8100", "--peers",
                        "router-peers"});
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(a->peers_host, "router-peers");
  EXPECT_EQ(a->peers_port, 8100);
  auto b = parse_flags({"--model-name", "m", "--endpoint", "role=both,url=http://h:1", "--peers", "[fd00::2]:8200"});
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(b->peers_host, "fd00::2");
  EXPECT_EQ(b->peers_port, 8200);
  auto d =
      parse_flags({"--model-name", "m", "--dns-pool", "role=decode,host=d,port=8000,kv-port=5557,replay-port=5657"});
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->dns_pools[0].kv_replay_port, 5657);
  // Refused: peers without any port, and the peer listener on the API port
  auto no_port =
      parse_flags({"--model-name", "m", "--endpoint", "role=both,url=http://h:1", "--peers", "router-peers"});
  ASSERT_FALSE(no_port);
  EXPECT_NE(no_port.error().find("router.peers needs a port"), std::string::npos) << no_port.error();
  auto same = parse_flags(
      {"--model-name", "m", "--endpoint", "role=both,url=http://h:1", "--port", "8000", "--peer-port", "8000"});
  ASSERT_FALSE(same);
  EXPECT_NE(same.error().find("is the API port"), std::string::npos) << same.error();
}

TEST(RouterConfig, ApiKeysFileFromTheFileOrAFlag) {
  // GIVEN the key file of a mounted Secret in the router section
  RouterConfig c;
  auto r = apply_config_json(json::parse(R"({"router": {"apiKeys": {"file": "/etc/disagg/api-keys/keys"}}})"), c);
  // THEN it is the file the router reads its keys from; absent, none are asked for
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(c.api_key_file, "/etc/disagg/api-keys/keys");
  EXPECT_TRUE(RouterConfig{}.api_key_file.empty());
  auto f = parse_flags({"--model-name", "m", "--endpoint", "role=both,url=http://h:1", "--api-key-file", "/k"});
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ(f->api_key_file, "/k");
  // AND a block without a file, another shape, or an unknown key is refused by name
  for (const char* bad :
       {R"({"router": {"apiKeys": {}}})", R"({"router": {"apiKeys": "/k"}})",
        R"({"router": {"apiKeys": {"file": ""}}})", R"({"router": {"apiKeys": {"file": "/k", "key": "x"}}})"}) {
    RouterConfig d;
    auto refused = apply_config_json(json::parse(bad), d);
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().find("'router.apiKeys"), std::string::npos) << refused.error();
  }
}

TEST(RouterConfig, LoraAdapterFlagsTakeAPathAsVllmsLoraModules) {
  auto f = parse_flags({"--model-name", "m", "--endpoint", "role=both,url=http://h:1", "--lora-adapter", "x=/a/x",
                        "--lora-adapter", "y"});
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ(f->lora_adapters, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(f->lora_paths, (std::vector<std::string>{"/a/x", ""}));
  auto dup = parse_flags(
      {"--model-name", "m", "--endpoint", "role=both,url=http://h:1", "--lora-adapter", "x", "--lora-adapter", "x=/p"});
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().find("'--lora-adapter' (\"x=/p\") names the adapter x again"), std::string::npos)
      << dup.error();
}

TEST(RouterConfig, FlagsOverrideTheFile) {
  const std::string path = ::testing::TempDir() + "router_config_test.json";
  {
    std::ofstream out(path);
    out << construct_config().dump();
  }
  auto c = parse_flags({"--config", path, "--port", "0", "--policy", "disagg", "--model-name", "other", "--endpoint",
                        "role=decode,url=http://127.0.0.1:9000,kv=tcp://127.0.0.1:9001,replay=tcp://127.0.0.1:9002",
                        "--policy-option", "guardSlack=4", "--session-header", "x-session-id"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->port, 0);
  EXPECT_EQ(c->policy, "disagg");
  EXPECT_EQ(c->served_models, std::vector<std::string>{"other"});
  ASSERT_EQ(c->endpoints.size(), 1u);
  EXPECT_EQ(c->endpoints[0].kv_replay, "tcp://127.0.0.1:9002");
  EXPECT_EQ(c->options.guard_slack, 4);
  EXPECT_FALSE(c->max_endpoints_given);  // the router may size the prefix history itself
  EXPECT_EQ(c->dns_pools.size(), 2u);    // the file's pools stay
  EXPECT_EQ(c->session_header, "x-session-id");
  std::remove(path.c_str());
}

TEST(RouterConfig, PrefixSourceAutoIsDecidedByTheTokenizer) {
  // The file: auto leaves the choice to Router::create() (index when the tokenizer loads).
  json doc = construct_config();
  doc["policy"]["prefixSource"] = "auto";
  doc["router"]["tokenizer"] = "/var/lib/disagg/tokenizer";
  doc["router"]["logDecisions"] = true;
  RouterConfig c;
  auto r = apply_config_json(doc, c);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(c.prefix_auto);
  EXPECT_FALSE(c.precise_prefix.has_value());
  EXPECT_EQ(c.tokenizer_dir, "/var/lib/disagg/tokenizer");
  EXPECT_TRUE(c.log_decisions);
  doc["router"]["logDecisions"] = "yes";
  RouterConfig bad;
  auto refused = apply_config_json(doc, bad);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("'router.logDecisions' (\"yes\") must be true or false"), std::string::npos)
      << refused.error();
  // The flags: an explicit source clears auto, and auto clears an explicit one.
  auto flags = parse_flags(
      {"--model-name", "m", "--endpoint", "url=http://h:1", "--prefix-source", "auto", "--log-decisions", "on"});
  ASSERT_TRUE(flags) << flags.error();
  EXPECT_TRUE(flags->prefix_auto);
  EXPECT_TRUE(flags->log_decisions);
  auto index = parse_flags(
      {"--model-name", "m", "--endpoint", "url=http://h:1", "--prefix-source", "auto", "--prefix-source", "index"});
  ASSERT_TRUE(index) << index.error();
  EXPECT_FALSE(index->prefix_auto);
  EXPECT_EQ(index->precise_prefix, std::optional<bool>(true));
  auto wrong = parse_flags({"--model-name", "m", "--endpoint", "url=http://h:1", "--prefix-source", "exact"});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().find("must be index, history or auto"), std::string::npos) << wrong.error();
}

TEST(RouterConfig, PinThreadsIsOffUnlessAsked) {
  auto plain = parse_flags({"--model-name", "m", "--endpoint", "url=http://h:1"});
  auto on = parse_flags({"--model-name", "m", "--endpoint", "url=http://h:1", "--pin-threads", "on"});
  ASSERT_TRUE(plain) << plain.error();
  ASSERT_TRUE(on) << on.error();
  EXPECT_FALSE(plain->pin_threads);
  EXPECT_TRUE(on->pin_threads);
}

TEST(RouterConfig, ClientConnectionLimitsAndTimeoutsAreFlags) {
  // GIVEN no client-side flags THEN nginx-like defaults
  auto plain = parse_flags({"--model-name", "m", "--endpoint", "url=http://h:1"});
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_EQ(plain->max_connections, 10'000u);
  EXPECT_EQ(plain->keepalive_timeout_ms, 60'000);
  EXPECT_EQ(plain->header_timeout_ms, 10'000);
  EXPECT_EQ(plain->body_timeout_ms, 30'000);
  // GIVEN each flag THEN it is taken, and --idle-timeout-ms (upstream) stays apart
  auto set = parse_flags({"--model-name", "m", "--endpoint", "url=http://h:1", "--max-connections", "50",
                          "--keepalive-timeout-ms", "700", "--header-timeout-ms", "800", "--body-timeout-ms", "900",
                          "--idle-timeout-ms", "5000"});
  ASSERT_TRUE(set) << set.error();
  EXPECT_EQ(set->max_connections, 50u);
  EXPECT_EQ(set->keepalive_timeout_ms, 700);
  EXPECT_EQ(set->header_timeout_ms, 800);
  EXPECT_EQ(set->body_timeout_ms, 900);
  EXPECT_EQ(set->idle_timeout_ms, 5000);
  // GIVEN 0 THEN a refusal that names the flag and the fix
  for (const char* flag : {"--max-connections", "--keepalive-timeout-ms", "--header-timeout-ms", "--body-timeout-ms"}) {
    auto zero = parse_flags({"--model-name", "m", "--endpoint", "url=http://h:1", flag, "0"});
    ASSERT_FALSE(zero) << flag;
    EXPECT_NE(zero.error().find(std::string("'") + flag + "' (0) must be a whole number"), std::string::npos)
        << zero.error();
  }
}

TEST(RouterConfig, AnExplicitMaxEndpointsIsRemembered) {
  // GIVEN maxEndpoints as a flag, or in the file's policy options
  auto flag = parse_flags({"--model-name", "m", "--endpoint", "role=decode,url=http://127.0.0.1:9000",
                           "--policy-option", "maxEndpoints=8"});
  ASSERT_TRUE(flag) << flag.error();
  json doc = construct_config();
  doc["policy"]["options"] = json{{"maxEndpoints", 12}};
  RouterConfig from_file;
  ASSERT_TRUE(apply_config_json(doc, from_file));
  // THEN the value is kept and marked as given, so the router does not resize the history
  EXPECT_EQ(flag->options.max_endpoints, 8);
  EXPECT_TRUE(flag->max_endpoints_given);
  EXPECT_EQ(from_file.options.max_endpoints, 12);
  EXPECT_TRUE(from_file.max_endpoints_given);
}

TEST(RouterConfig, FlagErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--model-name", "m"}, "no endpoints"},
      {{"--endpoint", "role=decode,url=http://h:1"}, "no served model name"},
      {{"--model-name", "m", "--endpoint", "role=decoder,url=http://h:1"}, "'--endpoint role' (\"decoder\")"},
      {{"--model-name", "m", "--endpoint", "role=decode"}, "needs url=http://HOST:PORT"},
      {{"--model-name", "m", "--endpoint", "role=decode,url=http://h:1,color=red"}, "unknown key 'color'"},
      {{"--model-name", "m", "--endpoint", "url=http://h:x"}, "bad port 'x'"},
      {{"--model-name", "m", "--endpoint", "url=http://h:1", "--policy", "best"}, "'--policy' (best) is not a policy"},
      {{"--model-name", "m", "--endpoint", "url=http://h:1", "--max-retries", "-1"}, "'--max-retries' (-1)"},
      {{"--model-name", "m", "--endpoint", "url=http://h:1", "--frobnicate", "1"}, "unknown flag '--frobnicate'"},
      {{"--model-name", "m", "--endpoint", "url=http://h:1", "--port"}, "'--port' needs a value"},
      {{"--model-name", "m", "--dns-pool", "role=decode,host=svc"}, "needs host=NAME and port=P"},
      {{"--config", "/nonexistent/x.json", "--model-name", "m"}, "cannot be read"},
      {{"--model-name", "m", "--endpoint", "url=http://h:1", "--pin-threads", "yes"},
       "'--pin-threads' (yes) must be on or off"},
  };
  for (const auto& [args, expect] : cases) {
    auto c = parse_flags(args);
    ASSERT_FALSE(c) << expect;
    EXPECT_NE(c.error().find(expect), std::string::npos) << c.error();
  }
}

TEST(RouterConfig, DnsPoolWithOnePortPerDataParallelRank) {
  // GIVEN a decode pool whose pods serve one vLLM API server per local rank on 8000..8003
  json doc = construct_config();
  doc["pools"][1]["discovery"].erase("port");
  doc["pools"][1]["discovery"]["ports"] = {8000, 8001, 8002, 8003};
  doc["pools"][1]["kvEvents"]["port"] = 5600;
  RouterConfig c;
  // WHEN read
  auto r = apply_config_json(doc, c);
  ASSERT_TRUE(r) << r.error();
  // THEN the single-port pool keeps one port and the per-rank pool lists every rank's
  ASSERT_EQ(c.dns_pools.size(), 2u);
  EXPECT_EQ(c.dns_pools[0].ports, std::vector<std::uint16_t>{8000});
  EXPECT_EQ(c.dns_pools[1].ports, (std::vector<std::uint16_t>{8000, 8001, 8002, 8003}));
  // AND rank j publishes KV events on kvEvents.port + j (vLLM's rank offset); none without kvEvents
  for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(dns_kv_events_port(c.dns_pools[1], j), 5600 + j);
  EXPECT_EQ(dns_kv_events_port(c.dns_pools[0], 0), 5557);
  DnsPoolSpec quiet = c.dns_pools[1];
  quiet.kv_events_port = 0;
  EXPECT_EQ(dns_kv_events_port(quiet, 3), 0);
}

TEST(RouterConfig, DnsPortListRefusals) {
  struct Case {
    json discovery;
    json kv_events;  // null = the valid default
    const char* expect;
  };
  std::vector<std::uint16_t> too_many(65);
  for (std::size_t i = 0; i < too_many.size(); ++i) too_many[i] = static_cast<std::uint16_t>(9000 + i);
  const std::vector<Case> cases = {
      {{{"port", 8000}, {"ports", {8000, 8001}}},
       nullptr,
       "'pools[1].discovery.port' and 'pools[1].discovery.ports' are both set"},
      {{{"ports", json::array()}}, nullptr, "'pools[1].discovery.ports' ([]) must be a list of 1 to 64 port numbers"},
      {{{"ports", too_many}}, nullptr, "must be a list of 1 to 64 port numbers"},
      {{{"ports", 8000}}, nullptr, "'pools[1].discovery.ports' (8000) must be a list"},
      {{{"ports", {8000, 8001, 8000}}},
       nullptr,
       "'pools[1].discovery.ports[2]' (8000) repeats 'pools[1].discovery.ports[0]'"},
      {{{"ports", {8000, 0}}}, nullptr, "'pools[1].discovery.ports[1]' (0) must be a whole number in [1, 65535]"},
      {{{"ports", {70000}}}, nullptr, "'pools[1].discovery.ports[0]' (70000)"},
      {{{"ports", {"8000"}}}, nullptr, "'pools[1].discovery.ports[0]' (\"8000\")"},
      {json::object(), nullptr, "'pools[1].discovery.port' (or 'pools[1].discovery.ports') are required"},
      {{{"ports", {8000, 8001, 8002}}}, {{"port", 65534}}, "'pools[1].kvEvents.port' (65534) plus 2"},
  };
  for (const Case& k : cases) {
    json doc = construct_config();
    json& disc = doc["pools"][1]["discovery"];
    disc = json::object({{"type", "dns"}, {"host", "d"}});
    disc.update(k.discovery);
    if (!k.kv_events.is_null()) doc["pools"][1]["kvEvents"] = k.kv_events;
    RouterConfig c;
    auto r = apply_config_json(doc, c);
    ASSERT_FALSE(r) << k.discovery.dump();
    EXPECT_NE(r.error().find(k.expect), std::string::npos) << r.error();
  }
}

TEST(RouterConfig, DnsPoolPortRangeFlag) {
  auto c = parse_flags({"--model-name", "m", "--dns-pool", "role=decode,host=svc,ports=8000-8003,kv-port=5557"});
  ASSERT_TRUE(c) << c.error();
  ASSERT_EQ(c->dns_pools.size(), 1u);
  EXPECT_EQ(c->dns_pools[0].ports, (std::vector<std::uint16_t>{8000, 8001, 8002, 8003}));
  EXPECT_EQ(dns_kv_events_port(c->dns_pools[0], 3), 5560);
  for (const char* bad : {"ports=8003-8000", "ports=8000", "ports=1-65", "ports=a-b"}) {
    auto e = parse_flags({"--model-name", "m", "--dns-pool", std::string("role=decode,host=svc,") + bad});
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().find("must be FIRST-LAST"), std::string::npos) << e.error();
  }
}

// GET `target` from 127.0.0.1:`port` over a plain socket; "" on failure.
std::string http_get(std::uint16_t port, const std::string& target) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size())) {
      char buf[8192];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

TEST(RouterDns, MultiPortPoolYieldsOneEndpointPerAddressAndPort) {
  // GIVEN a router whose decode pool is discovered as "localhost" on two ports (nothing listens:
  // discovery adds endpoints whether or not they are healthy)
  RouterConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.served_models = {"m"};
  c.health_interval_ms = 60'000;
  c.scrape_interval_ms = 60'000;
  DnsPoolSpec pool;
  pool.pool = "decode";
  pool.role = EndpointRole::decode;
  pool.host = "localhost";
  pool.ports = {18431, 18432};
  pool.refresh_seconds = 0.1;
  pool.kv_events_port = 18531;
  c.dns_pools.push_back(pool);
  auto router = Router::create(c);
  ASSERT_TRUE(router) << router.error();
  Router& r = **router;
  std::thread serving([&r] { r.run(); });
  // WHEN discovery has run THEN /metrics lists every resolved address on both ports, in the pool
  const std::regex sample(R"re(disagg_router_endpoint_healthy\{endpoint="(.*):(\d+)",pool="decode",role="decode"\})re");
  std::map<std::string, std::set<int>> seen;
  for (int attempt = 0; attempt < 100; ++attempt) {
    seen.clear();
    const std::string page = http_get(r.port(), "/metrics");
    for (auto it = std::sregex_iterator(page.begin(), page.end(), sample); it != std::sregex_iterator(); ++it) {
      seen[(*it)[1].str()].insert(std::stoi((*it)[2].str()));
    }
    if (seen.count("127.0.0.1") != 0 && seen["127.0.0.1"].size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r.drain();
  serving.join();
  ASSERT_EQ(seen.count("127.0.0.1"), 1u) << "no endpoint of 127.0.0.1 on /metrics";
  for (const auto& [host, ports] : seen) EXPECT_EQ(ports, (std::set<int>{18431, 18432})) << host;
}

TEST(RouterConfig, PolicyNamesMapOntoTheEngines) {
  EXPECT_EQ(routing_policy_engine_name("kv-aware"), "llm-d");
  EXPECT_EQ(routing_policy_engine_name("least-loaded"), "least-load");
  EXPECT_EQ(routing_policy_engine_name("round-robin"), "round-robin");
}

}  // namespace
}  // namespace disagg::router
