// Activations, clamp, where, masked_fill: gradients by finite differences and
// values/gradients against PyTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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

TEST(Activation, SmallValues) {
  Tensor x = Tensor::from_vector<double>({-2, -0.5, 0, 0.5, 2}, {5});
  EXPECT_EQ(relu(x).to_vector<double>(), (std::vector<double>{0, 0, 0, 0.5, 2}));
  EXPECT_EQ(clamp(x, -1.0, 1.0).to_vector<double>(), (std::vector<double>{-1, -0.5, 0, 0.5, 1}));
  EXPECT_EQ(clamp(x, std::nullopt, 0.0).to_vector<double>(), (std::vector<double>{-2, -0.5, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(sigmoid(x).to_vector<double>()[2], 0.5);
  EXPECT_NEAR(gelu(x).to_vector<double>()[4], 1.9544997361036416, 1e-12);  // 2 * Phi(2)
  EXPECT_NEAR(gelu(x, GeluApproximation::tanh).to_vector<double>()[4], 1.9545976940877752, 1e-12);
  Tensor m = Tensor::from_vector<bool>({true, false, false, false, true}, {5});
  EXPECT_EQ(masked_fill(x, m, 7).to_vector<double>(), (std::vector<double>{7, -0.5, 0, 0.5, 7}));
  EXPECT_EQ(where(m, x, -x).to_vector<double>(), (std::vector<double>{-2, 0.5, 0, -0.5, 2}));
}

TEST(Activation, VectorisedFloatGeluMatchesDoubleAcrossTheRange) {
  // f32 GELU uses polynomial kernels (braid/tensor/cpu/vmath.cc); f64 uses
  // libm. Compare values and gradients, including the far negative tail where
  // the result is tiny and only a relative bound is meaningful.
  std::vector<double> xs;
  for (double v = -14; v <= 14; v += 0.00731) xs.push_back(v);
  const auto n = static_cast<int64_t>(xs.size());
  for (GeluApproximation mode : {GeluApproximation::none, GeluApproximation::tanh}) {
    Tensor x64 = Tensor::from_vector(xs, {n});
    Tensor x32 = leaf(x64.to(DType::f32));
    x64 = leaf(x64.to(DType::f32).to(DType::f64));  // the same inputs, exactly
    Tensor y32 = gelu(x32, mode), y64 = gelu(x64, mode);
    backward(y32, Tensor::ones({n}));
    backward(y64, Tensor::ones({n}, DType::f64));
    const auto v32 = y32.to_vector<double>(), v64 = y64.to_vector<double>();
    const auto g32 = x32.grad().to_vector<double>(), g64 = x64.grad().to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      const double x = xs[i];
      const double tol = std::max(4e-7 * std::max(1.0, std::abs(x)), 2e-5 * std::abs(v64[i]));
      ASSERT_NEAR(v32[i], v64[i], tol) << "gelu x=" << x << " mode " << static_cast<int>(mode);
      ASSERT_NEAR(g32[i], g64[i], std::max(1e-6, 2e-5 * std::abs(g64[i]))) << "gelu grad x=" << x;
    }
  }
}

TEST(Activation, Gradcheck) {
  Generator gen(1);
  // Values away from relu's and clamp's kinks, where finite differences break.
  Tensor x = random_tensor({4, 6}, DType::f64, gen, -2, 2);
  for (double& v : std::span(x.data<double>(), 24)) {
    if (std::abs(v) < 0.05) v += 0.2;
    if (std::abs(std::abs(v) - 0.5) < 0.05) v += 0.2;
  }
  x = leaf(x);
  Tensor s = leaf(strided_copy(random_tensor({3, 5}, DType::f64, gen, -2, 2)));
  expect_gradcheck([](const auto& in) { return relu(in[0]); }, {x}, "relu");
  expect_gradcheck([](const auto& in) { return gelu(in[0]); }, {x}, "gelu erf");
  expect_gradcheck([](const auto& in) { return gelu(in[0], GeluApproximation::tanh); }, {x}, "gelu tanh");
  expect_gradcheck([](const auto& in) { return tanh(in[0]); }, {s}, "tanh");
  expect_gradcheck([](const auto& in) { return sigmoid(in[0]); }, {s}, "sigmoid");
  expect_gradcheck([](const auto& in) { return clamp(in[0], -0.5, 0.5); }, {x}, "clamp");
  Tensor b = leaf(random_tensor({6}, DType::f64, gen));
  Tensor cond = gt(random_tensor({4, 1}, DType::f64, gen), 0.0);
  expect_gradcheck([cond](const auto& in) { return where(cond, in[0], in[1]); }, {x, b}, "where");
  expect_gradcheck([cond](const auto& in) { return masked_fill(in[0], cond, 3.0); }, {x}, "masked_fill");
}

TEST(Activation, MatchesTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(2);
  Tensor x = random_tensor({5, 7}, DType::f32, gen, -3, 3);
  Tensor s = strided_copy(random_tensor({4, 3, 6}, DType::f32, gen, -3, 3));
  std::vector<OpCheck> checks;
  for (const Tensor& t : {x, s}) {
    const std::vector<std::pair<std::string, Fn>> ops = {
        {"F.relu(x)", [](const auto& in) { return relu(in[0]); }},
        {"F.gelu(x)", [](const auto& in) { return gelu(in[0]); }},
        {"F.gelu(x, approximate='tanh')", [](const auto& in) { return gelu(in[0], GeluApproximation::tanh); }},
        {"torch.tanh(x)", [](const auto& in) { return tanh(in[0]); }},
        {"torch.sigmoid(x)", [](const auto& in) { return sigmoid(in[0]); }},
        {"x.clamp(-1, 0.5)", [](const auto& in) { return clamp(in[0], -1.0, 0.5); }},
        {"x.clamp(min=0.25)", [](const auto& in) { return clamp(in[0], 0.25, std::nullopt); }},
    };
    for (const auto& [expr, fn] : ops) checks.push_back({expr, {{"x", t}}, fn, {"x"}});
  }
  Tensor a = random_tensor({3, 4, 5}, DType::f32, gen);
  Tensor b = random_tensor({4, 1}, DType::f32, gen);
  Tensor c = gt(random_tensor({5}, DType::f32, gen), 0.0);
  checks.push_back({"torch.where(c, a, b)", {{"c", c}, {"a", a}, {"b", b}},
                    [](const auto& in) { return where(in[0], in[1], in[2]); }, {"a", "b"}});
  Tensor m = gt(random_tensor({4, 1}, DType::f32, gen), 0.0);
  checks.push_back({"a.masked_fill(m, -2.5)", {{"a", strided_copy(a)}, {"m", m}},
                    [](const auto& in) { return masked_fill(in[0], in[1], -2.5); }, {"a"}});
  expect_matches_torch(checks);
}

}  // namespace
}  // namespace braid
