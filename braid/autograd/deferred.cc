#include "braid/autograd/deferred.h"

#include <queue>
#include <unordered_map>

#include "braid/autograd/engine_detail.h"

namespace braid::autograd {

namespace {

thread_local const std::vector<uint8_t>* t_only = nullptr;

struct PartSum {
  Tensor sum;
  bool owned = false;
  void add(Tensor g) { detail::add_grad(sum, owned, std::move(g)); }
};

struct NewerFirstDeferred {
  bool operator()(const Node* a, const Node* b) const { return a->sequence() < b->sequence(); }
};

}  // namespace

const std::vector<uint8_t>* applying_only() { return t_only; }

detail::ApplyOnly::ApplyOnly(const std::vector<uint8_t>* only) : previous_(t_only) { t_only = only; }
detail::ApplyOnly::~ApplyOnly() { t_only = previous_; }

DeferredWeightGrads backward_deferring_weights(const Tensor& root, const Tensor& grad_output,
                                               std::span<const Tensor> now) {
  const Tensor seed = detail::root_seed(root, grad_output);
  NoGradGuard no_grad;
  DeferredWeightGrads out;
  if (root.is_leaf()) {
    detail::accumulate_leaf(root, seed);
    return out;
  }
  auto is_now = [&](const Tensor& leaf) {
    for (const Tensor& t : now) {
      if (t.defined() && &t.grad_meta() == &leaf.grad_meta()) return true;
    }
    return false;
  };

  // As the engine: count the edges into every node and every leaf wanted now.
  const std::shared_ptr<Node>& top = root.grad_meta().grad_fn;
  std::unordered_map<const Node*, std::shared_ptr<Node>> owner{{top.get(), top}};
  std::unordered_map<const Node*, int> pending{{top.get(), 0}};
  std::unordered_map<const GradMeta*, int> leaf_pending;
  std::vector<const Node*> stack{top.get()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next()) {
      if (e.node) {
        if (pending[e.node.get()]++ == 0) {
          stack.push_back(e.node.get());
          owner.emplace(e.node.get(), e.node);
        }
      } else if (e.leaf.defined() && is_now(e.leaf)) {
        leaf_pending[&e.leaf.grad_meta()]++;
      }
    }
  }

  std::unordered_map<const Node*, PartSum> grads;
  std::unordered_map<const GradMeta*, PartSum> leaf_grads;
  std::priority_queue<const Node*, std::vector<const Node*>, NewerFirstDeferred> ready;
  grads[top.get()].add(seed);
  ready.push(top.get());
  while (!ready.empty()) {
    const Node* n = ready.top();
    ready.pop();
    Tensor g = std::move(grads[n].sum);
    grads.erase(n);
    const std::vector<Edge>& next = n->next();
    std::vector<uint8_t> first(next.size(), 0), later(next.size(), 0);
    bool any_first = false, any_later = false;
    for (size_t i = 0; i < next.size(); ++i) {
      const Edge& e = next[i];
      if (e.node || (e.leaf.defined() && is_now(e.leaf))) {
        first[i] = 1, any_first = true;
      } else if (e.leaf.defined()) {
        later[i] = 1, any_later = true;
      }
    }
    if (g.defined() && any_later) out.entries_.push_back({owner.at(n), g, std::move(later)});
    std::vector<Tensor> input_grads(next.size());
    if (g.defined() && any_first) {
      detail::ApplyOnly only(&first);
      input_grads = n->apply(g);
    }
    g = Tensor();
    for (size_t i = 0; i < next.size(); ++i) {
      const Edge& e = next[i];
      if (e.node) {
        grads[e.node.get()].add(std::move(input_grads[i]));
        if (--pending[e.node.get()] == 0) ready.push(e.node.get());
      } else if (first[i]) {
        const GradMeta* key = &e.leaf.grad_meta();
        leaf_grads[key].add(std::move(input_grads[i]));
        if (--leaf_pending[key] == 0) {
          Tensor sum = std::move(leaf_grads[key].sum);
          leaf_grads.erase(key);
          detail::accumulate_leaf(e.leaf, std::move(sum));
        }
      }
    }
  }
  return out;
}

void DeferredWeightGrads::run() {
  NoGradGuard no_grad;
  // Each leaf's parts summed in the order its nodes were reached, then added
  // once, so hooks see the leaf's final gradient of this backward.
  std::vector<std::pair<Tensor, PartSum>> sums;
  std::unordered_map<const GradMeta*, size_t> slot;
  std::vector<Entry> entries = std::move(entries_);
  entries_.clear();
  for (Entry& e : entries) {
    std::vector<Tensor> grads;
    {
      detail::ApplyOnly only(&e.only);
      grads = e.node->apply(e.grad);
    }
    for (size_t i = 0; i < e.only.size(); ++i) {
      if (!e.only[i]) continue;
      const Tensor& leaf = e.node->next()[i].leaf;
      auto [it, fresh] = slot.emplace(&leaf.grad_meta(), sums.size());
      if (fresh) sums.push_back({leaf, PartSum{}});
      sums[it->second].second.add(std::move(grads[i]));
    }
    e = Entry{};  // the node's saved tensors go as soon as it has run
  }
  for (auto& [leaf, sum] : sums) detail::accumulate_leaf(leaf, std::move(sum.sum));
}

}  // namespace braid::autograd
