// disagg/autoscaler.h — the one scaling rule of a pool (the cluster's KEDA/HPA, the simulator and
// `disagg local --autoscale` all apply it), on the pool's SLO pressure.
//
// The rule is the Kubernetes HPA algorithm on one signal (the issue 24 contract, section 1):
//   pressure   predicted latency / SLO (1.0: the next request would just meet the SLO); the caller
//              measures it over the pool's ready replicas (see the simulator for the two signals).
//   ready 0    desired = ceil(pressure / target)  (HPA's currentReplicas == 0 branch; a pool with
//              no ready replica and requests waiting reports pressure 1 + waiting, so it scales
//              from zero; with nothing waiting pressure is 0 and desired 0).
//   ready > 0  no change while |pressure / target - 1| <= tolerance (HPA's tolerance, 0.1);
//              else desired = ceil(ready x pressure / target). HPA multiplies by its ready pods
//              (replica_calculator.go, getUsageRatioReplicaCount), not by the pods it asked for,
//              so replicas still provisioning do not compound a scale-up while their capacity is
//              not yet measured.
//   bounds     clamped to [max(min, 1), max]; 0 only when scale_to_zero and the pool saw no
//              request for idle_seconds_before_zero (KEDA's cooldownPeriod), and 1+ again as soon
//              as pressure > 0 (KEDA's activation).
//   windows    HPA's stabilization (horizontal.go, stabilizeRecommendationWithBehaviors): the
//              recommendations of the last scale_up_stabilization_seconds bound a scale-up by their
//              lowest, those of the last scale_down_stabilization_seconds bound a scale-down by
//              their highest. With the default up window of 0 the scale-up goes to the latest
//              recommendation, which is also the highest over that window, as the contract words it.
// HPA's rate policies (pods or percent per period) are not modelled.
//
// Bounded: the recommendation history holds at most max(windows) / interval + 1 entries, in a ring
// allocated at construction; evaluate() does not allocate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "disagg/expected.h"

namespace disagg {

/// One pool's scaling limits and windows (the contract's names in brackets).
struct AutoscalePolicy {
  std::int32_t min_replicas = 1;              ///< [minReplicas] >= 0
  std::int32_t max_replicas = 1;              ///< [maxReplicas] >= max(min, 1)
  double target = 0.95;                       ///< [target] pressure to hold; > 0 (1: the SLO; the constructs' default)
  double tolerance = 0.1;                     ///< [tolerance] HPA's; >= 0
  double scale_up_stabilization_seconds = 0;  ///< >= 0
  double scale_down_stabilization_seconds = 300;  ///< >= 0
  bool scale_to_zero = false;                     ///< [scaleToZero]
  double idle_seconds_before_zero = 600;          ///< [idleSecondsBeforeZero] KEDA cooldownPeriod
};

/// The highest utilization at which a prefill pool of `replicas` keeps the TTFT of `quantile` of its
/// requests within `slo_seconds` in steady state; the router and the simulator divide the pool's
/// utilization by it, so the prefill pressure is 1 where the SLO's tail is, at any replica count.
/// Model: M/G/c (Poisson arrivals; a request's service is its prompt over one replica's prefill
/// rate, mean `service_seconds`, squared coefficient of variation `service_cv2`): the chance of
/// waiting is Erlang C, the wait's tail exponential at rate (c - offered load) / service, stretched
/// by (1 + cv²) / 2 (the Allen-Cunneen / Kingman scaling of the mean wait); TTFT = wait + service +
/// `fixed_seconds`. More replicas sustain more (1: 0.87, 4: 0.97, 8: 0.98 for a 0.09 s mean service,
/// cv² 0.25, a 2 s SLO at 0.99), which a plain utilization target ignores: one target is then either
/// too loose for a small pool or too tight for a large one. Returns a value in [0.05, 1); 0.05
/// when even an idle pool misses the SLO (service + fixed >= slo). O(replicas x 40), no allocation.
double prefill_sustainable_utilization(std::int32_t replicas, double service_seconds, double service_cv2,
                                       double fixed_seconds, double slo_seconds, double quantile = 0.99);

/// Recommendation entries a window of `seconds` evaluated every `interval` seconds needs.
std::int64_t autoscale_history_entries(double seconds, double interval);

/// Most entries one pool's history may hold (a 1-day window at 1 s).
inline constexpr std::int64_t kMaxAutoscaleHistory = 86'400;

/// The rule for one pool. Call evaluate() every interval seconds with non-decreasing times.
class PoolAutoscaler {
 public:
  /// Checks `policy` (each field against its bound above) and the interval (> 0). Failure: one
  /// message naming the field (under `field`, e.g. "pools[1].autoscaling"), the value and the fix.
  static Expected<PoolAutoscaler, std::string> create(const AutoscalePolicy& policy, double interval_seconds,
                                                      const std::string& field);

  /// The replica count the pool should have now.
  ///   now            virtual time (s)
  ///   ready          replicas serving (the ones `pressure` was measured over)
  ///   requested      replicas asked for so far (ready + provisioning; draining ones excluded)
  ///   pressure       the pool's SLO pressure (>= 0)
  ///   last_request   time the pool last received a request (-inf: never)
  std::int32_t evaluate(double now, std::int32_t ready, std::int32_t requested, double pressure, double last_request);

  /// The raw recommendation of the last evaluate() (before the windows), for reports.
  std::int32_t last_recommendation() const { return last_raw_; }
  const AutoscalePolicy& policy() const { return policy_; }

 private:
  PoolAutoscaler(const AutoscalePolicy& policy, std::int64_t entries);
  AutoscalePolicy policy_;
  struct Entry {
    double time;
    std::int32_t replicas;
  };
  std::vector<Entry> ring_;  // fixed capacity, oldest at head_
  std::size_t head_ = 0, size_ = 0;
  std::int32_t last_raw_ = 0;
};

}  // namespace disagg
