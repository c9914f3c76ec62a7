// Adam (Kingma & Ba, 2015) and AdamW (Loshchilov & Hutter, 2019), the same
// updates as torch.optim.Adam / AdamW (amsgrad off). With t = step number:
//   Adam:  g += wd * p                       (L2 penalty through the gradient)
//   AdamW: p *= 1 - lr * wd                  (decoupled decay)
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#pragma once

#include "braid/optim/optimizer.h"

namespace braid::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay = false);
  void step() override;
  bool updates_through_ops() const override { return true; }
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }

 protected:
  nlohmann::json hyper_parameters() const override;
  void set_hyper_parameters(const nlohmann::json& j) override;

 private:
  AdamOptions o_;
  bool decoupled_;
};

// AdamW's default weight decay is 0.01, as in PyTorch.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

class AdamW final : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions o)
      : Adam(std::move(params), {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps,
                                 .weight_decay = o.weight_decay},
             true) {}
};

}  // namespace braid::optim
