#include "braid/graph/passes.h"

#include <algorithm>
#include <functional>
#include <map>

#include "braid/autograd/node.h"
#include "braid/graph/fuse.h"
#include "braid/graph/rebuild.h"

namespace braid::graph {

namespace {

bool removable(const Node& n) {
  return n.op->effect == op::Effect::pure || n.op->effect == op::Effect::view;
}

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
  const std::vector<int> readers = graph::readers(g);
  // Per value: the nodes that read it, in order (readers also counts the
  // graph's outputs and updates that keep it).
  std::vector<std::vector<size_t>> read_by(g.values().size());
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    for (int v : g.nodes()[k].inputs) {
      if (v >= 0) read_by[static_cast<size_t>(v)].push_back(k);
    }
  }
  // A clone whose only reader writes it in place, at node m: the source can
  // be written instead when every other reader of the source runs before m
  // and none of them is a view (which would see the write later).
  auto written_after_last_read = [&](size_t clone, int copy, int source) {
    if (readers[static_cast<size_t>(copy)] != 1 || read_by[static_cast<size_t>(copy)].size() != 1) return false;
    const size_t m = read_by[static_cast<size_t>(copy)][0];
    const Node& w = g.nodes()[m];
    if (w.op->effect != op::Effect::inplace || w.inputs.at(static_cast<size_t>(w.op->mutates.at(0))) != copy) return false;
    if (readers[static_cast<size_t>(source)] != static_cast<int>(read_by[static_cast<size_t>(source)].size())) {
      return false;  // an output or an update keeps the source
    }
    for (size_t k : read_by[static_cast<size_t>(source)]) {
      if (k == clone) continue;
      if (k >= m || g.nodes()[k].op->effect == op::Effect::view || g.nodes()[k].op->effect == op::Effect::inplace) return false;
    }
    return true;
  };
  Rebuild r(g);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node& n = g.nodes()[k];
    if (n.op->name == "clone") {
      const int v = n.inputs.at(0);
      const Node* p = g.producer(v);
      const bool fresh = p != nullptr && (p->op->effect == op::Effect::pure || p->op->effect == op::Effect::random);
      if (fresh && (readers[static_cast<size_t>(v)] == 1 || written_after_last_read(k, n.outputs[0], v))) {
        r.replace(n.outputs[0], v);
        continue;
      }
    }
    r.copy_node(n);
  }
  return r.finish();
}

Graph elide_identity_views(const Graph& g) {
  Rebuild r(g);
  for (const Node& n : g.nodes()) {
    const bool reshape = n.op->name == "reshape" || n.op->name == "squeeze" || n.op->name == "unsqueeze";
    bool identity = false;
    if (reshape) identity = g.value(n.outputs[0]).meta == g.value(n.inputs[0]).meta;
    if (n.op->name == "permute") {
      const auto& dims = n.attrs.ints("dims");
      identity = true;
      for (size_t i = 0; i < dims.size(); ++i) identity = identity && dims[i] == static_cast<int64_t>(i);
    }
    if (identity) {
      r.replace(n.outputs[0], n.inputs[0]);
      continue;
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
      {"identity views", elide_identity_views},
      {"fusion", fuse},
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
