#include "key_index.h"

#include <cstring>

#include "disagg/fnv1a.h"

namespace disagg::kvstore {
namespace {
constexpr std::size_t kMinBuckets = 16;
}

std::uint64_t hash_key(std::string_view key) {
  // FNV-1a over 8-byte words, then a murmur-style finaliser: fast on short keys, well mixed low bits.
  std::uint64_t h = kFnv1aOffset ^ key.size();
  const char* p = key.data();
  std::size_t n = key.size();
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kFnv1aPrime;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  while (n-- > 0) h = fnv1a_step(h, static_cast<unsigned char>(*p++));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

KeyIndex::KeyIndex() : buckets_(kMinBuckets, nullptr) {}

KeyIndex::~KeyIndex() {
  clear();
}

std::uint64_t KeyIndex::reverse_bits(std::uint64_t v) {
  v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
  v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
  v = ((v >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((v & 0x0F0F0F0F0F0F0F0FULL) << 4);
  return __builtin_bswap64(v);
}

Entry* KeyIndex::find(std::string_view key) const {
  const std::uint64_t h = hash_key(key);
  for (Entry* e = buckets_[h & (buckets_.size() - 1)]; e != nullptr; e = e->hash_next) {
    if (e->hash == h && e->key == key) return e;
  }
  return nullptr;
}

Entry* KeyIndex::insert(std::string_view key) {
  auto* e = new Entry();
  e->key.assign(key.data(), key.size());
  e->hash = hash_key(key);
  if (size_ + 1 > buckets_.size()) rehash(buckets_.size() * 2);
  Entry*& head = buckets_[e->hash & (buckets_.size() - 1)];
  e->hash_next = head;
  head = e;
  ++size_;
  return e;
}

void KeyIndex::erase(Entry* entry) {
  Entry** link = &buckets_[entry->hash & (buckets_.size() - 1)];
  while (*link != entry) link = &(*link)->hash_next;
  *link = entry->hash_next;
  delete entry;
  --size_;
  if (buckets_.size() > kMinBuckets && size_ < buckets_.size() / 8) rehash(buckets_.size() / 2);
}

void KeyIndex::clear() {
  for (Entry*& head : buckets_) {
    while (head != nullptr) {
      Entry* next = head->hash_next;
      delete head;
      head = next;
    }
  }
  size_ = 0;
  buckets_.assign(kMinBuckets, nullptr);
}

void KeyIndex::rehash(std::size_t new_bucket_count) {
  std::vector<Entry*> fresh(new_bucket_count, nullptr);
  for (Entry* head : buckets_) {
    while (head != nullptr) {
      Entry* next = head->hash_next;
      Entry*& slot = fresh[head->hash & (new_bucket_count - 1)];
      head->hash_next = slot;
      slot = head;
      head = next;
    }
  }
  buckets_.swap(fresh);
}

}  // namespace disagg::kvstore
