#include "disagg/version.h"

#ifndef DISAGG_VERSION
#error "DISAGG_VERSION must be defined by the build (engine/CMakeLists.txt)"
#endif

namespace disagg {

std::string_view engine_version() noexcept {
  return DISAGG_VERSION;
}

}  // namespace disagg
