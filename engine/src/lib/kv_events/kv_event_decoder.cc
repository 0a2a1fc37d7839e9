#include "kv_event_decoder.h"

#include <cctype>
#include <cstring>
#include <string>

#include "disagg/fnv1a.h"

namespace disagg::router {

std::string_view to_string(KvEventType type) {
  switch (type) {
    case KvEventType::block_stored: return "block_stored";
    case KvEventType::block_removed: return "block_removed";
    case KvEventType::all_blocks_cleared: return "all_blocks_cleared";
  }
  return "unknown";
}

std::string_view to_string(KvDecodeErrc code) {
  switch (code) {
    case KvDecodeErrc::truncated: return "truncated";
    case KvDecodeErrc::malformed: return "malformed";
    case KvDecodeErrc::not_a_batch: return "not_a_batch";
    case KvDecodeErrc::too_large: return "too_large";
    case KvDecodeErrc::trailing_bytes: return "trailing_bytes";
  }
  return "unknown";
}

namespace {

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// What a msgpack value is, as far as the decoder cares.
enum class Kind : std::uint8_t { nil, boolean, uint, sint, f64, str, bin, array, map, ext };

// A bounds-checked msgpack reader over a byte span. Every method returns false on truncated or
// malformed input and records the error; nothing throws, nothing allocates.
class Reader {
 public:
  Reader(std::span<const std::uint8_t> bytes, const KvDecodeLimits& limits)
      : p_(bytes.data()), n_(bytes.size()), limits_(limits) {}

  std::size_t offset() const { return pos_; }
  bool at_end() const { return pos_ == n_; }
  KvDecodeErrc error() const { return error_; }

  bool fail(KvDecodeErrc code) {
    error_ = code;
    return false;
  }

  // Reads a value's header: its kind, and for str/bin its bytes, for array/map its length, for
  // numbers its value. Containers' elements follow.
  struct Head {
    Kind kind = Kind::nil;
    std::uint64_t u = 0;  // uint value, or container length
    std::int64_t i = 0;   // sint value
    double f = 0;
    std::string_view bytes;  // str / bin / ext payload
  };

  bool head(Head& h) {
    std::uint8_t b = 0;
    if (!byte(b)) return false;
    if (b <= 0x7f) return set_uint(h, b);
    if (b >= 0xe0) return set_sint(h, static_cast<std::int8_t>(b));
    if (b >= 0x80 && b <= 0x8f) return set_container(h, Kind::map, b & 0x0f);
    if (b >= 0x90 && b <= 0x9f) return set_container(h, Kind::array, b & 0x0f);
    if (b >= 0xa0 && b <= 0xbf) return take_bytes(h, Kind::str, b & 0x1f);
    std::uint64_t v = 0;
    switch (b) {
      case 0xc0: h.kind = Kind::nil; return true;
      case 0xc2:
      case 0xc3:
        h.kind = Kind::boolean;
        h.u = b & 1;
        return true;
      case 0xc4: return be(1, v) && take_bytes(h, Kind::bin, v);
      case 0xc5: return be(2, v) && take_bytes(h, Kind::bin, v);
      case 0xc6: return be(4, v) && take_bytes(h, Kind::bin, v);
      case 0xc7: return be(1, v) && skip_raw(1) && take_bytes(h, Kind::ext, v);
      case 0xc8: return be(2, v) && skip_raw(1) && take_bytes(h, Kind::ext, v);
      case 0xc9: return be(4, v) && skip_raw(1) && take_bytes(h, Kind::ext, v);
      case 0xca: {
        if (!be(4, v)) return false;
        float f;
        const auto bits = static_cast<std::uint32_t>(v);
        std::memcpy(&f, &bits, 4);
        h.kind = Kind::f64;
        h.f = f;
        return true;
      }
      case 0xcb: {
        if (!be(8, v)) return false;
        std::memcpy(&h.f, &v, 8);
        h.kind = Kind::f64;
        return true;
      }
      case 0xcc: return be(1, v) && set_uint(h, v);
      case 0xcd: return be(2, v) && set_uint(h, v);
      case 0xce: return be(4, v) && set_uint(h, v);
      case 0xcf: return be(8, v) && set_uint(h, v);
      case 0xd0: return be(1, v) && set_sint(h, static_cast<std::int8_t>(v));
      case 0xd1: return be(2, v) && set_sint(h, static_cast<std::int16_t>(v));
      case 0xd2: return be(4, v) && set_sint(h, static_cast<std::int32_t>(v));
      case 0xd3: return be(8, v) && set_sint(h, static_cast<std::int64_t>(v));
      case 0xd4: return skip_raw(1) && take_bytes(h, Kind::ext, 1);
      case 0xd5: return skip_raw(1) && take_bytes(h, Kind::ext, 2);
      case 0xd6: return skip_raw(1) && take_bytes(h, Kind::ext, 4);
      case 0xd7: return skip_raw(1) && take_bytes(h, Kind::ext, 8);
      case 0xd8: return skip_raw(1) && take_bytes(h, Kind::ext, 16);
      case 0xd9: return be(1, v) && take_bytes(h, Kind::str, v);
      case 0xda: return be(2, v) && take_bytes(h, Kind::str, v);
      case 0xdb: return be(4, v) && take_bytes(h, Kind::str, v);
      case 0xdc: return be(2, v) && set_container(h, Kind::array, v);
      case 0xdd: return be(4, v) && set_container(h, Kind::array, v);
      case 0xde: return be(2, v) && set_container(h, Kind::map, v);
      case 0xdf: return be(4, v) && set_container(h, Kind::map, v);
      default: return fail(KvDecodeErrc::malformed);  // 0xc1 is never used
    }
  }

  // Skips one whole value (with its elements), at most limits.max_depth deep.
  bool skip(int depth = 0) {
    if (depth > limits_.max_depth) return fail(KvDecodeErrc::too_large);
    Head h;
    if (!head(h)) return false;
    return skip_rest(h, depth);
  }
  // Skips the elements of a value whose head `h` was read.
  bool skip_rest(const Head& h, int depth = 0) {
    if (h.kind == Kind::array) {
      for (std::uint64_t k = 0; k < h.u; ++k) {
        if (!skip(depth + 1)) return false;
      }
    } else if (h.kind == Kind::map) {
      for (std::uint64_t k = 0; k < 2 * h.u; ++k) {
        if (!skip(depth + 1)) return false;
      }
    }
    return true;
  }

 private:
  bool byte(std::uint8_t& b) {
    if (pos_ >= n_) return fail(KvDecodeErrc::truncated);
    b = p_[pos_++];
    return true;
  }
  bool be(int width, std::uint64_t& v) {
    if (n_ - pos_ < static_cast<std::size_t>(width)) return fail(KvDecodeErrc::truncated);
    v = 0;
    for (int k = 0; k < width; ++k) v = (v << 8) | p_[pos_++];
    return true;
  }
  bool skip_raw(std::size_t count) {
    if (n_ - pos_ < count) return fail(KvDecodeErrc::truncated);
    pos_ += count;
    return true;
  }
  bool take_bytes(Head& h, Kind kind, std::uint64_t len) {
    if (n_ - pos_ < len) return fail(KvDecodeErrc::truncated);
    h.kind = kind;
    h.bytes = std::string_view(reinterpret_cast<const char*>(p_ + pos_), static_cast<std::size_t>(len));
    pos_ += static_cast<std::size_t>(len);
    return true;
  }
  bool set_container(Head& h, Kind kind, std::uint64_t len) {
    // Every element takes at least one byte: a length beyond the bytes left is a lie.
    if (len > n_ - pos_) return fail(KvDecodeErrc::truncated);
    h.kind = kind;
    h.u = len;
    return true;
  }
  static bool set_uint(Head& h, std::uint64_t v) {
    h.kind = Kind::uint;
    h.u = v;
    return true;
  }
  static bool set_sint(Head& h, std::int64_t v) {
    h.kind = v >= 0 ? Kind::uint : Kind::sint;
    h.u = static_cast<std::uint64_t>(v);
    h.i = v;
    return true;
  }

  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
  const KvDecodeLimits& limits_;
  KvDecodeErrc error_ = KvDecodeErrc::malformed;
};

using Head = Reader::Head;

BlockHash fold_bytes(std::string_view b) {
  if (b.size() == 8) {
    BlockHash v = 0;
    for (char c : b) v = (v << 8) | static_cast<std::uint8_t>(c);
    return v;
  }
  return fnv1a64(b);
}

// A hash value from an already-read head.
bool hash_of(const Head& h, BlockHash& out) {
  switch (h.kind) {
    case Kind::uint:
    case Kind::sint: out = h.u; return true;
    case Kind::bin:
    case Kind::str: out = fold_bytes(h.bytes); return true;
    default: return false;
  }
}

// A map-like event's keys are read before its tag may be known, as BlockStored fields.
static_assert(
    [] {
      for (kv_wire::RemovedField f : kv_wire::kRemovedFieldsAll) {
        if (!kv_wire::field_named(kv_wire::kStoredFieldsAll, kv_wire::field_name(f))) return false;
      }
      return true;
    }(),
    "every BlockRemoved field must also be a BlockStored field");

class Decoder {
 public:
  Decoder(std::span<const std::uint8_t> bytes, KvEventBatch& out, const KvDecodeLimits& limits)
      : r_(bytes, limits), out_(out), limits_(limits) {}

  Expected<void, KvDecodeError> run() {
    if (!batch()) return unexpected(KvDecodeError{r_.error(), r_.offset()});
    if (!r_.at_end()) return unexpected(KvDecodeError{KvDecodeErrc::trailing_bytes, r_.offset()});
    return {};
  }

 private:
  bool fail(KvDecodeErrc code) { return r_.fail(code); }

  bool batch_field(kv_wire::BatchField f) {
    switch (f) {
      case kv_wire::BatchField::ts: return ts();
      case kv_wire::BatchField::events: return events();
      case kv_wire::BatchField::data_parallel_rank: return rank();
    }
    return r_.skip();
  }

  bool batch() {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::array) {
      // Array-like: the declared fields in order; data_parallel_rank may be absent.
      if (h.u < kv_wire::kBatchMinFields || h.u > kv_wire::kBatchFields.size()) {
        return fail(KvDecodeErrc::not_a_batch);
      }
      for (std::uint64_t pos = 0; pos < h.u; ++pos) {
        if (!batch_field(*kv_wire::field_at(kv_wire::kBatchFields, pos))) return false;
      }
      return true;
    }
    if (h.kind != Kind::map) return fail(KvDecodeErrc::not_a_batch);
    bool saw_events = false;
    for (std::uint64_t k = 0; k < h.u; ++k) {
      Head key;
      if (!r_.head(key)) return false;
      if (key.kind != Kind::str) return fail(KvDecodeErrc::malformed);
      const auto f = kv_wire::field_named(kv_wire::kBatchFields, key.bytes);
      if (!(f ? batch_field(*f) : r_.skip())) return false;
      saw_events = saw_events || f == kv_wire::BatchField::events;
    }
    return saw_events ? true : fail(KvDecodeErrc::not_a_batch);
  }

  bool ts() {
    Head h;
    if (!r_.head(h)) return false;
    switch (h.kind) {
      case Kind::f64: out_.ts = h.f; return true;
      case Kind::uint: out_.ts = static_cast<double>(h.u); return true;
      case Kind::sint: out_.ts = static_cast<double>(h.i); return true;
      default: return fail(KvDecodeErrc::malformed);
    }
  }

  bool rank() {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::nil) return true;
    if (h.kind != Kind::uint || h.u > 0x7fffffff) return fail(KvDecodeErrc::malformed);
    out_.data_parallel_rank = static_cast<std::int32_t>(h.u);
    return true;
  }

  bool events() {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind != Kind::array) return fail(KvDecodeErrc::malformed);
    if (h.u > limits_.max_events) return fail(KvDecodeErrc::too_large);
    for (std::uint64_t k = 0; k < h.u; ++k) {
      if (!event()) return false;
    }
    return true;
  }

  static bool type_of(std::string_view tag, KvEventType& type) {
    const auto t = kv_wire::tag_from_name(tag);
    if (t) type = *t;
    return t.has_value();
  }

  bool hashes(KvEventRecord& e) {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::nil) return true;
    if (h.kind != Kind::array) return fail(KvDecodeErrc::malformed);
    if (out_.hashes.size() + h.u > limits_.max_hashes) return fail(KvDecodeErrc::too_large);
    e.first_hash = static_cast<std::uint32_t>(out_.hashes.size());
    for (std::uint64_t k = 0; k < h.u; ++k) {
      Head v;
      BlockHash hash = 0;
      if (!r_.head(v)) return false;
      if (!hash_of(v, hash)) return fail(KvDecodeErrc::malformed);
      out_.hashes.push_back(hash);
    }
    e.hash_count = static_cast<std::uint32_t>(h.u);
    return true;
  }

  bool parent(KvEventRecord& e) {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::nil) return true;
    if (!hash_of(h, e.parent)) return fail(KvDecodeErrc::malformed);
    e.has_parent = true;
    return true;
  }

  bool block_size(KvEventRecord& e) {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::nil) return true;
    if (h.kind != Kind::uint || h.u > 0x7fffffff) return fail(KvDecodeErrc::malformed);
    e.block_size = static_cast<std::int32_t>(h.u);
    return true;
  }

  // An optional string field (the medium, the locality): nil leaves `out` as it is.
  bool optional_str(std::string_view& out) {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::nil) return true;
    if (h.kind != Kind::str) return fail(KvDecodeErrc::malformed);
    out = h.bytes;
    return true;
  }
  bool medium() { return optional_str(medium_); }
  bool locality() { return optional_str(locality_); }

  bool tokens(KvEventRecord& e) {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::nil) return true;
    if (h.kind != Kind::array) return fail(KvDecodeErrc::malformed);
    if (out_.tokens.size() + h.u > limits_.max_tokens) return fail(KvDecodeErrc::too_large);
    e.first_token = static_cast<std::uint32_t>(out_.tokens.size());
    for (std::uint64_t k = 0; k < h.u; ++k) {
      Head v;
      if (!r_.head(v)) return false;
      if (v.kind != Kind::uint || v.u > 0x7fffffff) return fail(KvDecodeErrc::malformed);
      out_.tokens.push_back(static_cast<TokenId>(v.u));
    }
    e.token_count = static_cast<std::uint32_t>(h.u);
    return true;
  }

  bool group(KvEventRecord& e) {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::nil) return true;
    if (h.kind != Kind::uint || h.u > 0x7fffffff) return fail(KvDecodeErrc::malformed);
    e.group = static_cast<std::int32_t>(h.u);
    return true;
  }

  bool kind(KvEventRecord& e) {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::nil) return true;
    if (h.kind != Kind::str) return fail(KvDecodeErrc::malformed);
    e.kind = cache_kind_from_name(h.bytes);
    return true;
  }

  // lora_id: whether it is set (a LoRA the router can key only by its name).
  bool lora_id() {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind != Kind::nil) extras_.lora_id = true;
    return r_.skip_rest(h);
  }
  // lora_name: its digest.
  bool lora_name(KvEventRecord& e) {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::nil) return true;
    if (h.kind != Kind::str) {
      e.keyed_beyond_tokens = true;
      return r_.skip_rest(h);
    }
    e.lora = extra_key_digest(h.bytes);
    return true;
  }
  // extra_keys: one entry per block, nil or a tuple (kv_event_wire.h). Its strings are kept as
  // digests (the LoRA name and the first block's cache_salt, sorted out in finish_extras()); any
  // other element (a multimodal pair, prompt-embedding bytes) is beyond what a request names.
  bool extra_keys(KvEventRecord& e) {
    Head h;
    if (!r_.head(h)) return false;
    if (h.kind == Kind::nil) return true;
    if (h.kind != Kind::array) {
      e.keyed_beyond_tokens = true;
      return r_.skip_rest(h);
    }
    for (std::uint64_t j = 0; j < h.u; ++j) {
      Head v;
      if (!r_.head(v)) return false;
      if (v.kind == Kind::nil) continue;
      if (v.kind != Kind::array) {
        e.keyed_beyond_tokens = true;
        if (!r_.skip_rest(v)) return false;
        continue;
      }
      std::uint32_t strings = 0;
      for (std::uint64_t k = 0; k < v.u; ++k) {
        Head x;
        if (!r_.head(x)) return false;
        if (x.kind != Kind::str) {
          e.keyed_beyond_tokens = true;
          if (!r_.skip_rest(x)) return false;
          continue;
        }
        const std::uint64_t d = extra_key_digest(x.bytes);
        if (j == 0) {
          if (strings < 2) extras_.first[strings] = d;
        } else if (strings == 0 && (extras_.rest == 0 || extras_.rest == d)) {
          extras_.rest = d;
        } else {
          extras_.rest_mismatch = true;  // later blocks carry only the LoRA name
        }
        ++strings;
      }
      if (j == 0) extras_.first_count = strings;
    }
    return true;
  }

  // After a BlockStored's fields (map-like events may list them in any order): the LoRA name
  // starts every block's extra keys, the cache_salt follows it in a sequence's first block only;
  // anything else the strings say is not reproducible from a request.
  void finish_extras(KvEventRecord& e) {
    if (extras_.lora_id && e.lora == 0) e.keyed_beyond_tokens = true;  // a LoRA known by id only
    if (extras_.rest_mismatch || (extras_.rest != 0 && extras_.rest != e.lora)) e.keyed_beyond_tokens = true;
    std::uint32_t k = 0;
    if (e.lora != 0 && extras_.first_count > 0) {
      if (extras_.first[0] != e.lora) e.keyed_beyond_tokens = true;
      k = 1;
    }
    const std::uint32_t left = extras_.first_count > k ? extras_.first_count - k : 0;
    if (left == 1 && !e.has_parent && k < 2) {
      e.cache_salt = extras_.first[k];
    } else if (left > 0) {
      e.keyed_beyond_tokens = true;
    }
  }

  // The tier of the medium and, for the storage tiers, the locality (vLLM PR #48281): "LOCAL" ->
  // disk, "REMOTE" or unspecified -> remote (vLLM never infers it; the lower credit is the safe side).
  void finish_tier(KvEventRecord& e) { e.tier = tier_from_medium(medium_, locality_); }

  // One field's value; the fields the router does not use are skipped.
  bool stored_field(kv_wire::StoredField f, KvEventRecord& e) {
    switch (f) {
      case kv_wire::StoredField::block_hashes: return hashes(e);
      case kv_wire::StoredField::parent_block_hash: return parent(e);
      case kv_wire::StoredField::block_size: return block_size(e);
      case kv_wire::StoredField::medium: return medium();
      case kv_wire::StoredField::token_ids: return tokens(e);
      case kv_wire::StoredField::lora_id: return lora_id();
      case kv_wire::StoredField::lora_name: return lora_name(e);
      case kv_wire::StoredField::extra_keys: return extra_keys(e);
      case kv_wire::StoredField::group_idx: return group(e);
      case kv_wire::StoredField::kv_cache_spec_kind: return kind(e);
      case kv_wire::StoredField::kv_cache_spec_sliding_window: return r_.skip(1);
      case kv_wire::StoredField::locality: return locality();
    }
    return r_.skip(1);
  }
  bool removed_field(kv_wire::RemovedField f, KvEventRecord& e) {
    switch (f) {
      case kv_wire::RemovedField::block_hashes: return hashes(e);
      case kv_wire::RemovedField::medium: return medium();
      case kv_wire::RemovedField::group_idx: return group(e);
      case kv_wire::RemovedField::locality: return locality();
    }
    return r_.skip(1);
  }

  bool event() {
    Head h;
    if (!r_.head(h)) return false;
    KvEventRecord e;
    medium_ = locality_ = {};
    extras_ = {};
    const std::size_t hashes_start = out_.hashes.size();
    const std::size_t tokens_start = out_.tokens.size();
    if (h.kind == Kind::array) {
      if (h.u == 0) return fail(KvDecodeErrc::malformed);
      Head tag;
      if (!r_.head(tag)) return false;
      if (tag.kind != Kind::str) return fail(KvDecodeErrc::malformed);
      std::uint64_t left = h.u - 1;
      if (!type_of(tag.bytes, e.type)) {
        ++out_.skipped_events;
        for (; left > 0; --left) {
          if (!r_.skip(1)) return false;
        }
        return true;
      }
      // Positions after the tag, per type, in the wire module's field order; fields beyond the
      // declared ones (a newer publisher's) are skipped.
      std::uint64_t pos = 0;
      for (; left > 0; --left, ++pos) {
        bool ok = true;
        if (e.type == KvEventType::block_stored) {
          const auto f = kv_wire::field_at(kv_wire::kStoredFieldsAll, pos);
          ok = f ? stored_field(*f, e) : r_.skip(1);
        } else if (e.type == KvEventType::block_removed) {
          const auto f = kv_wire::field_at(kv_wire::kRemovedFieldsAll, pos);
          ok = f ? removed_field(*f, e) : r_.skip(1);
        } else {
          ok = pos == 0 ? medium() : r_.skip(1);  // newer versions may tag a medium
        }
        if (!ok) return false;
      }
    } else if (h.kind == Kind::map) {
      // The tag may come after other fields: remember where the hashes were written.
      bool typed = false;
      for (std::uint64_t k = 0; k < h.u; ++k) {
        Head key;
        if (!r_.head(key)) return false;
        if (key.kind != Kind::str) return fail(KvDecodeErrc::malformed);
        bool ok = true;
        if (key.bytes == kv_wire::kTypeKey) {
          Head tag;
          if (!r_.head(tag)) return false;
          if (tag.kind != Kind::str) return fail(KvDecodeErrc::malformed);
          typed = type_of(tag.bytes, e.type);
          if (!typed) {
            // Skip the rest of an unknown event.
            for (++k; k < h.u; ++k) {
              if (!r_.skip(1) || !r_.skip(1)) return false;
            }
            out_.hashes.resize(hashes_start);
            out_.tokens.resize(tokens_start);
            ++out_.skipped_events;
            return true;
          }
        } else if (const auto f = kv_wire::field_named(kv_wire::kStoredFieldsAll, key.bytes)) {
          // The tag may not be known yet: BlockStored's fields include every BlockRemoved field.
          ok = stored_field(*f, e);
        } else {
          ok = r_.skip(1);
        }
        if (!ok) return false;
      }
      if (!typed) return fail(KvDecodeErrc::malformed);
    } else {
      return fail(KvDecodeErrc::malformed);
    }
    if (e.type == KvEventType::all_blocks_cleared) e.hash_count = 0;
    if (e.type == KvEventType::block_stored) {
      finish_extras(e);
    } else {
      e.lora = e.cache_salt = 0;  // a map-like removal read through BlockStored's field table
      e.keyed_beyond_tokens = false;
    }
    finish_tier(e);
    out_.events.push_back(e);
    return true;
  }

  // The current event's medium, locality and extra-key digests (see finish_extras()).
  struct Extras {
    bool lora_id = false;
    std::uint64_t first[2] = {0, 0};  // the first block's strings, in order
    std::uint32_t first_count = 0;
    std::uint64_t rest = 0;  // the one string later blocks carry
    bool rest_mismatch = false;
  };
  std::string_view medium_, locality_;
  Extras extras_;
  Reader r_;
  KvEventBatch& out_;
  const KvDecodeLimits& limits_;
};

}  // namespace

Expected<void, KvDecodeError> decode_kv_event_batch(std::span<const std::uint8_t> bytes, KvEventBatch& out,
                                                    const KvDecodeLimits& limits) {
  out.clear();
  Decoder d(bytes, out, limits);
  return d.run();
}

KvCacheKind cache_kind_from_name(std::string_view name) {
  // vLLM names the spec class (FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec,
  // ChunkedLocalAttentionSpec, MambaSpec, ...) or a short form of it; full attention (MLA
  // included) is what a prefix match needs.
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("sliding") != std::string::npos || lower.find("chunk") != std::string::npos ||
      lower.find("mamba") != std::string::npos || lower.find("cross") != std::string::npos ||
      lower.find("encoder") != std::string::npos) {
    return KvCacheKind::other;
  }
  if (lower.find("full") != std::string::npos || lower.find("mla") != std::string::npos || lower == "attention" ||
      lower == "attentionspec") {
    return KvCacheKind::full_attention;
  }
  return KvCacheKind::other;
}

KvTier tier_from_medium(std::string_view medium, std::string_view locality) {
  if (medium.empty() || iequals(medium, "GPU") || iequals(medium, "cuda") || iequals(medium, "hbm")) {
    return KvTier::gpu;
  }
  if (iequals(medium, "CPU") || iequals(medium, "host")) return KvTier::cpu;
  if (iequals(medium, "DISK") || iequals(medium, "SSD") || iequals(medium, "NVME") || iequals(medium, "LOCAL_DISK")) {
    return KvTier::disk;
  }
  // vLLM's storage tiers (STORAGE since PR #48123; FS and OBJ before it, PR #47923) say where
  // they are in `locality` (PR #48281).
  if ((iequals(medium, "STORAGE") || iequals(medium, "FS") || iequals(medium, "OBJ")) && iequals(locality, "LOCAL")) {
    return KvTier::disk;
  }
  return KvTier::remote;
}

}  // namespace disagg::router
