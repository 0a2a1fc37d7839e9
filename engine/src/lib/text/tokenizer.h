// tokenizer.h — a Hugging Face `tokenizer.json`, encoded as the Rust `tokenizers` library does.
//
// The router needs a request's real token ids to route by prefix-cache hits, so it tokenizes in
// process with the served model's own files. Two families are supported, the ones serving models use:
//   - byte-level BPE (Llama 3.x, Qwen2.5/Qwen3, DeepSeek-V3, gpt-oss, Mistral's newer tokenizers):
//     a `Split` regex pre-tokenizer (PCRE2 with JIT, Unicode classes) and `ByteLevel`;
//   - SentencePiece-style BPE (Llama 2, Mistral 7B): `Prepend`/`Replace` normalizers or a `Metaspace`
//     pre-tokenizer, `byte_fallback` and `fuse_unk`.
// The pipeline is the library's: added tokens are split off first (leftmost-longest; tokens with
// `normalized: false` on the raw text, the others on the normalized text), then the normalizer, the
// pre-tokenizers, the BPE model, and the post-processor when special tokens are asked for.
//
// Contracts:
//   - Tokenizer::load()/from_json() read the files once and validate everything they use: a
//     component this file does not implement (a `WordPiece` model, a `Precompiled` normalizer, ...)
//     is a load error that names it, never a silently different encoding.
//   - A loaded Tokenizer is immutable; encode() and decode() are const and thread-safe. Each thread
//     passes its own EncodeScratch, which holds every buffer the hot path needs (regex match data,
//     NFC buffers, BPE symbols and heap, a bounded cache of recent words, a bounded cache of recent
//     pieces between added tokens, which makes a conversation's earlier turns free to encode again):
//     once warm, encoding allocates nothing but the growth of the caller's output vector.
//   - Input text is bytes. Invalid UTF-8 is replaced by U+FFFD per maximal invalid subpart, as
//     Rust's String::from_utf8_lossy and JavaScript's TextDecoder do, so a client's bad bytes give
//     the ids the reference gives for its lossily decoded string.
//   - Memory is bounded by the files: the vocabulary and merge tables are flat hash tables sized at
//     load (about 30 MB for a 150k-token vocabulary); a scratch's word cache has a fixed slot count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "disagg/block_hash.h"
#include "disagg/expected.h"

namespace disagg::text {

/// The engine's token id (disagg/block_hash.h), so that ids go straight into block hashes.
using disagg::TokenId;

enum class TokenizerErrc {
  unreadable_file,        // a file could not be opened or read
  invalid_json,           // a file is not JSON
  invalid_field,          // a field has the wrong type or an impossible value
  unsupported_component,  // a normalizer, pre-tokenizer, model, ... this library does not implement
  invalid_regex,          // a pre-tokenizer or normalizer pattern PCRE2 rejects
};

std::string_view to_string(TokenizerErrc errc);

struct TokenizerError {
  TokenizerErrc code;
  std::string message;  // names the file, the field and the value
};

class EncodeScratch;

class Tokenizer {
 public:
  /// Loads `<dir>/tokenizer.json`, and `<dir>/tokenizer_config.json` when present (for the
  /// bos/eos tokens and transformers' add_bos_token/add_eos_token, see from_json).
  static Expected<Tokenizer, TokenizerError> load(const std::string& dir);

  /// Builds from the two files' text. `tokenizer_config_json` may be empty. When it names a Llama
  /// tokenizer class and sets add_bos_token/add_eos_token, those decide the special tokens added by
  /// encode(add_special_tokens = true), as transformers' LlamaTokenizerFast rebuilds its
  /// post-processor from them (vLLM tokenizes through transformers); otherwise the file's own
  /// post_processor does.
  static Expected<Tokenizer, TokenizerError> from_json(std::string_view tokenizer_json,
                                                       std::string_view tokenizer_config_json = {});

  /// Appends the ids of `text` to `out`. `add_special_tokens` applies the post-processor (e.g. the
  /// BOS token), as `encode(text, add_special_tokens=True)` does.
  void encode(std::string_view text, bool add_special_tokens, EncodeScratch& scratch, std::vector<TokenId>& out) const;

  /// The text of `ids`, as the tokenizer's decoder produces it; ids outside the vocabulary are
  /// skipped. With `skip_special_tokens`, special added tokens are left out.
  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const;

  /// The vocabulary size with added tokens (the largest id + 1).
  std::size_t vocab_size() const;
  /// The id of a token (a vocabulary entry or an added token), by its text in the file's form.
  /// A scan of the vocabulary: for set-up and tests, not for a request's path.
  std::optional<TokenId> token_to_id(std::string_view token) const;
  /// The text of a token in the file's form (byte-level tokens in their mapped characters).
  std::optional<std::string_view> id_to_token(TokenId id) const;
  /// The tokenizer_config.json's bos/eos tokens (empty when absent); the chat template uses them.
  const std::string& bos_token() const;
  const std::string& eos_token() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// One thread's working memory for Tokenizer::encode (any tokenizer). Not thread-safe: one per
/// thread. Movable, not copyable.
class EncodeScratch {
 public:
  /// Token ids of recently encoded text pieces kept by default (segment_cache.h), bytes.
  static constexpr std::size_t kDefaultSegmentCacheBytes = 8u << 20;
  /// `segment_cache_bytes`: the bound of its segment cache (0: none), allocated at first use.
  explicit EncodeScratch(std::size_t segment_cache_bytes = kDefaultSegmentCacheBytes);
  ~EncodeScratch();
  EncodeScratch(EncodeScratch&&) noexcept;
  EncodeScratch& operator=(EncodeScratch&&) noexcept;
  EncodeScratch(const EncodeScratch&) = delete;
  EncodeScratch& operator=(const EncodeScratch&) = delete;

  struct State;
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

}  // namespace disagg::text
