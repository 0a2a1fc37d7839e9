// fake_tokenizer.h — the deterministic stand-in for a real tokenizer that the sim-worker and the
// router share, so that the router's chained block hashes equal the hashes the sim-worker publishes
// in its KV events (prefix hits line up end to end on loopback).
//
// Rule (stable: routers, workers and tests rely on it):
//   1. The text is split at ASCII whitespace (space, \t, \n, \r, \f, \v); whitespace itself
//      produces no token, so "a b" and "a \n b" give the same tokens.
//   2. Each run of other bytes is cut from its start into pieces of at most 4 bytes.
//   3. A piece's token id = 256 + FNV-1a-64(piece bytes) mod (kFakeVocabSize - 256); ids below 256
//      are never produced (kept for specials).
// Equal text gives equal tokens, and a text that extends another at a whitespace boundary extends
// its tokens, so shared prompt prefixes give prefix-cache hits as with a real tokenizer.
// Real vLLM hashes blocks of its real tokenizer's ids; this rule is for the sim-worker only.
//
// Chat template (FakeChatPrompt, the one renderer of chat messages: the router's two request
// parsers and the sim-worker all call it, so their tokens agree):
//   per message  "<|" role "|>\n" content "\n"      then  "<|assistant|>\n"
// where content is a string, or the text parts of an array joined by "\n" (none: empty).
// A conversation that grows by turns keeps its earlier tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/block_hash.h"

namespace disagg {

/// Size of the fake vocabulary (that of Llama 3's tokenizer, for realistic id ranges).
inline constexpr std::int32_t kFakeVocabSize = 128256;

/// Token id of one piece (at most 4 bytes, no whitespace). See the rule above.
TokenId fake_token_id(std::string_view piece);

/// Appends the tokens of `text` to `out`. Allocates only when `out` grows past its capacity.
void fake_tokenize(std::string_view text, std::vector<TokenId>& out);

/// Renders chat messages into the prompt text of the template above, piece by piece, so that a
/// caller appends the bytes it reads (a JSON string, decoded or not) straight into the text:
///   FakeChatPrompt p(scratch);
///   p.begin_message().append(role);     // then, per text part of the content:
///   p.add_part().append(text);          // (none for null content)
///   p.end_message();                    // ... more messages ...
///   fake_tokenize(p.finish(), tokens);
/// Precondition: calls in that order (add_part and end_message after a begin_message). Writes
/// into `text` only (cleared here; its capacity is reused, so a reused buffer does not allocate).
class FakeChatPrompt {
 public:
  explicit FakeChatPrompt(std::string& text) : text_(text) { text_.clear(); }

  /// Starts a message; returns the text, to which the caller appends the role.
  std::string& begin_message() {
    text_.append("<|");
    in_role_ = true;
    parts_ = 0;
    return text_;
  }
  /// Starts the next text part of the message's content; returns the text, to which the caller
  /// appends the part. Parts are separated by "\n".
  std::string& add_part() {
    end_role();
    if (parts_++ != 0) text_.push_back('\n');
    return text_;
  }
  /// Ends the message begun last.
  void end_message() {
    end_role();
    text_.push_back('\n');
  }
  /// One message with a string content (or none when `content` is empty).
  void message(std::string_view role, std::string_view content) {
    begin_message().append(role);
    add_part().append(content);
    end_message();
  }
  /// Appends the generation prompt; returns the whole text, ready for fake_tokenize().
  std::string_view finish() {
    text_.append("<|assistant|>\n");
    return text_;
  }

 private:
  void end_role() {
    if (!in_role_) return;
    text_.append("|>\n");
    in_role_ = false;
  }
  std::string& text_;
  int parts_ = 0;
  bool in_role_ = false;
};

}  // namespace disagg
