// Normalisation layers over braid/ops/norm.h.
#pragma once

#include "braid/nn/module.h"

namespace braid::nn {

struct BatchNormLayerOptions {
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) running + momentum batch
  bool affine = true;     // learnable weight (ones) and bias (zeros)
};

// Per-channel normalisation of [N, C, H, W] with batch statistics in training
// and running statistics (buffers running_mean, running_var) in eval mode.
class BatchNorm2d final : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, BatchNormLayerOptions options = {});
  Tensor forward(const Tensor& x) override;

 private:
  BatchNormLayerOptions o_;
  Tensor weight_, bias_, running_mean_, running_var_;
};

// Normalises the trailing dims `shape` of x; weight ones, bias zeros.
class LayerNorm final : public Module {
 public:
  explicit LayerNorm(Shape shape, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;

 private:
  Shape shape_;
  double eps_;
  Tensor weight_, bias_;
};

}  // namespace braid::nn
