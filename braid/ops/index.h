// Indexing ops: embedding lookup (plain and bagged), index_select and gather,
// each with a scatter-add backward (itself an op: index_select_backward,
// gather_backward). Indices are i64 tensors; out-of-range indices raise
// IndexError naming the op, the index and the shape. Differentiable in f32/f64
// with respect to the indexed tensor (never the indices). Each function is a
// thin caller of its op in the registry (registry.h).
#pragma once

#include "braid/tensor/tensor.h"

namespace braid {

// Rows of weight [V, D] picked by indices (any shape) -> [*indices.shape, D].
// Backward: the gradient rows are added into a [V, D] zero tensor (repeated
// indices accumulate).
Tensor embedding(const Tensor& weight, const Tensor& indices);

enum class EmbeddingBagMode { sum, mean };

// Pooled rows of weight [V, D] f32/f64 over bags, like PyTorch's
// F.embedding_bag(indices, weight, offsets, mode=..., per_sample_weights=...)
// with include_last_offset=False: indices i64 [n] holds every bag's indices
// back to back, offsets i64 [B] the start of each bag (offsets[0] == 0,
// non-decreasing, <= n; bag b ends where bag b+1 starts, the last at n).
//   sum:  out[b] = sum_k psw[k] * weight[indices[k]]   (psw = 1 when undefined)
//   mean: out[b] = mean_k weight[indices[k]]           (0 for an empty bag)
// per_sample_weights [n] (weight's dtype) only with sum, as in PyTorch.
// -> [B, D]. Backward: weight gets the scaled gradient rows added into a
// [V, D] zero tensor (repeated indices accumulate); per_sample_weights[k] gets
// dot(grad[bag of k], weight[indices[k]]). One pass, no [n, D] intermediate.
Tensor embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                     const Tensor& per_sample_weights = {}, EmbeddingBagMode mode = EmbeddingBagMode::sum);

// Slices of x along dim picked by a 1-D index: out.size(dim) = index.numel().
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// Its adjoint: zeros of `shape` (f32/f64) with src's slices added at index
// along dim; repeated indices accumulate. Differentiable in src.
Tensor index_select_backward(const Tensor& src, int64_t dim, const Tensor& index, const Shape& shape);

// out[i][j][k] = x[i][index[i][j][k]][k] for dim = 1 (likewise for any dim);
// index has x's ndim and x's sizes in every dim but `dim`.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// Its adjoint: zeros of `shape` (f32/f64) with src (index's shape) added at
// index along dim, as torch.zeros(shape).scatter_add(dim, index, src).
// Differentiable in src.
Tensor gather_backward(const Tensor& src, int64_t dim, const Tensor& index, const Shape& shape);

}  // namespace braid
