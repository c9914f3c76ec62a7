// Ops on whole tensors that are not arithmetic: dtype conversion, copies and
// the in-place writes the autograd engine and the optimizers make. They go
// through the registry like every other op, so a captured step sees them.
#pragma once

#include "braid/tensor/tensor.h"

namespace braid {

// x in `dtype` (x itself when it already is); differentiable, the gradient
// converted back.
Tensor cast(const Tensor& x, DType dtype);
// x's values in a fresh contiguous tensor; differentiable.
Tensor clone(const Tensor& x);
// dst = src (shapes equal; dtypes may differ), in place; not differentiable.
void copy_(const Tensor& dst, const Tensor& src);
// dst += src (same shape and dtype), in place; not differentiable.
void accumulate_(const Tensor& dst, const Tensor& src);

}  // namespace braid
