// disagg/workload.h — seeded request streams for the simulator (and load generators).
//
// A Workload yields requests in arrival order, one at a time (next()), so an hour of traffic never
// sits in memory. Every request carries its prompt's token ids, because prefix caching keys on
// chained hashes of token blocks: two requests share cache exactly where their token ids agree.
//
// Shapes (WorkloadSpec.kind), each optionally behind a per-tenant system prompt (tenants > 0: the
// tenant's system prompt of system_prompt_tokens tokens is fixed for the run and prefixes every
// prompt of that tenant; see "Shared prompts" below for how a request picks its tenant):
//   single   one request per arrival: prompt = [system] + input tokens of fresh text.
//   chat     one session per arrival, `turns` turns: turn 1 prompt = [system] + input;
//            turn k prompt = prompt of turn k-1 + its answer + followup_input tokens of new text;
//            turn k arrives think_time (exponential mean) after turn k-1 arrived (open loop). A
//            session ends early when its context would exceed max_context_tokens.
//   agentic  one task per arrival: context = [system] + input; then `depth` rounds of `fanout`
//            parallel calls, each prompt = context + its own tool_output tokens; the first call's
//            tool output and answer extend the context of the next round, which arrives
//            step_gap_seconds (exponential mean) later.
//   trace    replay of a JSONL trace (from_trace()).
// Shared prompts (the shared-prefix traffic of benchmark clients such as inference-perf's
// shared_prefix: N system prompts, each used by U users):
//   popularity zipf   the tenant is drawn by Zipf(zipf_exponent): tenant k (1-based) has weight 1/k^s.
//   popularity equal  arrivals take the tenants in turn (with users: the tenant x user slots), in an
//                     order shuffled once per run by the seed, as inference-perf cycles its prompts;
//                     over every whole cycle each tenant (slot) is taken exactly once.
//   users_per_tenant  (kind single) 0: every request's input is fresh text no other request
//                     contains. U > 0: each of the tenant's U users has one question of `input`
//                     tokens, drawn once for the run, and every request of that user sends
//                     [system] + that question: the whole prompt repeats, which is what vLLM's
//                     prefix cache sees from inference-perf (it pre-generates N x U prompts and
//                     sends them over and over). A user is picked with its tenant: by the equal
//                     cycle, or uniformly within the Zipf-drawn tenant.
// API (api): completions (default) sends the prompt tokens as they are, as /v1/completions does;
// the simulator never added template tokens, so this is what every earlier run simulated. chat
// wraps each message in the chat template the sim-worker renders (disagg/fake_tokenizer.h,
// FakeChatPrompt): a system header before the system prompt, a user header before each user
// input (a tool header before each agentic tool output), and the assistant header that ends every
// prompt, so simulated prompts are as long as those `disagg local` sends through
// /v1/chat/completions. Trace replay has no api: a trace's input_length counts every token.
// Closed loop (concurrency > 0, kind single): `concurrency` clients start at time 0 and each sends
// its next request when its previous one ends (the driver calls complete()), with no think time.
// Arrivals (of requests, sessions or tasks): poisson, gamma (coefficient of variation cv; cv > 1 is
// bursty), mmpp (two-state Markov-modulated Poisson: a burst state at burst_factor x the base rate
// for burst_share of the time, bursts lasting mean_burst_seconds on average) or constant (evenly
// spaced: arrival i at exactly i / rate); the mean rate is rate_per_second in all four. The first
// arrival is at time 0.
// Stages (arrival.stages): the load runs in stages back to back from time 0, stage k at its own
// rate for its own duration (arrival.rate_per_second is then unused), and arrivals stop at the end
// of the last stage. Constant: stage k's arrivals are at start_k + i / rate_k for
// i in [0, ceil(rate_k x duration_k)), so a stage of 8/s for 600 s sends 4,800 requests, its first
// at its start. Poisson, gamma and mmpp: the draw restarts at each stage boundary at the new rate
// (exact for Poisson, which is memoryless; mmpp keeps its burst state).
// Lengths: fixed (mean), uniform [min, max], lognormal with the given mean and stddev, all clamped
// to [min, max] and rounded to whole tokens.
//
// Deterministic: the same spec (seed included) gives the same stream on every platform (own RNG
// and distributions; no std:: distributions, whose output is implementation-defined).
//
// Trace format (JSON Lines, one request per line, a flat object):
//   {"timestamp_ms": 1200, "input_length": 812, "output_length": 64, "hash_ids": [7, 8, 9], "session_id": 3}
// "timestamp" is accepted for "timestamp_ms" (Mooncake's traces name it so; milliseconds either
// way). hash_ids (optional) name the trace's prompt blocks of trace_block_tokens tokens each (Mooncake:
// 512): equal ids yield equal token ids, so the simulator's own cache sees the trace's sharing.
// session_id (optional) is a number or a string. Other keys are ignored. Lines must be ordered
// by timestamp. The parser is strict and bounded (kMaxTraceLineBytes per line, kMaxHashIds per
// line, max_records in all); it lives in core so the addon can replay traces without a JSON library.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/block_hash.h"
#include "disagg/expected.h"

namespace disagg {

/// A distribution of token counts.
struct LengthDist {
  enum class Kind : std::uint8_t { fixed, uniform, lognormal };
  Kind kind = Kind::fixed;
  double mean = 1024;          ///< fixed value, or mean of lognormal
  double stddev = 0;           ///< lognormal only
  std::int32_t min = 1;        ///< clamp (and uniform's lower bound)
  std::int32_t max = 1 << 20;  ///< clamp (and uniform's upper bound)
};

/// One stage of load: `rate_per_second` for `duration_seconds`. See the header comment.
struct ArrivalStage {
  double rate_per_second = 1;
  double duration_seconds = 1;
};

/// Stages of one run, at most (bounds the spec a configuration can hold).
inline constexpr std::size_t kMaxArrivalStages = 1024;

/// An arrival process. See the header comment.
struct ArrivalProcess {
  enum class Kind : std::uint8_t { poisson, gamma, mmpp, constant };
  Kind kind = Kind::poisson;
  double rate_per_second = 1;      ///< unused when stages are given
  double cv = 2;                   ///< gamma: coefficient of variation of the gaps
  double burst_factor = 4;         ///< mmpp: burst rate / base rate (> 1)
  double burst_share = 0.2;        ///< mmpp: share of time in bursts, in (0, 1)
  double mean_burst_seconds = 10;  ///< mmpp: mean length of one burst
  /// Load in stages, back to back from time 0 (empty: one open-ended stage at rate_per_second).
  /// Each rate and duration > 0; at most kMaxArrivalStages; not with duration_seconds or a closed
  /// loop (the stages end the run).
  std::vector<ArrivalStage> stages;
};

/// How a request picks its tenant (shared system prompt). See the header comment.
enum class TenantPopularity : std::uint8_t { zipf, equal };

/// How prompts reach the server. See the header comment.
enum class PromptApi : std::uint8_t { completions, chat };

enum class WorkloadKind : std::uint8_t { single, chat, agentic, trace };

struct WorkloadSpec {
  WorkloadKind kind = WorkloadKind::single;
  std::uint64_t seed = 1;
  /// Stop after this many requests (0: no limit).
  std::int64_t max_requests = 1000;
  /// No request arrives after this time (0: no limit). At least one limit must be set.
  double duration_seconds = 0;
  /// Closed loop (kind single only): this many clients, each sending its next request the moment
  /// its previous one ends (as benchmark clients at a fixed concurrency do); `arrival` is then
  /// ignored. The driver reports every end with Workload::complete(). 0: open loop.
  std::int32_t concurrency = 0;
  ArrivalProcess arrival;
  LengthDist input;                                                ///< new text of the first prompt (tokens)
  LengthDist output{LengthDist::Kind::fixed, 256, 0, 1, 1 << 20};  ///< tokens to generate
  /// Token ids are drawn from [0, vocab).
  std::int32_t vocab = 32000;
  /// Draw the fresh text of single-turn prompts (past shared_prefix_tokens). false: those tokens are
  /// left 0, for a consumer that reads only the shared prefix and the length (the simulator: 8k-token
  /// prompts made random text the planner's main cost). Chat and agentic text is always drawn: later
  /// turns contain it.
  bool fresh_text = true;
  // --- tenants ---
  std::int32_t tenants = 0;  ///< 0: no system prompt
  std::int32_t system_prompt_tokens = 0;
  double zipf_exponent = 1.0;  ///< tenant k (1-based) has weight 1 / k^s
  TenantPopularity popularity = TenantPopularity::zipf;
  /// Kind single, tenants > 0: users per tenant, each with one fixed question (0: fresh text per
  /// request). tenants x users_per_tenant <= kMaxPromptSlots.
  std::int32_t users_per_tenant = 0;
  PromptApi api = PromptApi::completions;
  // --- chat ---
  LengthDist turns{LengthDist::Kind::fixed, 4, 0, 1, 1000};
  LengthDist followup_input{LengthDist::Kind::fixed, 128, 0, 1, 1 << 20};
  double think_time_seconds = 5;
  std::int32_t max_context_tokens = 32768;
  // --- agentic ---
  std::int32_t fanout = 4;
  std::int32_t depth = 3;
  LengthDist tool_output{LengthDist::Kind::fixed, 256, 0, 1, 1 << 20};
  double step_gap_seconds = 2;
};

/// Trace replay options.
struct TraceSpec {
  std::int32_t trace_block_tokens = 512;  ///< tokens per hash id (Mooncake: 512)
  double time_scale = 1.0;                ///< arrival = (timestamp - first timestamp) / 1000 * time_scale
  std::int64_t max_records = 10'000'000;
  std::int32_t vocab = 32000;
  std::uint64_t seed = 1;  ///< for tokens not covered by hash_ids
};

inline constexpr std::size_t kMaxTraceLineBytes = 1 << 20;
/// Tenant x user slots of a run, at most (tenants x max(1, users_per_tenant)).
inline constexpr std::int64_t kMaxPromptSlots = 1 << 20;
/// Tokens of system prompts and fixed user questions a run stores, at most.
inline constexpr std::int64_t kMaxStoredPromptTokens = 1LL << 26;
inline constexpr std::size_t kMaxHashIds = 1 << 16;

enum class WorkloadErrc { invalid_spec, trace_syntax, trace_limit, io_error };
std::string_view to_string(WorkloadErrc code);

struct WorkloadError {
  WorkloadErrc code = WorkloadErrc::invalid_spec;
  std::string message;  ///< names the field (or trace line), the value and the fix
};

/// One request. Buffers are reused by next(): copy what must outlive the next call.
struct WorkloadRequest {
  double arrival_seconds = 0;
  std::vector<TokenId> prompt;
  /// The answer's token ids where the workload knows them (chat, agentic: later prompts contain
  /// them, so caching them matters); empty otherwise.
  std::vector<TokenId> answer;
  std::int32_t output_tokens = 1;
  /// Leading prompt tokens that other requests may contain too (a system prompt, earlier turns,
  /// trace blocks named by hash ids). The rest of the prompt is fresh random text that no other
  /// request contains (with probability 1 - vocab^-16 per 16-token block), and so is an unknown
  /// answer; a known answer is shared. Lets the simulator skip index work for unique blocks.
  /// -1: unknown (the whole prompt counts as shared).
  std::int32_t shared_prefix_tokens = -1;
  std::uint64_t session_id = 0;
  std::int32_t tenant = -1;  ///< -1: none
  std::int32_t user = -1;    ///< 0-based user within the tenant (users_per_tenant > 0); -1: none
  std::int32_t turn = 0;     ///< 0-based turn (chat) or round (agentic)
  std::uint64_t index = 0;   ///< 0-based position in the stream
};

class Workload {
 public:
  /// A generator for kinds single, chat and agentic. Failure: invalid_spec (message names the field).
  static Expected<Workload, WorkloadError> create(const WorkloadSpec& spec);
  /// A replay of JSONL text (see the header comment). Failure: trace_syntax (message names the
  /// line), trace_limit.
  static Expected<Workload, WorkloadError> from_trace(std::string_view jsonl, const TraceSpec& spec);
  /// from_trace() over a file. Failure: io_error, and those of from_trace().
  static Expected<Workload, WorkloadError> from_trace_file(const std::string& path, const TraceSpec& spec);

  Workload(Workload&&) noexcept;
  Workload& operator=(Workload&&) noexcept;
  ~Workload();

  /// Writes the next request into `out`; false when the stream has ended (closed loop: when no
  /// client has a request ready now; more may follow complete()).
  bool next(WorkloadRequest& out);

  /// Whether this is a closed-loop workload (WorkloadSpec::concurrency > 0).
  bool closed_loop() const;

  /// Closed loop: a request ended (finished, rejected or failed) at `now`; its client sends the
  /// next one at `now`, unless the limits (requests, duration) are reached. Ignored in open loop.
  /// Precondition: `now` is not before the last arrival handed out.
  void complete(double now);

  /// Requests yielded so far.
  std::uint64_t emitted() const;

  struct Impl;

 private:
  explicit Workload(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// A parsed trace line (exposed for tests and fuzzing).
struct TraceRecord {
  double timestamp_ms = 0;
  std::int32_t input_length = 0;
  std::int32_t output_length = 0;
  std::vector<std::int64_t> hash_ids;
  std::uint64_t session_id = 0;
  bool has_session = false;
};

/// Parses one JSONL line. Failure: a message saying what is wrong and where (column).
Expected<TraceRecord, std::string> parse_trace_line(std::string_view line);

/// Deterministic 64-bit generator (splitmix64) with the distributions the workloads use.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next_u64() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  double uniform();
  /// Uniform integer in [0, n): the high word of next_u64() * n (no division; as uniform as a
  /// modulo, bias below n / 2^64). Precondition: n > 0.
  std::uint64_t below(std::uint64_t n) {
    __extension__ using wide = unsigned __int128;  // GCC and Clang; __extension__ keeps -Wpedantic quiet
    return static_cast<std::uint64_t>((static_cast<wide>(next_u64()) * n) >> 64);
  }
  double exponential(double mean);
  double normal();
  /// Gamma with shape k and scale theta (Marsaglia-Tsang).
  double gamma(double k, double theta);

 private:
  std::uint64_t state_;
};

}  // namespace disagg
