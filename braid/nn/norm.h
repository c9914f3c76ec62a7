// Normalisation layers over braid/ops/norm.h.
#pragma once

#include "braid/nn/module.h"
#include "braid/ops/norm.h"

namespace braid::nn {

struct BatchNormLayerOptions {
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) running + momentum batch
  bool affine = true;     // learnable weight (ones) and bias (zeros)
  // Ghost batch norm (Hoffer et al., 2017): in training, normalise each run of
  // `ghost_batch` examples with its own statistics (the last run may be
  // shorter), each updating the running statistics in turn. 0: the whole batch.
  int64_t ghost_batch = 0;
};

// Per-channel normalisation of [N, C, H, W] with batch statistics in training
// and running statistics (buffers running_mean, running_var) in eval mode.
class BatchNorm2d final : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, BatchNormLayerOptions options = {});
  Tensor forward(const Tensor& x) override;

  // Synchronised batch norm: training statistics over the batch of every
  // replica, summed by `across` (parallel::synchronize_batch_norm sets it to
  // a differentiable all-reduce over the data axis). Not with ghost batches.
  void set_across_replicas(BatchSum across);

 private:
  BatchNormLayerOptions o_;
  Tensor weight_, bias_, running_mean_, running_var_;
  BatchSum across_;
};

// Normalises the trailing dims `shape` of x; weight ones, bias zeros.
class LayerNorm final : public Module {
 public:
  explicit LayerNorm(Shape shape, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  const Shape& normalized_shape() const { return shape_; }
  double eps() const { return eps_; }

 private:
  Shape shape_;
  double eps_;
  Tensor weight_, bias_;
};

}  // namespace braid::nn
