#include "disagg/workload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <limits>
#include <queue>

#include "disagg/fake_tokenizer.h"
#include "disagg/json_value.h"
#include "disagg/fnv1a.h"

namespace disagg {

std::string_view to_string(WorkloadErrc code) {
  switch (code) {
    case WorkloadErrc::invalid_spec: return "invalid_spec";
    case WorkloadErrc::trace_syntax: return "trace_syntax";
    case WorkloadErrc::trace_limit: return "trace_limit";
    case WorkloadErrc::io_error: return "io_error";
  }
  return "unknown";
}

// ---- Rng ----------------------------------------------------------------------------------------

double Rng::uniform() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double Rng::exponential(double mean) {
  return -mean * std::log1p(-uniform());
}

double Rng::normal() {
  // Box-Muller; one of the pair is dropped to keep the generator stateless beyond its counter.
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

double Rng::gamma(double k, double theta) {
  if (k < 1.0) {
    // Boost a shape < 1: G(k) = G(k + 1) * U^(1/k).
    const double u = 1.0 - uniform();
    return gamma(k + 1.0, theta) * std::pow(u, 1.0 / k);
  }
  const double d = k - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v * theta;
  }
}

// ---- trace line parser --------------------------------------------------------------------------

namespace {

class LineParser {
 public:
  explicit LineParser(std::string_view s) : s_(s) {}

  Expected<TraceRecord, std::string> parse() {
    TraceRecord r;
    bool has_ts = false, has_in = false, has_out = false;
    skip_ws();
    if (!eat('{')) return fail("expected '{'");
    skip_ws();
    if (peek() == '}') return fail("empty object; needs timestamp_ms, input_length, output_length");
    while (true) {
      skip_ws();
      std::string key;
      if (!read_string(&key)) return fail("expected a quoted key");
      skip_ws();
      if (!eat(':')) return fail("expected ':' after key");
      skip_ws();
      if (key == "timestamp_ms" || key == "timestamp") {
        if (!read_number(&r.timestamp_ms) || r.timestamp_ms < 0) return fail("'" + key + "' must be a number >= 0");
        has_ts = true;
      } else if (key == "input_length" || key == "output_length") {
        double v = 0;
        if (!read_number(&v) || v < 0 || v != std::floor(v) || v > 1e8) {
          return fail("'" + key + "' must be a whole number in [0, 1e8]");
        }
        (key == "input_length" ? r.input_length : r.output_length) = static_cast<std::int32_t>(v);
        (key == "input_length" ? has_in : has_out) = true;
      } else if (key == "hash_ids") {
        if (!eat('[')) return fail("'hash_ids' must be an array of whole numbers");
        skip_ws();
        if (!eat(']')) {
          while (true) {
            skip_ws();
            double v = 0;
            if (!read_number(&v) || v != std::floor(v) || std::fabs(v) > 9.0e18) {
              return fail("'hash_ids' must hold whole numbers");
            }
            if (r.hash_ids.size() >= kMaxHashIds) return fail("'hash_ids' holds more than 65536 ids");
            r.hash_ids.push_back(static_cast<std::int64_t>(v));
            skip_ws();
            if (eat(']')) break;
            if (!eat(',')) return fail("expected ',' or ']' in 'hash_ids'");
          }
        }
      } else if (key == "session_id") {
        std::string text;
        double v = 0;
        if (peek() == '"') {
          if (!read_string(&text)) return fail("bad string in 'session_id'");
          r.session_id = hash_text(text);
        } else if (read_number(&v) && v >= 0 && v == std::floor(v)) {
          r.session_id = static_cast<std::uint64_t>(v);
        } else {
          return fail("'session_id' must be a whole number >= 0 or a string");
        }
        r.has_session = true;
      } else {
        if (!skip_scalar_or_flat_array())
          return fail("unsupported value of '" + key + "' (nested objects are not allowed)");
      }
      skip_ws();
      if (eat('}')) break;
      if (!eat(',')) return fail("expected ',' or '}'");
    }
    skip_ws();
    if (pos_ != s_.size()) return fail("text after the object");
    if (!has_ts) return fail("missing 'timestamp_ms'");
    if (!has_in) return fail("missing 'input_length'");
    if (!has_out) return fail("missing 'output_length'");
    return r;
  }

 private:
  // FNV-1a from a seed that is not FNV's offset basis (that is 14695981039346656037: a digit was
  // dropped here once). Kept: a session id picks the replica a session sticks to, and changing it
  // would move recorded simulation results for no gain.
  static std::uint64_t hash_text(const std::string& t) { return fnv1a64(t, 1469598103934665603ULL); }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool read_string(std::string* out) {
    if (!eat('"')) return false;
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (pos_ >= s_.size()) return false;
        const char e = s_[pos_++];
        // Escapes are kept verbatim except \" and \\: keys we read never contain others.
        if (e == '"' || e == '\\' || e == '/') out->push_back(e);
        else if (e == 'u') {
          if (pos_ + 4 > s_.size()) return false;
          out->append(s_.substr(pos_, 4));
          pos_ += 4;
        } else out->push_back(e);
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return false;
      } else {
        out->push_back(c);
      }
    }
    return false;
  }
  bool read_number(double* out) {
    const std::size_t start = pos_;
    if (peek() == '-') ++pos_;
    while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' ||
                                s_[pos_] == 'e' || s_[pos_] == 'E' || s_[pos_] == '+' || s_[pos_] == '-')) {
      ++pos_;
    }
    if (pos_ == start) return false;
    auto res = std::from_chars(s_.data() + start, s_.data() + pos_, *out);
    return res.ec == std::errc() && res.ptr == s_.data() + pos_ && std::isfinite(*out);
  }
  bool skip_scalar_or_flat_array() {
    std::string ignored;
    double d = 0;
    if (peek() == '"') return read_string(&ignored);
    if (s_.substr(pos_, 4) == "null" || s_.substr(pos_, 4) == "true") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "false") {
      pos_ += 5;
      return true;
    }
    if (eat('[')) {
      skip_ws();
      if (eat(']')) return true;
      while (true) {
        skip_ws();
        if (peek() == '"') {
          if (!read_string(&ignored)) return false;
        } else if (!read_number(&d)) return false;
        skip_ws();
        if (eat(']')) return true;
        if (!eat(',')) return false;
      }
    }
    return read_number(&d);
  }
  Unexpected<std::string> fail(const std::string& why) const {
    return unexpected("column " + std::to_string(pos_ + 1) + ": " + why);
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

std::int32_t sample_length(const LengthDist& d, Rng& rng) {
  double v = d.mean;
  switch (d.kind) {
    case LengthDist::Kind::fixed: break;
    case LengthDist::Kind::uniform:
      v = d.min + static_cast<double>(rng.below(static_cast<std::uint64_t>(d.max - d.min) + 1));
      break;
    case LengthDist::Kind::lognormal: {
      const double ratio = d.stddev / d.mean;
      const double sigma2 = std::log1p(ratio * ratio);
      const double mu = std::log(d.mean) - sigma2 / 2;
      v = std::exp(mu + std::sqrt(sigma2) * rng.normal());
      break;
    }
  }
  v = std::round(v);
  return static_cast<std::int32_t>(std::clamp(v, static_cast<double>(d.min), static_cast<double>(d.max)));
}

std::string check_length(const char* field, const LengthDist& d) {
  const std::string f = field;
  if (d.min < 1 || d.max < d.min) {
    return "'" + f + ".min' (" + std::to_string(d.min) + ") and '.max' (" + std::to_string(d.max) +
           ") must satisfy 1 <= min <= max";
  }
  if (d.kind != LengthDist::Kind::uniform && !(d.mean >= 1)) {
    return "'" + f + ".mean' (" + std::to_string(d.mean) + ") must be >= 1 token";
  }
  if (d.kind == LengthDist::Kind::lognormal && !(d.stddev >= 0)) {
    return "'" + f + ".stddev' (" + std::to_string(d.stddev) + ") must be >= 0";
  }
  return {};
}

}  // namespace

Expected<TraceRecord, std::string> parse_trace_line(std::string_view line) {
  if (line.size() > kMaxTraceLineBytes) return unexpected(std::string("line longer than 1 MiB"));
  return LineParser(line).parse();
}

// ---- generator ---------------------------------------------------------------------------------

struct Workload::Impl {
  struct Pending {
    double time;
    std::uint64_t seq;
    std::int32_t session;
    std::int32_t branch;
    bool operator>(const Pending& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct Session {
    std::vector<TokenId> context;
    std::vector<TokenId> extension;  // agentic: first call's tool output + answer
    std::uint64_t id = 0;
    std::int32_t tenant = -1;
    std::int32_t user = -1;
    std::int32_t turns_left = 0;
    std::int32_t turn = 0;
    std::int32_t outstanding = 0;
  };

  WorkloadSpec spec;
  Rng rng{1};
  // Separate streams so that, e.g., changing output lengths does not shift arrival times.
  Rng arrival_rng{2};
  Rng text_rng{3};
  std::uint64_t emitted = 0;
  std::uint64_t sessions_started = 0;
  double next_start = 0;
  bool starts_done = false;
  bool mmpp_burst = false;
  double mmpp_switch_at = 0;
  // Arrival clock of constant arrivals and stages: the current stage, its start, the arrivals
  // started in it (constant: arrival i of a stage is at its start + i / rate, computed, not summed,
  // so the spacing is exact), and whether the last stage has ended.
  std::size_t stage = 0;
  double stage_start = 0;
  std::int64_t stage_arrivals = 0;
  bool arrivals_over = false;
  // No request arrives after it: durationSeconds, or the end of the last stage (0: none).
  double horizon = 0;
  std::uint64_t seq = 0;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> heap;
  std::vector<Session> sessions;
  std::vector<std::int32_t> free_sessions;
  std::vector<std::vector<TokenId>> system_prompts;
  std::vector<double> tenant_cdf;
  // Popularity equal: the tenant (x user) slots in their shuffled order, and the next one's place.
  std::vector<std::int32_t> slot_order;
  std::size_t slot_cursor = 0;
  // users_per_tenant > 0: each slot's fixed question (slot = tenant x users + user).
  std::vector<std::vector<TokenId>> questions;
  // api chat: the template's tokens around messages (empty for completions).
  std::vector<TokenId> user_header, tool_header, assistant_header;

  // trace mode
  bool is_trace = false;
  TraceSpec trace;
  std::vector<TraceRecord> records;
  std::size_t cursor = 0;

  void random_tokens(std::vector<TokenId>& out, std::int32_t n) {
    // The hot loop of long prompts (8k tokens each): one inlined draw per token, no push_back.
    const std::uint64_t v = static_cast<std::uint64_t>(spec.vocab);
    const std::size_t at = out.size();
    out.resize(at + static_cast<std::size_t>(std::max<std::int32_t>(n, 0)));
    TokenId* p = out.data() + at;
    for (std::int32_t i = 0; i < n; ++i) p[i] = static_cast<TokenId>(text_rng.below(v));
  }

  // Gap from an arrival at `from` to the next one of a random process at mean rate `rate`.
  double gap(double from, double rate_per_second) {
    const ArrivalProcess& a = spec.arrival;
    switch (a.kind) {
      case ArrivalProcess::Kind::poisson: return arrival_rng.exponential(1.0 / rate_per_second);
      case ArrivalProcess::Kind::gamma: {
        const double k = 1.0 / (a.cv * a.cv);
        return arrival_rng.gamma(k, 1.0 / (rate_per_second * k));
      }
      case ArrivalProcess::Kind::mmpp: {
        const double base = rate_per_second / ((1 - a.burst_share) + a.burst_factor * a.burst_share);
        const double burst_len = a.mean_burst_seconds;
        const double calm_len = a.mean_burst_seconds * (1 - a.burst_share) / a.burst_share;
        double t = from;
        while (true) {
          const double rate = mmpp_burst ? base * a.burst_factor : base;
          const double candidate = t + arrival_rng.exponential(1.0 / rate);
          if (candidate < mmpp_switch_at) return candidate - from;
          // Memoryless: restart the draw from the switch in the new state.
          t = mmpp_switch_at;
          mmpp_burst = !mmpp_burst;
          mmpp_switch_at = t + arrival_rng.exponential(mmpp_burst ? burst_len : calm_len);
        }
      }
      case ArrivalProcess::Kind::constant: break;
    }
    return 1.0 / rate_per_second;
  }

  // Arrivals of a constant stage: ceil(rate x duration), less a rounding hair so that 8/s for
  // 600 s is 4,800 and not 4,801.
  static std::int64_t stage_count(const ArrivalStage& s) {
    const double n = s.rate_per_second * s.duration_seconds;
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(n - 1e-9 * std::max(1.0, n))));
  }

  // Time of the arrival after the one at `t`; sets arrivals_over when the last stage has ended.
  double following_arrival(double t) {
    const ArrivalProcess& a = spec.arrival;
    const bool constant = a.kind == ArrivalProcess::Kind::constant;
    if (a.stages.empty()) {
      if (constant) return static_cast<double>(++stage_arrivals) / a.rate_per_second;
      return t + gap(t, a.rate_per_second);
    }
    while (true) {
      const ArrivalStage& s = a.stages[stage];
      const double end = stage_start + s.duration_seconds;
      if (constant) {
        if (++stage_arrivals < stage_count(s))
          return stage_start + static_cast<double>(stage_arrivals) / s.rate_per_second;
      } else {
        const double next = t + gap(t, s.rate_per_second);
        if (next < end) return next;
      }
      if (++stage >= a.stages.size()) {
        arrivals_over = true;
        return end;
      }
      // The next stage starts where this one ends: constant arrivals at its start, a random
      // process's draw restarted there at the new rate.
      stage_start = end;
      stage_arrivals = 0;
      t = end;
      if (constant) return stage_start;
    }
  }

  // The tenant of a new session (-1: none) and, with users, its user (else -1).
  std::int32_t pick_tenant(std::int32_t* user) {
    *user = -1;
    if (spec.tenants <= 0) return -1;
    const std::int32_t users = spec.users_per_tenant;
    if (spec.popularity == TenantPopularity::equal) {
      const std::int32_t slot = slot_order[slot_cursor];
      slot_cursor = slot_cursor + 1 == slot_order.size() ? 0 : slot_cursor + 1;
      if (users <= 0) return slot;
      *user = slot % users;
      return slot / users;
    }
    const double u = rng.uniform();
    auto it = std::upper_bound(tenant_cdf.begin(), tenant_cdf.end(), u);
    const auto tenant = static_cast<std::int32_t>(std::min<std::ptrdiff_t>(it - tenant_cdf.begin(), spec.tenants - 1));
    if (users > 0) *user = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(users)));
    return tenant;
  }

  void start_session(double t) {
    std::int32_t idx;
    if (!free_sessions.empty()) {
      idx = free_sessions.back();
      free_sessions.pop_back();
    } else {
      idx = static_cast<std::int32_t>(sessions.size());
      sessions.emplace_back();
    }
    Session& s = sessions[static_cast<std::size_t>(idx)];
    s.id = sessions_started++;
    s.tenant = pick_tenant(&s.user);
    s.turn = 0;
    s.context.clear();
    s.extension.clear();
    if (s.tenant >= 0) {
      const auto& sys = system_prompts[static_cast<std::size_t>(s.tenant)];
      s.context.assign(sys.begin(), sys.end());
    }
    if (spec.kind == WorkloadKind::single || spec.kind == WorkloadKind::chat) {
      s.turns_left = spec.kind == WorkloadKind::chat ? sample_length(spec.turns, rng) : 1;
      heap.push({t, seq++, idx, 0});
      s.outstanding = 1;
    } else {
      s.context.insert(s.context.end(), user_header.begin(), user_header.end());
      random_tokens(s.context, sample_length(spec.input, rng));
      s.turns_left = spec.depth;
      push_round(idx, t);
    }
  }

  void push_round(std::int32_t idx, double t) {
    Session& s = sessions[static_cast<std::size_t>(idx)];
    s.outstanding = spec.fanout;
    for (std::int32_t b = 0; b < spec.fanout; ++b) heap.push({t, seq++, idx, b});
  }

  void end_session(std::int32_t idx) { free_sessions.push_back(idx); }

  // Closed loop: one client's request ended; its next one arrives now (if the limits allow).
  std::uint64_t closed_started = 0;
  void complete(double now) {
    if (horizon > 0 && now > horizon) return;
    if (spec.max_requests > 0 && closed_started >= static_cast<std::uint64_t>(spec.max_requests)) return;
    ++closed_started;
    start_session(now);
  }

  bool next(WorkloadRequest& out) {
    if (spec.max_requests > 0 && emitted >= static_cast<std::uint64_t>(spec.max_requests)) return false;
    while (true) {
      const bool can_start = !starts_done;
      if (can_start && (heap.empty() || next_start <= heap.top().time)) {
        if (arrivals_over || (horizon > 0 && next_start > horizon)) {
          starts_done = true;
          continue;
        }
        const double t = next_start;
        next_start = following_arrival(t);
        start_session(t);
        continue;
      }
      if (heap.empty()) return false;
      const Pending p = heap.top();
      heap.pop();
      if (horizon > 0 && p.time > horizon) {
        // Past the horizon: drop it; its session produces nothing more.
        Session& s = sessions[static_cast<std::size_t>(p.session)];
        if (--s.outstanding == 0) end_session(p.session);
        continue;
      }
      emit(p, out);
      return true;
    }
  }

  void emit(const Pending& p, WorkloadRequest& out) {
    Session& s = sessions[static_cast<std::size_t>(p.session)];
    out.arrival_seconds = p.time;
    out.session_id = s.id;
    out.tenant = s.tenant;
    out.user = s.user;
    out.turn = s.turn;
    out.index = emitted++;
    out.output_tokens = sample_length(spec.output, rng);
    out.answer.clear();
    --s.outstanding;
    if (spec.kind == WorkloadKind::single) {
      s.context.insert(s.context.end(), user_header.begin(), user_header.end());
      if (s.user >= 0) {
        // The user's fixed question: the whole prompt repeats in the user's next request.
        const auto& q = questions[static_cast<std::size_t>(s.tenant * spec.users_per_tenant + s.user)];
        s.context.insert(s.context.end(), q.begin(), q.end());
        s.context.insert(s.context.end(), assistant_header.begin(), assistant_header.end());
        out.shared_prefix_tokens = static_cast<std::int32_t>(s.context.size());
      } else {
        out.shared_prefix_tokens = static_cast<std::int32_t>(s.context.size());  // the system prompt
        const std::int32_t fresh = sample_length(spec.input, rng);
        if (spec.fresh_text) {
          random_tokens(s.context, fresh);
        } else {
          s.context.resize(s.context.size() + static_cast<std::size_t>(fresh));
        }
        s.context.insert(s.context.end(), assistant_header.begin(), assistant_header.end());
      }
      out.prompt.assign(s.context.begin(), s.context.end());
      end_session(p.session);
      return;
    }
    if (spec.kind == WorkloadKind::chat) {
      s.context.insert(s.context.end(), user_header.begin(), user_header.end());
      random_tokens(s.context, sample_length(s.turn == 0 ? spec.input : spec.followup_input, rng));
      s.context.insert(s.context.end(), assistant_header.begin(), assistant_header.end());
      out.prompt.assign(s.context.begin(), s.context.end());
      out.shared_prefix_tokens = static_cast<std::int32_t>(out.prompt.size());  // the next turn's prefix
      random_tokens(out.answer, out.output_tokens);
      s.context.insert(s.context.end(), out.answer.begin(), out.answer.end());
      ++s.turn;
      --s.turns_left;
      const double next_t = p.time + rng.exponential(spec.think_time_seconds);
      const auto next_len = static_cast<std::int64_t>(s.context.size() + user_header.size() + assistant_header.size()) +
                            spec.followup_input.min;
      if (s.turns_left > 0 && next_len <= spec.max_context_tokens) {
        s.outstanding = 1;
        heap.push({next_t, seq++, p.session, 0});
      } else {
        end_session(p.session);
      }
      return;
    }
    // agentic: siblings share the context; the first call's tool output extends the next round's
    out.prompt.assign(s.context.begin(), s.context.end());
    const std::size_t base = out.prompt.size();
    out.prompt.insert(out.prompt.end(), tool_header.begin(), tool_header.end());
    random_tokens(out.prompt, sample_length(spec.tool_output, rng));
    out.prompt.insert(out.prompt.end(), assistant_header.begin(), assistant_header.end());
    random_tokens(out.answer, out.output_tokens);
    out.shared_prefix_tokens = static_cast<std::int32_t>(out.prompt.size());
    if (p.branch == 0) {
      s.extension.assign(out.prompt.begin() + static_cast<std::ptrdiff_t>(base), out.prompt.end());
      s.extension.insert(s.extension.end(), out.answer.begin(), out.answer.end());
    }
    if (s.outstanding == 0) {
      s.context.insert(s.context.end(), s.extension.begin(), s.extension.end());
      s.extension.clear();
      ++s.turn;
      --s.turns_left;
      if (s.turns_left > 0) {
        push_round(p.session, p.time + rng.exponential(spec.step_gap_seconds));
      } else {
        end_session(p.session);
      }
    }
  }

  bool next_trace(WorkloadRequest& out) {
    if (cursor >= records.size()) return false;
    const TraceRecord& r = records[cursor];
    out.arrival_seconds = (r.timestamp_ms - records.front().timestamp_ms) / 1000.0 * trace.time_scale;
    out.output_tokens = std::max<std::int32_t>(1, r.output_length);
    out.session_id = r.has_session ? r.session_id : cursor;
    out.tenant = -1;
    out.user = -1;
    out.turn = 0;
    out.index = emitted++;
    out.answer.clear();
    out.prompt.clear();
    const std::int32_t input = std::max<std::int32_t>(1, r.input_length);
    for (std::int64_t id : r.hash_ids) {
      if (static_cast<std::int32_t>(out.prompt.size()) >= input) break;
      // Tokens of a trace block are a function of its hash id only, so equal ids share cache.
      Rng block_rng(static_cast<std::uint64_t>(id) * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL);
      const std::int32_t n = std::min(trace.trace_block_tokens, input - static_cast<std::int32_t>(out.prompt.size()));
      for (std::int32_t i = 0; i < n; ++i) {
        out.prompt.push_back(static_cast<TokenId>(block_rng.below(static_cast<std::uint64_t>(trace.vocab))));
      }
    }
    out.shared_prefix_tokens = static_cast<std::int32_t>(out.prompt.size());  // blocks named by hash ids
    while (static_cast<std::int32_t>(out.prompt.size()) < input) {
      out.prompt.push_back(static_cast<TokenId>(text_rng.below(static_cast<std::uint64_t>(trace.vocab))));
    }
    ++cursor;
    return true;
  }
};

Workload::Workload(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Workload::Workload(Workload&&) noexcept = default;
Workload& Workload::operator=(Workload&&) noexcept = default;
Workload::~Workload() = default;

bool Workload::next(WorkloadRequest& out) {
  return impl_->is_trace ? impl_->next_trace(out) : impl_->next(out);
}
bool Workload::closed_loop() const {
  return !impl_->is_trace && impl_->spec.concurrency > 0;
}
void Workload::complete(double now) {
  if (closed_loop()) impl_->complete(now);
}
std::uint64_t Workload::emitted() const {
  return impl_->emitted;
}

Expected<Workload, WorkloadError> Workload::create(const WorkloadSpec& spec) {
  auto bad = [](std::string m) { return unexpected(WorkloadError{WorkloadErrc::invalid_spec, std::move(m)}); };
  if (spec.kind == WorkloadKind::trace) return bad("'workload.kind' (trace) needs from_trace(); pass a trace file");
  if (spec.max_requests < 0) return bad("'workload.requests' (" + std::to_string(spec.max_requests) + ") must be >= 0");
  if (!(spec.duration_seconds >= 0)) return bad("'workload.durationSeconds' must be >= 0");
  if (spec.max_requests == 0 && spec.duration_seconds == 0 && spec.arrival.stages.empty()) {
    return bad("'workload.requests' and 'workload.durationSeconds' are both 0; set at least one to bound the run");
  }
  const ArrivalProcess& a = spec.arrival;
  if (!(a.rate_per_second > 0)) {
    return bad("'workload.arrival.ratePerSecond' (" + std::to_string(a.rate_per_second) + ") must be > 0");
  }
  if (a.kind == ArrivalProcess::Kind::gamma && !(a.cv > 0))
    return bad("'workload.arrival.cv' must be > 0, e.g. 2 for bursty");
  if (a.kind == ArrivalProcess::Kind::mmpp &&
      (!(a.burst_factor > 1) || !(a.burst_share > 0 && a.burst_share < 1) || !(a.mean_burst_seconds > 0))) {
    return bad("'workload.arrival' mmpp needs burstFactor > 1, burstShare in (0, 1) and meanBurstSeconds > 0");
  }
  double stages_end = 0;
  if (!a.stages.empty()) {
    if (a.stages.size() > kMaxArrivalStages) {
      return bad("'workload.arrival.stages' holds " + std::to_string(a.stages.size()) + " stages; use at most " +
                 std::to_string(kMaxArrivalStages));
    }
    for (std::size_t i = 0; i < a.stages.size(); ++i) {
      const ArrivalStage& st = a.stages[i];
      const std::string at = "'workload.arrival.stages[" + std::to_string(i) + "]";
      if (!(st.rate_per_second > 0) || !std::isfinite(st.rate_per_second)) {
        return bad(at + ".ratePerSecond' (" + json_number(st.rate_per_second) + ") must be > 0 requests/s");
      }
      if (!(st.duration_seconds > 0) || !std::isfinite(st.duration_seconds)) {
        return bad(at + ".durationSeconds' (" + json_number(st.duration_seconds) + ") must be > 0 seconds");
      }
      if (st.rate_per_second * st.duration_seconds > 1e12) {
        return bad(at + "' asks for more than 1e12 arrivals; use a lower rate or a shorter stage");
      }
      stages_end += st.duration_seconds;
    }
    if (spec.duration_seconds > 0) {
      return bad("'workload.durationSeconds' (" + json_number(spec.duration_seconds) +
                 ") and 'workload.arrival.stages' both end the run; drop durationSeconds (the stages end at " +
                 json_number(stages_end) + " s)");
    }
  }
  for (auto [name, d] : {std::pair{"workload.inputTokens", &spec.input},
                         {"workload.outputTokens", &spec.output},
                         {"workload.chat.turns", &spec.turns},
                         {"workload.chat.followupInputTokens", &spec.followup_input},
                         {"workload.agentic.toolOutputTokens", &spec.tool_output}}) {
    if (auto m = check_length(name, *d); !m.empty()) return bad(m);
  }
  if (spec.vocab < 2) return bad("'workload.vocab' (" + std::to_string(spec.vocab) + ") must be >= 2");
  if (spec.tenants < 0 || (spec.tenants > 0 && spec.system_prompt_tokens < 1)) {
    return bad("'workload.tenants' needs count >= 0 and, when > 0, systemPromptTokens >= 1");
  }
  if (static_cast<std::int64_t>(spec.tenants) * spec.system_prompt_tokens > kMaxStoredPromptTokens) {
    return bad(
        "'workload.tenants' x systemPromptTokens exceeds 67,108,864 tokens; use fewer or shorter system prompts");
  }
  if (spec.users_per_tenant < 0 ||
      (spec.users_per_tenant > 0 && (spec.tenants < 1 || spec.kind != WorkloadKind::single))) {
    return bad("'workload.tenants.usersPerTenant' (" + std::to_string(spec.users_per_tenant) +
               ") must be 0, or > 0 with 'workload.tenants.count' >= 1 and kind single (users send one-shot requests)");
  }
  if (static_cast<std::int64_t>(spec.tenants) * std::max<std::int64_t>(1, spec.users_per_tenant) > kMaxPromptSlots) {
    return bad("'workload.tenants' count (" + std::to_string(spec.tenants) + ") x usersPerTenant (" +
               std::to_string(spec.users_per_tenant) + ") exceeds 1,048,576 prompts; use fewer tenants or users");
  }
  if (spec.kind == WorkloadKind::chat && !(spec.think_time_seconds > 0))
    return bad("'workload.chat.thinkTimeSeconds' must be > 0");
  if (spec.concurrency < 0 || spec.concurrency > (1 << 20) ||
      (spec.concurrency > 0 && spec.kind != WorkloadKind::single)) {
    return bad("'workload.concurrency' (" + std::to_string(spec.concurrency) +
               ") must be in [0, 1048576], and > 0 only with kind single (a closed loop of one-shot requests)");
  }
  if (spec.concurrency > 0 && !a.stages.empty()) {
    return bad("'workload.concurrency' (" + std::to_string(spec.concurrency) +
               ") is a closed loop, which has no arrival rate; drop 'workload.arrival.stages' or the concurrency");
  }
  if (spec.concurrency > 0 && spec.max_requests == 0) {
    return bad(
        "'workload.concurrency' needs 'workload.requests' > 0: a closed loop whose requests are all "
        "refused would not advance the clock");
  }
  if (spec.kind == WorkloadKind::agentic &&
      (spec.fanout < 1 || spec.fanout > 1024 || spec.depth < 1 || !(spec.step_gap_seconds > 0))) {
    return bad("'workload.agentic' needs fanout in [1, 1024], depth >= 1 and stepGapSeconds > 0");
  }
  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  impl->rng = Rng(spec.seed * 0x9e3779b97f4a7c15ULL + 1);
  impl->arrival_rng = Rng(spec.seed * 0xbf58476d1ce4e5b9ULL + 2);
  impl->text_rng = Rng(spec.seed * 0x94d049bb133111ebULL + 3);
  if (spec.arrival.kind == ArrivalProcess::Kind::mmpp) {
    const ArrivalProcess& m = spec.arrival;
    impl->mmpp_switch_at = impl->arrival_rng.exponential(m.mean_burst_seconds * (1 - m.burst_share) / m.burst_share);
  }
  if (spec.concurrency > 0) {
    // Closed loop: no open-loop starts; every client sends its first request at time 0.
    impl->starts_done = true;
  }
  impl->horizon = a.stages.empty() ? spec.duration_seconds : stages_end;
  if (spec.api == PromptApi::chat) {
    // The sim-worker's chat template, rendered by its one renderer: headers only (an empty
    // message's closing newline makes no token).
    std::string text;
    auto header = [&text](std::string_view role) {
      FakeChatPrompt p(text);
      p.begin_message().append(role);
      p.add_part();
      std::vector<TokenId> tokens;
      fake_tokenize(text, tokens);
      return tokens;
    };
    impl->user_header = header("user");
    impl->tool_header = header("tool");
    FakeChatPrompt p(text);
    fake_tokenize(p.finish(), impl->assistant_header);
    if (spec.tenants > 0) impl->system_prompts.assign(static_cast<std::size_t>(spec.tenants), header("system"));
  }
  if (spec.tenants > 0) {
    double total = 0;
    for (std::int32_t k = 1; k <= spec.tenants; ++k) total += 1.0 / std::pow(k, spec.zipf_exponent);
    double acc = 0;
    for (std::int32_t k = 1; k <= spec.tenants; ++k) {
      acc += 1.0 / std::pow(k, spec.zipf_exponent) / total;
      impl->tenant_cdf.push_back(acc);
    }
    impl->system_prompts.resize(static_cast<std::size_t>(spec.tenants));
    for (auto& sp : impl->system_prompts) impl->random_tokens(sp, spec.system_prompt_tokens);
    // Users' fixed questions, then the equal-popularity order: own generators, so that neither
    // shifts the streams of runs without them.
    Rng setup_rng(spec.seed * 0xd1b54a32d192ed03ULL + 4);
    std::int64_t stored = static_cast<std::int64_t>(spec.tenants) * spec.system_prompt_tokens;
    const std::int64_t slots = static_cast<std::int64_t>(spec.tenants) * std::max(1, spec.users_per_tenant);
    if (spec.users_per_tenant > 0) {
      // Lengths first, so that an oversized spec is refused before any token is stored.
      std::vector<std::int32_t> lengths(static_cast<std::size_t>(slots));
      for (auto& n : lengths) {
        n = sample_length(spec.input, setup_rng);
        stored += n;
      }
      if (stored > kMaxStoredPromptTokens) {
        return bad("'workload.tenants.usersPerTenant' (" + std::to_string(spec.users_per_tenant) +
                   ") x inputTokens and the system prompts exceed 67,108,864 stored tokens; use fewer users or shorter "
                   "questions");
      }
      impl->questions.resize(static_cast<std::size_t>(slots));
      for (std::size_t q = 0; q < lengths.size(); ++q) {
        impl->questions[q].reserve(static_cast<std::size_t>(lengths[q]));
        for (std::int32_t i = 0; i < lengths[q]; ++i) {
          impl->questions[q].push_back(static_cast<TokenId>(setup_rng.below(static_cast<std::uint64_t>(spec.vocab))));
        }
      }
    }
    if (spec.popularity == TenantPopularity::equal) {
      impl->slot_order.resize(static_cast<std::size_t>(slots));
      for (std::size_t i = 0; i < impl->slot_order.size(); ++i) impl->slot_order[i] = static_cast<std::int32_t>(i);
      for (std::size_t i = impl->slot_order.size(); i > 1; --i) {  // Fisher-Yates
        std::swap(impl->slot_order[i - 1], impl->slot_order[static_cast<std::size_t>(setup_rng.below(i))]);
      }
    }
  }
  if (spec.concurrency > 0) {
    const std::int64_t first =
        spec.max_requests > 0 ? std::min<std::int64_t>(spec.concurrency, spec.max_requests) : spec.concurrency;
    for (std::int64_t c = 0; c < first; ++c) impl->complete(0);
  }
  return Workload(std::move(impl));
}

Expected<Workload, WorkloadError> Workload::from_trace(std::string_view text, const TraceSpec& spec) {
  if (spec.trace_block_tokens < 1 || !(spec.time_scale > 0) || spec.vocab < 2 || spec.max_records < 1) {
    return unexpected(WorkloadError{WorkloadErrc::invalid_spec,
                                    "'workload.trace' needs blockTokens >= 1, timeScale > 0 and maxRecords >= 1"});
  }
  auto impl = std::make_unique<Impl>();
  impl->is_trace = true;
  impl->trace = spec;
  impl->text_rng = Rng(spec.seed * 0x94d049bb133111ebULL + 3);
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto rec = parse_trace_line(line);
    if (!rec) {
      return unexpected(
          WorkloadError{WorkloadErrc::trace_syntax, "trace line " + std::to_string(line_no) + ", " + rec.error()});
    }
    if (!impl->records.empty() && rec->timestamp_ms < impl->records.back().timestamp_ms) {
      return unexpected(WorkloadError{
          WorkloadErrc::trace_syntax,
          "trace line " + std::to_string(line_no) + ": timestamp goes backwards; sort the trace by timestamp"});
    }
    if (static_cast<std::int64_t>(impl->records.size()) >= spec.max_records) {
      return unexpected(WorkloadError{
          WorkloadErrc::trace_limit,
          "trace has more than " + std::to_string(spec.max_records) + " records; raise maxRecords or cut the trace"});
    }
    impl->records.push_back(std::move(*rec));
  }
  return Workload(std::move(impl));
}

Expected<Workload, WorkloadError> Workload::from_trace_file(const std::string& path, const TraceSpec& spec) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return unexpected(WorkloadError{WorkloadErrc::io_error, "cannot read trace file '" + path + "'"});
  std::ostringstream buf;
  buf << in.rdbuf();
  return from_trace(buf.str(), spec);
}

}  // namespace disagg
