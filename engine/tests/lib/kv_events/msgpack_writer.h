// msgpack_writer.h — a tiny msgpack writer for tests: builds KV event batches byte by byte, in
// shapes the sim-worker does not produce (map-like with extra keys, byte-string hashes, unknown
// events, 2-element batches, corrupted input).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::router::testing {

class Writer {
 public:
  Writer& array(std::uint32_t n) { return head(0x90, 0xdc, 0xdd, n); }
  Writer& map(std::uint32_t n) { return head(0x80, 0xde, 0xdf, n); }
  Writer& str(std::string_view s) {
    if (s.size() < 32) out_.push_back(static_cast<char>(0xa0 | s.size()));
    else be(0xd9, s.size(), 1);
    out_.append(s);
    return *this;
  }
  Writer& bin(std::string_view s) {
    be(0xc4, s.size(), 1);
    out_.append(s);
    return *this;
  }
  Writer& nil() {
    out_.push_back(static_cast<char>(0xc0));
    return *this;
  }
  Writer& u64(std::uint64_t v) {
    if (v < 128) out_.push_back(static_cast<char>(v));
    else be(0xcf, v, 8);
    return *this;
  }
  Writer& i64(std::int64_t v) { return be(0xd3, static_cast<std::uint64_t>(v), 8); }
  Writer& f64(double v) {
    std::uint64_t bits;
    static_assert(sizeof bits == sizeof v);
    __builtin_memcpy(&bits, &v, 8);
    return be(0xcb, bits, 8);
  }
  Writer& raw(std::string_view bytes) {
    out_.append(bytes);
    return *this;
  }
  const std::string& bytes() const { return out_; }

 private:
  Writer& head(int fix, int w16, int w32, std::uint32_t n) {
    if (n < 16) out_.push_back(static_cast<char>(fix | static_cast<int>(n)));
    else if (n < 65536) be(w16, n, 2);
    else be(w32, n, 4);
    return *this;
  }
  Writer& be(int marker, std::uint64_t v, int width) {
    out_.push_back(static_cast<char>(marker));
    for (int i = width - 1; i >= 0; --i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  std::string out_;
};

}  // namespace disagg::router::testing
