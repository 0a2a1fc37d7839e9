#include "resp_parser.h"

#include <cstring>

namespace disagg::kvstore {
namespace {

// "*" or "$" headers are a sign, at most 20 digits and CRLF; anything longer is garbage.
constexpr std::size_t kMaxHeaderLine = 32;

// Parses a decimal integer (optionally negative); false when `text` is not one.
bool parse_int(std::string_view text, long long* out) {
  if (text.empty() || text.size() > 20) return false;
  bool negative = false;
  std::size_t i = 0;
  if (text[0] == '-') {
    negative = true;
    i = 1;
    if (text.size() == 1) return false;
  }
  unsigned long long value = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') return false;
    if (value > (~0ULL - 9) / 10) return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > static_cast<unsigned long long>(1LL << 62)) return false;
  *out = negative ? -static_cast<long long>(value) : static_cast<long long>(value);
  return true;
}

bool is_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Splits an inline line with quotes the way Redis's sdssplitargs() does: "double quotes" take
// \n \r \t \b \a \xHH and \<any> escapes, 'single quotes' take \' only, a closing quote must be
// followed by whitespace or the end, and quoting may start inside a word (ab"c d" is one word).
// Appends the decoded bytes to `out` and (offset, length) per argument to `spans`; false when a
// quote is unbalanced.
bool split_quoted(std::string_view line, std::string* out, std::vector<std::pair<std::size_t, std::size_t>>* spans) {
  const std::size_t n = line.size();
  const auto at = [&](std::size_t k) { return k < n ? line[k] : '\0'; };  // the end reads as C's NUL
  std::size_t i = 0;
  for (;;) {
    while (i < n && is_space(line[i])) ++i;
    if (i >= n) return true;
    const std::size_t start = out->size();
    bool in_double = false, in_single = false, done = false;
    while (!done) {
      const char c = at(i);
      if (in_double) {
        if (c == '\\' && at(i + 1) == 'x' && hex_value(at(i + 2)) >= 0 && hex_value(at(i + 3)) >= 0) {
          out->push_back(static_cast<char>(hex_value(at(i + 2)) * 16 + hex_value(at(i + 3))));
          i += 3;
        } else if (c == '\\' && at(i + 1) != '\0') {
          ++i;
          switch (at(i)) {
            case 'n': out->push_back('\n'); break;
            case 'r': out->push_back('\r'); break;
            case 't': out->push_back('\t'); break;
            case 'b': out->push_back('\b'); break;
            case 'a': out->push_back('\a'); break;
            default: out->push_back(at(i)); break;
          }
        } else if (c == '"') {
          if (at(i + 1) != '\0' && !is_space(at(i + 1))) return false;
          done = true;
        } else if (c == '\0') {
          return false;
        } else {
          out->push_back(c);
        }
      } else if (in_single) {
        if (c == '\\' && at(i + 1) == '\'') {
          ++i;
          out->push_back('\'');
        } else if (c == '\'') {
          if (at(i + 1) != '\0' && !is_space(at(i + 1))) return false;
          done = true;
        } else if (c == '\0') {
          return false;
        } else {
          out->push_back(c);
        }
      } else {
        switch (c) {
          case ' ':
          case '\n':
          case '\r':
          case '\t':
          case '\0': done = true; break;
          case '"': in_double = true; break;
          case '\'': in_single = true; break;
          default: out->push_back(c); break;
        }
      }
      if (i < n) ++i;
    }
    spans->emplace_back(start, out->size() - start);
  }
}

}  // namespace

RespParser::RespParser(ParserLimits limits) : limits_(limits) {
  offsets_.reserve(16);
  args_.reserve(16);
}

void RespParser::reset() {
  state_ = State::kStart;
  pos_ = 0;
  args_expected_ = 0;
  bulk_len_ = 0;
  skip_remaining_ = 0;
  request_bytes_ = 0;
  rejected_ = false;
  consumed_ = 0;
  wanted_ = 0;
  offsets_.clear();
  payloads_.clear();
  payload_ = Blob();
  payload_filled_ = 0;
}

std::size_t RespParser::take_discardable() {
  // Only a rejected command's bytes are dead; a healthy command's arguments must stay in place.
  if (!rejected_) return 0;
  const std::size_t n = pos_;
  pos_ = 0;
  wanted_ = wanted_ > n ? wanted_ - n : 0;
  return n;
}

std::size_t RespParser::find_line_end(std::string_view data, std::size_t limit, bool* too_long) const {
  *too_long = false;
  const std::size_t available = data.size() - pos_;
  const std::size_t scan = available < limit ? available : limit;
  const char* base = data.data() + pos_;
  const void* hit = scan == 0 ? nullptr : std::memchr(base, '\r', scan);
  if (hit == nullptr) {
    if (available >= limit) *too_long = true;
    return std::string_view::npos;
  }
  const std::size_t cr = pos_ + static_cast<std::size_t>(static_cast<const char*>(hit) - base);
  if (cr + 1 >= data.size()) return std::string_view::npos;  // need the '\n'
  return cr;
}

ParseStatus RespParser::fail(std::string message) {
  error_ = "ERR Protocol error: " + std::move(message);
  return ParseStatus::kProtocolError;
}

void RespParser::refuse(std::string message) {
  // Right after kAdmit: state_ is kBulkData with skip_remaining_ covering the new argument, so the
  // skip path takes over; the command's earlier arguments (pos_ bytes) become discardable.
  if (!rejected_) error_ = std::move(message);
  rejected_ = true;
  wanted_ = 0;
  offsets_.clear();
  payloads_.clear();
}

ParseStatus RespParser::finish_command(std::string_view data) {
  consumed_ = pos_;
  const bool rejected = rejected_;
  state_ = State::kStart;
  pos_ = 0;
  wanted_ = 0;
  request_bytes_ = 0;
  rejected_ = false;
  if (rejected) {
    // Also drop the previous command's args: they view bytes the caller has since consumed.
    args_.clear();
    offsets_.clear();
    payloads_.clear();
    return ParseStatus::kRejected;
  }
  args_.clear();
  for (const auto& [off, len] : offsets_) {
    if (off == kPayloadOffset) {
      payloads_[len].index = args_.size();
      args_.push_back(payloads_[len].blob.view());
    } else {
      args_.push_back(data.substr(off, len));
    }
  }
  offsets_.clear();
  return ParseStatus::kCommand;
}

ParseStatus RespParser::parse_inline(std::string_view data) {
  payloads_.clear();
  const std::size_t available = data.size() - pos_;
  const std::size_t scan = available < limits_.max_inline_bytes ? available : limits_.max_inline_bytes;
  const void* hit = scan == 0 ? nullptr : std::memchr(data.data() + pos_, '\n', scan);
  if (hit == nullptr) {
    if (available >= limits_.max_inline_bytes) return fail("too big inline request");
    return ParseStatus::kNeedMore;
  }
  const std::size_t nl = static_cast<std::size_t>(static_cast<const char*>(hit) - data.data());
  std::size_t end = nl;
  if (end > pos_ && data[end - 1] == '\r') --end;
  // Redis splits the line as a C string: a NUL byte ends it.
  if (const void* nul = std::memchr(data.data() + pos_, '\0', end - pos_)) {
    end = static_cast<std::size_t>(static_cast<const char*>(nul) - data.data());
  }
  const std::string_view line = data.substr(pos_, end - pos_);
  offsets_.clear();
  const bool quoted = line.find_first_of("\"'") != std::string_view::npos;
  if (!quoted) {
    // Words as Redis splits them: leading isspace() skipped, a word ends at space, tab or CR.
    std::size_t i = 0;
    for (;;) {
      while (i < line.size() && is_space(line[i])) ++i;
      if (i >= line.size()) break;
      const std::size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
      offsets_.emplace_back(pos_ + start, i - start);
      if (i < line.size()) ++i;
    }
    pos_ = nl + 1;
    return finish_command(data);
  }
  // Quotes: decode into inline_args_, reserved once for the whole line so views stay put.
  inline_args_.clear();
  inline_args_.reserve(line.size());
  inline_spans_.clear();
  if (!split_quoted(line, &inline_args_, &inline_spans_)) return fail("unbalanced quotes in request");
  pos_ = nl + 1;
  consumed_ = pos_;
  state_ = State::kStart;
  pos_ = 0;
  wanted_ = 0;
  request_bytes_ = 0;
  args_.clear();
  for (const auto& [off, len] : inline_spans_) args_.emplace_back(inline_args_.data() + off, len);
  return ParseStatus::kCommand;
}

ParseStatus RespParser::parse(std::string_view data) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        if (pos_ >= data.size()) return ParseStatus::kNeedMore;
        if (data[pos_] != '*') {
          state_ = State::kInline;
          break;
        }
        state_ = State::kArrayLen;
        break;
      }
      case State::kInline: {
        const ParseStatus st = parse_inline(data);
        if (st == ParseStatus::kCommand && args_.empty()) {
          // An empty line (e.g. a bare CRLF between commands) is skipped, as Redis does.
          return ParseStatus::kCommand;
        }
        return st;
      }
      case State::kArrayLen: {
        bool too_long = false;
        const std::size_t cr = find_line_end(data, kMaxHeaderLine, &too_long);
        if (cr == std::string_view::npos) {
          if (too_long) return fail("invalid multibulk length");
          return ParseStatus::kNeedMore;
        }
        if (data[cr + 1] != '\n') return fail("expected CRLF after multibulk length");
        long long n = 0;
        if (!parse_int(data.substr(pos_ + 1, cr - pos_ - 1), &n)) return fail("invalid multibulk length");
        if (n > static_cast<long long>(limits_.max_args)) return fail("invalid multibulk length");
        pos_ = cr + 2;
        if (n <= 0) {  // "*0" and "*-1" carry no command; skip them like Redis does
          offsets_.clear();
          return finish_command(data);
        }
        args_expected_ = static_cast<std::size_t>(n);
        offsets_.clear();
        payloads_.clear();
        if (offsets_.capacity() < args_expected_ && args_expected_ <= 1024) offsets_.reserve(args_expected_);
        state_ = State::kBulkLen;
        break;
      }
      case State::kBulkLen: {
        bool too_long = false;
        const std::size_t cr = find_line_end(data, kMaxHeaderLine, &too_long);
        if (cr == std::string_view::npos) {
          if (too_long) return fail("invalid bulk length");
          return ParseStatus::kNeedMore;
        }
        if (data[pos_] != '$') { return fail(std::string("expected '$', got '") + data[pos_] + "'"); }
        if (data[cr + 1] != '\n') return fail("expected CRLF after bulk length");
        long long n = 0;
        if (!parse_int(data.substr(pos_ + 1, cr - pos_ - 1), &n) || n < 0) return fail("invalid bulk length");
        const auto len = static_cast<std::size_t>(n);
        // Refused at the header, as Redis does for proto-max-bulk-len: waiting for the bytes (even
        // to skip them) would let a client hold the connection on a length it never sends.
        if (len > limits_.max_bulk_bytes) {
          return fail("invalid bulk length (" + std::to_string(len) + " bytes; --max-value-bytes is " +
                      std::to_string(limits_.max_bulk_bytes) + ": split the value or raise the limit)");
        }
        if (request_bytes_ + len > limits_.max_request_bytes) {
          return fail("invalid bulk length (the command's arguments pass --max-request-bytes, " +
                      std::to_string(limits_.max_request_bytes) + "; send fewer keys per command)");
        }
        request_bytes_ += len;
        bulk_len_ = len;
        skip_remaining_ = len + 2;
        pos_ = cr + 2;
        wanted_ = rejected_ ? 0 : pos_ + len + 2;
        state_ = State::kBulkData;
        if (!rejected_ && request_bytes_ > limits_.admit_above) return ParseStatus::kAdmit;
        break;
      }
      case State::kBulkData: {
        if (rejected_) {
          // Skip the payload (and its CRLF) without buffering it: the caller drops the skipped
          // bytes via take_discardable(), so an oversized value never occupies memory.
          const std::size_t available = data.size() - pos_;
          if (available < skip_remaining_) {
            skip_remaining_ -= available;
            pos_ = data.size();
            return ParseStatus::kNeedMore;
          }
          pos_ += skip_remaining_;
          skip_remaining_ = 0;
          if (--args_expected_ == 0) return finish_command(data);
          state_ = State::kBulkLen;
          break;
        }
        if (data.size() < pos_ + bulk_len_ + 2) {
          const std::size_t buffered = data.size() - pos_;
          if (limits_.direct_bulk_bytes == 0 || bulk_len_ < limits_.direct_bulk_bytes || buffered >= bulk_len_) {
            return ParseStatus::kNeedMore;
          }
          // Receive the rest of this argument into its final buffer: copy the (short) prefix that
          // arrived with the header, and let the caller read the socket straight into the blob.
          payload_ = Blob::allocate(bulk_len_);
          if (buffered > 0) std::memcpy(payload_.data(), data.data() + pos_, buffered);
          payload_filled_ = buffered;
          payload_offset_ = pos_;
          wanted_ = pos_ + 2;  // the CRLF after the payload comes into the caller's buffer
          state_ = State::kPayload;
          return ParseStatus::kPayload;
        }
        offsets_.emplace_back(pos_, bulk_len_);
        pos_ += bulk_len_;
        if (data[pos_] != '\r' || data[pos_ + 1] != '\n') return fail("expected CRLF after bulk data");
        pos_ += 2;
        if (--args_expected_ == 0) return finish_command(data);
        state_ = State::kBulkLen;
        break;
      }
      case State::kPayload: {
        // The payload bytes are not in `data`: pos_ is where its CRLF goes.
        if (payload_filled_ < payload_.size() || data.size() < pos_ + 2) return ParseStatus::kNeedMore;
        if (data[pos_] != '\r' || data[pos_ + 1] != '\n') return fail("expected CRLF after bulk data");
        offsets_.emplace_back(kPayloadOffset, payloads_.size());
        payloads_.push_back({0, std::move(payload_)});
        payload_ = Blob();
        payload_filled_ = 0;
        pos_ += 2;
        if (--args_expected_ == 0) return finish_command(data);
        state_ = State::kBulkLen;
        break;
      }
    }
  }
}

}  // namespace disagg::kvstore
