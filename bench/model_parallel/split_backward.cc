// The cost of a backward split in two (autograd/deferred.h, the zero-bubble
// pipeline's B and W) against one backward: a stage of transformer blocks,
// one thread, the two ways alternately, medians of the rounds.
// usage: split_backward [--blocks N] [--dim D] [--rows R] [--context T] [--rounds K]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "braid/autograd/deferred.h"
#include "braid/autograd/engine.h"
#include "braid/base/thread_pool.h"
#include "braid/nn/attention.h"
#include "braid/nn/init.h"
#include "braid/nn/sequential.h"
#include "braid/ops/reduce.h"

using namespace braid;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t blocks = 4, dim = 256, rows = 8, context = 128, rounds = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int64_t v = std::stoll(argv[i + 1]);
    if (k == "--blocks") blocks = v;
    else if (k == "--dim") dim = v;
    else if (k == "--rows") rows = v;
    else if (k == "--context") context = v;
    else if (k == "--rounds") rounds = v;
  }
  set_num_threads(1);
  Generator g(1);
  nn::Sequential stage;
  for (int64_t b = 0; b < blocks; ++b) {
    stage.push_back(std::make_shared<nn::TransformerBlock>(dim, dim / 64, g, nn::AttentionOptions{.causal = true}));
  }
  const Tensor x0 = Tensor::empty({rows, context, dim});
  nn::init::normal_(x0, 0, 1, g);
  std::vector<double> whole, part_b, part_w;
  for (int64_t r = 0; r < rounds + 2; ++r) {
    for (int way = 0; way < 2; ++way) {
      const Tensor x = x0.detach().set_requires_grad();
      const Tensor y = stage.forward(x);
      const Tensor go = Tensor::ones(y.shape());
      if (way == 0) {
        const auto t0 = Clock::now();
        backward(y, go);
        if (r >= 2) whole.push_back(ms_since(t0));
      } else {
        auto t0 = Clock::now();
        autograd::DeferredWeightGrads w = autograd::backward_deferring_weights(y, go, std::vector<Tensor>{x});
        const double b = ms_since(t0);
        t0 = Clock::now();
        w.run();
        if (r >= 2) part_b.push_back(b), part_w.push_back(ms_since(t0));
      }
      for (const Tensor& p : stage.parameters()) p.zero_grad();
    }
  }
  const double mw = median(whole), mb = median(part_b), mww = median(part_w);
  std::printf("%lld blocks of %lld, %lld x %lld tokens, 1 thread, medians of %lld: backward %.2f ms; "
              "B %.2f + W %.2f = %.2f ms (%.2fx)\n",
              static_cast<long long>(blocks), static_cast<long long>(dim), static_cast<long long>(rows),
              static_cast<long long>(context), static_cast<long long>(rounds), mw, mb, mww, mb + mww, (mb + mww) / mw);
}
