#include "braid/ops/conv.h"

#include "braid/autograd/node.h"
#include "braid/ops/autocast.h"
#include "braid/ops/matmul.h"

namespace braid {
namespace {

cpu::Conv2dGeometry geometry(const Tensor& x, const Tensor& w, const Tensor& b,
                             const Conv2dOptions& o) {
  detail::check_float("conv2d", x);
  auto bad = [&](const char* why) {
    fail<ValueError>("conv2d: {}: x {} ({}), w {} ({}), b {}, stride ({}, {}), padding ({}, {}), "
                     "dilation ({}, {}), groups {}",
                     why, to_string(x.shape()), name(x.dtype()), to_string(w.shape()), name(w.dtype()),
                     b.defined() ? to_string(b.shape()) : "none", o.stride[0], o.stride[1],
                     o.padding[0], o.padding[1], o.dilation[0], o.dilation[1], o.groups);
  };
  if (x.ndim() != 4 || w.ndim() != 4) bad("x and w must be 4-D");
  if (w.dtype() != x.dtype() || (b.defined() && b.dtype() != x.dtype())) bad("dtypes differ");
  if (o.groups < 1 || x.size(1) % o.groups != 0 || w.size(0) % o.groups != 0) {
    bad("groups must divide the input and output channels");
  }
  if (w.size(1) * o.groups != x.size(1)) bad("w's second dim must be channels / groups");
  if (b.defined() && (b.ndim() != 1 || b.size(0) != w.size(0))) bad("b must be [out_channels]");
  for (int i = 0; i < 2; ++i) {
    if (o.stride[i] < 1 || o.dilation[i] < 1 || o.padding[i] < 0) {
      bad("stride and dilation must be >= 1, padding >= 0");
    }
  }
  cpu::Conv2dGeometry g;
  g.n = x.size(0), g.c = x.size(1), g.h = x.size(2), g.w = x.size(3);
  g.o = w.size(0), g.kh = w.size(2), g.kw = w.size(3);
  g.stride_h = o.stride[0], g.stride_w = o.stride[1];
  g.pad_h = o.padding[0], g.pad_w = o.padding[1];
  g.dil_h = o.dilation[0], g.dil_w = o.dilation[1];
  g.groups = o.groups;
  if (g.kh < 1 || g.kw < 1 || g.oh() < 1 || g.ow() < 1) bad("the (dilated) kernel is larger than the padded input");
  return g;
}

template <class T>
std::vector<Tensor> conv2d_backward(const Tensor& grad, const Tensor& x, const Tensor& w,
                                    const cpu::Conv2dGeometry& g, cpu::ConvBackend backend,
                                    bool need_x, bool need_w, bool need_b) {
  const Tensor dy = grad.contiguous();
  std::vector<Tensor> grads(3);
  if (need_x) {
    grads[0] = Tensor::empty(x.shape(), x.dtype());
    cpu::conv2d_backward_data<T>(g, dy.data<T>(), w.data<T>(), grads[0].data<T>(), backend);
  }
  if (need_w || need_b) {
    // The weight pass yields db almost for free; dw is computed even when only
    // db is wanted (a bias without trainable weights is rare).
    Tensor dw = Tensor::empty(w.shape(), w.dtype());
    Tensor db = need_b ? Tensor::empty({g.o}, w.dtype()) : Tensor();
    cpu::conv2d_backward_weights<T>(g, dy.data<T>(), x.data<T>(), dw.data<T>(),
                                    need_b ? db.data<T>() : nullptr, backend);
    if (need_w) grads[1] = dw;
    grads[2] = db;
  }
  return grads;
}

// bf16 products: x and w are the forward's bf16 copies, grad arrives in f32
// and is rounded once; dx, dw and db come back in f32.
std::vector<Tensor> conv2d_backward_bf16(const Tensor& grad, const Tensor& x, const Tensor& w,
                                         const cpu::Conv2dGeometry& g, cpu::ConvBackend backend, bool need_x,
                                         bool need_w, bool need_b) {
  const Tensor dy = grad.contiguous().to(DType::bf16);
  std::vector<Tensor> grads(3);
  if (need_x) {
    grads[0] = Tensor::empty(x.shape(), DType::f32);
    cpu::conv2d_backward_data(g, dy.data<bf16>(), w.data<bf16>(), grads[0].data<float>(), backend);
  }
  if (need_w || need_b) {
    Tensor dw = Tensor::empty(w.shape(), DType::f32);
    Tensor db = need_b ? Tensor::empty({g.o}, DType::f32) : Tensor();
    cpu::conv2d_backward_weights(g, dy.data<bf16>(), x.data<bf16>(), dw.data<float>(),
                                 need_b ? db.data<float>() : nullptr, backend);
    if (need_w) grads[1] = dw;
    grads[2] = db;
  }
  return grads;
}

Tensor conv2d_bf16(const Tensor& x, const Tensor& w, const Tensor& b, const cpu::Conv2dGeometry& g,
                   const Conv2dOptions& options) {
  const Tensor xb = x.contiguous().to(DType::bf16), wb = w.contiguous().to(DType::bf16);
  const Tensor bc = b.defined() ? b.contiguous() : Tensor();
  Tensor y = Tensor::empty({g.n, g.o, g.oh(), g.ow()}, DType::f32);
  cpu::conv2d_forward(g, xb.data<bf16>(), wb.data<bf16>(), bc.defined() ? bc.data<float>() : nullptr,
                      y.data<float>(), options.backend);
  autograd::record("conv2d", {x, w, b}, y,
                   [xb, wb, g, backend = options.backend, nx = x.requires_grad(), nw = w.requires_grad(),
                    nb = b.defined() && b.requires_grad()](const Tensor& grad) {
                     return conv2d_backward_bf16(grad, xb, wb, g, backend, nx, nw, nb);
                   });
  return y;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& options) {
  const cpu::Conv2dGeometry g = geometry(x, w, b, options);
  if (autocast_bf16(x)) return conv2d_bf16(x, w, b, g, options);
  const Tensor xc = x.contiguous(), wc = w.contiguous();
  const Tensor bc = b.defined() ? b.contiguous() : Tensor();
  Tensor y = Tensor::empty({g.n, g.o, g.oh(), g.ow()}, x.dtype());
  const bool f32 = x.dtype() == DType::f32;
  if (f32) {
    cpu::conv2d_forward<float>(g, xc.data<float>(), wc.data<float>(),
                               bc.defined() ? bc.data<float>() : nullptr, y.data<float>(), options.backend);
  } else {
    cpu::conv2d_forward<double>(g, xc.data<double>(), wc.data<double>(),
                                bc.defined() ? bc.data<double>() : nullptr, y.data<double>(), options.backend);
  }
  autograd::record("conv2d", {x, w, b}, y,
                   [xd = xc.detach(), wd = wc.detach(), g, f32, backend = options.backend,
                    nx = x.requires_grad(), nw = w.requires_grad(),
                    nb = b.defined() && b.requires_grad()](const Tensor& grad) {
                     return f32 ? conv2d_backward<float>(grad, xd, wd, g, backend, nx, nw, nb)
                                : conv2d_backward<double>(grad, xd, wd, g, backend, nx, nw, nb);
                   });
  return y;
}

}  // namespace braid
