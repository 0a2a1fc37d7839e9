// sse.h — Server-Sent Events framing as the OpenAI streaming API uses it.
//
// Server side: every event is one `data: <json>\n\n`; the stream ends with `data: [DONE]\n\n`.
// Client side: SseParser splits a byte stream (in arbitrary pieces) into events per the WHATWG
// event-stream rules that matter here: lines end with \n, \r\n or \r; `data:` lines of one event
// are joined with \n (one optional space after the colon is dropped); lines starting with ':' are
// comments; other fields (event, id, retry) are ignored; a blank line ends the event.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace disagg::http {

/// The terminal event of an OpenAI stream.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

/// Appends `data: <payload>\n\n` to `out`. Precondition: payload holds no newline (JSON from
/// nlohmann dump() never does).
void append_sse_event(std::string& out, std::string_view payload);

/// `data: <payload>\n\n`.
std::string sse_event(std::string_view payload);

/// Incremental event-stream parser. Bounded: an event larger than max_event_bytes is an error.
class SseParser {
 public:
  explicit SseParser(std::size_t max_event_bytes = 1 << 20) : max_event_bytes_(max_event_bytes) {}

  /// Consumes `bytes`; appends the data of every event completed by them to `events`.
  /// Returns false (and stops parsing for good) when an event exceeds max_event_bytes.
  bool feed(std::string_view bytes, std::vector<std::string>& events);

  /// Whether a [DONE] event has been seen.
  bool done() const { return done_; }
  /// Bytes buffered for an incomplete line or event.
  std::size_t buffered() const { return line_.size() + data_.size(); }

 private:
  void end_line(std::vector<std::string>& events);

  std::size_t max_event_bytes_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool last_was_cr_ = false;
  bool failed_ = false;
  bool done_ = false;
};

}  // namespace disagg::http
