// Incremental, bounded parser for Redis protocol (RESP2) requests.
//
// Requests are arrays of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or inline commands
// (`PING\r\n`, `SET k "a b"`, as typed into telnet; quoting as in Redis's sdssplitargs). Arguments
// are views into the caller's buffer, except large ones (ParserLimits::direct_bulk_bytes): those get
// a Blob of their exact size that the caller reads the socket straight into (kPayload), so a 1 MiB
// SET value is never copied in user space and becomes the stored value as is; and inline arguments
// with quotes or escapes, which are decoded into the parser's own bounded storage.
//
// Hostile input: a declared length over a limit (--max-value-bytes, --max-request-bytes, the
// argument count) is a protocol error at the header, before any of its bytes are awaited (as
// Redis's "invalid bulk length"), so a client cannot make the server wait for gigabytes. A command
// whose declared bytes pass ParserLimits::admit_above is reported (kAdmit) before any of its large
// arguments is buffered, so the caller can bound the memory of values still arriving. Its state survives partial input, so bytes fed one at a time cost the
// same total work as bytes fed at once (no rescanning), and it never allocates per byte (the
// argument table is reused and grows only with the argument count).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "blob.h"

namespace disagg::kvstore {

/// Bounds every request must respect.
struct ParserLimits {
  /// Longest single argument (a value for SET); a longer declared length is a protocol error.
  std::size_t max_bulk_bytes = 512u << 20;
  /// Most arguments in one command; more is a protocol error (the stream cannot be trusted).
  std::size_t max_args = 1u << 20;
  /// Most argument bytes in one command (MSET of many values); more declared is a protocol error.
  std::size_t max_request_bytes = 1u << 30;
  /// A command whose declared argument bytes exceed this is reported with kAdmit at each bulk
  /// header that raises them (before that argument's bytes are buffered). SIZE_MAX: never.
  std::size_t admit_above = ~static_cast<std::size_t>(0);
  /// Longest inline command line.
  std::size_t max_inline_bytes = 64u << 10;
  /// Arguments at least this long that are not yet fully buffered are received into their own
  /// Blob (kPayload) instead of the caller's buffer. 0 = never (every argument is a buffer view).
  std::size_t direct_bulk_bytes = 0;
};

/// An argument received into its own Blob: args()[index] views blob.
struct PayloadArg {
  std::size_t index;
  Blob blob;
};

enum class ParseStatus {
  kNeedMore,       ///< Incomplete: feed more bytes (after dropping `take_discardable()` bytes).
  kCommand,        ///< A complete command: see args(); then drop consumed() bytes.
  kRejected,       ///< A command refused with refuse() has been skipped to its end: drop consumed().
  kProtocolError,  ///< Malformed stream: reply error() and close the connection.
  /// A large argument started: the caller drops its buffered bytes from payload_offset() on (they
  /// were copied into the payload), then fills payload_space() / commit_payload() before parsing on.
  kPayload,
  /// A bulk header raised the command's declared bytes (declared_bytes()) above admit_above: the
  /// caller either accepts them (does nothing, or reserves memory for them) or calls refuse(), then
  /// parses on. Nothing of the new argument is buffered yet.
  kAdmit,
};

class RespParser {
 public:
  explicit RespParser(ParserLimits limits = {});

  /// Parses at most one command. `data` must start at the first byte not yet consumed or
  /// discarded, and must keep (unchanged) every byte given to earlier calls that returned kNeedMore.
  ParseStatus parse(std::string_view data);

  /// After kCommand or kRejected: the command's length in bytes. The parser is ready for the next one.
  [[nodiscard]] std::size_t consumed() const { return consumed_; }

  /// After kCommand: the arguments, views into the `data` of the last parse() call, into a payload
  /// Blob (payloads()), or, for an inline command with quotes, into the parser's own storage (see
  /// owns()); valid until the next parse(). Empty for no-op input (a blank inline line, `*0`),
  /// which callers skip without a reply, and after kRejected.
  [[nodiscard]] const std::vector<std::string_view>& args() const { return args_; }

  /// After kNeedMore: bytes at the front of the buffer that the caller may drop now (payload of a
  /// rejected argument being skipped). Calling this commits the drop; the caller must do it.
  std::size_t take_discardable();

  /// After kNeedMore: total bytes (from the buffer front) the current command is known to need, so
  /// the caller can size its buffer once instead of growing it repeatedly for a large value.
  [[nodiscard]] std::size_t wanted() const { return wanted_; }

  /// After kCommand: the arguments received as payloads (in argument order); they stay valid until
  /// release_payloads() or the next parse(). Take a Blob copy to keep one (no byte copy).
  [[nodiscard]] const std::vector<PayloadArg>& payloads() const { return payloads_; }
  /// Drops the payloads of the last command (call once it has executed, so a value deleted later is
  /// not kept alive by the parser).
  void release_payloads() { payloads_.clear(); }

  /// After kPayload: the buffer offset from which the caller must drop every buffered byte.
  [[nodiscard]] std::size_t payload_offset() const { return payload_offset_; }
  /// Bytes of the current payload still to come from the socket (0 when none is in progress).
  [[nodiscard]] std::size_t payload_missing() const {
    return state_ == State::kPayload ? payload_.size() - payload_filled_ : 0;
  }
  /// Where the next payload byte goes; payload_missing() bytes are writable there.
  [[nodiscard]] char* payload_space() { return payload_.data() + payload_filled_; }
  /// Records `n` (at most payload_missing()) bytes written at payload_space().
  void commit_payload(std::size_t n) { payload_filled_ += n; }

  /// After kAdmit: argument bytes the command in flight has declared so far (all its bulk lengths).
  [[nodiscard]] std::size_t declared_bytes() const { return request_bytes_; }
  /// After kAdmit only: refuses the command. Its remaining bytes are skipped without being buffered
  /// (take_discardable()), and its end is reported as kRejected with `message` as error().
  void refuse(std::string message);

  /// True when `arg` views the parser's own storage (a decoded inline argument).
  [[nodiscard]] bool owns(std::string_view arg) const {
    return arg.data() >= inline_args_.data() && arg.data() + arg.size() <= inline_args_.data() + inline_args_.size();
  }

  /// After kRejected or kProtocolError: the message for the error reply, without "-" and CRLF.
  [[nodiscard]] const std::string& error() const { return error_; }

  /// Forgets any partial command (used when a connection is reset).
  void reset();

 private:
  enum class State { kStart, kArrayLen, kBulkLen, kBulkData, kPayload, kInline };
  // offsets_ entry of a payload argument: (kPayloadOffset, index into payloads_).
  static constexpr std::size_t kPayloadOffset = ~static_cast<std::size_t>(0);

  // Finds "\r\n" at or after pos_ within `limit` bytes. Returns the index of '\r', or npos.
  std::size_t find_line_end(std::string_view data, std::size_t limit, bool* too_long) const;
  ParseStatus fail(std::string message);
  ParseStatus finish_command(std::string_view data);
  ParseStatus parse_inline(std::string_view data);

  ParserLimits limits_;
  State state_ = State::kStart;
  std::size_t pos_ = 0;  // next byte to examine, relative to the buffer front
  std::size_t args_expected_ = 0;
  std::size_t bulk_len_ = 0;
  std::size_t skip_remaining_ = 0;  // bytes of a refused argument (and CRLF) still to skip
  std::size_t request_bytes_ = 0;
  bool rejected_ = false;  // refuse()d: skip the rest, then report kRejected
  std::size_t consumed_ = 0;
  std::size_t wanted_ = 0;
  std::vector<std::pair<std::size_t, std::size_t>> offsets_;  // (offset, length) per argument
  std::vector<std::string_view> args_;
  std::vector<PayloadArg> payloads_;  // payload arguments of the command being parsed / last parsed
  Blob payload_;                      // the payload being received (state kPayload)
  std::size_t payload_filled_ = 0;
  std::size_t payload_offset_ = 0;
  std::string inline_args_;  // decoded quoted inline arguments (at most max_inline_bytes)
  std::vector<std::pair<std::size_t, std::size_t>> inline_spans_;  // (offset, length) in inline_args_
  std::string error_;
};

}  // namespace disagg::kvstore
