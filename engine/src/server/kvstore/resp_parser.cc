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

void RespParser::reject(std::string message) {
  if (!rejected_) error_ = std::move(message);
  rejected_ = true;
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
  offsets_.clear();
  std::size_t i = pos_;
  while (i < end) {
    while (i < end && (data[i] == ' ' || data[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < end && data[i] != ' ' && data[i] != '\t') ++i;
    if (i > start) offsets_.emplace_back(start, i - start);
  }
  pos_ = nl + 1;
  return finish_command(data);
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
        if (data[pos_] != '$') {
          return fail(std::string("expected '$', got '") + data[pos_] + "'");
        }
        if (data[cr + 1] != '\n') return fail("expected CRLF after bulk length");
        long long n = 0;
        if (!parse_int(data.substr(pos_ + 1, cr - pos_ - 1), &n) || n < 0) return fail("invalid bulk length");
        const auto len = static_cast<std::size_t>(n);
        if (len > limits_.max_bulk_bytes) {
          reject("ERR argument of " + std::to_string(len) + " bytes exceeds --max-value-bytes (" +
                 std::to_string(limits_.max_bulk_bytes) + "); split the value or raise the limit");
        } else if (request_bytes_ + len > limits_.max_request_bytes) {
          reject("ERR request exceeds --max-request-bytes (" + std::to_string(limits_.max_request_bytes) +
                 "); send fewer keys per command");
        }
        request_bytes_ += len;
        bulk_len_ = len;
        skip_remaining_ = len + 2;
        pos_ = cr + 2;
        wanted_ = rejected_ ? 0 : pos_ + len + 2;
        state_ = State::kBulkData;
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
