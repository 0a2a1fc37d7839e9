#include "reply_queue.h"

#include <sys/uio.h>

#include <cerrno>
#include <charconv>

namespace disagg::kvstore {
namespace {
constexpr std::size_t kChunkBytes = 64u << 10;
constexpr int kMaxIov = 64;
}  // namespace

std::string& ReplyQueue::tail() {
  if (chunks_.empty() || !chunks_.back().blob.empty_handle() || chunks_.back().bytes.size() >= kChunkBytes) {
    chunks_.emplace_back();
    chunks_.back().bytes.reserve(512);
  }
  return chunks_.back().bytes;
}

void ReplyQueue::raw(std::string_view bytes) {
  tail().append(bytes);
  bytes_ += bytes.size();
}

void ReplyQueue::simple(std::string_view text) {
  std::string& t = tail();
  t.push_back('+');
  t.append(text);
  t.append("\r\n");
  bytes_ += text.size() + 3;
}

void ReplyQueue::error(std::string_view text) {
  std::string& t = tail();
  t.push_back('-');
  // A reply line must not contain CR or LF; replace them so a quoted argument cannot break framing.
  const std::size_t start = t.size();
  t.append(text);
  for (std::size_t i = start; i < t.size(); ++i) {
    if (t[i] == '\r' || t[i] == '\n') t[i] = ' ';
  }
  t.append("\r\n");
  bytes_ += text.size() + 3;
}

void ReplyQueue::integer(std::int64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  std::string& t = tail();
  t.push_back(':');
  t.append(buf, end);
  t.append("\r\n");
  bytes_ += static_cast<std::size_t>(end - buf) + 3;
}

void ReplyQueue::array(std::size_t count) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), count);
  std::string& t = tail();
  t.push_back('*');
  t.append(buf, end);
  t.append("\r\n");
  bytes_ += static_cast<std::size_t>(end - buf) + 3;
}

void ReplyQueue::null_bulk() { raw("$-1\r\n"); }

void ReplyQueue::bulk(std::string_view bytes) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), bytes.size());
  std::string& t = tail();
  t.push_back('$');
  t.append(buf, end);
  t.append("\r\n");
  t.append(bytes);
  t.append("\r\n");
  bytes_ += static_cast<std::size_t>(end - buf) + 5 + bytes.size();
}

void ReplyQueue::bulk(const Blob& value) {
  if (value.size() < kReferenceThreshold) {
    bulk(value.view());
    return;
  }
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value.size());
  std::string& t = tail();
  t.push_back('$');
  t.append(buf, end);
  t.append("\r\n");
  chunks_.emplace_back();
  chunks_.back().blob = value;
  bytes_ += static_cast<std::size_t>(end - buf) + 3 + value.size();
  raw("\r\n");
}

ReplyQueue::FlushResult ReplyQueue::flush(int fd) {
  while (!chunks_.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    for (auto it = chunks_.begin(); it != chunks_.end() && n < kMaxIov; ++it, ++n) {
      const std::string_view v = it->view();
      iov[n].iov_base = const_cast<char*>(v.data() + it->offset);
      iov[n].iov_len = v.size() - it->offset;
    }
    const ssize_t w = ::writev(fd, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return FlushResult::kWouldBlock;
      return FlushResult::kError;
    }
    auto left = static_cast<std::size_t>(w);
    bytes_ -= left;
    while (left > 0) {
      Chunk& c = chunks_.front();
      const std::size_t rest = c.view().size() - c.offset;
      if (left >= rest) {
        left -= rest;
        chunks_.pop_front();
      } else {
        c.offset += left;
        left = 0;
      }
    }
    // Drop any empty chunks at the front (a blob of size 0 is never queued, but be safe).
    while (!chunks_.empty() && chunks_.front().view().size() == chunks_.front().offset) chunks_.pop_front();
  }
  return FlushResult::kDrained;
}

}  // namespace disagg::kvstore
