// LAMB: layer-wise adaptive moments (You et al., 2020, "Large Batch
// Optimization for Deep Learning: Training BERT in 76 minutes", algorithm 2,
// with Adam's bias correction). Per parameter tensor, t = step number:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   r = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * p
//   trust = ||p|| / ||r||                    (1 when either is 0)
//   p -= lr * trust * r
// PyTorch has no LAMB; the test checks it against this formula written in torch.
#pragma once

#include "braid/optim/optimizer.h"

namespace braid::optim {

struct LAMBOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0;
};

class LAMB final : public Optimizer {
 public:
  LAMB(std::vector<Tensor> params, LAMBOptions options);
  void step() override;
  std::string name() const override { return "lamb"; }

 protected:
  nlohmann::json hyper_parameters() const override;
  void set_hyper_parameters(const nlohmann::json& j) override;

 private:
  LAMBOptions o_;
};

}  // namespace braid::optim
