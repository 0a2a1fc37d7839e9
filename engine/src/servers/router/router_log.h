// router_log.h — the router's clock helpers and its one log line format, shared by its parts.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace disagg::router {

using Clock = std::chrono::steady_clock;

/// Milliseconds on the steady clock (health and ejection times).
inline std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

/// "disagg-engine router: <line>" on stderr, flushed (operators read it live; tests wait for it).
inline void log_line(const std::string& line) {
  std::fprintf(stderr, "disagg-engine router: %s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace disagg::router
