// Inside the attention kernels (attention.cc, attention_backward.cc): the
// register-tiled block product, the packing of operand blocks into padded
// contiguous buffers, and the dropout keep decisions.
//
// Every product the flash-attention loops need is written as
// C[m, n] (+)= A[m, k] B[k, n] with B's rows contiguous and n a multiple of
// the vector width, A read through two strides. The scores are computed
// transposed, S^T = K Q^T, so K and V are read in place as A (any strides: the
// slices of a packed qkv projection) and only Q (and dO) are packed
// transposed, once per query block or head; P = (S^T)^T and dS are then A
// operands read with swapped strides, which costs nothing.
// The tile keeps an MR x (NV vectors) block of C in registers over the whole
// k loop: per step NV loads of B, MR broadcasts of A and MR * NV FMAs.
// (GCC vector extensions: the same code is SSE, AVX2 or AVX-512 by -march.)
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "braid/base/rng.h"

namespace braid::cpu::sdpa {

#if defined(__AVX512F__)
inline constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
inline constexpr int kVectorBytes = 32;
#else
inline constexpr int kVectorBytes = 16;
#endif

template <class T>
struct Simd;
template <>
struct Simd<float> {
  typedef float V __attribute__((vector_size(kVectorBytes)));
};
template <>
struct Simd<double> {
  typedef double V __attribute__((vector_size(kVectorBytes)));
};
// Elements per vector.
template <class T>
inline constexpr int64_t kLanes = kVectorBytes / static_cast<int64_t>(sizeof(T));

// n rounded up to whole vectors.
template <class T>
inline int64_t padded(int64_t n) {
  return (n + kLanes<T> - 1) / kLanes<T> * kLanes<T>;
}

template <class V, class T>
inline V load(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <class V, class T>
inline void store(T* p, const V& v) {
  __builtin_memcpy(p, &v, sizeof v);
}
// x in every lane: one vbroadcastss from memory. (V{} + x adds a zero first;
// a loop over the lanes was built lane by lane where registers ran short.)
template <class V, class T, size_t... I>
inline V splat_lanes(T x, std::index_sequence<I...>) {
  return V{((void)I, x)...};
}
template <class V, class T>
inline V splat(T x) {
  return splat_lanes<V>(x, std::make_index_sequence<sizeof(V) / sizeof(T)>());
}

// C[MR, NV vectors] (+)= A[MR, k] B[k, NV vectors]; A(i, p) = a[i * ars + p * acs].
template <class T, int MR, int NV>
inline void tile(int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t ldb, T* c, int64_t ldc,
                 bool accumulate) {
  using V = typename Simd<T>::V;
  constexpr int64_t L = kLanes<T>;
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NV; ++j) acc[i][j] = accumulate ? load<V>(c + i * ldc + j * L) : V{};
  }
  for (int64_t p = 0; p < k; ++p) {
    V bv[NV];
    for (int j = 0; j < NV; ++j) bv[j] = load<V>(b + p * ldb + j * L);
    for (int i = 0; i < MR; ++i) {
      const V ai = splat<V>(a[i * ars + p * acs]);
      for (int j = 0; j < NV; ++j) acc[i][j] += ai * bv[j];
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NV; ++j) store(c + i * ldc + j * L, acc[i][j]);
  }
}

// acc[i] = max(acc[i], x[i]), n a multiple of kLanes<T> (NaN in x wins). In
// vector registers: GCC leaves the scalar loop a compare and a branch.
template <class T>
inline void max_into(T* acc, const T* x, int64_t n) {
  using V = typename Simd<T>::V;
  for (int64_t i = 0; i < n; i += kLanes<T>) {
    const V a = load<V>(acc + i), b = load<V>(x + i);
    store(acc + i, a > b ? a : b);
  }
}

// Rows 0..m of one column panel of C, MR at a time, then the remainder.
// 6 x 2 vectors: 12 accumulators, 2 of B and a broadcast fill the 16 vector
// registers of AVX2 (the classic Haswell SGEMM tile).
template <class T, int NV>
inline void panel(int64_t m, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t ldb, T* c,
                  int64_t ldc, bool accumulate) {
  constexpr int MR = 6;
  int64_t i = 0;
  for (; i + MR <= m; i += MR) tile<T, MR, NV>(k, a + i * ars, ars, acs, b, ldb, c + i * ldc, ldc, accumulate);
  const T* ai = a + i * ars;
  T* ci = c + i * ldc;
  switch (m - i) {
    case 5: tile<T, 5, NV>(k, ai, ars, acs, b, ldb, ci, ldc, accumulate); break;
    case 4: tile<T, 4, NV>(k, ai, ars, acs, b, ldb, ci, ldc, accumulate); break;
    case 3: tile<T, 3, NV>(k, ai, ars, acs, b, ldb, ci, ldc, accumulate); break;
    case 2: tile<T, 2, NV>(k, ai, ars, acs, b, ldb, ci, ldc, accumulate); break;
    case 1: tile<T, 1, NV>(k, ai, ars, acs, b, ldb, ci, ldc, accumulate); break;
    default: break;
  }
}

// C[m, n] (+)= A[m, k] B[k, n], n a multiple of kLanes<T>; B and C row-major
// (ldb, ldc), A(i, p) = a[i * ars + p * acs].
template <class T>
inline void gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t ldb, T* c,
                 int64_t ldc, bool accumulate) {
  constexpr int64_t L = kLanes<T>;
  int64_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) panel<T, 2>(m, k, a, ars, acs, b + j, ldb, c + j, ldc, accumulate);
  for (; j < n; j += L) panel<T, 1>(m, k, a, ars, acs, b + j, ldb, c + j, ldc, accumulate);
}

// dst[r, 0:d] = scale * src[r * rs + e * es] for e < d, dst[r, d:ld] = 0;
// rows r < n. Gathers a block of rows of a strided [T, D] view.
template <class T>
inline void pack_rows(const T* src, int64_t rs, int64_t es, int64_t n, int64_t d, T scale, T* dst, int64_t ld) {
  for (int64_t r = 0; r < n; ++r) {
    const T* s = src + r * rs;
    T* o = dst + r * ld;
    if (es == 1) {
      for (int64_t e = 0; e < d; ++e) o[e] = scale * s[e];
    } else {
      for (int64_t e = 0; e < d; ++e) o[e] = scale * s[e * es];
    }
    for (int64_t e = d; e < ld; ++e) o[e] = T{0};
  }
}

// dst[e, c] = scale * src[c * rs + e * es] for c < n, 0 for n <= c < np;
// e < d; dst rows ld apart. A block of rows of a strided [T, D] view,
// transposed, 8 source rows at a time so each store fills part of one line
// (column by column, every store was to another line: 6 % of the backward).
template <class T>
inline void pack_transposed(const T* src, int64_t rs, int64_t es, int64_t n, int64_t np, int64_t d, T scale, T* dst,
                            int64_t ld) {
  constexpr int64_t kRun = 8;
  int64_t c0 = 0;
  for (; c0 + kRun <= n; c0 += kRun) {
    const T* s = src + c0 * rs;
    for (int64_t e = 0; e < d; ++e) {
      T* o = dst + e * ld + c0;
      for (int64_t c = 0; c < kRun; ++c) o[c] = scale * s[c * rs + e * es];
    }
  }
  for (; c0 < n; ++c0) {
    for (int64_t e = 0; e < d; ++e) dst[e * ld + c0] = scale * src[c0 * rs + e * es];
  }
  for (int64_t e = 0; e < d; ++e) {
    for (int64_t c = n; c < np; ++c) dst[e * ld + c] = T{0};
  }
}

// The keep decisions of elements e0 .. e0 + n - 1 (attention.h,
// AttentionParams): factor[i] = keep ? keep_scale : 0, where element e is kept
// when its 16 bits are >= threshold = ceil(p * 2^16).
template <class T>
inline void dropout_factors(uint64_t seed, uint64_t stream, uint64_t first_block, uint32_t threshold, T keep_scale,
                            uint64_t e0, int64_t n, T* factor) {
  uint64_t at = UINT64_MAX;
  Philox4 words{};
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t e = e0 + static_cast<uint64_t>(i);
    if (e / 8 != at) {
      at = e / 8;
      words = philox(seed, stream, first_block + at);
    }
    const uint32_t word = words[(e % 8) / 2];
    const uint32_t bits = e % 2 ? word >> 16 : word & 0xffffu;
    factor[i] = bits >= threshold ? keep_scale : T{0};
  }
}

// ceil(p * 2^16): the smallest 16-bit value that keeps an element.
inline uint32_t dropout_threshold(double p) { return static_cast<uint32_t>(std::ceil(p * 65536.0)); }

}  // namespace braid::cpu::sdpa
