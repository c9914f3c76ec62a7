// A well-mixed 64-bit hash of a 64-bit integer (the splitmix64 finalizer):
// for sharding keys across servers and for feature hashing, where
// neighbouring inputs must land far apart.
#pragma once

#include <cstdint>
#include <string_view>

namespace braid {

constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a of a byte string: a stable hash of names and words (host names,
// hashed text features), the same on every machine and run.
constexpr uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

}  // namespace braid
