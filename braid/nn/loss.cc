#include "braid/nn/loss.h"

#include <cmath>

#include "braid/ops/elementwise.h"
#include "braid/ops/loss.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/ops/softmax.h"

namespace braid::nn {

namespace {

// [..., C] logits and [...] targets -> [N, C] and [N].
std::pair<Tensor, Tensor> flatten_classes(const Tensor& logits, const Tensor& targets, const char* op) {
  if (logits.ndim() < 2 || targets.ndim() != logits.ndim() - 1) {
    fail<ValueError>("{}: expects logits [..., C] and targets [...], got {} and {}", op, to_string(logits.shape()),
                     to_string(targets.shape()));
  }
  if (logits.ndim() == 2) return {logits, targets};
  return {reshape(logits, {-1, logits.size(-1)}), reshape(targets, {-1})};
}

}  // namespace

Tensor cross_entropy_loss(const Tensor& logits, const Tensor& targets) {
  auto [l, t] = flatten_classes(logits, targets, "cross_entropy_loss");
  return braid::cross_entropy(l, t);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets) {
  auto [l, t] = flatten_classes(log_probs, targets, "nll_loss");
  return braid::nll_loss(l, t);
}

Tensor mse_loss(const Tensor& output, const Tensor& target) { return braid::mse_loss(output, target); }

Tensor bce_with_logits_loss(const Tensor& logits, const Tensor& targets) {
  return braid::bce_with_logits(logits, targets);
}

namespace {

// sum_i,c p log p / N over the nonzero entries of p [N, C] (the teacher's
// negative entropy: the part of KL(p || q) that does not depend on q), in double.
double mean_neg_entropy(const Tensor& probs) {
  const Tensor p = probs.to(Device::cpu).to(DType::f64).contiguous();  // summed on the host, in double
  const double* v = p.data<double>();
  double acc = 0;
  for (int64_t i = 0; i < p.numel(); ++i) {
    if (v[i] > 0) acc += v[i] * std::log(v[i]);
  }
  return acc / static_cast<double>(p.size(0));
}

}  // namespace

Tensor distillation_loss(const Tensor& student_logits, const Tensor& teacher_probs, const Tensor& target,
                         double temperature, double alpha) {
  if (student_logits.ndim() != 2 || teacher_probs.shape() != student_logits.shape()) {
    fail<ValueError>("distillation_loss: expects student logits [N, C] and teacher probabilities of the same shape, "
                     "got {} and {}", to_string(student_logits.shape()), to_string(teacher_probs.shape()));
  }
  if (teacher_probs.dtype() != student_logits.dtype()) {
    fail<ValueError>("distillation_loss: teacher probabilities are {}, student logits {}", name(teacher_probs.dtype()),
                     name(student_logits.dtype()));
  }
  if (!(temperature > 0)) fail<ValueError>("distillation_loss: temperature must be > 0, got {}", temperature);
  if (!(alpha >= 0 && alpha <= 1)) fail<ValueError>("distillation_loss: alpha must be in [0, 1], got {}", alpha);
  const Tensor p = teacher_probs.detach();
  const double n = static_cast<double>(student_logits.size(0));
  // KL(p || q) = sum p log p - sum p log q; only the second term has a gradient.
  const Tensor log_q = log_softmax(div(student_logits, temperature), 1);
  const Tensor kl = add(div(neg(sum(mul(p, log_q))), n), mean_neg_entropy(p));
  const Tensor hard = braid::cross_entropy(student_logits, target);
  return add(mul(kl, alpha * temperature * temperature), mul(hard, 1 - alpha));
}

LossFn loss_by_name(const std::string& name) {
  if (name == "cross_entropy") return cross_entropy_loss;
  if (name == "nll") return nll_loss;
  if (name == "mse") return mse_loss;
  if (name == "bce_with_logits") return bce_with_logits_loss;
  fail<ValueError>("unknown loss '{}' (expected cross_entropy, nll, mse or bce_with_logits)", name);
}

}  // namespace braid::nn
