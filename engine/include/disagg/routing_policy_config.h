// disagg/routing_policy_config.h — the `policy` section of the engine configuration, read once.
//
// The router process (`disagg-engine router --config`) and the simulator (`simulate|plan --config`,
// the addon) read the same file the constructs write (engine/schema/engine-config.schema.json,
// `policy`): this is their one reader, so a file routes in the simulation as it routes in the
// deployment. engine/tests/servers/router/policy_config_differential_test.cc reads the same files through
// both front ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "disagg/expected.h"
#include "disagg/json_value.h"
#include "disagg/routing.h"

namespace disagg {

/// Where the prefix scorers read what each endpoint holds (`policy.prefixSource`).
enum class PrefixSource : std::uint8_t {
  index,      ///< the KV block index, fed by the workers' KV events (precise)
  history,    ///< the policy's own history of what it routed (approximate)
  automatic,  ///< "auto": index when the router has the served model's tokenizer, else history
};

/// The `policy` section as read. Fields the section leaves out stay unset (or at the defaults
/// given), so each reader keeps its own default for them.
struct RoutingPolicySection {
  /// The engine's policy name (routing_policy_engine_name of `name`, one of routing_policy_names()).
  /// Absent `name`: the schema's default, "llm-d" (kv-aware).
  std::string policy = "llm-d";
  /// The defaults passed in, with `weights` and `options` applied.
  PolicyOptions options;
  /// `options.maxEndpoints` was given (the router sizes its history by its endpoints otherwise).
  bool max_endpoints_given = false;
  /// `disaggregation.minUncachedPromptTokens`.
  std::optional<std::int64_t> min_uncached_prompt_tokens;
  /// `prefixSource`.
  std::optional<PrefixSource> prefix_source;
};

/// Reads `policy`, the section's value, over `defaults`. Every key the schema names is read and
/// any other refused; each error names the field, the value received and the fix, e.g.
/// "'policy.weights.prefix' (-1) must be a number >= 0". Not for hot paths.
Expected<RoutingPolicySection, std::string> read_routing_policy_section(const JsonValue& policy,
                                                                        const PolicyOptions& defaults = {});

}  // namespace disagg
