// libFuzzer target for the in-place HTTP/1.1 parser (engine/src/lib/http/http_parse.h), the
// first code every byte from a client or an upstream meets. The first input byte picks the mode
// (request head, response head, chunked body) and a split point; the rest is the message.
// Checked beyond "no crash, no sanitizer report":
// - find_head_end() fed byte by byte finds the same end as on the whole input;
// - every view of a parsed head lies inside the parsed bytes;
// - a chunked body decodes to the same bytes, end and error whole, in two pieces, and in place.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "http_parse.h"

namespace {

using namespace disagg::http;

void check_inside(std::string_view outer, std::string_view inner) {
  if (inner.empty()) return;
  if (inner.data() < outer.data() || inner.data() + inner.size() > outer.data() + outer.size()) { __builtin_trap(); }
}

void fuzz_head(std::string_view in, bool request) {
  std::size_t searched = 0;
  const std::size_t end = find_head_end(in, searched);
  std::size_t incremental = 0;
  searched = 0;
  for (std::size_t n = 0; n <= in.size() && incremental == 0; ++n) {
    incremental = find_head_end(in.substr(0, n), searched);
  }
  if (incremental != end) __builtin_trap();
  if (end == 0) return;
  const std::string_view head = in.substr(0, end);
  static Head h;  // large: not on the fuzzer's stack
  const ParseError e = request ? parse_request_head(head, h) : parse_response_head(head, h);
  if (e != ParseError::none) return;
  check_inside(head, h.method);
  check_inside(head, h.target);
  check_inside(head, h.reason);
  if (h.field_count > Head::kMaxFields) __builtin_trap();
  for (const Field& f : h.all_fields()) {
    if (f.name.empty()) __builtin_trap();
    check_inside(head, f.name);
    check_inside(head, f.value);
  }
  if (h.body == BodyKind::length && h.content_length >= (std::uint64_t{1} << 60)) __builtin_trap();
  if (request && h.body == BodyKind::until_close) __builtin_trap();
}

struct Decoded {
  std::string out;
  std::size_t consumed = 0;
  ParseError error = ParseError::none;
  bool done = false;
};

Decoded decode(std::string_view in, std::size_t cut) {
  ChunkedDecoder d(256);
  Decoded r;
  std::string pending;
  for (const std::string_view part : {in.substr(0, cut), in.substr(cut)}) {
    pending.append(part);
    const auto step = d.decode(pending.data(), pending.size(), pending.data(), pending.size());
    if (step.produced > step.consumed) __builtin_trap();
    r.out.append(pending, 0, step.produced);
    pending.erase(0, step.consumed);
    r.consumed += step.consumed;
    r.error = step.error;
    if (step.error != ParseError::none || d.done()) break;
  }
  r.done = d.done();
  if (r.out.size() != d.total()) __builtin_trap();
  return r;
}

void fuzz_chunked(std::string_view in, std::size_t cut) {
  const Decoded whole = decode(in, in.size());
  const Decoded split = decode(in, cut % (in.size() + 1));
  if (whole.out != split.out || whole.consumed != split.consumed || whole.error != split.error ||
      whole.done != split.done) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (mode % 3) {
    case 0: fuzz_head(in, true); break;
    case 1: fuzz_head(in, false); break;
    default: fuzz_chunked(in, mode / 3); break;
  }
  return 0;
}
