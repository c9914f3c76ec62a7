#include "braid/ops/norm.h"

#include <algorithm>
#include <cmath>

#include "braid/autograd/node.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/define.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/ops/tensor_ops.h"
#include "braid/tensor/cpu/batch_norm.h"
#include "braid/tensor/cpu/loops.h"

namespace braid {

namespace {

using op::Cost;
using op::TensorMeta;

// An optional input left out, or an output not computed (as meta_of(Tensor())).
const TensorMeta kAbsent{{}, DType::f32, true};

void check_param(const char* op, const char* what, const TensorMeta& p, const Shape& expect, const TensorMeta& x) {
  if (!p.absent && (p.shape != expect || p.dtype != x.dtype)) {
    fail<ValueError>("{}: {} must be {} {}, got {} {} (input {})", op, what, name(x.dtype), to_string(expect),
                     name(p.dtype), to_string(p.shape), to_string(x.shape));
  }
}

template <class Fn>
void dispatch_float(const Tensor& x, const char* op, Fn&& fn) {
  if (x.dtype() == DType::f32) return fn(float{});
  if (x.dtype() == DType::f64) return fn(double{});
  fail<ValueError>("{}: dtype {} is not supported (input of shape {})", op, name(x.dtype()), to_string(x.shape()));
}

// layer_norm's input as rows of d elements, d the size of normalized_shape.
struct Rows {
  int64_t rows, d;
};

Rows layer_norm_rows_of(const TensorMeta& x, const TensorMeta& w, const TensorMeta& b, const Shape& normalized) {
  const int64_t k = static_cast<int64_t>(normalized.size()), nd = static_cast<int64_t>(x.shape.size());
  bool ok = k >= 1 && k <= nd;
  for (int64_t i = 0; ok && i < k; ++i) ok = x.shape[nd - k + i] == normalized[i];
  if (!ok) {
    fail<ValueError>("layer_norm: normalized_shape {} is not the trailing shape of the input {}", to_string(normalized),
                     to_string(x.shape));
  }
  check_param("layer_norm", "weight", w, normalized, x);
  check_param("layer_norm", "bias", b, normalized, x);
  const int64_t d = numel(normalized);
  return {d > 0 ? numel(x.shape) / d : 0, d};
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

// With xhat = (x - mean) * rstd and gh = g * w, per row:
//   g_x = rstd * (gh - mean(gh) - xhat * mean(gh * xhat))
// and, when gxhat is given, gxhat = g * xhat (summed over rows, it is g_w).
template <class T>
void layer_norm_rows_backward(const T* gp, const T* xp, const T* wp, const double* st, T* gxp, T* ghp, int64_t rows,
                              int64_t d) {
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
}

// batch_norm's input as [n, c, s]: channels in dim 1, s the rest per example.
struct Channels {
  int64_t n, c, s;
};

Channels channels_of(const char* op, const TensorMeta& x) {
  if (x.shape.size() < 2) fail<ValueError>("{}: input must be [N, C, ...], got {}", op, to_string(x.shape));
  const int64_t n = x.shape[0], c = x.shape[1];
  return {n, c, n * c > 0 ? numel(x.shape) / (n * c) : 0};
}

// A per-row normalisation's cost: `flops` per element, two reductions of d
// (mean and variance, or the backward's two sums) and a map.
Cost rows_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, double flops, int64_t d) {
  Cost c{flops * static_cast<double>(numel(in[0].shape)), 0, op::log2_depth(static_cast<double>(d)) + 2};
  for (const TensorMeta& m : in) c.bytes += op::bytes_of(m);
  for (const TensorMeta& m : out) c.bytes += op::bytes_of(m);
  return c;
}

}  // namespace

// ---- the ops ----

namespace op {

void define_norm_ops(const Definer& define) {
  // (x, weight?, bias?) -> (y, stats): the fused row kernel, one pass for the
  // statistics and one for the output. stats [rows, 2] f64 holds each row's
  // mean and 1/sqrt(var + eps) for the backward.
  define({.name = "layer_norm", .family = "norm", .inputs = 3, .outputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const Rows r = layer_norm_rows_of(in[0], in[1], in[2], a.ints("normalized_shape"));
            return Metas{in[0], {{r.rows, 2}, DType::f64}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& x = a.inputs[0];
            const Rows r = layer_norm_rows_of(meta_of(x), meta_of(a.inputs[1]), meta_of(a.inputs[2]),
                                              a.attrs.ints("normalized_shape"));
            const Tensor xc = x.contiguous();
            const Tensor wc = a.inputs[1].defined() ? a.inputs[1].contiguous() : Tensor();
            const Tensor bc = a.inputs[2].defined() ? a.inputs[2].contiguous() : Tensor();
            Tensor y = Tensor::empty(x.shape(), x.dtype());
            Tensor stats = Tensor::empty({r.rows, 2}, DType::f64);
            dispatch_float(x, "layer_norm", [&](auto zero) {
              using T = decltype(zero);
              layer_norm_rows<T>(xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                                 bc.defined() ? bc.data<T>() : nullptr, y.data<T>(), stats.data<double>(), r.rows, r.d,
                                 a.attrs.f("eps"));
            });
            return Outputs{y, stats};
          })},
          // g_w and g_b are column sums over the rows (of g * xhat, of g).
          .backward = [](const GradArgs& g) {
            const Shape& normalized = g.attrs.ints("normalized_shape");
            const int64_t rows = g.outputs[1].size(0), d = numel(normalized);
            const std::vector<Tensor> r =
                call(BRAID_OP("layer_norm_backward"), {g.grad, g.inputs[0], g.inputs[1], g.outputs[1]},
                     {{"normalized_shape", normalized}, {"weight_grad", int64_t{g.needs(1)}}});
            return Grads{r[0], g.needs(1) ? reshape(sum(r[1], {0}), normalized) : Tensor(),
                         g.needs(2) ? reshape(sum(reshape(g.grad, {rows, d}), {0}), normalized)
                                    : Tensor()};
          },
          .save_inputs = 0b011, .save_outputs = 0b10,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            return rows_cost(in, out, 8, numel(a.ints("normalized_shape")));
          }});
  // (g, x, weight?, stats) -> (g_x, g * xhat): the fused row backward. The
  // second output ([rows, d], summed into g_w by the caller) only when
  // attribute weight_grad is set; absent otherwise.
  define({.name = "layer_norm_backward", .family = "norm", .inputs = 4, .outputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const Rows r = layer_norm_rows_of(in[1], in[2], kAbsent, a.ints("normalized_shape"));
            if (in[0].shape != in[1].shape || in[0].dtype != in[1].dtype) {
              fail<ValueError>("layer_norm_backward: gradient {} {} does not match the input {} {}", name(in[0].dtype),
                               to_string(in[0].shape), name(in[1].dtype), to_string(in[1].shape));
            }
            return Metas{in[1], a.b("weight_grad") ? TensorMeta{{r.rows, r.d}, in[1].dtype} : kAbsent};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& x = a.inputs[1];
            const Tensor& w = a.inputs[2];
            const Rows r = layer_norm_rows_of(meta_of(x), meta_of(w), kAbsent, a.attrs.ints("normalized_shape"));
            if (a.inputs[0].shape() != x.shape() || a.inputs[0].dtype() != x.dtype() ||
                a.inputs[3].dtype() != DType::f64 || a.inputs[3].shape() != Shape{r.rows, 2}) {
              fail<ValueError>("layer_norm_backward: gradient {} {} and stats {} {} do not fit the input {} {}",
                               name(a.inputs[0].dtype()), to_string(a.inputs[0].shape()), name(a.inputs[3].dtype()),
                               to_string(a.inputs[3].shape()), name(x.dtype()), to_string(x.shape()));
            }
            const Tensor gc = a.inputs[0].contiguous(), xc = x.contiguous(), stats = a.inputs[3].contiguous();
            const Tensor wc = w.defined() ? w.contiguous() : Tensor();
            Tensor gx = Tensor::empty(x.shape(), x.dtype());
            Tensor gxhat = a.attrs.b("weight_grad") ? Tensor::empty({r.rows, r.d}, x.dtype()) : Tensor();
            dispatch_float(x, "layer_norm_backward", [&](auto zero) {
              using T = decltype(zero);
              layer_norm_rows_backward<T>(gc.data<T>(), xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                                          stats.data<double>(), gx.data<T>(),
                                          gxhat.defined() ? gxhat.data<T>() : nullptr, r.rows, r.d);
            });
            return Outputs{gx, gxhat};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            return rows_cost(in, out, 11, numel(a.ints("normalized_shape")));
          }});

  // running = (1 - momentum) * running + momentum * scale * batch, in place:
  // batch norm's running statistics (batch: the batch's statistic, any shape
  // with running's number of elements; scale: n / (n - 1) for the variance).
  define({.name = "batch_norm_running_update_", .family = "norm", .inputs = 2, .effect = Effect::inplace,
          .mutates = {0},
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            if (numel(in[0].shape) != numel(in[1].shape) || in[0].dtype != in[1].dtype) {
              fail<ValueError>("batch_norm_running_update_: running {} {} and batch {} {} differ", name(in[0].dtype),
                               to_string(in[0].shape), name(in[1].dtype), to_string(in[1].shape));
            }
            return Metas{in[0]};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& running = a.inputs[0];
            const Tensor batch = a.inputs[1].contiguous();
            if (running.numel() != batch.numel() || running.dtype() != batch.dtype()) {
              fail<ValueError>("batch_norm_running_update_: running {} {} and batch {} {} differ",
                               name(running.dtype()), to_string(running.shape()), name(batch.dtype()),
                               to_string(batch.shape()));
            }
            const double m = a.attrs.f("momentum"), scale = a.attrs.f("scale");
            const Tensor r = running.contiguous();  // itself unless strided; copied back below
            dispatch_float(r, "batch_norm_running_update_", [&](auto zero) {
              using T = decltype(zero);
              T* rp = r.data<T>();
              const T* bp = batch.data<T>();
              const T keep = static_cast<T>(1 - m), take = static_cast<T>(m * scale);
              for (int64_t i = 0; i < r.numel(); ++i) rp[i] = rp[i] * keep + bp[i] * take;
            });
            if (!r.same(running)) running.copy_from(r);
            return Outputs{running};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta>, const Attrs&) {
            return Cost{4 * static_cast<double>(numel(in[0].shape)), 2 * bytes_of(in[0]) + bytes_of(in[1]), 1};
          }});

  // (x, weight?, bias?) -> (y, stats): training-mode batch norm, the fused
  // kernel (tensor/cpu/batch_norm.h) in place of the composite of
  // primitives, which stays for statistics summed across replicas and for
  // devices without this op. stats [2, C] f64: each channel's mean and
  // 1/sqrt(var + eps) (biased variance), for the backward and the running
  // statistics.
  define({.name = "batch_norm", .family = "norm", .inputs = 3, .outputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            const Channels ch = channels_of("batch_norm", in[0]);
            check_param("batch_norm", "weight", in[1], {ch.c}, in[0]);
            check_param("batch_norm", "bias", in[2], {ch.c}, in[0]);
            return Metas{in[0], {{2, ch.c}, DType::f64}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& x = a.inputs[0];
            const Channels ch = channels_of("batch_norm", meta_of(x));
            check_param("batch_norm", "weight", meta_of(a.inputs[1]), {ch.c}, meta_of(x));
            check_param("batch_norm", "bias", meta_of(a.inputs[2]), {ch.c}, meta_of(x));
            const Tensor xc = x.contiguous();
            const Tensor wc = a.inputs[1].defined() ? a.inputs[1].contiguous() : Tensor();
            const Tensor bc = a.inputs[2].defined() ? a.inputs[2].contiguous() : Tensor();
            Tensor y = Tensor::empty(x.shape(), x.dtype());
            Tensor stats = Tensor::empty({2, ch.c}, DType::f64);
            dispatch_float(x, "batch_norm", [&](auto zero) {
              using T = decltype(zero);
              cpu::batch_norm_forward<T>(xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                                         bc.defined() ? bc.data<T>() : nullptr, y.data<T>(), stats.data<double>(), ch.n,
                                         ch.c, ch.s, a.attrs.f("eps"));
            });
            return Outputs{y, stats};
          })},
          // g_b = sum(g), g_w = sum(g * xhat) per channel: the backward's second output.
          .backward = [](const GradArgs& g) {
            const std::vector<Tensor> r =
                call(BRAID_OP("batch_norm_backward"), {g.grad, g.inputs[0], g.inputs[1], g.outputs[1]});
            const int64_t c = g.outputs[1].size(1);
            return Grads{r[0], g.needs(1) ? reshape(slice(r[1], 0, 1, 2), {c}) : Tensor(),
                         g.needs(2) ? reshape(slice(r[1], 0, 0, 1), {c}) : Tensor()};
          },
          .save_inputs = 0b011, .save_outputs = 0b10,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const Channels ch = channels_of("batch_norm", in[0]);
            return rows_cost(in, out, 7, ch.n * ch.s);
          }});
  // (g, x, weight?, stats) -> (g_x, sums): the fused backward; sums [2, C]
  // holds sum(g) and sum(g * xhat) per channel.
  define({.name = "batch_norm_backward", .family = "norm", .inputs = 4, .outputs = 2, .dtype_input = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            const Channels ch = channels_of("batch_norm_backward", in[1]);
            check_param("batch_norm_backward", "weight", in[2], {ch.c}, in[1]);
            if (in[0].shape != in[1].shape || in[0].dtype != in[1].dtype || in[3].dtype != DType::f64 ||
                in[3].shape != Shape{2, ch.c}) {
              fail<ValueError>("batch_norm_backward: gradient {} {} and stats {} {} do not fit the input {} {}",
                               name(in[0].dtype), to_string(in[0].shape), name(in[3].dtype), to_string(in[3].shape),
                               name(in[1].dtype), to_string(in[1].shape));
            }
            return Metas{in[1], {{2, ch.c}, in[1].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& x = a.inputs[1];
            const Channels ch = channels_of("batch_norm_backward", meta_of(x));
            const Tensor gc = a.inputs[0].contiguous(), xc = x.contiguous(), stats = a.inputs[3].contiguous();
            const Tensor wc = a.inputs[2].defined() ? a.inputs[2].contiguous() : Tensor();
            Tensor gx = Tensor::empty(x.shape(), x.dtype());
            Tensor sums = Tensor::empty({2, ch.c}, x.dtype());
            dispatch_float(x, "batch_norm_backward", [&](auto zero) {
              using T = decltype(zero);
              cpu::batch_norm_backward<T>(gc.data<T>(), xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                                          stats.data<double>(), gx.data<T>(), sums.data<T>(), ch.n, ch.c, ch.s);
            });
            return Outputs{gx, sums};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const Channels ch = channels_of("batch_norm_backward", in[1]);
            return rows_cost(in, out, 8, ch.n * ch.s);
          }});
}

}  // namespace op

// ---- the eager functions ----

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return op::call1(BRAID_OP("layer_norm"), {x, weight, bias},
                   {{"normalized_shape", normalized_shape}, {"eps", eps}});
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
  check_param("batch_norm", "weight", op::meta_of(weight), {c}, op::meta_of(x));
  check_param("batch_norm", "bias", op::meta_of(bias), {c}, op::meta_of(x));
  check_param("batch_norm", "running_mean", op::meta_of(running_mean), {c}, op::meta_of(x));
  check_param("batch_norm", "running_var", op::meta_of(running_var), {c}, op::meta_of(x));
  // [C] -> [1, C, 1, ...] so per-channel tensors broadcast against x.
  Shape channel(x.ndim(), 1);
  channel[1] = c;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.ndim(); ++d) if (d != 1) dims.push_back(d);

  // The fused op where it has kernels (and on the meta device, which only
  // infers), unless the statistics are summed across replicas.
  const bool fused = options.training && !options.across_replicas &&
                     (x.device().is_cpu() || x.device() == Device::meta) &&
                     (x.dtype() == DType::f32 || x.dtype() == DType::f64);
  if (fused) {
    const int64_t n = x.numel() / std::max<int64_t>(c, 1);
    if (n <= 1) {
      fail<ValueError>("batch_norm: training needs more than one value per channel, input {}", to_string(x.shape()));
    }
    const std::vector<Tensor> r = op::call(BRAID_OP("batch_norm"), {x, weight, bias}, {{"eps", options.eps}});
    if (running_mean.defined() || running_var.defined()) {
      autograd::NoGradGuard no_grad;
      // The running statistics, in place; the variance unbiased (n / (n - 1)).
      const op::OpDef& update = BRAID_OP("batch_norm_running_update_");
      const double m = options.momentum;
      const Tensor stats = r[1].detach();
      if (running_mean.defined()) {
        op::call(update, {running_mean, cast(reshape(slice(stats, 0, 0, 1), {c}), x.dtype())},
                 {{"momentum", m}, {"scale", 1.0}});
      }
      if (running_var.defined()) {
        const Tensor invstd = reshape(slice(stats, 0, 1, 2), {c});
        const Tensor var = sub(div(Tensor::ones({c}, DType::f64, x.device()), mul(invstd, invstd)), options.eps);
        const double unbias = static_cast<double>(n) / static_cast<double>(n - 1);
        op::call(update, {running_var, cast(var, x.dtype())}, {{"momentum", m}, {"scale", unbias}});
      }
    }
    return r[0];
  }
  Tensor mu, variance;
  if (options.training) {
    int64_t n = x.numel() / std::max<int64_t>(c, 1);
    if (options.across_replicas) {
      // Two passes, like the local case, so the variance is as accurate as
      // one process's over the concatenated batch (E[x^2] - E[x]^2 is not).
      const BatchSum& all = options.across_replicas;
      {
        autograd::NoGradGuard no_grad;
        // On x's device: the replicas' sum runs where the statistics do.
        const Tensor count = Tensor::full({1}, static_cast<double>(n), DType::f64, x.device());
        n = static_cast<int64_t>(std::llround(all(count).item()));
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
    // The running statistics, in place; the variance unbiased (n / (n - 1)).
    const op::OpDef& update = BRAID_OP("batch_norm_running_update_");
    const double m = options.momentum;
    if (running_mean.defined()) op::call(update, {running_mean, mu}, {{"momentum", m}, {"scale", 1.0}});
    if (running_var.defined()) {
      const double unbias = static_cast<double>(n) / static_cast<double>(n - 1);
      op::call(update, {running_var, variance}, {{"momentum", m}, {"scale", unbias}});
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
