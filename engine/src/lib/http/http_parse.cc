#include "http_parse.h"

#include <cstring>

namespace disagg::http {

namespace {

// Character classes of RFC 9110: tchar (token characters) and field-value characters (VCHAR,
// obs-text, SP and HTAB; every other control character is refused).
struct Classes {
  bool token[256] = {};
  bool value[256] = {};
  constexpr Classes() {
    for (int c = '0'; c <= '9'; ++c) token[c] = true;
    for (int c = 'a'; c <= 'z'; ++c) token[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c) token[c] = true;
    for (const char c : std::string_view("!#$%&'*+-.^_`|~")) token[static_cast<unsigned char>(c)] = true;
    for (int c = 0x20; c < 0x7f; ++c) value[c] = true;
    for (int c = 0x80; c < 0x100; ++c) value[c] = true;
    value[static_cast<unsigned char>('\t')] = true;
  }
};
constexpr Classes kClasses;

bool is_token(char c) {
  return kClasses.token[static_cast<unsigned char>(c)];
}
bool is_value(char c) {
  return kClasses.value[static_cast<unsigned char>(c)];
}

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c;
}

// The end of a run of field-value characters from p: eight bytes at a time while none of them is a
// control character or DEL (most of a head), then byte by byte (HTAB, which is allowed, and the
// CR that ends the line both stop the fast loop).
const char* scan_value(const char* p, const char* end) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kHigh = 0x8080808080808080ULL;
  while (end - p >= 8) {
    std::uint64_t x;
    std::memcpy(&x, p, 8);
    const std::uint64_t below_space = (x - kOnes * 0x20) & ~x & kHigh;  // a byte < 0x20
    const std::uint64_t y = x ^ (kOnes * 0x7f);
    const std::uint64_t del = (y - kOnes) & ~y & kHigh;  // a byte == 0x7f
    if ((below_space | del) != 0) break;
    p += 8;
  }
  while (p < end && is_value(*p)) ++p;
  return p;
}

// Whether the token `a` equals `lowercase`, a literal of lowercase letters, digits and '-':
// setting bit 5 folds ASCII letters to lowercase, and a token's other characters cannot alias one.
bool token_is(std::string_view a, std::string_view lowercase) {
  if (a.size() != lowercase.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if ((a[i] | 0x20) != lowercase[i]) return false;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Parses "HTTP/d.d" at p; sets version (10 or 11). Returns the position after it or nullptr.
const char* parse_version(const char* p, const char* end, unsigned& version, ParseError& err) {
  if (end - p < 8 || std::memcmp(p, "HTTP/", 5) != 0 || p[6] != '.' || p[5] < '0' || p[5] > '9' || p[7] < '0' ||
      p[7] > '9') {
    return nullptr;
  }
  if (p[5] != '1') {
    err = ParseError::bad_version;  // HTTP/2.0, HTTP/0.9: not HTTP/1.x
    return nullptr;
  }
  version = p[7] == '0' ? 10 : 11;
  return p + 8;
}

// Field lines from p to the end of the head (its final CRLF included), into out.fields.
ParseError parse_fields(const char* p, const char* end, Head& out) {
  while (true) {
    if (p >= end) return ParseError::bad_field;
    if (*p == '\r') {  // the empty line: must be the last two bytes of the head
      return end - p == 2 && p[1] == '\n' ? ParseError::none : ParseError::bad_field;
    }
    const char* name = p;
    while (p < end && is_token(*p)) ++p;
    // A line starting with whitespace (obsolete folding) or whitespace before the colon: refused,
    // as RFC 9112 5.1-5.2 requires of servers (two parsers could disagree on them).
    if (p == name || p >= end || *p != ':') return ParseError::bad_field;
    const std::string_view field_name(name, static_cast<std::size_t>(p - name));
    ++p;
    const char* value = p;
    p = scan_value(p, end);
    if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return ParseError::bad_field;  // CTL or bare LF
    if (!out.add_field(field_name, trim(std::string_view(value, static_cast<std::size_t>(p - value))))) {
      return ParseError::too_many_fields;
    }
    p += 2;
  }
}

// Digits only, no sign, no list: anything else is how request smuggling starts.
bool parse_length(std::string_view v, std::uint64_t& out) {
  if (v.empty() || v.size() > 18) return false;  // 18 digits: under 2^60
  std::uint64_t n = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  out = n;
  return true;
}

// Interprets the framing and connection fields of a parsed head (both directions).
ParseError interpret_fields(Head& out) {
  bool has_length = false;
  bool has_te = false;
  bool chunked_last = false;
  bool close = false;
  bool keep = false;
  for (const Field& f : out.all_fields()) {
    switch (f.name.size()) {
      case 14:
        if (token_is(f.name, "content-length")) {
          std::uint64_t n = 0;
          if (!parse_length(f.value, n) || (has_length && n != out.content_length)) {
            return ParseError::bad_content_length;
          }
          has_length = true;
          out.content_length = n;
        }
        break;
      case 17:
        if (token_is(f.name, "transfer-encoding")) {
          // Each coding in the list, over every Transfer-Encoding field in order.
          std::string_view rest = f.value;
          while (true) {
            const std::size_t comma = rest.find(',');
            const std::string_view coding = trim(rest.substr(0, comma));
            if (!coding.empty()) {
              if (!iequals(coding, "chunked")) return ParseError::unsupported_transfer_encoding;
              if (chunked_last) return ParseError::bad_transfer_encoding;  // chunked twice
              chunked_last = true;
            }
            if (comma == std::string_view::npos) break;
            rest.remove_prefix(comma + 1);
          }
          has_te = true;
        }
        break;
      case 10:
        if (token_is(f.name, "connection")) {
          close = close || has_token(f.value, "close");
          keep = keep || has_token(f.value, "keep-alive");
        }
        break;
      case 6:
        if (token_is(f.name, "expect")) out.expect_continue = iequals(f.value, "100-continue");
        break;
      default: break;
    }
  }
  if (has_te && (has_length || !chunked_last)) return ParseError::bad_transfer_encoding;
  if (has_te) {
    out.body = BodyKind::chunked;
  } else if (has_length) {
    out.body = BodyKind::length;
  }
  out.keep_alive = out.version >= 11 ? !close : keep && !close;
  return ParseError::none;
}

void reset(Head& out) {
  out.method = {};
  out.target = {};
  out.status = 0;
  out.reason = {};
  out.version = 11;
  out.body = BodyKind::none;
  out.content_length = 0;
  out.keep_alive = true;
  out.expect_continue = false;
  out.field_count = 0;
}

const char* skip_empty_lines(const char* p, const char* end) {
  while (end - p >= 2 && p[0] == '\r' && p[1] == '\n') p += 2;
  return p;
}

}  // namespace

std::string_view to_string(ParseError e) {
  switch (e) {
    case ParseError::none: return "none";
    case ParseError::bad_request_line: return "malformed request line";
    case ParseError::bad_status_line: return "malformed status line";
    case ParseError::bad_version: return "unsupported HTTP version (HTTP/1.0 and HTTP/1.1 are served)";
    case ParseError::bad_field: return "malformed header field line";
    case ParseError::too_many_fields: return "too many header fields";
    case ParseError::bad_content_length: return "malformed or conflicting Content-Length";
    case ParseError::bad_transfer_encoding:
      return "Transfer-Encoding with Content-Length, or chunked is not the last coding";
    case ParseError::unsupported_transfer_encoding: return "unsupported transfer coding (only chunked is)";
    case ParseError::bad_chunk: return "malformed chunked body";
    case ParseError::chunk_line_too_long: return "chunk size line or trailer section too long";
  }
  return "unknown";
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool has_token(std::string_view value, std::string_view token) {
  while (true) {
    const std::size_t comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) return false;
    value.remove_prefix(comma + 1);
  }
}

const Field* Head::find(std::string_view name) const {
  for (const Field& f : all_fields()) {
    if (iequals(f.name, name)) return &f;
  }
  return nullptr;
}

std::size_t find_head_end(std::string_view data, std::size_t& searched) {
  const char* const begin = data.data();
  const char* const end = begin + data.size();
  const char* const start = skip_empty_lines(begin, end);
  // Resume a few bytes back: the terminator may straddle the previous end.
  const std::size_t from = searched > 3 ? searched - 3 : 0;
  const char* p = begin + from < start ? start : begin + from;
  searched = data.size();
  while (p < end) {
    const void* hit = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
    if (hit == nullptr) return 0;
    const char* lf = static_cast<const char*>(hit);
    // "\r\n\r\n" ends the head; so does a bare-LF empty line, which the parser then refuses
    // (otherwise such a head would only end at the size limit).
    if ((lf - start >= 1 && lf[-1] == '\n') || (lf - start >= 3 && lf[-1] == '\r' && lf[-2] == '\n')) {
      return static_cast<std::size_t>(lf + 1 - begin);
    }
    p = lf + 1;
  }
  return 0;
}

ParseError parse_request_head(std::string_view head, Head& out) {
  reset(out);
  const char* end = head.data() + head.size();
  const char* p = skip_empty_lines(head.data(), end);
  const char* method = p;
  while (p < end && is_token(*p)) ++p;
  if (p == method || p >= end || *p != ' ') return ParseError::bad_request_line;
  out.method = std::string_view(method, static_cast<std::size_t>(p - method));
  const char* target = ++p;
  // Any visible character (origin-form, absolute-form, authority-form or "*"); no whitespace.
  while (p<end&& static_cast<unsigned char>(*p)> 0x20 && *p != 0x7f) ++p;
  if (p == target || p >= end || *p != ' ') return ParseError::bad_request_line;
  out.target = std::string_view(target, static_cast<std::size_t>(p - target));
  ++p;
  ParseError err = ParseError::bad_request_line;
  p = parse_version(p, end, out.version, err);
  if (p == nullptr) return err;
  if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return ParseError::bad_request_line;
  err = parse_fields(p + 2, end, out);
  if (err != ParseError::none) return err;
  return interpret_fields(out);
}

ParseError parse_response_head(std::string_view head, Head& out, bool head_request) {
  reset(out);
  const char* end = head.data() + head.size();
  const char* p = head.data();
  ParseError err = ParseError::bad_status_line;
  p = parse_version(p, end, out.version, err);
  if (p == nullptr) return err;
  if (end - p < 4 || p[0] != ' ') return ParseError::bad_status_line;
  unsigned status = 0;
  for (int i = 1; i <= 3; ++i) {
    if (p[i] < '0' || p[i] > '9') return ParseError::bad_status_line;
    status = status * 10 + static_cast<unsigned>(p[i] - '0');
  }
  if (status < 100) return ParseError::bad_status_line;
  out.status = status;
  p += 4;
  if (p < end && *p == ' ') {
    ++p;
  } else if (p >= end || *p != '\r') {
    return ParseError::bad_status_line;  // e.g. a fourth digit
  }
  const char* reason = p;
  p = scan_value(p, end);
  if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return ParseError::bad_status_line;
  out.reason = std::string_view(reason, static_cast<std::size_t>(p - reason));
  err = parse_fields(p + 2, end, out);
  if (err != ParseError::none) return err;
  err = interpret_fields(out);
  if (err != ParseError::none) return err;
  if (head_request || status < 200 || status == 204 || status == 304) {
    out.body = BodyKind::none;
  } else if (out.body == BodyKind::none) {
    out.body = BodyKind::until_close;  // no framing: the body runs to the connection's end
    out.keep_alive = false;
  }
  return ParseError::none;
}

ChunkedDecoder::Result ChunkedDecoder::decode(const char* in, std::size_t in_size, char* out, std::size_t out_size) {
  Result r;
  const char* p = in;
  const char* const end = in + in_size;
  char* o = out;
  char* const out_end = out + out_size;
  const auto fail = [&](ParseError e) {
    state_ = State::failed;
    error_ = e;
  };
  // One byte of framing: `want` moves on to `next`; anything else is a malformed chunk.
  const auto expect = [&](char want, State next) {
    if (*p != want) {
      fail(ParseError::bad_chunk);
      return false;
    }
    ++p;
    state_ = next;
    return true;
  };
  bool full = false;  // the output has no room left
  while (p < end && !full && state_ != State::done && state_ != State::failed) {
    const char c = *p;
    switch (state_) {
      case State::size: {
        const int v = hex_value(c);
        if (v >= 0) {
          if (digits_ == 15) {  // 16^15 = 2^60 bytes: no real chunk is that large
            fail(ParseError::bad_chunk);
            break;
          }
          remaining_ = remaining_ * 16 + static_cast<std::uint64_t>(v);
          ++digits_;
          ++line_;
          ++p;
        } else if (digits_ == 0) {
          fail(ParseError::bad_chunk);
        } else {
          state_ = State::extension;
        }
        break;
      }
      case State::extension:
        // Extensions (";name=value") and whitespace are skipped, not interpreted.
        if (c == '\r') {
          state_ = State::size_lf;
        } else if (c == '\n' || (c != '\t' && !is_value(c))) {
          fail(ParseError::bad_chunk);
          break;
        }
        ++p;
        if (++line_ > max_line_) fail(ParseError::chunk_line_too_long);
        break;
      case State::size_lf:
        if (expect('\n', remaining_ == 0 ? State::trailer : State::data)) {
          line_ = 0;
          digits_ = 0;
        }
        break;
      case State::data: {
        std::size_t k = static_cast<std::size_t>(end - p);
        if (remaining_ < k) k = static_cast<std::size_t>(remaining_);
        if (static_cast<std::size_t>(out_end - o) < k) k = static_cast<std::size_t>(out_end - o);
        if (k == 0) {
          full = true;
          break;
        }
        if (o != p) std::memmove(o, p, k);
        o += k;
        p += k;
        remaining_ -= k;
        total_ += k;
        if (remaining_ == 0) state_ = State::data_cr;
        break;
      }
      case State::data_cr: expect('\r', State::data_lf); break;
      case State::data_lf: expect('\n', State::size); break;
      case State::trailer:
        if (c == '\r') {
          ++p;
          state_ = State::final_lf;
        } else {
          state_ = State::trailer_line;  // a trailer field: discarded
        }
        break;
      case State::trailer_line:
        ++p;
        if (++line_ > max_line_) {
          fail(ParseError::chunk_line_too_long);
        } else if (c == '\r') {
          state_ = State::trailer_lf;
        } else if (c == '\n' || (c != '\t' && !is_value(c))) {
          fail(ParseError::bad_chunk);
        }
        break;
      case State::trailer_lf:
      case State::final_lf: expect('\n', state_ == State::final_lf ? State::done : State::trailer); break;
      case State::done:
      case State::failed: break;
    }
  }
  r.consumed = static_cast<std::size_t>(p - in);
  r.produced = static_cast<std::size_t>(o - out);
  r.error = state_ == State::failed ? error_ : ParseError::none;
  return r;
}

}  // namespace disagg::http
