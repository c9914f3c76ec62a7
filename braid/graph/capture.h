// Capture: runs eager code once and records every registry op it calls —
// forward, the backward pass autograd runs, the optimizer's update — into a
// Graph. Run it on real tensors (the step is computed as usual) or on meta
// tensors (nothing is computed; only shapes flow).
//
//   graph::Capture cap;
//   cap.input("x", x);
//   for (auto& [name, p] : model.named_parameters()) cap.input(name, p);
//   cap.record([&] { loss = step(x); });
//   cap.output("loss", loss);
//   graph::Graph g = cap.finish();
//
// Tensors the code reads that are neither declared inputs nor produced by an
// op become constants. What cannot be captured is refused, naming it: a
// tensor that requires gradients but is not an input (a forgotten
// parameter), a result of a custom autograd function (not a registry op), a
// view read after its storage was written in place.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "braid/graph/graph.h"

namespace braid::graph {

class Capture {
 public:
  Capture();
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // Declares `t` as graph input `name`.
  void input(std::string name, const Tensor& t);
  // Runs fn, recording the op calls it makes on this thread.
  void record(const std::function<void()>& fn);
  // Names a tensor the recorded code produced (or an input) as an output.
  void output(std::string name, const Tensor& t);
  // The graph; declared inputs the code wrote in place become its updates.
  Graph finish();

 private:
  class Observer;
  int value_of(const Tensor& t, const op::OpDef& reader);
  void on_call(const op::OpDef& op, const op::Attrs& attrs, std::span<const Tensor> inputs,
               std::span<const Tensor> outputs);
  void on_alias(const Tensor& alias, const Tensor& of);

  Graph graph_;
  // Every tensor seen, by identity, with the value it holds now. The handles
  // keep the tensors alive so that an identity is never reused.
  struct Seen {
    Tensor tensor;
    int value;
  };
  std::unordered_map<const void*, Seen> seen_;
  std::vector<std::pair<int, const void*>> declared_;  // input value id, tensor identity
  // Values that share storage (views, in-place versions) by their root value;
  // a write to one makes the others stale, and reading a stale one is refused.
  std::unordered_map<int, int> root_of_;
  std::unordered_map<int, std::vector<int>> sharing_;
  std::unordered_set<int> stale_;
  std::unique_ptr<Observer> observer_;
};

}  // namespace braid::graph
