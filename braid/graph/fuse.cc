#include "braid/graph/fuse.h"

#include <algorithm>

#include "braid/graph/rebuild.h"

namespace braid::graph {

namespace {

bool is(const Node* n, std::string_view name) { return n != nullptr && n->op->name == name; }

// The slice_backward nodes an accumulate_ chain ending at `v` adds up, or
// false when the chain holds anything else (or a value read elsewhere).
bool slice_leaves(const Graph& g, int v, const std::vector<int>& readers, int rank, std::vector<const Node*>& chain,
                  std::vector<const Node*>& leaves) {
  const Node* p = g.producer(v);
  if (p == nullptr || p->rank != rank) return false;
  if (is(p, "slice_backward")) {
    if (p->attrs.i("step") != 1) return false;
    leaves.push_back(p);
    return true;
  }
  if (!is(p, "accumulate_")) return false;
  chain.push_back(p);
  for (int in : p->inputs) {
    if (readers[static_cast<size_t>(in)] != 1 || !slice_leaves(g, in, readers, rank, chain, leaves)) return false;
  }
  return true;
}

// Whether `leaves` (one shape, one dim) cover that dim exactly once.
bool tile_one_dim(std::vector<const Node*>& leaves) {
  const Node& first = *leaves.front();
  const auto& shape = first.attrs.ints("shape");
  const int64_t dim = first.attrs.i("dim");
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size())) return false;
  for (const Node* s : leaves) {
    if (s->attrs.ints("shape") != shape || s->attrs.i("dim") != dim) return false;
  }
  std::sort(leaves.begin(), leaves.end(), [](const Node* a, const Node* b) { return a->attrs.i("start") < b->attrs.i("start"); });
  int64_t at = 0;
  for (const Node* s : leaves) {
    if (s->attrs.i("start") != at || s->attrs.i("end") <= at) return false;
    at = s->attrs.i("end");
  }
  return at == shape[static_cast<size_t>(dim)];
}

}  // namespace

Graph fuse(const Graph& g) {
  const std::vector<int> readers = graph::readers(g);
  std::vector<bool> gone(g.nodes().size(), false);
  // Node index -> the node that replaces it (it stands for its outputs).
  struct Fused {
    const op::OpDef* op;
    op::Attrs attrs;
    std::vector<int> inputs;
  };
  std::map<size_t, Fused> fused;
  auto index = [&](const Node* n) { return static_cast<size_t>(n - g.nodes().data()); };

  for (size_t k = g.nodes().size(); k-- > 0;) {
    const Node& n = g.nodes()[k];
    if (gone[k] || !is(&n, "accumulate_")) continue;
    // Slice gradients: only at the end of a chain (its result read by no
    // other accumulate_ of the same kind, which would have taken it already).
    std::vector<const Node*> chain, leaves;
    if (slice_leaves(g, n.outputs[0], readers, n.rank, chain, leaves) && leaves.size() > 1 && tile_one_dim(leaves) &&
        std::all_of(leaves.begin(), leaves.end(), [&](const Node* s) { return readers[static_cast<size_t>(s->outputs[0])] == 1; })) {
      Fused f{&op::find("concat"), {}, {}};
      f.attrs.set("dim", leaves.front()->attrs.i("dim"));
      for (const Node* s : leaves) f.inputs.push_back(s->inputs[0]);
      // The chain's end (node k) is in `chain` too: the rebuild below puts
      // the concat in its place, since it looks at `fused` before `gone`.
      for (const Node* c : chain) gone[index(c)] = true;
      for (const Node* s : leaves) gone[index(s)] = true;
      fused[k] = std::move(f);
      continue;
    }
    // Copy + accumulate.
    const int copy = n.inputs[0], src = n.inputs[1];
    const Node* c = g.producer(copy);
    if (is(c, "clone") && c->rank == n.rank && readers[static_cast<size_t>(copy)] == 1 &&
        g.value(copy).meta == g.value(src).meta && !gone[index(c)]) {
      gone[index(c)] = true;
      fused[k] = {&op::find("add"), {}, {c->inputs[0], src}};
    }
  }

  Rebuild r(g);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node& n = g.nodes()[k];
    if (auto it = fused.find(k); it != fused.end()) {
      r.add_node(*it->second.op, it->second.attrs, it->second.inputs, n.outputs, n.rank);
    } else if (!gone[k]) {
      r.copy_node(n);
    }
  }
  return r.finish();
}

}  // namespace braid::graph
