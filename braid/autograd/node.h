// The autograd graph: define-by-run. Every differentiable op that sees an
// input requiring gradients records a Node on its output; backward() walks the
// nodes once, newest first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::autograd {

// Where an input's gradient goes: the node that produced the input, or the
// input itself when it is a leaf that requires gradients, or nowhere.
struct Edge {
  std::shared_ptr<Node> node;
  Tensor leaf;
  Shape shape;  // the input's shape, to check the gradient against
};

// Maps the gradient of a node's output to the gradients of its inputs (one per
// input; an undefined tensor for an input that needs none).
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

class Node {
 public:
  Node(std::string name, std::vector<Edge> next, BackwardFn fn);
  const std::string& name() const { return name_; }
  const std::vector<Edge>& next() const { return next_; }
  uint64_t sequence() const { return sequence_; }
  std::vector<Tensor> apply(const Tensor& grad_output) const;

 private:
  std::string name_;
  std::vector<Edge> next_;
  BackwardFn fn_;
  uint64_t sequence_;  // creation order; backward runs newer nodes first
};

// Gradient recording is on by default, per thread.
bool grad_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Turns recording back on for the calling thread (a recomputation inside
// backward, which runs with recording off, builds a graph of its own).
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

// True when recording is on and any input requires gradients.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(std::span<const Tensor> inputs);

// Makes `output` the result of a node named `name` over `inputs`. Does nothing
// unless needs_grad(inputs). `fn` should capture detached tensors only.
void record(const char* name, const std::vector<Tensor>& inputs, const Tensor& output, BackwardFn fn);

}  // namespace braid::autograd
