#include "braid/base/thread_pool.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>

#include "braid/base/error.h"

namespace braid {

int num_threads() { return omp_get_max_threads(); }

void set_num_threads(int n) {
  BRAID_CHECK_GE(n, 1);
  omp_set_num_threads(n);
}

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

bool in_parallel_region() { return omp_in_parallel() != 0; }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>(num_threads(), (n + grain - 1) / grain);
  if (chunks <= 1 || in_parallel_region()) {
    fn(begin, end);
    return;
  }
#pragma omp parallel num_threads(static_cast<int>(chunks))
  {
    const int64_t t = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t lo = begin + n * t / nt;
    const int64_t hi = begin + n * (t + 1) / nt;
    if (lo < hi) fn(lo, hi);
  }
}

}  // namespace braid
