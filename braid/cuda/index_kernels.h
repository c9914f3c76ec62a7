// Device kernels of the index family: gathers (index_select, gather,
// embedding_bag) and their adjoints, which scatter with atomic adds. Every
// tensor here is contiguous and viewed as [A, R, B] around the indexed dim
// (R rows of B elements, A times); indices are i64, checked on the device
// (range_check; deferred_checks.h), and one out of range is skipped: a
// selection reads 0 for it, a scatter adds nothing. The selections move raw elements of any dtype; the
// accumulations add f32/f64 values, or f16/bf16 values into an f32 buffer
// (atomics on 16-bit floats would round at every add).
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

// [A, R, B] around the indexed dim; J: the index's extent along it.
struct IndexGeometry {
  int64_t A = 1, R = 1, J = 1, B = 1;
};

// Checks index[i] in [0, bound) for i < n on the device: the first value out
// of range claims `record` for check `check` (deferred_checks.h).
struct CheckRecord;
void range_check(const int64_t* index, int64_t n, int64_t bound, int64_t check, CheckRecord* record);

// out[a, j, b] = x[a, index[j], b] (index [J]); elements of `elem_bytes`.
void index_select_rows(size_t elem_bytes, void* out, const void* x, const int64_t* index, const IndexGeometry& s);
// out[a, j, b] = x[a, index[a, j, b], b] (index of out's shape [A, J, B]).
void gather_elements(size_t elem_bytes, void* out, const void* x, const int64_t* index, const IndexGeometry& s);

// acc[a, index[j], b] += src[a, j, b]; src of `dtype`, acc of its accumulator
// dtype (f32 for f16/bf16, the dtype itself otherwise), zeroed by the caller.
void index_add_rows(DType dtype, void* acc, const void* src, const int64_t* index, const IndexGeometry& s);
// acc[a, index[a, j, b], b] += src[a, j, b].
void scatter_add_elements(DType dtype, void* acc, const void* src, const int64_t* index, const IndexGeometry& s);

// embedding_bag's bags: bag b pools positions [start[b], start[b + 1]) of
// idx (rows of a [V, D] weight), scaled by psw (of the weight's dtype, may be
// null) or, for mean, by 1 / the bag's size.
struct Bags {
  const int64_t* idx;    // [n]
  const int64_t* start;  // [B + 1], start[B] == n
  const void* psw;       // [n] or null
  int64_t B, D, n;
  bool mean;
};
// out [B, D] = the pooled rows of w [V, D].
void bag_forward(DType dtype, void* out, const void* w, const Bags& bags);
// acc [V, D] += scale_k * g[bag of k] at row idx[k] (acc as for index_add_rows).
void bag_backward_weight(DType dtype, void* acc, const void* g, const Bags& bags);
// gp [n]: gp[k] = dot(g[bag of k], w[idx[k]]).
void bag_backward_psw(DType dtype, void* gp, const void* g, const void* w, const Bags& bags);

}  // namespace braid::cuda
