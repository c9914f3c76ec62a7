// The strided loop every elementwise CPU kernel is built on.
//
// strided_loop walks N operands that share one (broadcast) shape, each with
// its own strides (0 for a broadcast dimension) and element offset. It merges
// dimensions that are contiguous for every operand, then calls
//   inner(offsets, n, inner_strides)
// once per row of the innermost dimension, rows split over the intra-op pool.
// Kernels special-case inner_strides all == 1 so the compiler vectorises.
#pragma once

#include <array>
#include <cstdint>

#include "braid/base/thread_pool.h"
#include "braid/tensor/dtype.h"
#include "braid/tensor/shape.h"

namespace braid::cpu {

// Elements per parallel_for chunk below which a loop stays on one thread.
inline constexpr int64_t kParallelGrain = 32768;

template <int N, class Fn>
void strided_loop(const Shape& shape, const std::array<Shape, N>& strides,
                  const std::array<int64_t, N>& offsets, Fn&& inner) {
  // Drop size-1 dims, then merge dim d into d+1 when contiguous for all operands.
  Shape dims;
  std::array<Shape, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (shape[d] == 0) return;
    bool merge = !dims.empty();
    for (int k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][d] * shape[d];
    if (merge) {
      dims.back() *= shape[d];
      for (int k = 0; k < N; ++k) st[k].back() = strides[k][d];
    } else {
      dims.push_back(shape[d]);
      for (int k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
    }
  }
  std::array<int64_t, N> inner_strides{};
  if (dims.empty()) {
    inner(offsets, int64_t{1}, inner_strides);
    return;
  }
  const int64_t nd = static_cast<int64_t>(dims.size());
  const int64_t n = dims.back();
  for (int k = 0; k < N; ++k) inner_strides[k] = st[k].back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < nd; ++d) rows *= dims[d];
  // Few long rows (a contiguous tensor is one row): cut each row into pieces
  // so every thread of the pool gets work.
  const int64_t piece = rows < num_threads() && n >= 2 * kParallelGrain ? kParallelGrain : n;
  const int64_t pieces = (n + piece - 1) / piece;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / piece);
  parallel_for(0, rows * pieces, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t idx = lo; idx < hi; ++idx) {
      const int64_t start = (idx % pieces) * piece;
      std::array<int64_t, N> off = offsets;
      int64_t rem = idx / pieces;  // the row
      for (int64_t d = nd - 2; d >= 0; --d) {
        const int64_t i = rem % dims[d];
        rem /= dims[d];
        for (int k = 0; k < N; ++k) off[k] += i * st[k][d];
      }
      for (int k = 0; k < N; ++k) off[k] += start * inner_strides[k];
      inner(off, std::min(piece, n - start), inner_strides);
    }
  });
}

// Value conversion between element types; 16-bit floats go through float.
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, f16> || std::is_same_v<From, bf16>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, f16> || std::is_same_v<To, bf16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From{};
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace braid::cpu
