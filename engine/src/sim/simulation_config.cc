// The one reader of the simulation and planner keys (see disagg/simulation_config.h). Moved here
// from the binary's simulate command so that the addon, which has no JSON library, reads the same
// keys with the same messages.
#include "disagg/simulation_config.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "disagg/cost_model_config.h"
#include "disagg/routing_policy_config.h"

namespace disagg {

namespace {

Lookup object_at(const JsonValue& j, std::string_view name) {
  const JsonValue* v = j.find(name);
  if (!v || v->is_null()) return Lookup::missing;
  return v->is_object() ? Lookup::found : Lookup::wrong_type;
}

Lookup scalar(const JsonValue& obj, std::string_view key, double* out) {
  const JsonValue* v = obj.find(key);
  if (!v || v->is_null()) return Lookup::missing;
  if (!v->is_number()) return Lookup::wrong_type;
  *out = v->as_number();
  return Lookup::found;
}

// Cost-model sections of one pool: the pool's own section (an override object) wins key by key
// over the top-level one; pool.tensorParallel, pool.pipelineParallel and pool.weightBytesPerRank
// win over both.
class PoolSource final : public ConfigSource {
 public:
  PoolSource(const JsonValue& top, const JsonValue& pool) : top_(top), pool_(pool) {}

  Lookup section(std::string_view name) const override {
    const Lookup a = object_at(top_, name), b = object_at(pool_, name);
    if (a == Lookup::wrong_type || b == Lookup::wrong_type) return Lookup::wrong_type;
    if (a == Lookup::found || b == Lookup::found) return Lookup::found;
    // The pool's own keys fill the section even when no object declares it.
    const bool own_keys = name == "parallel"
                              ? pool_.find("tensorParallel") != nullptr || pool_.find("pipelineParallel") != nullptr
                              : name == "model" && pool_.find("weightBytesPerRank") != nullptr;
    return own_keys ? Lookup::found : Lookup::missing;
  }

  Lookup number(std::string_view section, std::string_view key, double* out) const override {
    if (section == "parallel" && (key == "tensorParallel" || key == "pipelineParallel")) {
      if (const Lookup l = scalar(pool_, key, out); l != Lookup::missing) return l;
    }
    if (section == "model" && key == "weightBytesPerRank") {
      if (const Lookup l = scalar(pool_, "weightBytesPerRank", out); l != Lookup::missing) return l;
      if (const Lookup l = own(section, key, out); l != Lookup::missing) return l;
      double base = 0, base_tp = 1, tp = 1, base_pp = 1, pp = 1;
      const Lookup w = top(section, key, &base);
      if (w != Lookup::found) return w;
      if (top("parallel", "tensorParallel", &base_tp) != Lookup::found) base_tp = 1;
      if (number("parallel", "tensorParallel", &tp) != Lookup::found) tp = base_tp;
      if (top("parallel", "pipelineParallel", &base_pp) != Lookup::found) base_pp = 1;
      if (number("parallel", "pipelineParallel", &pp) != Lookup::found) pp = base_pp;
      // The weights are the top level's: tensor and pipeline parallelism split them evenly, so
      // rescale them to the pool's TP x PP size.
      *out = base * base_tp * base_pp / (tp * pp);
      return Lookup::found;
    }
    if (const Lookup l = own(section, key, out); l != Lookup::missing) return l;
    return top(section, key, out);
  }

 private:
  Lookup own(std::string_view section, std::string_view key, double* out) const {
    if (object_at(pool_, section) != Lookup::found) return Lookup::missing;
    return scalar(*pool_.find(section), key, out);
  }
  Lookup top(std::string_view section, std::string_view key, double* out) const {
    if (object_at(top_, section) != Lookup::found) return Lookup::missing;
    return scalar(*top_.find(section), key, out);
  }

  const JsonValue& top_;
  const JsonValue& pool_;
};

// Small typed readers: each failure names the JSON path, the value and the fix.
struct Reader {
  std::string error;

  bool fail(const std::string& m) {
    if (error.empty()) error = m;
    return false;
  }
  static std::string full(const std::string& path, std::string_view key) {
    std::string s = path;
    if (!s.empty()) s += '.';
    s += key;
    return s;
  }
  // Concatenation by +=: g++ 12 reports a false -Wrestrict on chains of operator+ here.
  static std::string cat(std::initializer_list<std::string_view> parts) {
    std::string s;
    for (std::string_view part : parts) s += part;
    return s;
  }

  bool number(const JsonValue& obj, const std::string& path, std::string_view key, double* out, double min,
              bool exclusive = false) {
    const JsonValue* v = obj.find(key);
    if (!v || v->is_null()) return true;  // keep the default
    if (!v->is_number()) return fail(cat({"'", full(path, key), "' (", v->dump(), ") must be a number"}));
    const double d = v->as_number();
    if (!std::isfinite(d) || (exclusive ? d <= min : d < min)) {
      return fail(
          cat({"'", full(path, key), "' (", v->dump(), ") must be ", exclusive ? "> " : ">= ", json_number(min)}));
    }
    *out = d;
    return true;
  }
  bool at_most(const JsonValue& obj, const std::string& path, std::string_view key, double value, double max) {
    if (value <= max) return true;
    (void)obj;
    return fail(cat({"'", full(path, key), "' (", json_number(value), ") must be <= ", json_number(max)}));
  }
  template <class Int>
  bool integer(const JsonValue& obj, const std::string& path, std::string_view key, Int* out, double min) {
    double v = static_cast<double>(*out);
    if (!number(obj, path, key, &v, min)) return false;
    if (v != std::floor(v) || v > 2147483647.0 * 1024) {
      return fail(cat({"'", full(path, key), "' (", json_number(v), ") must be a whole number"}));
    }
    *out = static_cast<Int>(v);
    return true;
  }
  bool string(const JsonValue& obj, const std::string& path, std::string_view key, std::string* out) {
    const JsonValue* v = obj.find(key);
    if (!v || v->is_null()) return true;
    if (!v->is_string()) return fail(cat({"'", full(path, key), "' (", v->dump(), ") must be a string"}));
    *out = v->as_string();
    return true;
  }
  bool boolean(const JsonValue& obj, const std::string& path, std::string_view key, bool* out) {
    const JsonValue* v = obj.find(key);
    if (!v || v->is_null()) return true;
    if (!v->is_bool()) return fail(cat({"'", full(path, key), "' (", v->dump(), ") must be true or false"}));
    *out = v->as_bool();
    return true;
  }
  bool object(const JsonValue& obj, const std::string& path, std::string_view key, const JsonValue** out) {
    const JsonValue* v = obj.find(key);
    *out = nullptr;
    if (!v || v->is_null()) return true;
    if (!v->is_object()) return fail(cat({"'", full(path, key), "' (", v->dump(), ") must be an object"}));
    *out = v;
    return true;
  }
  bool known_keys(const JsonValue& obj, const std::string& path, std::initializer_list<std::string_view> keys,
                  std::string_view where = "engine/README.md, Simulation") {
    for (const auto& m : obj.members()) {
      if (m.first == "$comment") continue;
      bool ok = false;
      for (auto k : keys) ok = ok || m.first == k;
      if (!ok) {
        std::string known;
        for (auto k : keys) {
          if (!known.empty()) known += ", ";
          known += k;
        }
        return fail(cat({"'", full(path, m.first), "' is not a known key; use one of ", known, " (", where, ")"}));
      }
    }
    return true;
  }

  bool length(const JsonValue& parent, const std::string& path, std::string_view key, LengthDist* d) {
    const JsonValue* o = nullptr;
    if (!object(parent, path, key, &o) || !o) return error.empty();
    const std::string p = full(path, key);
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

// `workload.arrival.stages`: [{ratePerSecond, durationSeconds}, ...], both required in each.
bool read_stages(Reader& rd, const JsonValue& arrival, std::vector<ArrivalStage>* out) {
  const std::string ap = "workload.arrival.stages";
  const JsonValue* arr = arrival.find("stages");
  if (!arr || arr->is_null()) return true;
  if (!arr->is_array() || arr->items().empty() || arr->items().size() > kMaxArrivalStages) {
    return rd.fail("'" + ap + "' (" + arr->dump() + ") must be an array of 1 to " + std::to_string(kMaxArrivalStages) +
                   " stages, e.g. [{\"ratePerSecond\": 8, \"durationSeconds\": 600}, {\"ratePerSecond\": 20, "
                   "\"durationSeconds\": 600}]");
  }
  for (std::size_t i = 0; i < arr->items().size(); ++i) {
    const JsonValue& sj = arr->items()[i];
    const std::string sp = ap + "[" + std::to_string(i) + "]";
    if (!sj.is_object())
      return rd.fail("'" + sp + "' (" + sj.dump() +
                     ") must be an object {\"ratePerSecond\": R, \"durationSeconds\": S}");
    if (!rd.known_keys(sj, sp, {"ratePerSecond", "durationSeconds"})) return false;
    for (const auto* key : {"ratePerSecond", "durationSeconds"}) {
      const JsonValue* v = sj.find(key);
      if (!v || v->is_null())
        return rd.fail("'" + sp + "." + key + "' is required; give both ratePerSecond and durationSeconds");
    }
    ArrivalStage st;
    if (!rd.number(sj, sp, "ratePerSecond", &st.rate_per_second, 0, true) ||
        !rd.number(sj, sp, "durationSeconds", &st.duration_seconds, 0, true)) {
      return false;
    }
    out->push_back(st);
  }
  return true;
}

bool read_workload(Reader& rd, const JsonValue& w, std::uint64_t seed, SimulationSetup* out) {
  const std::string p = "workload";
  if (!rd.known_keys(w, p,
                     {"kind", "requests", "durationSeconds", "concurrency", "arrival", "inputTokens", "outputTokens",
                      "vocab", "tenants", "api", "chat", "agentic", "trace"})) {
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
  if (!rd.integer(w, p, "requests", &s.max_requests, 0) ||
      !rd.number(w, p, "durationSeconds", &s.duration_seconds, 0) ||
      !rd.integer(w, p, "concurrency", &s.concurrency, 0) || !rd.integer(w, p, "vocab", &s.vocab, 2) ||
      !rd.length(w, p, "inputTokens", &s.input) || !rd.length(w, p, "outputTokens", &s.output)) {
    return false;
  }
  const JsonValue* o = nullptr;
  if (!rd.object(w, p, "arrival", &o)) return false;
  if (o) {
    const std::string ap = "workload.arrival";
    if (!rd.known_keys(*o, ap,
                       {"process", "ratePerSecond", "cv", "burstFactor", "burstShare", "meanBurstSeconds", "stages"})) {
      return false;
    }
    std::string proc = "poisson";
    if (!rd.string(*o, ap, "process", &proc)) return false;
    if (proc == "poisson") s.arrival.kind = ArrivalProcess::Kind::poisson;
    else if (proc == "gamma") s.arrival.kind = ArrivalProcess::Kind::gamma;
    else if (proc == "mmpp") s.arrival.kind = ArrivalProcess::Kind::mmpp;
    else if (proc == "constant") s.arrival.kind = ArrivalProcess::Kind::constant;
    else return rd.fail("'workload.arrival.process' (\"" + proc + "\") must be poisson, gamma, mmpp or constant");
    if (!rd.number(*o, ap, "ratePerSecond", &s.arrival.rate_per_second, 0, true) ||
        !rd.number(*o, ap, "cv", &s.arrival.cv, 0, true) ||
        !rd.number(*o, ap, "burstFactor", &s.arrival.burst_factor, 1, true) ||
        !rd.number(*o, ap, "burstShare", &s.arrival.burst_share, 0, true) ||
        !rd.number(*o, ap, "meanBurstSeconds", &s.arrival.mean_burst_seconds, 0, true) ||
        !read_stages(rd, *o, &s.arrival.stages)) {
      return false;
    }
    // Stages end the run: without an explicit request limit, every stage's arrivals are sent.
    if (!s.arrival.stages.empty() && (!w.find("requests") || w.find("requests")->is_null())) s.max_requests = 0;
  }
  if (!rd.object(w, p, "tenants", &o)) return false;
  if (o) {
    const std::string tp = "workload.tenants";
    std::string popularity = "zipf";
    std::int64_t users = 0;
    if (!rd.known_keys(*o, tp, {"count", "systemPromptTokens", "zipfExponent", "popularity", "usersPerTenant"}) ||
        !rd.integer(*o, tp, "count", &s.tenants, 0) ||
        !rd.integer(*o, tp, "systemPromptTokens", &s.system_prompt_tokens, 0) ||
        !rd.number(*o, tp, "zipfExponent", &s.zipf_exponent, 0) || !rd.string(*o, tp, "popularity", &popularity) ||
        !rd.integer(*o, tp, "usersPerTenant", &users, 0)) {
      return false;
    }
    if (popularity == "zipf") s.popularity = TenantPopularity::zipf;
    else if (popularity == "equal") s.popularity = TenantPopularity::equal;
    else
      return rd.fail("'workload.tenants.popularity' (\"" + popularity +
                     "\") must be zipf (weights 1/k^zipfExponent) or equal (tenants in turn)");
    if (users > kMaxPromptSlots) {
      return rd.fail("'workload.tenants.usersPerTenant' (" + std::to_string(users) +
                     ") must be <= " + std::to_string(kMaxPromptSlots) + "; use fewer users");
    }
    s.users_per_tenant = static_cast<std::int32_t>(users);
  }
  std::string api = "completions";
  if (!rd.string(w, p, "api", &api)) return false;
  if (api == "completions") s.api = PromptApi::completions;
  else if (api == "chat") s.api = PromptApi::chat;
  else
    return rd.fail("'workload.api' (\"" + api +
                   "\") must be completions (the prompt as given) or chat (with the chat template's tokens)");
  if (s.api == PromptApi::chat && s.kind == WorkloadKind::trace) {
    return rd.fail(
        "'workload.api' (\"chat\") does not apply to kind trace: a trace's input_length already counts every prompt "
        "token; drop api");
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
    if (!o)
      return rd.fail("'workload.trace' is required when 'workload.kind' is trace; give {\"path\": \"FILE.jsonl\"}");
    const std::string tp = "workload.trace";
    out->from_trace = true;
    out->trace.seed = seed;
    out->trace.vocab = s.vocab;
    if (!rd.known_keys(*o, tp, {"path", "blockTokens", "timeScale", "maxRecords"}) ||
        !rd.string(*o, tp, "path", &out->trace_path) ||
        !rd.integer(*o, tp, "blockTokens", &out->trace.trace_block_tokens, 1) ||
        !rd.number(*o, tp, "timeScale", &out->trace.time_scale, 0, true) ||
        !rd.integer(*o, tp, "maxRecords", &out->trace.max_records, 1)) {
      return false;
    }
    if (out->trace_path.empty()) return rd.fail("'workload.trace.path' is required; give the JSONL file");
  }
  return true;
}

// A pool's `kvTiers` array: lower KV tiers of each replica. Field types and ranges are checked
// here; order, capacity in blocks and the one remote store capacity in Simulator::create().
bool read_kv_tiers(Reader& rd, const JsonValue& pj, const std::string& p, std::vector<KvTierSpec>* out) {
  const JsonValue* arr = pj.find("kvTiers");
  if (!arr || arr->is_null()) return true;
  const std::string ap = Reader::full(p, "kvTiers");
  if (!arr->is_array()) {
    return rd.fail("'" + ap + "' (" + arr->dump() +
                   ") must be an array, e.g. [{\"tier\": \"host\", \"capacityBytes\": 5e11, \"readBytesPerSecond\": "
                   "5e10, \"writeBytesPerSecond\": 5e10}]");
  }
  for (std::size_t j = 0; j < arr->items().size(); ++j) {
    const JsonValue& tj = arr->items()[j];
    const std::string tp = ap + "[" + std::to_string(j) + "]";
    if (!tj.is_object()) return rd.fail("'" + tp + "' (" + tj.dump() + ") must be an object");
    if (!rd.known_keys(tj, tp,
                       {"tier", "capacityBytes", "readBytesPerSecond", "writeBytesPerSecond", "latencySeconds",
                        "maxWriteBacklogSeconds"},
                       "engine/README.md, Lower KV tiers")) {
      return false;
    }
    KvTierSpec t;
    std::string name;
    if (!rd.string(tj, tp, "tier", &name)) return false;
    if (name == "host") t.tier = KvTier::cpu;
    else if (name == "disk") t.tier = KvTier::disk;
    else if (name == "remote") t.tier = KvTier::remote;
    else if (name.empty()) return rd.fail("'" + tp + ".tier' is required; use host, disk or remote");
    else return rd.fail("'" + tp + ".tier' (\"" + name + "\") must be host, disk or remote");
    for (const auto* key : {"capacityBytes", "readBytesPerSecond", "writeBytesPerSecond"}) {
      const JsonValue* v = tj.find(key);
      if (!v || v->is_null()) {
        return rd.fail("'" + tp + "." + key + "' is required for the " + name + " tier (bytes" +
                       (std::string_view(key) == "capacityBytes" ? ")" : "/s)"));
      }
    }
    if (!rd.number(tj, tp, "capacityBytes", &t.capacity_bytes, 0, true) ||
        !rd.number(tj, tp, "readBytesPerSecond", &t.read_bytes_per_second, 0, true) ||
        !rd.number(tj, tp, "writeBytesPerSecond", &t.write_bytes_per_second, 0, true) ||
        !rd.number(tj, tp, "latencySeconds", &t.latency_seconds, 0) ||
        !rd.number(tj, tp, "maxWriteBacklogSeconds", &t.max_write_backlog_seconds, 0)) {
      return false;
    }
    out->push_back(t);
  }
  return true;
}

// One pool entry (or a planner option, a pool template): cost model merged over the top level,
// scheduler limits, KV capacity. `p` is the entry's JSON path for messages.
bool read_pool(Reader& rd, const JsonValue& doc, const JsonValue& pj, const std::string& p, std::int32_t block_size,
               PoolSpec* spec) {
  auto cm = read_cost_model(PoolSource(doc, pj));
  if (!cm) return rd.fail("'" + p + "' (" + spec->name + "): " + cm.error().message());
  spec->cost = cm->params();
  SchedulerConfig& sc = spec->scheduler;
  sc.block_size = block_size;
  double kv_tokens = 0, kv_bytes = 0;
  if (!rd.integer(pj, p, "maxConcurrencyPerReplica", &sc.max_num_seqs, 1) ||
      !rd.integer(pj, p, "maxBatchedTokens", &sc.max_num_batched_tokens, 1) ||
      !rd.integer(pj, p, "maxWaitingRequests", &sc.max_waiting, 1) ||
      !rd.number(pj, p, "kvTokensPerReplica", &kv_tokens, 0) ||
      !rd.number(pj, p, "kvCacheBytesPerRank", &kv_bytes, 0) ||
      !rd.boolean(pj, p, "prefixCaching", &sc.enable_prefix_caching) ||
      !rd.boolean(pj, p, "chunkedPrefill", &sc.chunked_prefill) ||
      !rd.boolean(pj, p, "asyncScheduling", &sc.async_scheduling) || !read_kv_tiers(rd, pj, p, &spec->kv_tiers)) {
    return false;
  }
  std::string first_token = "decode-step";
  if (!rd.string(pj, p, "firstTokenAt", &first_token)) return false;
  if (first_token == "decode-step") spec->first_token_at = FirstTokenAt::decode_step;
  else if (first_token == "transfer") spec->first_token_at = FirstTokenAt::transfer;
  else if (first_token == "prefill") spec->first_token_at = FirstTokenAt::prefill;
  else {
    return rd.fail("'" + Reader::full(p, "firstTokenAt") + "' (\"" + first_token +
                   "\") must be decode-step (vLLM), transfer (DistServe, SGLang) or prefill (TensorRT-LLM)");
  }
  if (kv_tokens <= 0 && kv_bytes > 0) kv_tokens = kv_bytes / spec->cost.kv_bytes_per_token_per_rank;
  if (kv_tokens < block_size) {
    return rd.fail("'" + p + ".kvTokensPerReplica' (" + json_number(kv_tokens) + ") must hold at least one block of " +
                   std::to_string(block_size) +
                   " tokens; give kvTokensPerReplica or kvCacheBytesPerRank (from the sizing of the pool)");
  }
  sc.num_blocks = static_cast<std::int32_t>(std::min(kv_tokens / block_size, 268435456.0));
  return true;
}

// `pools[i].autoscaling`: the pool's scaling rule and its replicas' provisioning time (engine/README.md,
// "Autoscaling"). Provisioning defaults: a new p5-class node through Karpenter and the EKS bootstrap
// (~4 min), a 10-20 GB vLLM image (~2 min), engine start with torch.compile and CUDA graphs (~1 min);
// the checkpoint legs only when given.
bool read_pool_autoscaling(Reader& rd, const JsonValue& pj, const std::string& p, PoolAutoscaling* out) {
  const JsonValue* a = nullptr;
  if (!rd.object(pj, p, "autoscaling", &a)) return false;
  if (!a) return true;
  const std::string ap = p + ".autoscaling";
  out->enabled = true;
  AutoscalePolicy& pol = out->policy;
  pol.max_replicas = -1;
  if (!rd.known_keys(*a, ap,
                     {"minReplicas", "maxReplicas", "target", "tolerance", "scaleUpStabilizationSeconds",
                      "scaleDownStabilizationSeconds", "scaleToZero", "idleSecondsBeforeZero", "provisioning"},
                     "engine/README.md, Autoscaling") ||
      !rd.integer(*a, ap, "minReplicas", &pol.min_replicas, 0) ||
      !rd.integer(*a, ap, "maxReplicas", &pol.max_replicas, 1) || !rd.number(*a, ap, "target", &pol.target, 0, true) ||
      !rd.number(*a, ap, "tolerance", &pol.tolerance, 0) ||
      !rd.number(*a, ap, "scaleUpStabilizationSeconds", &pol.scale_up_stabilization_seconds, 0) ||
      !rd.number(*a, ap, "scaleDownStabilizationSeconds", &pol.scale_down_stabilization_seconds, 0) ||
      !rd.boolean(*a, ap, "scaleToZero", &pol.scale_to_zero) ||
      !rd.number(*a, ap, "idleSecondsBeforeZero", &pol.idle_seconds_before_zero, 0)) {
    return false;
  }
  if (pol.max_replicas < 0) {
    return rd.fail("'" + ap + ".maxReplicas' is required; e.g. {\"minReplicas\": 1, \"maxReplicas\": 8}");
  }
  ProvisioningSpec& v = out->provisioning;
  v.node_start_seconds = kDefaultNodeStartSeconds;
  v.image_pull_seconds = kDefaultImagePullSeconds;
  v.engine_start_seconds = kDefaultEngineStartSeconds;
  const JsonValue* pv = nullptr;
  if (!rd.object(*a, ap, "provisioning", &pv)) return false;
  if (!pv) return true;
  const std::string pp = ap + ".provisioning";
  return rd.known_keys(*pv, pp,
                       {"nodeStartSeconds", "imagePullSeconds", "checkpointBytes", "networkBytesPerSecond",
                        "nvmeBytesPerSecond", "engineStartSeconds"},
                       "engine/README.md, Autoscaling") &&
         rd.number(*pv, pp, "nodeStartSeconds", &v.node_start_seconds, 0) &&
         rd.number(*pv, pp, "imagePullSeconds", &v.image_pull_seconds, 0) &&
         rd.number(*pv, pp, "checkpointBytes", &v.checkpoint_bytes, 0) &&
         rd.number(*pv, pp, "networkBytesPerSecond", &v.network_bytes_per_second, 0) &&
         rd.number(*pv, pp, "nvmeBytesPerSecond", &v.nvme_bytes_per_second, 0) &&
         rd.number(*pv, pp, "engineStartSeconds", &v.engine_start_seconds, 0);
}

std::int32_t read_block_size(Reader& rd, const JsonValue& doc) {
  std::int32_t block_size = 16;
  const JsonValue* router = nullptr;
  if (rd.object(doc, "", "router", &router) && router) rd.integer(*router, "router", "kvBlockSize", &block_size, 1);
  return block_size;
}

Expected<SimulationSetup, std::string> read_setup(const JsonValue& doc, bool pools_required) {
  Reader rd;
  SimulationSetup out;
  if (!doc.is_object()) return unexpected(std::string("the configuration must be a JSON object"));
  std::uint64_t seed = 1;
  if (!rd.integer(doc, "", "seed", &seed, 0)) return unexpected(rd.error);

  // Block size: the workers' --block-size, kept in router.kvBlockSize.
  const std::int32_t block_size = read_block_size(rd, doc);
  if (!rd.error.empty()) return unexpected(rd.error);

  // Policy.
  RouterSpec& router = out.config.router;
  if (const JsonValue* pol = doc.find("policy"); pol != nullptr && !pol->is_null()) {
    // The router process's reader of the section (disagg/routing_policy_config.h), its type too.
    auto section = read_routing_policy_section(*pol, router.options);
    if (!section) return unexpected(section.error());
    router.policy = section->policy;
    router.options = section->options;
    if (section->min_uncached_prompt_tokens) router.decider.min_uncached_tokens = *section->min_uncached_prompt_tokens;
    if (section->prefix_source) {
      // auto: the index when the router has the served model's tokenizer (router.tokenizer), as the
      // router decides at start (a tokenizer that fails to load is the router's own failure).
      bool tokenizer = false;
      if (const JsonValue* rt = doc.find("router"); rt != nullptr && rt->is_object()) {
        const JsonValue* t = rt->find("tokenizer");
        tokenizer = t != nullptr && !t->is_null();
      }
      router.precise_prefix = *section->prefix_source == PrefixSource::index ||
                              (*section->prefix_source == PrefixSource::automatic && tokenizer);
    }
  }
  if (!rd.error.empty()) return unexpected(rd.error);

  // The router's admission bound (the same keys the router process reads).
  if (const JsonValue* rt = nullptr; rd.object(doc, "", "router", &rt) && rt) {
    if (!rd.integer(*rt, "router", "maxInflight", &router.max_inflight, 1) ||
        !rd.integer(*rt, "router", "maxQueue", &router.max_queue, 0) ||
        !rd.number(*rt, "router", "queueTimeoutSeconds", &router.queue_timeout_seconds, 0)) {
      return unexpected(rd.error);
    }
  }
  if (!rd.error.empty()) return unexpected(rd.error);

  // SLO.
  if (const JsonValue* slo = nullptr; rd.object(doc, "", "slo", &slo) && slo) {
    if (!rd.number(*slo, "slo", "ttftSeconds", &out.config.slo.ttft_seconds, 0, true) ||
        !rd.number(*slo, "slo", "tpotSeconds", &out.config.slo.tpot_seconds, 0, true)) {
      return unexpected(rd.error);
    }
  }
  if (!rd.error.empty()) return unexpected(rd.error);

  // Autoscaling: the simulator's keys of the top-level block (the router reads slo, prefill, decode).
  if (const JsonValue* as = nullptr; rd.object(doc, "", "autoscaling", &as) && as) {
    AutoscaleRun& ar = out.config.autoscale;
    ar.report = true;
    if (!rd.known_keys(*as, "autoscaling",
                       {"slo", "prefill", "decode", "evaluationIntervalSeconds", "windowSeconds", "horizonSeconds"},
                       "engine/README.md, Autoscaling") ||
        !rd.number(*as, "autoscaling", "evaluationIntervalSeconds", &ar.evaluation_interval_seconds, 0, true) ||
        !rd.number(*as, "autoscaling", "windowSeconds", &ar.window_seconds, 0, true) ||
        !rd.number(*as, "autoscaling", "horizonSeconds", &ar.horizon_seconds, 0)) {
      return unexpected(rd.error);
    }
  }
  if (!rd.error.empty()) return unexpected(rd.error);

  // Pools.
  const JsonValue* pools = doc.find("pools");
  if (pools_required || (pools && !pools->is_null())) {
    if (!pools || !pools->is_array() || pools->items().empty()) {
      return unexpected(
          std::string("'pools' must be a non-empty array; e.g. [{\"name\": \"workers\", \"role\": \"both\", "
                      "\"replicas\": 4, \"kvTokensPerReplica\": 400000}]"));
    }
    for (std::size_t i = 0; i < pools->items().size(); ++i) {
      const JsonValue& pj = pools->items()[i];
      const std::string p = "pools[" + std::to_string(i) + "]";
      if (!pj.is_object()) return unexpected("'" + p + "' (" + pj.dump() + ") must be an object");
      PoolSpec spec;
      std::string role;
      if (!rd.string(pj, p, "name", &spec.name) || !rd.string(pj, p, "role", &role)) return unexpected(rd.error);
      if (role == "both") spec.role = WorkerRole::aggregated;
      else if (role == "prefill") spec.role = WorkerRole::prefill;
      else if (role == "decode") spec.role = WorkerRole::decode;
      else return unexpected("'" + p + ".role' (\"" + role + "\") must be both, prefill or decode");
      if (!read_pool_autoscaling(rd, pj, p, &spec.autoscaling)) return unexpected(rd.error);
      if (spec.autoscaling.enabled) spec.replicas = std::max(spec.autoscaling.policy.min_replicas, 1);
      if (!rd.integer(pj, p, "replicas", &spec.replicas, spec.autoscaling.enabled ? 0 : 1) ||
          !read_pool(rd, doc, pj, p, block_size, &spec)) {
        return unexpected(rd.error);
      }
      out.config.pools.push_back(spec);
    }
  }

  // Workload.
  const JsonValue* w = nullptr;
  if (!rd.object(doc, "", "workload", &w)) return unexpected(rd.error);
  if (!w)
    return unexpected(
        std::string("'workload' is required; e.g. {\"kind\": \"single\", \"requests\": 1000, \"arrival\": "
                    "{\"ratePerSecond\": 10}}"));
  if (!read_workload(rd, *w, seed, &out)) return unexpected(rd.error);
  return out;
}

}  // namespace

Expected<SimulationSetup, std::string> read_simulation(const JsonValue& doc) {
  return read_setup(doc, true);
}

Expected<SimulationSetup, std::string> read_simulation_base(const JsonValue& doc) {
  return read_setup(doc, false);
}

Expected<PlannerSpec, std::string> read_planner(const JsonValue& doc) {
  Reader rd;
  PlannerSpec spec;
  const JsonValue* pl = nullptr;
  if (!rd.object(doc, "", "planner", &pl)) return unexpected(rd.error);
  if (!pl) {
    return unexpected(
        std::string("'planner' is required; e.g. {\"maxAccelerators\": 16, \"tensorParallelOptions\": "
                    "[{\"tensorParallel\": 4, ...}]} (engine/README.md, Planner)"));
  }
  const std::string p = "planner";
  if (!rd.known_keys(*pl, p,
                     {"maxAccelerators", "minAccelerators", "modes", "targetShare", "minRatePerSecond",
                      "rateResolution", "boundSlack", "requiredRatePerSecond", "pricePerAcceleratorHour", "prune",
                      "keep", "probeSeconds", "rankDepth", "threads", "tensorParallelOptions"},
                     "engine/README.md, Planner")) {
    return unexpected(rd.error);
  }
  double resolution = spec.grid.growth - 1;
  double price = 1;
  if (!rd.integer(*pl, p, "maxAccelerators", &spec.max_accelerators, 1) ||
      !rd.integer(*pl, p, "minAccelerators", &spec.min_accelerators, 1) ||
      !rd.number(*pl, p, "targetShare", &spec.target_share, 0, true) ||
      !rd.at_most(*pl, p, "targetShare", spec.target_share, 1) ||
      !rd.number(*pl, p, "minRatePerSecond", &spec.grid.min_rate, 0, true) ||
      !rd.number(*pl, p, "rateResolution", &resolution, 0.001) ||
      !rd.at_most(*pl, p, "rateResolution", resolution, 1) || !rd.number(*pl, p, "boundSlack", &spec.bound_slack, 1) ||
      !rd.number(*pl, p, "requiredRatePerSecond", &spec.required_rate, 0) ||
      !rd.number(*pl, p, "pricePerAcceleratorHour", &price, 0, true) || !rd.boolean(*pl, p, "prune", &spec.prune) ||
      !rd.integer(*pl, p, "keep", &spec.keep, 0) || !rd.number(*pl, p, "probeSeconds", &spec.probe_seconds, 0) ||
      !rd.integer(*pl, p, "rankDepth", &spec.rank_depth, 1) || !rd.integer(*pl, p, "threads", &spec.threads, 0)) {
    return unexpected(rd.error);
  }
  spec.grid.growth = 1 + resolution;
  if (const JsonValue* modes = pl->find("modes"); modes && !modes->is_null()) {
    if (!modes->is_array() || modes->items().empty()) {
      return unexpected("'planner.modes' (" + modes->dump() +
                        ") must be a non-empty array of \"aggregated\" and \"disaggregated\"");
    }
    spec.aggregated = spec.disaggregated = false;
    for (const JsonValue& m : modes->items()) {
      if (m.is_string() && m.as_string() == "aggregated") spec.aggregated = true;
      else if (m.is_string() && m.as_string() == "disaggregated") spec.disaggregated = true;
      else return unexpected("'planner.modes' holds " + m.dump() + "; use \"aggregated\" and/or \"disaggregated\"");
    }
  }
  const std::int32_t block_size = read_block_size(rd, doc);
  const JsonValue* opts = pl->find("tensorParallelOptions");
  if (!opts || !opts->is_array() || opts->items().empty()) {
    return unexpected(
        std::string("'planner.tensorParallelOptions' must be a non-empty array of pool templates, one per "
                    "tensor-parallel size, e.g. [{\"label\": \"tp4\", \"tensorParallel\": 4, \"weightBytesPerRank\": "
                    "17638426624, \"kvTokensPerReplica\": 1000000}]"));
  }
  for (std::size_t i = 0; i < opts->items().size(); ++i) {
    const JsonValue& oj = opts->items()[i];
    const std::string op = "planner.tensorParallelOptions[" + std::to_string(i) + "]";
    if (!oj.is_object()) return unexpected("'" + op + "' (" + oj.dump() + ") must be an object");
    if (!rd.known_keys(oj, op,
                       {"label",
                        "role",
                        "tensorParallel",
                        "weightBytesPerRank",
                        "acceleratorsPerReplica",
                        "pricePerAcceleratorHour",
                        "model",
                        "hardware",
                        "parallel",
                        "efficiency",
                        "kvTokensPerReplica",
                        "kvCacheBytesPerRank",
                        "maxConcurrencyPerReplica",
                        "maxBatchedTokens",
                        "maxWaitingRequests",
                        "prefixCaching",
                        "chunkedPrefill",
                        "asyncScheduling",
                        "kvTiers",
                        "pipelineParallel",
                        "firstTokenAt"},
                       "engine/README.md, Planner")) {
      return unexpected(rd.error);
    }
    PlanOption o;
    o.price_per_accelerator_hour = price;
    std::string role = "any";
    if (!rd.string(oj, op, "label", &o.label) || !rd.string(oj, op, "role", &role)) return unexpected(rd.error);
    if (role == "any") o.role = OptionRole::any;
    else if (role == "prefill") o.role = OptionRole::prefill;
    else if (role == "decode") o.role = OptionRole::decode;
    else if (role == "both") o.role = OptionRole::aggregated;
    else return unexpected("'" + op + ".role' (\"" + role + "\") must be any, prefill, decode or both");
    o.pool.name = o.label;
    if (!read_pool(rd, doc, oj, op, block_size, &o.pool)) return unexpected(rd.error);
    if (o.label.empty()) o.label = "tp" + std::to_string(o.pool.cost.tensor_parallel);
    o.pool.name = o.label;
    o.accelerators_per_replica = static_cast<std::int32_t>(
        std::min<std::int64_t>(std::int64_t{o.pool.cost.tensor_parallel} * o.pool.cost.pipeline_parallel, INT32_MAX));
    if (!rd.integer(oj, op, "acceleratorsPerReplica", &o.accelerators_per_replica, 1) ||
        !rd.number(oj, op, "pricePerAcceleratorHour", &o.price_per_accelerator_hour, 0, true)) {
      return unexpected(rd.error);
    }
    spec.options.push_back(std::move(o));
  }
  if (auto valid = validate(spec); !valid) return unexpected(valid.error().message);
  return spec;
}

Expected<Workload, std::string> make_workload(const SimulationSetup& setup) {
  WorkloadSpec spec = setup.workload;
  spec.fresh_text = false;  // the simulator hashes shared prefixes only
  auto w = setup.from_trace ? Workload::from_trace_file(setup.trace_path, setup.trace) : Workload::create(spec);
  if (!w) return unexpected(w.error().message);
  return std::move(*w);
}

Expected<PlanResult, PlanError> plan_setup(const PlannerSpec& spec, const SimulationSetup& setup,
                                           const PlanProgressFn& progress) {
  if (!setup.from_trace) return run_planner(spec, setup.config, setup.workload, progress);
  auto trace = load_plan_trace(setup.trace_path, setup.trace);
  if (!trace) return unexpected(trace.error());
  return run_planner(spec, setup.config, setup.workload, progress, &*trace);
}

Expected<std::string, std::string> simulate_to_json(const SimulationSetup& setup, const SimProgressFn& progress) {
  auto sim = Simulator::create(setup.config);
  if (!sim) return unexpected(sim.error().message);
  auto workload = make_workload(setup);
  if (!workload) return unexpected(workload.error());
  auto result = sim->run(*workload, progress);
  if (!result) return unexpected(result.error().message);
  std::string out = to_json(result->summary);
  if (result->has_scaling) {
    // The summary object gains "scaling" (disagg/simulator.h, ScalingReport), before its closing brace.
    out.pop_back();
    out += ",\"scaling\":" + scaling_to_json(result->scaling, result->summary) + "}";
  }
  return out;
}

std::string scaling_to_json(const ScalingReport& r, const MetricsSummary& summary) {
  std::string o =
      "{\"horizonSeconds\":" + json_number(r.horizon_seconds) + ",\"windowSeconds\":" + json_number(r.window_seconds);
  double gpu_seconds = 0;
  std::int64_t lost = 0;
  o += ",\"pools\":[";
  for (std::size_t i = 0; i < r.pools.size(); ++i) {
    const PoolScaleReport& p = r.pools[i];
    gpu_seconds += p.gpu_seconds;
    lost += p.lost_on_scale_down;
    if (i) o += ',';
    o += "{\"name\":" + json_quote(p.name) + ",\"role\":\"" +
         (p.role == WorkerRole::prefill  ? "prefill"
          : p.role == WorkerRole::decode ? "decode"
                                         : "both") +
         "\",\"gpusPerReplica\":" + std::to_string(p.gpus_per_replica) +
         ",\"gpuHours\":" + json_number(p.gpu_seconds / 3600) + ",\"peakReplicas\":" + std::to_string(p.peak_replicas) +
         ",\"scaleUps\":" + std::to_string(p.scale_ups) + ",\"scaleDowns\":" + std::to_string(p.scale_downs) +
         ",\"provisionSeconds\":" + json_number(p.provision_seconds) +
         ",\"drainedRequests\":" + std::to_string(p.drained_requests) +
         ",\"lostOnScaleDown\":" + std::to_string(p.lost_on_scale_down) + "}";
  }
  o += "],\"gpuHours\":" + json_number(gpu_seconds / 3600) + ",\"lostOnScaleDown\":" + std::to_string(lost) +
       ",\"heldForCapacity\":" + std::to_string(r.held_for_capacity) +
       ",\"goodRequests\":" + std::to_string(summary.good) + ",\"goodPerGpuHour\":" +
       json_number(gpu_seconds > 0 ? static_cast<double>(summary.good) / (gpu_seconds / 3600) : 0);
  // Windows as columns: start, arrivals, good, prompt tokens, and per pool the mean replicas billed / ready.
  auto column = [&](const char* key, auto get) {
    o += ",\"" + std::string(key) + "\":[";
    for (std::size_t w = 0; w < r.windows.size(); ++w) {
      if (w) o += ',';
      o += get(w);
    }
    o += ']';
  };
  o += ",\"windows\":{\"count\":" + std::to_string(r.windows.size());
  column("startSeconds", [&](std::size_t w) { return json_number(r.windows[w].start_seconds); });
  column("arrivals", [&](std::size_t w) { return std::to_string(r.windows[w].arrivals); });
  column("good", [&](std::size_t w) { return std::to_string(r.windows[w].good); });
  column("promptTokens", [&](std::size_t w) { return std::to_string(r.windows[w].prompt_tokens); });
  column("ttftP90", [&](std::size_t w) { return json_number(r.windows[w].ttft_p90); });
  column("tpotP90", [&](std::size_t w) { return json_number(r.windows[w].tpot_p90); });
  const std::size_t np = r.pools.size();
  for (const bool ready : {false, true}) {
    o += ready ? ",\"readyReplicas\":[" : ",\"replicas\":[";
    for (std::size_t p = 0; p < np; ++p) {
      if (p) o += ',';
      o += '[';
      for (std::size_t w = 0; w < r.windows.size(); ++w) {
        if (w) o += ',';
        const double v = (ready ? r.window_ready : r.window_replicas)[w * np + p];
        o += json_number(std::round(v * 1000) / 1000);
      }
      o += ']';
    }
    o += ']';
  }
  o += "}}";
  return o;
}

}  // namespace disagg
