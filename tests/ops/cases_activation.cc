// Op-table cases for the activation family (op_table.h).
#include <cmath>

#include "braid/ops/activation.h"
#include "braid/ops/elementwise.h"
#include "gradcheck_util.h"
#include "op_table.h"

namespace braid::testing {

namespace {

// x with every value within 0.05 of a kink moved 0.2 away from it: finite
// differences across relu's or clamp's corner are meaningless.
Tensor away_from_kinks(const Tensor& x, std::initializer_list<double> kinks) {
  std::vector<float> v = x.to_vector<float>();
  for (float& e : v) {
    for (double k : kinks) {
      if (std::abs(e - k) < 0.05) e += 0.2f;
    }
  }
  return Tensor::from_vector(v, x.shape());
}

Tensor run(const char* name, const std::vector<Tensor>& in, const op::Attrs& attrs = {}) {
  return op::call1(op::find(name), std::span<const Tensor>(in), attrs);
}

}  // namespace

std::vector<OpCase> activation_cases() {
  Generator gen(21);
  auto r = [&](const Shape& s, double lo = -3, double hi = 3) { return random_tensor(s, DType::f32, gen, lo, hi); };
  const Tensor x = away_from_kinks(r({5, 7}), {0, -1, 0.5, 0.25});
  const Tensor g = r({5, 7});
  const Tensor y = r({5, 7}, -0.99, 0.99);  // a tanh or sigmoid output's range, roughly
  const op::Attrs none{{"approximate", std::string("none")}}, tanh_approx{{"approximate", std::string("tanh")}};
  const op::Attrs bounds{{"min", -1.0}, {"max", 0.5}};
  auto unary = [&](const char* op, const char* expr, Fn fn, op::Attrs attrs = {}) {
    return OpCase{op, {expr, {{"x", x}}, std::move(fn), {"x"}}, "", std::move(attrs)};
  };
  // Backward ops: (g, saved) -> the input's gradient; not differentiable.
  auto backward = [&](const char* op, const char* expr, const char* saved_name, const Tensor& saved,
                      op::Attrs attrs = {}) {
    const std::string name = op;
    return OpCase{op, {expr, {{"g", g}, {saved_name, saved}},
                       [name, attrs](const auto& v) { return run(name.c_str(), v, attrs); }, {}},
                  "", attrs};
  };
  std::vector<OpCase> cases{
      unary("relu", "F.relu(x)", [](const auto& v) { return relu(v[0]); }),
      backward("relu_backward", "g * (x > 0)", "x", x),
      unary("gelu", "F.gelu(x)", [](const auto& v) { return gelu(v[0]); }, none),
      unary("gelu", "F.gelu(x, approximate='tanh')", [](const auto& v) { return gelu(v[0], GeluApproximation::tanh); },
            tanh_approx),
      backward("gelu_backward", "torch.autograd.grad(F.gelu(x.requires_grad_()), x, g)[0]", "x", x, none),
      backward("gelu_backward", "torch.autograd.grad(F.gelu(x.requires_grad_(), approximate='tanh'), x, g)[0]", "x", x,
               tanh_approx),
      unary("tanh", "torch.tanh(x)", [](const auto& v) { return tanh(v[0]); }),
      backward("tanh_backward", "g * (1 - y * y)", "y", y),
      unary("sigmoid", "torch.sigmoid(x)", [](const auto& v) { return sigmoid(v[0]); }),
      backward("sigmoid_backward", "g * y * (1 - y)", "y", y),
      unary("clamp", "x.clamp(-1, 0.5)", [](const auto& v) { return clamp(v[0], -1.0, 0.5); }, bounds),
      unary("clamp", "x.clamp(min=0.25)", [](const auto& v) { return clamp(v[0], 0.25, std::nullopt); },
            {{"min", 0.25}}),
      unary("clamp", "x.clamp(max=0.0)", [](const auto& v) { return clamp(v[0], std::nullopt, 0.0); }, {{"max", 0.0}}),
      // Bounds included: the gradient passes at x == min and x == max.
      backward("clamp_backward", "g * ((x >= -1) & (x <= 0.5))", "x", x, bounds),
  };
  // Values and gradients on strided inputs (a transposed, step-2 view); the
  // dtype sweep runs on the contiguous cases above.
  const Tensor s = strided_copy(away_from_kinks(r({4, 3, 6}), {0, -1, 0.5}));
  const std::vector<std::pair<const char*, std::pair<const char*, Fn>>> on_strided = {
      {"relu", {"F.relu(x)", [](const auto& v) { return relu(v[0]); }}},
      {"gelu", {"F.gelu(x)", [](const auto& v) { return gelu(v[0]); }}},
      {"tanh", {"torch.tanh(x)", [](const auto& v) { return tanh(v[0]); }}},
      {"sigmoid", {"torch.sigmoid(x)", [](const auto& v) { return sigmoid(v[0]); }}},
      {"clamp", {"x.clamp(-1, 0.5)", [](const auto& v) { return clamp(v[0], -1.0, 0.5); }}},
  };
  for (const auto& [op, check] : on_strided) {
    cases.push_back({op, {check.first, {{"x", s}}, check.second, {"x"}}, "", {}, false});
  }
  // Selection, broadcasting all three ways. Values are positive so that the
  // sweep's conversions to unsigned and bool types stay defined.
  const Tensor a = r({3, 4, 5}, 0.1, 3), b = r({4, 1}, 0.1, 3);
  const Tensor c = gt(random_tensor({5}, DType::f32, gen), 0.0);
  const Tensor m = gt(random_tensor({4, 1}, DType::f32, gen), 0.0);
  cases.push_back({"where", {"torch.where(c, a, b)", {{"c", c}, {"a", a}, {"b", b}},
                             [](const auto& v) { return where(v[0], v[1], v[2]); }, {"a", "b"}}, ""});
  cases.push_back({"masked_fill", {"a.masked_fill(m, 2.5)", {{"a", a}, {"m", m}},
                                   [](const auto& v) { return masked_fill(v[0], v[1], 2.5); }, {"a"}},
                   "", {{"value", 2.5}}});
  // On a strided input (swept above).
  cases.push_back({"masked_fill", {"a.masked_fill(m, -2.5)", {{"a", strided_copy(a)}, {"m", m}},
                                   [](const auto& v) { return masked_fill(v[0], v[1], -2.5); }, {"a"}},
                   "", {{"value", -2.5}}, false});
  return cases;
}

}  // namespace braid::testing
