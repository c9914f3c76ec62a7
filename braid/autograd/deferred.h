// A backward pass in two parts, for pipeline schedules that defer the
// weights' gradients (docs/pipeline.md, "zero_bubble"): first everything a
// previous pipeline stage waits for (the gradients of the activations, down
// to the stage's input), then, later, the parameters' gradients.
//
// The split is by edge: a node's inputs that are leaves other than the ones
// asked for now (the parameters) are left out of the first part; the node is
// kept, with the gradient of its output, and applied again for those inputs
// only in the second. Op-registry backward rules compute only the inputs
// asked for (GradArgs::needs), so a linear layer runs dX = g W in the first
// part and dW = g^T X in the second, and the two parts cost what one backward
// does. Other nodes compute every input's gradient both times and keep the
// part asked for (correct, not faster). Until run(), the kept nodes hold
// their saved inputs and output gradients alive.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "braid/autograd/node.h"

namespace braid::autograd {

class DeferredWeightGrads {
 public:
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  // Computes every deferred gradient, sums each leaf's parts and adds them
  // into its grad (grad-ready hooks run then, once per leaf); then empty.
  void run();

 private:
  friend DeferredWeightGrads backward_deferring_weights(const Tensor&, const Tensor&, std::span<const Tensor>);
  struct Entry {
    std::shared_ptr<Node> node;
    Tensor grad;                // of the node's output
    std::vector<uint8_t> only;  // the inputs (leaves) left for later
  };
  std::vector<Entry> entries_;
};

// While a node is applied for only some of its inputs, which (1 per input
// whose gradient is wanted now, by the node's position of its inputs); null
// otherwise. Backward rules that honour it (the op registry's) skip the
// products of the others.
const std::vector<uint8_t>* applying_only();

// backward(root, grad_output) for every gradient but those of leaves not in
// `now`: the leaves in `now` (a stage's input) get theirs at once; the rest
// (the parameters) wait in the result until its run().
DeferredWeightGrads backward_deferring_weights(const Tensor& root, const Tensor& grad_output,
                                               std::span<const Tensor> now);

}  // namespace braid::autograd
