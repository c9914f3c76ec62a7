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

// Knowledge distillation (Hinton, Vinyals & Dean, 2015), mean over N rows:
//
//   alpha * T^2 * KL(teacher_probs || softmax(student_logits / T))
//     + (1 - alpha) * cross_entropy(student_logits, target)
//
// student_logits [N, C]; teacher_probs [N, C], each row a distribution (the
// teacher's softmax at temperature T, so soft and hard terms see the same
// T; zero entries add nothing); target i64 [N]. The soft term's gradient is
// alpha * T / N * (softmax(z / T) - teacher_probs), which shrinks as 1 / T
// and, for logits of zero mean, tends to alpha / (N C) * (z - z_teacher) as T
// grows (matching logits); T^2 keeps it on the scale of the hard term's. The
// teacher is treated as constant (no gradient reaches it). Written in
// primitives (log_softmax, mul, sum, cross_entropy), so its backward is
// theirs. ValueError for shapes or dtypes that do not match, T <= 0 or
// alpha outside [0, 1].
Tensor distillation_loss(const Tensor& student_logits, const Tensor& teacher_probs, const Tensor& target,
                         double temperature, double alpha);

// "cross_entropy", "nll", "mse", "bce_with_logits"; ValueError otherwise.
LossFn loss_by_name(const std::string& name);

}  // namespace braid::nn
