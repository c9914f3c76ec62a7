// Auxiliary-loss-free balancing of the mixture-of-experts router
// (MoeOptions::balance = bias, DeepSeek-V3): the bias picks the experts and
// never gates, the auxiliary loss is not trained, the update is
// sign(mean - load) x rate, and on a router skewed toward one expert it
// brings the busiest expert's load to the mean's neighbourhood.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/nn/attention.h"
#include "braid/nn/moe.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/ops/softmax.h"
#include "tests/ops/torch_oracle.h"

namespace braid::nn {
namespace {

double max_over_mean(const std::vector<int64_t>& load) {
  const double mean = static_cast<double>(std::accumulate(load.begin(), load.end(), int64_t{0})) /
                      static_cast<double>(load.size());
  return static_cast<double>(*std::max_element(load.begin(), load.end())) / mean;
}

TEST(MoEBalance, BiasChoosesAndTheProbabilityGates) {
  Generator gen(3);
  const int64_t n = 9, d = 4;
  MoE moe(d, 6, MlpKind::gelu, {.experts = 4, .top_k = 1, .balance = MoeBalance::bias, .bias_rate = 0.5}, gen);
  ASSERT_EQ(moe.balance_bias().shape(), (Shape{4}));
  // Every expert two steps below the mean load of expert 3's four steps up: 3 wins everywhere.
  for (int i = 0; i < 20; ++i) moe.update_balance_bias({1, 1, 1, 0});
  EXPECT_FLOAT_EQ(moe.balance_bias().data<float>()[3], 10.0f);
  EXPECT_FLOAT_EQ(moe.balance_bias().data<float>()[0], -10.0f);
  const Tensor x = testing::random_tensor({n, d}, DType::f32, gen);
  const Tensor y = moe.forward(x);
  EXPECT_EQ(moe.take_stats().tokens, (std::vector<int64_t>{0, 0, 0, n}));
  EXPECT_EQ(moe.take_step_load(), (std::vector<int64_t>{0, 0, 0, n}));
  EXPECT_EQ(moe.take_step_load(), (std::vector<int64_t>{0, 0, 0, 0}));
  // Top-1 keeps its probability as the gate: y = p_3(x) expert_3(x), the bias nowhere.
  autograd::NoGradGuard no_grad;
  const Tensor p3 = slice(softmax(moe.router()->forward(x), 1), 1, 3, 4);  // [N, 1]
  const Tensor want = mul(moe.experts()->forward(x, {0, 0, 0, n}), p3);
  EXPECT_TRUE(testing::all_close(y, want, 1e-5, 1e-6));
}

TEST(MoEBalance, UpdateIsSignOfMeanMinusLoad) {
  Generator gen(4);
  MoE moe(4, 6, MlpKind::gelu, {.experts = 4, .top_k = 2, .balance = MoeBalance::bias, .bias_rate = 0.25}, gen);
  moe.update_balance_bias({10, 2, 4, 4});  // mean 5
  const float* b = moe.balance_bias().data<float>();
  EXPECT_EQ((std::vector<float>(b, b + 4)), (std::vector<float>{-0.25f, 0.25f, 0.25f, 0.25f}));
  moe.update_balance_bias({5, 5, 5, 5});  // balanced: no move
  EXPECT_EQ((std::vector<float>(b, b + 4)), (std::vector<float>{-0.25f, 0.25f, 0.25f, 0.25f}));
  EXPECT_THROW(moe.update_balance_bias({1, 2, 3}), ValueError);
  // A buffer: checkpoints carry it.
  bool found = false;
  for (const auto& [name, t] : moe.state_dict()) found = found || name == "balance_bias";
  EXPECT_TRUE(found);
  EXPECT_THROW(MoE(4, 6, MlpKind::gelu, {.experts = 4, .balance = MoeBalance::bias, .bias_rate = 0}, gen), ValueError);
  MoE plain(4, 6, MlpKind::gelu, {.experts = 4}, gen);
  EXPECT_FALSE(plain.balance_bias().defined());
  EXPECT_THROW(plain.update_balance_bias({1, 1, 1, 1}), ValueError);
}

// The balance loss is reported but not trained: with z_loss = 0 and a zero
// output gradient, the router gets no gradient (it does under aux_loss).
TEST(MoEBalance, AuxiliaryLossIsNotTrained) {
  Generator gen(6);
  const Tensor x = testing::random_tensor({7, 4}, DType::f32, gen);
  auto router_grad = [&](MoeBalance balance) {
    Generator g(8);
    MoE moe(4, 6, MlpKind::gelu, {.experts = 3, .top_k = 2, .aux_loss = 1.0, .z_loss = 0, .balance = balance}, g);
    backward(sum(mul(moe.forward(x), 0.0)));
    const Tensor grad = moe.router()->weight().grad();
    const RouterStats s = moe.take_stats();
    EXPECT_GT(s.aux_loss, 0);
    return grad.defined() ? sum(abs(grad)).item() : 0.0;
  };
  EXPECT_GT(router_grad(MoeBalance::aux_loss), 0);
  EXPECT_EQ(router_grad(MoeBalance::bias), 0);
}

// A router whose logits favour expert 0 by 2 for every token sends it all
// first choices (max/mean 2 at top-2 of 4); the bias brings the busiest
// expert within 1.2 of the mean.
TEST(MoEBalance, BiasMovesTowardBalanceOnSkewedRouter) {
  Generator gen(9);
  const int64_t n = 64, d = 8, e = 4;
  MoE moe(d, 6, MlpKind::gelu, {.experts = e, .top_k = 2, .balance = MoeBalance::bias, .bias_rate = 0.01}, gen);
  Tensor x = testing::random_tensor({n, d}, DType::f32, gen);
  slice(x, 1, 0, 1).fill(1.0);
  slice(moe.router()->weight().detach(), 0, 0, 1).fill(0.0);
  moe.router()->weight().detach().data<float>()[0] = 2.0f;  // expert 0's logit: x_0 2 = 2
  autograd::NoGradGuard no_grad;
  moe.forward(x);
  std::vector<int64_t> load = moe.take_step_load();
  const double before = max_over_mean(load);
  EXPECT_GE(before, 1.9);
  double worst_late = 0;
  for (int step = 0; step < 200; ++step) {
    moe.update_balance_bias(load);
    moe.forward(x);
    load = moe.take_step_load();
    if (step >= 150) worst_late = std::max(worst_late, max_over_mean(load));
  }
  EXPECT_LT(worst_late, 1.2) << "from " << before;
  const float* b = moe.balance_bias().data<float>();
  EXPECT_LT(b[0], -0.2f);
  for (int64_t i = 1; i < e; ++i) EXPECT_LT(b[0], b[i]) << i;
}

}  // namespace
}  // namespace braid::nn
