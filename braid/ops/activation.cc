#include "braid/ops/activation.h"

#include <limits>

#include "braid/ops/activation_attrs.h"
#include "braid/ops/define.h"
#include "braid/ops/elementwise.h"
#include "braid/tensor/cpu/elementwise.h"

namespace braid {

// ---- the ops ----

namespace op {
namespace {

using cpu::Binary;
using cpu::Unary;

// A map doing `flops` arithmetic operations per output element (a
// transcendental function counts as a few).
CostFn map_cost(double flops) {
  return [flops](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
    Cost c{flops * static_cast<double>(numel(out[0].shape)), 0, 1};
    for (const TensorMeta& m : in) c.bytes += bytes_of(m);
    c.bytes += bytes_of(out[0]);
    return c;
  };
}

// The fused backward of a pointwise op: one binary kernel over (g, saved),
// saved being the op's input x or its output y.
void define_pointwise_backward(const Definer& define, const char* name, double flops,
                               std::function<Binary(const Attrs&)> kind) {
  define({.name = name, .family = "activation", .inputs = 2, .infer = broadcast_infer(name),
          .kernels = {cpu_kernel(kFloat, [name, kind](const Args& a) {
            return Outputs{cpu::binary(kind(a.attrs), a.inputs[0], a.inputs[1], name)};
          })},
          .cost = map_cost(flops)});
}

// masked_fill's mask is bool and broadcasts to the input's shape.
void check_mask(const TensorMeta& x, const TensorMeta& mask) {
  if (mask.dtype != DType::b8) {
    fail<ValueError>("masked_fill: mask must be bool, got {} {}", name(mask.dtype), to_string(mask.shape));
  }
  if (broadcast_shapes(x.shape, mask.shape, "masked_fill") != x.shape) {
    fail<ValueError>("masked_fill: mask {} does not broadcast to the input {}", to_string(mask.shape),
                     to_string(x.shape));
  }
}

}  // namespace

bool gelu_is_tanh(const Attrs& a) {
  const std::string& s = a.s("approximate");
  if (s != "none" && s != "tanh") fail<ValueError>("gelu: approximate must be 'none' or 'tanh', got '{}'", s);
  return s == "tanh";
}

double clamp_lower(const Attrs& a) { return a.has("min") ? a.f("min") : -std::numeric_limits<double>::infinity(); }
double clamp_upper(const Attrs& a) { return a.has("max") ? a.f("max") : std::numeric_limits<double>::infinity(); }

void define_activation_ops(const Definer& define) {
  // Pointwise activations; each backward is its own fused op over (g, x) or
  // (g, y), one pass like the forward.
  define({.name = "relu", .family = "activation", .inputs = 1, .infer = same_as(0),
          .kernels = {cpu_kernel(kArith, [](const Args& a) { return Outputs{cpu::unary(Unary::relu, a.inputs[0], "relu")}; })},
          .backward = [](const GradArgs& g) { return Grads{call1(BRAID_OP("relu_backward"), {g.grad, g.inputs[0]})}; },
          .save_inputs = 0b1});
  define_pointwise_backward(define, "relu_backward", 1, [](const Attrs&) { return Binary::relu_grad; });

  define({.name = "gelu", .family = "activation", .inputs = 1, .infer = same_as(0),
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            return Outputs{cpu::unary(gelu_is_tanh(a.attrs) ? Unary::gelu_tanh : Unary::gelu_erf, a.inputs[0], "gelu")};
          })},
          .backward = [](const GradArgs& g) {
            return Grads{call1(BRAID_OP("gelu_backward"), {g.grad, g.inputs[0]}, g.attrs)};
          },
          .save_inputs = 0b1, .cost = map_cost(8)});
  define_pointwise_backward(define, "gelu_backward", 12, [](const Attrs& a) {
    return gelu_is_tanh(a) ? Binary::gelu_tanh_grad : Binary::gelu_erf_grad;
  });

  define({.name = "tanh", .family = "activation", .inputs = 1, .infer = same_as(0),
          .kernels = {cpu_kernel(kFloat, [](const Args& a) { return Outputs{cpu::unary(Unary::tanh, a.inputs[0], "tanh")}; })},
          .backward = [](const GradArgs& g) { return Grads{call1(BRAID_OP("tanh_backward"), {g.grad, g.outputs[0]})}; },
          .save_outputs = 0b1, .cost = map_cost(4)});
  define_pointwise_backward(define, "tanh_backward", 3, [](const Attrs&) { return Binary::tanh_grad; });

  define({.name = "sigmoid", .family = "activation", .inputs = 1, .infer = same_as(0),
          .kernels = {cpu_kernel(kFloat, [](const Args& a) { return Outputs{cpu::unary(Unary::sigmoid, a.inputs[0], "sigmoid")}; })},
          .backward = [](const GradArgs& g) { return Grads{call1(BRAID_OP("sigmoid_backward"), {g.grad, g.outputs[0]})}; },
          .save_outputs = 0b1, .cost = map_cost(4)});
  define_pointwise_backward(define, "sigmoid_backward", 3, [](const Attrs&) { return Binary::sigmoid_grad; });

  // clamp: the gradient passes where min <= x <= max (bounds included).
  define({.name = "clamp", .family = "activation", .inputs = 1, .infer = same_as(0),
          .kernels = {cpu_kernel(kArith, [](const Args& a) {
            return Outputs{cpu::unary(Unary::clamp, a.inputs[0], "clamp", clamp_lower(a.attrs), clamp_upper(a.attrs))};
          })},
          .backward = [](const GradArgs& g) { return Grads{call1(BRAID_OP("clamp_backward"), {g.grad, g.inputs[0]}, g.attrs)}; },
          .save_inputs = 0b1, .cost = map_cost(2)});
  define({.name = "clamp_backward", .family = "activation", .inputs = 2, .infer = same_as(1),
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            return Outputs{cpu::clamp_grad(a.inputs[0], a.inputs[1], clamp_lower(a.attrs), clamp_upper(a.attrs))};
          })},
          .cost = map_cost(2)});

  // Selection: cond ? a : b over the broadcast of all three; cond is bool.
  // Every dtype; the gradient of each branch is g where it was taken.
  define({.name = "where", .family = "activation", .inputs = 3, .dtype_input = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            if (in[0].dtype != DType::b8) {
              fail<ValueError>("where: condition must be bool, got {} {}", name(in[0].dtype), to_string(in[0].shape));
            }
            if (in[1].dtype != in[2].dtype) {
              fail<ValueError>("where: dtype mismatch, {} {} and {} {}", name(in[1].dtype), to_string(in[1].shape),
                               name(in[2].dtype), to_string(in[2].shape));
            }
            const Shape s = broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape, "where"), in[2].shape, "where");
            return Metas{{s, in[1].dtype}};
          },
          .kernels = {cpu_kernel({}, [](const Args& a) {
            return Outputs{cpu::where(a.inputs[0], a.inputs[1], a.inputs[2], "where")};
          })},
          .backward = [](const GradArgs& g) {
            const Tensor zero = Tensor::scalar(0, g.grad.dtype());
            const Tensor& cond = g.inputs[0];
            return Grads{Tensor(),
                         g.needs(1) ? sum_to(where(cond, g.grad, zero), g.input_meta[1].shape) : Tensor(),
                         g.needs(2) ? sum_to(where(cond, zero, g.grad), g.input_meta[2].shape) : Tensor()};
          },
          .save_inputs = 0b001});
  // x with attribute "value" where the mask (bool, broadcasting to x) is set.
  define({.name = "masked_fill", .family = "activation", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            check_mask(in[0], in[1]);
            return Metas{in[0]};
          },
          .kernels = {cpu_kernel({}, [](const Args& a) {
            const Tensor& x = a.inputs[0];
            check_mask(meta_of(x), meta_of(a.inputs[1]));
            return Outputs{cpu::where(a.inputs[1], Tensor::scalar(a.attrs.f("value"), x.dtype()), x, "masked_fill")};
          })},
          .backward = [](const GradArgs& g) {
            return Grads{where(g.inputs[1], Tensor::scalar(0, g.grad.dtype()), g.grad), Tensor()};
          },
          .save_inputs = 0b10});
}

}  // namespace op

// ---- the eager functions ----

Tensor relu(const Tensor& x) { return op::call1(BRAID_OP("relu"), {x}); }
Tensor tanh(const Tensor& x) { return op::call1(BRAID_OP("tanh"), {x}); }
Tensor sigmoid(const Tensor& x) { return op::call1(BRAID_OP("sigmoid"), {x}); }

Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  return op::call1(BRAID_OP("gelu"), {x},
                   {{"approximate", std::string(approximate == GeluApproximation::tanh ? "tanh" : "none")}});
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  op::Attrs attrs;
  if (lo) attrs.set("min", *lo);
  if (hi) attrs.set("max", *hi);
  return op::call1(BRAID_OP("clamp"), {x}, attrs);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return op::call1(BRAID_OP("where"), {cond, a, b});
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  return op::call1(BRAID_OP("masked_fill"), {x, mask}, {{"value", value}});
}

}  // namespace braid
