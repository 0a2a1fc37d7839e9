#include "reply_queue.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace disagg::kvstore {
namespace {
constexpr int kMaxIov = 64;
// Buffers above these sizes are released when the queue drains (a KEYS reply, a deep pipeline).
constexpr std::size_t kKeepSmallBytes = 256u << 10;
constexpr std::size_t kKeepPieces = 4096;
}  // namespace

char* ReplyQueue::append_small(std::size_t n) {
  const std::size_t at = small_.size();
  if (head_ < pieces_.size() && pieces_.back().blob.empty_handle() && pieces_.back().end == at) {
    pieces_.back().end += n;
  } else {
    pieces_.push_back(Piece{Blob(), at, at + n});
  }
  small_.resize(at + n);  // within capacity once warmed up: no allocation
  bytes_ += n;
  return small_.data() + at;
}

void ReplyQueue::raw(std::string_view bytes) {
  if (!bytes.empty()) std::memcpy(append_small(bytes.size()), bytes.data(), bytes.size());
}

void ReplyQueue::simple(std::string_view text) {
  char* p = append_small(text.size() + 3);
  *p++ = '+';
  std::memcpy(p, text.data(), text.size());
  std::memcpy(p + text.size(), "\r\n", 2);
}

void ReplyQueue::error(std::string_view text) {
  char* p = append_small(text.size() + 3);
  *p++ = '-';
  // A reply line must not contain CR or LF; replace them so a quoted argument cannot break framing.
  for (char c : text) *p++ = (c == '\r' || c == '\n') ? ' ' : c;
  std::memcpy(p, "\r\n", 2);
}

namespace {
// "<prefix><n>\r\n" into buf; returns its length.
template <typename T>
std::size_t header(char* buf, char prefix, T n) {
  buf[0] = prefix;
  auto [end, ec] = std::to_chars(buf + 1, buf + 24, n);
  end[0] = '\r';
  end[1] = '\n';
  return static_cast<std::size_t>(end + 2 - buf);
}
}  // namespace

void ReplyQueue::integer(std::int64_t value) {
  char buf[32];
  raw({buf, header(buf, ':', value)});
}

void ReplyQueue::array(std::size_t count) {
  char buf[32];
  raw({buf, header(buf, '*', count)});
}

void ReplyQueue::null_bulk() {
  raw("$-1\r\n");
}

void ReplyQueue::bulk(std::string_view bytes) {
  char buf[32];
  const std::size_t h = header(buf, '$', bytes.size());
  char* p = append_small(h + bytes.size() + 2);
  std::memcpy(p, buf, h);
  if (!bytes.empty()) std::memcpy(p + h, bytes.data(), bytes.size());
  std::memcpy(p + h + bytes.size(), "\r\n", 2);
}

void ReplyQueue::bulk(const Blob& value) {
  if (value.size() < kReferenceThreshold) {
    bulk(value.view());
    return;
  }
  char buf[32];
  raw({buf, header(buf, '$', value.size())});
  pieces_.push_back(Piece{value, 0, value.size()});
  bytes_ += value.size();
  raw("\r\n");
}

void ReplyQueue::reset_when_drained() {
  pieces_.clear();
  head_ = 0;
  small_.clear();
  if (small_.capacity() > kKeepSmallBytes) std::string().swap(small_);
  if (pieces_.capacity() > kKeepPieces) std::vector<Piece>().swap(pieces_);
}

void ReplyQueue::compact() {
  // Only when the written front is most of the buffers, so the moves cost O(1) per byte queued.
  if (head_ > 64 && head_ * 2 > pieces_.size()) {
    pieces_.erase(pieces_.begin(), pieces_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  std::size_t first_small = small_.size();
  for (std::size_t i = head_; i < pieces_.size(); ++i) {
    if (pieces_[i].blob.empty_handle()) {
      first_small = pieces_[i].begin;
      break;
    }
  }
  if (first_small > (64u << 10) && first_small * 2 > small_.size()) {
    small_.erase(0, first_small);
    for (std::size_t i = head_; i < pieces_.size(); ++i) {
      if (pieces_[i].blob.empty_handle()) {
        pieces_[i].begin -= first_small;
        pieces_[i].end -= first_small;
      }
    }
  }
}

ReplyQueue::FlushResult ReplyQueue::flush(int fd) {
  while (!empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    for (std::size_t i = head_; i < pieces_.size() && n < kMaxIov; ++i, ++n) {
      const Piece& p = pieces_[i];
      const char* base = p.blob.empty_handle() ? small_.data() : p.blob.data();
      iov[n].iov_base = const_cast<char*>(base + p.begin);
      iov[n].iov_len = p.end - p.begin;
    }
    const ssize_t w = ::writev(fd, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        compact();
        return FlushResult::kWouldBlock;
      }
      return FlushResult::kError;
    }
    auto left = static_cast<std::size_t>(w);
    bytes_ -= left;
    while (left > 0) {
      Piece& p = pieces_[head_];
      const std::size_t rest = p.end - p.begin;
      if (left >= rest) {
        left -= rest;
        p.blob = Blob();  // a written value is not kept alive by the queue
        ++head_;
      } else {
        p.begin += left;
        left = 0;
      }
    }
  }
  reset_when_drained();
  return FlushResult::kDrained;
}

}  // namespace disagg::kvstore
