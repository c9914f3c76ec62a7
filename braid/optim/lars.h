// LARS: layer-wise adaptive rate scaling (You, Gitman & Ginsburg, 2017,
// "Large Batch Training of Convolutional Networks", algorithm 1). Per
// parameter tensor, with w = ||p||, n = ||g||:
//   trust = eta * w / (n + wd * w + eps)    (1 when w or n is 0)
//   b = momentum * b + lr * trust * (g + wd * p)
//   p -= b
// PyTorch has no LARS; the test checks it against this formula written in torch.
#pragma once

#include "braid/optim/optimizer.h"

namespace braid::optim {

struct LARSOptions {
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 0;
  double eta = 0.001;  // trust coefficient
  double eps = 1e-8;
};

class LARS final : public Optimizer {
 public:
  LARS(std::vector<Tensor> params, LARSOptions options);
  void step() override;
  std::string name() const override { return "lars"; }

 protected:
  nlohmann::json hyper_parameters() const override;
  void set_hyper_parameters(const nlohmann::json& j) override;

 private:
  LARSOptions o_;
};

}  // namespace braid::optim
