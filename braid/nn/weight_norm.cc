#include "braid/nn/weight_norm.h"

#include "braid/autograd/node.h"
#include "braid/ops/norm.h"

namespace braid::nn {

WeightNorm::WeightNorm(std::shared_ptr<Linear> layer)
    : WeightNorm(layer->weight(), layer->bias(), layer,
                 [l = layer.get()](const Tensor& x, const Tensor& w) { return l->forward_with(x, w); }) {}

WeightNorm::WeightNorm(std::shared_ptr<Conv2d> layer)
    : WeightNorm(layer->weight(), layer->bias(), layer,
                 [l = layer.get()](const Tensor& x, const Tensor& w) { return l->forward_with(x, w); }) {}

WeightNorm::WeightNorm(const Tensor& weight, const Tensor& bias, std::shared_ptr<Module> layer,
                       std::function<Tensor(const Tensor&, const Tensor&)> run)
    : layer_(std::move(layer)), run_(std::move(run)) {
  if (bias.defined()) register_parameter("bias", bias);
  autograd::NoGradGuard no_grad;
  g_ = register_parameter("weight_g", weight_norm_lengths(weight).contiguous());
  v_ = register_parameter("weight_v", weight);  // the layer's own tensor: no copy, and the layer no longer reads it
}

Tensor WeightNorm::weight() const { return weight_norm(v_, g_); }

Tensor WeightNorm::forward(const Tensor& x) { return run_(x, weight()); }

int apply_weight_norm(Sequential& model) {
  int n = 0;
  for (size_t i = 0; i < model.size(); ++i) {
    if (auto l = std::dynamic_pointer_cast<Linear>(model.layer(i))) {
      model.replace(i, std::make_shared<WeightNorm>(l));
      ++n;
    } else if (auto c = std::dynamic_pointer_cast<Conv2d>(model.layer(i))) {
      model.replace(i, std::make_shared<WeightNorm>(c));
      ++n;
    }
  }
  return n;
}

}  // namespace braid::nn
