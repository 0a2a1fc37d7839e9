// Outgoing bytes of one connection: small replies are packed into byte chunks, large values are
// queued by reference (a Blob) and written with writev, so a GET never copies its value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "blob.h"

namespace disagg::kvstore {

class ReplyQueue {
 public:
  /// Values at least this large are queued by reference instead of copied.
  static constexpr std::size_t kReferenceThreshold = 16u << 10;

  void simple(std::string_view text);  ///< +text
  void error(std::string_view text);   ///< -text (text starts with the code, e.g. "ERR ...")
  void integer(std::int64_t value);    ///< :n
  void bulk(std::string_view bytes);   ///< $len bytes (copied)
  void bulk(const Blob& value);        ///< $len value (by reference when large)
  void null_bulk();                    ///< $-1
  void array(std::size_t count);       ///< *count
  void raw(std::string_view bytes);

  enum class FlushResult { kDrained, kWouldBlock, kError };
  /// Writes as much as the socket takes without blocking.
  FlushResult flush(int fd);

  [[nodiscard]] bool empty() const { return chunks_.empty(); }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

 private:
  struct Chunk {
    std::string bytes;  // used when blob is empty
    Blob blob;
    std::size_t offset = 0;  // bytes of this chunk already written
    [[nodiscard]] std::string_view view() const {
      return blob.empty_handle() ? std::string_view(bytes) : blob.view();
    }
  };
  std::string& tail();

  std::deque<Chunk> chunks_;
  std::size_t bytes_ = 0;
};

}  // namespace disagg::kvstore
