// Convolution and pooling layers over [n, c, h, w] tensors.
#pragma once

#include "braid/base/rng.h"
#include "braid/nn/module.h"
#include "braid/ops/conv.h"
#include "braid/ops/pool.h"
#include "braid/ops/reduce.h"

namespace braid::nn {

struct Conv2dLayerOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  bool bias = true;
};

// Weight [out, in / groups, kh, kw] and bias [out], both ~ U(-1/sqrt(fan_in),
// 1/sqrt(fan_in)) with fan_in = in / groups * kh * kw (PyTorch's default
// distribution; see init.h), weight drawn first.
class Conv2d final : public Module {
 public:
  Conv2d(int64_t in, int64_t out, std::array<int64_t, 2> kernel, Generator& gen, Conv2dLayerOptions options = {});
  Tensor forward(const Tensor& x) override;
  // Forward with `weight` in place of this layer's own (weight normalisation).
  Tensor forward_with(const Tensor& x, const Tensor& weight) const;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Tensor weight_, bias_;
  Conv2dOptions conv_;
};

class MaxPool2d final : public Module {
 public:
  explicit MaxPool2d(Pool2dOptions options) : o_(options) {}
  Tensor forward(const Tensor& x) override { return max_pool2d(x, o_); }

 private:
  Pool2dOptions o_;
};

class AvgPool2d final : public Module {
 public:
  explicit AvgPool2d(Pool2dOptions options) : o_(options) {}
  Tensor forward(const Tensor& x) override { return avg_pool2d(x, o_); }

 private:
  Pool2dOptions o_;
};

// [n, c, h, w] -> [n, c]: the mean of each channel's plane. What
// torch.nn.AdaptiveAvgPool2d((1, 1)) followed by flatten(1) computes (the
// head of a ResNet), in one module so a Sequential can hold it.
class GlobalAvgPool2d final : public Module {
 public:
  Tensor forward(const Tensor& x) override {
    if (x.ndim() != 4) fail<ValueError>("GlobalAvgPool2d: expects [N, C, H, W], got {}", to_string(x.shape()));
    return mean(x, {2, 3});
  }
};

}  // namespace braid::nn
