// Codec messages: little helpers to append and read plain values and
// fixed-width bit fields (host byte order, like the rest of braid's wire).
// A reader that runs past the message throws ValueError: a message from a
// peer is checked, never trusted to be the size its header claims.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "braid/base/error.h"

namespace braid::comm::codec {

// How many chunks of `chunk` values cover n values. Written without n + chunk - 1,
// which wraps for a chunk length near 2^64 read from a hostile message.
inline size_t chunk_count(size_t n, size_t chunk) { return n / chunk + (n % chunk != 0); }

class Writer {
 public:
  explicit Writer(std::vector<std::byte>& out) : out_(out) {}
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(grow(sizeof(T)), &v, sizeof(T));
  }
  template <class T>
  void put_all(std::span<const T> v) {
    if (!v.empty()) std::memcpy(grow(v.size_bytes()), v.data(), v.size_bytes());
  }
  std::byte* grow(size_t bytes) {
    const size_t at = out_.size();
    out_.resize(at + bytes);
    return out_.data() + at;
  }

 private:
  std::vector<std::byte>& out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> in, const char* codec) : in_(in), codec_(codec) {}
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  const std::byte* take(size_t bytes) {
    if (bytes > in_.size() - at_) fail<ValueError>("{} message: {} bytes wanted at {}, {} in all", codec_, bytes, at_, in_.size());
    const std::byte* p = in_.data() + at_;
    at_ += bytes;
    return p;
  }
  void expect_end() const {
    if (at_ != in_.size()) fail<ValueError>("{} message: {} bytes left over", codec_, in_.size() - at_);
  }

 private:
  std::span<const std::byte> in_;
  size_t at_ = 0;
  const char* codec_;
};

// Bytes that hold n fields of `width` bits.
inline size_t packed_bytes(size_t n, int width) { return (n * static_cast<size_t>(width) + 7) / 8; }

// The layout: code i (< 2^width, width <= 25) sits at bit offset i * width,
// LSB first. Eight codes of width w fill exactly w bytes, so for w <= 8 the
// loops below pack and unpack groups of eight through one 64-bit word (the
// width a template argument, so the shifts are constants); wider codes and
// the last partial group go one code at a time.
namespace detail {

template <int W>
void pack_groups(const uint32_t* codes, size_t groups, uint8_t* o) {
  for (size_t g = 0; g < groups; ++g, codes += 8, o += W) {
    uint64_t v = 0;
    for (int j = 0; j < 8; ++j) v |= static_cast<uint64_t>(codes[j]) << (j * W);
    for (int b = 0; b < W; ++b) o[b] = static_cast<uint8_t>(v >> (8 * b));
  }
}

template <int W>
void unpack_groups(const uint8_t* in, size_t groups, uint32_t* codes) {
  constexpr uint64_t mask = (uint64_t{1} << W) - 1;
  for (size_t g = 0; g < groups; ++g, codes += 8, in += W) {
    uint64_t v = 0;
    for (int b = 0; b < W; ++b) v |= static_cast<uint64_t>(in[b]) << (8 * b);
    for (int j = 0; j < 8; ++j) codes[j] = static_cast<uint32_t>((v >> (j * W)) & mask);
  }
}

// Calls f(std::integral_constant<int, width>) and returns true for widths
// 1..8; false otherwise.
template <class F>
bool with_small_width(int width, F&& f) {
  switch (width) {
    case 1: f(std::integral_constant<int, 1>{}); return true;
    case 2: f(std::integral_constant<int, 2>{}); return true;
    case 3: f(std::integral_constant<int, 3>{}); return true;
    case 4: f(std::integral_constant<int, 4>{}); return true;
    case 5: f(std::integral_constant<int, 5>{}); return true;
    case 6: f(std::integral_constant<int, 6>{}); return true;
    case 7: f(std::integral_constant<int, 7>{}); return true;
    case 8: f(std::integral_constant<int, 8>{}); return true;
    default: return false;
  }
}

}  // namespace detail

// Packs codes into `out` (packed_bytes(codes.size(), width) bytes).
inline void pack_bits(std::span<const uint32_t> codes, int width, std::byte* out) {
  const size_t bytes = packed_bytes(codes.size(), width);
  std::memset(out, 0, bytes);
  auto* o = reinterpret_cast<uint8_t*>(out);
  const bool grouped = detail::with_small_width(
      width, [&](auto w) { detail::pack_groups<decltype(w)::value>(codes.data(), codes.size() / 8, o); });
  const size_t done = grouped ? codes.size() / 8 * 8 : 0;
  for (size_t i = done; i < codes.size(); ++i) {
    const size_t bit = i * static_cast<size_t>(width);
    uint64_t v = static_cast<uint64_t>(codes[i]) << (bit % 8);
    for (size_t b = bit / 8; v != 0; ++b, v >>= 8) o[b] |= static_cast<uint8_t>(v);
  }
}

// Code i of a packed message.
inline uint32_t unpack_bits(const std::byte* in, size_t i, int width) {
  const auto* p = reinterpret_cast<const uint8_t*>(in);
  const size_t bit = i * static_cast<size_t>(width);
  uint64_t v = 0;
  const size_t last = (bit + static_cast<size_t>(width) - 1) / 8;
  for (size_t b = last + 1; b-- > bit / 8;) v = (v << 8) | p[b];
  return static_cast<uint32_t>((v >> (bit % 8)) & ((uint64_t{1} << width) - 1));
}

// All codes of a packed message: codes.size() of them.
inline void unpack_bits(const std::byte* in, int width, std::span<uint32_t> codes) {
  const bool grouped = detail::with_small_width(width, [&](auto w) {
    detail::unpack_groups<decltype(w)::value>(reinterpret_cast<const uint8_t*>(in), codes.size() / 8, codes.data());
  });
  const size_t done = grouped ? codes.size() / 8 * 8 : 0;
  for (size_t i = done; i < codes.size(); ++i) codes[i] = unpack_bits(in, i, width);
}

}  // namespace braid::comm::codec
