#include "braid/optim/reduce.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "braid/base/thread_pool.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/update.h"
#include "braid/optim/optimizer.h"

namespace braid::optim {

double parallel_sum(int64_t n, const std::function<double(int64_t, int64_t)>& chunk_sum) {
  double total = 0;
  std::mutex mu;
  parallel_for(0, n, kUpdateGrain, [&](int64_t lo, int64_t hi) {
    const double s = chunk_sum(lo, hi);
    std::lock_guard lock(mu);
    total += s;
  });
  return total;
}

double sum_squares(const float* x, int64_t n) {
  return parallel_sum(n, [x](int64_t lo, int64_t hi) {
    // Blocks of float partials summed into double: vectorises, stays accurate.
    double s = 0;
    for (int64_t b = lo; b < hi; b += 1024) {
      const int64_t e = std::min(hi, b + 1024);
      float part = 0;
      for (int64_t k = b; k < e; ++k) part += x[k] * x[k];
      s += part;
    }
    return s;
  });
}

double sum_squares(const std::vector<Tensor>& tensors) {
  double total = 0;
  // Off the host, the tensors of each device go to one op (a few launches
  // for them all), read back once per device.
  std::vector<std::pair<Device, std::vector<Tensor>>> on_device;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (t.dtype() != DType::f32 || !t.is_contiguous()) {
      fail<ValueError>("sum_squares: tensors must be contiguous f32 (got {} {})", name(t.dtype()), to_string(t.shape()));
    }
    if (t.device().is_cpu()) {
      total += sum_squares(t.data<float>(), t.numel());
      continue;
    }
    auto it = std::find_if(on_device.begin(), on_device.end(), [&](const auto& d) { return d.first == t.device(); });
    if (it == on_device.end()) it = on_device.insert(on_device.end(), {t.device(), {}});
    it->second.push_back(t);
  }
  for (const auto& [device, list] : on_device) total += sum_squares_multi(list).item();
  return total;
}

}  // namespace braid::optim
