// tokenizer.cc — see tokenizer.h. Loading (JSON -> flat tables) first, then the encode hot path,
// then decode.
#include "tokenizer.h"

#include "segment_cache.h"

#include "disagg/utf8.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

namespace disagg::text {

std::string_view to_string(TokenizerErrc errc) {
  switch (errc) {
    case TokenizerErrc::unreadable_file: return "unreadable_file";
    case TokenizerErrc::invalid_json: return "invalid_json";
    case TokenizerErrc::invalid_field: return "invalid_field";
    case TokenizerErrc::unsupported_component: return "unsupported_component";
    case TokenizerErrc::invalid_regex: return "invalid_regex";
  }
  return "unknown";
}

namespace {

using json = nlohmann::json;

// ---- UTF-8 -----------------------------------------------------------------------------------

void append_lossy_utf8(std::string_view s, std::string& out) {
  std::size_t i = 0;
  while (i < s.size()) {
    bool complete = false;
    const std::size_t n = utf8_prefix(s, i, complete);
    if (complete) out.append(s.substr(i, n));
    else out.append("\xEF\xBF\xBD");  // one per maximal subpart
    i += n;
  }
}

// Rust's char::is_whitespace: the Unicode White_Space property.
bool is_unicode_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

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

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

// ---- flat hash tables ------------------------------------------------------------------------

std::uint64_t hash_bytes(std::string_view s) {
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

std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ULL;
  return x ^ (x >> 33);
}

std::size_t table_size_for(std::size_t n) {
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

// Oniguruma's \s under Unicode is the White_Space property; PCRE2's also takes U+180E (Mongolian
// vowel separator, no longer White_Space since Unicode 6.3). Spelled out, both engines agree
// (unicode_classes.inc records the reference's \s: the same 25 code points).
constexpr const char* kWhiteSpace = "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// The Unicode property classes as the reference matches them (generated from it:
// engine/scripts/gen_unicode_classes.mjs): its Oniguruma has newer Unicode tables than Debian's
// PCRE2, so a \p{L} spelled as ranges matches what the reference matches.
struct PropertyClass {
  std::string_view name, ranges;
};
constexpr PropertyClass kPropertyClasses[] = {
#include "unicode_classes.inc"
};

std::optional<std::string_view> class_ranges(std::string_view name) {
  for (const auto& c : kPropertyClasses)
    if (c.name == name) return c.ranges;
  return std::nullopt;
}

// Rewrites \s, \S and \p{X} / \P{X} (X a class of unicode_classes.inc) into explicit sets, outside
// and inside character classes (\S and \P{X} only outside); anything else is left to PCRE2.
std::string rewrite_for_reference(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      if ((e == 'p' || e == 'P') && i + 2 < pattern.size() && pattern[i + 2] == '{') {
        const auto close = pattern.find('}', i + 3);
        std::string_view name = std::string_view(pattern).substr(i + 3, close == std::string::npos ? 0 : close - i - 3);
        const bool negated = e == 'P' || (!name.empty() && name[0] == '^');
        if (!name.empty() && name[0] == '^') name.remove_prefix(1);
        const auto ranges = close == std::string::npos ? std::nullopt : class_ranges(name);
        if (ranges && (!in_class || !negated)) {
          if (in_class) out += *ranges;
          else out += std::string(negated ? "[^" : "[") + std::string(*ranges) + "]";
          i = close;
          continue;
        }
      }
      if (e == 's' && in_class) out += kWhiteSpace;
      else if (e == 's') out += std::string("[") + kWhiteSpace + "]";
      else if (e == 'S' && !in_class) out += std::string("[^") + kWhiteSpace + "]";
      else out.append(pattern, i, 2);
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

// Hugging Face compiles these with Oniguruma; PCRE2 with UTF + UCP reads the same syntax for what
// tokenizers use ((?i:..), lookahead, classes), with the property classes spelled out as the
// reference matches them; the differential test holds it to that.
Expected<std::shared_ptr<Regex>, TokenizerError> compile_regex(const std::string& original, const std::string& where) {
  const std::string pattern = rewrite_for_reference(original);
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto regex = std::make_shared<Regex>();
  regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (!regex->code) {
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(error, buffer, sizeof buffer);
    return unexpected(TokenizerError{TokenizerErrc::invalid_regex,
                                     where + ": pattern " + json(original).dump() + " at offset " +
                                         std::to_string(offset) + ": " + reinterpret_cast<char*>(buffer)});
  }
  pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);  // without JIT (e.g. no JIT on the CPU) it still matches
  return regex;
}

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

constexpr std::size_t kCacheSlots = 1 << 14;
constexpr std::size_t kCacheKeyBytes = 30;
constexpr std::size_t kCacheIds = 6;

struct CacheSlot {
  const void* owner = nullptr;
  std::uint64_t hash = 0;
  std::uint8_t key_length = 0;
  std::uint8_t id_count = 0;
  char key[kCacheKeyBytes];
  TokenId ids[kCacheIds];
};

}  // namespace

struct Tokenizer::Impl {
  // Normalizer and pre-tokenizer pipeline.
  std::vector<NormStep> normalizers;
  std::vector<PreStep> pre_tokenizers;
  bool byte_level = false;  // the model sees bytes (a ByteLevel pre-tokenizer)

  // BPE model.
  StringTable vocab;  // raw bytes (byte-level) or UTF-8 text -> id
  MergeTable merges;
  std::array<std::int64_t, 256> byte_ids{};  // byte-level: the id of each single byte, or -1
  std::array<std::int64_t, 256> fallback_ids{};  // byte_fallback: the id of <0xXX>, or -1
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::optional<TokenId> unk_id;

  // Added tokens.
  AddedTokenTrie raw_added;         // normalized: false
  AddedTokenTrie normalized_added;  // normalized: true (contents normalized)
  std::vector<bool> special;        // by id
  // Post-processor (add_special_tokens): ids around the sequence.
  std::vector<TokenId> prefix_ids, suffix_ids;

  // Decoding.
  std::vector<std::string> id_to_token;  // file form, by id
  std::vector<DecStep> decoders;
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
  std::string input;                 // lossy copy of invalid UTF-8 input
  std::string norm_a, norm_b;        // normalizer ping-pong
  std::vector<utf8proc_int32_t> nfc;  // code points for NFC
  std::string pre_a, pre_b;          // pre-tokenizer text when a step rewrites it
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
  std::vector<CacheSlot> cache;
  SegmentCache segment_cache;

  explicit State(std::size_t segment_cache_bytes) : segment_cache(segment_cache_bytes) {
    match = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
    cache.resize(kCacheSlots);
  }
  ~State() {
    pcre2_match_data_free(match);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

EncodeScratch::EncodeScratch(std::size_t segment_cache_bytes) : state_(std::make_unique<State>(segment_cache_bytes)) {}
EncodeScratch::~EncodeScratch() = default;
EncodeScratch::EncodeScratch(EncodeScratch&&) noexcept = default;
EncodeScratch& EncodeScratch::operator=(EncodeScratch&&) noexcept = default;

namespace {

// ---- loading ---------------------------------------------------------------------------------

using LoadResult = Expected<bool, TokenizerError>;

TokenizerError field_error(const std::string& field, const std::string& what) {
  return TokenizerError{TokenizerErrc::invalid_field, "tokenizer.json: " + field + ": " + what};
}
TokenizerError unsupported(const std::string& field, const json& value, const std::string& supported) {
  return TokenizerError{TokenizerErrc::unsupported_component,
                        "tokenizer.json: " + field + " " + value.dump() + " is not supported (supported: " +
                            supported + "); this tokenizer cannot be encoded exactly, so it is refused"};
}

std::string string_field(const json& j, const char* key, const std::string& fallback = {}) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}
bool bool_field(const json& j, const char* key, bool fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

PrependScheme prepend_scheme_of(const json& j) {
  const std::string scheme = string_field(j, "prepend_scheme");
  if (scheme == "first") return PrependScheme::first;
  if (scheme == "never") return PrependScheme::never;
  if (scheme.empty() && j.contains("add_prefix_space") && !bool_field(j, "add_prefix_space", true)) {
    return PrependScheme::never;  // files written before prepend_scheme existed
  }
  return PrependScheme::always;
}

LoadResult load_normalizer(const json& j, const std::string& where, std::vector<NormStep>& out) {
  if (j.is_null()) return true;
  const std::string type = string_field(j, "type");
  if (type == "Sequence") {
    const auto& list = j.value("normalizers", json::array());
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto r = load_normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]", out);
      if (!r) return r;
    }
    return true;
  }
  if (type == "NFC") out.push_back({NormKind::nfc, {}, {}});
  else if (type == "NFD") out.push_back({NormKind::nfd, {}, {}});
  else if (type == "NFKC") out.push_back({NormKind::nfkc, {}, {}});
  else if (type == "NFKD") out.push_back({NormKind::nfkd, {}, {}});
  else if (type == "Prepend") out.push_back({NormKind::prepend, string_field(j, "prepend"), {}});
  else if (type == "Replace" && j.contains("pattern") && j["pattern"].contains("String")) {
    const std::string pattern = j["pattern"]["String"].get<std::string>();
    if (pattern.empty()) return unexpected(field_error(where + ".pattern", "an empty pattern replaces nothing"));
    out.push_back({NormKind::replace, pattern, string_field(j, "content")});
  } else {
    return unexpected(unsupported(where, j.contains("type") ? j["type"] : j,
                                  "NFC, NFD, NFKC, NFKD, Prepend, Replace with a String pattern, Sequence"));
  }
  return true;
}

// GPT-2's pre-tokenizer pattern, used by ByteLevel with use_regex.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

LoadResult load_pre_tokenizer(const json& j, const std::string& where, Tokenizer::Impl& impl) {
  if (j.is_null()) return true;
  const std::string type = string_field(j, "type");
  if (type == "Sequence") {
    const auto& list = j.value("pretokenizers", json::array());
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto r = load_pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]", impl);
      if (!r) return r;
    }
    return true;
  }
  PreStep step{};
  if (type == "Split") {
    step.kind = PreKind::split;
    const json& pattern = j.value("pattern", json::object());
    if (pattern.contains("Regex")) {
      auto regex = compile_regex(pattern["Regex"].get<std::string>(), "tokenizer.json: " + where + ".pattern.Regex");
      if (!regex) return unexpected(regex.error());
      step.regex = std::move(regex).value();
    } else if (pattern.contains("String") && !pattern["String"].get<std::string>().empty()) {
      step.literal = pattern["String"].get<std::string>();
    } else {
      return unexpected(field_error(where + ".pattern", "needs a Regex or a non-empty String, got " + pattern.dump()));
    }
    const std::string behavior = string_field(j, "behavior", "Isolated");
    if (behavior == "Removed") step.behavior = SplitBehavior::removed;
    else if (behavior == "Isolated") step.behavior = SplitBehavior::isolated;
    else if (behavior == "MergedWithPrevious") step.behavior = SplitBehavior::merged_with_previous;
    else if (behavior == "MergedWithNext") step.behavior = SplitBehavior::merged_with_next;
    else if (behavior == "Contiguous") step.behavior = SplitBehavior::contiguous;
    else return unexpected(field_error(where + ".behavior", "unknown behavior " + json(behavior).dump()));
    step.invert = bool_field(j, "invert", false);
  } else if (type == "ByteLevel") {
    step.kind = PreKind::byte_level;
    step.add_prefix_space = bool_field(j, "add_prefix_space", true);
    if (bool_field(j, "use_regex", true)) {
      auto regex = compile_regex(kGpt2Pattern, "ByteLevel's GPT-2 pattern");
      if (!regex) return unexpected(regex.error());
      step.regex = std::move(regex).value();
    }
    impl.byte_level = true;
  } else if (type == "Metaspace") {
    step.kind = PreKind::metaspace;
    step.replacement = string_field(j, "replacement", "\xE2\x96\x81");
    step.prepend = prepend_scheme_of(j);
    step.metaspace_split = bool_field(j, "split", true);
  } else {
    return unexpected(unsupported(where, j.contains("type") ? j["type"] : j, "Split, ByteLevel, Metaspace, Sequence"));
  }
  impl.pre_tokenizers.push_back(std::move(step));
  return true;
}

LoadResult load_decoder(const json& j, const std::string& where, std::vector<DecStep>& out) {
  const std::string type = string_field(j, "type");
  if (type == "Sequence") {
    const auto& list = j.value("decoders", json::array());
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto r = load_decoder(list[i], where + ".decoders[" + std::to_string(i) + "]", out);
      if (!r) return r;
    }
    return true;
  }
  DecStep step{};
  if (type == "ByteLevel") {
    step.kind = DecKind::byte_level;
  } else if (type == "Replace" && j.contains("pattern") && j["pattern"].contains("String")) {
    step.kind = DecKind::replace;
    step.a = j["pattern"]["String"].get<std::string>();
    step.b = string_field(j, "content");
  } else if (type == "ByteFallback") {
    step.kind = DecKind::byte_fallback;
  } else if (type == "Fuse") {
    step.kind = DecKind::fuse;
  } else if (type == "Strip") {
    step.kind = DecKind::strip;
    step.a = string_field(j, "content", " ");
    step.start = j.value("start", std::size_t{0});
    step.stop = j.value("stop", std::size_t{0});
  } else if (type == "Metaspace") {
    step.kind = DecKind::metaspace;
    step.a = string_field(j, "replacement", "\xE2\x96\x81");
    step.prepend = prepend_scheme_of(j);
  } else {
    return unexpected(unsupported(where, j.contains("type") ? j["type"] : j,
                                  "ByteLevel, Replace with a String pattern, ByteFallback, Fuse, Strip, Metaspace, Sequence"));
  }
  out.push_back(std::move(step));
  return true;
}

// Collects the ids a post-processor puts before and after the sequence.
LoadResult load_post_processor(const json& j, const std::string& where, const std::unordered_map<std::string, TokenId>& ids_by_token,
                               Tokenizer::Impl& impl) {
  if (j.is_null()) return true;
  const std::string type = string_field(j, "type");
  if (type == "Sequence") {
    const auto& list = j.value("processors", json::array());
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto r = load_post_processor(list[i], where + ".processors[" + std::to_string(i) + "]", ids_by_token, impl);
      if (!r) return r;
    }
    return true;
  }
  if (type == "ByteLevel") return true;  // offsets only
  if (type == "TemplateProcessing") {
    bool after = false;
    for (const auto& item : j.value("single", json::array())) {
      if (item.contains("Sequence")) {
        after = true;
      } else if (item.contains("SpecialToken")) {
        const std::string name = item["SpecialToken"].value("id", std::string{});
        const auto& specials = j.value("special_tokens", json::object());
        if (!specials.contains(name)) return unexpected(field_error(where + ".special_tokens", "lacks " + json(name).dump()));
        for (const auto& id : specials[name].value("ids", json::array())) {
          (after ? impl.suffix_ids : impl.prefix_ids).push_back(id.get<TokenId>());
        }
      }
    }
    return true;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const auto& cls = j.value("cls", json::array());
    const auto& sep = j.value("sep", json::array());
    if (cls.size() != 2 || sep.size() != 2) return unexpected(field_error(where, "cls and sep must be [token, id]"));
    impl.prefix_ids.push_back(cls[1].get<TokenId>());
    impl.suffix_ids.push_back(sep[1].get<TokenId>());
    return true;
  }
  return unexpected(unsupported(where, j.contains("type") ? j["type"] : j,
                                "TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence"));
}

std::string token_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object()) return string_field(j, "content");
  return {};
}

Expected<std::string, TokenizerError> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return unexpected(TokenizerError{TokenizerErrc::unreadable_file, "cannot open " + path});
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return unexpected(TokenizerError{TokenizerErrc::unreadable_file, "cannot read " + path});
  return text.str();
}

}  // namespace

Expected<Tokenizer, TokenizerError> Tokenizer::load(const std::string& dir) {
  auto tokenizer_json = read_file(dir + "/tokenizer.json");
  if (!tokenizer_json) return unexpected(tokenizer_json.error());
  std::string config;
  if (std::ifstream probe(dir + "/tokenizer_config.json"); probe) {
    auto text = read_file(dir + "/tokenizer_config.json");
    if (!text) return unexpected(text.error());
    config = std::move(text).value();
  }
  return from_json(tokenizer_json.value(), config);
}

Expected<Tokenizer, TokenizerError> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
  const json root = json::parse(tokenizer_json, nullptr, false);
  if (root.is_discarded() || !root.is_object()) {
    return unexpected(TokenizerError{TokenizerErrc::invalid_json, "tokenizer.json is not a JSON object"});
  }
  json config = json::object();
  if (!tokenizer_config_json.empty()) {
    config = json::parse(tokenizer_config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      return unexpected(TokenizerError{TokenizerErrc::invalid_json, "tokenizer_config.json is not a JSON object"});
    }
  }
  auto impl = std::make_shared<Impl>();

  // Model.
  const json& model = root.value("model", json::object());
  const std::string model_type = string_field(model, "type", "BPE");
  if (model_type != "BPE") return unexpected(unsupported("model.type", model_type, "BPE"));
  if (!string_field(model, "continuing_subword_prefix").empty() || !string_field(model, "end_of_word_suffix").empty()) {
    return unexpected(unsupported("model.continuing_subword_prefix/end_of_word_suffix",
                                  json::array({model.value("continuing_subword_prefix", json()), model.value("end_of_word_suffix", json())}),
                                  "none or empty"));
  }
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0) {
    return unexpected(unsupported("model.dropout", model["dropout"], "null (dropout is for training)"));
  }
  impl->ignore_merges = bool_field(model, "ignore_merges", false);
  impl->byte_fallback = bool_field(model, "byte_fallback", false);
  impl->fuse_unk = bool_field(model, "fuse_unk", false);
  if (!model.contains("vocab") || !model["vocab"].is_object()) return unexpected(field_error("model.vocab", "must be an object of token -> id"));

  // The pipeline first: whether the model sees bytes decides the vocabulary's key form.
  if (auto r = load_normalizer(root.value("normalizer", json()), "normalizer", impl->normalizers); !r) return unexpected(r.error());
  if (auto r = load_pre_tokenizer(root.value("pre_tokenizer", json()), "pre_tokenizer", *impl); !r) return unexpected(r.error());
  if (root.contains("decoder") && !root["decoder"].is_null()) {
    impl->has_decoder = true;
    if (auto r = load_decoder(root["decoder"], "decoder", impl->decoders); !r) return unexpected(r.error());
  }

  const ByteAlphabet& alphabet = byte_alphabet();
  std::vector<std::pair<std::string, TokenId>> entries;
  entries.reserve(model["vocab"].size());
  std::unordered_map<std::string, TokenId> ids_by_token;  // file form, vocabulary and added tokens
  TokenId max_id = 0;
  for (const auto& [token, id_json] : model["vocab"].items()) {
    if (!id_json.is_number_unsigned() || id_json.get<std::uint64_t>() > 0x7FFFFFFF) {
      return unexpected(field_error("model.vocab[" + json(token).dump() + "]", "must be an id from 0 to 2^31 - 1"));
    }
    const auto id = id_json.get<TokenId>();
    max_id = std::max(max_id, id);
    ids_by_token.emplace(token, id);
    if (impl->byte_level) {
      // Tokens with characters outside the byte alphabet cannot come out of the model; they stay
      // decodable by id.
      if (auto bytes = alphabet.to_bytes(token)) entries.emplace_back(std::move(*bytes), id);
    } else {
      entries.emplace_back(token, id);
    }
  }

  // Added tokens.
  const json& added = root.value("added_tokens", json::array());
  std::vector<AddedTokenTrie::Token> raw_tokens, normalized_tokens;
  std::vector<std::pair<TokenId, bool>> specials;
  for (std::size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!a.contains("id") || !a["id"].is_number_unsigned() || a["id"].get<std::uint64_t>() > 0x7FFFFFFF || !a.contains("content") ||
        !a["content"].is_string()) {
      return unexpected(field_error(where, "needs an id and a content"));
    }
    if (bool_field(a, "single_word", false)) {
      return unexpected(unsupported(where + ".single_word", true, "false"));
    }
    const auto id = a["id"].get<TokenId>();
    max_id = std::max(max_id, id);
    const std::string content = a["content"].get<std::string>();
    ids_by_token[content] = id;
    specials.emplace_back(id, bool_field(a, "special", false));
    AddedTokenTrie::Token token{content, id, bool_field(a, "lstrip", false), bool_field(a, "rstrip", false)};
    (bool_field(a, "normalized", !bool_field(a, "special", false)) ? normalized_tokens : raw_tokens).push_back(std::move(token));
  }
  impl->vocab.build(entries);

  impl->id_to_token.assign(static_cast<std::size_t>(max_id) + 1, std::string{});
  for (const auto& [token, id] : ids_by_token) impl->id_to_token[id] = token;
  for (const auto& [token, id_json] : model["vocab"].items()) impl->id_to_token[id_json.get<TokenId>()] = token;
  for (const auto& t : raw_tokens) impl->id_to_token[t.id] = t.content;
  for (const auto& t : normalized_tokens) impl->id_to_token[t.id] = t.content;
  impl->special.assign(impl->id_to_token.size(), false);
  for (const auto& [id, is_special] : specials) impl->special[id] = is_special;

  // Merges: "a b" strings or [a, b] pairs, in rank order.
  const json& merges = model.value("merges", json::array());
  impl->merges.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    std::string left, right;
    const json& m = merges[rank];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const auto space = s.find(' ', 1);
      if (space == std::string::npos) return unexpected(field_error("model.merges[" + std::to_string(rank) + "]", "is not \"left right\": " + m.dump()));
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return unexpected(field_error("model.merges[" + std::to_string(rank) + "]", "is not a pair: " + m.dump()));
    }
    const auto l = ids_by_token.find(left), r = ids_by_token.find(right), merged = ids_by_token.find(left + right);
    if (l == ids_by_token.end() || r == ids_by_token.end() || merged == ids_by_token.end()) {
      return unexpected(field_error("model.merges[" + std::to_string(rank) + "]", m.dump() + " names a token outside the vocabulary"));
    }
    impl->merges.insert(l->second, r->second, {static_cast<std::uint32_t>(rank), merged->second});
  }

  impl->byte_ids.fill(-1);
  impl->fallback_ids.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (impl->byte_level) {
      if (auto id = impl->vocab.find(std::string(1, static_cast<char>(b)))) impl->byte_ids[b] = *id;
    }
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (const auto it = ids_by_token.find(name); it != ids_by_token.end()) impl->fallback_ids[b] = it->second;
  }
  if (const std::string unk = string_field(model, "unk_token"); !unk.empty()) {
    const auto it = ids_by_token.find(unk);
    if (it == ids_by_token.end()) return unexpected(field_error("model.unk_token", json(unk).dump() + " is not in the vocabulary"));
    impl->unk_id = it->second;
  }

  // Normalized added tokens are matched in normalized text, so their contents are normalized too.
  {
    EncodeScratch scratch;
    for (auto& t : normalized_tokens) {
      std::string normalized;
      impl->normalize(t.content, normalized, scratch.state());
      t.content = std::move(normalized);
    }
  }
  impl->raw_added.build(std::move(raw_tokens));
  impl->normalized_added.build(std::move(normalized_tokens));

  // Post-processor; transformers' Llama tokenizers rebuild it from add_bos_token/add_eos_token
  // (LlamaTokenizerFast.update_post_processor), and vLLM tokenizes through them.
  impl->bos = token_text(config.value("bos_token", json()));
  impl->eos = token_text(config.value("eos_token", json()));
  const std::string tokenizer_class = string_field(config, "tokenizer_class");
  const bool llama_class = tokenizer_class == "LlamaTokenizerFast" || tokenizer_class == "LlamaTokenizer" ||
                           tokenizer_class == "CodeLlamaTokenizerFast" || tokenizer_class == "CodeLlamaTokenizer";
  if (llama_class) {
    auto id_of = [&](const std::string& token, const char* field) -> Expected<TokenId, TokenizerError> {
      const auto it = ids_by_token.find(token);
      if (it == ids_by_token.end()) {
        return unexpected(TokenizerError{TokenizerErrc::invalid_field, std::string("tokenizer_config.json: ") + field + " " +
                                                                           json(token).dump() + " is not in the vocabulary"});
      }
      return it->second;
    };
    if (bool_field(config, "add_bos_token", true) && !impl->bos.empty()) {
      auto id = id_of(impl->bos, "bos_token");
      if (!id) return unexpected(id.error());
      impl->prefix_ids.push_back(id.value());
    }
    if (bool_field(config, "add_eos_token", false) && !impl->eos.empty()) {
      auto id = id_of(impl->eos, "eos_token");
      if (!id) return unexpected(id.error());
      impl->suffix_ids.push_back(id.value());
    }
  } else if (auto r = load_post_processor(root.value("post_processor", json()), "post_processor", ids_by_token, *impl); !r) {
    return unexpected(r.error());
  }
  return Tokenizer(std::shared_ptr<const Impl>(std::move(impl)));
}

// ---- encode ------------------------------------------------------------------------------------

namespace {

// Splits text[begin, end) on `trie`'s tokens into `out` (leftmost-longest, with lstrip/rstrip
// taking the whitespace next to the token), as the reference's AddedVocabulary does.
void split_added(std::string_view text, std::uint32_t begin, std::uint32_t end, const AddedTokenTrie& trie,
                 std::vector<EncodeScratch::State::Segment>& out) {
  if (trie.empty()) {
    if (end > begin) out.push_back({begin, end, -1});
    return;
  }
  std::uint32_t start = begin;  // the first byte not yet emitted
  std::uint32_t i = begin;
  const std::string_view view = text.substr(0, end);
  while (i < end) {
    const auto [token, length] = trie.longest_at(view, i);
    if (token < 0) {
      ++i;
      continue;
    }
    const auto& t = trie.token(token);
    std::uint32_t match_begin = i, match_end = i + static_cast<std::uint32_t>(length);
    if (t.lstrip) {
      // Whitespace before the token joins it (not past what is already emitted).
      std::uint32_t j = match_begin;
      while (j > start) {
        std::uint32_t k = j - 1;
        while (k > start && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
        std::size_t p = k;
        if (!is_unicode_whitespace(next_code_point(text, p))) break;
        j = k;
      }
      match_begin = j;
    }
    if (t.rstrip) {
      std::size_t p = match_end;
      while (p < end) {
        std::size_t q = p;
        if (!is_unicode_whitespace(next_code_point(text, q))) break;
        p = q;
      }
      match_end = static_cast<std::uint32_t>(p);
    }
    if (match_begin > start) out.push_back({start, match_begin, -1});
    out.push_back({match_begin, match_end, static_cast<std::int64_t>(t.id)});
    start = i = match_end;
  }
  if (end > start) out.push_back({start, end, -1});
}

// Finds the non-empty matches of a Split step in piece and appends (range, is_match) parts that
// cover the whole piece.
void find_parts(const PreStep& step, std::string_view piece, std::uint32_t base, EncodeScratch::State& s) {
  s.parts.clear();
  std::uint32_t last = 0;
  const auto n = static_cast<std::uint32_t>(piece.size());
  auto add_match = [&](std::uint32_t b, std::uint32_t e) {
    if (b > last) s.parts.push_back({{base + last, base + b}, false});
    s.parts.push_back({{base + b, base + e}, true});
    last = e;
  };
  if (step.regex) {
    std::uint32_t offset = 0;
    while (offset < n) {
      const int rc = pcre2_jit_match(step.regex->code, reinterpret_cast<PCRE2_SPTR>(piece.data()), n, offset, PCRE2_NO_UTF_CHECK,
                                     s.match, s.context);
      int rc_used = rc;
      if (rc == PCRE2_ERROR_JIT_BADOPTION) {  // no JIT on this machine: the interpreter
        rc_used = pcre2_match(step.regex->code, reinterpret_cast<PCRE2_SPTR>(piece.data()), n, offset, PCRE2_NO_UTF_CHECK, s.match,
                              s.context);
      }
      if (rc_used < 0 && rc_used != PCRE2_ERROR_NOMATCH) {
        // Out of JIT stack or match limit on a pathological piece: the rest stays one part.
        break;
      }
      if (rc_used == PCRE2_ERROR_NOMATCH) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.match);
      const auto b = static_cast<std::uint32_t>(ov[0]), e = static_cast<std::uint32_t>(ov[1]);
      if (e == b) {  // an empty match matches nothing; step over one character
        offset = b + 1;
        while (offset < n && (static_cast<unsigned char>(piece[offset]) & 0xC0) == 0x80) ++offset;
        continue;
      }
      add_match(b, e);
      offset = e;
    }
  } else {
    std::size_t from = 0;
    while (true) {
      const std::size_t at = piece.find(step.literal, from);
      if (at == std::string_view::npos) break;
      add_match(static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(at + step.literal.size()));
      from = at + step.literal.size();
    }
  }
  if (n > last) s.parts.push_back({{base + last, base + n}, false});
  if (step.invert) {
    for (auto& p : s.parts) p.second = !p.second;
  }
}

// Applies a split behavior to s.parts, appending the resulting pieces to s.next_pieces.
void apply_behavior(SplitBehavior behavior, EncodeScratch::State& s) {
  auto& out = s.next_pieces;
  const std::size_t first = out.size();
  auto push = [&](std::pair<std::uint32_t, std::uint32_t> r) { out.emplace_back(r.first, r.second - r.first); };
  auto extend_last = [&](std::uint32_t end) { out.back().second = end - out.back().first; };
  switch (behavior) {
    case SplitBehavior::isolated:
      for (const auto& [r, m] : s.parts) push(r);
      break;
    case SplitBehavior::removed:
      for (const auto& [r, m] : s.parts)
        if (!m) push(r);
      break;
    case SplitBehavior::merged_with_previous: {
      bool previous = false;
      for (const auto& [r, m] : s.parts) {
        if (m && !previous && out.size() > first) extend_last(r.second);
        else push(r);
        previous = m;
      }
      break;
    }
    case SplitBehavior::merged_with_next: {
      bool previous = false;  // walks backwards: "previous" is the part after
      std::size_t count = 0;
      for (auto it = s.parts.rbegin(); it != s.parts.rend(); ++it) {
        const auto& [r, m] = *it;
        if (m && !previous && count > 0) {
          auto& last = out.back();
          last.second += last.first - r.first;
          last.first = r.first;
        } else {
          push(r);
          ++count;
        }
        previous = m;
      }
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
      break;
    }
    case SplitBehavior::contiguous: {
      bool previous = false;
      for (const auto& [r, m] : s.parts) {
        if (m == previous && out.size() > first) extend_last(r.second);
        else push(r);
        previous = m;
      }
      break;
    }
  }
}

// Code points assigned after Unicode 9.0 with a combining class or a canonical decomposition
// (generated: engine/scripts/gen_unicode_tables.py).
constexpr char32_t kAfter9[] = {
#include "unicode_after_9.inc"
};
constexpr char32_t kFirstAfter9 = kAfter9[0];

// Ranges of code points that NFC may change or move (generated, as above).
struct CodePointRange {
  char32_t first, last;
};
constexpr CodePointRange kNfcUnstable[] = {
#include "nfc_unstable.inc"
};

// True when `text` (valid UTF-8) holds no code point that NFC could change or move, so it is
// already in NFC: the Unicode quick check, which most text passes.
bool nfc_stable(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0xCC) {  // below U+0300 (or a continuation byte)
      ++i;
      continue;
    }
    const char32_t cp = next_code_point(text, i);
    const auto it = std::upper_bound(std::begin(kNfcUnstable), std::end(kNfcUnstable), cp,
                                     [](char32_t c, const CodePointRange& r) { return c < r.first; });
    if (it != std::begin(kNfcUnstable) && cp <= std::prev(it)->last) return false;
  }
  return true;
}

// Appends the normalization of `in` (valid UTF-8) to `out`, with utf8proc `options`; `buffer`
// holds the code points and only grows.
void normalize_run(std::string_view in, int options, std::vector<utf8proc_int32_t>& buffer, std::string& out) {
  if (in.empty()) return;
  const auto opts = static_cast<utf8proc_option_t>(options);
  if (buffer.size() < in.size() * 4 + 16) buffer.resize(in.size() * 4 + 16);
  auto n = utf8proc_decompose_custom(reinterpret_cast<const utf8proc_uint8_t*>(in.data()), static_cast<utf8proc_ssize_t>(in.size()),
                                     buffer.data(), static_cast<utf8proc_ssize_t>(buffer.size()), opts, nullptr, nullptr);
  if (n > static_cast<utf8proc_ssize_t>(buffer.size())) {
    buffer.resize(static_cast<std::size_t>(n));
    n = utf8proc_decompose_custom(reinterpret_cast<const utf8proc_uint8_t*>(in.data()), static_cast<utf8proc_ssize_t>(in.size()),
                                  buffer.data(), n, opts, nullptr, nullptr);
  }
  if (n >= 0) n = utf8proc_normalize_utf32(buffer.data(), n, opts);
  if (n < 0) {  // valid UTF-8 in, so this does not happen; keep the text as it is
    out.append(in);
    return;
  }
  for (utf8proc_ssize_t k = 0; k < n; ++k) append_utf8(static_cast<char32_t>(buffer[static_cast<std::size_t>(k)]), out);
}

}  // namespace

void Tokenizer::Impl::normalize(std::string_view in, std::string& out, EncodeScratch::State& s) const {
  out.assign(in);
  for (const NormStep& step : normalizers) {
    switch (step.kind) {
      case NormKind::prepend:
        if (!out.empty()) out.insert(0, step.a);
        break;
      case NormKind::replace: {
        if (out.find(step.a) == std::string::npos) break;
        std::string& tmp = s.norm_b;
        tmp.clear();
        std::size_t from = 0;
        for (std::size_t at; (at = out.find(step.a, from)) != std::string::npos; from = at + step.a.size()) {
          tmp.append(out, from, at - from);
          tmp += step.b;
        }
        tmp.append(out, from);
        out.assign(tmp);  // copy, not swap: each buffer keeps its own capacity
        break;
      }
      default: {
        // Code points below U+0300 are stable under every normalization form but the K forms.
        const bool k_form = step.kind == NormKind::nfkc || step.kind == NormKind::nfkd;
        bool stable = true;
        for (const char c : out) {
          const auto b = static_cast<unsigned char>(c);
          if (k_form ? b >= 0x80 : b >= 0xCC) {
            stable = false;
            break;
          }
        }
        if (!stable && step.kind == NormKind::nfc) stable = nfc_stable(out);
        if (stable) break;
        int options = UTF8PROC_STABLE;
        if (step.kind == NormKind::nfc || step.kind == NormKind::nfkc) options |= UTF8PROC_COMPOSE;
        else options |= UTF8PROC_DECOMPOSE;
        if (k_form) options |= UTF8PROC_COMPAT;
        // Code points the reference's Unicode 9 tables do not know are starters that block
        // reordering and composition: normalize the runs between them on their own.
        std::string& tmp = s.norm_b;
        tmp.clear();
        std::size_t run = 0, i = 0;
        while (i < out.size()) {
          const std::size_t at = i;
          const char32_t cp = next_code_point(out, i);
          if (cp >= kFirstAfter9 && std::binary_search(std::begin(kAfter9), std::end(kAfter9), cp)) {
            normalize_run(std::string_view(out).substr(run, at - run), options, s.nfc, tmp);
            tmp.append(out, at, i - at);
            run = i;
          }
        }
        normalize_run(std::string_view(out).substr(run), options, s.nfc, tmp);
        out.assign(tmp);  // copy, not swap: each buffer keeps its own capacity
        break;
      }
    }
  }
}

void Tokenizer::Impl::encode_word(std::string_view word, EncodeScratch::State& s, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  // The word cache: direct-mapped, fixed size; short words only.
  const std::uint64_t h = hash_bytes(word);
  CacheSlot* slot = nullptr;
  if (word.size() <= kCacheKeyBytes) {
    slot = &s.cache[h & (kCacheSlots - 1)];
    if (slot->owner == this && slot->hash == h && slot->key_length == word.size() &&
        std::memcmp(slot->key, word.data(), word.size()) == 0) {
      out.insert(out.end(), slot->ids, slot->ids + slot->id_count);
      return;
    }
  }
  const std::size_t out_begin = out.size();
  if (ignore_merges) {
    if (const auto id = vocab.find(word)) {
      out.push_back(*id);
      goto cache_store;
    }
  }
  {
    auto& sym = s.symbols;
    sym.clear();
    auto add = [&](TokenId id, std::uint32_t length) {
      const auto n = static_cast<std::int32_t>(sym.size());
      sym.push_back({n - 1, -1, id, length});
      if (n > 0) sym[static_cast<std::size_t>(n - 1)].next = n;
    };
    if (byte_level) {
      for (const char c : word) {
        const auto id = byte_ids[static_cast<unsigned char>(c)];
        if (id >= 0) add(static_cast<TokenId>(id), 1);
        else if (unk_id) add(*unk_id, 1);
      }
    } else {
      std::size_t i = 0;
      bool last_unk = false;
      while (i < word.size()) {
        const std::size_t begin = i;
        next_code_point(word, i);
        const std::string_view ch = word.substr(begin, i - begin);
        if (const auto id = vocab.find(ch)) {
          add(*id, static_cast<std::uint32_t>(ch.size()));
          last_unk = false;
          continue;
        }
        bool all_bytes = byte_fallback;
        for (const char c : ch) all_bytes = all_bytes && fallback_ids[static_cast<unsigned char>(c)] >= 0;
        if (all_bytes) {
          for (const char c : ch) add(static_cast<TokenId>(fallback_ids[static_cast<unsigned char>(c)]), 1);
          last_unk = false;
        } else if (unk_id) {
          if (fuse_unk && last_unk) sym.back().length += static_cast<std::uint32_t>(ch.size());
          else add(*unk_id, static_cast<std::uint32_t>(ch.size()));
          last_unk = true;
        }
      }
    }
    // Merge the lowest-ranked pair first, leftmost among equals, until none applies.
    auto& heap = s.heap;
    heap.clear();
    for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
      if (const auto* m = merges.find(sym[i].id, sym[i + 1].id)) {
        heap.push_back({m->rank, static_cast<std::uint32_t>(i), m->id});
      }
    }
    std::make_heap(heap.begin(), heap.end());
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end());
      const auto top = heap.back();
      heap.pop_back();
      auto& left = sym[top.pos];
      if (left.length == 0 || left.next < 0) continue;
      auto& right = sym[static_cast<std::size_t>(left.next)];
      const auto* m = merges.find(left.id, right.id);
      if (!m || m->rank != top.rank || m->id != top.id) continue;  // stale: a neighbour merged first
      left.id = top.id;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (left.next >= 0) sym[static_cast<std::size_t>(left.next)].prev = static_cast<std::int32_t>(top.pos);
      if (left.prev >= 0) {
        const auto& p = sym[static_cast<std::size_t>(left.prev)];
        if (const auto* pm = merges.find(p.id, left.id)) {
          heap.push_back({pm->rank, static_cast<std::uint32_t>(left.prev), pm->id});
          std::push_heap(heap.begin(), heap.end());
        }
      }
      if (left.next >= 0) {
        const auto& n = sym[static_cast<std::size_t>(left.next)];
        if (const auto* nm = merges.find(left.id, n.id)) {
          heap.push_back({nm->rank, top.pos, nm->id});
          std::push_heap(heap.begin(), heap.end());
        }
      }
    }
    for (std::int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[static_cast<std::size_t>(i)].next) {
      out.push_back(sym[static_cast<std::size_t>(i)].id);
    }
  }
cache_store:
  if (slot && out.size() - out_begin <= kCacheIds) {
    slot->owner = this;
    slot->hash = h;
    slot->key_length = static_cast<std::uint8_t>(word.size());
    std::memcpy(slot->key, word.data(), word.size());
    slot->id_count = static_cast<std::uint8_t>(out.size() - out_begin);
    std::copy(out.begin() + static_cast<std::ptrdiff_t>(out_begin), out.end(), slot->ids);
  }
}

void Tokenizer::Impl::encode_text(std::string_view segment, bool at_start, EncodeScratch::State& s, std::vector<TokenId>& out) const {
  // The pre-tokenizers work on s.pre_a: a list of (offset, length) pieces.
  std::string* text = &s.pre_a;
  text->assign(segment);
  s.pieces.clear();
  s.pieces.emplace_back(0, static_cast<std::uint32_t>(text->size()));
  for (const PreStep& step : pre_tokenizers) {
    s.next_pieces.clear();
    if (step.kind == PreKind::split || (step.kind == PreKind::byte_level && !step.add_prefix_space)) {
      if (!step.regex && step.kind == PreKind::byte_level) continue;  // ByteLevel without a regex: bytes only
      for (const auto& [off, len] : s.pieces) {
        find_parts(step, std::string_view(*text).substr(off, len), off, s);
        apply_behavior(step.kind == PreKind::split ? step.behavior : SplitBehavior::isolated, s);
      }
      s.pieces.assign(s.next_pieces.begin(), s.next_pieces.end());  // copy: both buffers stay warm
      continue;
    }
    // Steps that rewrite the text: build the new text in the other buffer.
    std::string* rewritten = text == &s.pre_a ? &s.pre_b : &s.pre_a;
    rewritten->clear();
    for (std::size_t p = 0; p < s.pieces.size(); ++p) {
      const auto [off, len] = s.pieces[p];
      const std::string_view piece = std::string_view(*text).substr(off, len);
      const auto new_off = static_cast<std::uint32_t>(rewritten->size());
      if (step.kind == PreKind::byte_level) {
        if (piece.empty() || piece[0] != ' ') rewritten->push_back(' ');
        rewritten->append(piece);
      } else {  // metaspace
        const bool prepend = step.prepend == PrependScheme::always ||
                             (step.prepend == PrependScheme::first && at_start && off == 0 && p == 0);
        // The reference replaces spaces first, then prepends unless the piece starts with one.
        const bool starts_replaced = (!piece.empty() && piece[0] == ' ') || piece.substr(0, step.replacement.size()) == step.replacement;
        if (prepend && !starts_replaced) rewritten->append(step.replacement);
        for (const char c : piece) {
          if (c == ' ') rewritten->append(step.replacement);
          else rewritten->push_back(c);
        }
      }
      s.next_pieces.emplace_back(new_off, static_cast<std::uint32_t>(rewritten->size()) - new_off);
    }
    text = rewritten;
    s.pieces.assign(s.next_pieces.begin(), s.next_pieces.end());  // copy: both buffers stay warm
    if (step.kind == PreKind::byte_level && step.regex) {
      s.next_pieces.clear();
      for (const auto& [off, len] : s.pieces) {
        find_parts(step, std::string_view(*text).substr(off, len), off, s);
        apply_behavior(SplitBehavior::isolated, s);
      }
      s.pieces.assign(s.next_pieces.begin(), s.next_pieces.end());  // copy: both buffers stay warm
    } else if (step.kind == PreKind::metaspace && step.metaspace_split) {
      PreStep split{};
      split.kind = PreKind::split;
      split.literal = step.replacement;
      s.next_pieces.clear();
      for (const auto& [off, len] : s.pieces) {
        find_parts(split, std::string_view(*text).substr(off, len), off, s);
        apply_behavior(SplitBehavior::merged_with_next, s);
      }
      s.pieces.assign(s.next_pieces.begin(), s.next_pieces.end());  // copy: both buffers stay warm
    }
  }
  for (const auto& [off, len] : s.pieces) encode_word(std::string_view(*text).substr(off, len), s, out);
}

void Tokenizer::encode(std::string_view text, bool add_special_tokens, EncodeScratch& scratch, std::vector<TokenId>& out) const {
  const Impl& impl = *impl_;
  EncodeScratch::State& s = scratch.state();
  if (!is_valid_utf8(text)) {
    s.input.clear();
    append_lossy_utf8(text, s.input);
    text = s.input;
  }
  if (add_special_tokens) out.insert(out.end(), impl.prefix_ids.begin(), impl.prefix_ids.end());
  s.segments.clear();
  split_added(text, 0, static_cast<std::uint32_t>(text.size()), impl.raw_added, s.segments);
  for (const auto& seg : s.segments) {
    if (seg.added_id >= 0) {
      out.push_back(static_cast<TokenId>(seg.added_id));
      continue;
    }
    // A piece between added tokens encodes on its own: earlier turns of a conversation come from the
    // segment cache (segment_cache.h).
    const std::string_view piece = text.substr(seg.begin, seg.end - seg.begin);
    if (s.segment_cache.find(&impl, piece, seg.begin == 0, out)) continue;
    const std::size_t piece_start = out.size();
    std::string& normalized = s.norm_a;
    impl.normalize(piece, normalized, s);
    s.sub_segments.clear();
    split_added(normalized, 0, static_cast<std::uint32_t>(normalized.size()), impl.normalized_added, s.sub_segments);
    // Copy: encode_text reuses the normalizer buffers only through normalize(), which is done.
    for (const auto& sub : s.sub_segments) {
      if (sub.added_id >= 0) {
        out.push_back(static_cast<TokenId>(sub.added_id));
      } else {
        impl.encode_text(std::string_view(normalized).substr(sub.begin, sub.end - sub.begin),
                         seg.begin == 0 && sub.begin == 0, s, out);
      }
    }
    s.segment_cache.insert(&impl, piece, seg.begin == 0, std::span<const TokenId>(out).subspan(piece_start));
  }
  if (add_special_tokens) out.insert(out.end(), impl.suffix_ids.begin(), impl.suffix_ids.end());
}

// ---- decode ------------------------------------------------------------------------------------

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  const Impl& impl = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const TokenId id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= impl.id_to_token.size() || impl.id_to_token[id].empty()) continue;
    if (skip_special_tokens && impl.special[id]) continue;
    tokens.push_back(impl.id_to_token[id]);
  }
  if (!impl.has_decoder) {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i) joined += ' ';
      joined += tokens[i];
    }
    return joined;
  }
  const ByteAlphabet& alphabet = byte_alphabet();
  for (const DecStep& step : impl.decoders) {
    switch (step.kind) {
      case DecKind::byte_level: {
        std::string bytes;
        for (const auto& t : tokens) {
          if (auto b = alphabet.to_bytes(t)) bytes += *b;
          else bytes += t;
        }
        std::string text;
        append_lossy_utf8(bytes, text);
        tokens.assign(1, std::move(text));
        break;
      }
      case DecKind::replace:
        for (auto& t : tokens) {
          std::string r;
          std::size_t from = 0;
          for (std::size_t at; !step.a.empty() && (at = t.find(step.a, from)) != std::string::npos; from = at + step.a.size()) {
            r.append(t, from, at - from);
            r += step.b;
          }
          r.append(t, from);
          t = std::move(r);
        }
        break;
      case DecKind::byte_fallback: {
        std::vector<std::string> next;
        std::string pending;
        std::size_t pending_count = 0;
        auto flush = [&] {
          if (pending_count == 0) return;
          if (is_valid_utf8(pending)) next.push_back(pending);
          else
            for (std::size_t k = 0; k < pending_count; ++k) next.emplace_back("\xEF\xBF\xBD");
          pending.clear();
          pending_count = 0;
        };
        for (auto& t : tokens) {
          unsigned value = 0;
          if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
              std::sscanf(t.c_str() + 3, "%2x", &value) == 1 && std::isxdigit(static_cast<unsigned char>(t[3])) &&
              std::isxdigit(static_cast<unsigned char>(t[4]))) {
            pending.push_back(static_cast<char>(value));
            ++pending_count;
          } else {
            flush();
            next.push_back(std::move(t));
          }
        }
        flush();
        tokens = std::move(next);
        break;
      }
      case DecKind::fuse: {
        std::string joined;
        for (const auto& t : tokens) joined += t;
        tokens.assign(1, std::move(joined));
        break;
      }
      case DecKind::strip:
        for (auto& t : tokens) {
          std::size_t begin = 0, end = t.size();
          for (std::size_t k = 0; k < step.start && t.compare(begin, step.a.size(), step.a) == 0; ++k) begin += step.a.size();
          for (std::size_t k = 0; k < step.stop && end >= begin + step.a.size() &&
                                  t.compare(end - step.a.size(), step.a.size(), step.a) == 0;
               ++k)
            end -= step.a.size();
          t = t.substr(begin, end - begin);
        }
        break;
      case DecKind::metaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          std::string r;
          std::size_t from = 0;
          for (std::size_t at; (at = tokens[i].find(step.a, from)) != std::string::npos; from = at + step.a.size()) {
            r.append(tokens[i], from, at - from);
            // The reference drops every replacement in the first token (not only a leading one).
            if (i != 0 || step.prepend == PrependScheme::never) r += ' ';
          }
          r.append(tokens[i], from);
          tokens[i] = std::move(r);
        }
        break;
    }
  }
  std::string text;
  for (const auto& t : tokens) text += t;
  return text;
}

std::size_t Tokenizer::vocab_size() const { return impl_->id_to_token.size(); }

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  for (std::size_t id = 0; id < impl_->id_to_token.size(); ++id) {
    if (impl_->id_to_token[id] == token) return static_cast<TokenId>(id);
  }
  return std::nullopt;
}

std::optional<std::string_view> Tokenizer::id_to_token(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_to_token.size() || impl_->id_to_token[id].empty()) return std::nullopt;
  return impl_->id_to_token[id];
}

const std::string& Tokenizer::bos_token() const { return impl_->bos; }
const std::string& Tokenizer::eos_token() const { return impl_->eos; }

}  // namespace disagg::text
