// braid's one intra-op thread pool.
//
// The pool is the OpenMP runtime (libgomp). oneDNN and the OpenMP build of
// OpenBLAS that braid links run on the same runtime, so kernels, GEMM and
// convolution share one set of worker threads sized by one setting. Two pools
// each sized to the core count (as with PyTorch's pool beside pthread-OpenBLAS)
// spin against each other; measured up to 3.5x slower on 2 cores.
#pragma once

#include <cstdint>
#include <functional>

namespace braid {

// Threads the intra-op pool uses for the calling thread's parallel regions.
int num_threads();
// Sets the pool size (>= 1) for the calling thread's parallel regions.
void set_num_threads(int n);
// Cores the process may run on (sched affinity).
int available_cores();
bool in_parallel_region();

// Runs the calling thread's parallel regions on `n` threads while alive, then
// restores the size it found; n <= 0 leaves the pool as it is.
class ThreadsScope {
 public:
  explicit ThreadsScope(int n) : saved_(n > 0 ? num_threads() : 0) {
    if (n > 0) set_num_threads(n);
  }
  ~ThreadsScope() {
    if (saved_ > 0) set_num_threads(saved_);
  }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int saved_;
};

// Calls fn(lo, hi) over disjoint chunks covering [begin, end). Runs inline when
// the range is smaller than `grain` or when already inside a parallel region,
// so nested calls never oversubscribe.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace braid
