#include "braid/graph/executor.h"

#include "braid/autograd/node.h"

namespace braid::graph {

Executor::Executor(const Graph& graph) : graph_(graph) {
  graph.validate();
  last_use_.assign(graph.values().size(), -1);
  keep_.assign(graph.values().size(), false);
  for (size_t k = 0; k < graph.nodes().size(); ++k) {
    for (int v : graph.nodes()[k].inputs) {
      if (v >= 0) last_use_[static_cast<size_t>(v)] = static_cast<int>(k);
    }
  }
  for (const auto& [name, v] : graph.outputs()) keep_[static_cast<size_t>(v)] = true;
  for (const auto& [in, v] : graph.updates()) keep_[static_cast<size_t>(v)] = true;
}

std::vector<Tensor> Executor::run(const std::vector<Tensor>& inputs) {
  const Graph& g = graph_;
  if (inputs.size() != g.inputs().size()) {
    fail<ValueError>("graph run: {} inputs bound, the graph takes {}", inputs.size(), g.inputs().size());
  }
  std::vector<Tensor> values(g.values().size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.value(g.inputs()[i]);
    if (!(op::meta_of(inputs[i]) == v.meta)) {
      fail<ValueError>("graph run: input '{}' is {} {}, the graph expects {} {}", v.name, name(inputs[i].dtype()),
                       to_string(inputs[i].shape()), name(v.meta.dtype), to_string(v.meta.shape));
    }
    values[static_cast<size_t>(g.inputs()[i])] = inputs[i];
  }
  for (const auto& [id, t] : g.constants()) values[static_cast<size_t>(id)] = t;

  // The graph holds the backward pass as ops: nothing here is recorded again.
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> in;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node& n = g.nodes()[k];
    in.clear();
    for (int v : n.inputs) in.push_back(v < 0 ? Tensor() : values[static_cast<size_t>(v)]);
    std::vector<Tensor> out = op::call(*n.op, in, n.attrs);
    for (size_t i = 0; i < out.size(); ++i) {
      const auto v = static_cast<size_t>(n.outputs[i]);
      // A result nobody reads is dropped at once.
      if (last_use_[v] >= 0 || keep_[v]) values[v] = std::move(out[i]);
    }
    for (int v : n.inputs) {
      if (v >= 0 && last_use_[static_cast<size_t>(v)] == static_cast<int>(k) && !keep_[static_cast<size_t>(v)] &&
          g.value(v).kind == ValueKind::result) {
        values[static_cast<size_t>(v)] = Tensor();
      }
    }
  }
  std::vector<Tensor> outputs;
  for (const auto& [name, v] : g.outputs()) outputs.push_back(values[static_cast<size_t>(v)]);
  return outputs;
}

}  // namespace braid::graph
