// disagg/version.h — the engine's version, shared by the binary and the addon.
#pragma once

#include <string_view>

namespace disagg {

/// The engine version (the CMake project version, e.g. "0.1.0"). Never fails.
std::string_view engine_version() noexcept;

}  // namespace disagg
