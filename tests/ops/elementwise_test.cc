// Elementwise ops: finite-difference gradients in f64, values and gradients
// against PyTorch on broadcast and strided inputs, and the oracle itself.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "braid/autograd/engine.h"
#include "braid/autograd/gradcheck.h"
#include "braid/ops/activation.h"
#include "braid/ops/elementwise.h"
#include "gradcheck_util.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::expect_matches_torch;
using testing::OpCheck;
using testing::random_tensor;
using testing::strided_copy;
using testing::Fn;
using testing::leaf;
using testing::expect_gradcheck;

TEST(TorchOracle, RoundTripsValuesDtypesAndGradients) {
  BRAID_REQUIRE_TORCH();
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor i = Tensor::from_vector<int64_t>({7, -8}, {2});
  Tensor r = Tensor::from_vector<float>({1, 0, 2, 0, 0, 3}, {2, 3});
  auto res = testing::torch_eval("(a * a, i + 1, a > 3)", {{"a", a}, {"i", i}}, {.grad = {"a"}, .grad_output = r});
  ASSERT_EQ(res.outputs.size(), 3u);
  EXPECT_EQ(res.outputs[0].to_vector<float>(), (std::vector<float>{1, 4, 9, 16, 25, 36}));
  EXPECT_EQ(res.outputs[1].dtype(), DType::i64);
  EXPECT_EQ(res.outputs[1].to_vector<int64_t>(), (std::vector<int64_t>{8, -7}));
  EXPECT_EQ(res.outputs[2].dtype(), DType::b8);
  EXPECT_EQ(res.outputs[2].to_vector<int>(), (std::vector<int>{0, 0, 0, 1, 1, 1}));
  // d/da sum(a^2 * r) = 2 a r
  EXPECT_EQ(res.grads.at("a").to_vector<float>(), (std::vector<float>{2, 0, 12, 0, 0, 36}));
  EXPECT_THROW(testing::torch_eval("undefined_name + 1", {}), ValueError);
}

TEST(TorchOracle, StridedCopyKeepsValuesInANonContiguousView) {
  Generator gen(3);
  Tensor t = random_tensor({3, 4, 5}, DType::f32, gen);
  Tensor s = strided_copy(t);
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(s.to_vector<float>(), t.to_vector<float>());
}

TEST(Elementwise, ArithmeticAndOperatorsOnSmallValues) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector<float>({10, 20, 30}, {3});
  EXPECT_EQ((a + b).to_vector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ((a - 1.0).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ((10.0 - a).to_vector<float>(), (std::vector<float>{9, 8, 7, 6, 5, 4}));
  EXPECT_EQ((a * 2.0).to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ((12.0 / a).to_vector<float>(), (std::vector<float>{12, 6, 4, 3, 2.4f, 2}));
  EXPECT_EQ((-a).to_vector<float>(), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  Tensor i = Tensor::from_vector<int64_t>({1, -2}, {2});
  EXPECT_EQ((i + i).to_vector<int64_t>(), (std::vector<int64_t>{2, -4}));
  EXPECT_EQ(abs(i).to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  // Integers against a fractional scalar compare exactly, not against a truncated scalar.
  Tensor z = Tensor::from_vector<int64_t>({-1, 0, 1}, {3});
  EXPECT_EQ(lt(z, 0.5).to_vector<int>(), (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(gt(z, -0.5).to_vector<int>(), (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(eq(z, 0.5).to_vector<int>(), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(ge(z, 1.0).to_vector<int>(), (std::vector<int>{0, 0, 1}));
  EXPECT_THROW(div(z, 2.0), ValueError);
}

TEST(Elementwise, ComparisonsReturnBoolAndRecordNothing) {
  Tensor a = leaf(Tensor::from_vector<double>({1, 2, 3}, {3}));
  Tensor b = Tensor::from_vector<double>({3, 2, 1}, {3});
  Tensor c = lt(a, b);
  EXPECT_EQ(c.dtype(), DType::b8);
  EXPECT_FALSE(c.requires_grad());
  EXPECT_EQ(c.to_vector<int>(), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(eq(a, b).to_vector<int>(), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(ge(a, 2.0).to_vector<int>(), (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(ne(a, 2.0).to_vector<int>(), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(gt(b, a).to_vector<int>(), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(le(b, 2.0).to_vector<int>(), (std::vector<int>{0, 1, 1}));
}

TEST(Elementwise, GradcheckBinaryWithBroadcasting) {
  Generator gen(1);
  Tensor a = leaf(random_tensor({2, 3, 4}, DType::f64, gen));
  Tensor b = leaf(random_tensor({3, 1}, DType::f64, gen, 0.5, 2.0));  // kept away from 0 for div
  expect_gradcheck([](const auto& in) { return in[0] + in[1]; }, {a, b}, "add");
  expect_gradcheck([](const auto& in) { return in[0] - in[1]; }, {a, b}, "sub");
  expect_gradcheck([](const auto& in) { return in[0] * in[1]; }, {a, b}, "mul");
  expect_gradcheck([](const auto& in) { return in[0] / in[1]; }, {a, b}, "div");
  expect_gradcheck([](const auto& in) { return maximum(in[0], in[1]); }, {a, b}, "maximum");
  expect_gradcheck([](const auto& in) { return minimum(in[0], in[1]); }, {a, b}, "minimum");
  expect_gradcheck([](const auto& in) { return 3.0 - in[0] * 2.0 + 1.0; }, {a}, "scalar ops");
  expect_gradcheck([](const auto& in) { return 2.0 / in[0] - in[0] / 4.0; }, {b}, "scalar div");
  // Non-contiguous operand.
  Tensor s = leaf(strided_copy(random_tensor({4, 3}, DType::f64, gen)));
  expect_gradcheck([](const auto& in) { return in[0] * in[1]; }, {s, leaf(random_tensor({3}, DType::f64, gen))},
                   "mul strided");
}

TEST(Elementwise, GradcheckUnary) {
  Generator gen(2);
  Tensor x = leaf(random_tensor({3, 5}, DType::f64, gen));
  Tensor p = leaf(random_tensor({3, 5}, DType::f64, gen, 0.2, 2.0));
  expect_gradcheck([](const auto& in) { return neg(in[0]); }, {x}, "neg");
  expect_gradcheck([](const auto& in) { return exp(in[0]); }, {x}, "exp");
  expect_gradcheck([](const auto& in) { return log(in[0]); }, {p}, "log");
  expect_gradcheck([](const auto& in) { return sqrt(in[0]); }, {p}, "sqrt");
  expect_gradcheck([](const auto& in) { return abs(in[0]); }, {x}, "abs");
  expect_gradcheck([](const auto& in) { return pow(in[0], 3.0); }, {x}, "pow 3");
  expect_gradcheck([](const auto& in) { return pow(in[0], 2.0); }, {x}, "pow 2");
  expect_gradcheck([](const auto& in) { return pow(in[0], -1.5); }, {p}, "pow -1.5");
}

TEST(Elementwise, MaximumSplitsTheGradientOnTies) {
  Tensor a = leaf(Tensor::from_vector<double>({1, 2, 3}, {3}));
  Tensor b = leaf(Tensor::from_vector<double>({3, 2, 1}, {3}));
  backward(maximum(a, b), Tensor::ones({3}, DType::f64));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1, 0.5, 0}));
}

TEST(Elementwise, VectorisedFloatExpTanhSigmoidAreAccurate) {
  // f32 uses branch-free polynomial kernels (braid/tensor/cpu/vmath.h); compare
  // with libm in f64 over a sweep that crosses every branch and both limits.
  std::vector<float> xs;
  for (float v = -100; v <= 100; v += 0.0137f) xs.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-8f, 0.6249f, 0.6251f, 88.5f, 88.8f, -87.4f, -103.0f}) xs.push_back(v);
  const auto n = static_cast<int64_t>(xs.size());
  Tensor x = Tensor::from_vector(xs, {n});
  const auto e = exp(x).to_vector<float>(), t = tanh(x).to_vector<float>(), s = sigmoid(x).to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    const double v = xs[i];
    const double re = std::exp(v), rt = std::tanh(v), rs = 1 / (1 + std::exp(-v));
    if (re < 1.2e-38) {
      EXPECT_LE(e[i], 1.2e-38) << v;  // flushed below the normal range
    } else if (re > 3.4028234e38) {
      EXPECT_TRUE(std::isinf(e[i])) << v;
    } else {
      EXPECT_NEAR(e[i], re, 4e-7 * re) << "exp " << v;
    }
    EXPECT_NEAR(t[i], rt, 4e-7 * std::abs(rt) + 1e-45) << "tanh " << v;
    EXPECT_NEAR(s[i], rs, 4e-7 * rs + 1e-38) << "sigmoid " << v;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Tensor special = Tensor::from_vector<float>({nan, inf, -inf}, {3});
  const auto se = exp(special).to_vector<float>(), st = tanh(special).to_vector<float>();
  EXPECT_TRUE(std::isnan(se[0]) && std::isnan(st[0]));
  EXPECT_EQ(se[1], inf);
  EXPECT_EQ(se[2], 0);
  EXPECT_EQ(st[1], 1);
  EXPECT_EQ(st[2], -1);
}

TEST(Elementwise, MatchesTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(5);
  std::vector<OpCheck> checks;
  // (shape a, shape b) pairs: equal, broadcast both ways, scalar-like, 0-d.
  const std::vector<std::pair<Shape, Shape>> pairs = {
      {{4, 5}, {4, 5}}, {{2, 3, 4}, {4}}, {{3, 1}, {1, 6}}, {{1}, {2, 3}}, {{}, {3, 2}}, {{5, 1, 3}, {4, 1}}};
  const std::vector<std::pair<std::string, Fn>> binary = {
      {"a + b", [](const auto& in) { return in[0] + in[1]; }},
      {"a - b", [](const auto& in) { return in[0] - in[1]; }},
      {"a * b", [](const auto& in) { return in[0] * in[1]; }},
      {"a / b", [](const auto& in) { return in[0] / in[1]; }},
      {"torch.maximum(a, b)", [](const auto& in) { return maximum(in[0], in[1]); }},
      {"torch.minimum(a, b)", [](const auto& in) { return minimum(in[0], in[1]); }},
  };
  for (size_t k = 0; k < pairs.size(); ++k) {
    const auto& [sa, sb] = pairs[k];
    Tensor a = random_tensor(sa, DType::f32, gen);
    Tensor b = random_tensor(sb, DType::f32, gen, 0.5, 2.0);
    if (k % 2 == 1 && a.ndim() >= 1) a = strided_copy(a);  // every other pair: a strided view
    for (const auto& [expr, fn] : binary) checks.push_back({expr, {{"a", a}, {"b", b}}, fn, {"a", "b"}});
  }
  Tensor x = strided_copy(random_tensor({3, 4, 5}, DType::f32, gen));
  Tensor p = random_tensor({6, 7}, DType::f32, gen, 0.1, 3.0);
  const std::vector<std::tuple<std::string, Tensor, Fn>> unary = {
      {"-x", x, [](const auto& in) { return -in[0]; }},
      {"torch.exp(x)", x, [](const auto& in) { return exp(in[0]); }},
      {"torch.log(x)", p, [](const auto& in) { return log(in[0]); }},
      {"torch.sqrt(x)", p, [](const auto& in) { return sqrt(in[0]); }},
      {"torch.abs(x)", x, [](const auto& in) { return abs(in[0]); }},
      {"x ** 3", x, [](const auto& in) { return pow(in[0], 3.0); }},
      {"x ** -0.5", p, [](const auto& in) { return pow(in[0], -0.5); }},
      {"2.5 - x * 3 + 1", x, [](const auto& in) { return 2.5 - in[0] * 3.0 + 1.0; }},
      {"2.0 / x - x / 4", p, [](const auto& in) { return 2.0 / in[0] - in[0] / 4.0; }},
  };
  for (const auto& [expr, t, fn] : unary) checks.push_back({expr, {{"x", t}}, fn, {"x"}});
  // Comparisons (bool results; no gradients).
  Tensor c = random_tensor({3, 4}, DType::f32, gen, -2, 2).to(DType::i64).to(DType::f32);  // ties likely
  Tensor d = random_tensor({4}, DType::f32, gen, -2, 2).to(DType::i64).to(DType::f32);
  const std::vector<std::pair<std::string, Fn>> compare = {
      {"a == b", [](const auto& in) { return eq(in[0], in[1]); }},
      {"a != b", [](const auto& in) { return ne(in[0], in[1]); }},
      {"a < b", [](const auto& in) { return lt(in[0], in[1]); }},
      {"a <= b", [](const auto& in) { return le(in[0], in[1]); }},
      {"a > b", [](const auto& in) { return gt(in[0], in[1]); }},
      {"a >= b", [](const auto& in) { return ge(in[0], in[1]); }},
      {"a > 0.5", [](const auto& in) { return gt(in[0], 0.5); }},
  };
  for (const auto& [expr, fn] : compare) checks.push_back({expr, {{"a", c}, {"b", d}}, fn, {}});
  expect_matches_torch(checks);
}

}  // namespace
}  // namespace braid
