// Activation recompute: trading a second forward pass for activation memory.
//
// Two mechanisms, both autograd nodes of their own (docs/memory.md):
//
//  - checkpoint(fn, x): activation checkpointing. fn runs with recording off,
//    so nothing inside it is kept but its input; the node on its output
//    reruns fn under grad in backward (dropout generators and the autocast
//    dtype put back as they were) and back-propagates through the rerun.
//    A transformer block under `full` recompute is one such call.
//
//  - Rematerialized: Megatron's "checkpoint without output". fn's output is
//    kept only until its consumer (a GEMM, which saves its input) has run;
//    then its memory is given back, and a node on the consumer's output
//    refills it (rerunning fn under grad) right before the consumer's
//    backward needs it. The GEMM outputs stay; the cheap, memory-heavy parts
//    between them (norms, GELU/SwiGLU, and the attention core where it keeps
//    its [T, T] weights) are recomputed. That is `selective` recompute.
//
// Recompute is applied from outside, after every rewrite of the whole model
// (tensor parallelism swaps the blocks): apply_recompute() walks an
// nn::Sequential and sets the mode of the first N layers that implement
// Recomputable. Gradients equal those without recompute bit for bit where the
// kernels are deterministic: the rerun draws the same dropout masks and runs
// the same kernels on the same values.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "braid/base/rng.h"
#include "braid/nn/module.h"

namespace braid::nn {

class Sequential;

enum class Recompute { none, full, selective };
const char* name(Recompute r);
// "none" | "full" | "selective"; ConfigError naming parallel.recompute otherwise.
Recompute parse_recompute(const std::string& s);

using TensorFn = std::function<Tensor(const Tensor&)>;

// y = fn(x), keeping only x; backward reruns fn with `generators` replayed.
// `has_parameters`: fn reads leaves that need gradients (the output needs a
// node even when x does not). Without recording (eval) it is fn(x).
Tensor checkpoint(const TensorFn& fn, const Tensor& x, std::vector<Generator*> generators,
                  bool has_parameters = true);

// How a rematerialised output comes back before its consumer's backward:
// `keep_graph` reruns fn under grad, copies the values into the output and
// keeps the rerun's graph for fn's own backward (one rerun; the output is
// held twice across the consumer's backward), for costly fns such as the
// attention core; `rerun_twice` refills with a rerun under no grad and reruns
// under grad again at fn's own backward, once the consumer is done with the
// output (the output held once), for cheap fns such as norms and activations.
enum class Refill { keep_graph, rerun_twice };

// y = fn(x) whose memory goes once its consumer has run (see the top).
//   Rematerialized n(fn, x, gens);
//   Tensor out = n.release_after(consumer(n.output()));
// Only the consumer may read output(); its backward sees the refilled values.
class Rematerialized {
 public:
  Rematerialized(TensorFn fn, const Tensor& x, std::vector<Generator*> generators = {},
                 Refill refill = Refill::keep_graph);
  const Tensor& output() const { return output_; }
  // Frees output()'s memory and returns `consumer_out` with a node that
  // refills it before the consumer's backward.
  Tensor release_after(const Tensor& consumer_out);

 private:
  struct State;
  std::shared_ptr<State> s_;  // null: nothing recorded (eval), output() is plain
  Tensor output_;
};

// The distinct generators the Dropout layers under `m` draw from (the
// thread's dropout_generator() for those given none): what a rerun of m's
// forward must replay.
std::vector<Generator*> dropout_generators(const Module& m);

// A layer that can recompute its activations in backward (a transformer
// block, an attention): full reruns its whole forward through checkpoint();
// selective rematerialises the parts between its GEMMs.
class Recomputable {
 public:
  virtual ~Recomputable() = default;
  virtual void set_recompute(Recompute mode) = 0;
  virtual Recompute recompute() const = 0;
};

// m.forward(x) as one checkpoint (what a Recomputable under full calls with
// its own body).
Tensor checkpoint_module(Module& m, const Tensor& x, const TensorFn& body);

// producer(x) rematerialised into consumer: consumer(producer(x)) with
// producer's output freed once consumer has run (Refill::rerun_twice: a
// producer here is a norm or another cheap layer).
Tensor rematerialize(Module& producer, const Tensor& x, const TensorFn& consumer);

struct RecomputeOptions {
  Recompute mode = Recompute::none;
  int64_t layers = 0;  // the first N Recomputable layers; 0: all
};

// Sets the mode of the first `layers` Recomputable layers of `model` (none
// for the rest) and returns how many it set. ConfigError when a mode other
// than none finds no such layer (nothing would be recomputed).
int64_t apply_recompute(Sequential& model, const RecomputeOptions& options);

}  // namespace braid::nn
