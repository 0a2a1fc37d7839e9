// libFuzzer target for the KV event decoder (built with clang and -DDISAGG_FUZZ=ON):
//   CXX=clang++ cmake -S engine -B engine/build-fuzz -DDISAGG_FUZZ=ON && cmake --build engine/build-fuzz \
//     --target disagg_kv_event_decoder_fuzz && engine/build-fuzz/src/servers/router/disagg_kv_event_decoder_fuzz -max_total_time=60
// The first byte picks the limits, the rest is the batch. Every decoded record must point inside
// the hash array; a decode of the same bytes must give the same result.
#include <cstddef>
#include <cstdint>

#include "kv_event_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  disagg::router::KvDecodeLimits limits;
  if (data[0] & 1) {
    limits.max_events = 8;
    limits.max_hashes = 16;
    limits.max_depth = 4;
  }
  const std::span<const std::uint8_t> bytes(data + 1, size - 1);
  static disagg::router::KvEventBatch batch;
  static disagg::router::KvEventBatch again;
  const bool ok = static_cast<bool>(disagg::router::decode_kv_event_batch(bytes, batch, limits));
  if (ok) {
    for (const auto& e : batch.events) {
      if (static_cast<std::size_t>(e.first_hash) + e.hash_count > batch.hashes.size()) __builtin_trap();
    }
  }
  const bool ok2 = static_cast<bool>(disagg::router::decode_kv_event_batch(bytes, again, limits));
  if (ok != ok2 || (ok && again.hashes != batch.hashes)) __builtin_trap();
  return 0;
}
