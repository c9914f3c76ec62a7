#include "braid/graph/passes.h"

#include <algorithm>
#include <functional>
#include <map>

#include "braid/autograd/node.h"

namespace braid::graph {

namespace {

bool removable(const Node& n) {
  return n.op->effect == op::Effect::pure || n.op->effect == op::Effect::view;
}

// Values whose memory a later in-place node writes (directly or through a
// view): two such values are never the same value, however they were made,
// and such a value is never a constant.
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

// Copies `g` keeping the nodes `keep` says, with every read of value v
// redirected to substitute(v) (an earlier value, or a new constant made by
// `constant`). Inputs keep their order; constants and results are renumbered.
class Rebuild {
 public:
  explicit Rebuild(const Graph& g) : g_(g), map_(g.values().size(), -1) {
    for (int id : g.inputs()) map_[static_cast<size_t>(id)] = out_.add_input(g.value(id).name, g.value(id).meta);
  }

  // The new id of old value v (constants are copied on first use).
  int value(int v) {
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
  void replace(int old_value, int by_old_value) { replaced_[old_value] = by_old_value; }
  void make_constant(int old_value, Tensor t) { new_constants_[old_value] = std::move(t); }
  void copy_node(const Node& n) {
    std::vector<int> in;
    for (int v : n.inputs) in.push_back(value(v));
    const int index = out_.add_node(*n.op, n.attrs, in);
    out_.mutable_nodes()[static_cast<size_t>(index)].rank = n.rank;
    const Node& made = out_.nodes()[static_cast<size_t>(index)];
    for (size_t i = 0; i < n.outputs.size(); ++i) map_[static_cast<size_t>(n.outputs[i])] = made.outputs[i];
  }
  Graph finish() {
    for (const auto& [name, v] : g_.outputs()) out_.add_output(name, value(v));
    for (const auto& [in, v] : g_.updates()) out_.add_update(value(in), value(v));
    out_.validate();
    return std::move(out_);
  }

 private:
  const Graph& g_;
  Graph out_;
  std::vector<int> map_;
  std::map<int, int> replaced_;
  std::map<int, Tensor> new_constants_;
};

}  // namespace

Graph eliminate_dead_code(const Graph& g) {
  std::vector<bool> live_value(g.values().size(), false), live_node(g.nodes().size(), false);
  for (const auto& [name, v] : g.outputs()) live_value[static_cast<size_t>(v)] = true;
  for (const auto& [in, v] : g.updates()) live_value[static_cast<size_t>(v)] = true;
  for (size_t k = g.nodes().size(); k-- > 0;) {
    const Node& n = g.nodes()[k];
    bool live = !removable(n);
    for (int v : n.outputs) live = live || live_value[static_cast<size_t>(v)];
    if (!live) continue;
    live_node[k] = true;
    for (int v : n.inputs) {
      if (v >= 0) live_value[static_cast<size_t>(v)] = true;
    }
  }
  Rebuild r(g);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    if (live_node[k]) r.copy_node(g.nodes()[k]);
  }
  return r.finish();
}

Graph elide_copies(const Graph& g) {
  std::vector<int> readers(g.values().size(), 0);
  for (const Node& n : g.nodes()) {
    for (int v : n.inputs) {
      if (v >= 0) ++readers[static_cast<size_t>(v)];
    }
  }
  for (const auto& [name, v] : g.outputs()) ++readers[static_cast<size_t>(v)];
  for (const auto& [in, v] : g.updates()) ++readers[static_cast<size_t>(v)];
  Rebuild r(g);
  for (const Node& n : g.nodes()) {
    if (n.op->name == "clone") {
      const int v = n.inputs.at(0);
      const Value& val = g.value(v);
      const bool fresh = val.kind == ValueKind::result &&
                         (g.nodes()[static_cast<size_t>(val.producer)].op->effect == op::Effect::pure ||
                          g.nodes()[static_cast<size_t>(val.producer)].op->effect == op::Effect::random);
      if (fresh && readers[static_cast<size_t>(v)] == 1) {
        r.replace(n.outputs[0], v);
        continue;
      }
    }
    r.copy_node(n);
  }
  return r.finish();
}

Graph eliminate_common_subexpressions(const Graph& g) {
  Rebuild r(g);
  // Key: op, attributes and the inputs after earlier replacements.
  struct Key {
    const op::OpDef* op;
    std::vector<int> inputs;
    const op::Attrs* attrs;
    bool operator<(const Key& o) const {
      if (op != o.op) return op < o.op;
      if (inputs != o.inputs) return inputs < o.inputs;
      return attrs->to_string() < o.attrs->to_string();
    }
  };
  std::map<Key, const Node*> seen;
  std::map<int, int> canonical;  // old value -> the old value it equals
  const std::vector<bool> written = written_later(g);
  auto canon = [&](int v) {
    auto it = canonical.find(v);
    return it == canonical.end() ? v : it->second;
  };
  for (const Node& n : g.nodes()) {
    if ((n.op->effect != op::Effect::pure && n.op->effect != op::Effect::view) || writes_later(n, written)) {
      r.copy_node(n);
      continue;
    }
    Key key{n.op, {}, &n.attrs};
    for (int v : n.inputs) key.inputs.push_back(v < 0 ? -1 : canon(v));
    auto [it, fresh] = seen.emplace(key, &n);
    if (fresh) {
      r.copy_node(n);
      continue;
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      canonical[n.outputs[i]] = it->second->outputs[i];
      r.replace(n.outputs[i], it->second->outputs[i]);
    }
  }
  return r.finish();
}

Graph fold_constants(const Graph& g, int64_t max_elements) {
  Rebuild r(g);
  std::map<int, Tensor> known;  // old value -> its tensor, for constants and folded results
  for (const auto& [id, t] : g.constants()) {
    if (!t.is_meta()) known[id] = t;
  }
  autograd::NoGradGuard no_grad;
  const std::vector<bool> written = written_later(g);
  for (const Node& n : g.nodes()) {
    bool foldable = n.op->effect == op::Effect::pure && !writes_later(n, written);
    std::vector<Tensor> in;
    for (int v : n.inputs) {
      if (v < 0) {
        in.emplace_back();
        continue;
      }
      auto it = known.find(v);
      foldable = foldable && it != known.end();
      if (foldable) in.push_back(it->second);
    }
    for (int v : n.outputs) foldable = foldable && numel(g.value(v).meta.shape) <= max_elements;
    if (!foldable) {
      r.copy_node(n);
      continue;
    }
    std::vector<Tensor> out = op::call(*n.op, in, n.attrs);
    for (size_t i = 0; i < out.size(); ++i) {
      known[n.outputs[i]] = out[i];
      r.make_constant(n.outputs[i], out[i]);
    }
  }
  return r.finish();
}

Graph simplify(const Graph& graph, std::vector<PassReport>* report) {
  const std::pair<const char*, std::function<Graph(const Graph&)>> passes[] = {
      {"constant folding", [](const Graph& g) { return fold_constants(g); }},
      {"common subexpressions", eliminate_common_subexpressions},
      {"copies", elide_copies},
      {"dead code", eliminate_dead_code},
  };
  Graph g = eliminate_dead_code(graph);
  if (report) report->push_back({"dead code", graph.nodes().size(), g.nodes().size()});
  for (int round = 0; round < 8; ++round) {
    bool changed = false;
    for (const auto& [name, pass] : passes) {
      Graph next = pass(g);
      if (report) report->push_back({name, g.nodes().size(), next.nodes().size()});
      changed = changed || next.nodes().size() != g.nodes().size();
      g = std::move(next);
    }
    if (!changed) break;
  }
  return g;
}

}  // namespace braid::graph
