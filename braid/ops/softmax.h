// softmax and log_softmax along one dim (max-subtracted, sums in double).
// Differentiable in f32/f64.
#pragma once

#include "braid/tensor/tensor.h"

namespace braid {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace braid
