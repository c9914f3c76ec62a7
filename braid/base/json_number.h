#pragma once
// Integers read from JSON that another process or a file wrote. nlohmann's
// get<int64_t>() on a floating-point value converts with a cast whose overflow
// is undefined behaviour (1e300 read as an integer), and on an integer outside
// the target's range it silently wraps; json_integer refuses both. It throws
// nlohmann's own type_error, so a caller's existing handler for malformed JSON
// reports it with its context.
#include <concepts>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace braid {

template <std::integral T>
T json_integer(const nlohmann::json& j) {
  using json = nlohmann::json;
  bool fits = false;
  if (j.is_number_unsigned()) {
    fits = j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    fits = std::numeric_limits<T>::is_signed
               ? v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                     v <= static_cast<int64_t>(std::numeric_limits<T>::max())
               : v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  if (!fits)
    throw json::type_error::create(302, "expected an integer in [" + std::to_string(std::numeric_limits<T>::min()) +
                                            ", " + std::to_string(std::numeric_limits<T>::max()) + "], got " + j.dump(),
                                   &j);
  return j.is_number_unsigned() ? static_cast<T>(j.get<uint64_t>()) : static_cast<T>(j.get<int64_t>());
}

// j[key] read with json_integer, or `fallback` when j has no such key.
template <std::integral T>
T json_integer_or(const nlohmann::json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  return it == j.end() ? fallback : json_integer<T>(*it);
}

}  // namespace braid
