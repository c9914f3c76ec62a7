// Parameter-free layers: activations and Flatten.
#pragma once

#include "braid/nn/module.h"
#include "braid/ops/activation.h"
#include "braid/ops/shape.h"

namespace braid::nn {

class ReLU final : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
};

class GELU final : public Module {
 public:
  explicit GELU(GeluApproximation approximate = GeluApproximation::none) : approximate_(approximate) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approximate_); }

 private:
  GeluApproximation approximate_;
};

class Tanh final : public Module {
 public:
  Tensor forward(const Tensor& x) override { return braid::tanh(x); }
};

// [n, d1, d2, ...] -> [n, d1 * d2 * ...] (a view when x is contiguous).
class Flatten final : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override { return flatten(x, start_, end_); }

 private:
  int64_t start_, end_;
};

}  // namespace braid::nn
