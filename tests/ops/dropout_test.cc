// dropout: what the op table (cases_dropout.cc) cannot express — the keep
// rate, the scale, reproducibility from the generator state, a fresh mask per
// call of the op, identity in eval.
#include <gtest/gtest.h>

#include "braid/base/thread_pool.h"
#include "braid/ops/dropout.h"
#include "braid/ops/registry.h"

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

// A random op: the same call twice (as a replayed graph makes it) draws the
// next words of the generator, not the same mask.
TEST(Dropout, TheOpDrawsFromItsGeneratorOnEveryCall) {
  Generator gen(4, 2);
  const Tensor x = Tensor::ones({1000});
  const op::OpDef& d = op::find("dropout");
  EXPECT_EQ(d.effect, op::Effect::random);
  // The op as dropout() calls it, seen by a call observer.
  struct Seen : op::CallObserver {
    op::Attrs attrs;
    void on_call(const op::OpDef&, const op::Attrs& a, std::span<const Tensor>, std::span<const Tensor>) override {
      attrs = a;
    }
  } seen;
  Tensor first;
  {
    op::ObserveCalls scope(&seen);
    first = dropout(x, {.p = 0.5, .generator = &gen});
  }
  const Tensor second = op::call1(d, {x}, seen.attrs);
  EXPECT_EQ(gen.state().offset, 2000u);
  EXPECT_NE(first.to_vector<float>(), second.to_vector<float>());
  Generator again(4, 2);
  dropout(x, {.p = 0.5, .generator = &again});
  EXPECT_EQ(dropout(x, {.p = 0.5, .generator = &again}).to_vector<float>(), second.to_vector<float>());
  // An address dropout() was never given (as in a graph from another process).
  const op::Attrs stranger{{"p", 0.5}, {"generator", int64_t{8}}};
  EXPECT_THROW(op::call1(d, {x}, stranger), ValueError);
}

TEST(Dropout, EvalIsIdentityAndBadInputIsRefused) {
  Tensor x = Tensor::full({1000}, 2.0, DType::f64);
  EXPECT_TRUE(dropout(x, {.p = 0.25, .training = false}).same(x));
  EXPECT_TRUE(dropout(x, {.p = 0}).same(x));
  EXPECT_THROW(dropout(x, {.p = 1.5}), ValueError);
  EXPECT_THROW(dropout(Tensor::zeros({3}, DType::i64), {.p = 0.5}), ValueError);
}

}  // namespace
}  // namespace braid
