// openai_request.h — the fields of an OpenAI completions or chat request that the router and the
// sim-worker both read, read once, so that both answer a malformed one alike
// (tests/servers/router/request_errors_differential_test.cc). Header-only over any nlohmann JSON type (the
// router parses into ordered_json, the sim-worker into json).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "disagg/expected.h"
#include "lib/openai/openai_error.h"

namespace disagg::http {

/// A request's output bound and the field that gave it.
struct OutputBound {
  std::int64_t tokens = 0;      ///< 0 when the request sets neither field
  const char* field = nullptr;  ///< "max_completion_tokens" or "max_tokens"; null when unset
};

/// max_completion_tokens, else max_tokens (the first one set; null counts as unset). Refuses a
/// non-integer, and an integer below 1 in vLLM's words ("max_tokens must be at least 1, got 0."),
/// naming the field as the client sent it. A value above int64 is kept at the int64 maximum: no
/// context is that long, and the worker, which knows its own, refuses it.
template <class Json>
Expected<OutputBound, ApiError> read_output_bound(const Json& body) {
  for (const char* key : {"max_completion_tokens", "max_tokens"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_number_integer()) {
      return unexpected(ApiError{400, std::string("'") + key + "' must be a whole number >= 1", key, ""});
    }
    std::int64_t n = 0;
    if (it->is_number_unsigned()) {
      constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
      n = static_cast<std::int64_t>(std::min(it->template get<std::uint64_t>(), kMax));
    } else {
      n = it->template get<std::int64_t>();
    }
    if (n < 1)
      return unexpected(
          ApiError{400, std::string(key) + " must be at least 1, got " + std::to_string(n) + ".", key, ""});
    return OutputBound{n, key};
  }
  return OutputBound{};
}

/// vLLM's rule for `stream_options` (validate_stream_options in its protocol): refused with 400
/// when it is set (truthy as Python reads JSON: not null, false, 0, "", [] or {}) and `stream` is
/// not true, in vLLM's words.
template <class Json>
Expected<void, ApiError> check_stream_options(const Json& body, bool stream) {
  auto it = body.find("stream_options");
  if (it == body.end() || stream) return {};
  const Json& v = *it;
  const bool truthy = v.is_object() || v.is_array() || v.is_string() ? !v.empty()
                      : v.is_boolean()                               ? v.template get<bool>()
                      : v.is_number()                                ? v.template get<double>() != 0
                                                                     : false;
  if (!truthy) return {};
  return unexpected(ApiError{400, "Stream options can only be defined when `stream=True`.", "stream_options", ""});
}

}  // namespace disagg::http
