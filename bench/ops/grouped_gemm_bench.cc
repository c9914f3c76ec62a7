// The experts of an MoE layer, forward and backward, as one grouped GEMM per
// projection (braid/ops/grouped_gemm.h) against a loop over the experts (each
// expert's rows sliced, two nn::Linear-style matmuls, the outputs
// concatenated: what an MoE layer without the op would run). Same rows, same
// weights, GELU between; the rounds alternate the two and report medians.
//
//   grouped_gemm_bench [--experts 8] [--rows 128] [--dim 256] [--hidden 1024] [--threads 2] [--rounds 9]
//
// --rows: mean rows per expert (each expert's count drawn within +-50%).
// Prints one JSON line: the configuration, each path's median milliseconds
// and the loop / grouped ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braid/autograd/engine.h"
#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/ops.h"

using namespace braid;

namespace {

int64_t arg(int argc, char** argv, const char* name, int64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  return fallback;
}

Tensor uniform(const Shape& shape, Generator& gen) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(gen.uniform() * 2 - 1) * 0.05f;
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t experts = arg(argc, argv, "--experts", 8), rows = arg(argc, argv, "--rows", 128);
  const int64_t dim = arg(argc, argv, "--dim", 256), hidden = arg(argc, argv, "--hidden", 1024);
  const int threads = static_cast<int>(arg(argc, argv, "--threads", 2));
  const int rounds = static_cast<int>(arg(argc, argv, "--rounds", 9));
  set_num_threads(threads);
  Generator gen(1);
  std::vector<int64_t> counts(static_cast<size_t>(experts));
  for (auto& c : counts) c = rows / 2 + static_cast<int64_t>(gen.uniform() * static_cast<double>(rows));
  int64_t total = 0;
  for (const int64_t c : counts) total += c;
  const Tensor x = uniform({total, dim}, gen), w1 = uniform({experts, hidden, dim}, gen);
  const Tensor w2 = uniform({experts, dim, hidden}, gen), g = uniform({total, dim}, gen);
  for (const Tensor& t : {x, w1, w2}) t.set_requires_grad(true);
  auto clear = [&] {
    for (const Tensor& t : {x, w1, w2}) t.set_grad(Tensor());
  };
  auto grouped = [&] {
    clear();
    backward(sum(mul(grouped_gemm(gelu(grouped_gemm(x, w1, counts)), w2, counts), g)));
  };
  auto loop = [&] {
    clear();
    std::vector<Tensor> outs;
    int64_t at = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const Tensor xe = slice(x, 0, at, at + counts[static_cast<size_t>(e)]);
      const Tensor h = gelu(linear(xe, reshape(slice(w1, 0, e, e + 1), {hidden, dim})));
      outs.push_back(linear(h, reshape(slice(w2, 0, e, e + 1), {dim, hidden})));
      at += counts[static_cast<size_t>(e)];
    }
    backward(sum(mul(concat(outs, 0), g)));
  };
  auto time_ms = [](const auto& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < 2; ++i) grouped(), loop();  // warm the caches and the GEMM autotuner
  std::vector<double> tg, tl;
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      tg.push_back(time_ms(grouped));
      tl.push_back(time_ms(loop));
    } else {
      tl.push_back(time_ms(loop));
      tg.push_back(time_ms(grouped));
    }
  }
  const double mg = median(tg), ml = median(tl);
  std::printf(
      "{\"experts\": %lld, \"rows\": %lld, \"dim\": %lld, \"hidden\": %lld, \"threads\": %d, \"grouped_ms\": %.3f, "
      "\"loop_ms\": %.3f, \"loop_over_grouped\": %.3f}\n",
      static_cast<long long>(experts), static_cast<long long>(total), static_cast<long long>(dim),
      static_cast<long long>(hidden), threads, mg, ml, ml / mg);
  return 0;
}
