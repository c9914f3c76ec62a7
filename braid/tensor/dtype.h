// Element types and their 16-bit float formats.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace braid {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8, b8 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i32, DType::i64, DType::u8,  DType::b8};

constexpr size_t itemsize(DType t) {
  switch (t) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::u8: case DType::b8: return 1;
  }
  return 0;
}

constexpr std::string_view name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::b8: return "bool";
  }
  return "?";
}

constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

// IEEE binary16, stored as bits; arithmetic happens in float.
#if defined(__FLT16_MAX__)
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float v) { _Float16 h = static_cast<_Float16>(v); std::memcpy(&bits, &h, 2); }
  explicit operator float() const { _Float16 h; std::memcpy(&h, &bits, 2); return static_cast<float>(h); }
};
#else
// Compilers without _Float16 on this target (clang 14 on x86 without
// AVX512-FP16, which builds the fuzz harnesses): the same conversions in
// integer arithmetic, rounding to nearest even as the hardware does.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float v) {
    uint32_t x;
    std::memcpy(&x, &v, 4);
    const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) { bits = static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu)); return; }  // quiet NaN
    if (x >= 0x47800000u) { bits = sign | 0x7c00u; return; }  // >= 2^16: infinity
    uint32_t h, rem, half;
    if (x < 0x38800000u) {  // below 2^-14: a subnormal half, h * 2^-24
      const uint32_t e = x >> 23;
      if (e < 102) { bits = sign; return; }  // below 2^-25: rounds to zero
      const uint32_t m = (x & 0x7fffffu) | 0x800000u, shift = 126 - e;
      h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    } else {  // rebias the exponent (127 -> 15) and keep 10 mantissa bits
      h = (x - 0x38000000u) >> 13, rem = x & 0x1fffu, half = 0x1000u;
    }
    if (rem > half || (rem == half && (h & 1u))) ++h;  // a carry may reach the exponent, or infinity
    bits = static_cast<uint16_t>(sign | h);
  }
  explicit operator float() const {
    const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16, e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    uint32_t x;
    if (e == 0) {
      const float v = static_cast<float>(m) * 0x1p-24f;  // zero or subnormal, exact
      std::memcpy(&x, &v, 4);
      x |= sign;
    } else if (e == 31) {
      x = sign | (m ? 0x7fc00000u : 0x7f800000u) | (m << 13);  // infinity, or a quiet NaN
    } else {
      x = sign | ((e + 112) << 23) | (m << 13);
    }
    float v;
    std::memcpy(&v, &x, 4);
    return v;
  }
};
#endif

// bfloat16: the top half of a float, rounded to nearest even; NaN stays NaN.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) { bits = static_cast<uint16_t>((u >> 16) | 0x40); return; }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = static_cast<uint16_t>(u >> 16);
  }
  explicit operator float() const { uint32_t u = static_cast<uint32_t>(bits) << 16; float v; std::memcpy(&v, &u, 4); return v; }
};

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<f16>() { return DType::f16; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::b8; }

// Calls fn(T{}) with the C++ type of `t`.
template <class Fn>
decltype(auto) visit_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::f16: return fn(f16{});
    case DType::bf16: return fn(bf16{});
    case DType::i32: return fn(int32_t{});
    case DType::i64: return fn(int64_t{});
    case DType::u8: return fn(uint8_t{});
    case DType::b8: return fn(bool{});
  }
  return fn(float{});
}

}  // namespace braid
