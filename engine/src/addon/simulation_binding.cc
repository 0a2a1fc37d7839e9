// Node-API binding of the simulator and the planner (registered by addon.cc).
//
// Exports (every config is the JSON text of an engine configuration; src/engine/index.ts passes
// JSON.stringify(config), so the addon reads it with the core's reader and field mapping, exactly
// like `disagg-engine simulate|plan --config`):
//   simulate(configJson, onProgress?): Promise<string>          summary JSON (disagg/metrics.h)
//   simulateSweep(configJson, rates, onProgress?): Promise<string>
//       JSON array of {ratePerSecond, summary}: the workload at each arrival rate
//   plan(configJson, onProgress?): Promise<string>               planner JSON (disagg/planner.h)
//   planSync(configJson): string                                 the same, on the calling thread
// onProgress receives {done, total, simulations, bestScore}. Work runs on a libuv worker thread;
// progress comes back through Napi::AsyncProgressQueueWorker (every update, in order). Every
// failure becomes a rejected promise (or, for planSync, a thrown Error) whose message names the
// field, the value and the fix; no C++ exception crosses the boundary.
#include <napi.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "disagg/json_value.h"
#include "disagg/planner.h"
#include "disagg/simulation_config.h"

namespace disagg_addon {

namespace {

struct Progress {
  std::int32_t done = 0;
  std::int32_t total = 0;
  std::int64_t simulations = 0;
  double best_score = 0;
};

// What a worker computes: a parsed configuration and the job to run on it.
struct Job {
  enum class Kind { simulate, sweep, plan } kind = Kind::simulate;
  disagg::SimulationSetup setup;
  disagg::PlannerSpec planner;
  std::vector<double> rates;
};

// Runs a Job; `report` is called from the running thread.
disagg::Expected<std::string, std::string> run_job(const Job& job, const std::function<void(const Progress&)>& report) {
  switch (job.kind) {
    case Job::Kind::simulate: {
      // Long runs (a simulated day) report the virtual time reached, in whole seconds of the span
      // the load covers (its stages, its duration, or the autoscaling horizon).
      double span = std::max(job.setup.workload.duration_seconds, job.setup.config.autoscale.horizon_seconds);
      double stages = 0;
      for (const auto& st : job.setup.workload.arrival.stages) stages += st.duration_seconds;
      span = std::max(span, stages);
      const auto total = static_cast<std::int32_t>(std::min(span, 2e9));
      double reported = 0;  // at most ~200 reports a run
      auto out = disagg::simulate_to_json(job.setup, [&](double now) {
        if (total <= 1 || now - reported < span / 200) return;
        reported = now;
        report(Progress{static_cast<std::int32_t>(std::min(now, span - 1)), total, 1, 0});
      });
      report(Progress{1, 1, 1, 0});
      return out;
    }
    case Job::Kind::sweep: {
      std::string out = "[";
      for (std::size_t i = 0; i < job.rates.size(); ++i) {
        disagg::SimulationSetup s = job.setup;
        s.workload.arrival.rate_per_second = job.rates[i];
        auto summary = disagg::simulate_to_json(s);
        if (!summary)
          return disagg::unexpected("at " + disagg::json_number(job.rates[i]) + " requests/s: " + summary.error());
        if (i) out += ',';
        out += "{\"ratePerSecond\":" + disagg::json_number(job.rates[i]) + ",\"summary\":" + *summary + "}";
        report(Progress{static_cast<std::int32_t>(i + 1), static_cast<std::int32_t>(job.rates.size()),
                        static_cast<std::int64_t>(i + 1), 0});
      }
      return out + "]";
    }
    case Job::Kind::plan: {
      auto result = disagg::plan_setup(job.planner, job.setup, [&](const disagg::PlanProgress& p) {
        report(Progress{p.candidates_done, p.candidates_total, p.simulations, p.best_score});
      });
      if (!result) return disagg::unexpected(result.error().message);
      return disagg::to_json(*result, job.planner);
    }
  }
  return disagg::unexpected(std::string("unknown job"));
}

// Parses the configuration text into a Job; failure: a message for the caller.
disagg::Expected<Job, std::string> make_job(const std::string& text, Job::Kind kind, const char* fn) {
  auto doc = disagg::parse_json(text);
  if (!doc) return disagg::unexpected(std::string(fn) + ": the configuration is not valid JSON: " + doc.error());
  Job job;
  job.kind = kind;
  auto setup = kind == Job::Kind::plan ? disagg::read_simulation_base(*doc) : disagg::read_simulation(*doc);
  if (!setup) return disagg::unexpected(std::string(fn) + ": " + setup.error());
  job.setup = std::move(*setup);
  if (kind == Job::Kind::plan) {
    auto spec = disagg::read_planner(*doc);
    if (!spec) return disagg::unexpected(std::string(fn) + ": " + spec.error());
    job.planner = std::move(*spec);
  } else if (job.setup.from_trace && kind == Job::Kind::sweep) {
    return disagg::unexpected(
        std::string(fn) + ": 'workload.kind' (\"trace\") has its own arrival rate and cannot be swept; use simulate()");
  } else if (!job.setup.workload.arrival.stages.empty() && kind == Job::Kind::sweep) {
    return disagg::unexpected(
        std::string(fn) +
        ": 'workload.arrival.stages' fix their own arrival rates and cannot be swept; use simulate()");
  }
  return job;
}

class SimulationWorker final : public Napi::AsyncProgressQueueWorker<Progress> {
 public:
  SimulationWorker(Napi::Env env, Napi::Promise::Deferred deferred, Job job, Napi::Function on_progress)
      : Napi::AsyncProgressQueueWorker<Progress>(env, "disagg:simulate"),
        deferred_(std::move(deferred)),
        job_(std::move(job)) {
    if (!on_progress.IsEmpty()) on_progress_ = Napi::Persistent(on_progress);
  }

  void Execute(const ExecutionProgress& progress) override {
    try {
      auto out = run_job(job_, [&](const Progress& p) { progress.Send(&p, 1); });
      if (!out) {
        SetError(out.error());
      } else {
        json_ = std::move(*out);
      }
    } catch (const std::exception& e) {
      SetError(std::string("disagg engine: unexpected failure: ") + e.what());
    } catch (...) { SetError("disagg engine: unexpected failure"); }
  }

  void OnProgress(const Progress* data, size_t count) override {
    if (on_progress_.IsEmpty() || !callback_error_.IsEmpty()) return;
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    for (size_t i = 0; i < count; ++i) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("done", data[i].done);
      o.Set("total", data[i].total);
      o.Set("simulations", static_cast<double>(data[i].simulations));
      o.Set("bestScore", data[i].best_score);
      on_progress_.Call({o});
      if (env.IsExceptionPending()) {
        // A throwing callback rejects the promise at the end instead of crashing the process.
        callback_error_ = Napi::Persistent(env.GetAndClearPendingException().Value());
        return;
      }
    }
  }

  void OnOK() override {
    if (!callback_error_.IsEmpty()) {
      deferred_.Reject(callback_error_.Value());
      return;
    }
    deferred_.Resolve(Napi::String::New(Env(), json_));
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  Job job_;
  Napi::FunctionReference on_progress_;
  Napi::ObjectReference callback_error_;
  std::string json_;
};

Napi::Value reject(Napi::Env env, Napi::Promise::Deferred& deferred, const std::string& message) {
  if (env.IsExceptionPending()) {
    deferred.Reject(env.GetAndClearPendingException().Value());
  } else {
    deferred.Reject(Napi::Error::New(env, message).Value());
  }
  return deferred.Promise();
}

// Reads the optional progress callback at `index`; false (with *err) when it is not a function.
bool read_callback(const Napi::CallbackInfo& info, size_t index, const char* fn, Napi::Function* out,
                   std::string* err) {
  if (info.Length() <= index || info[index].IsUndefined() || info[index].IsNull()) return true;
  if (!info[index].IsFunction()) {
    *err = std::string(fn) + ": 'onProgress' must be a function or undefined";
    return false;
  }
  *out = info[index].As<Napi::Function>();
  return true;
}

Napi::Value start(const Napi::CallbackInfo& info, Job::Kind kind, const char* fn) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
  if (info.Length() < 1 || !info[0].IsString()) {
    return reject(
        env, deferred,
        std::string(fn) +
            ": 'config' must be the JSON text of an engine configuration (engine/schema/engine-config.schema.json)");
  }
  const std::string text = info[0].As<Napi::String>().Utf8Value();
  if (env.IsExceptionPending()) return reject(env, deferred, fn);
  std::vector<double> rates;
  size_t callback_index = 1;
  if (kind == Job::Kind::sweep) {
    callback_index = 2;
    if (info.Length() < 2 || !info[1].IsArray() || info[1].As<Napi::Array>().Length() == 0 ||
        info[1].As<Napi::Array>().Length() > 64) {
      return reject(
          env, deferred,
          std::string(fn) + ": 'rates' must be an array of 1 to 64 arrival rates (requests/s), e.g. [1, 2, 4]");
    }
    Napi::Array a = info[1].As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) {
      Napi::Value v = a.Get(i);
      if (v.IsEmpty()) return reject(env, deferred, fn);
      const double r = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : 0;
      if (!(r > 0) || !std::isfinite(r)) {
        return reject(env, deferred,
                      std::string(fn) + ": 'rates[" + std::to_string(i) + "]' (" + v.ToString().Utf8Value() +
                          ") must be a positive number of requests/s");
      }
      rates.push_back(r);
    }
  }
  Napi::Function on_progress;
  std::string err;
  if (!read_callback(info, callback_index, fn, &on_progress, &err)) return reject(env, deferred, err);
  auto job = make_job(text, kind, fn);
  if (!job) return reject(env, deferred, job.error());
  job->rates = std::move(rates);
  auto* worker = new SimulationWorker(env, deferred, std::move(*job), on_progress);
  worker->Queue();  // deletes itself after OnOK/OnError
  return deferred.Promise();
}

Napi::Value Simulate(const Napi::CallbackInfo& info) {
  return start(info, Job::Kind::simulate, "simulate");
}
Napi::Value SimulateSweep(const Napi::CallbackInfo& info) {
  return start(info, Job::Kind::sweep, "simulateSweep");
}
Napi::Value Plan(const Napi::CallbackInfo& info) {
  return start(info, Job::Kind::plan, "plan");
}

// Synchronous planning for synthesis-time callers (constructors cannot await). Blocks the calling
// thread for the whole search.
Napi::Value PlanSync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    Napi::Error::New(env, "planSync: 'config' must be the JSON text of an engine configuration")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::optional<std::string> failure;
  std::string json;
  try {
    auto job = make_job(info[0].As<Napi::String>().Utf8Value(), Job::Kind::plan, "planSync");
    if (!job) {
      failure = job.error();
    } else {
      auto out = run_job(*job, [](const Progress&) {});
      if (!out) failure = out.error();
      else json = std::move(*out);
    }
  } catch (const std::exception& e) { failure = std::string("planSync: unexpected failure: ") + e.what(); }
  if (failure) {
    Napi::Error::New(env, *failure).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::String::New(env, json);
}

}  // namespace

// probeWindowSeconds(minSeconds, ttftSeconds, tpotSeconds, meanOutputTokens): the planner's rule for
// how long a run's arrivals must span to reach steady state (disagg::probe_window_seconds), so the
// CLI's sweeps use the same one. Throws a TypeError on a non-number.
Napi::Value ProbeWindowSeconds(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  double v[4];
  for (std::size_t i = 0; i < 4; ++i) {
    if (info.Length() <= i || !info[i].IsNumber()) {
      Napi::TypeError::New(env,
                           "probeWindowSeconds(minSeconds, ttftSeconds, tpotSeconds, meanOutputTokens): four numbers")
          .ThrowAsJavaScriptException();
      return env.Undefined();
    }
    v[i] = info[i].As<Napi::Number>().DoubleValue();
  }
  return Napi::Number::New(env, disagg::probe_window_seconds(v[0], disagg::Slo{v[1], v[2]}, v[3]));
}

void register_simulation(Napi::Env env, Napi::Object exports) {
  exports.Set("probeWindowSeconds", Napi::Function::New(env, ProbeWindowSeconds, "probeWindowSeconds"));
  exports.Set("simulate", Napi::Function::New(env, Simulate, "simulate"));
  exports.Set("simulateSweep", Napi::Function::New(env, SimulateSweep, "simulateSweep"));
  exports.Set("plan", Napi::Function::New(env, Plan, "plan"));
  exports.Set("planSync", Napi::Function::New(env, PlanSync, "planSync"));
}

}  // namespace disagg_addon
