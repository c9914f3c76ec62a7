// The models the graph tests capture: `braid train`'s MLP, CNN and character
// transformer at small sizes, their batches, and a warm-up that lets the
// kernels' autotuner settle first (while it measures, calls alternate between
// implementations whose last bits differ, and the tests compare to the bit).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "braid/autograd/engine.h"
#include "braid/nn/sequential.h"
#include "braid/ops/ops.h"
#include "braid/optim/sgd.h"
#include "braid/tensor/cpu/conv.h"
#include "braid/tensor/cpu/gemm.h"
#include "braid/train/models.h"
#include "braid/train/schema.h"

namespace braid::graph::testing {

struct ModelCase {
  const char* name;
  Shape x_shape;  // one batch
  int64_t classes;
  bool tokens;    // x holds token ids (the transformer)
};

inline const ModelCase kModels[] = {
    {"mlp", {8, 1, 28, 28}, 10, false},
    {"cnn", {4, 1, 28, 28}, 10, false},
    {"char_transformer", {4, 8}, 12, true},
};

inline std::shared_ptr<nn::Sequential> build(const ModelCase& m, uint64_t seed = 7) {
  train::Config c(train::braid_schema());
  c.set(std::string("model.name=") + m.name);
  c.set("model.hidden=32");
  c.set("model.d_model=16");
  c.set("model.n_heads=2");
  c.set("model.n_layers=2");
  c.set("model.context=8");
  Generator gen(seed);
  train::ModelInfo info{.input_shape = Shape(m.x_shape.begin() + 1, m.x_shape.end()), .classes = m.classes};
  return std::dynamic_pointer_cast<nn::Sequential>(train::build_model(c, info, gen));
}

inline std::pair<Tensor, Tensor> batch(const ModelCase& m, int step) {
  Generator gen(100 + static_cast<uint64_t>(step));
  Tensor x = Tensor::empty(m.x_shape, m.tokens ? DType::i64 : DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (m.tokens) {
      x.data<int64_t>()[i] = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(m.classes));
    } else {
      x.data<float>()[i] = static_cast<float>(gen.uniform_f64()) * 2 - 1;
    }
  }
  Tensor y = Tensor::empty(m.tokens ? Shape{m.x_shape[0], m.x_shape[1]} : Shape{m.x_shape[0]}, DType::i64);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(m.classes));
  return {x, y};
}

inline Tensor loss_of(const Tensor& out, const Tensor& y) {
  return cross_entropy(reshape(out, {-1, out.size(-1)}), reshape(y, {-1}));
}

inline void eager_step(nn::Module& model, optim::Optimizer& opt, const ModelCase& m, int s) {
  auto [x, y] = batch(m, s);
  opt.zero_grad(true);
  backward(loss_of(model(x), y));
  opt.step();
}

// One implementation of each kernel for the whole test: the autotuner may
// settle differently on shared cores (and on rank threads) than in the eager
// run, and the tests compare to the bit.
struct PinnedKernels {
  PinnedKernels() {
    cpu::set_default_gemm_backend(cpu::GemmBackend::openblas);
    cpu::set_default_conv_backend(cpu::ConvBackend::im2col);
  }
  ~PinnedKernels() {
    cpu::set_default_gemm_backend(cpu::GemmBackend::automatic);
    cpu::set_default_conv_backend(cpu::ConvBackend::automatic);
  }
  PinnedKernels(const PinnedKernels&) = delete;
  PinnedKernels& operator=(const PinnedKernels&) = delete;
};

// Enough steps on a scratch model for every kernel shape of this model to settle.
inline void settle_autotuner(const ModelCase& m) {
  auto scratch = build(m, 99);
  optim::SGD opt(scratch->parameters(), {.lr = 0.01});
  for (int s = 0; s < 24; ++s) eager_step(*scratch, opt, m, s);
}

}  // namespace braid::graph::testing
