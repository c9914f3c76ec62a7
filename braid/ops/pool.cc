#include "braid/ops/pool.h"

#include "braid/ops/define.h"
#include "braid/tensor/cpu/pool.h"

namespace braid {

namespace op {
namespace {

// Attributes kernel, stride (resolved: never 0) and padding, each (h, w);
// avg_pool2d adds count_include_pad.
Attrs pool_attrs(const Pool2dOptions& o) {
  return {{"kernel", std::vector<int64_t>{o.kernel[0], o.kernel[1]}},
          {"stride", std::vector<int64_t>{o.stride[0] == 0 ? o.kernel[0] : o.stride[0],
                                          o.stride[1] == 0 ? o.kernel[1] : o.stride[1]}},
          {"padding", std::vector<int64_t>{o.padding[0], o.padding[1]}}};
}

cpu::Pool2dGeometry geometry(const char* op, const TensorMeta& x, const Attrs& a) {
  const auto& k = a.ints("kernel");
  const auto& s = a.ints("stride");
  const auto& p = a.ints("padding");
  const bool pairs = k.size() == 2 && s.size() == 2 && p.size() == 2;
  const bool rank_ok = x.shape.size() == 3 || x.shape.size() == 4;
  cpu::Pool2dGeometry g;
  if (pairs) {
    g.kh = k[0], g.kw = k[1], g.stride_h = s[0], g.stride_w = s[1], g.pad_h = p[0], g.pad_w = p[1];
  }
  if (rank_ok) {
    g.h = x.shape[x.shape.size() - 2], g.w = x.shape.back();
    g.planes = numel(x.shape) / std::max<int64_t>(1, g.h * g.w);
  }
  const bool ok = pairs && rank_ok && g.kh >= 1 && g.kw >= 1 && g.stride_h >= 1 && g.stride_w >= 1 && g.pad_h >= 0 &&
                  g.pad_w >= 0 && 2 * g.pad_h <= g.kh && 2 * g.pad_w <= g.kw && g.h + 2 * g.pad_h >= g.kh &&
                  g.w + 2 * g.pad_w >= g.kw;
  if (!ok) {
    fail<ValueError>("{}: x {} with kernel ({}), stride ({}), padding ({}): need a 3-D or 4-D input at least as large "
                     "as the kernel, stride >= 1 and padding <= kernel / 2",
                     op, to_string(x.shape), fmt::join(k, ", "), fmt::join(s, ", "), fmt::join(p, ", "));
  }
  return g;
}

Shape out_shape(const Shape& x, const cpu::Pool2dGeometry& g) {
  Shape s = x;
  s[s.size() - 2] = g.oh();
  s[s.size() - 1] = g.ow();
  return s;
}

// The backward ops: dy has the forward's output shape for attribute "input_shape".
cpu::Pool2dGeometry backward_geometry(const char* op, const TensorMeta& dy, const Attrs& a) {
  const cpu::Pool2dGeometry g = geometry(op, {a.ints("input_shape"), dy.dtype}, a);
  if (dy.shape != out_shape(a.ints("input_shape"), g)) {
    fail<ValueError>("{}: gradient {} does not fit pooling an input {}", op, to_string(dy.shape),
                     to_string(a.ints("input_shape")));
  }
  return g;
}

template <class Fn>
void dispatch_float(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) return fn(float{});
  return fn(double{});
}

// A window reduction: kh * kw operations per output, depth of a sum of kh * kw
// (forward) or one scatter-add per window (backward).
Cost pool_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a, bool forward) {
  const double window = static_cast<double>(a.ints("kernel")[0] * a.ints("kernel")[1]);
  const TensorMeta& y = forward ? out[0] : in[0];
  Cost c{window * static_cast<double>(numel(y.shape)), 0, forward ? log2_depth(window) : window};
  for (const TensorMeta& t : in) c.bytes += bytes_of(t);
  for (const TensorMeta& t : out) c.bytes += bytes_of(t);
  return c;
}

}  // namespace

void define_pool_ops(const Definer& define) {
  // x -> (y, idx): idx (i32, per output) is each window's argmax as a flat
  // index into its input plane, which the backward scatters through instead
  // of recomputing it.
  define({.name = "max_pool2d", .family = "pool", .inputs = 1, .outputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const Shape s = out_shape(in[0].shape, geometry("max_pool2d", in[0], a));
            return Metas{{s, in[0].dtype}, {s, DType::i32}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor xc = a.inputs[0].contiguous();
            const cpu::Pool2dGeometry g = geometry("max_pool2d", meta_of(xc), a.attrs);
            Tensor y = Tensor::empty(out_shape(xc.shape(), g), xc.dtype());
            Tensor idx = Tensor::empty(y.shape(), DType::i32);
            dispatch_float(xc.dtype(), [&](auto zero) {
              using T = decltype(zero);
              cpu::max_pool2d_forward<T>(g, xc.data<T>(), y.data<T>(), idx.data<int32_t>());
            });
            return Outputs{y, idx};
          })},
          .backward = [](const GradArgs& g) {
            Attrs attrs = g.attrs;
            attrs.set("input_shape", g.input_meta[0].shape);
            return Grads{call1(BRAID_OP("max_pool2d_backward"), {g.grad, g.outputs[1]}, attrs)};
          },
          .save_outputs = 0b10,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            return pool_cost(in, out, a, true);
          }});
  // (dy, idx) -> dx = 0, then dx[plane][idx] += dy (windows may overlap).
  define({.name = "max_pool2d_backward", .family = "pool", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            backward_geometry("max_pool2d_backward", in[0], a);
            if (in[1].shape != in[0].shape || in[1].dtype != DType::i32) {
              fail<ValueError>("max_pool2d_backward: indices must be i32 {}, got {} {}", to_string(in[0].shape),
                               name(in[1].dtype), to_string(in[1].shape));
            }
            return Metas{{a.ints("input_shape"), in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor dy = a.inputs[0].contiguous(), idx = a.inputs[1].contiguous();
            const cpu::Pool2dGeometry g = backward_geometry("max_pool2d_backward", meta_of(dy), a.attrs);
            if (idx.shape() != dy.shape() || idx.dtype() != DType::i32) {
              fail<ValueError>("max_pool2d_backward: indices must be i32 {}, got {} {}", to_string(dy.shape()),
                               name(idx.dtype()), to_string(idx.shape()));
            }
            Tensor dx = Tensor::empty(a.attrs.ints("input_shape"), dy.dtype());
            dispatch_float(dy.dtype(), [&](auto zero) {
              using T = decltype(zero);
              cpu::max_pool2d_backward<T>(g, dy.data<T>(), idx.data<int32_t>(), dx.data<T>());
            });
            return Outputs{dx};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return Cost{static_cast<double>(numel(in[0].shape)), bytes_of(in[0]) + bytes_of(in[1]) + bytes_of(out[0]), 1};
          }});

  // x -> y: window sums over kh * kw, or over the cells inside the input when
  // count_include_pad is 0.
  define({.name = "avg_pool2d", .family = "pool", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            return Metas{{out_shape(in[0].shape, geometry("avg_pool2d", in[0], a)), in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor xc = a.inputs[0].contiguous();
            const cpu::Pool2dGeometry g = geometry("avg_pool2d", meta_of(xc), a.attrs);
            Tensor y = Tensor::empty(out_shape(xc.shape(), g), xc.dtype());
            dispatch_float(xc.dtype(), [&](auto zero) {
              using T = decltype(zero);
              cpu::avg_pool2d_forward<T>(g, xc.data<T>(), y.data<T>(), a.attrs.b("count_include_pad"));
            });
            return Outputs{y};
          })},
          .backward = [](const GradArgs& g) {
            Attrs attrs = g.attrs;
            attrs.set("input_shape", g.input_meta[0].shape);
            return Grads{call1(BRAID_OP("avg_pool2d_backward"), {g.grad}, attrs)};
          },
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            return pool_cost(in, out, a, true);
          }});
  // dy -> dx: each output's gradient spread evenly over its window.
  define({.name = "avg_pool2d_backward", .family = "pool", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            backward_geometry("avg_pool2d_backward", in[0], a);
            return Metas{{a.ints("input_shape"), in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor dy = a.inputs[0].contiguous();
            const cpu::Pool2dGeometry g = backward_geometry("avg_pool2d_backward", meta_of(dy), a.attrs);
            Tensor dx = Tensor::empty(a.attrs.ints("input_shape"), dy.dtype());
            dispatch_float(dy.dtype(), [&](auto zero) {
              using T = decltype(zero);
              cpu::avg_pool2d_backward<T>(g, dy.data<T>(), dx.data<T>(), a.attrs.b("count_include_pad"));
            });
            return Outputs{dx};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            return pool_cost(in, out, a, false);
          }});
}

}  // namespace op

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options) {
  return op::call1(BRAID_OP("max_pool2d"), {x}, op::pool_attrs(options));
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options) {
  op::Attrs attrs = op::pool_attrs(options);
  attrs.set("count_include_pad", int64_t{options.count_include_pad});
  return op::call1(BRAID_OP("avg_pool2d"), {x}, attrs);
}

}  // namespace braid
