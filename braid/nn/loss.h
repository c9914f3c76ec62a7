// Loss functions as callables (mean reduction, as PyTorch's defaults), thin
// wrappers over braid/ops/loss.h so a trainer can hold "a loss" by value.
// Classification losses accept logits of any rank [..., C] with targets
// [...]: leading dims are flattened (a language model's [B, T, V] logits and
// [B, T] targets).
#pragma once

#include <functional>
#include <string>

#include "braid/tensor/tensor.h"

namespace braid::nn {

using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;

Tensor cross_entropy_loss(const Tensor& logits, const Tensor& targets);
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets);
Tensor mse_loss(const Tensor& output, const Tensor& target);
Tensor bce_with_logits_loss(const Tensor& logits, const Tensor& targets);

// "cross_entropy", "nll", "mse", "bce_with_logits"; ValueError otherwise.
LossFn loss_by_name(const std::string& name);

}  // namespace braid::nn
