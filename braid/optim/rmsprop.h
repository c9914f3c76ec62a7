// RMSProp (Tieleman & Hinton, 2012), the update of torch.optim.RMSprop:
//   g += wd * p;  s = alpha s + (1 - alpha) g^2
//   centered: a = alpha a + (1 - alpha) g;  denom = sqrt(s - a^2) + eps
//   else:     denom = sqrt(s) + eps
//   momentum > 0: b = momentum b + g / denom;  p -= lr b
//   else:         p -= lr g / denom
#pragma once

#include "braid/optim/optimizer.h"

namespace braid::optim {

struct RMSPropOptions {
  double lr = 0.01;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
};

class RMSProp final : public Optimizer {
 public:
  RMSProp(std::vector<Tensor> params, RMSPropOptions options);
  void step() override;
  std::string name() const override { return "rmsprop"; }

 protected:
  nlohmann::json hyper_parameters() const override;
  void set_hyper_parameters(const nlohmann::json& j) override;

 private:
  RMSPropOptions o_;
};

}  // namespace braid::optim
