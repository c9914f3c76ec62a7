// Shape and view ops. Views (reshape of a contiguous tensor, flatten, transpose,
// permute, slice, expand, squeeze, unsqueeze, split) share the input's storage
// and only change shape/strides/offset; concat, stack and contiguous copy.
// All are differentiable for floating inputs and work on every dtype.
// Dimensions may be negative (counted from the end). The view ops (reshape,
// permute, slice, expand, squeeze, unsqueeze) and concat are registry ops
// (registry.h); flatten, transpose, split, stack and contiguous are written
// in them.
#pragma once

#include <vector>

#include "braid/tensor/tensor.h"

namespace braid {

// One entry may be -1 (inferred). A view whenever the strides allow it (as
// PyTorch's view: e.g. merging dims of a slice that stay evenly strided), else
// a contiguous copy.
Tensor reshape(const Tensor& x, Shape shape);
// Merges dims start_dim..end_dim into one.
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
// Output dim i is input dim dims[i].
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
// Elements start, start+step, ... < end along dim. start/end are clamped to
// [0, size] after adding size to negatives, as Python slicing does; step >= 1.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
// Broadcasts size-1 dims (and new leading dims) to `shape`; -1 keeps a size.
Tensor expand(const Tensor& x, const Shape& shape);
// Drops every size-1 dim / the given dim if it has size 1.
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
// Inserts a size-1 dim at position dim (in [-ndim-1, ndim]).
Tensor unsqueeze(const Tensor& x, int64_t dim);

// Joins tensors of one dtype whose shapes agree except along dim.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
// Views of consecutive pieces of split_size along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// Views of pieces with the given sizes, which must add up to x.size(dim).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// Joins equal-shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);

// x itself when contiguous, else a differentiable contiguous copy.
Tensor contiguous(const Tensor& x);

}  // namespace braid
