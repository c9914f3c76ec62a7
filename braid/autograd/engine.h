// backward(): one walk over the recorded graph.
#pragma once

#include <functional>

#include "braid/tensor/tensor.h"

namespace braid::autograd {

// Accumulates d(root)/d(leaf) into every leaf's grad. `grad_output` defaults
// to 1 for a one-element root. Nodes run newest first once all gradients
// flowing into them are summed; a leaf's grad-ready hooks run the moment its
// last contribution arrives, while the rest of the graph is still pending.
void backward(const Tensor& root, const Tensor& grad_output = Tensor());

// How the engine sums, copies, clones and converts gradients. The defaults are
// the CPU kernels; the ops layer installs its registry ops here so that these
// steps, too, are seen by whoever observes op calls (graph capture).
struct GradArithmetic {
  void (*add_into)(const Tensor& dst, const Tensor& src) = nullptr;
  void (*copy_into)(const Tensor& dst, const Tensor& src) = nullptr;
  Tensor (*clone)(const Tensor& x) = nullptr;
  Tensor (*cast)(const Tensor& x, DType dtype) = nullptr;
};
void set_grad_arithmetic(const GradArithmetic& arithmetic);

// Registers fn to run when `param`'s gradient is final in each backward pass.
void on_grad_ready(const Tensor& param, std::function<void(Tensor& grad)> fn);

}  // namespace braid::autograd

namespace braid {
using autograd::backward;
}
