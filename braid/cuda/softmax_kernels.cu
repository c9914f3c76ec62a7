#include "braid/cuda/softmax_kernels.h"

#include <limits>

#include "braid/cuda/reduce_loop.h"

namespace braid::cuda {

namespace {

struct MaxOp {
  template <class A>
  BRAID_HD A operator()(A a, A b) const { return b > a ? b : a; }
};
struct SumOp {
  template <class A>
  BRAID_HD A operator()(A a, A b) const { return a + b; }
};

// Each row kernel is written as phases over the elements first, first + step,
// ... of one row, so the same code serves a thread per row (first 0, step 1),
// a CUDA block per row (first = thread, step = block size, the partials
// combined with block_all between phases) and the emulated block.

template <class T>
struct SoftmaxRows {
  using Acc = compute_t<T>;  // float or double
  const T* x;
  T* y;
  int64_t R, B;
  bool log;

  BRAID_HD int64_t base(int64_t row) const { return (row / B) * R * B + row % B; }
  BRAID_HD static Acc lowest() { return -std::numeric_limits<Acc>::infinity(); }

  BRAID_HD Acc partial_max(int64_t row, int64_t first, int64_t step) const {
    const T* p = x + base(row);
    Acc m = lowest();
    for (int64_t r = first; r < R; r += step) m = MaxOp{}(m, load<T>(p + r * B));
    return m;
  }
  // sum of exp(x - m)
  BRAID_HD Acc partial_sum(int64_t row, Acc m, int64_t first, int64_t step) const {
    const T* p = x + base(row);
    Acc z = 0;
    for (int64_t r = first; r < R; r += step) z += std::exp(load<T>(p + r * B) - m);
    return z;
  }
  BRAID_HD void write(int64_t row, Acc m, Acc z, int64_t first, int64_t step) const {
    const int64_t b0 = base(row);
    // (x - m) - log z, not x - (m + log z): the latter loses digits when |m| is large.
    const Acc logz = std::log(z), inv = Acc(1) / z;
    for (int64_t r = first; r < R; r += step) {
      const int64_t i = b0 + r * B;
      const Acc d = load<T>(x + i) - m;
      store<T>(y + i, log ? d - logz : std::exp(d) * inv);
    }
  }
  BRAID_HD void operator()(int64_t row) const {  // a thread per row
    const Acc m = partial_max(row, 0, 1);
    write(row, m, partial_sum(row, m, 0, 1), 0, 1);
  }
};

template <class T>
struct SoftmaxBackwardRows {
  using Acc = compute_t<T>;
  const T* g;
  const T* y;
  T* gx;
  int64_t R, B;
  bool log;

  BRAID_HD int64_t base(int64_t row) const { return (row / B) * R * B + row % B; }

  // sum(g) for log_softmax, sum(g * y) for softmax
  BRAID_HD Acc partial_sum(int64_t row, int64_t first, int64_t step) const {
    const int64_t b0 = base(row);
    Acc k = 0;
    for (int64_t r = first; r < R; r += step) {
      const int64_t i = b0 + r * B;
      k += log ? load<T>(g + i) : load<T>(g + i) * load<T>(y + i);
    }
    return k;
  }
  BRAID_HD void write(int64_t row, Acc k, int64_t first, int64_t step) const {
    const int64_t b0 = base(row);
    for (int64_t r = first; r < R; r += step) {
      const int64_t i = b0 + r * B;
      const Acc gi = load<T>(g + i), yi = load<T>(y + i);
      store<T>(gx + i, log ? gi - std::exp(yi) * k : yi * (gi - k));
    }
  }
  BRAID_HD void operator()(int64_t row) const { write(row, partial_sum(row, 0, 1), 0, 1); }
};

#if defined(__CUDACC__)

template <class T>
__global__ void softmax_block(SoftmaxRows<T> k, int64_t rows) {
  using Acc = typename SoftmaxRows<T>::Acc;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Acc m = block_all(k.partial_max(row, threadIdx.x, blockDim.x), SoftmaxRows<T>::lowest(), MaxOp{});
    const Acc z = block_all(k.partial_sum(row, m, threadIdx.x, blockDim.x), Acc(0), SumOp{});
    k.write(row, m, z, threadIdx.x, blockDim.x);
  }
}

template <class T>
__global__ void softmax_backward_block(SoftmaxBackwardRows<T> k, int64_t rows) {
  using Acc = typename SoftmaxBackwardRows<T>::Acc;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Acc s = block_all(k.partial_sum(row, threadIdx.x, blockDim.x), Acc(0), SumOp{});
    k.write(row, s, threadIdx.x, blockDim.x);
  }
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)); }

template <class T>
void softmax_by_block(const SoftmaxRows<T>& k, int64_t rows) {
  softmax_block<<<row_blocks(rows), kReduceThreads, 0, launch_stream()>>>(k, rows);
  check_launch("softmax");
}
template <class T>
void softmax_backward_by_block(const SoftmaxBackwardRows<T>& k, int64_t rows) {
  softmax_backward_block<<<row_blocks(rows), kReduceThreads, 0, launch_stream()>>>(k, rows);
  check_launch("softmax_backward");
}

#else

// Emulation: each phase's partials over the block's threads, in thread order.
template <class T>
void softmax_by_block(const SoftmaxRows<T>& k, int64_t rows) {
  using Acc = typename SoftmaxRows<T>::Acc;
  if (!emulated::launch("softmax")) return;
  for (int64_t row = 0; row < rows; ++row) {
    Acc m = SoftmaxRows<T>::lowest(), z = 0;
    for (int t = 0; t < kReduceThreads; ++t) m = MaxOp{}(m, k.partial_max(row, t, kReduceThreads));
    for (int t = 0; t < kReduceThreads; ++t) z += k.partial_sum(row, m, t, kReduceThreads);
    for (int t = 0; t < kReduceThreads; ++t) k.write(row, m, z, t, kReduceThreads);
  }
}
template <class T>
void softmax_backward_by_block(const SoftmaxBackwardRows<T>& k, int64_t rows) {
  using Acc = typename SoftmaxBackwardRows<T>::Acc;
  if (!emulated::launch("softmax_backward")) return;
  for (int64_t row = 0; row < rows; ++row) {
    Acc s = 0;
    for (int t = 0; t < kReduceThreads; ++t) s += k.partial_sum(row, t, kReduceThreads);
    for (int t = 0; t < kReduceThreads; ++t) k.write(row, s, t, kReduceThreads);
  }
}

#endif

// A block per row where rows are long and contiguous, or few and long
// (reduce_shape's rule; one row never needs two stages).
bool by_block(int64_t rows, int64_t R, int64_t B) {
  return reduce_shape(rows, R, B == 1) != ReduceShape::per_thread;
}

template <class T>
constexpr bool floating = std::is_floating_point_v<compute_t<T>>;

}  // namespace

void softmax(DType dtype, void* y, const void* x, int64_t A, int64_t R, int64_t B, bool log) {
  const int64_t rows = A * B;
  if (rows == 0 || R == 0) return;
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      const SoftmaxRows<T> k{static_cast<const T*>(x), static_cast<T*>(y), R, B, log};
      if (by_block(rows, R, B)) {
        softmax_by_block(k, rows);
      } else {
        for_each(rows, k, "softmax");
      }
    }
  });
}

void softmax_backward(DType dtype, void* gx, const void* g, const void* y, int64_t A, int64_t R, int64_t B, bool log) {
  const int64_t rows = A * B;
  if (rows == 0 || R == 0) return;
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      const SoftmaxBackwardRows<T> k{static_cast<const T*>(g), static_cast<const T*>(y), static_cast<T*>(gx), R, B,
                                     log};
      if (by_block(rows, R, B)) {
        softmax_backward_by_block(k, rows);
      } else {
        for_each(rows, k, "softmax_backward");
      }
    }
  });
}

}  // namespace braid::cuda
