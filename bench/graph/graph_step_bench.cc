// Eager training steps against the same steps run as a captured graph
// (graph::TrainingStep), for the MLP, CNN and character transformer `braid
// train` builds: milliseconds per step (median over rounds that alternate
// eager and graph, since this machine drifts) and each side's peak of
// allocator bytes in use during a step. The graph is simplified by the passes
// before it runs.
//
//   build/bin/graph_step_bench [ROUNDS=7] [STEPS_PER_ROUND=10] [MODEL]
//
// Peaks count what a step allocates beyond the model and the optimizer's
// state: gradients and activations on both sides (eager's gradients from the
// step before are dropped before each round's baseline).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "braid/base/median.h"
#include "braid/base/thread_pool.h"
#include "braid/graph/memory.h"
#include "braid/graph/step.h"
#include "braid/ops/ops.h"
#include "braid/optim/sgd.h"
#include "braid/tensor/allocator.h"
#include "braid/train/models.h"
#include "braid/train/schema.h"

using namespace braid;

namespace {

struct ModelCase {
  const char* name;
  Shape x_shape;
  int64_t classes;
  bool tokens;
};

std::shared_ptr<nn::Module> build(const ModelCase& m) {
  train::Config c(train::braid_schema());
  c.set(std::string("model.name=") + m.name);
  Generator gen(7);
  return train::build_model(c, {.input_shape = Shape(m.x_shape.begin() + 1, m.x_shape.end()), .classes = m.classes}, gen);
}

std::pair<Tensor, Tensor> batch(const ModelCase& m, int step) {
  Generator gen(100 + static_cast<uint64_t>(step));
  Tensor x = Tensor::empty(m.x_shape, m.tokens ? DType::i64 : DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (m.tokens) x.data<int64_t>()[i] = static_cast<int64_t>(gen.next_u64() % m.classes);
    else x.data<float>()[i] = static_cast<float>(gen.uniform_f64());
  }
  Tensor y = Tensor::empty(m.tokens ? Shape{m.x_shape[0], m.x_shape[1]} : Shape{m.x_shape[0]}, DType::i64);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = static_cast<int64_t>(gen.next_u64() % m.classes);
  return {x, y};
}

Tensor loss_of(const Tensor& out, const Tensor& y) { return cross_entropy(reshape(out, {-1, out.size(-1)}), reshape(y, {-1})); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  const std::string only = argc > 3 ? argv[3] : "";
  const ModelCase models[] = {
      {"mlp", {64, 1, 28, 28}, 10, false},
      {"cnn", {64, 1, 28, 28}, 10, false},
      {"char_transformer", {32, 64}, 96, true},
  };
  std::printf("%-17s %10s %10s %7s %12s %12s %7s %12s\n", "model", "eager ms", "graph ms", "ratio", "eager peak",
              "graph peak", "ratio", "planned");
  for (const ModelCase& m : models) {
    if (!only.empty() && only != m.name) continue;
    auto eager_model = build(m), graph_model = build(m);
    optim::SGD eager_opt(eager_model->parameters(), {.lr = 0.01, .momentum = 0.9});
    optim::SGD graph_opt(graph_model->parameters(), {.lr = 0.01, .momentum = 0.9});
    auto [x0, y0] = batch(m, 0);
    graph::TrainingStep step(*graph_model, graph_opt, loss_of, x0, y0);
    auto eager_step = [&](const Tensor& x, const Tensor& y) {
      eager_opt.zero_grad(true);
      Tensor loss = loss_of((*eager_model)(x), y);
      backward(loss);
      eager_opt.step();
    };
    auto [x1, y1] = batch(m, 1);
    // Warm the allocator's cache and let the kernel autotuner settle: it
    // times every candidate kernel of a shape several times (on the pool and on
    // one thread) before choosing, and eager and graph steps share its choice.
    for (int w = 0; w < 30; ++w) {
      eager_step(x1, y1);
      step.run(x1, y1);
    }
    std::vector<double> eager_ms, graph_ms;
    size_t eager_peak = 0, graph_peak = 0;
    for (int r = 0; r < rounds; ++r) {
      for (bool graph_side : {r % 2 == 1, r % 2 == 0}) {
        eager_opt.zero_grad(true);
        CachingAllocator::host().reset_peak();
        const size_t base = CachingAllocator::host().stats().bytes_in_use;
        const auto t0 = std::chrono::steady_clock::now();
        for (int s = 0; s < steps; ++s) {
          if (graph_side) step.run(x1, y1);
          else eager_step(x1, y1);
        }
        const double ms = seconds_since(t0) * 1e3 / steps;
        const size_t peak = CachingAllocator::host().stats().peak_bytes_in_use - base;
        (graph_side ? graph_ms : eager_ms).push_back(ms);
        size_t& p = graph_side ? graph_peak : eager_peak;
        p = std::max(p, peak);
      }
    }
    const double e = upper_median(eager_ms), g = upper_median(graph_ms);
    const double planned = static_cast<double>(graph::plan_memory(step.graph()).peak_bytes) / (1 << 20);
    std::printf("%-17s %10.2f %10.2f %6.2fx %10.1fMiB %10.1fMiB %6.2fx %10.1fMiB\n", m.name, e, g, e / g,
                static_cast<double>(eager_peak) / (1 << 20), static_cast<double>(graph_peak) / (1 << 20),
                static_cast<double>(graph_peak) / static_cast<double>(std::max<size_t>(eager_peak, 1)), planned);
    std::fflush(stdout);
  }
  std::printf("ratio: eager time / graph time (> 1: the graph is faster); graph peak / eager peak (< 1: less memory);\n"
              "planned: the liveness plan's peak of the graph's values (kernels' own scratch, such as im2col's, is not a value)\n");
  return 0;
}
