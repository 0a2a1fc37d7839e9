#include "request_scan.h"

#include "model_text.h"

#include "disagg/utf8.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

namespace disagg::router {

namespace {

// Deeper bodies go to the slow path, which refuses them (parse_request_json), so recursion here
// stays shallow. The top-level object is at depth 0 and a container at depth d is level d + 1, so
// the scan accepts exactly the levels that json_depth_within() does.
constexpr int kMaxDepth = static_cast<int>(kMaxRequestJsonDepth);

enum class Kind : std::uint8_t { string, number, object, array, boolean_true, boolean_false, null };

// One JSON value as bytes of the body. Strings: the bytes between the quotes; numbers: the
// literal; objects and arrays: from the opening to the closing bracket.
struct Value {
  Kind kind = Kind::null;
  std::string_view raw;
  bool escaped = false;         // a string with a backslash escape
  bool unicode_escape = false;  // ... of which at least one is \uXXXX
  bool integer = false;         // a number without fraction or exponent
};

// Bytes a string holds as they are: printable ASCII other than the quote and the backslash.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
  return t;
}();

// Whether the 8 bytes at p are all plain (see kPlain): no quote, backslash, control character
// (< 0x20) or byte >= 0x80 (DEL, 0x7f, is plain: JSON allows it unescaped).
inline bool plain8(const char* p) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kHigh = 0x8080808080808080ULL;
  std::uint64_t x;
  std::memcpy(&x, p, 8);
  const auto zero_byte = [](std::uint64_t v) { return (v - kOnes) & ~v & kHigh; };
  const std::uint64_t special =
      (x & kHigh) | ((x - kOnes * 0x20) & ~x & kHigh) | zero_byte(x ^ (kOnes * '"')) | zero_byte(x ^ (kOnes * '\\'));
  return special == 0;
}

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
unsigned hex_value(char c) {
  if (is_digit(c)) return static_cast<unsigned>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
  return static_cast<unsigned>(c - 'A' + 10);
}

// A strict RFC 8259 reader (at least as strict as nlohmann's: whatever it accepts, nlohmann accepts
// and reads the same way). Every method returns false on anything it does not accept.
class Scanner {
 public:
  explicit Scanner(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

  void ws() {
    while (p_ != end_ && is_ws(*p_)) ++p_;
  }
  bool at_end() {
    ws();
    return p_ == end_;
  }
  bool peek(char c) {
    ws();
    return p_ != end_ && *p_ == c;
  }

  bool value(Value& v, int depth) {
    ws();
    if (p_ == end_) return false;
    switch (*p_) {
      case '"': return string(v);
      case '{':
      case '[': return container(v, depth);
      case 't': v.kind = Kind::boolean_true; return literal("true", v);
      case 'f': v.kind = Kind::boolean_false; return literal("false", v);
      case 'n': v.kind = Kind::null; return literal("null", v);
      default: return number(v);
    }
  }

  // Reads the members of the object at the cursor, calling fn(key, value) for each; false when
  // fn does or the object is malformed.
  template <class F>
  bool members(F&& fn, int depth) {
    if (!peek('{')) return false;
    ++p_;
    if (peek('}')) {
      ++p_;
      return true;
    }
    Value key, val;
    while (true) {
      if (!peek('"') || !string(key)) return false;
      if (!peek(':')) return false;
      ++p_;
      if (!value(val, depth + 1) || !fn(key, val)) return false;
      if (peek(',')) {
        ++p_;
        continue;
      }
      if (!peek('}')) return false;
      ++p_;
      return true;
    }
  }

  // Reads the elements of the array at the cursor, calling fn(value) for each.
  template <class F>
  bool elements(F&& fn, int depth) {
    if (!peek('[')) return false;
    ++p_;
    if (peek(']')) {
      ++p_;
      return true;
    }
    Value val;
    while (true) {
      if (!value(val, depth + 1) || !fn(val)) return false;
      if (peek(',')) {
        ++p_;
        continue;
      }
      if (!peek(']')) return false;
      ++p_;
      return true;
    }
  }

 private:
  bool literal(std::string_view word, Value& v) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
    v.raw = std::string_view(p_, word.size());
    p_ += word.size();
    return true;
  }

  bool container(Value& v, int depth) {
    if (depth >= kMaxDepth) return false;
    const char* start = p_;
    const bool object = *p_ == '{';
    const bool ok = object ? members([](const Value&, const Value&) { return true; }, depth)
                           : elements([](const Value&) { return true; }, depth);
    if (!ok) return false;
    v.kind = object ? Kind::object : Kind::array;
    v.raw = std::string_view(start, static_cast<std::size_t>(p_ - start));
    return true;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, declining values that could overflow a double
  // (nlohmann refuses those): more than 200 integer digits or a 3-digit exponent.
  bool number(Value& v) {
    const char* start = p_;
    if (p_ != end_ && *p_ == '-') ++p_;
    if (p_ == end_) return false;
    std::size_t int_digits = 0;
    if (*p_ == '0') {
      ++p_;
      int_digits = 1;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ != end_ && is_digit(*p_)) ++p_, ++int_digits;
    } else {
      return false;
    }
    v.integer = true;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || !is_digit(*p_)) return false;
      while (p_ != end_ && is_digit(*p_)) ++p_;
      v.integer = false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      std::size_t exp_digits = 0;
      while (p_ != end_ && is_digit(*p_)) ++p_, ++exp_digits;
      if (exp_digits == 0 || exp_digits > 2) return false;
      v.integer = false;
    }
    if (int_digits > 200) return false;
    v.kind = Kind::number;
    v.raw = std::string_view(start, static_cast<std::size_t>(p_ - start));
    return true;
  }

  // Well-formed UTF-8 per RFC 3629 (no overlongs, no surrogates, nothing above U+10FFFF).
  bool utf8() {
    bool complete = false;
    p_ += utf8_prefix(std::string_view(p_, static_cast<std::size_t>(end_ - p_)), 0, complete);
    return complete;
  }

  bool string(Value& v) {
    ++p_;  // the opening quote
    const char* start = p_;
    v.kind = Kind::string;
    v.escaped = v.unicode_escape = false;
    while (true) {
      // The common case: printable ASCII, eight bytes at a time while none of them is a quote, a
      // backslash, a control character or non-ASCII, then one table look-up per byte (prompts
      // are most of a body).
      while (end_ - p_ >= 8 && plain8(p_)) p_ += 8;
      while (p_ != end_ && kPlain[static_cast<unsigned char>(*p_)]) ++p_;
      if (p_ == end_) return false;
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') break;
      if (c < 0x20) return false;  // control characters must be escaped
      if (c >= 0x80) {
        if (!utf8()) return false;
        continue;
      }
      // A backslash escape.
      v.escaped = true;
      if (end_ - p_ < 2) return false;
      const char e = p_[1];
      if (e == 'u') {
        if (end_ - p_ < 6) return false;
        unsigned code = 0;
        for (int i = 2; i < 6; ++i) {
          if (!is_hex(p_[i])) return false;
          code = code * 16 + hex_value(p_[i]);
        }
        // Surrogates (valid only in pairs) are left to the slow path.
        if (code >= 0xD800 && code <= 0xDFFF) return false;
        v.unicode_escape = true;
        p_ += 6;
      } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
        p_ += 2;
      } else {
        return false;
      }
    }
    v.raw = std::string_view(start, static_cast<std::size_t>(p_ - start));
    ++p_;  // the closing quote
    return true;
  }

  const char* p_;
  const char* end_;
};

// Appends the text of a string value; false for \u escapes (left to the slow path).
bool append_text(std::string& out, const Value& v) {
  if (!v.escaped) {
    out.append(v.raw);
    return true;
  }
  if (v.unicode_escape) return false;
  for (std::size_t i = 0; i < v.raw.size(); ++i) {
    char c = v.raw[i];
    if (c == '\\') {
      switch (v.raw[++i]) {
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        default: c = v.raw[i]; break;  // " \ /
      }
    }
    out.push_back(c);
  }
  return true;
}

// An integer literal of at most 18 digits (so no overflow), as int64.
bool small_integer(const Value& v, std::int64_t& out) {
  if (v.kind != Kind::number || !v.integer) return false;
  std::string_view d = v.raw;
  const bool negative = !d.empty() && d[0] == '-';
  if (negative) d.remove_prefix(1);
  if (d.empty() || d.size() > 18) return false;
  std::int64_t x = 0;
  for (char c : d) x = x * 10 + (c - '0');
  out = negative ? -x : x;
  return true;
}

// Marks `key` as seen in `slot`; false when it was seen before (nlohmann keeps the last of
// repeated keys; the slow path handles those).
bool take(Value& slot, bool& seen, const Value& value) {
  if (seen) return false;
  seen = true;
  slot = value;
  return true;
}

bool tokenize_text(const Value& v, std::vector<TokenId>& tokens, std::string& scratch,
                   const PromptTokenizer* tokenizer) {
  std::string_view text = v.raw;
  if (v.escaped) {
    scratch.clear();
    if (!append_text(scratch, v)) return false;
    text = scratch;
  }
  if (tokenizer && tokenizer->model) {
    tokenizer->model->completion_tokens(text, /*add_special_tokens=*/true, *tokenizer->scratch, tokens);
  } else {
    fake_tokenize(text, tokens);
  }
  return true;
}

bool token_ids(const Value& array, std::vector<TokenId>& tokens, const PromptTokenizer* tokenizer) {
  const std::int64_t limit = tokenizer && tokenizer->model
                                 ? static_cast<std::int64_t>(tokenizer->model->tokenizer().vocab_size()) - 1
                                 : 0x7fffffff;
  Scanner s(array.raw);
  return s.elements(
      [&](const Value& t) {
        std::int64_t id = 0;
        if (!small_integer(t, id) || id < 0 || id > limit) return false;
        tokens.push_back(static_cast<TokenId>(id));
        return true;
      },
      1);
}

bool completion_prompt(const Value& prompt, std::vector<TokenId>& tokens, std::string& scratch,
                       const PromptTokenizer* tokenizer) {
  if (prompt.kind == Kind::string) return tokenize_text(prompt, tokens, scratch, tokenizer);
  if (prompt.kind != Kind::array) return false;
  // Batches route by their first prompt.
  Value first;
  bool have_first = false;
  Scanner s(prompt.raw);
  if (!s.elements(
          [&](const Value& e) {
            if (!have_first) first = e, have_first = true;
            return true;
          },
          1)) {
    return false;
  }
  if (have_first && first.kind == Kind::string) return tokenize_text(first, tokens, scratch, tokenizer);
  if (have_first && first.kind == Kind::array) return token_ids(first, tokens, tokenizer);
  return token_ids(prompt, tokens, tokenizer);
}

// Adds the text parts of a message's content array to the prompt (see add_content in
// request_parse.cc).
bool content_parts(const Value& parts, FakeChatPrompt& prompt) {
  Scanner s(parts.raw);
  return s.elements(
      [&](const Value& part) {
        if (part.kind != Kind::object) return true;
        Value type, text;
        bool has_type = false, has_text = false;
        Scanner p(part.raw);
        const bool ok = p.members(
            [&](const Value& key, const Value& val) {
              if (key.escaped) return false;
              if (key.raw == "type") return take(type, has_type, val);
              if (key.raw == "text") return take(text, has_text, val);
              return true;
            },
            2);
        if (!ok) return false;
        if (!has_type || type.kind != Kind::string || !has_text || text.kind != Kind::string) return true;
        if (type.escaped) return false;
        if (type.raw != "text") return true;
        return append_text(prompt.add_part(), text);
      },
      1);
}

bool chat_prompt(const Value& messages, std::vector<TokenId>& tokens, std::string& scratch) {
  if (messages.kind != Kind::array) return false;
  FakeChatPrompt prompt(scratch);
  bool any = false;
  Scanner s(messages.raw);
  const bool ok = s.elements(
      [&](const Value& msg) {
        if (msg.kind != Kind::object) return false;
        any = true;
        Value role, content;
        bool has_role = false, has_content = false;
        Scanner m(msg.raw);
        const bool fields = m.members(
            [&](const Value& key, const Value& val) {
              if (key.escaped) return false;
              if (key.raw == "role") return take(role, has_role, val);
              if (key.raw == "content") return take(content, has_content, val);
              return true;
            },
            1);
        if (!fields || !has_role || role.kind != Kind::string) return false;
        if (!append_text(prompt.begin_message(), role)) return false;
        if (has_content && content.kind != Kind::null) {
          if (content.kind == Kind::string) {
            if (!append_text(prompt.add_part(), content)) return false;
          } else if (content.kind == Kind::array) {
            if (!content_parts(content, prompt)) return false;
          } else {
            return false;
          }
        }
        prompt.end_message();
        return true;
      },
      0);
  if (!ok || !any) return false;
  fake_tokenize(prompt.finish(), tokens);
  return true;
}

bool scan(std::string_view body, bool chat, std::span<const std::string> models, GenerateRequest& out,
          std::vector<TokenId>& tokens, std::string& scratch, const PromptTokenizer* tokenizer) {
  const bool real = tokenizer && tokenizer->model;
  if (chat && real) return false;  // the chat template needs the whole document
  Value model, stream, stream_options, max_tokens, max_completion_tokens, prompt, messages;
  bool has_model = false, has_stream = false, has_stream_options = false, has_max = false, has_max_completion = false,
       has_prompt = false, has_messages = false;
  Scanner s(body);
  const bool object = s.members(
      [&](const Value& key, const Value& val) {
        if (key.escaped) return false;  // might spell one of the keys below
        if (key.raw == "model") return take(model, has_model, val);
        if (key.raw == "stream") return take(stream, has_stream, val);
        if (key.raw == "stream_options") return take(stream_options, has_stream_options, val);
        if (key.raw == "max_tokens") return take(max_tokens, has_max, val);
        if (key.raw == "max_completion_tokens") return take(max_completion_tokens, has_max_completion, val);
        if (key.raw == "prompt") return take(prompt, has_prompt, val);
        if (key.raw == "messages") return take(messages, has_messages, val);
        if (real && key.raw == "add_special_tokens") return false;  // the slow path reads it
        if (key.raw == "cache_salt") return false;                  // and keys the request by it
        return true;
      },
      0);
  if (!object || !s.at_end()) return false;

  if (!has_model || model.kind != Kind::string || model.escaped || model.raw.empty()) return false;
  if (std::find(models.begin(), models.end(), model.raw) == models.end()) return false;
  out.model.assign(model.raw);
  out.cache_salt = 0;

  out.stream = false;
  if (has_stream && stream.kind != Kind::null) {
    if (stream.kind != Kind::boolean_true && stream.kind != Kind::boolean_false) return false;
    out.stream = stream.kind == Kind::boolean_true;
  }
  // stream_options without stream: the full reader decides (vLLM refuses it when truthy).
  if (has_stream_options && stream_options.kind != Kind::null && !out.stream) return false;

  out.max_tokens = 0;
  for (const auto& [has, v] : {std::pair<bool, const Value*>{has_max_completion, &max_completion_tokens},
                               std::pair<bool, const Value*>{has_max, &max_tokens}}) {
    if (!has || v->kind == Kind::null) continue;
    std::int64_t n = 0;
    if (!small_integer(*v, n) || n < 1) return false;
    out.max_tokens = n;
    break;
  }

  const std::size_t before = tokens.size();
  if (chat) {
    if (!has_messages || !chat_prompt(messages, tokens, scratch)) return false;
  } else {
    if (!has_prompt || prompt.kind == Kind::null || !completion_prompt(prompt, tokens, scratch, tokenizer))
      return false;
  }
  return tokens.size() != before;
}

}  // namespace

bool scan_generate_request(std::string_view body, bool chat, std::span<const std::string> models, GenerateRequest& out,
                           std::vector<TokenId>& tokens, std::string& scratch, const PromptTokenizer* tokenizer) {
  const std::size_t before = tokens.size();
  if (scan(body, chat, models, out, tokens, scratch, tokenizer)) return true;
  tokens.resize(before);
  return false;
}

}  // namespace disagg::router
