// router_config_detail.h — helpers shared by the router's flag parser (router_config.cc) and its
// JSON reader (router_config_json.cc). Not part of the router's interface.
#pragma once

#include <string>
#include <string_view>

#include "disagg/expected.h"
#include "disagg/routing.h"
#include "router_config.h"

namespace disagg::router::config_detail {

/// "aggregated" / "both", "prefill" or "decode"; the error names `field` and the value.
Expected<EndpointRole, std::string> role_of(const std::string& field, const std::string& value);

/// Adds one LoRA adapter, NAME or NAME=PATH as vLLM's --lora-modules takes it, to c.lora_adapters
/// and c.lora_paths (the path empty when not given). Error: names `field`, the value and the fix.
Expected<void, std::string> add_lora_adapter(RouterConfig& c, const std::string& field, const std::string& value);

/// set_policy_option() on c.options, remembering an explicit maxEndpoints
/// (RouterConfig::max_endpoints_given).
Expected<void, RoutingError> set_option(RouterConfig& c, std::string_view key, double value);

}  // namespace disagg::router::config_detail
