#include "braid/autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "braid/autograd/node.h"
#include "braid/autograd/engine_detail.h"
#include "braid/tensor/cpu/accumulate.h"

namespace braid::autograd {

namespace {

GradArithmetic g_math{
    .add_into = &cpu::add_into,
    .copy_into = [](const Tensor& dst, const Tensor& src) { dst.copy_from(src); },
    .clone = [](const Tensor& x) { return x.clone(); },
    .cast = [](const Tensor& x, DType dtype) { return x.to(dtype); },
};

// A running sum of gradients; clones before the first in-place add so a
// gradient tensor handed over by one node is never modified under another.
struct GradSum {
  Tensor sum;
  bool owned = false;
  void add(Tensor g) {
    if (!g.defined()) return;
    if (!sum.defined()) {
      sum = std::move(g);
      return;
    }
    if (!owned) {
      sum = g_math.clone(sum);
      owned = true;
    }
    g_math.add_into(sum, g);
  }
};

}  // namespace

namespace detail {

void add_grad(Tensor& sum, bool& owned, Tensor g) {
  GradSum s{std::move(sum), owned};
  s.add(std::move(g));
  sum = std::move(s.sum);
  owned = s.owned;
}

void accumulate_leaf(const Tensor& leaf, Tensor g) {
  GradMeta& meta = leaf.grad_meta();
  if (g.defined()) {
    Tensor incoming = g.dtype() == leaf.dtype() ? std::move(g) : g_math.cast(g, leaf.dtype());
    if (!meta.grad || meta.grad_is_zero) {
      // Keep the incoming buffer when nothing else can see it (a fresh
      // product, as from a layer's weight gradient) and the old one is the
      // leaf's own: no copy. Otherwise own a copy, written into the old
      // buffer when there is one, so views of it (a data-parallel bucket)
      // stay valid and no second gradient stays alive beside them.
      if (incoming.sole_owner() && (!meta.grad || meta.grad->sole_owner())) {
        leaf.set_grad(incoming);
      } else if (!meta.grad) {
        leaf.set_grad(g_math.clone(incoming));
      } else {
        g_math.copy_into(*meta.grad, incoming);
        meta.grad_is_zero = false;
      }
    } else {
      g_math.add_into(*meta.grad, incoming);
    }
  }
  if (meta.grad) {
    // Held here: a hook may drop the leaf's gradient once it has taken what
    // it needs (ZeRO stages 2-3 keep only their reduced piece).
    const std::shared_ptr<Tensor> grad = meta.grad;
    for (auto& hook : meta.grad_ready_hooks) hook(*grad);
  }
}

}  // namespace detail

namespace {

using detail::accumulate_leaf;

struct NewerFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence() < b->sequence(); }
};

}  // namespace

Tensor detail::root_seed(const Tensor& root, const Tensor& grad_output) {
  if (!root.requires_grad()) fail<ValueError>("backward: the tensor does not require gradients");
  Tensor seed = grad_output;
  if (!seed.defined()) {
    if (root.numel() != 1) {
      fail<ValueError>("backward: a root of shape {} needs an explicit grad_output", to_string(root.shape()));
    }
    seed = Tensor::ones(root.shape(), root.dtype(), root.device());
  } else if (seed.shape() != root.shape()) {
    fail<ValueError>("backward: grad_output shape {} does not match root shape {}", to_string(seed.shape()),
                     to_string(root.shape()));
  }
  return seed;
}

void backward(const Tensor& root, const Tensor& grad_output) {
  const Tensor seed = detail::root_seed(root, grad_output);
  NoGradGuard no_grad;
  detail::ApplyOnly whole(nullptr);  // a nested backward applies its graph whole
  if (root.is_leaf()) {
    accumulate_leaf(root, seed);
    return;
  }

  // Count the edges into every node and leaf reachable from the root.
  std::unordered_map<const Node*, int> pending;
  std::unordered_map<const GradMeta*, int> leaf_pending;
  std::vector<const Node*> stack{root.grad_meta().grad_fn.get()};
  pending[stack.back()] = 0;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next()) {
      if (e.node) {
        if (pending[e.node.get()]++ == 0) stack.push_back(e.node.get());
      } else if (e.leaf.defined()) {
        leaf_pending[&e.leaf.grad_meta()]++;
      }
    }
  }

  std::unordered_map<const Node*, GradSum> grads;
  std::unordered_map<const GradMeta*, GradSum> leaf_grads;
  std::priority_queue<const Node*, std::vector<const Node*>, NewerFirst> ready;
  grads[root.grad_meta().grad_fn.get()].add(seed);
  ready.push(root.grad_meta().grad_fn.get());
  while (!ready.empty()) {
    const Node* n = ready.top();
    ready.pop();
    Tensor g = std::move(grads[n].sum);
    grads.erase(n);
    std::vector<Tensor> input_grads = g.defined() ? n->apply(g) : std::vector<Tensor>(n->next().size());
    g = Tensor();
    // Handles move along (never copied), so a leaf can tell a gradient nobody
    // else holds (Tensor::sole_owner) and keep it without a copy.
    for (size_t i = 0; i < n->next().size(); ++i) {
      const Edge& e = n->next()[i];
      if (e.node) {
        grads[e.node.get()].add(std::move(input_grads[i]));
        if (--pending[e.node.get()] == 0) ready.push(e.node.get());
      } else if (e.leaf.defined()) {
        const GradMeta* key = &e.leaf.grad_meta();
        leaf_grads[key].add(std::move(input_grads[i]));
        if (--leaf_pending[key] == 0) {
          Tensor sum = std::move(leaf_grads[key].sum);
          leaf_grads.erase(key);
          accumulate_leaf(e.leaf, std::move(sum));
        }
      }
    }
  }
}

void set_grad_arithmetic(const GradArithmetic& arithmetic) { g_math = arithmetic; }

void on_grad_ready(const Tensor& param, std::function<void(Tensor& grad)> fn) {
  if (!param.is_leaf()) fail<ValueError>("on_grad_ready: hooks attach to leaf tensors (parameters)");
  param.grad_meta().grad_ready_hooks.push_back(std::move(fn));
}

}  // namespace braid::autograd
