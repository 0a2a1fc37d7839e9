// disagg/expected.h — a minimal `expected`-style result type.
//
// g++ 12 ships no std::expected, and the engine keeps exceptions off its hot paths and out of the
// addon boundary, so fallible calls return Expected<T, E>: either a value or an error code.
//
// Contract:
//   - has_value() tells which alternative is held; value() and error() require the matching one
//     (checked by assert in debug builds, undefined in release builds, like std::expected).
//   - Expected<void, E> carries only success or an error.
//   - Construct errors with disagg::unexpected(e) so a T and an E of the same type never clash.
#pragma once

#include <cassert>
#include <type_traits>
#include <utility>
#include <variant>

namespace disagg {

/// Wraps an error value so that it converts into any Expected<T, E>.
template <class E>
struct Unexpected {
  E error;
};

/// Makes an Unexpected<E> (the error side of an Expected).
template <class E>
constexpr Unexpected<std::decay_t<E>> unexpected(E&& e) {
  return Unexpected<std::decay_t<E>>{std::forward<E>(e)};
}

/// Either a value of type T or an error of type E.
template <class T, class E>
class [[nodiscard]] Expected {
 public:
  /// Holds a value.
  constexpr Expected(T value) : storage_(std::in_place_index<0>, std::move(value)) {}
  /// Holds an error.
  template <class G>
  constexpr Expected(Unexpected<G> u) : storage_(std::in_place_index<1>, E(std::move(u.error))) {}

  constexpr bool has_value() const noexcept { return storage_.index() == 0; }
  constexpr explicit operator bool() const noexcept { return has_value(); }

  /// Precondition: has_value().
  constexpr T& value() & {
    assert(has_value());
    return *std::get_if<0>(&storage_);
  }
  /// Precondition: has_value().
  constexpr const T& value() const& {
    assert(has_value());
    return *std::get_if<0>(&storage_);
  }
  /// Precondition: has_value().
  constexpr T&& value() && {
    assert(has_value());
    return std::move(*std::get_if<0>(&storage_));
  }
  constexpr T* operator->() { return &value(); }
  constexpr const T* operator->() const { return &value(); }
  constexpr T& operator*() & { return value(); }
  constexpr const T& operator*() const& { return value(); }

  /// Precondition: !has_value().
  constexpr const E& error() const {
    assert(!has_value());
    return *std::get_if<1>(&storage_);
  }

  /// The value, or `fallback` when an error is held.
  constexpr T value_or(T fallback) const& { return has_value() ? value() : fallback; }

 private:
  std::variant<T, E> storage_;
};

/// Success without a value, or an error of type E.
template <class E>
class [[nodiscard]] Expected<void, E> {
 public:
  /// Success.
  constexpr Expected() = default;
  /// Holds an error.
  template <class G>
  constexpr Expected(Unexpected<G> u) : error_(E(std::move(u.error))), ok_(false) {}

  constexpr bool has_value() const noexcept { return ok_; }
  constexpr explicit operator bool() const noexcept { return ok_; }

  /// Precondition: !has_value().
  constexpr const E& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  E error_{};
  bool ok_ = true;
};

}  // namespace disagg
