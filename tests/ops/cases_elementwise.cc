// Op-table cases for the elementwise family and the tensor ops (op_table.h).
#include "braid/ops/elementwise.h"
#include "braid/ops/tensor_ops.h"
#include "op_table.h"

namespace braid::testing {

namespace {

OpCase binary(const char* op, const char* expr, Fn fn, Tensor a, Tensor b) {
  return {op, {expr, {{"a", a}, {"b", b}}, std::move(fn), {"a", "b"}}};
}

OpCase unary(const char* op, const char* expr, Fn fn, Tensor x, op::Attrs attrs = {}) {
  return {op, {expr, {{"x", x}}, std::move(fn), {"x"}}, "", std::move(attrs)};
}

}  // namespace

std::vector<OpCase> elementwise_cases() {
  Generator gen(11);
  auto r = [&](const Shape& s, double lo = -1, double hi = 1) { return random_tensor(s, DType::f32, gen, lo, hi); };
  // Operands that broadcast both ways: [3, 1, 4] with [5, 1].
  const Tensor a = r({3, 1, 4}), b = r({5, 1}), away = r({5, 1}, 0.5, 2);
  std::vector<OpCase> cases{
      binary("add", "a + b", [](const auto& v) { return add(v[0], v[1]); }, a, b),
      binary("sub", "a - b", [](const auto& v) { return sub(v[0], v[1]); }, a, b),
      binary("mul", "a * b", [](const auto& v) { return mul(v[0], v[1]); }, a, b),
      binary("div", "a / b", [](const auto& v) { return div(v[0], v[1]); }, a, away),
      binary("maximum", "torch.maximum(a, b)", [](const auto& v) { return maximum(v[0], v[1]); }, a, b),
      binary("minimum", "torch.minimum(a, b)", [](const auto& v) { return minimum(v[0], v[1]); }, a, b),
      unary("add_scalar", "x + 2.5", [](const auto& v) { return add(v[0], 2.5); }, r({4, 6}), {{"alpha", 2.5}}),
      unary("mul_scalar", "x * -3.0", [](const auto& v) { return mul(v[0], -3.0); }, r({4, 6}), {{"alpha", -3.0}}),
      unary("rsub_scalar", "2.0 - x", [](const auto& v) { return sub(2.0, v[0]); }, r({4, 6}), {{"alpha", 2.0}}),
      unary("rdiv_scalar", "3.0 / x", [](const auto& v) { return div(3.0, v[0]); }, r({4, 6}, 0.5, 2), {{"alpha", 3.0}}),
      unary("pow", "x ** 2.5", [](const auto& v) { return pow(v[0], 2.5); }, r({4, 6}, 0.5, 2), {{"alpha", 2.5}}),
      unary("neg", "-x", [](const auto& v) { return neg(v[0]); }, r({4, 6})),
      unary("exp", "torch.exp(x)", [](const auto& v) { return exp(v[0]); }, r({4, 6})),
      unary("log", "torch.log(x)", [](const auto& v) { return log(v[0]); }, r({4, 6}, 0.5, 2)),
      unary("sqrt", "torch.sqrt(x)", [](const auto& v) { return sqrt(v[0]); }, r({4, 6}, 0.5, 2)),
      unary("abs", "torch.abs(x)", [](const auto& v) { return abs(v[0]); }, r({4, 6})),
      {"sign", {"torch.sign(x)", {{"x", r({4, 6})}}, [](const auto& v) { return sign(v[0]); }, {}}},
      {"sum_to", {"x.sum(dim=(0, 2), keepdim=True).sum(dim=0)", {{"x", r({3, 5, 4, 2})}},
                  [](const auto& v) { return sum_to(v[0], {5, 1, 2}); }, {"x"}},
       "", {{"shape", std::vector<int64_t>{5, 1, 2}}}},
  };
  // Comparisons, with ties so that equality is exercised.
  const Tensor ta = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor tb = Tensor::from_vector<float>({1, 3, 2}, {3});
  const std::pair<const char*, const char*> cmp[] = {{"eq", "a == b"}, {"ne", "a != b"}, {"lt", "a < b"},
                                                     {"le", "a <= b"}, {"gt", "a > b"}, {"ge", "a >= b"}};
  for (const auto& [op, expr] : cmp) {
    std::string name = op;
    cases.push_back({op, {expr, {{"a", ta}, {"b", tb}},
                          [name](const auto& v) { return op::call1(op::find(name), {v[0], v[1]}); }, {}}});
  }
  return cases;
}

std::vector<OpCase> tensor_cases() {
  Generator gen(12);
  const Tensor x = random_tensor({3, 4}, DType::f32, gen);
  const Tensor y = random_tensor({3, 4}, DType::f32, gen);
  return {
      {"cast", {"x.double()", {{"x", x}}, [](const auto& v) { return cast(v[0], DType::f64); }, {"x"}},
       "", {{"dtype", static_cast<int64_t>(DType::f64)}}},
      {"clone", {"x.clone()", {{"x", x}}, [](const auto& v) { return clone(v[0]); }, {"x"}}},
      {"copy_", {"a.clone().copy_(b)", {{"a", x}, {"b", y}}, [](const auto& v) {
         Tensor dst = v[0].clone();
         copy_(dst, v[1]);
         return dst;
       }, {}}},
      {"accumulate_", {"a + b", {{"a", x}, {"b", y}}, [](const auto& v) {
         Tensor dst = v[0].clone();
         accumulate_(dst, v[1]);
         return dst;
       }, {}}},
  };
}

}  // namespace braid::testing
