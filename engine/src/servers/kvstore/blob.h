// A reference-counted, immutable byte buffer holding one stored value.
//
// Values are shared between the store and replies still queued on sockets, so a GET of a 1 MiB
// value never copies it and a concurrent overwrite cannot free bytes a reply still points at.
// The store is single-threaded, so the count is a plain integer.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

namespace disagg::kvstore {

class Blob {
 public:
  Blob() = default;
  ~Blob() { release(); }
  Blob(const Blob& other) : rep_(other.rep_) {
    if (rep_ != nullptr) ++rep_->refs;
  }
  Blob(Blob&& other) noexcept : rep_(std::exchange(other.rep_, nullptr)) {}
  Blob& operator=(Blob other) noexcept {
    std::swap(rep_, other.rep_);
    return *this;
  }

  /// Allocates `size` uninitialised bytes. Throws std::bad_alloc when memory is exhausted.
  static Blob allocate(std::size_t size) {
    void* raw = std::malloc(sizeof(Rep) + size);
    if (raw == nullptr) throw std::bad_alloc();
    Blob blob;
    blob.rep_ = new (raw) Rep{1, size};
    return blob;
  }

  /// Copies `bytes` into a new blob.
  static Blob copy_of(std::string_view bytes) {
    Blob blob = allocate(bytes.size());
    if (!bytes.empty()) std::memcpy(blob.data(), bytes.data(), bytes.size());
    return blob;
  }

  [[nodiscard]] bool empty_handle() const { return rep_ == nullptr; }
  [[nodiscard]] std::size_t size() const { return rep_ == nullptr ? 0 : rep_->size; }
  [[nodiscard]] char* data() { return rep_ == nullptr ? nullptr : reinterpret_cast<char*>(rep_ + 1); }
  [[nodiscard]] const char* data() const { return rep_ == nullptr ? nullptr : reinterpret_cast<const char*>(rep_ + 1); }
  [[nodiscard]] std::string_view view() const { return {data(), size()}; }

 private:
  struct Rep {
    std::size_t refs;
    std::size_t size;
  };
  void release() {
    if (rep_ != nullptr && --rep_->refs == 0) std::free(rep_);
    rep_ = nullptr;
  }
  Rep* rep_ = nullptr;
};

}  // namespace disagg::kvstore
