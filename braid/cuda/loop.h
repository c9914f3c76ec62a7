// Kernels written once, as functors over a flat index, that run as CUDA
// grid-stride loops when nvcc compiles them and as plain host loops when the
// backend is emulated (BRAID_CUDA_EMULATE: tests on machines without a GPU
// compile the same kernel files with the host compiler and check them against
// the CPU backend). Also the element types as kernels see them and the
// strided indexing every kernel shares.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "braid/tensor/dtype.h"
#include "braid/tensor/shape.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define BRAID_HD __host__ __device__
#else
#define BRAID_HD
#endif

namespace braid::cuda {

// ---- element conversions (f16/bf16 stored as bits, computed in float) ----

BRAID_HD inline float bits_to_float(bf16 v) {
  uint32_t x = static_cast<uint32_t>(v.bits) << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
BRAID_HD inline float bits_to_float(f16 v) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(v.bits));
#else
  return static_cast<float>(v);
#endif
}

template <class T>
struct Compute { using type = T; };
template <> struct Compute<f16> { using type = float; };
template <> struct Compute<bf16> { using type = float; };
template <> struct Compute<bool> { using type = bool; };
template <class T>
using compute_t = typename Compute<T>::type;

template <class T>
BRAID_HD inline compute_t<T> load(const T* p) { return *p; }
template <> BRAID_HD inline float load<f16>(const f16* p) { return bits_to_float(*p); }
template <> BRAID_HD inline float load<bf16>(const bf16* p) { return bits_to_float(*p); }

// value -> T, rounding to nearest even for the 16-bit floats.
template <class T, class V>
BRAID_HD inline T make(V v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != V(0);
  } else {
    return static_cast<T>(v);
  }
}
template <class T>
BRAID_HD inline void store(T* p, compute_t<T> v) { *p = v; }
template <> BRAID_HD inline void store<bf16>(bf16* p, float v) {
  uint32_t x;
  memcpy(&x, &v, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    p->bits = static_cast<uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  } else {
    p->bits = static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
}
template <> BRAID_HD inline void store<f16>(f16* p, float v) {
#if defined(__CUDA_ARCH__)
  p->bits = __half_as_ushort(__float2half_rn(v));
#else
  *p = f16(v);
#endif
}

// Calls f(T{}) with T the element type of `dtype` (bool for b8).
template <class F>
decltype(auto) visit(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::f16: return f(f16{});
    case DType::bf16: return f(bf16{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::u8: return f(uint8_t{});
    case DType::b8: return f(bool{});
  }
  return f(float{});
}

// ---- strided indexing ----

inline constexpr int kMaxDims = 8;

// Maps a flat index over `shape` (row-major) to element offsets of N operands
// with their own strides (0 on broadcast dims).
template <int N>
struct Indexer {
  int ndim = 0;
  bool narrow = false;  // fewer than 2^31 elements: 32-bit division (a fraction of 64-bit's cost)
  int64_t shape[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  BRAID_HD void offsets(int64_t i, int64_t (&out)[N]) const {
    // Contiguous operands collapse to one dim (make_indexer): no division,
    // which costs tens of instructions per dim on a GPU.
    if (ndim == 1) {
      for (int k = 0; k < N; ++k) out[k] = i * strides[k][0];
      return;
    }
    for (int k = 0; k < N; ++k) out[k] = 0;
    if (narrow) {
      auto j = static_cast<uint32_t>(i);
      for (int d = ndim - 1; d >= 0; --d) {
        const auto size = static_cast<uint32_t>(shape[d]);
        const uint32_t c = j % size;
        j /= size;
        for (int k = 0; k < N; ++k) out[k] += static_cast<int64_t>(c) * strides[k][d];
      }
      return;
    }
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t c = i % shape[d];
      i /= shape[d];
      for (int k = 0; k < N; ++k) out[k] += c * strides[k][d];
    }
  }
};

// An Indexer over `shape` for operands with these strides (each of the
// shape's rank): dims of size 1 are dropped, and a dim is merged into the one
// before it where every operand steps over both as over one.
template <int N>
Indexer<N> make_indexer(const Shape& shape, const Shape* const (&strides)[N]);

// ---- launching ----

#if defined(__CUDACC__)
// The stream this thread's kernels go to (runtime.h).
cudaStream_t launch_stream();
void check_launch(const char* what);

template <class F>
__global__ void index_kernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    f(i);
  }
}

// Runs f(i) for i in [0, n) on this thread's stream.
template <class F>
void for_each(int64_t n, F f, const char* what = "kernel") {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65536);
  index_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, launch_stream()>>>(n, f);
  check_launch(what);
}

template <class T>
__device__ inline void atomic_add(T* p, T v) { atomicAdd(p, v); }
#else
namespace emulated {
// Counts a launch of kernel `what` (emulated.h); false on the null device,
// where the kernel is not run.
bool launch(const char* what);
}  // namespace emulated

template <class F>
void for_each(int64_t n, F f, const char* what = "kernel") {
  if (n <= 0 || !emulated::launch(what)) return;
  for (int64_t i = 0; i < n; ++i) f(i);
}
template <class T>
inline void atomic_add(T* p, T v) { *p += v; }
#endif

// Sets *p (a 64-bit integer) to v where it is 0; true for the one thread
// that did. Host loops run one index at a time, so there a test suffices.
template <class I>
BRAID_HD inline bool atomic_claim(I* p, I v) {
  static_assert(sizeof(I) == 8);
#if defined(__CUDA_ARCH__)
  return atomicCAS(reinterpret_cast<unsigned long long*>(p), 0ull, static_cast<unsigned long long>(v)) == 0ull;
#else
  if (*p != 0) return false;
  *p = v;
  return true;
#endif
}

}  // namespace braid::cuda

template <int N>
braid::cuda::Indexer<N> braid::cuda::make_indexer(const Shape& shape, const Shape* const (&strides)[N]) {
  Indexer<N> ix;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (ix.ndim > 0) {
      bool merges = true;
      for (int k = 0; k < N; ++k) merges = merges && ix.strides[k][ix.ndim - 1] == (*strides[k])[d] * shape[d];
      if (merges) {
        ix.shape[ix.ndim - 1] *= shape[d];
        for (int k = 0; k < N; ++k) ix.strides[k][ix.ndim - 1] = (*strides[k])[d];
        continue;
      }
    }
    if (ix.ndim == kMaxDims) throw std::length_error("cuda kernels take at most 8 dimensions of size > 1");
    ix.shape[ix.ndim] = shape[d];
    for (int k = 0; k < N; ++k) ix.strides[k][ix.ndim] = (*strides[k])[d];
    ++ix.ndim;
  }
  int64_t total = 1;
  for (int d = 0; d < ix.ndim; ++d) total *= ix.shape[d];
  ix.narrow = total < (int64_t{1} << 31);
  return ix;
}
