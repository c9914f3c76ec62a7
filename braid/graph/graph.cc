#include "braid/graph/graph.h"

#include <fmt/format.h>

namespace braid::graph {

int Graph::add_value(Value v) {
  values_.push_back(std::move(v));
  return static_cast<int>(values_.size()) - 1;
}

int Graph::add_input(std::string name, op::TensorMeta meta) {
  if (input_index(name) >= 0) fail<ValueError>("graph: two inputs named '{}'", name);
  const int id = add_value({std::move(meta), ValueKind::input, -1, 0, std::move(name)});
  inputs_.push_back(id);
  return id;
}

int Graph::add_constant(Tensor value, std::string name) {
  const int id = add_value({op::meta_of(value), ValueKind::constant, -1, 0, std::move(name)});
  constants_[id] = std::move(value);
  return id;
}

int Graph::add_node(const op::OpDef& op, op::Attrs attrs, std::vector<int> inputs) {
  std::vector<op::TensorMeta> in;
  for (int v : inputs) {
    if (v >= static_cast<int>(values_.size())) fail<ValueError>("graph: {} reads value %{} before it exists", op.name, v);
    in.push_back(v < 0 ? op::TensorMeta{{}, DType::f32, true} : values_[static_cast<size_t>(v)].meta);
  }
  std::vector<op::TensorMeta> out;
  if (op.effect == op::Effect::inplace) {
    for (int i : op.mutates) out.push_back(in.at(static_cast<size_t>(i)));
  } else {
    out = op.infer(in, attrs);
  }
  Node n{&op, std::move(attrs), std::move(inputs), {}, 0};
  const int index = static_cast<int>(nodes_.size());
  for (size_t i = 0; i < out.size(); ++i) {
    n.outputs.push_back(add_value({std::move(out[i]), ValueKind::result, index, static_cast<int>(i), ""}));
  }
  nodes_.push_back(std::move(n));
  return index;
}

void Graph::add_output(std::string name, int value) {
  if (value < 0 || value >= static_cast<int>(values_.size())) fail<ValueError>("graph: output '{}' names no value", name);
  outputs_.emplace_back(std::move(name), value);
}

void Graph::add_update(int input, int value) {
  if (input < 0 || input >= static_cast<int>(values_.size()) || values_[static_cast<size_t>(input)].kind != ValueKind::input) {
    fail<ValueError>("graph: an update must name an input, not %{}", input);
  }
  updates_[input] = value;
}

int Graph::input_index(const std::string& name) const {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (values_[static_cast<size_t>(inputs_[i])].name == name) return static_cast<int>(i);
  }
  return -1;
}

void Graph::validate() const {
  std::vector<int> defined_at(values_.size(), -2);  // -1: before every node
  for (size_t i = 0; i < values_.size(); ++i) {
    if (values_[i].kind != ValueKind::result) defined_at[i] = -1;
  }
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const Node& n = nodes_[k];
    if (n.op == nullptr) fail<ValueError>("graph: node {} has no op", k);
    if (n.op->inputs >= 0 && static_cast<int>(n.inputs.size()) != n.op->inputs) {
      fail<ValueError>("graph: node {} ({}) has {} inputs, the op takes {}", k, n.op->name, n.inputs.size(), n.op->inputs);
    }
    for (int v : n.inputs) {
      if (v < 0) continue;
      if (v >= static_cast<int>(values_.size()) || defined_at[static_cast<size_t>(v)] == -2) {
        fail<ValueError>("graph: node {} ({}) reads %{} before it is defined", k, n.op->name, v);
      }
    }
    for (int v : n.outputs) {
      if (v < 0 || v >= static_cast<int>(values_.size()) || values_[static_cast<size_t>(v)].producer != static_cast<int>(k)) {
        fail<ValueError>("graph: node {} ({}) lists %{} as an output it does not produce", k, n.op->name, v);
      }
      defined_at[static_cast<size_t>(v)] = static_cast<int>(k);
    }
  }
  for (const auto& [name, v] : outputs_) {
    if (defined_at.at(static_cast<size_t>(v)) == -2) fail<ValueError>("graph: output '{}' is never defined", name);
  }
}

namespace {
std::string meta_text(const op::TensorMeta& m) { return fmt::format("{} {}", name(m.dtype), to_string(m.shape)); }
}  // namespace

std::string Graph::to_text() const {
  std::string out;
  for (int id : inputs_) out += fmt::format("%{} = input \"{}\" [{}]\n", id, value(id).name, meta_text(value(id).meta));
  for (const auto& [id, t] : constants_) {
    out += fmt::format("%{} = constant{} [{}]\n", id, value(id).name.empty() ? "" : " \"" + value(id).name + "\"",
                       meta_text(value(id).meta));
  }
  for (const Node& n : nodes_) {
    std::string lhs, args;
    for (int v : n.outputs) lhs += (lhs.empty() ? "%" : ", %") + std::to_string(v);
    for (int v : n.inputs) args += (args.empty() ? "" : ", ") + (v < 0 ? std::string("none") : "%" + std::to_string(v));
    const std::string attrs = n.attrs.to_string();
    out += fmt::format("{} = {}({}){}{} [{}]\n", lhs, n.op->name, args, attrs.empty() ? "" : " {" + attrs + "}",
                       n.rank ? fmt::format(" @rank{}", n.rank) : "", meta_text(value(n.outputs.at(0)).meta));
  }
  for (const auto& [name, v] : outputs_) out += fmt::format("output \"{}\" = %{}\n", name, v);
  for (const auto& [in, v] : updates_) out += fmt::format("update \"{}\" <- %{}\n", value(in).name, v);
  return out;
}

std::vector<op::TensorMeta> input_metas(const Graph& g, const Node& n) {
  std::vector<op::TensorMeta> in;
  for (int v : n.inputs) in.push_back(v < 0 ? op::TensorMeta{{}, DType::f32, true} : g.value(v).meta);
  return in;
}

std::vector<op::TensorMeta> output_metas(const Graph& g, const Node& n) {
  std::vector<op::TensorMeta> out;
  for (int v : n.outputs) out.push_back(g.value(v).meta);
  return out;
}

}  // namespace braid::graph
