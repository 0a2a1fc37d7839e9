// model_text.h — a served model's prompt tokens, computed the way vLLM computes them.
//
// vLLM turns an OpenAI request into token ids in two ways, and the router and the sim-worker must
// do the same to agree with it (and each other) on every prefix-cache block:
//   - completions: the prompt string is encoded with special tokens (add_special_tokens defaults
//     to true there), or a token-id array is taken as is;
//   - chat completions: the messages are rendered with the model's chat template (transformers'
//     apply_chat_template, see chat_template.h) with add_generation_prompt (default true),
//     continue_final_message, tools, documents and chat_template_kwargs, then encoded without
//     special tokens (the template writes them).
// Before rendering, messages are normalized as vLLM's chat utilities do for templates that take
// string content: an array of content parts becomes its text parts joined by "\n", and a tool
// call's `arguments` given as a JSON string becomes the object it encodes.
//
// Contract: load() reads the files once; a ModelText is immutable and its methods are const and
// thread-safe (each thread passes its own EncodeScratch). Failures are messages that name the field
// and say what is wrong, fit for a 400 answer; nothing throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_template.h"
#include "disagg/expected.h"
#include "tokenizer.h"

namespace disagg::text {

class ModelText {
 public:
  /// Loads `<dir>/tokenizer.json` and `<dir>/tokenizer_config.json` (its chat_template: a string,
  /// or a list of {name, template}: "default", and "tool_use" for requests with tools, as
  /// transformers picks; without one, `<dir>/chat_template.jinja`, where newer model repositories
  /// keep it). A missing chat template is not an error: chat requests then fail with a message
  /// saying so, as vLLM's do.
  static Expected<ModelText, std::string> load(const std::string& dir);

  const Tokenizer& tokenizer() const { return tokenizer_; }
  bool has_chat_template() const { return chat_template_.has_value() || tool_template_.has_value(); }

  /// Appends the ids of a completions prompt string (with special tokens, as vLLM's default).
  void completion_tokens(std::string_view prompt, bool add_special_tokens, EncodeScratch& scratch,
                         std::vector<TokenId>& out) const;

  /// vLLM's POST /tokenize and /detokenize on a parsed body: {prompt} (completions rules) or
  /// {messages} (chat rules) -> {count, max_model_len, tokens, token_strs}; {tokens} -> {prompt}.
  /// `body` is ordered, as chat_tokens() needs it; `max_model_len` <= 0 is
  /// reported as null (unknown, as at the router). Errors: (400, message, param).
  struct EndpointError {
    unsigned status;
    std::string message;
    std::string param;
  };
  Expected<nlohmann::json, EndpointError> serve_tokenize(const nlohmann::ordered_json& body,
                                                         bool detokenize, std::int64_t max_model_len,
                                                         EncodeScratch& scratch) const;

  /// Renders a chat request (`body` holds `messages` and the optional fields above) into `prompt`
  /// and appends its ids to `out`. `add_special_tokens` is vLLM's request field (default false).
  /// `body` is an ordered_json because key order shows in a render (tojson of tool schemas,
  /// items()): parse the request with nlohmann::ordered_json::parse.
  Expected<void, std::string> chat_tokens(const nlohmann::ordered_json& body, EncodeScratch& scratch, std::string& prompt,
                                          std::vector<TokenId>& out) const;

 private:
  ModelText(Tokenizer tokenizer, std::optional<ChatTemplate> chat_template, std::optional<ChatTemplate> tool_template,
            nlohmann::ordered_json specials)
      : tokenizer_(std::move(tokenizer)),
        chat_template_(std::move(chat_template)),
        tool_template_(std::move(tool_template)),
        specials_(std::move(specials)) {}

  Tokenizer tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  std::optional<ChatTemplate> tool_template_;  // "tool_use" of a named template list
  nlohmann::ordered_json specials_;  // bos_token, eos_token, unk_token, pad_token: the template's variables
};

}  // namespace disagg::text
