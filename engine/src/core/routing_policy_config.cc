#include "disagg/routing_policy_config.h"

#include <cmath>
#include <initializer_list>
#include <string_view>

namespace disagg {

namespace {

std::string one_of(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// Refuses a member of `object` not among `known`, naming the known ones.
Expected<void, std::string> only_known(const JsonValue& object, std::string_view at,
                                       std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : object.members()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok)
      return unexpected(
          std::string("'").append(at).append(key).append("' is not a field here; use ").append(one_of(known)));
  }
  return {};
}

}  // namespace

Expected<RoutingPolicySection, std::string> read_routing_policy_section(const JsonValue& policy,
                                                                        const PolicyOptions& defaults) {
  RoutingPolicySection out;
  out.options = defaults;
  if (!policy.is_object()) {
    return unexpected("'policy' (" + policy.dump() + ") must be an object, e.g. {\"name\": \"kv-aware\"}");
  }
  if (auto known =
          only_known(policy, "policy.", {"$comment", "name", "weights", "options", "disaggregation", "prefixSource"});
      !known) {
    return unexpected(known.error());
  }

  if (const JsonValue* name = policy.find("name"); name != nullptr && !name->is_null()) {
    if (!name->is_string() || name->as_string().empty()) {
      return unexpected("'policy.name' (" + name->dump() + ") must be a policy's name: kv-aware, least-loaded or " +
                        routing_policy_names_text());
    }
    const std::string_view engine = routing_policy_engine_name(name->as_string());
    if (!routing_policy_known(engine)) {
      return unexpected(std::string("'policy.name' (\"") + name->as_string() +
                        "\") is not a routing policy; use kv-aware, least-loaded or " + routing_policy_names_text());
    }
    out.policy = std::string(engine);
  }

  if (const JsonValue* weights = policy.find("weights"); weights != nullptr && !weights->is_null()) {
    if (!weights->is_object())
      return unexpected("'policy.weights' (" + weights->dump() + ") must be an object of prefix, queue and kvUsage");
    for (const auto& [key, option] : {std::pair{"prefix", "prefixWeight"}, std::pair{"queue", "queueWeight"},
                                      std::pair{"kvUsage", "kvUtilizationWeight"}}) {
      const JsonValue* w = weights->find(key);
      if (w == nullptr || w->is_null()) continue;
      if (!w->is_number() || w->as_number() < 0) {
        return unexpected(std::string("'policy.weights.") + key + "' (" + w->dump() + ") must be a number >= 0");
      }
      auto set = set_policy_option(out.options, option, w->as_number());
      if (!set) return unexpected(std::string("'policy.weights.") + key + "': " + set.error().message);
    }
    if (auto known = only_known(*weights, "policy.weights.", {"prefix", "queue", "kvUsage"}); !known)
      return unexpected(known.error());
  }

  if (const JsonValue* options = policy.find("options"); options != nullptr && !options->is_null()) {
    if (!options->is_object()) {
      return unexpected("'policy.options' (" + options->dump() +
                        ") must be an object of numbers, e.g. {\"prefixWeight\": 3}");
    }
    for (const auto& [key, value] : options->members()) {
      if (!value.is_number())
        return unexpected(std::string("'policy.options.") + key + "' (" + value.dump() + ") must be a number");
      auto set = set_policy_option(out.options, key, value.as_number());
      if (!set) return unexpected(std::string("'policy.options.") + key + "': " + set.error().message);
      if (key == "maxEndpoints") out.max_endpoints_given = true;
    }
  }

  if (const JsonValue* dis = policy.find("disaggregation"); dis != nullptr && !dis->is_null()) {
    if (!dis->is_object()) return unexpected("'policy.disaggregation' (" + dis->dump() + ") must be an object");
    if (auto known = only_known(*dis, "policy.disaggregation.", {"minUncachedPromptTokens"}); !known)
      return unexpected(known.error());
    if (const JsonValue* min = dis->find("minUncachedPromptTokens"); min != nullptr && !min->is_null()) {
      constexpr double kMax = static_cast<double>(1LL << 40);
      if (!min->is_number() || min->as_number() < 0 || min->as_number() > kMax ||
          std::floor(min->as_number()) != min->as_number()) {
        return unexpected(
            "'policy.disaggregation.minUncachedPromptTokens' (" + min->dump() +
            ") must be a whole number in [0, 1099511627776]: prompts with fewer uncached tokens prefill on "
            "their decode endpoint");
      }
      out.min_uncached_prompt_tokens = static_cast<std::int64_t>(min->as_number());
    }
  }

  if (const JsonValue* source = policy.find("prefixSource"); source != nullptr && !source->is_null()) {
    const std::string s = source->is_string() ? source->as_string() : std::string();
    if (s == "index") {
      out.prefix_source = PrefixSource::index;
    } else if (s == "history") {
      out.prefix_source = PrefixSource::history;
    } else if (s == "auto") {
      out.prefix_source = PrefixSource::automatic;
    } else {
      return unexpected(
          "'policy.prefixSource' (" + source->dump() +
          ") must be index (KV events), history (approximate) or auto (index with router.tokenizer, else history)");
    }
  }
  return out;
}

}  // namespace disagg
