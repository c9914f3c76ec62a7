#include "braid/cuda/norm_kernels.h"

#include "braid/cuda/reduce_loop.h"

namespace braid::cuda {

namespace {

// Like softmax_kernels.cu, each row kernel is phases over the elements
// first, first + step, ... of a row, so one body serves a thread per row
// (first 0, step 1), a CUDA block per row (first = thread, step = block size,
// partials combined by block_all between phases) and the emulated block.

struct SumOp {
  template <class A>
  BRAID_HD A operator()(A a, A b) const { return a + b; }
};

template <class T>
struct LayerNormRows {
  using C = compute_t<T>;
  const T* x;
  const T* w;
  const T* b;
  T* y;
  double* stats;
  int64_t d;
  double eps;

  BRAID_HD double partial_sum(int64_t row, int64_t first, int64_t step) const {
    const T* xr = x + row * d;
    double s = 0;
    for (int64_t i = first; i < d; i += step) s += static_cast<double>(load<T>(xr + i));
    return s;
  }
  BRAID_HD double partial_sq(int64_t row, double mu, int64_t first, int64_t step) const {
    const T* xr = x + row * d;
    double ss = 0;
    for (int64_t i = first; i < d; i += step) {
      const double c = static_cast<double>(load<T>(xr + i)) - mu;
      ss += c * c;
    }
    return ss;
  }
  BRAID_HD double rstd_of(double ss) const { return 1.0 / std::sqrt(ss / static_cast<double>(d) + eps); }
  BRAID_HD void finish(int64_t row, double mu, double rstd) const {
    stats[2 * row] = mu;
    stats[2 * row + 1] = rstd;
  }
  BRAID_HD void write(int64_t row, double mu, double rstd, int64_t first, int64_t step) const {
    const T* xr = x + row * d;
    T* yr = y + row * d;
    const C m = static_cast<C>(mu), rs = static_cast<C>(rstd);
    for (int64_t i = first; i < d; i += step) {
      const C v = (load<T>(xr + i) - m) * rs;
      store<T>(yr + i, (w ? v * load<T>(w + i) : v) + (b ? load<T>(b + i) : C(0)));
    }
  }
  BRAID_HD void operator()(int64_t row) const {  // a thread per row
    const double mu = partial_sum(row, 0, 1) / static_cast<double>(d);
    const double rstd = rstd_of(partial_sq(row, mu, 0, 1));
    finish(row, mu, rstd);
    write(row, mu, rstd, 0, 1);
  }
};

// The backward's two row sums: of gh and of gh * xhat.
// (No member initialisers: block_all keeps Sums in __shared__ memory, which
// takes only trivially constructible types.)
struct Sums {
  double gh, ghx;
  BRAID_HD Sums operator+(const Sums& o) const { return {gh + o.gh, ghx + o.ghx}; }
};

template <class T>
struct LayerNormBackwardRows {
  using C = compute_t<T>;
  const T* g;
  const T* x;
  const T* w;
  const double* stats;
  T* gx;
  T* gxhat;  // null unless the weight's gradient is wanted
  int64_t d;

  BRAID_HD C xhat(int64_t row, int64_t i) const {
    return (load<T>(x + row * d + i) - static_cast<C>(stats[2 * row])) * static_cast<C>(stats[2 * row + 1]);
  }
  BRAID_HD C gh(int64_t row, int64_t i) const {
    const C gi = load<T>(g + row * d + i);
    return w ? gi * load<T>(w + i) : gi;
  }
  // Also writes g * xhat, which needs no row sum.
  BRAID_HD Sums partial(int64_t row, int64_t first, int64_t step) const {
    Sums s{0, 0};
    for (int64_t i = first; i < d; i += step) {
      const C xh = xhat(row, i), h = gh(row, i);
      s.gh += static_cast<double>(h);
      s.ghx += static_cast<double>(h) * static_cast<double>(xh);
      if (gxhat) store<T>(gxhat + row * d + i, load<T>(g + row * d + i) * xh);
    }
    return s;
  }
  BRAID_HD void write(int64_t row, Sums s, int64_t first, int64_t step) const {
    const C rs = static_cast<C>(stats[2 * row + 1]);
    const C mean_gh = static_cast<C>(s.gh / static_cast<double>(d));
    const C mean_ghx = static_cast<C>(s.ghx / static_cast<double>(d));
    for (int64_t i = first; i < d; i += step) {
      store<T>(gx + row * d + i, rs * (gh(row, i) - mean_gh - xhat(row, i) * mean_ghx));
    }
  }
  BRAID_HD void operator()(int64_t row) const { write(row, partial(row, 0, 1), 0, 1); }
};

#if defined(__CUDACC__)

template <class T>
__global__ void layer_norm_block(LayerNormRows<T> k, int64_t rows) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const double mu = block_all(k.partial_sum(row, threadIdx.x, blockDim.x), 0.0, SumOp{}) / static_cast<double>(k.d);
    const double rstd = k.rstd_of(block_all(k.partial_sq(row, mu, threadIdx.x, blockDim.x), 0.0, SumOp{}));
    if (threadIdx.x == 0) k.finish(row, mu, rstd);
    k.write(row, mu, rstd, threadIdx.x, blockDim.x);
  }
}

template <class T>
__global__ void layer_norm_backward_block(LayerNormBackwardRows<T> k, int64_t rows) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    k.write(row, block_all(k.partial(row, threadIdx.x, blockDim.x), Sums{0, 0}, SumOp{}), threadIdx.x, blockDim.x);
  }
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)); }

template <class T>
void by_block(const LayerNormRows<T>& k, int64_t rows) {
  layer_norm_block<<<row_blocks(rows), kReduceThreads, 0, launch_stream()>>>(k, rows);
  check_launch("layer_norm");
}
template <class T>
void by_block(const LayerNormBackwardRows<T>& k, int64_t rows) {
  layer_norm_backward_block<<<row_blocks(rows), kReduceThreads, 0, launch_stream()>>>(k, rows);
  check_launch("layer_norm_backward");
}

#else

// Emulation: each phase's partials over the block's threads, in thread order.
template <class T>
void by_block(const LayerNormRows<T>& k, int64_t rows) {
  if (!emulated::launch("layer_norm")) return;
  for (int64_t row = 0; row < rows; ++row) {
    double s = 0, ss = 0;
    for (int t = 0; t < kReduceThreads; ++t) s += k.partial_sum(row, t, kReduceThreads);
    const double mu = s / static_cast<double>(k.d);
    for (int t = 0; t < kReduceThreads; ++t) ss += k.partial_sq(row, mu, t, kReduceThreads);
    const double rstd = k.rstd_of(ss);
    k.finish(row, mu, rstd);
    for (int t = 0; t < kReduceThreads; ++t) k.write(row, mu, rstd, t, kReduceThreads);
  }
}
template <class T>
void by_block(const LayerNormBackwardRows<T>& k, int64_t rows) {
  if (!emulated::launch("layer_norm_backward")) return;
  for (int64_t row = 0; row < rows; ++row) {
    Sums s{0, 0};
    for (int t = 0; t < kReduceThreads; ++t) s = s + k.partial(row, t, kReduceThreads);
    for (int t = 0; t < kReduceThreads; ++t) k.write(row, s, t, kReduceThreads);
  }
}

#endif

// A block per row for rows of 64 elements or more (reduce_shape's rule).
bool use_blocks(int64_t rows, int64_t d) { return reduce_shape(rows, d, true) != ReduceShape::per_thread; }

template <class T>
struct RunningUpdate {
  T* running;
  Indexer<1> ix;
  const T* batch;
  compute_t<T> keep, take;
  BRAID_HD void operator()(int64_t i) const {
    int64_t off[1];
    ix.offsets(i, off);
    store<T>(running + off[0], load<T>(running + off[0]) * keep + load<T>(batch + i) * take);
  }
};

template <class T>
constexpr bool floating = std::is_floating_point_v<compute_t<T>>;

// v rounded to T, in T's compute type.
template <class T>
compute_t<T> rounded(double v) {
  T t;
  store<T>(&t, static_cast<compute_t<T>>(v));
  return load<T>(&t);
}

}  // namespace

void layer_norm(DType dtype, void* y, double* stats, const void* x, const void* w, const void* b, int64_t rows,
                int64_t d, double eps) {
  if (rows <= 0 || d <= 0) return;
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      const LayerNormRows<T> k{static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b),
                               static_cast<T*>(y), stats, d, eps};
      if (use_blocks(rows, d)) {
        by_block(k, rows);
      } else {
        for_each(rows, k, "layer_norm");
      }
    }
  });
}

void layer_norm_backward(DType dtype, void* gx, void* gxhat, const void* g, const void* x, const void* w,
                         const double* stats, int64_t rows, int64_t d) {
  if (rows <= 0 || d <= 0) return;
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      const LayerNormBackwardRows<T> k{static_cast<const T*>(g), static_cast<const T*>(x), static_cast<const T*>(w),
                                       stats, static_cast<T*>(gx), static_cast<T*>(gxhat), d};
      if (use_blocks(rows, d)) {
        by_block(k, rows);
      } else {
        for_each(rows, k, "layer_norm_backward");
      }
    }
  });
}

void running_update(DType dtype, void* running, const Indexer<1>& ix, const void* batch, int64_t n, double keep,
                    double take) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      for_each(n, RunningUpdate<T>{static_cast<T*>(running), ix, static_cast<const T*>(batch), rounded<T>(keep),
                                   rounded<T>(take)}, "batch_norm_running_update_");
    }
  });
}

}  // namespace braid::cuda
