// Stochastic gradient descent with momentum, Nesterov momentum and L2 weight
// decay; the same update as torch.optim.SGD:
//   d = g + wd * p
//   b = d (first step) or momentum * b + (1 - dampening) * d
//   d = nesterov ? d + momentum * b : b          (when momentum > 0)
//   p -= lr * d
#pragma once

#include "braid/optim/optimizer.h"

namespace braid::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class SGD final : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  bool updates_through_ops() const override { return true; }
  std::string name() const override { return "sgd"; }

 protected:
  nlohmann::json hyper_parameters() const override;
  void set_hyper_parameters(const nlohmann::json& j) override;

 private:
  SGDOptions o_;
};

}  // namespace braid::optim
