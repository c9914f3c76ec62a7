#include "braid/graph/rebuild.h"

#include <algorithm>

namespace braid::graph {

std::vector<bool> written_later(const Graph& g) {
  std::vector<int> root(g.values().size());
  for (size_t v = 0; v < root.size(); ++v) root[v] = static_cast<int>(v);
  std::vector<bool> written(g.values().size(), false);
  for (const Node& n : g.nodes()) {
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.op->effect == op::Effect::view && i == 0) root[static_cast<size_t>(n.outputs[i])] = root[static_cast<size_t>(n.inputs.at(0))];
      if (n.op->effect == op::Effect::inplace) {
        const int r = root[static_cast<size_t>(n.inputs.at(static_cast<size_t>(n.op->mutates[i])))];
        written[static_cast<size_t>(r)] = true;
        root[static_cast<size_t>(n.outputs[i])] = r;
      }
    }
  }
  for (size_t v = 0; v < root.size(); ++v) written[v] = written[static_cast<size_t>(root[v])];
  return written;
}

bool writes_later(const Node& n, const std::vector<bool>& written) {
  return std::any_of(n.outputs.begin(), n.outputs.end(), [&](int v) { return written[static_cast<size_t>(v)]; });
}

std::vector<int> readers(const Graph& g) {
  std::vector<int> count(g.values().size(), 0);
  for (const Node& n : g.nodes()) {
    for (int v : n.inputs) {
      if (v >= 0) ++count[static_cast<size_t>(v)];
    }
  }
  for (const auto& [name, v] : g.outputs()) ++count[static_cast<size_t>(v)];
  for (const auto& [in, v] : g.updates()) ++count[static_cast<size_t>(v)];
  return count;
}

Rebuild::Rebuild(const Graph& g) : g_(g), map_(g.values().size(), -1) {
  for (int id : g.inputs()) map_[static_cast<size_t>(id)] = out_.add_input(g.value(id).name, g.value(id).meta);
}

int Rebuild::value(int v) {
  if (v < 0) return -1;
  if (auto it = replaced_.find(v); it != replaced_.end()) return value(it->second);
  if (auto it = new_constants_.find(v); it != new_constants_.end()) {
    int& m = map_[static_cast<size_t>(v)];
    if (m < 0) m = out_.add_constant(it->second, g_.value(v).name);
    return m;
  }
  int& m = map_[static_cast<size_t>(v)];
  if (m < 0 && g_.value(v).kind == ValueKind::constant) m = out_.add_constant(g_.constants().at(v), g_.value(v).name);
  if (m < 0) fail<Error>("graph pass: value %{} is read before it is made", v);
  return m;
}

void Rebuild::copy_node(const Node& n) { add_node(*n.op, n.attrs, n.inputs, n.outputs, n.rank); }

void Rebuild::add_node(const op::OpDef& op, op::Attrs attrs, const std::vector<int>& inputs,
                       const std::vector<int>& outputs, int rank) {
  std::vector<int> in;
  for (int v : inputs) in.push_back(value(v));
  const int index = out_.add_node(op, std::move(attrs), in);
  out_.mutable_nodes()[static_cast<size_t>(index)].rank = rank;
  const Node& made = out_.nodes()[static_cast<size_t>(index)];
  if (made.outputs.size() != outputs.size()) {
    fail<Error>("graph pass: {} makes {} outputs, the pass maps {}", op.name, made.outputs.size(), outputs.size());
  }
  for (size_t i = 0; i < outputs.size(); ++i) map_[static_cast<size_t>(outputs[i])] = made.outputs[i];
}

Graph Rebuild::finish() {
  for (const auto& [name, v] : g_.outputs()) out_.add_output(name, value(v));
  for (const auto& [in, v] : g_.updates()) out_.add_update(value(in), value(v));
  out_.validate();
  return std::move(out_);
}

}  // namespace braid::graph
