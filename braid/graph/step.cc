#include "braid/graph/step.h"

#include <algorithm>

#include "braid/autograd/engine.h"
#include "braid/graph/capture.h"
#include "braid/graph/executor.h"
#include "braid/graph/partition.h"
#include "braid/graph/passes.h"
#include "braid/parallel/pipeline/partition.h"

namespace braid::graph {

namespace {

Tensor eager_step(nn::Module& model, optim::Optimizer& opt, const LossFn& loss_fn, const Tensor& x, const Tensor& y) {
  opt.zero_grad(true);
  Tensor loss = loss_fn(model(x), y);
  backward(loss);
  opt.step();
  return loss;
}

// Records `step` with the batch, the parameters, the optimizer's buffers
// and scalars as inputs, in that order.
Graph record(nn::Module& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y,
             std::vector<Tensor>* bindings, const std::function<Tensor()>& step) {
  if (!opt.updates_through_ops()) {
    fail<ValueError>("capture: optimizer '{}' updates parameters with its own loops, not registry ops, so a captured "
                     "step would not contain its update (sgd, adam and adamw can be captured)",
                     opt.name());
  }
  Capture cap;
  auto bind = [&](const std::string& name, const Tensor& t) {
    cap.input(name, t);
    if (bindings) bindings->push_back(t);
  };
  bind("x", x);
  bind("y", y);
  for (const auto& [name, p] : model.named_parameters()) bind(name, p);
  for (const auto& [name, t] : opt.state_dict().tensors) bind("optimizer." + name, t);
  bind("optimizer.scalars", opt.scalars());
  Tensor loss;
  cap.record([&] { loss = step(); });
  cap.output("loss", loss);
  return cap.finish();
}

Graph record_step(nn::Module& model, optim::Optimizer& opt, const LossFn& loss_fn, const Tensor& x, const Tensor& y,
                  std::vector<Tensor>* bindings) {
  return record(model, opt, x, y, bindings, [&] { return eager_step(model, opt, loss_fn, x, y); });
}

// The nodes capture left unplaced (rank -1: the autograd engine's gradient
// sums and copies) go where the gradient that completes them was made: each
// value's origin is the newest placed node it derives from, and an unplaced
// node takes its newest origin's rank. A copy then moves to the rank of its
// readers when they agree (the sum it starts is made there).
void place_engine_ops(Graph& g, int fallback) {
  std::vector<int> origin(g.values().size(), -1);
  std::vector<bool> unplaced(g.nodes().size(), false);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    Node& n = g.mutable_nodes()[k];
    int newest = -1;
    for (int v : n.inputs) {
      if (v >= 0) newest = std::max(newest, origin[static_cast<size_t>(v)]);
    }
    if (n.rank < 0) {
      unplaced[k] = true;
      n.rank = newest >= 0 ? g.nodes()[static_cast<size_t>(newest)].rank : fallback;
    } else {
      newest = static_cast<int>(k);
    }
    for (int v : n.outputs) origin[static_cast<size_t>(v)] = newest;
  }
  std::vector<std::vector<int>> reader_ranks(g.values().size());
  for (const Node& n : g.nodes()) {
    for (int v : n.inputs) {
      if (v >= 0) reader_ranks[static_cast<size_t>(v)].push_back(n.rank);
    }
  }
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    Node& n = g.mutable_nodes()[k];
    if (!unplaced[k] || n.op->name != "clone") continue;
    const auto& ranks = reader_ranks[static_cast<size_t>(n.outputs[0])];
    if (!ranks.empty() && std::all_of(ranks.begin(), ranks.end(), [&](int r) { return r == ranks[0]; })) n.rank = ranks[0];
  }
}

}  // namespace

TrainingStep::TrainingStep(nn::Module& model, optim::Optimizer& optimizer, LossFn loss, const Tensor& x,
                           const Tensor& y, bool simplify)
    : optimizer_(optimizer) {
  if (optimizer.steps() == 0) eager_step(model, optimizer, loss, x, y);
  graph_ = record_step(model, optimizer, loss, x, y, &bindings_);
  if (simplify) graph_ = graph::simplify(graph_);
  executor_ = std::make_unique<Executor>(graph_);
  x_ = graph_.input_index("x");
  y_ = graph_.input_index("y");
}

TrainingStep::~TrainingStep() = default;

Tensor TrainingStep::run(const Tensor& x, const Tensor& y) {
  bindings_[static_cast<size_t>(x_)] = x;
  bindings_[static_cast<size_t>(y_)] = y;
  optimizer_.refresh_scalars();
  Tensor loss = executor_->run(bindings_).at(0);
  optimizer_.count_step();
  return loss;
}

namespace {

// Runs `capture` with every parameter's memory swapped for a meta
// placeholder; puts the real memory back afterwards, whatever happens. The
// optimizer's state is put back too (a meta step makes meta buffers and
// counts a step).
Graph capture_on_meta(nn::Module& model, optim::Optimizer& optimizer, const std::function<Graph()>& capture) {
  std::vector<std::pair<Tensor, Tensor>> saved;
  for (const auto& [name, p] : model.named_parameters()) {
    saved.emplace_back(p, p.detach());
    p.set_data(Tensor::empty(p.shape(), p.dtype(), Device::meta));
  }
  struct Restore {
    std::vector<std::pair<Tensor, Tensor>>& saved;
    optim::Optimizer& optimizer;
    optim::OptimizerState state;
    ~Restore() {
      for (auto& [p, real] : saved) {
        p.set_data(real);
        p.set_grad(Tensor());
      }
      optimizer.load_state_dict(state);
    }
  } restore{saved, optimizer, optimizer.state_dict()};
  return capture();
}

// capture_staged_step's body; `layer_outputs` as capture_staged_step_meta's.
Graph record_staged(nn::Sequential& model, optim::Optimizer& optimizer, const LossFn& loss_fn, const Tensor& x,
                    const Tensor& y, const std::vector<int>& stages, std::vector<Tensor>* bindings,
                    std::vector<op::TensorMeta>* layer_outputs) {
  const auto& layers = model.children();
  if (stages.size() != layers.size()) {
    fail<ValueError>("capture_staged_step: {} stages for {} layers", stages.size(), layers.size());
  }
  Graph g = record(model, optimizer, x, y, bindings, [&] {
    optimizer.zero_grad(true);
    Tensor h = x;
    for (size_t i = 0; i < layers.size(); ++i) {
      op::Placement stage(stages[i]);
      h = (*layers[i].second)(h);
      if (layer_outputs) layer_outputs->push_back(op::meta_of(h));
    }
    op::Placement last(stages.back());
    Tensor loss = loss_fn(h, y);
    {
      // Backward ops take their forward's rank; what the engine adds between
      // them (gradient sums, copies) is left unplaced here (place_engine_ops).
      op::Placement unplaced(-1);
      backward(loss);
    }
    optimizer.step();
    return loss;
  });
  place_engine_ops(g, stages.back());
  place_state_updates(g);
  return g;
}

}  // namespace

Graph capture_training_step_meta(nn::Module& model, optim::Optimizer& optimizer, LossFn loss, const Shape& x_shape,
                                 DType x_dtype, const Shape& y_shape, DType y_dtype) {
  return capture_on_meta(model, optimizer, [&] {
    const Tensor x = Tensor::empty(x_shape, x_dtype, Device::meta);
    const Tensor y = Tensor::empty(y_shape, y_dtype, Device::meta);
    return record_step(model, optimizer, loss, x, y, nullptr);
  });
}

std::vector<int> stages_by_parameters(const nn::Sequential& model, int ranks) {
  const std::vector<int> starts =
      parallel::pipeline::balanced_starts(parallel::pipeline::parameter_costs(model), ranks);
  std::vector<int> stages(model.children().size(), 0);
  for (size_t layer = 0; layer < stages.size(); ++layer) {
    for (size_t s = 0; s < starts.size(); ++s) {
      if (static_cast<int>(layer) >= starts[s]) stages[layer] = static_cast<int>(s);
    }
  }
  return stages;
}

Graph capture_staged_step(nn::Sequential& model, optim::Optimizer& optimizer, LossFn loss_fn, const Tensor& x,
                          const Tensor& y, const std::vector<int>& stages, std::vector<Tensor>* bindings) {
  return record_staged(model, optimizer, loss_fn, x, y, stages, bindings, nullptr);
}

Graph capture_staged_step_meta(nn::Sequential& model, optim::Optimizer& optimizer, LossFn loss, const Shape& x_shape,
                               DType x_dtype, const Shape& y_shape, DType y_dtype, const std::vector<int>& stages,
                               std::vector<op::TensorMeta>* layer_outputs) {
  return capture_on_meta(model, optimizer, [&] {
    const Tensor x = Tensor::empty(x_shape, x_dtype, Device::meta);
    const Tensor y = Tensor::empty(y_shape, y_dtype, Device::meta);
    return record_staged(model, optimizer, loss, x, y, stages, nullptr, layer_outputs);
  });
}

}  // namespace braid::graph
