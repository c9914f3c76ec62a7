// Forward+backward time of the dense and CNN layers of issue 2, one
// benchmark per (layer, batch, threads). bench/ops/ops_vs_torch.py runs this
// binary and the same work in PyTorch in one run and prints the ratios.
//
//   mlp:     linear 784->256, relu, linear 256->256, relu, linear 256->10 (x needs no grad)
//   conv1:   conv2d 1->32 3x3 (+bias) on [64, 1, 28, 28] (first layer: x needs no grad)
//   conv2:   conv2d 32->64 3x3 (+bias) on [64, 32, 13, 13] (x needs grad)
//   maxpool: max_pool2d 2 on [64, 32, 26, 26] (conv1's output; x needs grad)
//
// Every step starts with the parameter gradients cleared (PyTorch: grad = None).
#include <benchmark/benchmark.h>

#include <vector>

#include "braid/autograd/engine.h"
#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/activation.h"
#include "braid/ops/conv.h"
#include "braid/ops/linear.h"
#include "braid/ops/pool.h"

namespace braid {
namespace {

Tensor uniform(const Shape& shape, Generator& gen, bool grad) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = gen.uniform() * 2.f - 1.f;
  if (grad) t.set_requires_grad();
  return t;
}

void clear_grads(const std::vector<Tensor>& params) {
  for (const Tensor& p : params) p.set_grad(Tensor());
}

// Runs step() under `threads` intra-op threads, reporting time per step.
template <class Step>
void run(benchmark::State& state, int threads, const std::vector<Tensor>& params, Step&& step) {
  set_num_threads(threads);
  // Warm up: caches, oneDNN primitive creation, and the GEMM/conv autotuners
  // (up to 6 candidates x 3 timed trials per shape and pass).
  for (int i = 0; i < 20; ++i) step();
  for (auto _ : state) {
    clear_grads(params);
    step();
  }
  state.counters["threads"] = threads;
}

void BM_mlp(benchmark::State& state) {
  const int64_t batch = state.range(0);
  Generator gen(1);
  Tensor x = uniform({batch, 784}, gen, false);
  std::vector<Tensor> p = {uniform({256, 784}, gen, true), uniform({256}, gen, true),
                           uniform({256, 256}, gen, true), uniform({256}, gen, true),
                           uniform({10, 256}, gen, true),  uniform({10}, gen, true)};
  Tensor seed = Tensor::ones({batch, 10});
  run(state, static_cast<int>(state.range(1)), p, [&] {
    Tensor h = relu(linear(x, p[0], p[1]));
    h = relu(linear(h, p[2], p[3]));
    backward(linear(h, p[4], p[5]), seed);
  });
}

void conv_layer(benchmark::State& state, Shape xs, Shape ws, bool x_grad) {
  Generator gen(2);
  Tensor x = uniform(xs, gen, x_grad);
  std::vector<Tensor> p = {uniform(ws, gen, true), uniform({ws[0]}, gen, true)};
  if (x_grad) p.push_back(x);
  Tensor probe = conv2d(x.detach(), p[0].detach());
  Tensor seed = Tensor::ones(probe.shape());
  run(state, static_cast<int>(state.range(0)), p, [&] { backward(conv2d(x, p[0], p[1]), seed); });
}

void BM_conv1(benchmark::State& state) { conv_layer(state, {64, 1, 28, 28}, {32, 1, 3, 3}, false); }
void BM_conv2(benchmark::State& state) { conv_layer(state, {64, 32, 13, 13}, {64, 32, 3, 3}, true); }

void BM_maxpool(benchmark::State& state) {
  Generator gen(3);
  Tensor x = uniform({64, 32, 26, 26}, gen, true);
  Tensor seed = Tensor::ones({64, 32, 13, 13});
  run(state, static_cast<int>(state.range(0)), {x}, [&] { backward(max_pool2d(x), seed); });
}

BENCHMARK(BM_mlp)->ArgsProduct({{64, 256}, {1, 2}})->ArgNames({"batch", "threads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_conv1)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_conv2)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_maxpool)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace braid

BENCHMARK_MAIN();
