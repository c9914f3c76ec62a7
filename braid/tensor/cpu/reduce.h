// Reduction CPU kernels (no autograd). Every kernel views its input as a
// contiguous [A, R, B] block (A = dims before, R = the reduced dims, B = dims
// after) so row reductions (B == 1) and column reductions (bias gradients:
// [N, C] -> [C]) both run over contiguous memory. Sums accumulate in double.
// f32/f64 (sum also i32/i64); errors name `name` and the input shape.
#pragma once

#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::cpu {

// scale * (sum of x over `dims`); negative dims count from the end; dims must
// be distinct. keepdim keeps reduced dims as size 1.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, double scale, const char* name);

// Sums x down to `shape`, the inverse of broadcasting `shape` to x.shape()
// (the backward of every broadcasting op).
Tensor sum_to(const Tensor& x, const Shape& shape);

struct MaxResult {
  Tensor values;   // x's dtype
  Tensor indices;  // i64, position along `dim` of the first maximum
};

// Max along one dim; NaN wins, as in torch.max.
MaxResult max_dim(const Tensor& x, int64_t dim, bool keepdim, const char* name);

// softmax (log = false) or log_softmax (log = true) along `dim`.
Tensor softmax(const Tensor& x, int64_t dim, bool log, const char* name);

// Gradient of softmax/log_softmax given the output y and its gradient g:
//   softmax:     g_x = y * (g - sum(g * y))
//   log_softmax: g_x = g - exp(y) * sum(g)
Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log);

}  // namespace braid::cpu
