// CUDA kernels of the conv and pool families (braid/ops/conv.cc, pool.cc):
// convolutions over dnn.h (cuDNN), pooling over pool_kernels.h. Same
// attributes, shapes and dtype rules as the CPU kernels (the op's inference
// rule checks the inputs, so errors read the same); the CPU's `backend`
// attribute picks among CPU implementations and is ignored here. bf16
// convolutions (f32 results) run on operands widened to f32, which compute
// the same products exactly; f16 runs natively (f16 results, f32 sums).
#include "braid/base/error.h"
#include "braid/cuda/dnn.h"
#include "braid/cuda/elementwise_kernels.h"
#include "braid/cuda/kernels.h"
#include "braid/cuda/matmul_kernels.h"
#include "braid/cuda/pool_kernels.h"

namespace braid::cuda {

namespace {

using op::Args;
using Outputs = std::vector<Tensor>;

// x [n, c, h, w] * w [o, c / groups, kh, kw] under the attributes (already
// checked by inference).
dnn::Conv2dGeometry geometry(const Shape& x, const Shape& w, const op::Attrs& a) {
  const auto& stride = a.ints("stride");
  const auto& padding = a.ints("padding");
  const auto& dilation = a.ints("dilation");
  dnn::Conv2dGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.stride_h = stride[0], g.stride_w = stride[1];
  g.pad_h = padding[0], g.pad_w = padding[1];
  g.dil_h = dilation[0], g.dil_w = dilation[1];
  g.groups = a.i("groups");
  return g;
}

// An operand as cuDNN takes it: contiguous, bf16 widened to f32.
Tensor operand(const Tensor& t) { return t.dtype() == DType::bf16 ? t.to(DType::f32).contiguous() : t.contiguous(); }

// One of the three products into `out`, which stays all zeros when a factor
// is empty (cuDNN refuses zero-sized tensors).
template <class Product>
void product(const Tensor& out, const Tensor& f1, const Tensor& f2, Product&& run) {
  if (out.numel() == 0) return;
  if (f1.numel() == 0 || f2.numel() == 0) return out.fill(0);
  run();
}

Tensor conv_forward(const Args& a) {
  const op::TensorMeta out = infer("conv2d", a)[0];
  const Tensor &x = a.inputs[0], &w = a.inputs[1], &b = a.inputs[2];
  const dnn::Conv2dGeometry g = geometry(x.shape(), w.shape(), a.attrs);
  const Tensor xc = operand(x), wc = operand(w);
  Tensor y = empty_on(x, out.shape, out.dtype);
  product(y, xc, wc, [&] { dnn::conv2d_forward(g, y.dtype(), xc.raw_data(), wc.raw_data(), y.raw_data(), y.device().index); });
  if (b.defined() && y.numel() > 0) {
    // y += b over [n, o, oh, ow], b in y's dtype broadcast along o.
    const Tensor bc = b.to(y.dtype());
    const Shape sb{0, bc.strides()[0], 0, 0};
    const Shape* strides[3] = {&y.strides(), &y.strides(), &sb};
    binary(BinaryOp::add, y.dtype(), y.raw_data(), y.raw_data(), bc.raw_data(), make_indexer<3>(y.shape(), strides),
           y.numel());
  }
  return y;
}

Tensor conv_backward_input(const Args& a) {
  const op::TensorMeta out = infer("conv2d_backward_input", a)[0];
  const Tensor &dy = a.inputs[0], &w = a.inputs[1];
  const dnn::Conv2dGeometry g = geometry(a.attrs.ints("input_shape"), w.shape(), a.attrs);
  const Tensor dyc = operand(dy), wc = operand(w);
  Tensor dx = empty_on(dy, out.shape, out.dtype);
  product(dx, dyc, wc, [&] {
    dnn::conv2d_backward_data(g, dx.dtype(), dyc.raw_data(), wc.raw_data(), dx.raw_data(), dx.device().index);
  });
  return dx;
}

// (dw, db): db = the sum of dy over n, oh, ow when attribute "bias" is set.
Outputs conv_backward_weight(const Args& a) {
  const std::vector<op::TensorMeta> out = infer("conv2d_backward_weight", a);
  const Tensor &dy = a.inputs[0], &x = a.inputs[1];
  const dnn::Conv2dGeometry g = geometry(x.shape(), a.attrs.ints("weight_shape"), a.attrs);
  const Tensor dyc = operand(dy), xc = operand(x);
  Tensor dw = empty_on(dy, out[0].shape, out[0].dtype);
  product(dw, dyc, xc, [&] {
    dnn::conv2d_backward_filter(g, dw.dtype(), dyc.raw_data(), xc.raw_data(), dw.raw_data(), dw.device().index);
  });
  Tensor db;
  if (!out[1].absent) {
    db = empty_on(dy, out[1].shape, out[1].dtype);
    const int64_t inner = g.oh() * g.ow(), chunks = channel_sum_chunks(g.n, g.o, inner);
    const Tensor partial = empty_on(dy, {chunks * g.o}, db.dtype() == DType::f64 ? DType::f64 : DType::f32);
    if (g.o > 0) channel_sum(dyc.dtype(), db.raw_data(), dyc.raw_data(), g.n, g.o, inner, partial.raw_data(), chunks);
  }
  return {dw, db};
}

// The pooling geometry of input shape x (3-D or 4-D, checked by inference).
PoolShape pool_shape(const Shape& x, const op::Attrs& a) {
  const auto& k = a.ints("kernel");
  const auto& s = a.ints("stride");
  const auto& p = a.ints("padding");
  PoolShape ps{};
  ps.h = x[x.size() - 2], ps.w = x.back();
  ps.planes = numel(x) / std::max<int64_t>(1, ps.h * ps.w);
  ps.kh = k[0], ps.kw = k[1], ps.stride_h = s[0], ps.stride_w = s[1], ps.pad_h = p[0], ps.pad_w = p[1];
  ps.oh = (ps.h + 2 * ps.pad_h - ps.kh) / ps.stride_h + 1;
  ps.ow = (ps.w + 2 * ps.pad_w - ps.kw) / ps.stride_w + 1;
  return ps;
}

Outputs max_pool_forward(const Args& a) {
  const std::vector<op::TensorMeta> out = infer("max_pool2d", a);
  const Tensor x = a.inputs[0].contiguous();
  Tensor y = empty_on(x, out[0].shape, out[0].dtype), idx = empty_on(x, out[1].shape, out[1].dtype);
  max_pool2d(x.dtype(), y.raw_data(), static_cast<int32_t*>(idx.raw_data()), x.raw_data(), pool_shape(x.shape(), a.attrs));
  return {y, idx};
}

Tensor max_pool_backward(const Args& a) {
  const op::TensorMeta out = infer("max_pool2d_backward", a)[0];
  const Tensor dy = a.inputs[0].contiguous(), idx = a.inputs[1].contiguous();
  Tensor dx = empty_on(dy, out.shape, out.dtype);
  max_pool2d_backward(dy.dtype(), dx.raw_data(), dy.raw_data(), static_cast<const int32_t*>(idx.raw_data()),
                      pool_shape(out.shape, a.attrs));
  return dx;
}

Tensor avg_pool_forward(const Args& a) {
  const op::TensorMeta out = infer("avg_pool2d", a)[0];
  const Tensor x = a.inputs[0].contiguous();
  Tensor y = empty_on(x, out.shape, out.dtype);
  avg_pool2d(x.dtype(), y.raw_data(), x.raw_data(), pool_shape(x.shape(), a.attrs), a.attrs.b("count_include_pad"));
  return y;
}

Tensor avg_pool_backward(const Args& a) {
  const op::TensorMeta out = infer("avg_pool2d_backward", a)[0];
  const Tensor dy = a.inputs[0].contiguous();
  Tensor dx = empty_on(dy, out.shape, out.dtype);
  avg_pool2d_backward(dy.dtype(), dx.raw_data(), dy.raw_data(), pool_shape(out.shape, a.attrs),
                      a.attrs.b("count_include_pad"));
  return dx;
}

}  // namespace

void install_conv_kernels(const op::KernelAdder& add) {
  add("conv2d", cuda_kernel(kFloats, [](const Args& a) { return Outputs{conv_forward(a)}; }));
  add("conv2d_backward_input", cuda_kernel(kFloats, [](const Args& a) { return Outputs{conv_backward_input(a)}; }));
  add("conv2d_backward_weight", cuda_kernel(kFloats, conv_backward_weight));
  add("max_pool2d", cuda_kernel(kFloats, max_pool_forward));
  add("max_pool2d_backward", cuda_kernel(kFloats, [](const Args& a) { return Outputs{max_pool_backward(a)}; }));
  add("avg_pool2d", cuda_kernel(kFloats, [](const Args& a) { return Outputs{avg_pool_forward(a)}; }));
  add("avg_pool2d_backward", cuda_kernel(kFloats, [](const Args& a) { return Outputs{avg_pool_backward(a)}; }));
}

}  // namespace braid::cuda
