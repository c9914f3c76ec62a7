// Activations and selection: relu, gelu, tanh, sigmoid, clamp, where,
// masked_fill. Differentiable in f32/f64; results are fresh contiguous tensors.
#pragma once

#include <optional>

#include "braid/tensor/tensor.h"

namespace braid {

// max(x, 0); gradient 0 at x == 0 (as PyTorch).
Tensor relu(const Tensor& x);

// Which GELU, named as PyTorch's F.gelu(x, approximate=...) names them.
enum class GeluApproximation {
  none,  // exact: 0.5 x (1 + erf(x / sqrt(2)))                       approximate='none'
  tanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))           approximate='tanh'
};
Tensor gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::none);

Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);

// min(max(x, lo), hi); a missing bound is not applied. The gradient passes
// where lo <= x <= hi (bounds included, as PyTorch).
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);

// cond ? a : b, broadcasting all three; cond is a bool tensor.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` where mask is true; mask (bool) broadcasts to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace braid
