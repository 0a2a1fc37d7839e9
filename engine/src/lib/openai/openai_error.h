// openai_error.h — the OpenAI error body shared by the sim-worker and the router.
//
// Shape (OpenAI API reference, "Error codes"; vLLM's OpenAI server returns the same object):
//   {"error": {"message": "...", "type": "invalid_request_error", "param": null, "code": null}}
#pragma once

#include <string>
#include <string_view>

namespace disagg::http {

/// A refused request, as both the router and the sim-worker answer it: the HTTP status and the
/// fields of its OpenAI error body (openai_error_body; an empty `param` or `code` is written as null).
struct ApiError {
  unsigned status = 400;
  std::string message;
  std::string param;
  std::string code;
};

/// The `type` of an OpenAI error for an HTTP status: 400/404/405/413/422 invalid_request_error,
/// 401 authentication_error, 429 rate_limit_error, 503 overloaded_error, other 5xx server_error.
std::string_view openai_error_type(unsigned status);

/// `{"error":{"message","type","param","code"}}`. Empty `param` or `code` are written as null.
/// `type` empty = openai_error_type(status).
std::string openai_error_body(unsigned status, std::string_view message, std::string_view param = {},
                              std::string_view code = {}, std::string_view type = {});

}  // namespace disagg::http
