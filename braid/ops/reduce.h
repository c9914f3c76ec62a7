// Reductions over given dims (negative dims count from the end) or over all
// elements (a 0-d result). keepdim keeps reduced dims as size 1. Differentiable
// in f32/f64; sum, max and argmax also accept i32/i64. Sums accumulate in
// double. sum, mean, max (along a dim) and argmax (along a dim) are registry
// ops (registry.h); var and the all-element max/argmax are written in them.
#pragma once

#include <vector>

#include "braid/tensor/tensor.h"

namespace braid {

Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// Variance over dims (empty: all elements); unbiased divides by n - 1
// (Bessel), else by n, as torch.var's `unbiased` flag. One signature on
// purpose: an overload taking a bool would silently accept var(x, {1}).
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, bool unbiased = true, bool keepdim = false);

struct MaxResult {
  Tensor values;   // differentiable; the gradient flows to the first maximum
  Tensor indices;  // i64 positions along dim
};

// Largest element (0-d), and largest along one dim with its position.
Tensor max(const Tensor& x);
MaxResult max(const Tensor& x, int64_t dim, bool keepdim = false);
// Position of the first maximum in the flattened tensor (0-d i64) / along dim.
Tensor argmax(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace braid
