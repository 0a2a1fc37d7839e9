// Node-API binding of the engine core (loaded by src/engine/index.ts).
//
// Exports:
//   version(): string
//   costModel(config: object, probes?: object): Promise<string>   report JSON (disagg/cost_report.h)
//   costModelFields(): Array<{section, key, required, defaultValue, constraint}>
//   simulate, simulateSweep, plan, planSync: see simulation_binding.cc
//   PoolAutoscaler (the scaling rule): see autoscaler_binding.cc
//
// Built with NAPI_DISABLE_CPP_EXCEPTIONS: no C++ exception crosses into JavaScript. Arguments are
// read on the JavaScript thread (Node-API values cannot be touched elsewhere); the report is
// computed on a libuv worker thread; every failure becomes a rejected promise with a message.
#include <napi.h>

#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "disagg/cost_model_config.h"
#include "disagg/cost_report.h"
#include "disagg/version.h"

namespace disagg_addon {
// simulation_binding.cc: simulate, simulateSweep, plan, planSync.
void register_simulation(Napi::Env env, Napi::Object exports);
// autoscaler_binding.cc: PoolAutoscaler.
void register_autoscaler(Napi::Env env, Napi::Object exports);
}  // namespace disagg_addon

namespace {

using disagg::Lookup;

// Reads the configuration straight from a JavaScript object.
class JsSource final : public disagg::ConfigSource {
 public:
  explicit JsSource(Napi::Object root) : root_(root) {}

  Lookup section(std::string_view name) const override {
    Napi::Value v = root_.Get(std::string(name));
    if (v.IsEmpty()) return Lookup::wrong_type;  // a getter threw; the caller sees it pending
    if (v.IsUndefined() || v.IsNull()) return Lookup::missing;
    return v.IsObject() && !v.IsArray() ? Lookup::found : Lookup::wrong_type;
  }

  Lookup number(std::string_view section, std::string_view key, double* out) const override {
    Napi::Value s = root_.Get(std::string(section));
    if (s.IsEmpty() || !s.IsObject()) return Lookup::wrong_type;
    Napi::Value v = s.As<Napi::Object>().Get(std::string(key));
    if (v.IsEmpty()) return Lookup::wrong_type;
    if (v.IsUndefined() || v.IsNull()) return Lookup::missing;
    if (!v.IsNumber()) return Lookup::wrong_type;
    *out = v.As<Napi::Number>().DoubleValue();
    return Lookup::found;
  }

 private:
  Napi::Object root_;
};

// Reads one whole number in [1, kMaxProbeValue]; fails with a message naming the field.
bool read_probe_int(Napi::Value v, std::string_view field, std::int64_t* out, std::string* err) {
  if (!v.IsNumber()) {
    *err = "'probes." + std::string(field) + "' must be a whole number from 1 to 1e9";
    return false;
  }
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 1 && d <= static_cast<double>(disagg::CostProbes::kMaxProbeValue)) ||
      d != static_cast<double>(static_cast<std::int64_t>(d))) {
    *err =
        "'probes." + std::string(field) + "' (" + v.ToString().Utf8Value() + ") must be a whole number from 1 to 1e9";
    return false;
  }
  *out = static_cast<std::int64_t>(d);
  return true;
}

bool read_probe_list(Napi::Object probes, const char* field, std::vector<std::int64_t>* out, std::string* err) {
  Napi::Value v = probes.Get(field);
  if (v.IsEmpty()) return false;
  if (v.IsUndefined() || v.IsNull()) return true;  // keep the default list
  if (!v.IsArray()) {
    *err = "'probes." + std::string(field) + "' must be an array of whole numbers";
    return false;
  }
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() == 0 || a.Length() > disagg::CostProbes::kMaxProbePoints) {
    *err = "'probes." + std::string(field) + "' must hold 1 to 64 values";
    return false;
  }
  out->clear();
  for (std::uint32_t i = 0; i < a.Length(); ++i) {
    std::int64_t n = 0;
    if (!read_probe_int(a.Get(i), field, &n, err)) return false;
    out->push_back(n);
  }
  return true;
}

bool read_probes(Napi::Value arg, disagg::CostProbes* probes, std::string* err) {
  if (arg.IsUndefined() || arg.IsNull()) return true;
  if (!arg.IsObject() || arg.IsArray()) {
    *err = "costModel(config, probes): 'probes' must be an object or undefined";
    return false;
  }
  Napi::Object o = arg.As<Napi::Object>();
  if (!read_probe_list(o, "prefillTokens", &probes->prefill_tokens, err) ||
      !read_probe_list(o, "decodeBatches", &probes->decode_batches, err) ||
      !read_probe_list(o, "transferTokens", &probes->transfer_tokens, err)) {
    return false;
  }
  for (auto [field, target] : {std::pair{"contextTokensPerSequence", &probes->context_tokens_per_sequence},
                               std::pair{"mixedChunkTokens", &probes->mixed_chunk_tokens}}) {
    Napi::Value v = o.Get(field);
    if (v.IsEmpty()) return false;
    if (v.IsUndefined() || v.IsNull()) continue;
    if (!read_probe_int(v, field, target, err)) return false;
  }
  return true;
}

// Computes the report off the JavaScript thread and settles the promise.
class CostWorker final : public Napi::AsyncWorker {
 public:
  CostWorker(Napi::Env env, Napi::Promise::Deferred deferred, disagg::CostModel model, disagg::CostProbes probes)
      : Napi::AsyncWorker(env, "disagg:costModel"),
        deferred_(std::move(deferred)),
        model_(model),
        probes_(std::move(probes)) {}

  void Execute() override {
    try {
      json_ = disagg::to_json(disagg::build_cost_report(model_, probes_));
    } catch (const std::exception& e) { SetError(std::string("costModel: ") + e.what()); } catch (...) {
      SetError("costModel: unexpected failure");
    }
  }
  void OnOK() override { deferred_.Resolve(Napi::String::New(Env(), json_)); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  disagg::CostModel model_;
  disagg::CostProbes probes_;
  std::string json_;
};

// Rejects `deferred` with the pending JavaScript exception, or with `message`.
Napi::Value reject(Napi::Env env, Napi::Promise::Deferred& deferred, const std::string& message) {
  if (env.IsExceptionPending()) {
    deferred.Reject(env.GetAndClearPendingException().Value());
  } else {
    deferred.Reject(Napi::Error::New(env, message).Value());
  }
  return deferred.Promise();
}

Napi::Value CostModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  try {
    if (info.Length() < 1 || !info[0].IsObject() || info[0].IsArray()) {
      return reject(env, deferred,
                    "costModel(config): 'config' must be an object with model, hardware, parallel "
                    "and efficiency sections (engine/schema/engine-config.schema.json)");
    }
    disagg::CostProbes probes;
    std::string err;
    if (!read_probes(info.Length() > 1 ? info[1] : env.Undefined(), &probes, &err)) {
      return reject(env, deferred, err);
    }
    if (auto valid = disagg::validate(probes); !valid) { return reject(env, deferred, valid.error().message()); }
    auto model = disagg::read_cost_model(JsSource(info[0].As<Napi::Object>()));
    if (!model) return reject(env, deferred, model.error().message());
    auto* worker = new CostWorker(env, deferred, *model, std::move(probes));
    worker->Queue();  // the worker deletes itself after OnOK/OnError
    return deferred.Promise();
  } catch (const std::exception& e) { return reject(env, deferred, std::string("costModel: ") + e.what()); }
}

Napi::Value Version(const Napi::CallbackInfo& info) {
  const std::string_view v = disagg::engine_version();
  return Napi::String::New(info.Env(), v.data(), v.size());
}

const char* constraint_name(disagg::FieldConstraint c) {
  switch (c) {
    case disagg::FieldConstraint::positive: return "positive";
    case disagg::FieldConstraint::non_negative: return "nonNegative";
    case disagg::FieldConstraint::fraction: return "fraction";
    case disagg::FieldConstraint::positive_integer: return "positiveInteger";
    case disagg::FieldConstraint::whole_number: return "wholeNumber";
  }
  return "unknown";
}

Napi::Value CostModelFields(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto fields = disagg::cost_model_fields();
  Napi::Array out = Napi::Array::New(env, fields.size());
  for (std::uint32_t i = 0; i < fields.size(); ++i) {
    const disagg::CostModelField& f = fields[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("section", std::string(f.section));
    o.Set("key", std::string(f.key));
    o.Set("required", f.required);
    if (!f.required) o.Set("defaultValue", f.default_value);
    o.Set("constraint", constraint_name(f.constraint));
    out.Set(i, o);
  }
  return out;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("version", Napi::Function::New(env, Version, "version"));
  exports.Set("costModel", Napi::Function::New(env, CostModel, "costModel"));
  exports.Set("costModelFields", Napi::Function::New(env, CostModelFields, "costModelFields"));
  disagg_addon::register_simulation(env, exports);
  disagg_addon::register_autoscaler(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(disagg_engine, Init)
