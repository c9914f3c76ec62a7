// What the graph passes share: which values a later in-place node writes, and
// Rebuild, which copies a graph while a pass drops, replaces or adds nodes.
#pragma once

#include <map>
#include <vector>

#include "braid/graph/graph.h"

namespace braid::graph {

// Values whose memory a later in-place node writes (directly or through a
// view): two such values are never the same value, however they were made,
// and such a value is never a constant.
std::vector<bool> written_later(const Graph& g);
bool writes_later(const Node& n, const std::vector<bool>& written);

// How many nodes read each value, counting graph outputs and updates as readers.
std::vector<int> readers(const Graph& g);

// Copies `g` keeping the nodes a pass copies, with every read of value v
// redirected to substitute(v) (an earlier value, or a new constant made by
// `constant`). Inputs keep their order; constants and results are renumbered.
class Rebuild {
 public:
  explicit Rebuild(const Graph& g);

  // The new id of old value v (constants are copied on first use).
  int value(int v);
  void replace(int old_value, int by_old_value) { replaced_[old_value] = by_old_value; }
  void make_constant(int old_value, Tensor t) { new_constants_[old_value] = std::move(t); }
  void copy_node(const Node& n);
  // A node the old graph did not have, reading old values `inputs` and
  // standing for old values `outputs` from now on.
  void add_node(const op::OpDef& op, op::Attrs attrs, const std::vector<int>& inputs, const std::vector<int>& outputs,
                int rank);
  Graph finish();

 private:
  const Graph& g_;
  Graph out_;
  std::vector<int> map_;
  std::map<int, int> replaced_;
  std::map<int, Tensor> new_constants_;
};

}  // namespace braid::graph
