#include "sse.h"

namespace disagg::http {

void append_sse_event(std::string& out, std::string_view payload) {
  out.append("data: ");
  out.append(payload);
  out.append("\n\n");
}

std::string sse_event(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  append_sse_event(out, payload);
  return out;
}

void SseParser::end_line(std::vector<std::string>& events) {
  if (line_.empty()) {  // blank line: dispatch
    if (has_data_) {
      if (data_ == "[DONE]") done_ = true;
      events.push_back(std::move(data_));
    }
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line_[0] != ':') {
    const std::size_t colon = line_.find(':');
    const std::string_view field = std::string_view(line_).substr(0, colon);
    std::string_view value;
    if (colon != std::string::npos) {
      value = std::string_view(line_).substr(colon + 1);
      if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
    }
    if (field == "data") {
      if (has_data_) data_.push_back('\n');
      data_.append(value);
      has_data_ = true;
    }
  }
  line_.clear();
}

bool SseParser::feed(std::string_view bytes, std::vector<std::string>& events) {
  if (failed_) return false;
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {  // the \n of a \r\n pair
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = (c == '\r');
    if (c == '\n' || c == '\r') {
      end_line(events);
      continue;
    }
    line_.push_back(c);
    if (line_.size() + data_.size() > max_event_bytes_) {
      failed_ = true;
      return false;
    }
  }
  return true;
}

}  // namespace disagg::http
