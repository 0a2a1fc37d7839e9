// vllm_release.h — which KV-event wire format each vLLM release writes: the one table of those
// facts (kv_event_wire.h describes the formats themselves). The sim-worker imitates a row
// (--vllm-version); the router reads every row's format without being told which.
//
// A row applies from its release up to the next row's. Sources:
//   0.19  the worker image's pinned vLLM (0.19.1): msgspec `array_like=True` structs (batch and
//         events positional, the event's tag first), replay answers ["", seq, payload].
//   0.24  vLLM PR #42892 ("Switch event structs from array to map encoding", merged 2026-06-09):
//         every event a map tagged "type"; the EventBatch stays positional [ts, events, dp_rank].
//         First release after the merge: 0.24.0 (verl-project/uni-agent#216 decodes map events
//         from 0.24.0; a v0.26.0 capture in volcano-sh/kthena#1535 shows
//         [ts, [{"type": "BlockStored", ...}], 0]).
//   0.26  vLLM PR #45177 (merged 2026-06-10, in v0.26.0 per llm-d/llm-d#2196, which moved from
//         v0.25.0 to get it): replay answers carry the topic, ["", topic, seq, payload], end
//         marker ["", "", -1, ""].
// Releases after the newest row are taken to write the newest row's format.
#pragma once

#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kv_event_wire.h"

namespace disagg::kv_wire {

/// The wire format of one vLLM release (and the releases up to the next row).
struct VllmRelease {
  int major = 0;
  int minor = 0;
  Encoding batch = Encoding::array_like;   ///< EventBatch
  Encoding events = Encoding::array_like;  ///< BlockStored, BlockRemoved, AllBlocksCleared
  ReplayFraming replay = ReplayFraming::seq_payload;
  std::string_view source;  ///< why this row (PR numbers)
};

inline constexpr std::array<VllmRelease, 3> kVllmReleases = {{
    {0, 19, Encoding::array_like, Encoding::array_like, ReplayFraming::seq_payload,
     "pinned image vLLM 0.19.1: array_like structs"},
    {0, 24, Encoding::array_like, Encoding::map_like, ReplayFraming::seq_payload,
     "vLLM PR #42892: events as maps tagged \"type\", batch positional"},
    {0, 26, Encoding::array_like, Encoding::map_like, ReplayFraming::topic_seq_payload,
     "vLLM PR #45177: replay answers carry the topic"},
}};

/// The newest format imitated, the sim-worker's default.
inline constexpr const VllmRelease& kNewestVllmRelease = kVllmReleases.back();

/// The row for a release written "0.26", "0.26.1" or "v0.19.1" (a suffix after the patch number,
/// such as "rc1" or ".dev3", is ignored). nullopt when `version` is not of that form or is older
/// than the oldest row.
inline std::optional<VllmRelease> vllm_release(std::string_view version) {
  if (!version.empty() && (version.front() == 'v' || version.front() == 'V')) version.remove_prefix(1);
  int parts[2] = {0, 0};
  const char* p = version.data();
  const char* end = version.data() + version.size();
  for (int i = 0; i < 2; ++i) {
    if (i == 1) {
      if (p == end || *p != '.') return std::nullopt;
      ++p;
    }
    const auto [next, ec] = std::from_chars(p, end, parts[i]);
    if (ec != std::errc() || next == p) return std::nullopt;
    p = next;
  }
  if (p != end && *p != '.' && *p != '+' && *p != 'r' && *p != '-') return std::nullopt;
  std::optional<VllmRelease> found;
  for (const VllmRelease& r : kVllmReleases) {
    if (parts[0] > r.major || (parts[0] == r.major && parts[1] >= r.minor)) found = r;
  }
  return found;
}

}  // namespace disagg::kv_wire
