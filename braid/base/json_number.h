#pragma once
// Integers read from JSON that another process or a file wrote. nlohmann's
// get<int64_t>() on a floating-point value converts with a cast whose overflow
// is undefined behaviour (1e300 read as an integer), and on an integer outside
// the target's range it silently wraps; json_integer refuses both. It throws
// nlohmann's own type_error, so a caller's existing handler for malformed JSON
// reports it with its context; json_integer_if says nothing and returns
// nullopt, for callers that report it their own way.
#include <concepts>
#include <limits>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace braid {

template <std::integral T>
std::optional<T> json_integer_if(const nlohmann::json& j) {
  if (j.is_number_unsigned()) {
    const auto v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(v);
  }
  if (!j.is_number_integer()) return std::nullopt;
  const auto v = j.get<int64_t>();
  const bool fits = std::numeric_limits<T>::is_signed
                        ? v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                              v <= static_cast<int64_t>(std::numeric_limits<T>::max())
                        : v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (!fits) return std::nullopt;
  return static_cast<T>(v);
}

template <std::integral T>
T json_integer(const nlohmann::json& j) {
  if (const std::optional<T> v = json_integer_if<T>(j)) return *v;
  throw nlohmann::json::type_error::create(
      302,
      "expected an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
          std::to_string(std::numeric_limits<T>::max()) + "], got " + j.dump(),
      &j);
}

// j[key] read with json_integer, or `fallback` when j has no such key.
template <std::integral T>
T json_integer_or(const nlohmann::json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  return it == j.end() ? fallback : json_integer<T>(*it);
}

}  // namespace braid
