#include "braid/optim/reduce.h"

#include <mutex>

#include "braid/base/thread_pool.h"
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

}  // namespace braid::optim
