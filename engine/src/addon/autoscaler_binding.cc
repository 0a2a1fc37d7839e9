// Node-API binding of the scaling rule (disagg/autoscaler.h), registered by addon.cc, so that
// `disagg local --autoscale` applies the very rule the simulator applies (and that KEDA/HPA apply in
// the cluster) to the router's live GET /scaling, instead of a TypeScript copy of it.
//
// Exports:
//   new PoolAutoscaler(policy, intervalSeconds, field)
//       policy: {minReplicas, maxReplicas, target?, tolerance?, scaleUpStabilizationSeconds?,
//                scaleDownStabilizationSeconds?, scaleToZero?, idleSecondsBeforeZero?}
//       (the simulator's `pools[i].autoscaling` names; absent optional fields take the header's
//       defaults). Throws an Error naming `field` + the key, the value and the fix.
//   .evaluate(now, ready, requested, pressure, lastRequest): number    PoolAutoscaler::evaluate
//       Times in seconds, non-decreasing between calls; throws on a non-number or a negative count.
//   .lastRecommendation(): number                                      before the windows
// Synchronous: evaluate() is a few comparisons over a bounded ring.
#include <napi.h>

#include <cmath>
#include <optional>
#include <string>

#include "disagg/autoscaler.h"

namespace disagg_addon {

namespace {

class PoolAutoscalerWrap final : public Napi::ObjectWrap<PoolAutoscalerWrap> {
 public:
  static Napi::Function define(Napi::Env env) {
    return DefineClass(env, "PoolAutoscaler",
                       {InstanceMethod<&PoolAutoscalerWrap::evaluate>("evaluate"),
                        InstanceMethod<&PoolAutoscalerWrap::last_recommendation>("lastRecommendation")});
  }

  explicit PoolAutoscalerWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<PoolAutoscalerWrap>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 3 || !info[0].IsObject() || !info[1].IsNumber() || !info[2].IsString()) {
      Napi::TypeError::New(env, "PoolAutoscaler(policy: object, intervalSeconds: number, field: string)")
          .ThrowAsJavaScriptException();
      return;
    }
    const Napi::Object o = info[0].As<Napi::Object>();
    const std::string field = info[2].As<Napi::String>().Utf8Value();
    disagg::AutoscalePolicy p;
    std::string err;
    // A present key must be of its type; an absent (or undefined) one keeps the header's default.
    auto number = [&](const char* key, double* out) {
      const Napi::Value v = o.Get(key);
      if (v.IsUndefined()) return true;
      if (!v.IsNumber() || !std::isfinite(v.As<Napi::Number>().DoubleValue())) {
        err = "'" + field + "." + key + "' must be a finite number";
        return false;
      }
      *out = v.As<Napi::Number>().DoubleValue();
      return true;
    };
    auto whole = [&](const char* key, std::int32_t* out) {
      double d = *out;
      if (!number(key, &d)) return false;
      if (d != std::floor(d) || d < -2e9 || d > 2e9) {
        err = "'" + field + "." + key + "' (" + std::to_string(d) + ") must be a whole number";
        return false;
      }
      *out = static_cast<std::int32_t>(d);
      return true;
    };
    auto boolean = [&](const char* key, bool* out) {
      const Napi::Value v = o.Get(key);
      if (v.IsUndefined()) return true;
      if (!v.IsBoolean()) {
        err = "'" + field + "." + key + "' must be true or false";
        return false;
      }
      *out = v.As<Napi::Boolean>().Value();
      return true;
    };
    if (o.Get("maxReplicas").IsUndefined()) err = "'" + field + ".maxReplicas' is required";
    const bool read = err.empty() && whole("minReplicas", &p.min_replicas) && whole("maxReplicas", &p.max_replicas) &&
                      number("target", &p.target) && number("tolerance", &p.tolerance) &&
                      number("scaleUpStabilizationSeconds", &p.scale_up_stabilization_seconds) &&
                      number("scaleDownStabilizationSeconds", &p.scale_down_stabilization_seconds) &&
                      boolean("scaleToZero", &p.scale_to_zero) &&
                      number("idleSecondsBeforeZero", &p.idle_seconds_before_zero);
    if (!read) {
      Napi::Error::New(env, err).ThrowAsJavaScriptException();
      return;
    }
    auto created = disagg::PoolAutoscaler::create(p, info[1].As<Napi::Number>().DoubleValue(), field);
    if (!created) {
      Napi::Error::New(env, created.error()).ThrowAsJavaScriptException();
      return;
    }
    rule_.emplace(std::move(*created));
  }

 private:
  Napi::Value evaluate(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    double a[5];
    for (std::size_t i = 0; i < 5; ++i) {
      // lastRequest may be -Infinity (never); the others must be finite.
      if (info.Length() <= i || !info[i].IsNumber() ||
          (i < 4 && !std::isfinite(info[i].As<Napi::Number>().DoubleValue()))) {
        Napi::TypeError::New(env,
                             "evaluate(now, ready, requested, pressure, lastRequest): finite numbers "
                             "(lastRequest may be -Infinity)")
            .ThrowAsJavaScriptException();
        return env.Undefined();
      }
      a[i] = info[i].As<Napi::Number>().DoubleValue();
    }
    if (a[1] < 0 || a[2] < 0 || a[3] < 0 || a[1] > 1e6 || a[2] > 1e6) {
      Napi::RangeError::New(env, "evaluate: ready and requested must be counts in 0..1e6, pressure >= 0")
          .ThrowAsJavaScriptException();
      return env.Undefined();
    }
    const std::int32_t desired =
        rule_->evaluate(a[0], static_cast<std::int32_t>(a[1]), static_cast<std::int32_t>(a[2]), a[3], a[4]);
    return Napi::Number::New(env, desired);
  }

  Napi::Value last_recommendation(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), rule_->last_recommendation());
  }

  std::optional<disagg::PoolAutoscaler> rule_;
};

}  // namespace

void register_autoscaler(Napi::Env env, Napi::Object exports) {
  exports.Set("PoolAutoscaler", PoolAutoscalerWrap::define(env));
}

}  // namespace disagg_addon
