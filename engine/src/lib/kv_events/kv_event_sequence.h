// kv_event_sequence.h — gap detection over one publisher's sequence numbers (pure logic).
//
// vLLM numbers its KV-event batches 0, 1, 2, ... per publisher (REFERENCE.md section 5). The
// subscriber feeds every received number to observe():
//   first      nothing seen yet: accept (events before the subscription are unknown, not lost)
//   in_order   last + 1: accept
//   gap        beyond last + 1: batches [expected(), seq) were lost (ZMQ high-water mark, reconnect).
//              Accept after recovering: replay [expected(), ...) from the publisher's ROUTER
//              socket, or clear the endpoint's index entries (what it holds is no longer known)
//   duplicate  <= last, at or after the start of the last replay: seen already, drop
//   restart    < last otherwise: the publisher restarted (its cache is empty): clear, accept
// accept(seq) records a batch as applied.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace disagg::router {

enum class SeqVerdict : std::uint8_t { first, in_order, gap, duplicate, restart };

/// Stable lower-case name, e.g. "gap".
std::string_view to_string(SeqVerdict verdict);

class SequenceTracker {
 public:
  /// Classifies `seq` (does not record it; call accept() once the batch is applied).
  SeqVerdict observe(std::int64_t seq) const {
    if (!last_) return SeqVerdict::first;
    if (seq == *last_ + 1) return SeqVerdict::in_order;
    if (seq > *last_ + 1) return SeqVerdict::gap;
    return seq >= duplicate_floor_ ? SeqVerdict::duplicate : SeqVerdict::restart;
  }
  /// Records `seq` as the last applied batch.
  void accept(std::int64_t seq) { last_ = seq; }
  /// A replay from `start` is about to be applied: numbers >= start seen again are duplicates.
  void replaying_from(std::int64_t start) { duplicate_floor_ = start; }
  /// Forgets everything (endpoint removed, or the publisher restarted).
  void reset() {
    last_.reset();
    duplicate_floor_ = std::numeric_limits<std::int64_t>::max();
  }
  /// The next number expected (0 when nothing was seen).
  std::int64_t expected() const { return last_ ? *last_ + 1 : 0; }
  std::optional<std::int64_t> last() const { return last_; }

 private:
  std::optional<std::int64_t> last_;
  std::int64_t duplicate_floor_ = std::numeric_limits<std::int64_t>::max();
};

}  // namespace disagg::router
