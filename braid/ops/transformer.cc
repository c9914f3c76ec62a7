#include "braid/ops/transformer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "braid/base/thread_pool.h"
#include "braid/ops/define.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/tensor/cpu/loops.h"

namespace braid {

namespace {

using op::Cost;
using op::TensorMeta;

const TensorMeta kNone{{}, DType::f32, true};

template <class Fn>
void dispatch_real(const Tensor& x, const char* op, Fn&& fn) {
  if (x.dtype() == DType::f32) return fn(float{});
  if (x.dtype() == DType::f64) return fn(double{});
  fail<ValueError>("{}: dtype {} is not supported (input of shape {})", op, name(x.dtype()), to_string(x.shape()));
}

int64_t rows_grain(int64_t d) { return std::max<int64_t>(1, cpu::kParallelGrain / std::max<int64_t>(d, 1)); }

// ---- rms_norm ----

int64_t last_dim(const TensorMeta& x, const char* op) {
  if (x.shape.empty() || x.shape.back() == 0) fail<ValueError>("{}: input {} has no last dim to normalise", op, to_string(x.shape));
  return x.shape.back();
}

void check_weight(const TensorMeta& w, const TensorMeta& x, int64_t d) {
  if (!w.absent && (w.shape != Shape{d} || w.dtype != x.dtype)) {
    fail<ValueError>("rms_norm: weight must be {} [{}], got {} {} (input {})", name(x.dtype), d, name(w.dtype),
                     to_string(w.shape), to_string(x.shape));
  }
}

// y = x * rstd * w per row of d; rstd saved (f64) for the backward.
template <class T>
void rms_rows(const T* x, const T* w, T* y, double* rstd, int64_t rows, int64_t d, double eps) {
  parallel_for(0, rows, rows_grain(d), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * d;
      T* yr = y + r * d;
      double ss = 0;
#pragma omp simd reduction(+ : ss)
      for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * static_cast<double>(xr[i]);
      const double rs = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
      rstd[r] = rs;
      const T s = static_cast<T>(rs);
      if (w) {
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * s * w[i];
      } else {
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * s;
      }
    }
  });
}

// With xhat = x * rstd and gh = g * w: g_x = rstd * (gh - xhat * mean(gh * xhat));
// gxhat = g * xhat per element (summed over rows by the caller: g_w).
template <class T>
void rms_rows_backward(const T* g, const T* x, const T* w, const double* rstd, T* gx, T* gxhat, int64_t rows,
                       int64_t d) {
  parallel_for(0, rows, rows_grain(d), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * d;
      const T* gr = g + r * d;
      const T rs = static_cast<T>(rstd[r]);
      double dot = 0;
      for (int64_t i = 0; i < d; ++i) {
        const T gh = w ? gr[i] * w[i] : gr[i];
        dot += static_cast<double>(gh) * static_cast<double>(xr[i] * rs);
      }
      const T mean = static_cast<T>(dot / static_cast<double>(d));
      T* out = gx + r * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) {
        const T xhat = xr[i] * rs;
        out[i] = rs * ((w ? gr[i] * w[i] : gr[i]) - xhat * mean);
      }
      if (gxhat) {
        T* gw = gxhat + r * d;
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) gw[i] = gr[i] * xr[i] * rs;
      }
    }
  });
}

Cost rows_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, double flops) {
  Cost c{flops * static_cast<double>(numel(in[0].shape)), 0,
         op::log2_depth(static_cast<double>(in[0].shape.empty() ? 1 : in[0].shape.back())) + 2};
  for (const TensorMeta& m : in) c.bytes += op::bytes_of(m);
  for (const TensorMeta& m : out) c.bytes += op::bytes_of(m);
  return c;
}

// ---- rotary_embedding ----

void check_rotary(const TensorMeta& x) {
  if (x.shape.size() != 4 || x.shape[3] % 2 != 0) {
    fail<ValueError>("rotary_embedding: expects [B, T, H, D] with an even head dim D, got {}", to_string(x.shape));
  }
}

// out = rotate(x) by each position's angles; `sign` -1 rotates back (the
// backward: a rotation's transpose is the rotation by minus the angle).
template <class T>
void rotate(const Tensor& x, Tensor& out, int64_t offset, double theta, double sign) {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2), d = x.size(3), half = d / 2;
  const Tensor xs = x.strides()[3] == 1 ? x : x.contiguous();
  const auto& st = xs.strides();
  // cos and sin per (position, pair), in double as the angles grow with the position.
  std::vector<T> cs(static_cast<size_t>(t * half)), sn(static_cast<size_t>(t * half));
  for (int64_t p = 0; p < t; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double inv = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      const double a = static_cast<double>(offset + p) * inv;
      cs[static_cast<size_t>(p * half + i)] = static_cast<T>(std::cos(a));
      sn[static_cast<size_t>(p * half + i)] = static_cast<T>(sign * std::sin(a));
    }
  }
  const T* src = xs.data<T>();
  T* dst = out.data<T>();
  parallel_for(0, b * t * h, rows_grain(d), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t bi = r / (t * h), ti = (r / h) % t, hi_ = r % h;
      const T* xr = src + bi * st[0] + ti * st[1] + hi_ * st[2];
      T* yr = dst + r * d;
      const T* c = cs.data() + ti * half;
      const T* s = sn.data() + ti * half;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const T x1 = xr[i], x2 = xr[i + half];
        yr[i] = x1 * c[i] - x2 * s[i];
        yr[i + half] = x2 * c[i] + x1 * s[i];
      }
    }
  });
}

// ---- swiglu ----

int64_t gate_width(const TensorMeta& h) {
  if (h.shape.empty() || h.shape.back() % 2 != 0) {
    fail<ValueError>("swiglu: expects [..., 2F] (gate and up side by side), got {}", to_string(h.shape));
  }
  return h.shape.back() / 2;
}

template <class T>
T sigmoid_of(T v) {
  return T{1} / (T{1} + std::exp(-v));
}

}  // namespace

namespace op {

void define_transformer_ops(const Definer& define) {
  // (x, weight?) -> (y, rstd [rows] f64).
  define({.name = "rms_norm", .family = "norm", .inputs = 2, .outputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            const int64_t d = last_dim(in[0], "rms_norm");
            check_weight(in[1], in[0], d);
            return Metas{in[0], {{numel(in[0].shape) / d}, DType::f64}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& x = a.inputs[0];
            const int64_t d = last_dim(meta_of(x), "rms_norm"), rows = x.numel() / d;
            check_weight(meta_of(a.inputs[1]), meta_of(x), d);
            const Tensor xc = x.contiguous();
            const Tensor wc = a.inputs[1].defined() ? a.inputs[1].contiguous() : Tensor();
            Tensor y = Tensor::empty(x.shape(), x.dtype());
            Tensor rstd = Tensor::empty({rows}, DType::f64);
            dispatch_real(x, "rms_norm", [&](auto zero) {
              using T = decltype(zero);
              rms_rows<T>(xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr, y.data<T>(), rstd.data<double>(), rows,
                          d, a.attrs.f("eps"));
            });
            return Outputs{y, rstd};
          })},
          .backward = [](const GradArgs& g) {
            const int64_t d = g.input_meta[0].shape.back(), rows = numel(g.input_meta[0].shape) / d;
            const std::vector<Tensor> r = call(BRAID_OP("rms_norm_backward"),
                                               {g.grad, g.inputs[0], g.inputs[1], g.outputs[1]},
                                               {{"weight_grad", int64_t{g.needs(1)}}});
            return Grads{r[0], g.needs(1) ? sum(reshape(r[1], {rows, d}), {0}) : Tensor()};
          },
          .save_inputs = 0b11, .save_outputs = 0b10,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return rows_cost(in, out, 4);
          }});
  // (g, x, weight?, rstd) -> (g_x, g * xhat when weight_grad).
  define({.name = "rms_norm_backward", .family = "norm", .inputs = 4, .outputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const int64_t d = last_dim(in[1], "rms_norm_backward");
            check_weight(in[2], in[1], d);
            if (in[0] != in[1]) {
              fail<ValueError>("rms_norm_backward: gradient {} {} does not match the input {} {}", name(in[0].dtype),
                               to_string(in[0].shape), name(in[1].dtype), to_string(in[1].shape));
            }
            return Metas{in[1], a.b("weight_grad") ? in[1] : kNone};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& x = a.inputs[1];
            const int64_t d = last_dim(meta_of(x), "rms_norm_backward"), rows = x.numel() / d;
            if (a.inputs[0].shape() != x.shape() || a.inputs[3].dtype() != DType::f64 || a.inputs[3].numel() != rows) {
              fail<ValueError>("rms_norm_backward: gradient {} and rstd {} do not fit the input {}",
                               to_string(a.inputs[0].shape()), to_string(a.inputs[3].shape()), to_string(x.shape()));
            }
            const Tensor gc = a.inputs[0].contiguous(), xc = x.contiguous(), rstd = a.inputs[3].contiguous();
            const Tensor wc = a.inputs[2].defined() ? a.inputs[2].contiguous() : Tensor();
            Tensor gx = Tensor::empty(x.shape(), x.dtype());
            Tensor gxhat = a.attrs.b("weight_grad") ? Tensor::empty(x.shape(), x.dtype()) : Tensor();
            dispatch_real(x, "rms_norm_backward", [&](auto zero) {
              using T = decltype(zero);
              rms_rows_backward<T>(gc.data<T>(), xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                                   rstd.data<double>(), gx.data<T>(), gxhat.defined() ? gxhat.data<T>() : nullptr, rows,
                                   d);
            });
            return Outputs{gx, gxhat};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return rows_cost(in, out, 8);
          }});

  // x [B, T, H, D] -> rotated; attrs offset, theta, inverse (rotate back).
  define({.name = "rotary_embedding", .family = "elementwise", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            check_rotary(in[0]);
            return Metas{in[0]};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& x = a.inputs[0];
            check_rotary(meta_of(x));
            Tensor y = Tensor::empty(x.shape(), x.dtype());
            dispatch_real(x, "rotary_embedding", [&](auto zero) {
              rotate<decltype(zero)>(x, y, a.attrs.i("offset"), a.attrs.f("theta"), a.attrs.b("inverse") ? -1.0 : 1.0);
            });
            return Outputs{y};
          })},
          .backward = [](const GradArgs& g) {
            return Grads{call1(BRAID_OP("rotary_embedding"), {g.grad},
                               {{"offset", g.attrs.i("offset")},
                                {"theta", g.attrs.f("theta")},
                                {"inverse", int64_t{!g.attrs.b("inverse")}}})};
          },
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return Cost{3 * static_cast<double>(numel(in[0].shape)), bytes_of(in[0]) + bytes_of(out[0]), 1};
          }});

  // h [..., 2F] -> silu(gate) * up [..., F].
  define({.name = "swiglu", .family = "activation", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            Shape s = in[0].shape;
            s.back() = gate_width(in[0]);
            return Metas{{s, in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor h = a.inputs[0].contiguous();
            const int64_t f = gate_width(meta_of(h)), rows = h.numel() / (2 * f);
            Shape s = h.shape();
            s.back() = f;
            Tensor y = Tensor::empty(s, h.dtype());
            dispatch_real(h, "swiglu", [&](auto zero) {
              using T = decltype(zero);
              const T* hp = h.data<T>();
              T* yp = y.data<T>();
              parallel_for(0, rows, rows_grain(2 * f), [&](int64_t lo, int64_t hi) {
                for (int64_t r = lo; r < hi; ++r) {
                  const T* gate = hp + r * 2 * f;
                  const T* up = gate + f;
                  T* out = yp + r * f;
#pragma omp simd
                  for (int64_t i = 0; i < f; ++i) out[i] = gate[i] * sigmoid_of(gate[i]) * up[i];
                }
              });
            });
            return Outputs{y};
          })},
          .backward = [](const GradArgs& g) {
            return Grads{call1(BRAID_OP("swiglu_backward"), {g.grad, g.inputs[0]})};
          },
          .save_inputs = 0b1,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return Cost{6 * static_cast<double>(numel(out[0].shape)), bytes_of(in[0]) + bytes_of(out[0]), 1};
          }});
  // (g [..., F], h [..., 2F]) -> g_h [..., 2F]:
  //   g_gate = g * up * s * (1 + gate * (1 - s)), g_up = g * gate * s, s = sigmoid(gate).
  define({.name = "swiglu_backward", .family = "activation", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            Shape s = in[1].shape;
            s.back() = gate_width(in[1]);
            if (in[0].shape != s || in[0].dtype != in[1].dtype) {
              fail<ValueError>("swiglu_backward: gradient {} does not fit the input {}", to_string(in[0].shape),
                               to_string(in[1].shape));
            }
            return Metas{in[1]};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor gc = a.inputs[0].contiguous(), h = a.inputs[1].contiguous();
            const int64_t f = gate_width(meta_of(h)), rows = h.numel() / (2 * f);
            if (gc.numel() != rows * f) {
              fail<ValueError>("swiglu_backward: gradient {} does not fit the input {}", to_string(gc.shape()),
                               to_string(h.shape()));
            }
            Tensor gh = Tensor::empty(h.shape(), h.dtype());
            dispatch_real(h, "swiglu_backward", [&](auto zero) {
              using T = decltype(zero);
              const T* hp = h.data<T>();
              const T* gp = gc.data<T>();
              T* op = gh.data<T>();
              parallel_for(0, rows, rows_grain(2 * f), [&](int64_t lo, int64_t hi) {
                for (int64_t r = lo; r < hi; ++r) {
                  const T* gate = hp + r * 2 * f;
                  const T* up = gate + f;
                  const T* gr = gp + r * f;
                  T* ogate = op + r * 2 * f;
                  T* oup = ogate + f;
#pragma omp simd
                  for (int64_t i = 0; i < f; ++i) {
                    const T s = sigmoid_of(gate[i]);
                    ogate[i] = gr[i] * up[i] * s * (T{1} + gate[i] * (T{1} - s));
                    oup[i] = gr[i] * gate[i] * s;
                  }
                }
              });
            });
            return Outputs{gh};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return Cost{10 * static_cast<double>(numel(in[0].shape)),
                        bytes_of(in[0]) + bytes_of(in[1]) + bytes_of(out[0]), 1};
          }});
}

}  // namespace op

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  return op::call(BRAID_OP("rms_norm"), {x, weight}, {{"eps", eps}})[0];
}

Tensor rotary_embedding(const Tensor& x, int64_t offset, double theta) {
  return op::call1(BRAID_OP("rotary_embedding"), {x}, {{"offset", offset}, {"theta", theta}, {"inverse", int64_t{0}}});
}

Tensor swiglu(const Tensor& h) { return op::call1(BRAID_OP("swiglu"), {h}); }

}  // namespace braid
