// Elementwise CPU kernels (no autograd; braid/ops builds the differentiable
// functions on them). Inputs may be any strided view; outputs are fresh
// contiguous tensors. Binary kernels broadcast NumPy-style and require equal
// dtypes (no implicit promotion). Errors name `op` as the caller passes it.
#pragma once

#include "braid/tensor/tensor.h"

namespace braid::cpu {

enum class Unary {
  neg, exp, log, sqrt, abs, sign, relu, sigmoid, tanh,
  gelu_tanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (PyTorch approximate="tanh")
  gelu_erf,   // 0.5 x (1 + erf(x / sqrt(2)))                     (PyTorch approximate="none")
  pow,        // x ^ alpha
  clamp,      // min(max(x, alpha), beta)
  add,        // x + alpha
  mul,        // x * alpha
  rsub,       // alpha - x
  rdiv,       // alpha / x
  pow_grad,   // alpha * x ^ (alpha - 1)
};

enum class Binary {
  add, sub, mul, div, maximum, minimum,
  // comparisons: bool result
  eq, ne, lt, le, gt, ge,
  // backward helpers, (grad, saved): grad times the local derivative
  relu_grad,       // g * (x > 0)
  sigmoid_grad,    // g * y (1 - y), y = sigmoid(x)
  tanh_grad,       // g * (1 - y^2), y = tanh(x)
  gelu_tanh_grad,  // g * d/dx gelu_tanh(x)
  gelu_erf_grad,   // g * d/dx gelu_erf(x)
};

// f(x) with scalar parameters alpha/beta where the op uses them. f32/f64 for
// transcendental ops; neg/abs/sign/relu/clamp/add/mul/rsub also accept i32/i64.
Tensor unary(Unary op, const Tensor& x, const char* name, double alpha = 0, double beta = 0);

// f(a, b) with broadcasting. Arithmetic on f32/f64/i32/i64; comparisons also
// on u8/bool; backward helpers on f32/f64.
Tensor binary(Binary op, const Tensor& a, const Tensor& b, const char* name);

// g where lo <= x <= hi, else 0 (clamp's backward; bounds may be +-inf).
Tensor clamp_grad(const Tensor& g, const Tensor& x, double lo, double hi);

// cond ? a : b with broadcasting over all three; cond is bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const char* name);

// The strides that read `t` as if broadcast to `shape` (0 on broadcast dims).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

}  // namespace braid::cpu
