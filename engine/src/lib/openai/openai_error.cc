#include "openai_error.h"

#include <nlohmann/json.hpp>

namespace disagg::http {

std::string_view openai_error_type(unsigned status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: break;
  }
  return status >= 500 ? "server_error" : "invalid_request_error";
}

std::string openai_error_body(unsigned status, std::string_view message, std::string_view param, std::string_view code,
                              std::string_view type) {
  nlohmann::json err = {
      {"message", std::string(message)},
      {"type", std::string(type.empty() ? openai_error_type(status) : type)},
      {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::string(param))},
      {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::string(code))},
  };
  // Invalid UTF-8 (e.g. echoed from a malformed request) is replaced rather than thrown.
  return nlohmann::json{{"error", std::move(err)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace disagg::http
