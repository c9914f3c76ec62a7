// Activations beyond the op table (cases_activation.cc): GELU in f64 against
// closed forms, and the vectorised f32 GELU kernels against the f64 ones
// across the whole range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "braid/autograd/engine.h"
#include "braid/ops/activation.h"
#include "gradcheck_util.h"

namespace braid {
namespace {

using testing::leaf;

// f64 GELU to 1e-12 of closed forms (the table checks f32 against PyTorch).
TEST(Activation, GeluInF64MatchesClosedForms) {
  const Tensor x = Tensor::from_vector<double>({-2, 0, 2}, {3});
  EXPECT_NEAR(gelu(x).to_vector<double>()[2], 1.9544997361036416, 1e-12);  // 2 * Phi(2)
  EXPECT_NEAR(gelu(x, GeluApproximation::tanh).to_vector<double>()[2], 1.9545976940877752, 1e-12);
  EXPECT_EQ(gelu(x).to_vector<double>()[1], 0.0);
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

}  // namespace
}  // namespace braid
