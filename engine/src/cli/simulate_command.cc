#include "simulate_command.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string_view>

#include "disagg/cost_model_config.h"

namespace disagg::cli {

namespace {

using nlohmann::json;

constexpr std::string_view kUsage =
    "usage: disagg-engine simulate --config FILE.json\n"
    "Simulates the deployment in FILE.json (pools, policy, workload, slo, seed; see engine/README.md)\n"
    "on a virtual clock and prints a JSON summary: TTFT/TPOT/ITL/E2E percentiles, goodput, throughput,\n"
    "prefix-cache hit rate, utilization, KV transfer bytes.\n";

// Cost-model sections of one pool: the pool's own section (an override object) wins key by key
// over the top-level one; pool.tensorParallel and pool.weightBytesPerRank win over both.
class PoolSource final : public ConfigSource {
 public:
  PoolSource(const json& top, const json& pool) : top_(top), pool_(pool) {}

  Lookup section(std::string_view name) const override {
    const Lookup a = object_at(top_, name), b = object_at(pool_, name);
    if (a == Lookup::wrong_type || b == Lookup::wrong_type) return Lookup::wrong_type;
    return (a == Lookup::found || b == Lookup::found) ? Lookup::found : Lookup::missing;
  }

  Lookup number(std::string_view section, std::string_view key, double* out) const override {
    if (section == "parallel" && key == "tensorParallel") {
      if (const Lookup l = scalar(pool_, "tensorParallel", out); l != Lookup::missing) return l;
    }
    if (section == "model" && key == "weightBytesPerRank") {
      if (const Lookup l = scalar(pool_, "weightBytesPerRank", out); l != Lookup::missing) return l;
      double base = 0, base_tp = 1, tp = 1;
      const Lookup w = merged(section, key, &base);
      if (w != Lookup::found) return w;
      if (merged("parallel", "tensorParallel", &base_tp) != Lookup::found) base_tp = 1;
      if (scalar(pool_, "tensorParallel", &tp) != Lookup::found) tp = base_tp;
      // Pure tensor parallelism splits the weights evenly: rescale to the pool's TP size.
      *out = base * base_tp / tp;
      return Lookup::found;
    }
    return merged(section, key, out);
  }

 private:
  static Lookup object_at(const json& j, std::string_view name) {
    auto it = j.find(std::string(name));
    if (it == j.end() || it->is_null()) return Lookup::missing;
    return it->is_object() ? Lookup::found : Lookup::wrong_type;
  }
  static Lookup scalar(const json& obj, std::string_view key, double* out) {
    auto it = obj.find(std::string(key));
    if (it == obj.end() || it->is_null()) return Lookup::missing;
    if (!it->is_number()) return Lookup::wrong_type;
    *out = it->get<double>();
    return Lookup::found;
  }
  Lookup merged(std::string_view section, std::string_view key, double* out) const {
    if (object_at(pool_, section) == Lookup::found) {
      if (const Lookup l = scalar(pool_.at(std::string(section)), key, out); l != Lookup::missing) return l;
    }
    if (object_at(top_, section) == Lookup::found) return scalar(top_.at(std::string(section)), key, out);
    return Lookup::missing;
  }

  const json& top_;
  const json& pool_;
};

// Small typed readers: each failure names the JSON path, the value and the fix.
struct Reader {
  std::string error;

  bool fail(const std::string& m) {
    if (error.empty()) error = m;
    return false;
  }
  static std::string show(const json& v) { return v.dump(); }
  static std::string full(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }

  bool number(const json& obj, const std::string& path, const char* key, double* out, double min,
              bool exclusive = false) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return true;  // keep the default
    if (!it->is_number()) return fail("'" + full(path, key) + "' (" + show(*it) + ") must be a number");
    const double v = it->get<double>();
    if (!std::isfinite(v) || (exclusive ? v <= min : v < min)) {
      return fail("'" + full(path, key) + "' (" + show(*it) + ") must be " + (exclusive ? "> " : ">= ") +
                  json(min).dump());
    }
    *out = v;
    return true;
  }
  template <class Int>
  bool integer(const json& obj, const std::string& path, const char* key, Int* out, double min) {
    double v = static_cast<double>(*out);
    if (!number(obj, path, key, &v, min)) return false;
    if (v != std::floor(v) || v > 2147483647.0 * 1024) {
      return fail("'" + full(path, key) + "' (" + json(v).dump() + ") must be a whole number");
    }
    *out = static_cast<Int>(v);
    return true;
  }
  bool string(const json& obj, const std::string& path, const char* key, std::string* out) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return true;
    if (!it->is_string()) return fail("'" + full(path, key) + "' (" + show(*it) + ") must be a string");
    *out = it->get<std::string>();
    return true;
  }
  bool object(const json& obj, const std::string& path, const char* key, const json** out) {
    auto it = obj.find(key);
    *out = nullptr;
    if (it == obj.end() || it->is_null()) return true;
    if (!it->is_object()) return fail("'" + full(path, key) + "' must be an object");
    *out = &*it;
    return true;
  }
  bool known_keys(const json& obj, const std::string& path, std::initializer_list<std::string_view> keys) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (it.key() == "$comment") continue;
      bool ok = false;
      for (auto k : keys) ok = ok || it.key() == k;
      if (!ok) return fail("'" + path + "." + it.key() + "' is not a known key; check the spelling (engine/README.md, Simulation)");
    }
    return true;
  }

  bool length(const json& parent, const std::string& path, const char* key, LengthDist* d) {
    const json* o = nullptr;
    if (!object(parent, path, key, &o) || !o) return error.empty();
    const std::string p = path + "." + key;
    if (!known_keys(*o, p, {"distribution", "mean", "stddev", "min", "max"})) return false;
    std::string kind = "fixed";
    if (!string(*o, p, "distribution", &kind)) return false;
    if (kind == "fixed") d->kind = LengthDist::Kind::fixed;
    else if (kind == "uniform") d->kind = LengthDist::Kind::uniform;
    else if (kind == "lognormal") d->kind = LengthDist::Kind::lognormal;
    else return fail("'" + p + ".distribution' (\"" + kind + "\") must be fixed, uniform or lognormal");
    return number(*o, p, "mean", &d->mean, 1) && number(*o, p, "stddev", &d->stddev, 0) &&
           integer(*o, p, "min", &d->min, 1) && integer(*o, p, "max", &d->max, 1);
  }
};

bool read_workload(Reader& rd, const json& w, std::uint64_t seed, SimulationSetup* out) {
  const std::string p = "workload";
  if (!rd.known_keys(w, p, {"kind", "requests", "durationSeconds", "arrival", "inputTokens", "outputTokens",
                            "vocab", "tenants", "chat", "agentic", "trace"})) {
    return false;
  }
  WorkloadSpec& s = out->workload;
  s.seed = seed;
  std::string kind = "single";
  if (!rd.string(w, p, "kind", &kind)) return false;
  if (kind == "single") s.kind = WorkloadKind::single;
  else if (kind == "chat") s.kind = WorkloadKind::chat;
  else if (kind == "agentic") s.kind = WorkloadKind::agentic;
  else if (kind == "trace") s.kind = WorkloadKind::trace;
  else return rd.fail("'workload.kind' (\"" + kind + "\") must be single, chat, agentic or trace");
  if (!rd.integer(w, p, "requests", &s.max_requests, 0) || !rd.number(w, p, "durationSeconds", &s.duration_seconds, 0) ||
      !rd.integer(w, p, "vocab", &s.vocab, 2) || !rd.length(w, p, "inputTokens", &s.input) ||
      !rd.length(w, p, "outputTokens", &s.output)) {
    return false;
  }
  const json* o = nullptr;
  if (!rd.object(w, p, "arrival", &o)) return false;
  if (o) {
    const std::string ap = "workload.arrival";
    if (!rd.known_keys(*o, ap, {"process", "ratePerSecond", "cv", "burstFactor", "burstShare", "meanBurstSeconds"})) return false;
    std::string proc = "poisson";
    if (!rd.string(*o, ap, "process", &proc)) return false;
    if (proc == "poisson") s.arrival.kind = ArrivalProcess::Kind::poisson;
    else if (proc == "gamma") s.arrival.kind = ArrivalProcess::Kind::gamma;
    else if (proc == "mmpp") s.arrival.kind = ArrivalProcess::Kind::mmpp;
    else return rd.fail("'workload.arrival.process' (\"" + proc + "\") must be poisson, gamma or mmpp");
    if (!rd.number(*o, ap, "ratePerSecond", &s.arrival.rate_per_second, 0, true) ||
        !rd.number(*o, ap, "cv", &s.arrival.cv, 0, true) || !rd.number(*o, ap, "burstFactor", &s.arrival.burst_factor, 1, true) ||
        !rd.number(*o, ap, "burstShare", &s.arrival.burst_share, 0, true) ||
        !rd.number(*o, ap, "meanBurstSeconds", &s.arrival.mean_burst_seconds, 0, true)) {
      return false;
    }
  }
  if (!rd.object(w, p, "tenants", &o)) return false;
  if (o) {
    const std::string tp = "workload.tenants";
    if (!rd.known_keys(*o, tp, {"count", "systemPromptTokens", "zipfExponent"}) ||
        !rd.integer(*o, tp, "count", &s.tenants, 0) || !rd.integer(*o, tp, "systemPromptTokens", &s.system_prompt_tokens, 0) ||
        !rd.number(*o, tp, "zipfExponent", &s.zipf_exponent, 0)) {
      return false;
    }
  }
  if (!rd.object(w, p, "chat", &o)) return false;
  if (o) {
    const std::string cp = "workload.chat";
    if (!rd.known_keys(*o, cp, {"turns", "followupInputTokens", "thinkTimeSeconds", "maxContextTokens"}) ||
        !rd.length(*o, cp, "turns", &s.turns) || !rd.length(*o, cp, "followupInputTokens", &s.followup_input) ||
        !rd.number(*o, cp, "thinkTimeSeconds", &s.think_time_seconds, 0, true) ||
        !rd.integer(*o, cp, "maxContextTokens", &s.max_context_tokens, 1)) {
      return false;
    }
  }
  if (!rd.object(w, p, "agentic", &o)) return false;
  if (o) {
    const std::string gp = "workload.agentic";
    if (!rd.known_keys(*o, gp, {"fanout", "depth", "toolOutputTokens", "stepGapSeconds"}) ||
        !rd.integer(*o, gp, "fanout", &s.fanout, 1) || !rd.integer(*o, gp, "depth", &s.depth, 1) ||
        !rd.length(*o, gp, "toolOutputTokens", &s.tool_output) ||
        !rd.number(*o, gp, "stepGapSeconds", &s.step_gap_seconds, 0, true)) {
      return false;
    }
  }
  if (!rd.object(w, p, "trace", &o)) return false;
  if (s.kind == WorkloadKind::trace) {
    if (!o) return rd.fail("'workload.trace' is required when 'workload.kind' is trace; give {\"path\": \"FILE.jsonl\"}");
    const std::string tp = "workload.trace";
    out->from_trace = true;
    out->trace.seed = seed;
    out->trace.vocab = s.vocab;
    if (!rd.known_keys(*o, tp, {"path", "blockTokens", "timeScale", "maxRecords"}) ||
        !rd.string(*o, tp, "path", &out->trace_path) || !rd.integer(*o, tp, "blockTokens", &out->trace.trace_block_tokens, 1) ||
        !rd.number(*o, tp, "timeScale", &out->trace.time_scale, 0, true) ||
        !rd.integer(*o, tp, "maxRecords", &out->trace.max_records, 1)) {
      return false;
    }
    if (out->trace_path.empty()) return rd.fail("'workload.trace.path' is required; give the JSONL file");
  }
  return true;
}

}  // namespace

Expected<SimulationSetup, std::string> read_simulation(const json& doc) {
  Reader rd;
  SimulationSetup out;
  if (!doc.is_object()) return unexpected(std::string("the configuration must be a JSON object"));
  std::uint64_t seed = 1;
  if (!rd.integer(doc, "", "seed", &seed, 0)) return unexpected(rd.error);

  // Block size: the workers' --block-size, kept in router.kvBlockSize.
  std::int32_t block_size = 16;
  if (const json* router = nullptr; rd.object(doc, "", "router", &router) && router) {
    if (!rd.integer(*router, "router", "kvBlockSize", &block_size, 1)) return unexpected(rd.error);
  }
  if (!rd.error.empty()) return unexpected(rd.error);

  // Policy.
  RouterSpec& router = out.config.router;
  if (const json* pol = nullptr; rd.object(doc, "", "policy", &pol) && pol) {
    std::string name = "round-robin";
    if (!rd.string(*pol, "policy", "name", &name)) return unexpected(rd.error);
    // The ConfigMap's names map onto the engine's policies.
    if (name == "kv-aware") name = "llm-d";
    else if (name == "least-loaded") name = "least-load";
    router.policy = name;
    if (const json* wts = nullptr; rd.object(*pol, "policy", "weights", &wts) && wts) {
      if (!rd.number(*wts, "policy.weights", "prefix", &router.options.prefix_weight, 0) ||
          !rd.number(*wts, "policy.weights", "queue", &router.options.queue_weight, 0) ||
          !rd.number(*wts, "policy.weights", "kvUsage", &router.options.kv_utilization_weight, 0)) {
        return unexpected(rd.error);
      }
    }
    if (const json* dis = nullptr; rd.object(*pol, "policy", "disaggregation", &dis) && dis) {
      if (!rd.integer(*dis, "policy.disaggregation", "minUncachedPromptTokens", &router.decider.min_uncached_tokens, 0)) {
        return unexpected(rd.error);
      }
    }
    if (const json* opts = nullptr; rd.object(*pol, "policy", "options", &opts) && opts) {
      for (auto it = opts->begin(); it != opts->end(); ++it) {
        if (!it->is_number()) return unexpected("'policy.options." + it.key() + "' must be a number");
        auto set = set_policy_option(router.options, it.key(), it->get<double>());
        if (!set) return unexpected(set.error().message);
      }
    }
    std::string source = "index";
    if (!rd.string(*pol, "policy", "prefixSource", &source)) return unexpected(rd.error);
    if (source != "index" && source != "history") {
      return unexpected("'policy.prefixSource' (\"" + source + "\") must be index (precise, event-fed) or history (approximate)");
    }
    router.precise_prefix = source == "index";
  }
  if (!rd.error.empty()) return unexpected(rd.error);

  // SLO.
  if (const json* slo = nullptr; rd.object(doc, "", "slo", &slo) && slo) {
    if (!rd.number(*slo, "slo", "ttftSeconds", &out.config.slo.ttft_seconds, 0, true) ||
        !rd.number(*slo, "slo", "tpotSeconds", &out.config.slo.tpot_seconds, 0, true)) {
      return unexpected(rd.error);
    }
  }
  if (!rd.error.empty()) return unexpected(rd.error);

  // Pools.
  auto pools = doc.find("pools");
  if (pools == doc.end() || !pools->is_array() || pools->empty()) {
    return unexpected(std::string("'pools' must be a non-empty array; e.g. [{\"name\": \"workers\", \"role\": \"both\", \"replicas\": 4, \"kvTokensPerReplica\": 400000}]"));
  }
  for (std::size_t i = 0; i < pools->size(); ++i) {
    const json& pj = (*pools)[i];
    const std::string p = "pools[" + std::to_string(i) + "]";
    if (!pj.is_object()) return unexpected("'" + p + "' must be an object");
    PoolSpec spec;
    std::string role;
    if (!rd.string(pj, p, "name", &spec.name) || !rd.string(pj, p, "role", &role)) return unexpected(rd.error);
    if (role == "both") spec.role = WorkerRole::aggregated;
    else if (role == "prefill") spec.role = WorkerRole::prefill;
    else if (role == "decode") spec.role = WorkerRole::decode;
    else return unexpected("'" + p + ".role' (\"" + role + "\") must be both, prefill or decode");
    auto cm = read_cost_model(PoolSource(doc, pj));
    if (!cm) return unexpected("'" + p + "' (" + spec.name + "): " + cm.error().message());
    spec.cost = cm->params();
    SchedulerConfig& sc = spec.scheduler;
    sc.block_size = block_size;
    double kv_tokens = 0, kv_bytes = 0;
    if (!rd.integer(pj, p, "replicas", &spec.replicas, 1) ||
        !rd.integer(pj, p, "maxConcurrencyPerReplica", &sc.max_num_seqs, 1) ||
        !rd.integer(pj, p, "maxBatchedTokens", &sc.max_num_batched_tokens, 1) ||
        !rd.integer(pj, p, "maxWaitingRequests", &sc.max_waiting, 1) ||
        !rd.number(pj, p, "kvTokensPerReplica", &kv_tokens, 0) || !rd.number(pj, p, "kvCacheBytesPerRank", &kv_bytes, 0)) {
      return unexpected(rd.error);
    }
    if (auto it = pj.find("prefixCaching"); it != pj.end()) {
      if (!it->is_boolean()) return unexpected("'" + p + ".prefixCaching' must be true or false");
      sc.enable_prefix_caching = it->get<bool>();
    }
    if (kv_tokens <= 0 && kv_bytes > 0) kv_tokens = kv_bytes / spec.cost.kv_bytes_per_token_per_rank;
    if (kv_tokens < block_size) {
      return unexpected("'" + p + ".kvTokensPerReplica' (" + json(kv_tokens).dump() +
                        ") must hold at least one block of " + std::to_string(block_size) +
                        " tokens; give kvTokensPerReplica or kvCacheBytesPerRank (from the sizing of the pool)");
    }
    sc.num_blocks = static_cast<std::int32_t>(std::min(kv_tokens / block_size, 268435456.0));
    out.config.pools.push_back(spec);
  }

  // Workload.
  const json* w = nullptr;
  if (!rd.object(doc, "", "workload", &w)) return unexpected(rd.error);
  if (!w) return unexpected(std::string("'workload' is required; e.g. {\"kind\": \"single\", \"requests\": 1000, \"arrival\": {\"ratePerSecond\": 10}}"));
  if (!read_workload(rd, *w, seed, &out)) return unexpected(rd.error);
  return out;
}

namespace {

int usage_error(const std::string& why) {
  std::cerr << "disagg-engine simulate: " << why << "\n" << kUsage;
  return 2;
}

}  // namespace

int run_simulate_command(int argc, char** argv) {
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (flag != "--config") return usage_error("unknown flag '" + std::string(flag) + "'");
    if (i + 1 >= argc) return usage_error("'--config' needs a value");
    config_path = argv[++i];
  }
  if (config_path.empty()) return usage_error("--config FILE.json is required");
  std::ifstream in(config_path);
  if (!in) {
    std::cerr << "disagg-engine simulate: cannot read '" << config_path << "': " << std::strerror(errno) << "\n";
    return 1;
  }
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    std::cerr << "disagg-engine simulate: '" << config_path << "' is not valid JSON\n";
    return 1;
  }
  auto setup = read_simulation(doc);
  if (!setup) {
    std::cerr << "disagg-engine simulate: " << setup.error() << "\n";
    return 1;
  }
  auto sim = Simulator::create(setup->config);
  if (!sim) {
    std::cerr << "disagg-engine simulate: " << sim.error().message << "\n";
    return 1;
  }
  auto workload = setup->from_trace ? Workload::from_trace_file(setup->trace_path, setup->trace)
                                    : Workload::create(setup->workload);
  if (!workload) {
    std::cerr << "disagg-engine simulate: " << workload.error().message << "\n";
    return 1;
  }
  auto result = sim->run(*workload);
  if (!result) {
    std::cerr << "disagg-engine simulate: " << result.error().message << "\n";
    return 1;
  }
  std::cout << to_json(result->summary) << "\n";
  return 0;
}

}  // namespace disagg::cli
