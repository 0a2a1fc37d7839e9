// retry_policy.h — when a failed upstream attempt may be repeated on another endpoint.
//
// Safe to repeat: nothing of the response was relayed to the client yet, and the failure says the
// worker did not serve the request: the connection failed (refused, reset, timed out, or the
// request could not be written), the worker closed or timed out before its response header, or it
// answered 5xx. Never after the first byte was relayed (the client has part of an answer), never
// for 4xx (the request itself is refused; another worker would refuse it too), never past the
// request's deadline or beyond max_retries further attempts.
#pragma once

#include <cstdint>

namespace disagg::router {

enum class AttemptResult : std::uint8_t {
  connect_failed,          ///< resolve / connect / write failure
  failed_before_response,  ///< closed, reset or timed out before the response header
  status_5xx,              ///< a 5xx header (its body is read, nothing relayed)
  status_4xx,              ///< the worker refused the request
  broke_after_first_byte,  ///< failed while the answer was being relayed
  ok,
};

/// Whether attempt number `attempt` (0 = the first) that ended with `result` may be followed by
/// another one on a different endpoint.
constexpr bool should_retry(AttemptResult result, int attempt, int max_retries, bool deadline_passed) {
  const bool safe = result == AttemptResult::connect_failed || result == AttemptResult::failed_before_response ||
                    result == AttemptResult::status_5xx;
  return safe && attempt < max_retries && !deadline_passed;
}

}  // namespace disagg::router
