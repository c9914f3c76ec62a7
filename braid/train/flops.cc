#include "braid/train/flops.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include "braid/autograd/node.h"
#include "braid/base/deadline.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/autocast.h"
#include "braid/ops/matmul.h"
#include "braid/ops/tensor_ops.h"
#include "braid/tensor/backend.h"

namespace braid::train {

TokenFlops model_token_flops(const Config& c, const nn::Module& model, int64_t context) {
  TokenFlops f{.parameters = model.num_parameters(), .context = context};
  // Each family's attention: (layers, width) from the keys its builder reads.
  const std::string& name = c.get_string("model.name");
  if (name == "char_transformer" || name == "gpt") {
    f.layers = c.get_int("model.n_layers");
    f.width = c.get_int("model.d_model");
  }
  // A token passes through top_k of an MoE layer's experts: only their weights count (docs/moe.md).
  if (name == "gpt" && c.get_int("model.moe.experts") > 0) {
    const double idle = 1.0 - static_cast<double>(c.get_int("model.moe.top_k")) /
                                  static_cast<double>(c.get_int("model.moe.experts"));
    int64_t experts = 0;
    for (const auto& [pname, t] : model.named_parameters()) {
      if (pname.find("moe.experts.") != std::string::npos) experts += t.numel();
    }
    f.parameters -= static_cast<int64_t>(std::llround(idle * static_cast<double>(experts)));
  }
  return f;
}

namespace {

// The best rate of n x n products on `device`, in FLOP/s. Batches of calls
// between synchronisations grow until one takes 20 ms (a GPU queues calls;
// timing one would time the launch), then run for about 0.2 s.
double time_products(Device device, DType precision, int64_t n) {
  autograd::NoGradGuard no_grad;
  Autocast autocast(precision);
  Tensor a = Tensor::empty({n, n}, DType::f32, device), b = Tensor::empty({n, n}, DType::f32, device);
  a.fill(0.5);
  b.fill(0.25);
  // A device takes 16-bit operands (cast outside the timing); the CPU's
  // products take f32 ones, which autocast rounds as it does in training.
  if (precision != DType::f32 && !device.is_cpu()) a = cast(a, precision), b = cast(b, precision);
  const auto sync = [&] {
    if (!device.is_cpu()) backend(device).synchronize(device.index);
  };
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  Tensor out = matmul(a, b);  // warm-up: first-touch pages, autotuning, kernel loading
  sync();
  int calls = 1;
  double best = 0, spent = 0;
  while (spent < 0.2) {
    const auto t0 = Clock::now();
    for (int k = 0; k < calls; ++k) out = matmul(a, b);
    sync();
    const double s = seconds_since(t0);
    spent += s;
    if (s < 0.02 && calls < (1 << 12)) {
      calls *= 2;
      continue;
    }
    best = std::max(best, flops * calls / s);
  }
  return best;
}

}  // namespace

double measured_peak_flops(Device device, DType precision, bool refresh) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, int, int>, double> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(name(device), static_cast<int>(precision), num_threads());
  auto it = cache.find(key);
  if (it != cache.end() && !refresh) return it->second;
  // Large enough that the kernels run at their rate, small enough to stay
  // well under a second: 2 GFLOP a product on a CPU, 137 (f32) or 550 (16-bit) on a GPU.
  const int64_t n = device.is_cpu() ? 1024 : precision == DType::f32 ? 4096 : 6144;
  const double now = time_products(device, precision, n);
  return cache[key] = it == cache.end() ? now : std::max(it->second, now);
}

}  // namespace braid::train
