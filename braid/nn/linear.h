// Linear: y = x W^T + b, W [out, in], b [out]; x [..., in] -> y [..., out].
#pragma once

#include "braid/base/rng.h"
#include "braid/nn/module.h"

namespace braid::nn {

struct LinearOptions {
  bool bias = true;
};

class Linear final : public Module {
 public:
  // Weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)) from gen (PyTorch's default
  // distribution; see init.h), weight drawn first.
  Linear(int64_t in, int64_t out, Generator& gen, LinearOptions options = {});
  Tensor forward(const Tensor& x) override;
  // Forward with `weight` in place of this layer's own (weight normalisation).
  Tensor forward_with(const Tensor& x, const Tensor& weight) const;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Tensor weight_, bias_;
};

}  // namespace braid::nn
