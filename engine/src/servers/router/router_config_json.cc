// router_config_json.cc — apply_config_json(): the JSON file the constructs write (the engine
// schema's router, policy, pools and endpoints sections), with typed field readers whose errors name
// the field, the value received and the fix.
#include <array>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "disagg/json_value.h"
#include "disagg/routing_policy_config.h"
#include "router_config.h"
#include "router_config_detail.h"

namespace disagg::router {

namespace {

using json = nlohmann::json;
using config_detail::role_of;
using config_detail::set_option;

std::string quoted(const json& v) {
  return v.dump();
}

// Typed field readers: absent or null keeps the default.
bool get_int(const json& obj, const std::string& path, const char* key, std::int64_t lo, std::int64_t hi,
             std::int64_t* out, std::string& err) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_number_integer() || it->get<std::int64_t>() < lo || it->get<std::int64_t>() > hi) {
    err = "'" + path + key + "' (" + quoted(*it) + ") must be a whole number in [" + std::to_string(lo) + ", " +
          std::to_string(hi) + "]";
    return false;
  }
  *out = it->get<std::int64_t>();
  return true;
}

bool get_number(const json& obj, const std::string& path, const char* key, double lo, double* out, std::string& err) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_number() || !(it->get<double>() > lo)) {
    err = "'" + path + key + "' (" + quoted(*it) + ") must be a number > " + std::to_string(lo).substr(0, 3);
    return false;
  }
  *out = it->get<double>();
  return true;
}

bool get_string(const json& obj, const std::string& path, const char* key, std::string* out, std::string& err) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
    err = "'" + path + key + "' (" + quoted(*it) + ") must be a non-empty string";
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

bool get_bool(const json& obj, const std::string& path, const char* key, bool* out, std::string& err) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    err = "'" + path + key + "' (" + quoted(*it) + ") must be true or false";
    return false;
  }
  *out = it->get<bool>();
  return true;
}

bool object_or_absent(const json& doc, const char* key, const json** out, std::string& err) {
  auto it = doc.find(key);
  *out = nullptr;
  if (it == doc.end() || it->is_null()) return true;
  if (!it->is_object()) {
    // Appends rather than operator+: g++ 12 reports a false -Wrestrict on the chain at -O2.
    err.assign("'").append(key).append("' must be an object");
    return false;
  }
  *out = &*it;
  return true;
}

// `port` (one) or `ports` (a list, e.g. one per local data-parallel rank) of a DNS discovery.
// Absent both: `out` stays empty and the caller asks for one.
bool get_ports(const json& obj, const std::string& path, std::vector<std::uint16_t>* out, std::string& err) {
  auto one = obj.find("port");
  auto many = obj.find("ports");
  const bool has_one = one != obj.end() && !one->is_null();
  const bool has_many = many != obj.end() && !many->is_null();
  if (has_one && has_many) {
    err = "'" + path + "port' and '" + path + "ports' are both set; keep one: port for one HTTP port per address, " +
          "ports for several (e.g. [8000, 8001] for two data-parallel ranks per pod)";
    return false;
  }
  if (has_one) {
    std::int64_t port = 0;
    if (!get_int(obj, path, "port", 1, 65535, &port, err)) return false;
    out->assign(1, static_cast<std::uint16_t>(port));
    return true;
  }
  if (!has_many) return true;
  if (!many->is_array() || many->empty() || many->size() > kMaxDnsPoolPorts) {
    err = "'" + path + "ports' (" + quoted(*many) + ") must be a list of 1 to " + std::to_string(kMaxDnsPoolPorts) +
          " port numbers (the router has " + std::to_string(kMaxDnsPoolPorts) + " endpoint slots), e.g. [8000, 8001]";
    return false;
  }
  out->clear();
  for (std::size_t j = 0; j < many->size(); ++j) {
    const json& v = (*many)[j];
    const std::string at = path + "ports[" + std::to_string(j) + "]";
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 65535) {
      err = "'" + at + "' (" + quoted(v) + ") must be a whole number in [1, 65535]";
      return false;
    }
    const auto port = static_cast<std::uint16_t>(v.get<std::int64_t>());
    for (std::size_t k = 0; k < j; ++k) {
      if ((*out)[k] == port) {
        err = "'" + at + "' (" + std::to_string(port) + ") repeats '" + path + "ports[" + std::to_string(k) +
              "]'; list each port once";
        return false;
      }
    }
    out->push_back(port);
  }
  return true;
}

// "key=value,key=value" (values may not contain commas).

// One number of the autoscaling block: absent or null keeps the default; otherwise a finite number
// > 0 (or >= 0 when `zero_ok`). The error names the field, the value and the fix.
bool get_scaling_number(const json& obj, const std::string& path, const char* key, bool zero_ok, const char* fix,
                        double* out, std::string& err) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  const bool ok =
      it->is_number() && std::isfinite(it->get<double>()) && (zero_ok ? it->get<double>() >= 0 : it->get<double>() > 0);
  if (!ok) {
    err = "'" + path + key + "' (" + quoted(*it) + ") must be a number " + (zero_ok ? ">= 0" : "> 0") + "; " + fix;
    return false;
  }
  *out = it->get<double>();
  return true;
}

// The `autoscaling` block (router_config.h AutoscalingSignalsConfig). Other keys of the block are
// left to the tools that read them (the scaling rule's replicas and windows): not errors here.
Expected<void, std::string> apply_autoscaling(const json& a, AutoscalingSignalsConfig& out) {
  std::string err;
  if (!a.is_object()) {
    return unexpected("'autoscaling' (" + quoted(a).substr(0, 60) +
                      ") must be an object, e.g. {\"slo\": {\"ttftSeconds\": 2, \"tpotSeconds\": 0.05}}");
  }
  out.configured = true;
  struct Section {
    const char* name;
    const char* example;
  };
  for (const Section& sec :
       {Section{"slo", "{\"ttftSeconds\": 2, \"tpotSeconds\": 0.05}"},
        Section{"prefill", "{\"tokensPerSecond\": 20000, \"fixedSeconds\": 0.02}"},
        Section{"decode", "{\"stepSecondsBase\": 0.012, \"stepSecondsPerSequence\": 0.0002, \"maxSequences\": 256}"}}) {
    auto it = a.find(sec.name);
    if (it == a.end() || it->is_null()) continue;
    if (!it->is_object()) {
      return unexpected("'autoscaling." + std::string(sec.name) + "' (" + quoted(*it).substr(0, 60) +
                        ") must be an object, e.g. " + sec.example);
    }
  }
  const json empty = json::object();
  auto section = [&](const char* name) -> const json& {
    auto it = a.find(name);
    return it == a.end() || it->is_null() ? empty : *it;
  };
  const json& slo = section("slo");
  const json& prefill = section("prefill");
  const json& decode = section("decode");
  const struct {
    const json& obj;
    const char* path;
    const char* key;
    bool zero_ok;
    const char* fix;
    double* out;
  } fields[] = {
      {slo, "autoscaling.slo.", "ttftSeconds", false, "the time-to-first-token objective in seconds, e.g. 2",
       &out.ttft_slo_seconds},
      {slo, "autoscaling.slo.", "tpotSeconds", false, "the time-per-output-token objective in seconds, e.g. 0.05",
       &out.tpot_slo_seconds},
      {prefill, "autoscaling.prefill.", "tokensPerSecond", false,
       "prompt tokens one prefill endpoint processes per second (from the cost model), e.g. 20000",
       &out.prefill_tokens_per_second},
      {prefill, "autoscaling.prefill.", "fixedSeconds", true, "the fixed latency of a prefill in seconds, e.g. 0.02",
       &out.prefill_fixed_seconds},
      {decode, "autoscaling.decode.", "stepSecondsBase", true,
       "the decode step time of a one-sequence batch in seconds, e.g. 0.012", &out.decode_step_seconds_base},
      {decode, "autoscaling.decode.", "stepSecondsPerSequence", true,
       "the step time each further sequence adds in seconds, e.g. 0.0002", &out.decode_step_seconds_per_sequence},
      {decode, "autoscaling.decode.", "maxSequences", true,
       "the sequences one decode endpoint holds at once (0: unknown), e.g. 256", &out.decode_max_sequences},
  };
  for (const auto& f : fields) {
    if (!get_scaling_number(f.obj, f.path, f.key, f.zero_ok, f.fix, f.out, err)) return unexpected(err);
  }
  for (const auto& [obj, path, keys] :
       {std::tuple{&slo, "autoscaling.slo.", std::string_view("ttftSeconds, tpotSeconds")},
        std::tuple{&prefill, "autoscaling.prefill.", std::string_view("tokensPerSecond, fixedSeconds")},
        std::tuple{&decode, "autoscaling.decode.",
                   std::string_view("stepSecondsBase, stepSecondsPerSequence, maxSequences")}}) {
    for (auto it = obj->begin(); it != obj->end(); ++it) {
      if (it.key() == "$comment") continue;
      bool known = false;
      for (const auto& f : fields) known |= &f.obj == obj && it.key() == f.key;
      if (known) continue;
      return unexpected("'" + std::string(path) + it.key() + "' is not a field of this block; use " +
                        std::string(keys));
    }
  }
  return {};
}

// router.kvTransfer: {"backend": LIBFABRIC|UCX, "bytesPerToken": n > 0}, or the older string
// "nixl-libfabric" / "nixl-ucx" that names the backend alone.
Expected<void, std::string> read_kv_transfer(const json& kt, RouterConfig& c) {
  if (kt.is_string() && (kt == "nixl-libfabric" || kt == "nixl-ucx")) {
    c.kv_transfer_backend = kt == "nixl-libfabric" ? "LIBFABRIC" : "UCX";
    return {};
  }
  if (!kt.is_object()) {
    return unexpected("'router.kvTransfer' (" + quoted(kt).substr(0, 60) +
                      ") must be an object, e.g. {\"backend\": \"LIBFABRIC\", \"bytesPerToken\": 163840}, or "
                      "\"nixl-libfabric\" / \"nixl-ucx\"");
  }
  for (auto it = kt.begin(); it != kt.end(); ++it) {
    if (it.key() != "backend" && it.key() != "bytesPerToken")
      return unexpected("'router.kvTransfer." + it.key() +
                        "' is not a field of this block; use backend, bytesPerToken");
  }
  std::string err;
  if (!get_string(kt, "router.kvTransfer.", "backend", &c.kv_transfer_backend, err) ||
      !get_number(kt, "router.kvTransfer.", "bytesPerToken", 0, &c.kv_bytes_per_token, err)) {
    return unexpected(err);
  }
  if (c.kv_transfer_backend != "LIBFABRIC" && c.kv_transfer_backend != "UCX") {
    return unexpected("'router.kvTransfer.backend' (\"" + c.kv_transfer_backend +
                      "\") must be the pools' NIXL backend: LIBFABRIC (EFA) or UCX");
  }
  return {};
}

}  // namespace

Expected<void, std::string> apply_config_json(const json& doc, RouterConfig& c) {
  std::string err;
  if (!doc.is_object()) return unexpected(std::string("the configuration must be a JSON object"));
  const json* router = nullptr;
  const json* policy = nullptr;
  if (!object_or_absent(doc, "router", &router, err)) return unexpected(err);
  // (the section's reader checks its type, in the simulator's words)
  if (auto p = doc.find("policy"); p != doc.end() && !p->is_null()) policy = &*p;
  if (router != nullptr) {
    std::int64_t port = c.port, bs = c.block_size;
    double timeout = static_cast<double>(c.request_timeout_ms) / 1000.0;
    std::int64_t max_inflight = c.max_inflight, max_queue = c.max_queue;
    double queue_timeout = static_cast<double>(c.queue_timeout_ms) / 1000.0;
    std::string model;
    if (!get_int(*router, "router.", "listenPort", 1, 65535, &port, err) ||
        !get_int(*router, "router.", "kvBlockSize", 1, 1024, &bs, err) ||
        !get_number(*router, "router.", "requestTimeoutSeconds", 0, &timeout, err) ||
        !get_int(*router, "router.", "maxInflight", 1, 1 << 24, &max_inflight, err) ||
        !get_int(*router, "router.", "maxQueue", 0, 1 << 24, &max_queue, err) ||
        !get_number(*router, "router.", "queueTimeoutSeconds", 0, &queue_timeout, err) ||
        !get_string(*router, "router.", "servedModelName", &model, err) ||
        !get_string(*router, "router.", "tokenizer", &c.tokenizer_dir, err) ||
        !get_bool(*router, "router.", "logDecisions", &c.log_decisions, err) ||
        !get_int(*router, "router.", "maxModelLen", 1, (1LL << 31) - 1, &c.max_model_len, err)) {
      return unexpected(err);
    }
    std::int64_t peer_port = c.peer_port;
    if (!get_int(*router, "router.", "peerPort", 0, 65535, &peer_port, err)) return unexpected(err);
    c.peer_port = static_cast<std::uint16_t>(peer_port);
    if (auto pe = router->find("peers"); pe != router->end() && !pe->is_null()) {
      if (!pe->is_object()) {
        return unexpected(
            std::string("'router.peers' must be an object, e.g. {\"host\": \"router-peers\", \"port\": 8100}"));
      }
      std::int64_t peers_port = c.peers_port;
      if (!get_string(*pe, "router.peers.", "host", &c.peers_host, err) ||
          !get_int(*pe, "router.peers.", "port", 1, 65535, &peers_port, err) ||
          !get_int(*pe, "router.peers.", "timeoutMs", 1, 600'000, &c.peer_timeout_ms, err) ||
          !get_int(*pe, "router.peers.", "maxBlocks", 0, 1LL << 26, &c.peer_snapshot_max_blocks, err)) {
        return unexpected(err);
      }
      if (c.peers_host.empty())
        return unexpected(std::string("'router.peers.host' is required: the peer routers' DNS name"));
      c.peers_port = static_cast<std::uint16_t>(peers_port);
    }
    if (auto ak = router->find("apiKeys"); ak != router->end() && !ak->is_null()) {
      const char* example = "e.g. {\"file\": \"/etc/disagg/api-keys/keys\"} (a mounted Secret, one key per line)";
      if (!ak->is_object())
        return unexpected("'router.apiKeys' (" + quoted(*ak).substr(0, 60) + ") must be an object, " + example);
      for (auto it = ak->begin(); it != ak->end(); ++it) {
        if (it.key() != "file")
          return unexpected("'router.apiKeys." + it.key() + "' is not a field of this block; use file");
      }
      if (!get_string(*ak, "router.apiKeys.", "file", &c.api_key_file, err)) return unexpected(err);
      if (c.api_key_file.empty()) return unexpected(std::string("'router.apiKeys.file' is required, ") + example);
    }
    if (auto kt = router->find("kvTransfer"); kt != router->end() && !kt->is_null()) {
      if (auto read = read_kv_transfer(*kt, c); !read) return read;
    }
    if (auto l = router->find("loraAdapters"); l != router->end() && !l->is_null()) {
      if (!l->is_array())
        return unexpected(std::string("'router.loraAdapters' must be an array of adapter names, e.g. [\"sql-lora\"]"));
      c.lora_adapters.clear();
      c.lora_paths.clear();
      for (std::size_t i = 0; i < l->size(); ++i) {
        const json& name = (*l)[i];
        const std::string at = "router.loraAdapters[" + std::to_string(i) + "]";
        if (!name.is_string() || name.get_ref<const std::string&>().empty()) {
          return unexpected("'" + at + "' (" + quoted(name) +
                            ") must be a non-empty string: the adapter's NAME or NAME=PATH in vLLM's --lora-modules");
        }
        auto added = config_detail::add_lora_adapter(c, at, name.get<std::string>());
        if (!added) return unexpected(added.error());
      }
    }
    c.max_inflight = static_cast<std::int32_t>(max_inflight);
    c.max_queue = static_cast<std::int32_t>(max_queue);
    c.queue_timeout_ms = static_cast<std::int64_t>(queue_timeout * 1000.0);
    c.port = static_cast<std::uint16_t>(port);
    c.block_size = static_cast<std::int32_t>(bs);
    c.request_timeout_ms = static_cast<std::int64_t>(timeout * 1000.0);
    if (!model.empty()) c.served_models.insert(c.served_models.begin(), model);
  }
  if (policy != nullptr) {
    // The one reader of the section (disagg/routing_policy_config.h, the simulator's too), over the
    // same JSON read by the engine's one grammar.
    auto section_doc = parse_json(policy->dump());
    if (!section_doc) return unexpected("'policy': " + section_doc.error());
    auto section = read_routing_policy_section(*section_doc, c.options);
    if (!section) return unexpected(section.error());
    c.policy = section->policy;
    c.options = section->options;
    c.max_endpoints_given = c.max_endpoints_given || section->max_endpoints_given;
    if (section->min_uncached_prompt_tokens) c.decider.min_uncached_tokens = *section->min_uncached_prompt_tokens;
    if (section->prefix_source) {
      c.prefix_auto = *section->prefix_source == PrefixSource::automatic;
      c.precise_prefix =
          c.prefix_auto ? std::optional<bool>() : std::optional<bool>(*section->prefix_source == PrefixSource::index);
    }
  }
  if (auto a = doc.find("autoscaling"); a != doc.end() && !a->is_null()) {
    auto applied = apply_autoscaling(*a, c.autoscaling);
    if (!applied) return applied;
  }
  // Pools: roles by name, DNS discovery.
  std::vector<std::pair<std::string, EndpointRole>> roles;
  if (auto pools = doc.find("pools"); pools != doc.end() && !pools->is_null()) {
    if (!pools->is_array()) return unexpected(std::string("'pools' must be an array of {name, role, ...}"));
    for (std::size_t i = 0; i < pools->size(); ++i) {
      const json& p = (*pools)[i];
      const std::string at = "pools[" + std::to_string(i) + "].";
      if (!p.is_object()) return unexpected("'" + at.substr(0, at.size() - 1) + "' must be an object");
      std::string name, role;
      if (!get_string(p, at, "name", &name, err) || !get_string(p, at, "role", &role, err)) return unexpected(err);
      if (name.empty() || role.empty()) {
        return unexpected("'" + at + "name' and '" + at +
                          "role' are required, e.g. {\"name\": \"decode\", \"role\": \"decode\"}");
      }
      auto r = role_of(at + "role", role);
      if (!r) return unexpected(r.error());
      roles.emplace_back(name, *r);
      auto disc = p.find("discovery");
      if (disc == p.end() || disc->is_null()) continue;
      if (!disc->is_object()) return unexpected("'" + at + "discovery' must be an object");
      DnsPoolSpec d;
      d.pool = name;
      d.role = *r;
      std::string type;
      const std::string dat = at + "discovery.";
      if (!get_string(*disc, dat, "type", &type, err) || !get_string(*disc, dat, "host", &d.host, err) ||
          !get_ports(*disc, dat, &d.ports, err) ||
          !get_number(*disc, dat, "refreshSeconds", 0, &d.refresh_seconds, err)) {
        return unexpected(err);
      }
      if (type != "dns") return unexpected("'" + dat + "type' (\"" + type + "\") must be dns");
      if (d.host.empty() || d.ports.empty()) {
        return unexpected("'" + dat + "host' and '" + dat + "port' (or '" + dat + "ports') are required");
      }
      if (auto kv = p.find("kvEvents"); kv != p.end() && !kv->is_null()) {
        if (!kv->is_object()) return unexpected("'" + at + "kvEvents' must be an object");
        std::int64_t kport = 5557;  // vLLM's KVEventsConfig endpoint default, tcp://*:5557
        if (!get_int(*kv, at + "kvEvents.", "port", 1, 65535, &kport, err) ||
            !get_string(*kv, at + "kvEvents.", "topicPrefix", &d.topic_prefix, err)) {
          return unexpected(err);
        }
        // Port j publishes on kvEvents.port + j (dns_kv_events_port): the last must be a port too.
        const std::int64_t last = kport + static_cast<std::int64_t>(d.ports.size()) - 1;
        if (last > 65535) {
          return unexpected("'" + at + "kvEvents.port' (" + std::to_string(kport) + ") plus " +
                            std::to_string(d.ports.size() - 1) + " (one per further port of '" + dat +
                            "ports') exceeds 65535; use a kvEvents.port <= " +
                            std::to_string(65535 - static_cast<std::int64_t>(d.ports.size()) + 1));
        }
        d.kv_events_port = static_cast<std::uint16_t>(kport);
        std::int64_t rport = 0;
        if (!get_int(*kv, at + "kvEvents.", "replayPort", 1, 65535 - static_cast<std::int64_t>(d.ports.size()) + 1,
                     &rport, err)) {
          return unexpected(err);
        }
        d.kv_replay_port = static_cast<std::uint16_t>(rport);
      }
      c.dns_pools.push_back(std::move(d));
    }
  }
  if (auto eps = doc.find("endpoints"); eps != doc.end() && !eps->is_null()) {
    if (!eps->is_array()) return unexpected(std::string("'endpoints' must be an array of {pool, url}"));
    for (std::size_t i = 0; i < eps->size(); ++i) {
      const json& e = (*eps)[i];
      const std::string at = "endpoints[" + std::to_string(i) + "].";
      if (!e.is_object()) return unexpected("'" + at.substr(0, at.size() - 1) + "' must be an object");
      EndpointSpec s;
      std::string url;
      if (!get_string(e, at, "pool", &s.pool, err) || !get_string(e, at, "url", &url, err) ||
          !get_string(e, at, "kvEventsEndpoint", &s.kv_events, err) ||
          !get_string(e, at, "kvEventsReplayEndpoint", &s.kv_replay, err)) {
        return unexpected(err);
      }
      if (s.pool.empty() || url.empty()) return unexpected("'" + at + "pool' and '" + at + "url' are required");
      bool found = false;
      for (const auto& [name, role] : roles) {
        if (name == s.pool) {
          s.role = role;
          found = true;
        }
      }
      if (!found) {
        return unexpected("'" + at + "pool' (\"" + s.pool + "\") names no pool in 'pools'; add {\"name\": \"" + s.pool +
                          "\", \"role\": \"decode\"} (or prefill / both) to 'pools'");
      }
      auto hp = parse_http_url(url);
      if (!hp) return unexpected("'" + at + "url' (\"" + url + "\") " + hp.error());
      s.host = hp->first;
      s.port = hp->second;
      for (const std::string* z : {&s.kv_events, &s.kv_replay}) {
        if (!z->empty() && z->rfind("tcp://", 0) != 0) {
          return unexpected("'" + at + "kvEventsEndpoint' (\"" + *z + "\") must look like tcp://HOST:PORT");
        }
      }
      if (auto r = e.find("dataParallelRank"); r != e.end() && !r->is_null()) {
        if (!r->is_number_integer() || r->get<std::int64_t>() < 0 || r->get<std::int64_t>() > 65535) {
          return unexpected("'" + at + "dataParallelRank' (" + r->dump() +
                            ") must be a whole number in 0..65535: the engine's data-parallel rank "
                            "(vLLM --data-parallel-rank)");
        }
        s.data_parallel_rank = r->get<std::int32_t>();
      }
      c.endpoints.push_back(std::move(s));
    }
  }
  return {};
}

}  // namespace disagg::router
