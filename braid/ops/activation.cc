#include "braid/ops/activation.h"

#include <limits>

#include "braid/autograd/node.h"
#include "braid/tensor/cpu/elementwise.h"
#include "braid/tensor/cpu/reduce.h"

namespace braid {

namespace {

using autograd::record;
using cpu::Binary;
using cpu::Unary;
using Grads = std::vector<Tensor>;

// y = f(x) whose backward is one fused binary kernel over (g, saved), where
// saved is the input x or, when `from_output`, the output y.
Tensor pointwise(const char* name, Unary f, Binary grad, bool from_output, const Tensor& x) {
  Tensor y = cpu::unary(f, x, name);
  record(name, {x}, y, [grad, name, saved = from_output ? y.detach() : x.detach()](const Tensor& g) {
    return Grads{cpu::binary(grad, g, saved, name)};
  });
  return y;
}

}  // namespace

Tensor relu(const Tensor& x) { return pointwise("relu", Unary::relu, Binary::relu_grad, false, x); }
Tensor tanh(const Tensor& x) { return pointwise("tanh", Unary::tanh, Binary::tanh_grad, true, x); }
Tensor sigmoid(const Tensor& x) { return pointwise("sigmoid", Unary::sigmoid, Binary::sigmoid_grad, true, x); }

Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  return approximate == GeluApproximation::tanh
             ? pointwise("gelu", Unary::gelu_tanh, Binary::gelu_tanh_grad, false, x)
             : pointwise("gelu", Unary::gelu_erf, Binary::gelu_erf_grad, false, x);
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  const double l = lo.value_or(-std::numeric_limits<double>::infinity());
  const double h = hi.value_or(std::numeric_limits<double>::infinity());
  Tensor y = cpu::unary(Unary::clamp, x, "clamp", l, h);
  record("clamp", {x}, y, [xd = x.detach(), l, h](const Tensor& g) { return Grads{cpu::clamp_grad(g, xd, l, h)}; });
  return y;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor y = cpu::where(cond, a, b, "where");
  record("where", {a, b}, y, [c = cond.detach(), sa = a.shape(), sb = b.shape(), ra = a.requires_grad(),
                              rb = b.requires_grad()](const Tensor& g) {
    const Tensor zero = Tensor::scalar(0, g.dtype());
    return Grads{ra ? cpu::sum_to(cpu::where(c, g, zero, "where"), sa) : Tensor(),
                 rb ? cpu::sum_to(cpu::where(c, zero, g, "where"), sb) : Tensor()};
  });
  return y;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  if (broadcast_shapes(x.shape(), mask.shape(), "masked_fill") != x.shape()) {
    fail<ValueError>("masked_fill: mask {} does not broadcast to the input {}", to_string(mask.shape()),
                     to_string(x.shape()));
  }
  Tensor y = cpu::where(mask, Tensor::scalar(value, x.dtype()), x, "masked_fill");
  record("masked_fill", {x}, y, [m = mask.detach()](const Tensor& g) {
    return Grads{cpu::where(m, Tensor::scalar(0, g.dtype()), g, "masked_fill")};
  });
  return y;
}

}  // namespace braid
