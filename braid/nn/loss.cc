#include "braid/nn/loss.h"

#include "braid/ops/loss.h"
#include "braid/ops/shape.h"

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

LossFn loss_by_name(const std::string& name) {
  if (name == "cross_entropy") return cross_entropy_loss;
  if (name == "nll") return nll_loss;
  if (name == "mse") return mse_loss;
  if (name == "bce_with_logits") return bce_with_logits_loss;
  fail<ValueError>("unknown loss '{}' (expected cross_entropy, nll, mse or bce_with_logits)", name);
}

}  // namespace braid::nn
