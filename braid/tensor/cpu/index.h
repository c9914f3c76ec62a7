// Indexing CPU kernels (no autograd): gather / scatter-add along a dim and
// index_select / index_add of whole slices. Indices are i64 and are checked
// before any work starts (IndexError naming `name`, the index and the shape);
// negative indices are not accepted. Selections work on every dtype; the
// accumulating kernels on f32/f64.
#pragma once

#include "braid/tensor/tensor.h"

namespace braid::cpu {

// out[a, j, b] = x[a, index[a, j, b], b] for dim = the middle position; index
// has x's ndim and x's sizes in every dim but `dim`. Output has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, const char* name);

// dst[a, index[a, j, b], b] += src[a, j, b]; dst contiguous, src of index's shape.
void scatter_add_into(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src, const char* name);

// out[a, j, b] = x[a, index[j], b] for a 1-D index: whole slices, so the inner
// copy is contiguous (embedding rows when dim = 0).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, const char* name);

// dst[a, index[j], b] += src[a, j, b]; dst contiguous. Repeated indices add up.
void index_add_into(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src, const char* name);

}  // namespace braid::cpu
