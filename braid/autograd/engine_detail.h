// The engine's gradient bookkeeping, shared with the other walks over the
// graph in this layer (deferred.h); not for code outside braid/autograd.
#pragma once

#include <cstdint>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::autograd::detail {

// The gradient a backward from `root` starts with: grad_output, or ones for
// a one-element root; refuses a root that needs no gradient and a
// grad_output of another shape.
Tensor root_seed(const Tensor& root, const Tensor& grad_output);

// sum += g, cloning `sum` before the first in-place add (`owned` tracks it),
// so a gradient one node handed over is never modified under another.
void add_grad(Tensor& sum, bool& owned, Tensor g);

// Adds the final gradient of one backward pass into a leaf's grad and runs
// its grad-ready hooks.
void accumulate_leaf(const Tensor& leaf, Tensor g);

// While alive, nodes are applied for the inputs `only` marks (null: all):
// what autograd::applying_only() returns (deferred.h). A backward() clears
// it for its own walk, so a node whose backward runs a nested backward (a
// recomputation) applies that graph whole.
class ApplyOnly {
 public:
  explicit ApplyOnly(const std::vector<uint8_t>* only);
  ~ApplyOnly();
  ApplyOnly(const ApplyOnly&) = delete;
  ApplyOnly& operator=(const ApplyOnly&) = delete;

 private:
  const std::vector<uint8_t>* previous_;
};

}  // namespace braid::autograd::detail
