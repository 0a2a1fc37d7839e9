// routing_basic.cc — the load-only baselines: round robin and least load.
#include <array>

#include "disagg/routing.h"
#include "routing_internal.h"

namespace disagg::routing_detail {

namespace {

// Next eligible endpoint of the request's role after the one of that role routed to last (by id,
// found in the current span, so endpoints joining or leaving keep the rotation going). Cost =
// distance in positions from there. One rotation per role: with one for all, a P/D request's
// decode pick moved the cursor its prefill pick started from, and one prefill endpoint got all.
class RoundRobin final : public RoutingPolicy {
 public:
  std::string_view name() const noexcept override { return "round-robin"; }

  void score(const RouteRequest& request, std::span<const EndpointState> endpoints,
             std::span<double> out) const noexcept override {
    const std::size_t n = considered(endpoints);
    const Cursor& last = last_[role_slot(request.role)];
    std::size_t start = 0;
    if (last.set) {
      for (std::size_t i = 0; i < n; ++i) {
        if (endpoints[i].id == last.id) {
          start = i + 1 == n ? 0 : i + 1;
          break;
        }
      }
    }
    for (std::size_t i = 0; i < n && i < out.size(); ++i) {
      const std::size_t distance = i >= start ? i - start : i + n - start;
      out[i] = eligible(endpoints[i], request) ? static_cast<double>(distance) : kIneligible;
    }
  }

  void on_routed(const RouteRequest& request, const EndpointState& chosen) override {
    last_[role_slot(request.role)] = Cursor{chosen.id, true};
  }

 private:
  struct Cursor {
    EndpointId id = 0;
    bool set = false;
  };
  std::array<Cursor, 3> last_{};  // per EndpointRole
};

// Fewest running + waiting requests; KV usage (< 1) breaks ties without outweighing one request.
class LeastLoad final : public RoutingPolicy {
 public:
  std::string_view name() const noexcept override { return "least-load"; }

  void score(const RouteRequest& request, std::span<const EndpointState> endpoints,
             std::span<double> out) const noexcept override {
    const std::size_t n = considered(endpoints);
    for (std::size_t i = 0; i < n && i < out.size(); ++i) {
      const EndpointState& e = endpoints[i];
      const double kv = e.kv_usage < 0 ? 0 : (e.kv_usage > 1 ? 1 : e.kv_usage);
      out[i] = eligible(e, request) ? static_cast<double>(e.load()) + 0.5 * kv : kIneligible;
    }
  }
};

}  // namespace

std::unique_ptr<RoutingPolicy> make_round_robin() {
  return std::make_unique<RoundRobin>();
}
std::unique_ptr<RoutingPolicy> make_least_load() {
  return std::make_unique<LeastLoad>();
}

}  // namespace disagg::routing_detail
