// AdaGrad (Duchi et al., 2011), the update of torch.optim.Adagrad:
//   clr = lr / (1 + (t - 1) * lr_decay);  g += wd * p
//   s += g^2;  p -= clr * g / (sqrt(s) + eps)
#pragma once

#include "braid/optim/optimizer.h"

namespace braid::optim {

struct AdaGradOptions {
  double lr = 0.01;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
};

class AdaGrad final : public Optimizer {
 public:
  AdaGrad(std::vector<Tensor> params, AdaGradOptions options);
  void step() override;
  std::string name() const override { return "adagrad"; }

 protected:
  nlohmann::json hyper_parameters() const override;
  void set_hyper_parameters(const nlohmann::json& j) override;

 private:
  AdaGradOptions o_;
};

}  // namespace braid::optim
