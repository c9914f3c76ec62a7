#include "braid/autograd/node.h"

#include <atomic>

namespace braid::autograd {

namespace {
thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_next_sequence{0};
}  // namespace

Node::Node(std::string name, std::vector<Edge> next, BackwardFn fn)
    : name_(std::move(name)), next_(std::move(next)), fn_(std::move(fn)), sequence_(g_next_sequence++) {}

std::vector<Tensor> Node::apply(const Tensor& grad_output) const {
  std::vector<Tensor> grads = fn_(grad_output);
  BRAID_CHECK_EQ(grads.size(), next_.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined() && grads[i].shape() != next_[i].shape) {
      fail<Error>("autograd: {} produced a gradient of shape {} for input {} of shape {}", name_,
                  to_string(grads[i].shape()), i, to_string(next_[i].shape));
    }
  }
  return grads;
}

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }
EnableGradGuard::EnableGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { t_grad_enabled = previous_; }

bool needs_grad(std::span<const Tensor> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

void record(const char* name, const std::vector<Tensor>& inputs, const Tensor& output, BackwardFn fn) {
  if (!needs_grad(inputs)) return;
  std::vector<Edge> next(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.defined()) continue;
    next[i].shape = in.shape();
    if (!in.requires_grad()) continue;
    if (in.is_leaf()) {
      next[i].leaf = in;
    } else {
      next[i].node = in.grad_meta().grad_fn;
    }
  }
  GradMeta& meta = output.grad_meta();
  meta.requires_grad = true;
  meta.grad_fn = std::make_shared<Node>(name, std::move(next), std::move(fn));
}

}  // namespace braid::autograd
