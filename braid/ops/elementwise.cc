#include "braid/ops/elementwise.h"

#include <cmath>

#include "braid/autograd/node.h"
#include "braid/tensor/cpu/elementwise.h"
#include "braid/tensor/cpu/reduce.h"

namespace braid {

namespace {

using autograd::record;
using cpu::Binary;
using cpu::Unary;
using Grads = std::vector<Tensor>;

// Gradient of a broadcast operand: summed back to its shape; skipped (undefined)
// when the operand needs none.
Tensor reduce_grad(bool needed, const Tensor& g, const Shape& shape) {
  return needed ? cpu::sum_to(g, shape) : Tensor();
}

Tensor scalar_like(double v, const Tensor& t) { return Tensor::scalar(v, t.dtype()); }

// The forward of a one-input op with a local derivative computed from the saved
// input (or output) by `deriv`.
template <class Deriv>
Tensor unary_op(const char* name, Unary op, const Tensor& x, double alpha, Deriv deriv) {
  Tensor y = cpu::unary(op, x, name, alpha);
  record(name, {x}, y, [xd = x.detach(), yd = y.detach(), deriv](const Tensor& g) {
    return Grads{deriv(g, xd, yd)};
  });
  return y;
}

}  // namespace

// ---- arithmetic ----

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = cpu::binary(Binary::add, a, b, "add");
  record("add", {a, b}, y, [sa = a.shape(), sb = b.shape(), ra = a.requires_grad(), rb = b.requires_grad()](
                               const Tensor& g) { return Grads{reduce_grad(ra, g, sa), reduce_grad(rb, g, sb)}; });
  return y;
}

Tensor add(const Tensor& a, double b) {
  Tensor y = cpu::unary(Unary::add, a, "add", b);
  record("add_scalar", {a}, y, [](const Tensor& g) { return Grads{g}; });
  return y;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor y = cpu::binary(Binary::sub, a, b, "sub");
  record("sub", {a, b}, y, [sa = a.shape(), sb = b.shape(), ra = a.requires_grad(), rb = b.requires_grad()](
                               const Tensor& g) {
    return Grads{reduce_grad(ra, g, sa), rb ? cpu::unary(Unary::neg, cpu::sum_to(g, sb), "sub") : Tensor()};
  });
  return y;
}

Tensor sub(const Tensor& a, double b) { return add(a, -b); }

Tensor sub(double a, const Tensor& b) {
  Tensor y = cpu::unary(Unary::rsub, b, "sub", a);
  record("rsub_scalar", {b}, y, [](const Tensor& g) { return Grads{cpu::unary(Unary::neg, g, "sub")}; });
  return y;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor y = cpu::binary(Binary::mul, a, b, "mul");
  record("mul", {a, b}, y, [ad = a.detach(), bd = b.detach(), ra = a.requires_grad(), rb = b.requires_grad()](
                               const Tensor& g) {
    return Grads{ra ? cpu::sum_to(cpu::binary(Binary::mul, g, bd, "mul"), ad.shape()) : Tensor(),
                 rb ? cpu::sum_to(cpu::binary(Binary::mul, g, ad, "mul"), bd.shape()) : Tensor()};
  });
  return y;
}

Tensor mul(const Tensor& a, double b) {
  Tensor y = cpu::unary(Unary::mul, a, "mul", b);
  record("mul_scalar", {a}, y, [b](const Tensor& g) { return Grads{cpu::unary(Unary::mul, g, "mul", b)}; });
  return y;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor y = cpu::binary(Binary::div, a, b, "div");
  // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2 = -y/b.
  record("div", {a, b}, y, [yd = y.detach(), bd = b.detach(), sa = a.shape(), ra = a.requires_grad(),
                            rb = b.requires_grad()](const Tensor& g) {
    const Tensor g_over_b = cpu::binary(Binary::div, g, bd, "div");
    Tensor gb;
    if (rb) gb = cpu::unary(Unary::neg, cpu::sum_to(cpu::binary(Binary::mul, g_over_b, yd, "div"), bd.shape()), "div");
    return Grads{reduce_grad(ra, g_over_b, sa), gb};
  });
  return y;
}

Tensor div(const Tensor& a, double b) {
  // Integer tensors would truncate 1/b to 0; true division needs a floating tensor.
  if (!is_floating(a.dtype())) {
    fail<ValueError>("div: dtype {} is not supported (input of shape {})", name(a.dtype()), to_string(a.shape()));
  }
  return mul(a, 1.0 / b);
}

Tensor div(double a, const Tensor& b) {
  Tensor y = cpu::unary(Unary::rdiv, b, "div", a);
  // d(a/b)/db = -a/b^2 = -y/b
  record("rdiv_scalar", {b}, y, [yd = y.detach(), bd = b.detach()](const Tensor& g) {
    return Grads{cpu::unary(Unary::neg, cpu::binary(Binary::div, cpu::binary(Binary::mul, g, yd, "div"), bd, "div"),
                            "div")};
  });
  return y;
}

// ---- math ----

Tensor neg(const Tensor& x) {
  return unary_op("neg", Unary::neg, x, 0,
                  [](const Tensor& g, const Tensor&, const Tensor&) { return cpu::unary(Unary::neg, g, "neg"); });
}

Tensor exp(const Tensor& x) {
  return unary_op("exp", Unary::exp, x, 0, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return cpu::binary(Binary::mul, g, y, "exp");
  });
}

Tensor log(const Tensor& x) {
  return unary_op("log", Unary::log, x, 0, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return cpu::binary(Binary::div, g, x, "log");
  });
}

Tensor sqrt(const Tensor& x) {
  // d sqrt(x) = 1 / (2 sqrt(x))
  return unary_op("sqrt", Unary::sqrt, x, 0, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return cpu::binary(Binary::div, cpu::unary(Unary::mul, g, "sqrt", 0.5), y, "sqrt");
  });
}

Tensor abs(const Tensor& x) {
  return unary_op("abs", Unary::abs, x, 0, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return cpu::binary(Binary::mul, g, cpu::unary(Unary::sign, x, "abs"), "abs");
  });
}

Tensor pow(const Tensor& x, double exponent) {
  return unary_op("pow", Unary::pow, x, exponent, [exponent](const Tensor& g, const Tensor& x, const Tensor&) {
    return cpu::binary(Binary::mul, g, cpu::unary(Unary::pow_grad, x, "pow", exponent), "pow");
  });
}

// ---- max / min ----

namespace {

// The gradient of maximum (pick = gt) or minimum (pick = lt) for one operand:
// g where it won, g/2 on ties, 0 elsewhere; then summed to its shape.
Tensor extremum_grad(Binary pick, const Tensor& g, const Tensor& self, const Tensor& other, const char* name) {
  const Tensor zero = scalar_like(0, g);
  const Tensor half = cpu::unary(Unary::mul, g, name, 0.5);
  Tensor tie = cpu::where(cpu::binary(Binary::eq, self, other, name), half, zero, name);
  return cpu::sum_to(cpu::where(cpu::binary(pick, self, other, name), g, tie, name), self.shape());
}

Tensor extremum(Binary op, Binary pick, const char* name, const Tensor& a, const Tensor& b) {
  Tensor y = cpu::binary(op, a, b, name);
  record(name, {a, b}, y, [=, ad = a.detach(), bd = b.detach(), ra = a.requires_grad(), rb = b.requires_grad()](
                              const Tensor& g) {
    return Grads{ra ? extremum_grad(pick, g, ad, bd, name) : Tensor(),
                 rb ? extremum_grad(pick, g, bd, ad, name) : Tensor()};
  });
  return y;
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(Binary::maximum, Binary::gt, "maximum", a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(Binary::minimum, Binary::lt, "minimum", a, b); }

// ---- comparisons ----

Tensor eq(const Tensor& a, const Tensor& b) { return cpu::binary(Binary::eq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return cpu::binary(Binary::ne, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return cpu::binary(Binary::lt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return cpu::binary(Binary::le, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return cpu::binary(Binary::gt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return cpu::binary(Binary::ge, a, b, "ge"); }
namespace {
// An integer tensor against a fractional scalar compares in f64 (x < 0.5 must
// not become x < 0); otherwise the scalar takes the tensor's dtype.
Tensor compare_scalar(Binary op, const char* name, const Tensor& a, double b) {
  if (!is_floating(a.dtype()) && b != std::floor(b)) {
    return cpu::binary(op, a.to(DType::f64), Tensor::scalar(b, DType::f64), name);
  }
  return cpu::binary(op, a, scalar_like(b, a), name);
}
}  // namespace

Tensor eq(const Tensor& a, double b) { return compare_scalar(Binary::eq, "eq", a, b); }
Tensor ne(const Tensor& a, double b) { return compare_scalar(Binary::ne, "ne", a, b); }
Tensor lt(const Tensor& a, double b) { return compare_scalar(Binary::lt, "lt", a, b); }
Tensor le(const Tensor& a, double b) { return compare_scalar(Binary::le, "le", a, b); }
Tensor gt(const Tensor& a, double b) { return compare_scalar(Binary::gt, "gt", a, b); }
Tensor ge(const Tensor& a, double b) { return compare_scalar(Binary::ge, "ge", a, b); }

}  // namespace braid
