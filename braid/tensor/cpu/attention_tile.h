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

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
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
// Never inlined: inside the large kernel functions GCC spilled an accumulator
// and the row pointers to the stack in the k loop (the loops ran at 50 GFLOP/s
// against 75 for the same tile on its own, AVX2, one thread).
template <class T, int MR, int NV>
[[gnu::noinline]] void tile(int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t ldb, T* c, int64_t ldc,
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

// sum over e < n of a[e * as] * b[e * bs].
template <class T>
inline T dot(const T* a, int64_t as, const T* b, int64_t bs, int64_t n) {
  T s{0};
  if (as == 1 && bs == 1) {
#pragma omp simd reduction(+ : s)
    for (int64_t e = 0; e < n; ++e) s += a[e] * b[e];
  } else {
    for (int64_t e = 0; e < n; ++e) s += a[e * as] * b[e * bs];
  }
  return s;
}

// (a[0] + a[1], a[2] + a[3], ..., b[0] + b[1], ...): one level of a
// transposing reduction.
template <class V, size_t... I>
inline V pair_sums(const V& a, const V& b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, (2 * I)...) + __builtin_shufflevector(a, b, (2 * I + 1)...);
}

// out[c * os] = sum over e < d of a[c * ars + e] * x[e] for c < n: one query's
// scores against n keys, kLanes<T> keys at a time, each key's partial sums in
// its own vector and the lanes of all of them reduced together (log2(lanes)
// levels of shuffles) instead of one horizontal sum per key. a's rows and x
// are contiguous; d a multiple of kLanes<T>.
template <class T>
inline void dots(int64_t n, int64_t d, const T* a, int64_t ars, const T* x, T* out, int64_t os) {
  using V = typename Simd<T>::V;
  constexpr int64_t L = kLanes<T>;
  constexpr auto half = std::make_index_sequence<static_cast<size_t>(L)>();
  int64_t c0 = 0;
  for (; c0 + L <= n; c0 += L) {
    V acc[L];
    for (int64_t c = 0; c < L; ++c) acc[c] = V{};
    for (int64_t e = 0; e < d; e += L) {
      const V xv = load<V>(x + e);
      for (int64_t c = 0; c < L; ++c) acc[c] += load<V>(a + (c0 + c) * ars + e) * xv;
    }
    for (int64_t width = L; width > 1; width /= 2) {
      for (int64_t i = 0; i < width / 2; ++i) acc[i] = pair_sums(acc[2 * i], acc[2 * i + 1], half);
    }
    for (int64_t c = 0; c < L; ++c) out[(c0 + c) * os] = acc[0][c];
  }
  for (; c0 < n; ++c0) out[c0 * os] = dot(a + c0 * ars, 1, x, 1, d);
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

// The part of a product that a causal mask leaves, so that blocks on the
// diagonal skip what is masked instead of multiplying zeros (a quarter of the
// work at T = 256 with 64-row blocks). For output row i:
//   k_to:   only k <= i + offset counts     (P V, dS K: rows are queries, k keys)
//   k_from: only k >= i + offset counts     (P^T dO, dS^T Q: rows are keys, k queries)
//   n_from: only columns >= i + offset are needed (K Q^T, V dO^T); the others
//           are left as they were, whole vectors at a time, for the caller to mask.
struct Band {
  enum Kind : uint8_t { all, k_to, k_from, n_from };
  Kind kind = all;
  int64_t offset = 0;
};

// Rows 0..m of the column panel starting at column `col` of C, MR at a time.
// 6 x 2 vectors: 12 accumulators, 2 of B and a broadcast fill the 16 vector
// registers of AVX2 (the classic Haswell SGEMM tile).
template <class T, int NV>
inline void panel(int64_t m, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t ldb, T* c,
                  int64_t ldc, bool accumulate, Band band, int64_t col) {
  constexpr int64_t MR = 6;
  for (int64_t i = 0; i < m; i += MR) {
    const int64_t mr = std::min(MR, m - i);
    int64_t k0 = 0, k1 = k;
    if (band.kind == Band::k_to) k1 = std::clamp<int64_t>(i + mr + band.offset, 0, k);
    if (band.kind == Band::k_from) k0 = std::clamp<int64_t>(i + band.offset, 0, k);
    if (band.kind == Band::n_from && col + NV * kLanes<T> <= i + band.offset) continue;
    if (k0 >= k1 && accumulate) continue;
    const int64_t kk = std::max<int64_t>(k1 - k0, 0);
    const T* ai = a + i * ars + k0 * acs;
    const T* bk = b + k0 * ldb;
    T* ci = c + i * ldc;
    switch (mr) {
      case 6: tile<T, 6, NV>(kk, ai, ars, acs, bk, ldb, ci, ldc, accumulate); break;
      case 5: tile<T, 5, NV>(kk, ai, ars, acs, bk, ldb, ci, ldc, accumulate); break;
      case 4: tile<T, 4, NV>(kk, ai, ars, acs, bk, ldb, ci, ldc, accumulate); break;
      case 3: tile<T, 3, NV>(kk, ai, ars, acs, bk, ldb, ci, ldc, accumulate); break;
      case 2: tile<T, 2, NV>(kk, ai, ars, acs, bk, ldb, ci, ldc, accumulate); break;
      default: tile<T, 1, NV>(kk, ai, ars, acs, bk, ldb, ci, ldc, accumulate); break;
    }
  }
}

// C[m, n] (+)= A[m, k] B[k, n] within `band`, n a multiple of kLanes<T>; B
// and C row-major (ldb, ldc), A(i, p) = a[i * ars + p * acs].
template <class T>
inline void gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b, int64_t ldb, T* c,
                 int64_t ldc, bool accumulate, Band band = {}) {
  constexpr int64_t L = kLanes<T>;
  int64_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) panel<T, 2>(m, k, a, ars, acs, b + j, ldb, c + j, ldc, accumulate, band, j);
  for (; j < n; j += L) panel<T, 1>(m, k, a, ars, acs, b + j, ldb, c + j, ldc, accumulate, band, j);
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

// Queries and keys per dropout tile (attention.h, AttentionParams); the
// kernels' blocks are these tiles, so one block's draws are one run of words.
inline constexpr int64_t kDropoutTile = 64;

// The 16-bit draws of the first `keys` keys of tile `tile` and its first
// `queries` queries: bits[c * 64 + r] for key c and query r of the tile.
inline void dropout_tile_bits(uint64_t seed, uint64_t stream, uint64_t first_word, uint64_t tile, int64_t keys,
                              int64_t queries, uint16_t* bits) {
  constexpr int64_t kWords = kDropoutTile / 2;  // per key
  uint32_t words[kDropoutTile * kWords];
  const uint64_t base = first_word + tile * static_cast<uint64_t>(kDropoutTile * kWords);
  if (queries > kDropoutTile / 2) {  // whole keys: one run of keys * 32 words
    philox_fill(seed, stream, base, std::span<uint32_t>(words, static_cast<size_t>(keys * kWords)));
  } else {  // few queries (a decoding step): the words each key needs
    const int64_t need = (queries + 1) / 2;
    for (int64_t c = 0; c < keys; ++c) {
      philox_fill(seed, stream, base + static_cast<uint64_t>(c * kWords),
                  std::span<uint32_t>(words + c * kWords, static_cast<size_t>(need)));
    }
  }
  for (int64_t c = 0; c < keys; ++c) {
    if constexpr (std::endian::native == std::endian::little) {  // low half first: the words are the bits
      std::memcpy(bits + c * kDropoutTile, words + c * kWords, static_cast<size_t>(queries) * sizeof(uint16_t));
    } else {
      for (int64_t r = 0; r < queries; ++r) {
        const uint32_t word = words[c * kWords + r / 2];
        bits[c * kDropoutTile + r] = static_cast<uint16_t>(r % 2 ? word >> 16 : word & 0xffffu);
      }
    }
  }
}

// ceil(p * 2^16): the smallest 16-bit value that keeps an element.
inline uint32_t dropout_threshold(double p) { return static_cast<uint32_t>(std::ceil(p * 65536.0)); }

}  // namespace braid::cpu::sdpa
