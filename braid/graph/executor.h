// Runs a Graph: every node's op through the registry, in order, on the
// tensors bound to the graph's inputs. Values are dropped after their last
// reader, so the live set follows the graph rather than the eager program.
// In-place nodes write the bound tensors, so after a run each updated input
// holds its new value (a captured training step, run again, is the next step).
#pragma once

#include <vector>

#include "braid/graph/graph.h"

namespace braid::graph {

class Executor {
 public:
  explicit Executor(const Graph& graph);

  // `inputs` in the order of graph.inputs(), shapes and dtypes as declared.
  // Returns the graph's outputs in order.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  const Graph& graph() const { return graph_; }

 private:
  const Graph& graph_;
  std::vector<int> last_use_;  // per value: the last node reading it (-1: none)
  std::vector<bool> keep_;     // graph outputs and updates stay to the end
};

}  // namespace braid::graph
