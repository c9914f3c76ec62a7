#include "braid/tensor/cpu/reduce.h"

#include <algorithm>
#include <cmath>

#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/loops.h"
#include "braid/tensor/cpu/vmath.h"

namespace braid::cpu {

namespace {

// Columns handled per task of a column reduction (fits the accumulators in L1).
constexpr int64_t kColumnBlock = 256;

template <class Fn>
void dispatch(const Tensor& x, const char* name, bool ints, Fn&& fn) {
  switch (x.dtype()) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::i32: if (ints) return fn(int32_t{}); break;
    case DType::i64: if (ints) return fn(int64_t{}); break;
    default: break;
  }
  fail<ValueError>("{}: dtype {} is not supported (input of shape {})", name, braid::name(x.dtype()),
                   to_string(x.shape()));
}

// out[a, b] = scale * sum_r x[a, r, b] over a contiguous [A, R, B] block.
template <class T>
void sum_arb(const T* x, T* out, int64_t A, int64_t R, int64_t B, double scale) {
  if (B == 1 && A == 1 && R >= 2 * kParallelGrain) {
    // One long row (a sum over everything): per-thread partial sums, then combine.
    const int64_t chunks = std::min<int64_t>(num_threads(), R / kParallelGrain);
    std::vector<double> part(static_cast<size_t>(chunks), 0.0);
    parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        double acc = 0;
        const int64_t r0 = R * c / chunks, r1 = R * (c + 1) / chunks;
#pragma omp simd reduction(+ : acc)
        for (int64_t r = r0; r < r1; ++r) acc += static_cast<double>(x[r]);
        part[static_cast<size_t>(c)] = acc;
      }
    });
    double total = 0;
    for (double p : part) total += p;
    out[0] = static_cast<T>(total * scale);
    return;
  }
  if (B == 1) {
    parallel_for(0, A, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t a = lo; a < hi; ++a) {
        const T* row = x + a * R;
        double acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t r = 0; r < R; ++r) acc += static_cast<double>(row[r]);
        out[a] = static_cast<T>(acc * scale);
      }
    });
    return;
  }
  const int64_t blocks = (B + kColumnBlock - 1) / kColumnBlock;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R * kColumnBlock, 1));
  parallel_for(0, A * blocks, grain, [&](int64_t lo, int64_t hi) {
    double acc[kColumnBlock];
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t a = t / blocks, b0 = (t % blocks) * kColumnBlock;
      const int64_t nb = std::min(kColumnBlock, B - b0);
      std::fill(acc, acc + nb, 0.0);
      for (int64_t r = 0; r < R; ++r) {
        const T* row = x + (a * R + r) * B + b0;
        for (int64_t b = 0; b < nb; ++b) acc[b] += static_cast<double>(row[b]);
      }
      T* o = out + a * B + b0;
      for (int64_t b = 0; b < nb; ++b) o[b] = static_cast<T>(acc[b] * scale);
    }
  });
}

// [A, R, B] sizes of x contiguous around `dim`.
struct Arb {
  int64_t A = 1, R = 1, B = 1;
};
Arb split_at(const Shape& shape, int64_t dim) {
  Arb s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    (d < dim ? s.A : d == dim ? s.R : s.B) *= shape[d];
  }
  return s;
}

// One softmax row of R elements `stride` apart; Unit = 1 fixes stride 1 at
// compile time so the contiguous (last-dim) case vectorises.
template <class T, int Unit>
void softmax_row(const T* p, T* o, int64_t R, int64_t stride, bool log) {
  const int64_t st = Unit ? 1 : stride;
  T m = p[0];
  for (int64_t r = 1; r < R; ++r) m = std::max(m, p[r * st]);
  double z = 0;
  if constexpr (Unit && std::is_same_v<T, float>) {
    // Contiguous f32 row: shift into o, then one vectorised exp pass over it.
    for (int64_t r = 0; r < R; ++r) o[r] = p[r] - m;
    exp_f32(o, o, R);
#pragma omp simd reduction(+ : z)
    for (int64_t r = 0; r < R; ++r) z += static_cast<double>(o[r]);
    if (log) {
      const float logz = static_cast<float>(std::log(z));
      for (int64_t r = 0; r < R; ++r) o[r] = (p[r] - m) - logz;
    } else {
      const float inv = static_cast<float>(1.0 / z);
      for (int64_t r = 0; r < R; ++r) o[r] *= inv;
    }
    return;
  }
  if (log) {
#pragma omp simd reduction(+ : z)
    for (int64_t r = 0; r < R; ++r) z += static_cast<double>(std::exp(p[r * st] - m));
    // (x - m) - log z, not x - (m + log z): the latter loses digits when |m| is large.
    const T logz = static_cast<T>(std::log(z));
    for (int64_t r = 0; r < R; ++r) o[r * st] = (p[r * st] - m) - logz;
  } else {
    for (int64_t r = 0; r < R; ++r) o[r * st] = std::exp(p[r * st] - m);
#pragma omp simd reduction(+ : z)
    for (int64_t r = 0; r < R; ++r) z += static_cast<double>(o[r * st]);
    const T inv = static_cast<T>(1.0 / z);
    for (int64_t r = 0; r < R; ++r) o[r * st] *= inv;
  }
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, double scale, const char* name) {
  const int64_t nd = x.ndim();
  const std::vector<bool> reduce = reduced_dims(x.shape(), dims, name);
  Tensor out = Tensor::empty(reduced_shape(x.shape(), reduce, keepdim), x.dtype());
  // Kept dims before the first reduced one, reduced span, kept dims after: when
  // the reduced dims are not one run, move them last with one copy.
  Tensor xc = x;
  std::vector<int64_t> order;
  for (int64_t d = 0; d < nd; ++d) if (!reduce[d]) order.push_back(d);
  const size_t kept = order.size();
  for (int64_t d = 0; d < nd; ++d) if (reduce[d]) order.push_back(d);
  int64_t first = -1, last = -1, runs = 0;
  for (int64_t d = 0; d < nd; ++d) {
    if (!reduce[d]) continue;
    if (last != d - 1 || first < 0) ++runs;
    if (first < 0) first = d;
    last = d;
  }
  int64_t A = 1, R = 1, B = 1;
  if (runs <= 1) {
    for (int64_t d = 0; d < nd; ++d) (reduce[d] ? R : (first >= 0 && d > last ? B : A)) *= x.shape()[d];
    xc = x.contiguous();
  } else {
    Shape ps, pst;
    for (int64_t d : order) {
      ps.push_back(x.shape()[d]);
      pst.push_back(x.strides()[d]);
    }
    xc = x.as_strided(ps, pst, x.offset()).contiguous();
    for (size_t i = 0; i < order.size(); ++i) (i < kept ? A : R) *= ps[i];
  }
  dispatch(x, name, true, [&](auto zero) {
    using T = decltype(zero);
    sum_arb<T>(xc.data<T>(), out.data<T>(), A, R, B, scale);
  });
  return out;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const std::vector<bool> reduce = sum_to_dims(x.shape(), shape);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (reduce[d]) dims.push_back(d);
  }
  Tensor s = sum(x, dims, true, 1.0, "sum_to");
  // Drop the leading kept-as-1 dims: a view of the fresh contiguous result.
  return s.as_strided(shape, contiguous_strides(shape), 0);
}

MaxResult max_dim(const Tensor& x, int64_t dim, bool keepdim, const char* name) {
  const int64_t nd = x.ndim();
  const int64_t d = wrap_dim(dim, nd, name);
  if (nd > 0 && x.shape()[d] == 0) {
    fail<ValueError>("{}: cannot take the max of an empty dimension {} (input {})", name, dim, to_string(x.shape()));
  }
  std::vector<bool> reduce(static_cast<size_t>(nd), false);
  if (nd > 0) reduce[d] = true;
  const Shape out_shape = reduced_shape(x.shape(), reduce, keepdim);
  MaxResult res{Tensor::empty(out_shape, x.dtype()), Tensor::empty(out_shape, DType::i64)};
  const Arb s = nd > 0 ? split_at(x.shape(), d) : Arb{};
  Tensor xc = x.contiguous();
  dispatch(x, name, true, [&](auto zero) {
    using T = decltype(zero);
    const T* xp = xc.data<T>();
    T* vp = res.values.data<T>();
    int64_t* ip = res.indices.data<int64_t>();
    parallel_for(0, s.A * s.B, std::max<int64_t>(1, kParallelGrain / s.R), [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t a = t / s.B, b = t % s.B;
        const T* p = xp + a * s.R * s.B + b;
        T best = p[0];
        int64_t at = 0;
        for (int64_t r = 1; r < s.R; ++r) {
          const T v = p[r * s.B];
          if constexpr (std::is_floating_point_v<T>) {
            if (best != best) break;  // NaN already won
            if (v > best || v != v) { best = v; at = r; }
          } else {
            if (v > best) { best = v; at = r; }
          }
        }
        vp[t] = best;
        ip[t] = at;
      }
    });
  });
  return res;
}

Tensor softmax(const Tensor& x, int64_t dim, bool log, const char* name) {
  const int64_t d = wrap_dim(dim, x.ndim(), name);
  const Arb s = x.ndim() > 0 ? split_at(x.shape(), d) : Arb{};
  Tensor xc = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  if (x.numel() == 0) return out;
  dispatch(x, name, false, [&](auto zero) {
    using T = decltype(zero);
    const T* xp = xc.data<T>();
    T* op = out.data<T>();
    parallel_for(0, s.A * s.B, std::max<int64_t>(1, kParallelGrain / s.R), [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t a = t / s.B, b = t % s.B;
        const T* p = xp + a * s.R * s.B + b;
        T* o = op + a * s.R * s.B + b;
        if (s.B == 1) {
          softmax_row<T, 1>(p, o, s.R, 1, log);
        } else {
          softmax_row<T, 0>(p, o, s.R, s.B, log);
        }
      }
    });
  });
  return out;
}

Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  const char* name = log ? "log_softmax_backward" : "softmax_backward";
  const int64_t d = wrap_dim(dim, y.ndim(), name);
  const Arb s = y.ndim() > 0 ? split_at(y.shape(), d) : Arb{};
  Tensor gc = g.contiguous(), yc = y.contiguous();
  Tensor out = Tensor::empty(y.shape(), y.dtype());
  if (y.numel() == 0) return out;
  dispatch(y, name, false, [&](auto zero) {
    using T = decltype(zero);
    const T* gp = gc.data<T>();
    const T* yp = yc.data<T>();
    T* op = out.data<T>();
    parallel_for(0, s.A * s.B, std::max<int64_t>(1, kParallelGrain / s.R), [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t base = (t / s.B) * s.R * s.B + t % s.B;
        double acc = 0;
        for (int64_t r = 0; r < s.R; ++r) {
          const int64_t i = base + r * s.B;
          acc += log ? static_cast<double>(gp[i]) : static_cast<double>(gp[i]) * static_cast<double>(yp[i]);
        }
        const T k = static_cast<T>(acc);
        for (int64_t r = 0; r < s.R; ++r) {
          const int64_t i = base + r * s.B;
          op[i] = log ? gp[i] - std::exp(yp[i]) * k : yp[i] * (gp[i] - k);
        }
      }
    });
  });
  return out;
}

}  // namespace braid::cpu
