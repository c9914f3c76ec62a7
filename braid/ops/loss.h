// Losses, each reduced by the mean over the batch (PyTorch's default
// reduction='mean'); results are 0-d tensors. Differentiable in f32/f64.
#pragma once

#include "braid/tensor/tensor.h"

namespace braid {

// Fused log_softmax + NLL: mean_i -log_softmax(logits)[i, targets[i]].
// logits [N, C], targets i64 [N] with values in [0, C). The backward is
// (softmax(logits) - onehot(targets)) / N, computed from the saved log-probs.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);

// mean_i -log_probs[i, targets[i]]; log_probs [N, C], targets i64 [N].
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets);

// mean((input - target)^2); shapes must match.
Tensor mse_loss(const Tensor& input, const Tensor& target);

// mean(max(x, 0) - x y + log(1 + exp(-|x|))), the numerically stable form of
// binary cross-entropy on sigmoid(x); shapes must match. Differentiable in
// both arguments.
Tensor bce_with_logits(const Tensor& logits, const Tensor& targets);

}  // namespace braid
