// tokenizer_internal.h — what the tokenizer's two source files share: the byte-level alphabet, the
// flat hash tables (StringTable, MergeTable), the added-token trie, the compiled regex, the pipeline
// description (NormStep, PreStep, DecStep, the word cache's CacheSlot), Tokenizer::Impl and
// EncodeScratch::State.
// Private to tokenizer*.cc: not part of disagg_text's API (that is tokenizer.h); nothing else includes it.
//   tokenizer_load.cc   loading: tokenizer.json (and tokenizer_config.json) -> these flat tables, with
//                       the pre-tokenizer regexes' rewriting and compilation (unicode_classes.inc)
//   tokenizer.cc        the encode hot path (added tokens, normalizer with the NFC quick check,
//                       pre-tokenizers, BPE), decode and the accessors
// The shared types are in tokenizer_detail; functions defined here are inline (the hot path's table
// lookups compile as they did in one file).
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "disagg/utf8.h"
#include "segment_cache.h"
#include "tokenizer.h"

namespace disagg::text {

namespace tokenizer_detail {

// ---- byte-level alphabet (GPT-2's bytes_to_unicode) ------------------------------------------

struct ByteAlphabet {
  std::array<char32_t, 256> byte_to_cp{};
  std::unordered_map<char32_t, unsigned char> cp_to_byte;
  ByteAlphabet() {
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      byte_to_cp[b] = printable[b] ? static_cast<char32_t>(b) : next++;
      cp_to_byte[byte_to_cp[b]] = static_cast<unsigned char>(b);
    }
  }
  // The raw bytes of a token in mapped form; nullopt when a character is not in the alphabet.
  std::optional<std::string> to_bytes(std::string_view mapped) const {
    std::string out;
    std::size_t i = 0;
    while (i < mapped.size()) {
      const char32_t cp = next_code_point(mapped, i);
      const auto it = cp_to_byte.find(cp);
      if (it == cp_to_byte.end()) return std::nullopt;
      out.push_back(static_cast<char>(it->second));
    }
    return out;
  }
};

inline const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

// ---- flat hash tables ------------------------------------------------------------------------

inline std::uint64_t hash_bytes(std::string_view s) {
  std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ s.size();
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 31;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x94D049BB133111EBULL;
  return h ^ (h >> 29);
}

inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ULL;
  return x ^ (x >> 33);
}

inline std::size_t table_size_for(std::size_t n) {
  std::size_t size = 16;
  while (size < 2 * n) size <<= 1;
  return size;
}

// Byte string -> id, open addressing; keys live in one arena.
class StringTable {
 public:
  void build(const std::vector<std::pair<std::string, TokenId>>& entries) {
    arena_.clear();
    keys_.clear();
    for (const auto& [key, id] : entries) {
      keys_.push_back({static_cast<std::uint32_t>(arena_.size()), static_cast<std::uint32_t>(key.size()), id});
      arena_ += key;
    }
    slots_.assign(table_size_for(keys_.size()), 0);
    mask_ = slots_.size() - 1;
    for (std::uint32_t k = 0; k < keys_.size(); ++k) {
      std::size_t slot = hash_bytes(key_of(k)) & mask_;
      while (slots_[slot] != 0) {
        if (key_of(slots_[slot] - 1) == key_of(k)) break;  // a duplicate key keeps its first id
        slot = (slot + 1) & mask_;
      }
      if (slots_[slot] == 0) slots_[slot] = k + 1;
    }
  }
  std::optional<TokenId> find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    std::size_t slot = hash_bytes(key) & mask_;
    while (slots_[slot] != 0) {
      const std::uint32_t k = slots_[slot] - 1;
      if (key_of(k) == key) return keys_[k].id;
      slot = (slot + 1) & mask_;
    }
    return std::nullopt;
  }

 private:
  struct Key {
    std::uint32_t offset, length;
    TokenId id;
  };
  std::string_view key_of(std::uint32_t k) const {
    return std::string_view(arena_).substr(keys_[k].offset, keys_[k].length);
  }
  std::string arena_;
  std::vector<Key> keys_;
  std::vector<std::uint32_t> slots_;
  std::size_t mask_ = 0;
};

// (left id, right id) -> (merge rank, merged id), open addressing.
class MergeTable {
 public:
  struct Merge {
    std::uint32_t rank;
    TokenId id;
  };
  void reserve(std::size_t n) {
    keys_.assign(table_size_for(n), kEmpty);
    values_.assign(keys_.size(), Merge{0, 0});
    mask_ = keys_.size() - 1;
  }
  // Keeps the first (lowest-rank) merge of a pair, as the reference does.
  void insert(TokenId left, TokenId right, Merge merge) {
    const std::uint64_t key = pack(left, right);
    std::size_t slot = mix64(key) & mask_;
    while (keys_[slot] != kEmpty) {
      if (keys_[slot] == key) return;
      slot = (slot + 1) & mask_;
    }
    keys_[slot] = key;
    values_[slot] = merge;
  }
  const Merge* find(TokenId left, TokenId right) const {
    const std::uint64_t key = pack(left, right);
    std::size_t slot = mix64(key) & mask_;
    while (keys_[slot] != kEmpty) {
      if (keys_[slot] == key) return &values_[slot];
      slot = (slot + 1) & mask_;
    }
    return nullptr;
  }

 private:
  static constexpr std::uint64_t kEmpty = ~0ULL;
  static std::uint64_t pack(TokenId l, TokenId r) {
    return (std::uint64_t{static_cast<std::uint32_t>(l)} << 32) | static_cast<std::uint32_t>(r);
  }
  std::vector<std::uint64_t> keys_;
  std::vector<Merge> values_;
  std::size_t mask_ = 0;
};

// ---- added tokens: a byte trie, leftmost-longest -----------------------------------------------

class AddedTokenTrie {
 public:
  struct Token {
    std::string content;
    TokenId id;
    bool lstrip, rstrip;
  };
  void build(std::vector<Token> tokens) {
    tokens_ = std::move(tokens);
    nodes_.assign(1, Node{});
    first_byte_.fill(false);
    for (std::uint32_t t = 0; t < tokens_.size(); ++t) {
      const std::string& s = tokens_[t].content;
      if (s.empty()) continue;
      first_byte_[static_cast<unsigned char>(s[0])] = true;
      std::uint32_t node = 0;
      for (const char c : s) node = child_or_add(node, static_cast<unsigned char>(c));
      if (nodes_[node].token < 0) nodes_[node].token = static_cast<std::int32_t>(t);
    }
  }
  bool empty() const { return tokens_.empty(); }
  // The longest token starting at text[i]: its index and length, or -1.
  std::pair<std::int32_t, std::size_t> longest_at(std::string_view text, std::size_t i) const {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) return {-1, 0};
    std::int32_t best = -1;
    std::size_t best_len = 0;
    std::uint32_t node = 0;
    for (std::size_t j = i; j < text.size(); ++j) {
      const auto next = child(node, static_cast<unsigned char>(text[j]));
      if (!next) break;
      node = *next;
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        best_len = j - i + 1;
      }
    }
    return {best, best_len};
  }
  const Token& token(std::int32_t index) const { return tokens_[static_cast<std::size_t>(index)]; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::uint32_t>> children;  // sorted by byte
    std::int32_t token = -1;
  };
  std::optional<std::uint32_t> child(std::uint32_t node, unsigned char b) const {
    const auto& ch = nodes_[node].children;
    const auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, std::uint32_t{0}));
    if (it == ch.end() || it->first != b) return std::nullopt;
    return it->second;
  }
  std::uint32_t child_or_add(std::uint32_t node, unsigned char b) {
    if (const auto c = child(node, b)) return *c;
    const auto id = static_cast<std::uint32_t>(nodes_.size());
    nodes_.push_back(Node{});
    auto& ch = nodes_[node].children;
    ch.insert(std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, std::uint32_t{0})), {b, id});
    return id;
  }
  std::vector<Token> tokens_;
  std::vector<Node> nodes_;
  std::array<bool, 256> first_byte_{};
};

// ---- compiled regex --------------------------------------------------------------------------

struct Regex {
  pcre2_code* code = nullptr;
  Regex() = default;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  Regex(Regex&& o) noexcept : code(std::exchange(o.code, nullptr)) {}
  ~Regex() {
    if (code) pcre2_code_free(code);
  }
};
// (compile_regex, which rewrites and compiles a pattern, is in tokenizer_load.cc.)

// ---- pipeline description ----------------------------------------------------------------------

enum class NormKind { nfc, nfd, nfkc, nfkd, prepend, replace };
struct NormStep {
  NormKind kind;
  std::string a, b;  // prepend: a = text; replace: a = pattern, b = content
};

enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
enum class PreKind { split, byte_level, metaspace };
enum class PrependScheme { always, first, never };
struct PreStep {
  PreKind kind;
  std::shared_ptr<Regex> regex;  // split (regex pattern) or byte_level with use_regex
  std::string literal;           // split with a String pattern
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;
  bool add_prefix_space = false;  // byte_level
  std::string replacement;        // metaspace
  PrependScheme prepend = PrependScheme::always;
  bool metaspace_split = true;
};

enum class DecKind { byte_level, replace, byte_fallback, fuse, strip, metaspace };
struct DecStep {
  DecKind kind;
  std::string a, b;  // replace: pattern, content; strip: content; metaspace: replacement
  std::size_t start = 0, stop = 0;
  PrependScheme prepend = PrependScheme::always;
};

inline constexpr std::size_t kCacheSlots = 1 << 14;
inline constexpr std::size_t kCacheKeyBytes = 30;
inline constexpr std::size_t kCacheIds = 6;

struct CacheSlot {
  const void* owner = nullptr;
  std::uint64_t hash = 0;
  std::uint8_t key_length = 0;
  std::uint8_t id_count = 0;
  char key[kCacheKeyBytes];
  TokenId ids[kCacheIds];
};

}  // namespace tokenizer_detail

struct Tokenizer::Impl {
  // Normalizer and pre-tokenizer pipeline.
  std::vector<tokenizer_detail::NormStep> normalizers;
  std::vector<tokenizer_detail::PreStep> pre_tokenizers;
  bool byte_level = false;  // the model sees bytes (a ByteLevel pre-tokenizer)

  // BPE model.
  tokenizer_detail::StringTable vocab;  // raw bytes (byte-level) or UTF-8 text -> id
  tokenizer_detail::MergeTable merges;
  std::array<std::int64_t, 256> byte_ids{};      // byte-level: the id of each single byte, or -1
  std::array<std::int64_t, 256> fallback_ids{};  // byte_fallback: the id of <0xXX>, or -1
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::optional<TokenId> unk_id;

  // Added tokens.
  tokenizer_detail::AddedTokenTrie raw_added;         // normalized: false
  tokenizer_detail::AddedTokenTrie normalized_added;  // normalized: true (contents normalized)
  std::vector<bool> special;                          // by id
  // Post-processor (add_special_tokens): ids around the sequence.
  std::vector<TokenId> prefix_ids, suffix_ids;

  // Decoding.
  std::vector<std::string> id_to_token;  // file form, by id
  std::vector<tokenizer_detail::DecStep> decoders;
  bool has_decoder = false;

  std::string bos, eos;

  void normalize(std::string_view in, std::string& out, EncodeScratch::State& s) const;
  void encode_text(std::string_view segment, bool at_start, EncodeScratch::State& s, std::vector<TokenId>& out) const;
  void encode_word(std::string_view word, EncodeScratch::State& s, std::vector<TokenId>& out) const;
};

struct EncodeScratch::State {
  pcre2_match_data* match = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  std::string input;                  // lossy copy of invalid UTF-8 input
  std::string norm_a, norm_b;         // normalizer ping-pong
  std::vector<utf8proc_int32_t> nfc;  // code points for NFC
  std::string pre_a, pre_b;           // pre-tokenizer text when a step rewrites it
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pieces, next_pieces, found;
  std::vector<std::pair<std::pair<std::uint32_t, std::uint32_t>, bool>> parts;
  struct Segment {
    std::uint32_t begin, end;
    std::int64_t added_id;  // -1: text
  };
  std::vector<Segment> segments, sub_segments;
  struct Symbol {
    std::int32_t prev, next;
    TokenId id;
    std::uint32_t length;
  };
  std::vector<Symbol> symbols;
  struct QueuedMerge {
    std::uint32_t rank;
    std::uint32_t pos;
    TokenId id;
    bool operator<(const QueuedMerge& o) const {  // a max-heap on this pops the lowest rank, then position
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<QueuedMerge> heap;
  std::vector<tokenizer_detail::CacheSlot> cache;
  SegmentCache segment_cache;

  explicit State(std::size_t segment_cache_bytes) : segment_cache(segment_cache_bytes) {
    match = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
    cache.resize(tokenizer_detail::kCacheSlots);
  }
  ~State() {
    pcre2_match_data_free(match);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

}  // namespace disagg::text
