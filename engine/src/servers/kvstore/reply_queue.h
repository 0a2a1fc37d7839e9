// Outgoing bytes of one connection: small replies are packed into one reused byte buffer, large
// values are queued by reference (a Blob) and written with writev, so a GET never copies its value
// and, once the buffers have grown to the connection's usual backlog, queuing a reply allocates
// nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "blob.h"

namespace disagg::kvstore {

class ReplyQueue {
 public:
  /// Values at least this large are queued by reference instead of copied.
  static constexpr std::size_t kReferenceThreshold = 16u << 10;

  void simple(std::string_view text);  ///< +text
  void error(std::string_view text);   ///< -text (text starts with the code, e.g. "ERR ..."); CR/LF become spaces
  void integer(std::int64_t value);    ///< :n
  void bulk(std::string_view bytes);   ///< $len bytes (copied)
  void bulk(const Blob& value);        ///< $len value (by reference when large)
  void null_bulk();                    ///< $-1
  void array(std::size_t count);       ///< *count
  void raw(std::string_view bytes);

  enum class FlushResult { kDrained, kWouldBlock, kError };
  /// Writes as much as the socket takes without blocking (writev of up to 64 pieces per call).
  FlushResult flush(int fd);

  [[nodiscard]] bool empty() const { return head_ == pieces_.size(); }
  /// Bytes queued and not yet written.
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

 private:
  // Bytes [begin, end) of `blob`, or of small_ when blob is an empty handle.
  struct Piece {
    Blob blob;
    std::size_t begin = 0, end = 0;
  };
  // Appends to small_, extending the last piece when it already ends there.
  char* append_small(std::size_t n);
  // Once everything is written: forget the pieces, keep the buffers (unless a rare burst made them
  // large, so an idle connection does not hold a big reply's memory).
  void reset_when_drained();
  // Drops written pieces and bytes from the front when they are most of the buffers (a client that
  // pipelines without pause never lets the queue drain).
  void compact();

  std::string small_;          // small replies, back to back; pieces hold offsets (small_ may move)
  std::vector<Piece> pieces_;  // [head_, size) are still to be written, in order
  std::size_t head_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace disagg::kvstore
