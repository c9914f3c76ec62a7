// Normalisation layers as functions (braid/nn wraps them in modules). f32/f64.
// layer_norm is a fused row kernel (2 passes forward, 1 backward, instead of
// ~9 primitive passes each way) and is tested against the composite of
// primitives (docs/design.md, "Composite ops are written in primitives");
// batch_norm in training mode is a fused kernel too (3 passes forward, 2
// backward, tensor/cpu/batch_norm.h) on the CPU, and the composite in eval
// mode, across replicas and on other devices.
#pragma once

#include <functional>

#include "braid/tensor/tensor.h"

namespace braid {

// (x - mean) / sqrt(var + eps) * weight + bias over the trailing dims named by
// normalized_shape (biased variance, as PyTorch). weight/bias have
// normalized_shape and may be undefined (no affine).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// Sums a per-channel tensor over every replica that holds part of the batch,
// differentiably (synchronised batch norm; parallel/sync_batch_norm.h).
using BatchSum = std::function<Tensor(const Tensor&)>;

struct BatchNormOptions {
  bool training = true;   // batch statistics (and running-stat update) vs running statistics
  double momentum = 0.1;  // running = (1 - momentum) * running + momentum * batch
  double eps = 1e-5;
  // Training: when set, the statistics are those of the whole batch across
  // replicas: mean = sum_all(x) / n_all, then var = sum_all((x - mean)^2) / n_all.
  BatchSum across_replicas{};
};

// x [N, C, ...] normalised per channel C. Training: batch mean and biased
// variance over every dim but 1; running_mean/running_var ([C], may be
// undefined) are updated in place with the unbiased variance, as PyTorch.
// Eval: the running statistics (then required). weight/bias [C] or undefined.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), BatchNormOptions options = {});

// Weight normalisation (Salimans & Kingma, 2016): g * v / ||v||, the norm of
// each output unit's weights (every dim of v but 0). v [out, ...], g [out, 1,
// ...] (the shape torch.nn.utils.weight_norm gives weight_g) or [out].
Tensor weight_norm(const Tensor& v, const Tensor& g);
// ||v|| per output unit (over every dim but 0), shaped [out, 1, ...]: the g
// that makes weight_norm(v, g) equal v.
Tensor weight_norm_lengths(const Tensor& v);

}  // namespace braid
