// Device kernels: maps over one, two or three operands with broadcasting
// (the elementwise and activation families). Each output element is computed
// in float for f16/bf16, in the dtype itself otherwise, as the CPU backend does.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

enum class UnaryOp : uint8_t {
  neg, exp, log, sqrt, abs, sign, relu, sigmoid, tanh, gelu_tanh, gelu_erf,
  pow,    // x ^ alpha
  clamp,  // min(max(x, alpha), beta)
  add, mul, rsub, rdiv,  // x + alpha, x * alpha, alpha - x, alpha / x
};

enum class BinaryOp : uint8_t {
  add, sub, mul, div, maximum, minimum,
  eq, ne, lt, le, gt, ge,  // bool results
  // (g, saved) -> g times the local derivative
  relu_grad, sigmoid_grad, tanh_grad, gelu_tanh_grad, gelu_erf_grad,
};

// out[ix 0] = f(x[ix 1]); out has x's dtype.
void unary(UnaryOp op, DType dtype, void* out, const void* x, const Indexer<2>& ix, int64_t n, double alpha,
           double beta);
// out[ix 0] = f(a[ix 1], b[ix 2]); a and b have `dtype`, out too (bool for comparisons).
void binary(BinaryOp op, DType dtype, void* out, const void* a, const void* b, const Indexer<3>& ix, int64_t n);
// out = lo <= x <= hi ? g : 0 (clamp's backward).
void clamp_grad(DType dtype, void* out, const void* g, const void* x, const Indexer<3>& ix, int64_t n, double lo,
                double hi);
// out = cond ? a : b (cond bool).
void where(DType dtype, void* out, const void* cond, const void* a, const void* b, const Indexer<4>& ix, int64_t n);
// out = mask ? value : x (mask bool).
void masked_fill(DType dtype, void* out, const void* x, const void* mask, const Indexer<3>& ix, int64_t n, double value);

}  // namespace braid::cuda
