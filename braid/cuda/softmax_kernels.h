// Device kernels of the softmax family over the rows of a contiguous
// [A, R, B] block: row (a, b) is the R elements B apart starting at
// a*R*B + b (softmax along one dim of a contiguous tensor). f16/bf16 and f32
// compute in float, f64 in double. Long contiguous rows (B == 1) take a
// block each; otherwise a thread takes a row, so adjacent threads read
// adjacent b.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

// y = softmax(x) (log: log_softmax) along R; x and y of `dtype`.
void softmax(DType dtype, void* y, const void* x, int64_t A, int64_t R, int64_t B, bool log);

// Given the output y and its gradient g (both [A, R, B] of `dtype`):
//   softmax:     gx = y * (g - sum_R(g * y))
//   log_softmax: gx = g - exp(y) * sum_R(g)
void softmax_backward(DType dtype, void* gx, const void* g, const void* y, int64_t A, int64_t R, int64_t B, bool log);

}  // namespace braid::cuda
