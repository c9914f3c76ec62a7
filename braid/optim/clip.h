// Gradient clipping by global norm (as torch.nn.utils.clip_grad_norm_).
#pragma once

#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::optim {

// The L2 norm of all defined gradients taken together.
double grad_norm(const std::vector<Tensor>& params);

// Scales every gradient by max_norm / (norm + 1e-6) when that is below 1 and
// returns the norm before clipping (NaN/Inf when a gradient is not finite;
// gradients are then left untouched so the caller can report the step).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// The same rule with a norm computed elsewhere (a model sharded over ranks
// sums its parts' squares first): scales when max_norm / (norm + 1e-6) < 1.
void clip_grads_to(const std::vector<Tensor>& params, double norm, double max_norm);

}  // namespace braid::optim
