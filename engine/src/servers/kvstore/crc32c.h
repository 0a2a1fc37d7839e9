// CRC-32C (Castagnoli), the checksum of every disk-tier record.
#pragma once

#include <cstddef>
#include <cstdint>

namespace disagg::kvstore {

/// Extends `crc` (0 for a fresh checksum) over `size` bytes at `data`. Uses the SSE4.2 crc32
/// instruction when the CPU has it, a table-driven fallback otherwise; both give the same result.
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size);

inline std::uint32_t crc32c(const void* data, std::size_t size) {
  return crc32c_extend(0, data, size);
}

}  // namespace disagg::kvstore
