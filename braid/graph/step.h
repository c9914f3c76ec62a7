// A whole training step — forward, loss, backward, optimizer update — as a
// graph, and running it in place of the eager step.
//
//   graph::TrainingStep step(model, optimizer, loss_fn, x0, y0);
//   for (auto [x, y] : batches) loss = step.run(x, y);
//
// The graph's inputs are the batch, every parameter, every optimizer buffer
// and the optimizer's per-step scalars (learning rate, step number), so the
// schedule keeps working; parameters and buffers are updated in place.
#pragma once

#include <functional>
#include <memory>

#include "braid/graph/graph.h"
#include "braid/nn/module.h"
#include "braid/nn/sequential.h"
#include "braid/optim/optimizer.h"

namespace braid::graph {

using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;
class Executor;

class TrainingStep {
 public:
  // Captures one step on (x, y). An optimizer that has not stepped yet first
  // takes one eager step on (x, y), so that its buffers exist to be inputs and
  // the captured update is the steady-state one (SGD's first momentum step
  // differs from the rest). Either way the model has advanced by the steps
  // taken, exactly as eager training would have.
  // The captured graph is simplified by the passes (passes.h) unless
  // `simplify` is false; they change nothing in the numbers.
  TrainingStep(nn::Module& model, optim::Optimizer& optimizer, LossFn loss, const Tensor& x, const Tensor& y,
               bool simplify = true);
  ~TrainingStep();

  // One step through the graph; returns the loss.
  Tensor run(const Tensor& x, const Tensor& y);

  const Graph& graph() const { return graph_; }
  // Tensors bound to the graph's inputs, in order (x and y as captured).
  const std::vector<Tensor>& bindings() const { return bindings_; }

 private:
  optim::Optimizer& optimizer_;
  Graph graph_;
  std::unique_ptr<Executor> executor_;
  std::vector<Tensor> bindings_;
  int x_ = -1, y_ = -1;  // positions of the batch among the inputs
};

// Captures a step without computing anything: the model's parameters and the
// batch are replaced by meta tensors of their shapes for the capture (the
// model is left as it was). For printing and analysing a step cheaply.
Graph capture_training_step_meta(nn::Module& model, optim::Optimizer& optimizer, LossFn loss, const Shape& x_shape,
                                 DType x_dtype, const Shape& y_shape, DType y_dtype);

// The rank of each layer when a sequential model is cut into `ranks`
// pipeline stages as the pipeline plan cuts it by default (contiguous runs
// of layers balanced by parameter count, parallel/pipeline/partition.h).
std::vector<int> stages_by_parameters(const nn::Sequential& model, int ranks);

// One step of a sequential model with layer i placed on rank stages[i] (the
// loss and the optimizer's scalars with the last stage; each backward op with
// its forward; each state update with the state's first reader), for
// partition(). Inputs and `bindings` as TrainingStep's; the step is taken.
Graph capture_staged_step(nn::Sequential& model, optim::Optimizer& optimizer, LossFn loss, const Tensor& x,
                          const Tensor& y, const std::vector<int>& stages, std::vector<Tensor>* bindings);

// capture_staged_step on the meta device, as capture_training_step_meta
// captures (nothing is computed, the model and optimizer are left as they
// were). `layer_outputs`, if given, receives each layer's output's shape and
// dtype (what a stage boundary sends).
Graph capture_staged_step_meta(nn::Sequential& model, optim::Optimizer& optimizer, LossFn loss, const Shape& x_shape,
                               DType x_dtype, const Shape& y_shape, DType y_dtype, const std::vector<int>& stages,
                               std::vector<op::TensorMeta>* layer_outputs = nullptr);

}  // namespace braid::graph
