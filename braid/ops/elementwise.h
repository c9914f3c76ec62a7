// Elementwise arithmetic, math functions and comparisons, with NumPy
// broadcasting between tensor operands. Both operands of a binary op must have
// the same dtype (no implicit promotion); a double scalar takes the tensor's
// dtype. Differentiable in f32/f64; the gradient of a broadcast operand is
// summed back to its shape (sum_to). Results are fresh contiguous tensors.
// Each function is a thin caller of its op in the registry (registry.h).
#pragma once

#include "braid/tensor/tensor.h"

namespace braid {

Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
// Gradient 0 at x == 0 (PyTorch's convention: sign(x)).
Tensor abs(const Tensor& x);
// -1, 0 or 1 by the sign of x; not differentiable (its gradient is 0 anyway).
Tensor sign(const Tensor& x);
// x ^ exponent, elementwise; gradient exponent * x^(exponent-1).
Tensor pow(const Tensor& x, double exponent);

// Elementwise max/min; on ties the gradient is split evenly, as in PyTorch.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// Comparisons: bool tensors, not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

// x summed over its broadcast dims down to `shape` (the adjoint of broadcasting
// x's shape from `shape`); x itself when the shapes match.
Tensor sum_to(const Tensor& x, const Shape& shape);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator-(double a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator/(double a, const Tensor& b) { return div(a, b); }

}  // namespace braid
