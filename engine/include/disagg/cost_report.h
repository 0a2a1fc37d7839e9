// disagg/cost_report.h — step times of a cost model at a set of probe points, as JSON.
//
// Shared by `disagg-engine cost` and the addon's costModel(), so both print the same numbers:
// the JSON text is produced here, once, with shortest round-trip formatting of doubles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "disagg/cost_model.h"
#include "disagg/expected.h"

namespace disagg {

/// The step shapes to evaluate. Every list holds 1..kMaxProbePoints values in [1, kMaxProbeValue].
struct CostProbes {
  static constexpr std::size_t kMaxProbePoints = 64;
  static constexpr std::int64_t kMaxProbeValue = 1'000'000'000;  // keeps every product in int64

  /// [prefillTokens] Prompt lengths prefilled from an empty cache, one sequence each.
  std::vector<std::int64_t> prefill_tokens{128, 512, 2048, 8192};
  /// [decodeBatches] Decode batch sizes (sequences per step).
  std::vector<std::int64_t> decode_batches{1, 8, 32, 128};
  /// [contextTokensPerSequence] Tokens in the KV cache of each decoding sequence.
  std::int64_t context_tokens_per_sequence = 4096;
  /// [mixedChunkTokens] Prefill chunk added to each decode batch for the mixed-step points.
  std::int64_t mixed_chunk_tokens = 512;
  /// [transferTokens] Prompt lengths whose KV cache is moved from prefill to decode.
  std::vector<std::int64_t> transfer_tokens{1024, 8192, 32768};
};

/// Checks the limits documented on CostProbes. Failure: CostModelErrc::not_positive (a value < 1
/// or above kMaxProbeValue, reported with field e.g. "probes.prefillTokens") or wrong_type (a list
/// that is empty or longer than kMaxProbePoints).
Expected<void, CostModelError> validate(const CostProbes& probes);

struct PrefillPoint {
  std::int64_t tokens;
  StepTime time;
};
struct DecodePoint {
  std::int64_t sequences;
  std::int64_t context_tokens_per_sequence;
  StepTime time;
};
struct MixedPoint {
  std::int64_t prefill_tokens;
  std::int64_t sequences;
  std::int64_t context_tokens_per_sequence;
  StepTime time;
};
struct TransferPoint {
  std::int64_t tokens;
  double bytes;
  double seconds;
};

/// Step times at every probe point.
struct CostReport {
  int tensor_parallel = 1;
  std::vector<PrefillPoint> prefill;
  std::vector<DecodePoint> decode;
  std::vector<MixedPoint> mixed;
  std::vector<TransferPoint> kv_transfer;
};

/// Evaluates `model` at every point of `probes`. Precondition: validate(probes) succeeded.
CostReport build_cost_report(const CostModel& model, const CostProbes& probes);

/// The report as compact JSON (shape documented in engine/README.md, "cost report").
std::string to_json(const CostReport& report);

}  // namespace disagg
