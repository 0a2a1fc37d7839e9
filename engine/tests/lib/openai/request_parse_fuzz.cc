// libFuzzer target for the router's request path (built with clang and -DDISAGG_FUZZ=ON): the body
// bytes go through the same parse_request_json call as Router::generate (the depth check, then
// json::parse), then parse_generate_request.
//   engine/fuzz.sh   (or: cmake --build engine/build-fuzz --target disagg_request_parse_fuzz)
// The first byte picks completions or chat; the rest is the body. Invariants: no crash or UB
// (ASan/UBSan), an accepted request names a served model and has prompt tokens in the fake
// vocabulary, a refusal is a 400 or 404 with a message, parsing the same bytes twice agrees, and
// the router's fast scan (request_scan.h) accepts only bodies the slow path accepts, with the same
// result, and parse_json_into (json_parse.h, the router's parser) gives nlohmann's verdict and document.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "disagg/json_parse.h"
#include "request_parse.h"
#include "request_scan.h"

namespace {

using disagg::TokenId;
using disagg::router::ApiError;
using disagg::router::GenerateRequest;

const std::array<std::string, 2> kModels = {"llama", "llama-3.3-70b"};

struct Outcome {
  bool ok = false;
  unsigned status = 0;
  GenerateRequest request;
  std::vector<TokenId> tokens;
};

Outcome run(const disagg::router::RequestJson& body, bool chat, std::vector<TokenId>& tokens, std::string& scratch) {
  Outcome o;
  tokens.clear();
  auto r = disagg::router::parse_generate_request(body, chat, kModels, o.request, tokens, scratch);
  o.ok = static_cast<bool>(r);
  if (!o.ok) {
    const ApiError& e = r.error();
    o.status = e.status;
    if ((e.status != 400 && e.status != 404) || e.message.empty()) __builtin_trap();
  }
  o.tokens = tokens;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  // Reused buffers, as the router reuses its per-request scratch.
  static std::vector<TokenId> tokens;
  static std::string scratch;
  // The fast scan first, as the router runs it.
  Outcome fast;
  tokens.clear();
  fast.ok = disagg::router::scan_generate_request(text, chat, kModels, fast.request, tokens, scratch);
  if (!fast.ok && !tokens.empty()) __builtin_trap();  // a declining scan leaves the tokens as they were
  fast.tokens = tokens;
  // parse_json against the parser it stands in for, on every body the router would parse.
  if (disagg::json_depth_within(text, disagg::kMaxRequestJsonDepth)) {
    const auto want = disagg::router::RequestJson::parse(text, nullptr, /*allow_exceptions=*/false);
    disagg::router::RequestJson got;
    const bool ok = disagg::parse_json_into(text, got);
    if (ok == want.is_discarded()) __builtin_trap();
    if (ok && (got != want || got.dump() != want.dump())) __builtin_trap();
  }
  // As the router does: too deep or not JSON is a 400 before validation.
  auto parsed = disagg::router::parse_request_json(text);
  if (!parsed) {
    if (fast.ok) __builtin_trap();  // the scan accepted invalid or too deeply nested JSON
    if (parsed.error().status != 400 || parsed.error().message.empty()) __builtin_trap();
    return 0;
  }
  const disagg::router::RequestJson& body = *parsed;
  const Outcome a = run(body, chat, tokens, scratch);
  if (fast.ok && (!a.ok || a.tokens != fast.tokens || a.request.model != fast.request.model ||
                  a.request.stream != fast.request.stream || a.request.max_tokens != fast.request.max_tokens)) {
    __builtin_trap();
  }
  if (a.ok) {
    if (a.tokens.empty()) __builtin_trap();
    if (a.request.model != kModels[0] && a.request.model != kModels[1]) __builtin_trap();
    if (a.request.max_tokens < 0) __builtin_trap();
    for (TokenId t : a.tokens) {
      if (t < 0) __builtin_trap();
      // Completions may carry caller token ids; the fake tokenizer stays inside its vocabulary.
      if (chat && t >= disagg::router::kFakeVocabSize) __builtin_trap();
    }
  }
  const Outcome b = run(body, chat, tokens, scratch);
  if (a.ok != b.ok || a.status != b.status || a.tokens != b.tokens || a.request.model != b.request.model ||
      a.request.stream != b.request.stream || a.request.max_tokens != b.request.max_tokens) {
    __builtin_trap();
  }
  return 0;
}
