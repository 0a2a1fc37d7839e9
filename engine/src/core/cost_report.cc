#include "disagg/cost_report.h"

#include <charconv>
#include <string_view>

namespace disagg {

namespace {

Expected<void, CostModelError> check_list(const std::vector<std::int64_t>& values, std::string_view name) {
  const std::string field = "probes." + std::string(name);
  if (values.empty() || values.size() > CostProbes::kMaxProbePoints) {
    return unexpected(CostModelError{CostModelErrc::wrong_type, field, static_cast<double>(values.size()),
                                     "pass a list of 1 to 64 values"});
  }
  for (std::int64_t v : values) {
    if (v < 1 || v > CostProbes::kMaxProbeValue) {
      return unexpected(CostModelError{CostModelErrc::not_positive, field, static_cast<double>(v),
                                       "pass whole numbers from 1 to 1e9"});
    }
  }
  return {};
}

Expected<void, CostModelError> check_value(std::int64_t v, std::string_view name) {
  if (v < 1 || v > CostProbes::kMaxProbeValue) {
    return unexpected(CostModelError{CostModelErrc::not_positive, "probes." + std::string(name), static_cast<double>(v),
                                     "pass a whole number from 1 to 1e9"});
  }
  return {};
}

// Minimal JSON writer for the report: numbers use shortest round-trip formatting, so a reader
// (nlohmann, JSON.parse) recovers the exact doubles.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}
  void raw(std::string_view s) { out_.append(s); }
  void key(std::string_view k) {
    out_.push_back('"');
    out_.append(k);
    out_.append("\":");
  }
  void number(double v) {
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, res.ptr);
  }
  void integer(std::int64_t v) {
    char buf[32];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, res.ptr);
  }

 private:
  std::string& out_;
};

void write_time(JsonWriter& w, const StepTime& t) {
  w.key("computeSeconds");
  w.number(t.compute_seconds);
  w.raw(",");
  w.key("memorySeconds");
  w.number(t.memory_seconds);
  w.raw(",");
  w.key("communicationSeconds");
  w.number(t.communication_seconds);
  w.raw(",");
  w.key("allToAllSeconds");
  w.number(t.all_to_all_seconds);
  w.raw(",");
  w.key("overheadSeconds");
  w.number(t.overhead_seconds);
  w.raw(",");
  w.key("totalSeconds");
  w.number(t.total_seconds);
}

}  // namespace

Expected<void, CostModelError> validate(const CostProbes& probes) {
  if (auto r = check_list(probes.prefill_tokens, "prefillTokens"); !r) return r;
  if (auto r = check_list(probes.decode_batches, "decodeBatches"); !r) return r;
  if (auto r = check_value(probes.context_tokens_per_sequence, "contextTokensPerSequence"); !r) { return r; }
  if (auto r = check_value(probes.mixed_chunk_tokens, "mixedChunkTokens"); !r) return r;
  return check_list(probes.transfer_tokens, "transferTokens");
}

CostReport build_cost_report(const CostModel& model, const CostProbes& probes) {
  CostReport r;
  r.tensor_parallel = model.params().tensor_parallel;
  const std::int64_t ctx = probes.context_tokens_per_sequence;
  for (std::int64_t n : probes.prefill_tokens) { r.prefill.push_back({n, model.prefill_chunk_time(n, 0)}); }
  for (std::int64_t b : probes.decode_batches) { r.decode.push_back({b, ctx, model.decode_batch_time(b, b * ctx)}); }
  for (std::int64_t b : probes.decode_batches) {
    StepBatch batch;
    batch.add_prefill_chunk(probes.mixed_chunk_tokens, 0).add_decodes(b, b * ctx);
    r.mixed.push_back({probes.mixed_chunk_tokens, b, ctx, model.step_time(batch)});
  }
  for (std::int64_t n : probes.transfer_tokens) {
    r.kv_transfer.push_back({n, model.kv_transfer_bytes(n), model.kv_transfer_seconds(n)});
  }
  return r;
}

std::string to_json(const CostReport& report) {
  std::string out;
  out.reserve(256 +
              200 * (report.prefill.size() + report.decode.size() + report.mixed.size() + report.kv_transfer.size()));
  JsonWriter w(out);
  w.raw("{");
  w.key("tensorParallel");
  w.integer(report.tensor_parallel);
  w.raw(",");
  w.key("prefill");
  w.raw("[");
  for (std::size_t i = 0; i < report.prefill.size(); ++i) {
    const PrefillPoint& p = report.prefill[i];
    w.raw(i ? ",{" : "{");
    w.key("tokens");
    w.integer(p.tokens);
    w.raw(",");
    write_time(w, p.time);
    w.raw("}");
  }
  w.raw("],");
  w.key("decode");
  w.raw("[");
  for (std::size_t i = 0; i < report.decode.size(); ++i) {
    const DecodePoint& p = report.decode[i];
    w.raw(i ? ",{" : "{");
    w.key("sequences");
    w.integer(p.sequences);
    w.raw(",");
    w.key("contextTokensPerSequence");
    w.integer(p.context_tokens_per_sequence);
    w.raw(",");
    write_time(w, p.time);
    w.raw("}");
  }
  w.raw("],");
  w.key("mixed");
  w.raw("[");
  for (std::size_t i = 0; i < report.mixed.size(); ++i) {
    const MixedPoint& p = report.mixed[i];
    w.raw(i ? ",{" : "{");
    w.key("prefillTokens");
    w.integer(p.prefill_tokens);
    w.raw(",");
    w.key("sequences");
    w.integer(p.sequences);
    w.raw(",");
    w.key("contextTokensPerSequence");
    w.integer(p.context_tokens_per_sequence);
    w.raw(",");
    write_time(w, p.time);
    w.raw("}");
  }
  w.raw("],");
  w.key("kvTransfer");
  w.raw("[");
  for (std::size_t i = 0; i < report.kv_transfer.size(); ++i) {
    const TransferPoint& p = report.kv_transfer[i];
    w.raw(i ? ",{" : "{");
    w.key("tokens");
    w.integer(p.tokens);
    w.raw(",");
    w.key("bytes");
    w.number(p.bytes);
    w.raw(",");
    w.key("seconds");
    w.number(p.seconds);
    w.raw("}");
  }
  w.raw("]}");
  return out;
}

}  // namespace disagg
