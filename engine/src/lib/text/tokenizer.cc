// tokenizer.cc — see tokenizer.h. The encode hot path, then decode and the accessors; loading
// (JSON -> flat tables) is in tokenizer_load.cc, the types both share in tokenizer_internal.h.
#include "tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "tokenizer_internal.h"

namespace disagg::text {

using namespace tokenizer_detail;

namespace {

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
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
}  // namespace

EncodeScratch::EncodeScratch(std::size_t segment_cache_bytes) : state_(std::make_unique<State>(segment_cache_bytes)) {}
EncodeScratch::~EncodeScratch() = default;
EncodeScratch::EncodeScratch(EncodeScratch&&) noexcept = default;
EncodeScratch& EncodeScratch::operator=(EncodeScratch&&) noexcept = default;

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
      const int rc = pcre2_jit_match(step.regex->code, reinterpret_cast<PCRE2_SPTR>(piece.data()), n, offset,
                                     PCRE2_NO_UTF_CHECK, s.match, s.context);
      int rc_used = rc;
      if (rc == PCRE2_ERROR_JIT_BADOPTION) {  // no JIT on this machine: the interpreter
        rc_used = pcre2_match(step.regex->code, reinterpret_cast<PCRE2_SPTR>(piece.data()), n, offset,
                              PCRE2_NO_UTF_CHECK, s.match, s.context);
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
  auto n = utf8proc_decompose_custom(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                                     static_cast<utf8proc_ssize_t>(in.size()), buffer.data(),
                                     static_cast<utf8proc_ssize_t>(buffer.size()), opts, nullptr, nullptr);
  if (n > static_cast<utf8proc_ssize_t>(buffer.size())) {
    buffer.resize(static_cast<std::size_t>(n));
    n = utf8proc_decompose_custom(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                                  static_cast<utf8proc_ssize_t>(in.size()), buffer.data(), n, opts, nullptr, nullptr);
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

void Tokenizer::Impl::encode_text(std::string_view segment, bool at_start, EncodeScratch::State& s,
                                  std::vector<TokenId>& out) const {
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
        const bool starts_replaced =
            (!piece.empty() && piece[0] == ' ') || piece.substr(0, step.replacement.size()) == step.replacement;
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

void Tokenizer::encode(std::string_view text, bool add_special_tokens, EncodeScratch& scratch,
                       std::vector<TokenId>& out) const {
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
          for (std::size_t at; !step.a.empty() && (at = t.find(step.a, from)) != std::string::npos;
               from = at + step.a.size()) {
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
          for (std::size_t k = 0; k < step.start && t.compare(begin, step.a.size(), step.a) == 0; ++k)
            begin += step.a.size();
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

std::size_t Tokenizer::vocab_size() const {
  return impl_->id_to_token.size();
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  for (std::size_t id = 0; id < impl_->id_to_token.size(); ++id) {
    if (impl_->id_to_token[id] == token) return static_cast<TokenId>(id);
  }
  return std::nullopt;
}

std::optional<std::string_view> Tokenizer::id_to_token(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_to_token.size() || impl_->id_to_token[id].empty())
    return std::nullopt;
  return impl_->id_to_token[id];
}

const std::string& Tokenizer::bos_token() const {
  return impl_->bos;
}
const std::string& Tokenizer::eos_token() const {
  return impl_->eos;
}

}  // namespace disagg::text
