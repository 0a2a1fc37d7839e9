// tokenizer_load.cc — see tokenizer.h. Loading: tokenizer.json (and tokenizer_config.json) into the
// flat tables of tokenizer_internal.h, with the pre-tokenizer regexes' compilation; the encode hot
// path and decode are in tokenizer.cc.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "tokenizer.h"
#include "tokenizer_internal.h"

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

using namespace tokenizer_detail;

namespace {

using json = nlohmann::json;

// ---- compiled regex: the pattern as the reference reads it (Regex: tokenizer_internal.h) -------

// Oniguruma's \s under Unicode is the White_Space property; PCRE2's also takes U+180E (Mongolian
// vowel separator, no longer White_Space since Unicode 6.3). Spelled out, both engines agree
// (unicode_classes.inc records the reference's \s: the same 25 code points).
constexpr const char* kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

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
    return unexpected(TokenizerError{TokenizerErrc::invalid_regex, where + ": pattern " + json(original).dump() +
                                                                       " at offset " + std::to_string(offset) + ": " +
                                                                       reinterpret_cast<char*>(buffer)});
  }
  pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);  // without JIT (e.g. no JIT on the CPU) it still matches
  return regex;
}

// ---- loading ---------------------------------------------------------------------------------

using LoadResult = Expected<bool, TokenizerError>;

TokenizerError field_error(const std::string& field, const std::string& what) {
  return TokenizerError{TokenizerErrc::invalid_field, "tokenizer.json: " + field + ": " + what};
}
TokenizerError unsupported(const std::string& field, const json& value, const std::string& supported) {
  return TokenizerError{TokenizerErrc::unsupported_component,
                        "tokenizer.json: " + field + " " + value.dump() + " is not supported (supported: " + supported +
                            "); this tokenizer cannot be encoded exactly, so it is refused"};
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
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

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
    return unexpected(
        unsupported(where, j.contains("type") ? j["type"] : j,
                    "ByteLevel, Replace with a String pattern, ByteFallback, Fuse, Strip, Metaspace, Sequence"));
  }
  out.push_back(std::move(step));
  return true;
}

// Collects the ids a post-processor puts before and after the sequence.
LoadResult load_post_processor(const json& j, const std::string& where,
                               const std::unordered_map<std::string, TokenId>& ids_by_token, Tokenizer::Impl& impl) {
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
        if (!specials.contains(name))
          return unexpected(field_error(where + ".special_tokens", "lacks " + json(name).dump()));
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

Expected<Tokenizer, TokenizerError> Tokenizer::from_json(std::string_view tokenizer_json,
                                                         std::string_view tokenizer_config_json) {
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
    return unexpected(unsupported(
        "model.continuing_subword_prefix/end_of_word_suffix",
        json::array({model.value("continuing_subword_prefix", json()), model.value("end_of_word_suffix", json())}),
        "none or empty"));
  }
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0) {
    return unexpected(unsupported("model.dropout", model["dropout"], "null (dropout is for training)"));
  }
  impl->ignore_merges = bool_field(model, "ignore_merges", false);
  impl->byte_fallback = bool_field(model, "byte_fallback", false);
  impl->fuse_unk = bool_field(model, "fuse_unk", false);
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return unexpected(field_error("model.vocab", "must be an object of token -> id"));

  // The pipeline first: whether the model sees bytes decides the vocabulary's key form.
  if (auto r = load_normalizer(root.value("normalizer", json()), "normalizer", impl->normalizers); !r)
    return unexpected(r.error());
  if (auto r = load_pre_tokenizer(root.value("pre_tokenizer", json()), "pre_tokenizer", *impl); !r)
    return unexpected(r.error());
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
    if (!a.contains("id") || !a["id"].is_number_unsigned() || a["id"].get<std::uint64_t>() > 0x7FFFFFFF ||
        !a.contains("content") || !a["content"].is_string()) {
      return unexpected(field_error(where, "needs an id and a content"));
    }
    if (bool_field(a, "single_word", false)) { return unexpected(unsupported(where + ".single_word", true, "false")); }
    const auto id = a["id"].get<TokenId>();
    max_id = std::max(max_id, id);
    const std::string content = a["content"].get<std::string>();
    ids_by_token[content] = id;
    specials.emplace_back(id, bool_field(a, "special", false));
    AddedTokenTrie::Token token{content, id, bool_field(a, "lstrip", false), bool_field(a, "rstrip", false)};
    (bool_field(a, "normalized", !bool_field(a, "special", false)) ? normalized_tokens : raw_tokens)
        .push_back(std::move(token));
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
      if (space == std::string::npos)
        return unexpected(
            field_error("model.merges[" + std::to_string(rank) + "]", "is not \"left right\": " + m.dump()));
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
      return unexpected(field_error("model.merges[" + std::to_string(rank) + "]",
                                    m.dump() + " names a token outside the vocabulary"));
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
    if (it == ids_by_token.end())
      return unexpected(field_error("model.unk_token", json(unk).dump() + " is not in the vocabulary"));
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
        return unexpected(TokenizerError{
            TokenizerErrc::invalid_field,
            std::string("tokenizer_config.json: ") + field + " " + json(token).dump() + " is not in the vocabulary"});
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
  } else if (auto r = load_post_processor(root.value("post_processor", json()), "post_processor", ids_by_token, *impl);
             !r) {
    return unexpected(r.error());
  }
  return Tokenizer(std::shared_ptr<const Impl>(std::move(impl)));
}

}  // namespace disagg::text
