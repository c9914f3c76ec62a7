#include "braid/autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "braid/autograd/node.h"
#include "braid/tensor/cpu/accumulate.h"

namespace braid::autograd {

namespace {

// A running sum of gradients; clones before the first in-place add so a
// gradient tensor handed over by one node is never modified under another.
struct GradSum {
  Tensor sum;
  bool owned = false;
  void add(const Tensor& g) {
    if (!g.defined()) return;
    if (!sum.defined()) {
      sum = g;
      return;
    }
    if (!owned) {
      sum = sum.clone();
      owned = true;
    }
    cpu::add_into(sum, g);
  }
};

void accumulate_leaf(const Tensor& leaf, const Tensor& g) {
  GradMeta& meta = leaf.grad_meta();
  if (g.defined()) {
    Tensor incoming = g.dtype() == leaf.dtype() ? g : g.to(leaf.dtype());
    if (!meta.grad) {
      // Own the buffer: the incoming tensor may be a view of something else.
      leaf.set_grad(incoming.clone());
    } else {
      cpu::add_into(*meta.grad, incoming);
    }
  }
  if (meta.grad) {
    for (auto& hook : meta.grad_ready_hooks) hook(*meta.grad);
  }
}

struct NewerFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence() < b->sequence(); }
};

}  // namespace

void backward(const Tensor& root, const Tensor& grad_output) {
  if (!root.requires_grad()) fail<ValueError>("backward: the tensor does not require gradients");
  Tensor seed = grad_output;
  if (!seed.defined()) {
    if (root.numel() != 1) {
      fail<ValueError>("backward: a root of shape {} needs an explicit grad_output", to_string(root.shape()));
    }
    seed = Tensor::ones(root.shape(), root.dtype());
  } else if (seed.shape() != root.shape()) {
    fail<ValueError>("backward: grad_output shape {} does not match root shape {}", to_string(seed.shape()),
                     to_string(root.shape()));
  }
  NoGradGuard no_grad;
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
    for (size_t i = 0; i < n->next().size(); ++i) {
      const Edge& e = n->next()[i];
      if (e.node) {
        grads[e.node.get()].add(input_grads[i]);
        if (--pending[e.node.get()] == 0) ready.push(e.node.get());
      } else if (e.leaf.defined()) {
        const GradMeta* key = &e.leaf.grad_meta();
        leaf_grads[key].add(input_grads[i]);
        if (--leaf_pending[key] == 0) {
          accumulate_leaf(e.leaf, leaf_grads[key].sum);
          leaf_grads.erase(key);
        }
      }
    }
  }
}

void on_grad_ready(const Tensor& param, std::function<void(Tensor& grad)> fn) {
  if (!param.is_leaf()) fail<ValueError>("on_grad_ready: hooks attach to leaf tensors (parameters)");
  param.grad_meta().grad_ready_hooks.push_back(std::move(fn));
}

}  // namespace braid::autograd
