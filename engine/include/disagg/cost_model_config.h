// disagg/cost_model_config.h — where each CostModelParams field lives in the JSON configuration.
//
// One table names every field (section, key, default, constraint), so that the `disagg-engine cost`
// binary (nlohmann-json), the addon (Node-API objects) and the tests read, default and validate the
// configuration the same way. engine/schema/engine-config.schema.json mirrors this table; a jest test
// compares them.
#pragma once

#include <span>
#include <string_view>

#include "disagg/cost_model.h"
#include "disagg/expected.h"

namespace disagg {

/// The rule a field's value must satisfy.
enum class FieldConstraint {
  positive,          ///< > 0
  non_negative,      ///< >= 0
  fraction,          ///< in (0, 1]
  positive_integer,  ///< whole number >= 1
  whole_number,      ///< whole number >= 0
};

/// One field of the cost-model configuration.
struct CostModelField {
  std::string_view section;  ///< top-level object: "model", "hardware", "parallel" or "efficiency"
  std::string_view key;      ///< camelCase key inside the section
  bool required;             ///< absent => CostModelErrc::missing_field
  double default_value;      ///< used when absent and not required
  FieldConstraint constraint;
  double (*get)(const CostModelParams&);
  void (*set)(CostModelParams&, double);
  std::string_view hint;  ///< how to fix a refused value (completes "...; <hint>")
};

/// Every field, in schema order. The span refers to static storage.
std::span<const CostModelField> cost_model_fields();

/// The sections that hold cost-model fields, in order.
std::span<const std::string_view> cost_model_sections();

/// What a ConfigSource found at a path.
enum class Lookup {
  found,       ///< present with the expected type
  missing,     ///< absent (or JSON null)
  wrong_type,  ///< present with another type
};

/// Read access to a parsed configuration document. Implementations adapt a JSON library or a
/// JavaScript object; they must not throw.
class ConfigSource {
 public:
  virtual ~ConfigSource() = default;
  /// Whether top-level `section` is an object.
  virtual Lookup section(std::string_view section) const = 0;
  /// The number at `section`.`key`; writes *out only when found. Called only for sections that
  /// section() reported found.
  virtual Lookup number(std::string_view section, std::string_view key, double* out) const = 0;
};

/// Reads every field of cost_model_fields() from `source` (absent optional fields take their
/// default; an absent section counts as empty), then validates with CostModel::create.
/// Failure modes: missing_field, wrong_type, and every CostModel::create error.
Expected<CostModel, CostModelError> read_cost_model(const ConfigSource& source);

}  // namespace disagg
