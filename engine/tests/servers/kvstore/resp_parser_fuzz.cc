// libFuzzer target: the RESP parser must never crash, read out of bounds or loop, whatever the
// bytes and however they are split. Build with -DDISAGG_FUZZ=ON and clang.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "resp_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte picks the chunk size, so the same input is also explored fragmented.
  const std::size_t chunk = 1 + data[0] % 64;
  disagg::kvstore::ParserLimits limits;
  limits.max_bulk_bytes = 4096;
  limits.max_args = 1024;
  limits.max_request_bytes = 16384;
  limits.max_inline_bytes = 1024;
  limits.direct_bulk_bytes = (data[0] & 0x80) ? 32 : 0;          // also explore payloads read into their own Blob
  limits.admit_above = (data[0] & 0x40) ? 64 : ~std::size_t{0};  // and admission, refusing every other ask
  disagg::kvstore::RespParser parser(limits);
  std::size_t asks = 0;
  std::string buffer;
  for (std::size_t pos = 1; pos < size; pos += chunk) {
    const std::size_t n = std::min(chunk, size - pos);
    const std::size_t direct = std::min(n, parser.payload_missing());
    if (direct > 0) {
      std::memcpy(parser.payload_space(), data + pos, direct);
      parser.commit_payload(direct);
    }
    buffer.append(reinterpret_cast<const char*>(data) + pos + direct, n - direct);
    for (int guard = 0; guard < 100000; ++guard) {
      const auto st = parser.parse(buffer);
      if (st == disagg::kvstore::ParseStatus::kNeedMore) {
        buffer.erase(0, parser.take_discardable());
        if (buffer.size() > 64 * 1024) __builtin_trap();  // bounded buffering
        break;
      }
      if (st == disagg::kvstore::ParseStatus::kPayload) {
        if (parser.payload_offset() > buffer.size() || parser.payload_missing() == 0) __builtin_trap();
        buffer.resize(parser.payload_offset());
        continue;
      }
      if (st == disagg::kvstore::ParseStatus::kAdmit) {
        if (parser.declared_bytes() <= limits.admit_above) __builtin_trap();
        if (++asks % 2 == 0) parser.refuse("refused");
        continue;
      }
      if (st == disagg::kvstore::ParseStatus::kProtocolError) return 0;
      if (parser.consumed() == 0 || parser.consumed() > buffer.size()) __builtin_trap();  // progress
      std::size_t next_payload = 0;
      for (std::size_t i = 0; i < parser.args().size(); ++i) {
        const auto arg = parser.args()[i];
        const auto& payloads = parser.payloads();
        if (next_payload < payloads.size() && payloads[next_payload].index == i) {
          const auto& blob = payloads[next_payload++].blob;
          if (arg.data() != blob.data() || arg.size() != blob.size()) __builtin_trap();
        } else if (!parser.owns(arg) &&
                   (arg.data() < buffer.data() || arg.data() + arg.size() > buffer.data() + buffer.size())) {
          __builtin_trap();
        }
      }
      buffer.erase(0, parser.consumed());
    }
  }
  return 0;
}
