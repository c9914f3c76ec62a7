#include "braid/ops/conv.h"

#include "braid/ops/autocast.h"
#include "braid/ops/define.h"
#include "braid/ops/matmul.h"
#include "braid/ops/tensor_ops.h"

namespace braid {

namespace op {
namespace {

const std::vector<DType> kProduct = {DType::f32, DType::f64, DType::bf16};

// An optional input left out, or an output not computed (as meta_of(Tensor())).
const TensorMeta kAbsent{{}, DType::f32, true};

// The attributes every conv op carries: stride, padding, dilation ((h, w)
// each), groups and backend (a cpu::ConvBackend; automatic = per-shape choice).
Attrs conv_attrs(const Conv2dOptions& o) {
  return {{"stride", std::vector<int64_t>{o.stride[0], o.stride[1]}},
          {"padding", std::vector<int64_t>{o.padding[0], o.padding[1]}},
          {"dilation", std::vector<int64_t>{o.dilation[0], o.dilation[1]}},
          {"groups", o.groups},
          {"backend", static_cast<int64_t>(o.backend)}};
}

cpu::ConvBackend backend_of(const Attrs& a) { return static_cast<cpu::ConvBackend>(a.i("backend")); }

// The geometry of x [n, c, h, w] * w [o, c / groups, kh, kw] (+ b [o]), or a
// ValueError naming op, shapes and options. b may be f32 beside bf16 operands.
cpu::Conv2dGeometry geometry(const char* op, const TensorMeta& x, const TensorMeta& w, const TensorMeta& b,
                             const Attrs& a) {
  const auto& stride = a.ints("stride");
  const auto& padding = a.ints("padding");
  const auto& dilation = a.ints("dilation");
  const int64_t groups = a.i("groups");
  auto bad = [&](const char* why) {
    fail<ValueError>("{}: {}: x {} ({}), w {} ({}), b {}, stride ({}), padding ({}), dilation ({}), groups {}", op, why,
                     to_string(x.shape), name(x.dtype), to_string(w.shape), name(w.dtype),
                     b.absent ? "none" : to_string(b.shape), fmt::join(stride, ", "), fmt::join(padding, ", "),
                     fmt::join(dilation, ", "), groups);
  };
  if (x.shape.size() != 4 || w.shape.size() != 4) bad("x and w must be 4-D");
  const DType acc = x.dtype == DType::bf16 ? DType::f32 : x.dtype;
  if (w.dtype != x.dtype || (!b.absent && b.dtype != x.dtype && b.dtype != acc)) bad("dtypes differ");
  if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2) bad("stride, padding and dilation are (h, w)");
  if (groups < 1 || x.shape[1] % groups != 0 || w.shape[0] % groups != 0) {
    bad("groups must divide the input and output channels");
  }
  if (w.shape[1] * groups != x.shape[1]) bad("w's second dim must be channels / groups");
  if (!b.absent && (b.shape.size() != 1 || b.shape[0] != w.shape[0])) bad("b must be [out_channels]");
  for (int i = 0; i < 2; ++i) {
    if (stride[i] < 1 || dilation[i] < 1 || padding[i] < 0) bad("stride and dilation must be >= 1, padding >= 0");
  }
  cpu::Conv2dGeometry g;
  g.n = x.shape[0], g.c = x.shape[1], g.h = x.shape[2], g.w = x.shape[3];
  g.o = w.shape[0], g.kh = w.shape[2], g.kw = w.shape[3];
  g.stride_h = stride[0], g.stride_w = stride[1];
  g.pad_h = padding[0], g.pad_w = padding[1];
  g.dil_h = dilation[0], g.dil_w = dilation[1];
  g.groups = groups;
  if (g.kh < 1 || g.kw < 1 || g.oh() < 1 || g.ow() < 1) bad("the (dilated) kernel is larger than the padded input");
  return g;
}

Shape out_shape(const cpu::Conv2dGeometry& g) { return {g.n, g.o, g.oh(), g.ow()}; }

// The backward ops' operand dy must be the forward's output in the operands' dtype.
void check_dy(const char* op, const TensorMeta& dy, const cpu::Conv2dGeometry& g, DType dtype) {
  if (dy.shape != out_shape(g) || dy.dtype != dtype) {
    fail<ValueError>("{}: gradient {} ({}) does not fit the convolution {} ({})", op, to_string(dy.shape),
                     name(dy.dtype), g.to_string(), name(dtype));
  }
}

// y = conv(x, w) + b. bf16 operands give f32 (b in f32).
Tensor conv_forward(const Tensor& x, const Tensor& w, const Tensor& b, const cpu::Conv2dGeometry& g,
                    cpu::ConvBackend backend) {
  const Tensor xc = x.contiguous(), wc = w.contiguous();
  const DType acc = x.dtype() == DType::bf16 ? DType::f32 : x.dtype();
  const Tensor bc = b.defined() ? b.to(acc).contiguous() : Tensor();
  Tensor y = Tensor::empty(out_shape(g), acc);
  switch (x.dtype()) {
    case DType::f32:
      cpu::conv2d_forward<float>(g, xc.data<float>(), wc.data<float>(), bc.defined() ? bc.data<float>() : nullptr,
                                 y.data<float>(), backend);
      break;
    case DType::f64:
      cpu::conv2d_forward<double>(g, xc.data<double>(), wc.data<double>(), bc.defined() ? bc.data<double>() : nullptr,
                                  y.data<double>(), backend);
      break;
    default:
      cpu::conv2d_forward(g, xc.data<bf16>(), wc.data<bf16>(), bc.defined() ? bc.data<float>() : nullptr,
                          y.data<float>(), backend);
  }
  return y;
}

// dx = conv_transpose(dy, w).
Tensor conv_backward_input(const Tensor& dy, const Tensor& w, const cpu::Conv2dGeometry& g, cpu::ConvBackend backend) {
  const Tensor dyc = dy.contiguous(), wc = w.contiguous();
  Tensor dx = Tensor::empty({g.n, g.c, g.h, g.w}, dy.dtype() == DType::bf16 ? DType::f32 : dy.dtype());
  switch (dy.dtype()) {
    case DType::f32:
      cpu::conv2d_backward_data<float>(g, dyc.data<float>(), wc.data<float>(), dx.data<float>(), backend);
      break;
    case DType::f64:
      cpu::conv2d_backward_data<double>(g, dyc.data<double>(), wc.data<double>(), dx.data<double>(), backend);
      break;
    default: cpu::conv2d_backward_data(g, dyc.data<bf16>(), wc.data<bf16>(), dx.data<float>(), backend);
  }
  return dx;
}

// dw = sum over images of dy (x) x, and db = the sum of dy when `bias` (the
// weight pass yields it almost for free).
Outputs conv_backward_weight(const Tensor& dy, const Tensor& x, const cpu::Conv2dGeometry& g, bool bias,
                             cpu::ConvBackend backend) {
  const Tensor dyc = dy.contiguous(), xc = x.contiguous();
  const DType acc = dy.dtype() == DType::bf16 ? DType::f32 : dy.dtype();
  Tensor dw = Tensor::empty({g.o, g.c / g.groups, g.kh, g.kw}, acc);
  Tensor db = bias ? Tensor::empty({g.o}, acc) : Tensor();
  switch (dy.dtype()) {
    case DType::f32:
      cpu::conv2d_backward_weights<float>(g, dyc.data<float>(), xc.data<float>(), dw.data<float>(),
                                          bias ? db.data<float>() : nullptr, backend);
      break;
    case DType::f64:
      cpu::conv2d_backward_weights<double>(g, dyc.data<double>(), xc.data<double>(), dw.data<double>(),
                                           bias ? db.data<double>() : nullptr, backend);
      break;
    default:
      cpu::conv2d_backward_weights(g, dyc.data<bf16>(), xc.data<bf16>(), dw.data<float>(),
                                   bias ? db.data<float>() : nullptr, backend);
  }
  return {dw, db};
}

// Each of the three products: 2 flops per (output pixel, filter tap) pair,
// 2 * N * O * OH * OW * (C / groups) * kh * kw; depth that of its sums.
Cost conv_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const cpu::Conv2dGeometry& g,
               double terms) {
  const double taps = static_cast<double>(g.c / g.groups * g.kh * g.kw);
  Cost c{2.0 * static_cast<double>(g.n * g.o * g.oh() * g.ow()) * taps, 0, log2_depth(terms)};
  for (const TensorMeta& t : in) c.bytes += bytes_of(t);
  for (const TensorMeta& t : out) c.bytes += bytes_of(t);
  return c;
}

// The geometry a backward op rebuilds from attribute "input_shape" or
// "weight_shape".
TensorMeta shape_attr(const Attrs& a, const char* key, DType dtype) { return {a.ints(key), dtype}; }

}  // namespace

void define_conv_ops(const Definer& define) {
  // (x, w, b?) -> y. Backward: conv2d_backward_input for dx and
  // conv2d_backward_weight for dw and db, each over one copy of g in the
  // operands' dtype (bf16 under autocast).
  define({.name = "conv2d", .family = "conv", .inputs = 3,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const cpu::Conv2dGeometry g = geometry("conv2d", in[0], in[1], in[2], a);
            return Metas{{out_shape(g), in[0].dtype == DType::bf16 ? DType::f32 : in[0].dtype}};
          },
          .kernels = {cpu_kernel(kProduct, [](const Args& a) {
            const auto& in = a.inputs;
            const cpu::Conv2dGeometry g = geometry("conv2d", meta_of(in[0]), meta_of(in[1]), meta_of(in[2]), a.attrs);
            return Outputs{conv_forward(in[0], in[1], in[2], g, backend_of(a.attrs))};
          })},
          .backward = [](const GradArgs& g) {
            const Tensor dy = cast(g.grad, g.input_meta[0].dtype);
            Grads grads(3);
            if (g.needs(0)) {
              Attrs attrs = g.attrs;
              attrs.set("input_shape", g.input_meta[0].shape);
              grads[0] = call1(BRAID_OP("conv2d_backward_input"), {dy, g.inputs[1]}, attrs);
            }
            if (g.needs(1) || g.needs(2)) {
              Attrs attrs = g.attrs;
              attrs.set("weight_shape", g.input_meta[1].shape);
              attrs.set("bias", int64_t{g.needs(2)});
              std::vector<Tensor> r = call(BRAID_OP("conv2d_backward_weight"), {dy, g.inputs[0]}, attrs);
              if (g.needs(1)) grads[1] = std::move(r[0]);
              grads[2] = std::move(r[1]);
            }
            return grads;
          },
          .save_inputs = 0b011,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            const cpu::Conv2dGeometry g = geometry("conv2d", in[0], in[1], in[2], a);
            return conv_cost(in, out, g, static_cast<double>(g.c / g.groups * g.kh * g.kw));
          }});
  // (dy, w) -> dx of shape attribute "input_shape".
  define({.name = "conv2d_backward_input", .family = "conv", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const TensorMeta x = shape_attr(a, "input_shape", in[1].dtype);
            check_dy("conv2d_backward_input", in[0], geometry("conv2d_backward_input", x, in[1], kAbsent, a),
                     in[1].dtype);
            return Metas{{x.shape, in[0].dtype == DType::bf16 ? DType::f32 : in[0].dtype}};
          },
          .kernels = {cpu_kernel(kProduct, [](const Args& a) {
            const Tensor &dy = a.inputs[0], &w = a.inputs[1];
            const cpu::Conv2dGeometry g = geometry("conv2d_backward_input", shape_attr(a.attrs, "input_shape", w.dtype()),
                                                   meta_of(w), kAbsent, a.attrs);
            check_dy("conv2d_backward_input", meta_of(dy), g, w.dtype());
            return Outputs{conv_backward_input(dy, w, g, backend_of(a.attrs))};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            const cpu::Conv2dGeometry g = geometry("conv2d_backward_input", shape_attr(a, "input_shape", in[1].dtype),
                                                   in[1], kAbsent, a);
            return conv_cost(in, out, g, static_cast<double>(g.o / g.groups * g.kh * g.kw));
          }});
  // (dy, x) -> (dw of shape attribute "weight_shape", db [o] when attribute
  // "bias" is set, else absent).
  define({.name = "conv2d_backward_weight", .family = "conv", .inputs = 2, .outputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const TensorMeta w = shape_attr(a, "weight_shape", in[1].dtype);
            const cpu::Conv2dGeometry g = geometry("conv2d_backward_weight", in[1], w, kAbsent, a);
            check_dy("conv2d_backward_weight", in[0], g, in[1].dtype);
            const DType acc = in[0].dtype == DType::bf16 ? DType::f32 : in[0].dtype;
            return Metas{{w.shape, acc}, a.b("bias") ? TensorMeta{{g.o}, acc} : kAbsent};
          },
          .kernels = {cpu_kernel(kProduct, [](const Args& a) {
            const Tensor &dy = a.inputs[0], &x = a.inputs[1];
            const cpu::Conv2dGeometry g = geometry("conv2d_backward_weight", meta_of(x),
                                                   shape_attr(a.attrs, "weight_shape", x.dtype()), kAbsent,
                                                   a.attrs);
            check_dy("conv2d_backward_weight", meta_of(dy), g, x.dtype());
            return conv_backward_weight(dy, x, g, a.attrs.b("bias"), backend_of(a.attrs));
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
            const cpu::Conv2dGeometry g = geometry("conv2d_backward_weight", in[1],
                                                   shape_attr(a, "weight_shape", in[1].dtype), kAbsent, a);
            return conv_cost(in, out, g, static_cast<double>(g.n * g.oh() * g.ow()));
          }});
}

}  // namespace op

// Under autocast the products see bf16 copies of x and w (the `cast` op),
// which the backward reuses; the bias stays f32. f16 autocast copies the bias
// too (f16 products take one dtype) and widens y to f32 (autocast.h).
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& options) {
  detail::check_float("conv2d", x);
  const op::Attrs attrs = op::conv_attrs(options);
  if (autocast_f16("conv2d", x)) {
    op::geometry("conv2d", op::meta_of(x), op::meta_of(w), op::meta_of(b), attrs);  // the error names the inputs
    return autocast_f16_call(BRAID_OP("conv2d"), {x, w, b}, attrs);
  }
  if (autocast_bf16(x)) {
    op::geometry("conv2d", op::meta_of(x), op::meta_of(w), op::meta_of(b), attrs);  // the error names the inputs
    return op::call1(BRAID_OP("conv2d"), {cast(x, DType::bf16), cast(w, DType::bf16), b}, attrs);
  }
  return op::call1(BRAID_OP("conv2d"), {x, w, b}, attrs);
}

}  // namespace braid
