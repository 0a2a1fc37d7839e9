#include "disagg/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "disagg/json_value.h"

namespace disagg {

namespace {

// Erlang C: the chance an arrival waits in M/M/c at offered load a = c x utilization (< c).
double erlang_c(std::int32_t c, double a) {
  double b = 1;  // Erlang B by its recursion, stable for any c
  for (std::int32_t k = 1; k <= c; ++k) b = a * b / (k + a * b);
  const double rho = a / c;
  return b / (1 - rho * (1 - b));
}

}  // namespace

double prefill_sustainable_utilization(std::int32_t replicas, double service_seconds, double service_cv2,
                                       double fixed_seconds, double slo_seconds, double quantile) {
  constexpr double kFloor = 0.05;
  const std::int32_t c = std::max<std::int32_t>(1, replicas);
  const double budget = slo_seconds - service_seconds - fixed_seconds;  // the wait the SLO leaves
  if (!(service_seconds > 0) || !(budget > 0) || !std::isfinite(budget))
    return service_seconds > 0 ? kFloor : 1.0 - 1e-9;
  const double stretch = (1 + std::max(0.0, std::isfinite(service_cv2) ? service_cv2 : 0.0)) / 2;
  const double miss = 1 - std::clamp(quantile, 0.5, 0.999999);
  // P(wait > budget) = C(c, a) x exp(-(c - a) x budget / (service x stretch)), increasing in the
  // utilization: bisect for where it reaches `miss`.
  auto misses = [&](double rho) {
    const double a = c * rho;
    return erlang_c(c, a) * std::exp(-(c - a) * budget / (service_seconds * stretch)) > miss;
  };
  double lo = 0, hi = 1;
  for (int i = 0; i < 40; ++i) {
    const double mid = (lo + hi) / 2;
    (misses(mid) ? hi : lo) = mid;
  }
  return std::clamp(lo, kFloor, 1.0 - 1e-9);
}

std::int64_t autoscale_history_entries(double seconds, double interval) {
  return static_cast<std::int64_t>(std::ceil(seconds / interval)) + 1;
}

Expected<PoolAutoscaler, std::string> PoolAutoscaler::create(const AutoscalePolicy& p, double interval,
                                                             const std::string& field) {
  auto bad = [&](const std::string& key, double v, const std::string& fix) {
    return unexpected("'" + field + "." + key + "' (" + json_number(v) + ") " + fix);
  };
  if (!(interval > 0) || !std::isfinite(interval)) {
    return unexpected("'autoscaling.evaluationIntervalSeconds' (" + json_number(interval) +
                      ") must be > 0; HPA evaluates every 15 s, KEDA polls every 30 s");
  }
  if (p.min_replicas < 0) return bad("minReplicas", p.min_replicas, "must be >= 0");
  if (p.max_replicas < std::max(p.min_replicas, 1)) {
    return bad("maxReplicas", p.max_replicas,
               "must be >= max(minReplicas, 1) (minReplicas is " + std::to_string(p.min_replicas) + ")");
  }
  if (!(p.target > 0) || !std::isfinite(p.target))
    return bad("target", p.target, "must be > 0; 1 is the SLO, 0.95 (the default) leaves 5% headroom");
  if (!(p.tolerance >= 0) || !std::isfinite(p.tolerance))
    return bad("tolerance", p.tolerance, "must be >= 0; HPA's is 0.1");
  for (const auto& [key, v] :
       {std::pair<const char*, double>{"scaleUpStabilizationSeconds", p.scale_up_stabilization_seconds},
        {"scaleDownStabilizationSeconds", p.scale_down_stabilization_seconds}}) {
    if (!(v >= 0) || !std::isfinite(v)) return bad(key, v, "must be >= 0");
    if (autoscale_history_entries(v, interval) > kMaxAutoscaleHistory) {
      return bad(key, v,
                 "spans more than " + std::to_string(kMaxAutoscaleHistory) +
                     " evaluations; give a shorter window or a longer evaluationIntervalSeconds");
    }
  }
  if (!(p.idle_seconds_before_zero >= 0) || !std::isfinite(p.idle_seconds_before_zero)) {
    return bad("idleSecondsBeforeZero", p.idle_seconds_before_zero,
               "must be >= 0; KEDA's cooldownPeriod default is 300, the contract's 600");
  }
  const double window = std::max(p.scale_up_stabilization_seconds, p.scale_down_stabilization_seconds);
  return PoolAutoscaler(p, autoscale_history_entries(window, interval));
}

PoolAutoscaler::PoolAutoscaler(const AutoscalePolicy& policy, std::int64_t entries) : policy_(policy) {
  ring_.resize(static_cast<std::size_t>(std::max<std::int64_t>(entries, 1)));
}

std::int32_t PoolAutoscaler::evaluate(double now, std::int32_t ready, std::int32_t requested, double pressure,
                                      double last_request) {
  const AutoscalePolicy& p = policy_;
  const std::int32_t floor = std::max(p.min_replicas, 1);
  std::int32_t raw;
  if (ready == 0) {
    raw = static_cast<std::int32_t>(std::min(std::ceil(pressure / p.target), 1e9));
  } else if (std::abs(pressure / p.target - 1.0) <= p.tolerance) {
    raw = requested;
  } else {
    raw = static_cast<std::int32_t>(std::min(std::ceil(static_cast<double>(ready) * pressure / p.target), 1e9));
  }
  raw = std::clamp(raw, floor, p.max_replicas);
  last_raw_ = raw;
  // History: the ring keeps the newest ring_.size() recommendations.
  const std::size_t cap = ring_.size();
  ring_[(head_ + size_) % cap] = Entry{now, raw};
  if (size_ < cap) {
    ++size_;
  } else {
    head_ = (head_ + 1) % cap;
  }
  std::int32_t up = std::numeric_limits<std::int32_t>::max(), down = 0;
  for (std::size_t i = 0; i < size_; ++i) {
    const Entry& e = ring_[(head_ + i) % cap];
    if (now - e.time <= p.scale_up_stabilization_seconds) up = std::min(up, e.replicas);
    if (now - e.time <= p.scale_down_stabilization_seconds) down = std::max(down, e.replicas);
  }
  std::int32_t desired = requested;
  if (requested < up) desired = up;
  if (requested > down) desired = down;
  desired = std::clamp(desired, floor, p.max_replicas);
  // KEDA: to zero only after a quiet cooldown with nothing pending; back from zero on any pressure.
  if (p.scale_to_zero && pressure <= 0 && now - last_request >= p.idle_seconds_before_zero) desired = 0;
  if (p.min_replicas == 0 && !p.scale_to_zero) desired = std::max(desired, 1);
  return desired;
}

}  // namespace disagg
