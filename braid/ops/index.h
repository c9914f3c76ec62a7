// Indexing ops: embedding lookup, index_select and gather, each with a
// scatter-add backward. Indices are i64 tensors; out-of-range indices raise
// IndexError naming the op, the index and the shape. Differentiable in f32/f64
// with respect to the indexed tensor (never the indices).
#pragma once

#include "braid/tensor/tensor.h"

namespace braid {

// Rows of weight [V, D] picked by indices (any shape) -> [*indices.shape, D].
// Backward: the gradient rows are added into a [V, D] zero tensor (repeated
// indices accumulate).
Tensor embedding(const Tensor& weight, const Tensor& indices);

// Slices of x along dim picked by a 1-D index: out.size(dim) = index.numel().
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

// out[i][j][k] = x[i][index[i][j][k]][k] for dim = 1 (likewise for any dim);
// index has x's ndim and x's sizes in every dim but `dim`.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace braid
