// dst += src for floating tensors of one shape: gradient accumulation needs it
// below the ops layer.
#pragma once

#include "braid/tensor/tensor.h"

namespace braid::cpu {

void add_into(const Tensor& dst, const Tensor& src);

}  // namespace braid::cpu
