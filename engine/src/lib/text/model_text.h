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
// Before rendering, the request is prepared as vLLM prepares it (chat_template_context below).
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

/// vLLM's preparation of an OpenAI chat request for the chat template, from the raw request body
/// to the template's context (messages, tools, documents, add_generation_prompt and the
/// chat_template_kwargs). Checked against vllm-project/vllm: vllm/renderers/chat_utils/
/// parse_chat_message{,_content}.py and mm_parser_map.py at be90fe16 (the same logic as
/// vllm/entrypoints/chat_utils.py at 001eadcf), vllm/renderers/hf.py (content format detection,
/// developer role), vllm/entrypoints/openai/engine/protocol.py at d7e52523 (FunctionDefinition)
/// and chat_completion/protocol.py at d5dba2d7 (ChatCompletionToolsParam, build_chat_params),
/// vllm/renderers/params.py at 1aa021e8 (merge_kwargs):
///   - content: null -> no parts, a string -> one text part, a list -> its parts. Parts of type
///     text, input_text, output_text (key "text"), refusal ("refusal") and thinking ("thinking")
///     are text; a text or refusal part whose text is null is skipped. image_url, input_image,
///     image_pil, image_embeds, audio_url, input_audio, audio_embeds, video_url, video_embeds
///     are media; prompt_embeds renders as "<prompt_embeds>"; tool_reference as its name. A part
///     without `type` (or with a `uuid`) is typed by the first media key it has; an unknown type
///     is an error. "string" format: the text parts (non-empty ones) joined by "\n"; media are
///     dropped (vLLM puts the model's own placeholder there, which a text model does not have).
///     "openai" format: a list of {"type": "text", "text"} / {"type": "image"|"audio"|"video"}
///     parts, with the part's keys that vLLM does not know carried along; a tool message whose
///     parts are all text becomes their texts joined by "\n".
///   - system messages lose a leading Claude Code `x-anthropic-billing-header` line.
///   - kept per message: role, content, tool_calls (assistant; an empty list is removed),
///     reasoning (assistant; copied to reasoning_content), tool_call_id (tool), name and task
///     (strings), tools (developer). reasoning_content on input is not read (vLLM reads
///     `reasoning` only).
///   - tool-call arguments: a JSON string is decoded; anything that is not (or does not decode
///     to) a JSON object becomes {}; a tool call that is not a function is an error.
///   - developer messages, when the template's source does not mention 'developer' in quotes,
///     become system messages (their tools dropped), and then all system messages merge into one
///     at the front, their texts joined by "\n\n" (vLLM's _consolidate_system_messages).
///   - tools: as pydantic's model_dump of ChatCompletionToolsParam: {"type": "function",
///     "function": {"name", "description" (null if absent), "parameters" (null if absent), other
///     keys}, other keys}.
///   - add_generation_prompt, continue_final_message, documents and reasoning_effort from the
///     request override the same keys in chat_template_kwargs (unless null).
/// `template_mentions_developer` is developer_role_in_template(source) of `chosen`'s source.
Expected<nlohmann::ordered_json, std::string> chat_template_context(const nlohmann::ordered_json& body,
                                                                    const ChatTemplate& chosen,
                                                                    bool template_mentions_developer);

/// Whether the request's tools reach the template (and pick a "tool_use" template): `tools` is
/// not null, and not the empty list that vLLM drops when tool_choice is "required"
/// (ChatCompletionRequest.check_tool_usage).
bool request_has_tools(const nlohmann::ordered_json& body);

/// vLLM's _detect_developer_role_support: the template text contains "developer" or 'developer'.
bool developer_role_in_template(std::string_view source);

/// transformers' continue_final_message: cuts `prompt` right after the final message's text
/// (its last text part when the content is a list), stripped; an error when it is not there.
Expected<void, std::string> cut_after_final_message(const nlohmann::ordered_json& context, std::string& prompt);

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
  /// tokenizer_config.json's model_max_length when it is a length a model could have (1 .. 2^31 - 1;
  /// transformers writes 1e30 for "unknown"); 0 otherwise.
  std::int64_t model_max_length() const { return model_max_length_; }

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
  Expected<nlohmann::json, EndpointError> serve_tokenize(const nlohmann::ordered_json& body, bool detokenize,
                                                         std::int64_t max_model_len, EncodeScratch& scratch) const;

  /// Renders a chat request (`body` holds `messages` and the optional fields above) into `prompt`
  /// and appends its ids to `out`. `add_special_tokens` is vLLM's request field (default false).
  /// A `chat_template` string in the request is compiled and rendered instead of the model's
  /// (error: it does not compile, or is not a string), so a router keys such a request by the
  /// tokens vLLM will cache for it. `body` is an ordered_json because key order shows in a render (tojson of tool schemas,
  /// items()): parse the request with nlohmann::ordered_json::parse.
  Expected<void, std::string> chat_tokens(const nlohmann::ordered_json& body, EncodeScratch& scratch,
                                          std::string& prompt, std::vector<TokenId>& out) const;

 private:
  ModelText(Tokenizer tokenizer, std::optional<ChatTemplate> chat_template, std::optional<ChatTemplate> tool_template,
            nlohmann::ordered_json specials, bool chat_developer, bool tool_developer)
      : tokenizer_(std::move(tokenizer)),
        chat_template_(std::move(chat_template)),
        tool_template_(std::move(tool_template)),
        specials_(std::move(specials)),
        chat_developer_(chat_developer),
        tool_developer_(tool_developer) {}

  Tokenizer tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  std::optional<ChatTemplate> tool_template_;  // "tool_use" of a named template list
  nlohmann::ordered_json specials_;            // bos_token, eos_token, unk_token, pad_token: the template's variables
  bool chat_developer_ = false;                // developer_role_in_template() of each template's source
  bool tool_developer_ = false;
  std::int64_t model_max_length_ = 0;
};

}  // namespace disagg::text
