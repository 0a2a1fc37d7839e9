// nlohmann_config_source.h — adapts a parsed nlohmann::json document to the engine's ConfigSource
// (disagg/cost_model_config.h), so every nlohmann-based reader (the sim-worker, `disagg-engine cost`)
// maps the cost-model sections through the one field table in core. It sits with the servers, not
// the command line, so that a server includes no command-line header; core stays free of nlohmann.
// Precondition: `doc` outlives the source. Not thread-safe beyond what nlohmann's const access is.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "disagg/cost_model_config.h"

namespace disagg {

class NlohmannConfigSource final : public ConfigSource {
 public:
  explicit NlohmannConfigSource(const nlohmann::json& doc) : doc_(doc) {}

  Lookup section(std::string_view name) const override {
    auto it = doc_.find(std::string(name));
    if (it == doc_.end() || it->is_null()) return Lookup::missing;
    return it->is_object() ? Lookup::found : Lookup::wrong_type;
  }

  // Precondition: section(section) returned Lookup::found.
  Lookup number(std::string_view section, std::string_view key, double* out) const override {
    const nlohmann::json& s = doc_.at(std::string(section));
    auto it = s.find(std::string(key));
    if (it == s.end() || it->is_null()) return Lookup::missing;
    if (!it->is_number()) return Lookup::wrong_type;
    *out = it->get<double>();
    return Lookup::found;
  }

 private:
  const nlohmann::json& doc_;
};

}  // namespace disagg
