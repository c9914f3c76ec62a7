// Weight normalisation (Salimans & Kingma, 2016) of a Linear or Conv2d layer:
// its weight becomes g * v / ||v||, the length g and the direction v of each
// output unit's weights learnt separately, which makes the layer's scale
// independent of the batch (no batch statistics, unlike batch norm).
//
// Parameters as torch.nn.utils.weight_norm(layer) leaves them, so state dicts
// line up: bias (the layer's own), weight_g [out, 1, ...], weight_v. They
// start at v = weight, g = ||weight||, so the layer computes what it did.
#pragma once

#include <functional>
#include <memory>

#include "braid/nn/conv.h"
#include "braid/nn/linear.h"
#include "braid/nn/sequential.h"

namespace braid::nn {

class WeightNorm final : public Module {
 public:
  explicit WeightNorm(std::shared_ptr<Linear> layer);
  explicit WeightNorm(std::shared_ptr<Conv2d> layer);
  Tensor forward(const Tensor& x) override;
  // g * v / ||v||: the weight the layer runs with.
  Tensor weight() const;

 private:
  WeightNorm(const Tensor& weight, const Tensor& bias, std::shared_ptr<Module> layer,
             std::function<Tensor(const Tensor&, const Tensor&)> run);

  std::shared_ptr<Module> layer_;  // not a child: its weight is replaced, its bias registered here
  std::function<Tensor(const Tensor&, const Tensor&)> run_;
  Tensor g_, v_;
};

// Puts every Linear and Conv2d layer of `model` under weight normalisation,
// keeping their names; returns how many.
int apply_weight_norm(Sequential& model);

}  // namespace braid::nn
