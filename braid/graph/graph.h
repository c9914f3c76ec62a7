// The dataflow graph: a training step as a directed acyclic graph of registry
// ops over values (static single assignment: every value is written once).
//
// A value is a graph input (bound by the caller each run: parameters,
// optimizer state, the batch, the learning rate), a constant (its tensor is
// held by the graph), or an output of a node. An in-place op (an optimizer
// update, a gradient accumulation) reads the value it writes and produces a
// new value that shares its memory; `updates` says which input a run leaves
// updated, so running a captured step again is the next step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "braid/ops/registry.h"

namespace braid::graph {

enum class ValueKind : uint8_t { input, constant, result };

struct Value {
  op::TensorMeta meta;
  ValueKind kind = ValueKind::result;
  int producer = -1;   // node index for a result
  int output = 0;      // which output of the producer
  std::string name;    // inputs and outputs have names; others may not
};

struct Node {
  const op::OpDef* op = nullptr;
  op::Attrs attrs;
  std::vector<int> inputs;   // value ids; -1 for an omitted optional input
  std::vector<int> outputs;  // value ids
  int rank = 0;              // placement (partition.h)
};

class Graph {
 public:
  // A value the caller binds on every run.
  int add_input(std::string name, op::TensorMeta meta);
  // A value the graph holds (a copy of `value` is not made: do not mutate it).
  int add_constant(Tensor value, std::string name = "");
  // A node; its outputs' shapes come from the op's inference rule. Returns the
  // node's index. Inputs must already exist (so nodes stay in a valid order).
  int add_node(const op::OpDef& op, op::Attrs attrs, std::vector<int> inputs);
  // Names `value` as an output of the graph.
  void add_output(std::string name, int value);
  // After a run, input `input` holds `value` (an in-place result on its memory).
  void add_update(int input, int value);

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<std::pair<std::string, int>>& outputs() const { return outputs_; }
  const std::map<int, int>& updates() const { return updates_; }
  const std::map<int, Tensor>& constants() const { return constants_; }
  const Value& value(int id) const { return values_.at(static_cast<size_t>(id)); }
  // The node that makes value `id`; null for an input or a constant.
  const Node* producer(int id) const {
    const Value& v = value(id);
    return v.kind == ValueKind::result ? &nodes_[static_cast<size_t>(v.producer)] : nullptr;
  }
  // The input's position among inputs(), by name; -1 when there is none.
  int input_index(const std::string& name) const;

  // Checks that every reference is in range and every node's inputs come
  // before it; throws ValueError naming the first broken node.
  void validate() const;
  // One line per value and node: "%7 = matmul(%3, %5) [f32 [64, 10]]".
  std::string to_text() const;

 private:
  int add_value(Value v);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<std::pair<std::string, int>> outputs_;
  std::map<int, int> updates_;
  std::map<int, Tensor> constants_;
};

// A node's input metas (absent for omitted inputs) and output metas.
std::vector<op::TensorMeta> input_metas(const Graph& g, const Node& n);
std::vector<op::TensorMeta> output_metas(const Graph& g, const Node& n);

}  // namespace braid::graph
