#include "braid/ops/norm.h"

#include <algorithm>
#include <cmath>

#include "braid/autograd/node.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/loops.h"
#include "braid/tensor/cpu/reduce.h"

namespace braid {

namespace {

void check_param(const char* op, const char* what, const Tensor& p, const Shape& expect, const Tensor& x) {
  if (p.defined() && (p.shape() != expect || p.dtype() != x.dtype())) {
    fail<ValueError>("{}: {} must be {} {}, got {} {} (input {})", op, what, name(x.dtype()), to_string(expect),
                     name(p.dtype()), to_string(p.shape()), to_string(x.shape()));
  }
}

template <class Fn>
void dispatch_float(const Tensor& x, const char* op, Fn&& fn) {
  if (x.dtype() == DType::f32) return fn(float{});
  if (x.dtype() == DType::f64) return fn(double{});
  fail<ValueError>("{}: dtype {} is not supported (input of shape {})", op, name(x.dtype()), to_string(x.shape()));
}

// y = (x - mean) * rstd * w + b over rows of d contiguous elements; stats gets
// (mean, rstd) per row. Statistics accumulate in double.
template <class T>
void layer_norm_rows(const T* x, const T* w, const T* b, T* y, double* stats, int64_t rows, int64_t d, double eps) {
  parallel_for(0, rows, std::max<int64_t>(1, cpu::kParallelGrain / std::max<int64_t>(d, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * d;
      T* yr = y + r * d;
      double s = 0, ss = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < d; ++i) s += static_cast<double>(xr[i]);
      const double mu = s / static_cast<double>(d);
#pragma omp simd reduction(+ : ss)
      for (int64_t i = 0; i < d; ++i) ss += (static_cast<double>(xr[i]) - mu) * (static_cast<double>(xr[i]) - mu);
      const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
      stats[2 * r] = mu;
      stats[2 * r + 1] = rstd;
      const T m = static_cast<T>(mu), rs = static_cast<T>(rstd);
      for (int64_t i = 0; i < d; ++i) {
        const T v = (xr[i] - m) * rs;
        yr[i] = (w ? v * w[i] : v) + (b ? b[i] : T{0});
      }
    }
  });
}

// With xhat = (x - mean) * rstd and gh = g * w:
//   g_x = rstd * (gh - mean(gh) - xhat * mean(gh * xhat))   (per row)
//   g_w = sum over rows of g * xhat,  g_b = sum over rows of g.
std::vector<Tensor> layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& stats,
                                        int64_t rows, int64_t d, bool want_w, bool want_b) {
  const Tensor gc = g.contiguous();
  Tensor gx = Tensor::empty(x.shape(), x.dtype());
  Tensor gxhat = want_w ? Tensor::empty({rows, d}, x.dtype()) : Tensor();  // g * xhat, summed over rows below
  dispatch_float(x, "layer_norm", [&](auto zero) {
    using T = decltype(zero);
    const T* xp = x.data<T>();
    const T* gp = gc.data<T>();
    const T* wp = w.defined() ? w.data<T>() : nullptr;
    const double* st = stats.data<double>();
    T* gxp = gx.data<T>();
    T* ghp = want_w ? gxhat.data<T>() : nullptr;
    parallel_for(0, rows, std::max<int64_t>(1, cpu::kParallelGrain / std::max<int64_t>(d, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const T m = static_cast<T>(st[2 * r]), rs = static_cast<T>(st[2 * r + 1]);
        const T* xr = xp + r * d;
        const T* gr = gp + r * d;
        double sum_gh = 0, sum_ghx = 0;
        for (int64_t i = 0; i < d; ++i) {
          const T xhat = (xr[i] - m) * rs;
          const T gh = wp ? gr[i] * wp[i] : gr[i];
          sum_gh += static_cast<double>(gh);
          sum_ghx += static_cast<double>(gh) * static_cast<double>(xhat);
          if (ghp) ghp[r * d + i] = gr[i] * xhat;
        }
        const T mean_gh = static_cast<T>(sum_gh / static_cast<double>(d));
        const T mean_ghx = static_cast<T>(sum_ghx / static_cast<double>(d));
        T* out = gxp + r * d;
        for (int64_t i = 0; i < d; ++i) {
          const T xhat = (xr[i] - m) * rs;
          const T gh = wp ? gr[i] * wp[i] : gr[i];
          out[i] = rs * (gh - mean_gh - xhat * mean_ghx);
        }
      }
    });
  });
  const Shape wshape = w.defined() ? w.shape() : Shape{d};
  Tensor gw, gb;
  if (want_w) gw = cpu::sum(gxhat, {0}, false, 1.0, "layer_norm").as_strided(wshape, contiguous_strides(wshape), 0);
  if (want_b) {
    gb = cpu::sum(gc.as_strided({rows, d}, {d, 1}, gc.offset()), {0}, false, 1.0, "layer_norm")
             .as_strided(wshape, contiguous_strides(wshape), 0);
  }
  return {gx, gw, gb};
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool ok = k >= 1 && k <= x.ndim();
  for (int64_t i = 0; ok && i < k; ++i) ok = x.shape()[x.ndim() - k + i] == normalized_shape[i];
  if (!ok) {
    fail<ValueError>("layer_norm: normalized_shape {} is not the trailing shape of the input {}",
                     to_string(normalized_shape), to_string(x.shape()));
  }
  check_param("layer_norm", "weight", weight, normalized_shape, x);
  check_param("layer_norm", "bias", bias, normalized_shape, x);
  // Fused: one pass for the statistics, one for the output, per row of D.
  int64_t d = 1;
  for (int64_t v : normalized_shape) d *= v;
  const int64_t rows = d > 0 ? x.numel() / d : 0;
  const Tensor xc = x.contiguous();
  const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor stats = Tensor::empty({rows, 2}, DType::f64);  // per row: mean, 1/sqrt(var + eps)
  dispatch_float(x, "layer_norm", [&](auto zero) {
    using T = decltype(zero);
    layer_norm_rows<T>(xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr, bc.defined() ? bc.data<T>() : nullptr,
                       y.data<T>(), stats.data<double>(), rows, d, eps);
  });
  autograd::record("layer_norm", {x, weight, bias}, y,
                   [xd = xc.detach(), wd = wc.defined() ? wc.detach() : Tensor(), stats, rows, d,
                    rw = weight.defined() && weight.requires_grad(), rb = bias.defined() && bias.requires_grad()](
                       const Tensor& g) {
                     return layer_norm_backward(g, xd, wd, stats, rows, d, rw, rb);
                   });
  return y;
}

Tensor weight_norm(const Tensor& v, const Tensor& g) {
  if (v.ndim() < 1 || !g.defined() || g.numel() != v.size(0) || (g.ndim() != 1 && g.ndim() != v.ndim())) {
    fail<ValueError>("weight_norm: g must be [{}] or [{}, 1, ...] for v {}, got {}", v.ndim() ? v.size(0) : 0,
                     v.ndim() ? v.size(0) : 0, to_string(v.shape()), g.defined() ? to_string(g.shape()) : "none");
  }
  const Tensor norm = weight_norm_lengths(v);
  return mul(v, div(reshape(g, norm.shape()), norm));
}

Tensor weight_norm_lengths(const Tensor& v) {
  std::vector<int64_t> dims;
  for (int64_t d = 1; d < v.ndim(); ++d) dims.push_back(d);
  return dims.empty() ? sqrt(mul(v, v)) : sqrt(sum(mul(v, v), dims, true));
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, BatchNormOptions options) {
  if (x.ndim() < 2) fail<ValueError>("batch_norm: input must be [N, C, ...], got {}", to_string(x.shape()));
  const int64_t c = x.size(1);
  check_param("batch_norm", "weight", weight, {c}, x);
  check_param("batch_norm", "bias", bias, {c}, x);
  check_param("batch_norm", "running_mean", running_mean, {c}, x);
  check_param("batch_norm", "running_var", running_var, {c}, x);
  // [C] -> [1, C, 1, ...] so per-channel tensors broadcast against x.
  Shape channel(x.ndim(), 1);
  channel[1] = c;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.ndim(); ++d) if (d != 1) dims.push_back(d);

  Tensor mu, variance;
  if (options.training) {
    int64_t n = x.numel() / std::max<int64_t>(c, 1);
    if (options.across_replicas) {
      // Two passes, like the local case, so the variance is as accurate as
      // one process's over the concatenated batch (E[x^2] - E[x]^2 is not).
      const BatchSum& all = options.across_replicas;
      {
        autograd::NoGradGuard no_grad;
        n = static_cast<int64_t>(std::llround(all(Tensor::full({1}, static_cast<double>(n), DType::f64)).item()));
      }
      if (n <= 1) fail<ValueError>("batch_norm: training needs more than one value per channel across replicas, input {}", to_string(x.shape()));
      const double inv_n = 1.0 / static_cast<double>(n);
      mu = mul(all(sum(x, dims, true)), inv_n);
      const Tensor centered = sub(x, mu);
      variance = mul(all(sum(mul(centered, centered), dims, true)), inv_n);
    } else {
      if (n <= 1) fail<ValueError>("batch_norm: training needs more than one value per channel, input {}", to_string(x.shape()));
      mu = mean(x, dims, true);
      const Tensor centered = sub(x, mu);
      variance = mean(mul(centered, centered), dims, true);
    }
    if (running_mean.defined() || running_var.defined()) {
      autograd::NoGradGuard no_grad;
      const double m = options.momentum;
      if (running_mean.defined()) running_mean.copy_from(add(mul(running_mean, 1 - m), mul(reshape(mu, {c}), m)));
      if (running_var.defined()) {
        const double unbias = static_cast<double>(n) / static_cast<double>(n - 1);
        running_var.copy_from(add(mul(running_var, 1 - m), mul(reshape(variance, {c}), m * unbias)));
      }
    }
  } else {
    if (!running_mean.defined() || !running_var.defined()) {
      fail<ValueError>("batch_norm: eval mode needs running_mean and running_var (input {})", to_string(x.shape()));
    }
    mu = reshape(running_mean, channel);
    variance = reshape(running_var, channel);
  }
  Tensor y = div(sub(x, mu), sqrt(add(variance, options.eps)));
  if (weight.defined()) y = mul(y, reshape(weight, channel));
  if (bias.defined()) y = add(y, reshape(bias, channel));
  return y;
}

}  // namespace braid
