#include "braid/ops/elementwise.h"

#include <cmath>

#include "braid/ops/activation.h"
#include "braid/ops/define.h"
#include "braid/ops/shape.h"
#include "braid/ops/tensor_ops.h"
#include "braid/tensor/cpu/elementwise.h"
#include "braid/tensor/cpu/reduce.h"

namespace braid {

// ---- the ops ----

namespace op {
namespace {

using cpu::Binary;
using cpu::Unary;

Kernel binary_kernel(Binary b, const char* name) {
  return [b, name](const Args& a) { return Outputs{cpu::binary(b, a.inputs[0], a.inputs[1], name)}; };
}

// One-input kernels read their scalar parameter from attribute "alpha".
Kernel unary_kernel(Unary u, const char* name) {
  return [u, name](const Args& a) {
    return Outputs{cpu::unary(u, a.inputs[0], name, a.attrs.has("alpha") ? a.attrs.f("alpha") : 0.0)};
  };
}

// The gradient of a broadcast operand, summed back to its shape; undefined
// when the operand wants none.
Tensor operand_grad(const GradArgs& g, size_t i, const Tensor& full) {
  return g.needs(i) ? sum_to(full, g.input_meta[i].shape) : Tensor();
}

// The gradient of maximum (pick = gt) or minimum (pick = lt) for one operand:
// g where it won, g/2 on ties, 0 elsewhere; then summed to its shape.
Tensor extremum_grad(bool is_max, const Tensor& g, const Tensor& self, const Tensor& other) {
  const Tensor half = mul(g, 0.5);
  const Tensor tie = where(eq(self, other), half, Tensor::scalar(0, g.dtype()));
  const Tensor won = is_max ? gt(self, other) : lt(self, other);
  return sum_to(where(won, g, tie), self.shape());
}

void define_binary(const Definer& define, const char* name, Binary b, BackwardFn backward, uint32_t save) {
  define({.name = name, .family = "elementwise", .inputs = 2, .infer = broadcast_infer(name),
          .kernels = {cpu_kernel(kArith, binary_kernel(b, name))}, .backward = std::move(backward),
          .save_inputs = save});
}

void define_unary(const Definer& define, const char* name, Unary u, const std::vector<DType>& dtypes,
                  BackwardFn backward, uint32_t save_inputs, uint32_t save_outputs) {
  define({.name = name, .family = "elementwise", .inputs = 1, .infer = same_as(0),
          .kernels = {cpu_kernel(dtypes, unary_kernel(u, name))}, .backward = std::move(backward),
          .save_inputs = save_inputs, .save_outputs = save_outputs});
}

}  // namespace

void define_elementwise_ops(const Definer& define) {
  // Arithmetic between tensors.
  define_binary(define, "add", Binary::add, [](const GradArgs& g) {
    return Grads{operand_grad(g, 0, g.grad), operand_grad(g, 1, g.grad)};
  }, 0);
  define_binary(define, "sub", Binary::sub, [](const GradArgs& g) {
    return Grads{operand_grad(g, 0, g.grad), g.needs(1) ? neg(sum_to(g.grad, g.input_meta[1].shape)) : Tensor()};
  }, 0);
  define_binary(define, "mul", Binary::mul, [](const GradArgs& g) {
    return Grads{g.needs(0) ? sum_to(mul(g.grad, g.inputs[1]), g.input_meta[0].shape) : Tensor(),
                 g.needs(1) ? sum_to(mul(g.grad, g.inputs[0]), g.input_meta[1].shape) : Tensor()};
  }, 0b11);
  // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2 = -y/b.
  // True division: floating dtypes only (integers would truncate).
  define({.name = "div", .family = "elementwise", .inputs = 2, .infer = broadcast_infer("div"),
          .kernels = {cpu_kernel(kFloat, binary_kernel(Binary::div, "div"))},
          .backward = [](const GradArgs& g) {
            const Tensor g_over_b = div(g.grad, g.inputs[1]);
            return Grads{operand_grad(g, 0, g_over_b),
                         g.needs(1) ? neg(sum_to(mul(g_over_b, g.outputs[0]), g.input_meta[1].shape)) : Tensor()};
          },
          .save_inputs = 0b10, .save_outputs = 0b1});
  // Elementwise max/min: on ties the gradient is split evenly, as in PyTorch.
  for (bool is_max : {true, false}) {
    define_binary(define, is_max ? "maximum" : "minimum", is_max ? Binary::maximum : Binary::minimum,
                  [is_max](const GradArgs& g) {
                    return Grads{g.needs(0) ? extremum_grad(is_max, g.grad, g.inputs[0], g.inputs[1]) : Tensor(),
                                 g.needs(1) ? extremum_grad(is_max, g.grad, g.inputs[1], g.inputs[0]) : Tensor()};
                  },
                  0b11);
  }

  // Comparisons: bool results, not differentiable.
  const std::pair<const char*, Binary> comparisons[] = {{"eq", Binary::eq}, {"ne", Binary::ne}, {"lt", Binary::lt},
                                                        {"le", Binary::le}, {"gt", Binary::gt}, {"ge", Binary::ge}};
  for (const auto& [name, b] : comparisons) {
    define({.name = name, .family = "elementwise", .inputs = 2, .infer = broadcast_infer(name, DType::b8),
            .kernels = {cpu_kernel(kCompare, binary_kernel(b, name))}});
  }

  // A tensor and a scalar (attribute "alpha").
  define_unary(define, "add_scalar", Unary::add, kArith, [](const GradArgs& g) { return Grads{g.grad}; }, 0, 0);
  define_unary(define, "mul_scalar", Unary::mul, kArith,
               [](const GradArgs& g) { return Grads{mul(g.grad, g.attrs.f("alpha"))}; }, 0, 0);
  define_unary(define, "rsub_scalar", Unary::rsub, kArith, [](const GradArgs& g) { return Grads{neg(g.grad)}; }, 0, 0);
  // d(a/x)/dx = -a/x^2 = -y/x
  define_unary(define, "rdiv_scalar", Unary::rdiv, kFloat,
               [](const GradArgs& g) { return Grads{neg(div(mul(g.grad, g.outputs[0]), g.inputs[0]))}; }, 1, 1);
  // x ^ alpha; gradient alpha * x^(alpha-1).
  define_unary(define, "pow", Unary::pow, kFloat, [](const GradArgs& g) {
    const double e = g.attrs.f("alpha");
    return Grads{mul(g.grad, mul(pow(g.inputs[0], e - 1), e))};
  }, 1, 0);

  // Math functions.
  define_unary(define, "neg", Unary::neg, kArith, [](const GradArgs& g) { return Grads{neg(g.grad)}; }, 0, 0);
  define_unary(define, "exp", Unary::exp, kFloat, [](const GradArgs& g) { return Grads{mul(g.grad, g.outputs[0])}; },
               0, 1);
  define_unary(define, "log", Unary::log, kFloat, [](const GradArgs& g) { return Grads{div(g.grad, g.inputs[0])}; },
               1, 0);
  // d sqrt(x) = 1 / (2 sqrt(x))
  define_unary(define, "sqrt", Unary::sqrt, kFloat,
               [](const GradArgs& g) { return Grads{div(mul(g.grad, 0.5), g.outputs[0])}; }, 0, 1);
  // Gradient 0 at x == 0 (PyTorch's convention: sign(x)).
  define_unary(define, "abs", Unary::abs, kArith,
               [](const GradArgs& g) { return Grads{mul(g.grad, sign(g.inputs[0]))}; }, 1, 0);
  define_unary(define, "sign", Unary::sign, kArith, {}, 0, 0);

  // The adjoint of broadcasting: sums over the dims that were broadcast.
  define({.name = "sum_to", .family = "reduce", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) { return Metas{{a.ints("shape"), in[0].dtype}}; },
          .kernels = {cpu_kernel(kArith, [](const Args& a) { return Outputs{cpu::sum_to(a.inputs[0], a.attrs.ints("shape"))}; })},
          .backward = [](const GradArgs& g) { return Grads{contiguous(expand(g.grad, g.input_meta[0].shape))}; },
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const double n = static_cast<double>(numel(in[0].shape)), m = static_cast<double>(numel(out[0].shape));
            // n - m additions, in trees of n / m terms.
            return Cost{n - m, bytes_of(in[0]) + bytes_of(out[0]), log2_depth(m > 0 ? n / m : 1)};
          }});
}

}  // namespace op

// ---- the eager functions ----

namespace {

Tensor run(const char* name, std::initializer_list<Tensor> in, const op::Attrs& attrs = {}) {
  return op::call1(op::find(name), in, attrs);
}

Tensor scalar_op(const op::OpDef& d, const Tensor& x, double alpha) { return op::call1(d, {x}, {{"alpha", alpha}}); }

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return op::call1(BRAID_OP("add"), {a, b}); }
Tensor add(const Tensor& a, double b) { return scalar_op(BRAID_OP("add_scalar"), a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return op::call1(BRAID_OP("sub"), {a, b}); }
Tensor sub(const Tensor& a, double b) { return add(a, -b); }
Tensor sub(double a, const Tensor& b) { return scalar_op(BRAID_OP("rsub_scalar"), b, a); }
Tensor mul(const Tensor& a, const Tensor& b) { return op::call1(BRAID_OP("mul"), {a, b}); }
Tensor mul(const Tensor& a, double b) { return scalar_op(BRAID_OP("mul_scalar"), a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return op::call1(BRAID_OP("div"), {a, b}); }
Tensor div(const Tensor& a, double b) {
  // Integer tensors would truncate 1/b to 0; true division needs a floating tensor.
  if (!is_floating(a.dtype())) {
    fail<ValueError>("div: dtype {} is not supported (input of shape {})", name(a.dtype()), to_string(a.shape()));
  }
  return mul(a, 1.0 / b);
}
Tensor div(double a, const Tensor& b) { return scalar_op(BRAID_OP("rdiv_scalar"), b, a); }

Tensor neg(const Tensor& x) { return op::call1(BRAID_OP("neg"), {x}); }
Tensor exp(const Tensor& x) { return op::call1(BRAID_OP("exp"), {x}); }
Tensor log(const Tensor& x) { return op::call1(BRAID_OP("log"), {x}); }
Tensor sqrt(const Tensor& x) { return op::call1(BRAID_OP("sqrt"), {x}); }
Tensor abs(const Tensor& x) { return op::call1(BRAID_OP("abs"), {x}); }
Tensor sign(const Tensor& x) { return op::call1(BRAID_OP("sign"), {x}); }
Tensor pow(const Tensor& x, double exponent) { return scalar_op(BRAID_OP("pow"), x, exponent); }

Tensor maximum(const Tensor& a, const Tensor& b) { return op::call1(BRAID_OP("maximum"), {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return op::call1(BRAID_OP("minimum"), {a, b}); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return op::call1(BRAID_OP("sum_to"), {x}, {{"shape", shape}});
}

Tensor eq(const Tensor& a, const Tensor& b) { return run("eq", {a, b}); }
Tensor ne(const Tensor& a, const Tensor& b) { return run("ne", {a, b}); }
Tensor lt(const Tensor& a, const Tensor& b) { return run("lt", {a, b}); }
Tensor le(const Tensor& a, const Tensor& b) { return run("le", {a, b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return run("gt", {a, b}); }
Tensor ge(const Tensor& a, const Tensor& b) { return run("ge", {a, b}); }

namespace {
// An integer tensor against a fractional scalar compares in f64 (x < 0.5 must
// not become x < 0); otherwise the scalar takes the tensor's dtype.
Tensor compare_scalar(const char* name, const Tensor& a, double b) {
  if (!is_floating(a.dtype()) && b != std::floor(b)) return run(name, {cast(a, DType::f64), Tensor::scalar(b, DType::f64)});
  return run(name, {a, Tensor::scalar(b, a.dtype())});
}
}  // namespace

Tensor eq(const Tensor& a, double b) { return compare_scalar("eq", a, b); }
Tensor ne(const Tensor& a, double b) { return compare_scalar("ne", a, b); }
Tensor lt(const Tensor& a, double b) { return compare_scalar("lt", a, b); }
Tensor le(const Tensor& a, double b) { return compare_scalar("le", a, b); }
Tensor gt(const Tensor& a, double b) { return compare_scalar("gt", a, b); }
Tensor ge(const Tensor& a, double b) { return compare_scalar("ge", a, b); }

}  // namespace braid
