// dropout: the keep rate, scaling, reproducibility from the generator state,
// gradient through the same mask, identity in eval.
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/dropout.h"

namespace braid {
namespace {

TEST(Dropout, KeepsAboutOneMinusPAndScalesSurvivors) {
  Generator gen(7);
  Tensor x = Tensor::ones({100000});
  Tensor y = dropout(x, {.p = 0.3, .generator = &gen});
  int64_t kept = 0;
  for (float v : y.to_vector<float>()) {
    if (v != 0) {
      ++kept;
      EXPECT_FLOAT_EQ(v, 1 / 0.7f);
    }
  }
  // Binomial(1e5, 0.7): sd = 145, so 5 sd is 725.
  EXPECT_NEAR(static_cast<double>(kept), 70000, 725);
  EXPECT_EQ(gen.state().offset, 100000u);
}

TEST(Dropout, SameStateSameMaskOnAnyThreadCount) {
  Tensor x = Tensor::ones({70001});
  Generator a(3, 1), b(3, 1);
  const int threads = num_threads();
  set_num_threads(1);
  Tensor ya = dropout(x, {.p = 0.5, .generator = &a});
  set_num_threads(std::max(2, threads));
  Tensor yb = dropout(x, {.p = 0.5, .generator = &b});
  set_num_threads(threads);
  EXPECT_EQ(ya.to_vector<float>(), yb.to_vector<float>());
  // The mask follows the generator's stream: element i uses its word i.
  Generator c(3, 1);
  std::vector<float> v = ya.to_vector<float>();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(v[i] != 0, c.uniform() >= 0.5f) << i;
  // A second call draws new words.
  EXPECT_NE(dropout(x, {.p = 0.5, .generator = &a}).to_vector<float>(), v);
}

TEST(Dropout, GradientUsesTheSameMaskAndEvalIsIdentity) {
  Generator gen(1);
  Tensor x = Tensor::full({1000}, 2.0, DType::f64);
  x.set_requires_grad();
  Tensor y = dropout(x, {.p = 0.25, .generator = &gen});
  backward(y, Tensor::ones({1000}, DType::f64));
  std::vector<double> yv = y.to_vector<double>(), gv = x.grad().to_vector<double>();
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_DOUBLE_EQ(gv[i], yv[i] / 2);
  EXPECT_TRUE(dropout(x, {.p = 0.25, .training = false}).same(x));
  EXPECT_TRUE(dropout(x, {.p = 0}).same(x));
  EXPECT_THROW(dropout(x, {.p = 1.5}), ValueError);
  EXPECT_THROW(dropout(Tensor::zeros({3}, DType::i64), {.p = 0.5}), ValueError);
}

}  // namespace
}  // namespace braid
