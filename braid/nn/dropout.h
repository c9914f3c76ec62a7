// Dropout and Embedding layers.
#pragma once

#include "braid/base/rng.h"
#include "braid/nn/module.h"

namespace braid::nn {

// Zeroes elements with probability p in training mode (identity in eval).
// The mask comes from `gen` (null: the thread's dropout_generator()); a
// trainer passes its own generator so the checkpointed RNG state replays it.
class Dropout final : public Module {
 public:
  explicit Dropout(double p, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  double p() const { return p_; }
  Generator* generator() const { return gen_; }

 private:
  double p_;
  Generator* gen_;
};

// Rows of weight [num, dim] (~ N(0, 1), as PyTorch) picked by i64 indices:
// [...] -> [..., dim].
class Embedding final : public Module {
 public:
  Embedding(int64_t num, int64_t dim, Generator& gen);
  Tensor forward(const Tensor& indices) override;
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;
};

}  // namespace braid::nn
