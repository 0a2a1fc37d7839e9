// http_parse.h — HTTP/1.1 message heads and chunked bodies, parsed in place (RFC 9112).
//
// The servers' own parser: Beast's allocated one field per node and cost about a sixth of the
// router's instructions per request (bench/RESULTS.md, "Router overhead vs nginx"). Here a head
// is parsed into views of the caller's bytes (no allocation, no copy), and a chunked body is
// decoded in place. No Boost: the fuzz target builds it alone (tests/lib/http/http_parse_fuzz.cc).
//
// Contracts:
// - find_head_end() is incremental: pass the offset already searched, so a head that arrives a
//   byte at a time costs linear time in total, not quadratic.
// - parse_*_head() take exactly one complete head (through its empty line, as find_head_end()
//   delimits it). The views in Head point into those bytes: keep them alive and unmoved.
// - Strict where leniency lets two parsers disagree about where a message ends (request
//   smuggling): bare LF, whitespace before a colon, obsolete line folding, a Content-Length that
//   is not all digits or two that differ, Transfer-Encoding together with Content-Length, and any
//   transfer coding but "chunked" are errors.
// - ChunkedDecoder is bounded: a size line (with extensions) and the trailer section are limited,
//   sizes over 2^60 are errors, and it consumes nothing past the message's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string_view>
#include <type_traits>

namespace disagg::http {

enum class ParseError : std::uint8_t {
  none,
  bad_request_line,               ///< not `METHOD SP target SP HTTP/1.x CRLF`
  bad_status_line,                ///< not `HTTP/1.x SP 3DIGIT [SP reason] CRLF`
  bad_version,                    ///< HTTP/2 and later (or garbage after "HTTP/")
  bad_field,                      ///< a field line that is not `token ":" OWS value OWS CRLF`
  too_many_fields,                ///< more than Head::kMaxFields
  bad_content_length,             ///< not digits, too large, or two different values
  bad_transfer_encoding,          ///< Transfer-Encoding with Content-Length, or chunked not last
  unsupported_transfer_encoding,  ///< a transfer coding other than chunked (gzip, ...)
  bad_chunk,                      ///< malformed chunk size line, data not followed by CRLF, bad trailer
  chunk_line_too_long,            ///< a chunk size line or the trailer section over its limit
};
std::string_view to_string(ParseError e);

struct Field {
  std::string_view name;
  std::string_view value;  ///< without leading and trailing whitespace
};

/// How the body of a message is delimited.
enum class BodyKind : std::uint8_t {
  none,         ///< no body (a request without framing fields; HEAD, 1xx, 204, 304 responses)
  length,       ///< Content-Length bytes
  chunked,      ///< Transfer-Encoding: chunked
  until_close,  ///< a response without framing: the body ends when the connection does
};

/// A parsed request or response head. Views point into the bytes it was parsed from.
struct Head {
  /// Fields kept per message; more is an error (431 for requests). Browsers send about 20.
  static constexpr std::size_t kMaxFields = 100;

  std::string_view method;  ///< requests: as sent (methods are case-sensitive)
  std::string_view target;  ///< requests: the request target, e.g. "/v1/completions?x=1"
  unsigned status = 0;      ///< responses
  std::string_view reason;  ///< responses: may be empty
  unsigned version = 11;    ///< 10 or 11 (HTTP/1.x with x > 1 counts as 1.1)
  BodyKind body = BodyKind::none;
  std::uint64_t content_length = 0;  ///< when body == length
  bool keep_alive = true;            ///< after the version's default and the Connection field
  bool expect_continue = false;      ///< requests: `Expect: 100-continue`
  std::size_t field_count = 0;

  std::span<const Field> all_fields() const { return {fields(), field_count}; }
  /// The first field called `name` (ASCII case-insensitive), or nullptr.
  const Field* find(std::string_view name) const;
  /// The value of the first field called `name`, or "" when there is none.
  std::string_view operator[](std::string_view name) const {
    const Field* f = find(name);
    return f == nullptr ? std::string_view{} : f->value;
  }
  /// Appends a field (the parsers do); false when kMaxFields are there already.
  bool add_field(std::string_view name, std::string_view value) {
    if (field_count == kMaxFields) return false;
    ::new (static_cast<void*>(storage_ + field_count * sizeof(Field))) Field{name, value};
    ++field_count;
    return true;
  }

 private:
  const Field* fields() const { return std::launder(reinterpret_cast<const Field*>(storage_)); }
  // Raw storage, not an array of Field: zero-filling 100 empty fields (1.6 KiB) cost more than
  // parsing a head, once per upstream request. Only the first field_count are constructed.
  static_assert(std::is_trivially_copyable_v<Field> && std::is_trivially_destructible_v<Field>);
  alignas(Field) unsigned char storage_[sizeof(Field) * kMaxFields];
};

/// The end of a head in `data`: the offset just past its empty line, or 0 while it is incomplete.
/// `searched` is how far an earlier call got (0 at first) and is updated, so that each byte is
/// scanned about once however the head arrives. Empty lines before a request line are skipped (RFC
/// 9112 2.2) and count as part of the head.
std::size_t find_head_end(std::string_view data, std::size_t& searched);

/// Parses the request head `head` (exactly what find_head_end() delimited).
ParseError parse_request_head(std::string_view head, Head& out);

/// Parses the response head `head`. `head_request`: the response answers a HEAD request (no body
/// whatever the fields say). 1xx responses are parsed like others; the caller skips them.
ParseError parse_response_head(std::string_view head, Head& out, bool head_request = false);

/// ASCII case-insensitive equality (field names, tokens).
bool iequals(std::string_view a, std::string_view b);
/// Whether the comma-separated list `value` holds `token` (ASCII case-insensitive), e.g.
/// has_token("keep-alive, Upgrade", "upgrade").
bool has_token(std::string_view value, std::string_view token);

/// Decodes a chunked body (RFC 9112 7.1), incrementally and in place.
class ChunkedDecoder {
 public:
  /// `max_line_bytes` bounds one chunk size line (with its extensions) and the whole trailer
  /// section.
  explicit ChunkedDecoder(std::size_t max_line_bytes = 4096) : max_line_(max_line_bytes) {}

  struct Result {
    std::size_t consumed = 0;  ///< input bytes used (framing and data)
    std::size_t produced = 0;  ///< data bytes written to the output
    ParseError error = ParseError::none;
  };
  /// Decodes from `in`, writing data bytes to `out` (at most `out_size`; `out` may equal `in`:
  /// output never runs ahead of input, so decoding in place is safe). Stops at the end of the body
  /// (done()), when the output is full, or when the input runs out. After an error, every call
  /// returns it again.
  Result decode(const char* in, std::size_t in_size, char* out, std::size_t out_size);
  /// The last chunk and the trailer section were consumed.
  bool done() const { return state_ == State::done; }
  /// Data bytes decoded so far.
  std::uint64_t total() const { return total_; }

 private:
  enum class State : std::uint8_t {
    size,          // hex digits of the size
    extension,     // after the size: extensions or whitespace up to CR
    size_lf,       // LF after the size line's CR
    data,          // `remaining_` data bytes
    data_cr,       // CR after the data
    data_lf,       // LF after the data
    trailer,       // start of a trailer line (or the final CRLF)
    trailer_line,  // inside a trailer field line
    trailer_lf,    // LF ending a trailer line
    final_lf,      // LF of the final empty line
    done,
    failed,
  };
  State state_ = State::size;
  std::uint64_t remaining_ = 0;
  std::uint64_t total_ = 0;
  std::size_t line_ = 0;     // bytes of the current size line, or of the trailer section
  std::uint8_t digits_ = 0;  // hex digits of the current size
  std::size_t max_line_;
  ParseError error_ = ParseError::none;
};

}  // namespace disagg::http
