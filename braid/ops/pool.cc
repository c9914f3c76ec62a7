#include "braid/ops/pool.h"

#include "braid/autograd/node.h"
#include "braid/ops/matmul.h"
#include "braid/tensor/cpu/pool.h"

namespace braid {
namespace {

cpu::Pool2dGeometry geometry(const char* op, const Tensor& x, const Pool2dOptions& o) {
  detail::check_float(op, x);
  cpu::Pool2dGeometry g;
  g.kh = o.kernel[0], g.kw = o.kernel[1];
  g.stride_h = o.stride[0] == 0 ? g.kh : o.stride[0];
  g.stride_w = o.stride[1] == 0 ? g.kw : o.stride[1];
  g.pad_h = o.padding[0], g.pad_w = o.padding[1];
  const bool rank_ok = x.ndim() == 3 || x.ndim() == 4;
  if (rank_ok) {
    g.h = x.size(-2), g.w = x.size(-1);
    g.planes = x.numel() / std::max<int64_t>(1, g.h * g.w);
  }
  const bool ok = rank_ok && g.kh >= 1 && g.kw >= 1 && g.stride_h >= 1 && g.stride_w >= 1 &&
                  g.pad_h >= 0 && g.pad_w >= 0 && 2 * g.pad_h <= g.kh && 2 * g.pad_w <= g.kw &&
                  g.h + 2 * g.pad_h >= g.kh && g.w + 2 * g.pad_w >= g.kw;
  if (!ok) {
    fail<ValueError>("{}: x {} with kernel ({}, {}), stride ({}, {}), padding ({}, {}): need a 3-D "
                     "or 4-D input at least as large as the kernel, stride >= 1 and padding <= "
                     "kernel / 2",
                     op, to_string(x.shape()), o.kernel[0], o.kernel[1], o.stride[0], o.stride[1],
                     o.padding[0], o.padding[1]);
  }
  return g;
}

Shape out_shape(const Tensor& x, const cpu::Pool2dGeometry& g) {
  Shape s = x.shape();
  s[s.size() - 2] = g.oh();
  s[s.size() - 1] = g.ow();
  return s;
}

template <class T>
Tensor max_forward(const Tensor& xc, const cpu::Pool2dGeometry& g, Tensor& idx) {
  Tensor y = Tensor::empty(out_shape(xc, g), xc.dtype());
  idx = Tensor::empty(y.shape(), DType::i32);
  cpu::max_pool2d_forward<T>(g, xc.data<T>(), y.data<T>(), idx.data<int32_t>());
  return y;
}

template <class T>
Tensor max_backward(const Tensor& grad, const Tensor& idx, const Shape& x_shape,
                    const cpu::Pool2dGeometry& g) {
  const Tensor dy = grad.contiguous();
  Tensor dx = Tensor::empty(x_shape, grad.dtype());
  cpu::max_pool2d_backward<T>(g, dy.data<T>(), idx.data<int32_t>(), dx.data<T>());
  return dx;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options) {
  const cpu::Pool2dGeometry g = geometry("max_pool2d", x, options);
  const Tensor xc = x.contiguous();
  const bool f32 = x.dtype() == DType::f32;
  Tensor idx;
  Tensor y = f32 ? max_forward<float>(xc, g, idx) : max_forward<double>(xc, g, idx);
  autograd::record("max_pool2d", {x}, y, [idx, shape = x.shape(), g, f32](const Tensor& grad) {
    return std::vector<Tensor>{f32 ? max_backward<float>(grad, idx, shape, g)
                                   : max_backward<double>(grad, idx, shape, g)};
  });
  return y;
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options) {
  const cpu::Pool2dGeometry g = geometry("avg_pool2d", x, options);
  const Tensor xc = x.contiguous();
  const bool f32 = x.dtype() == DType::f32, inc = options.count_include_pad;
  Tensor y = Tensor::empty(out_shape(x, g), x.dtype());
  if (f32) {
    cpu::avg_pool2d_forward<float>(g, xc.data<float>(), y.data<float>(), inc);
  } else {
    cpu::avg_pool2d_forward<double>(g, xc.data<double>(), y.data<double>(), inc);
  }
  autograd::record("avg_pool2d", {x}, y, [shape = x.shape(), g, f32, inc](const Tensor& grad) {
    const Tensor dy = grad.contiguous();
    Tensor dx = Tensor::empty(shape, grad.dtype());
    if (f32) {
      cpu::avg_pool2d_backward<float>(g, dy.data<float>(), dx.data<float>(), inc);
    } else {
      cpu::avg_pool2d_backward<double>(g, dy.data<double>(), dx.data<double>(), inc);
    }
    return std::vector<Tensor>{dx};
  });
  return y;
}

}  // namespace braid
