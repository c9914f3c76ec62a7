// Server-side updaters against braid's own optimizers (themselves tested
// against PyTorch): the same gradients must give the same weights.
#include <gtest/gtest.h>

#include "braid/optim/adagrad.h"
#include "braid/optim/adam.h"
#include "braid/optim/sgd.h"
#include "braid/ps/config.h"
#include "braid/ps/updater.h"

namespace braid::ps {
namespace {

std::vector<float> grad_at(int step, size_t n) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(0.7f * static_cast<float>(step) + static_cast<float>(i));
  return g;
}

void expect_same_trajectory(const UpdaterOptions& uo, optim::Optimizer& opt, Tensor& p) {
  const size_t n = 5;
  auto u = make_updater(uo);
  std::vector<float> w(p.to_vector<float>()), state(n * static_cast<size_t>(u->state_per_weight()));
  for (int step = 1; step <= 6; ++step) {
    const auto g = grad_at(step, n);
    u->apply(w, g, state, 0.05, step);
    p.set_grad(Tensor::from_vector(g, {static_cast<int64_t>(n)}));
    opt.step();
  }
  const auto ref = p.to_vector<float>();
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(w[i], ref[i], 1e-5) << uo.name << " weight " << i;
}

Tensor start() { return Tensor::from_vector(std::vector<float>{0.5f, -1.0f, 2.0f, 0.0f, 0.25f}, {5}); }

TEST(Updater, AsynchronousServersOffsetTheMomentumTheirStalenessAdds) {
  PsConfig c;
  c.updater = {.name = "momentum", .momentum = 0.9};
  c.consistency = Consistency::asp;
  // 4 updates a round, each with 1 / (1 - mu') of long-run gain: 4 / 0.4 = 1 / 0.1.
  EXPECT_NEAR(server_momentum(c, 4), 0.6, 1e-12);
  EXPECT_NEAR(4 / (1 - server_momentum(c, 4)), 1 / (1 - 0.9), 1e-9);
  EXPECT_DOUBLE_EQ(server_momentum(c, 1), 0.9);   // one worker is synchronous
  EXPECT_DOUBLE_EQ(server_momentum(c, 20), 0.0);  // never below 0
  c.consistency = Consistency::ssp;
  EXPECT_NEAR(server_momentum(c, 4), 0.6, 1e-12);
  c.consistency = Consistency::softsync;
  c.softsync_n = 2;
  EXPECT_NEAR(server_momentum(c, 4), 0.8, 1e-12);  // 2 updates a round, of 2 gradients each
  c.consistency = Consistency::bsp;
  EXPECT_DOUBLE_EQ(server_momentum(c, 4), 0.9);
  c.consistency = Consistency::asp;
  c.updater.offset_async = false;  // ps.async_momentum = as_set
  EXPECT_DOUBLE_EQ(server_momentum(c, 4), 0.9);
  EXPECT_FALSE(PsConfig::from_json(c.to_json()).updater.offset_async) << "travels in the hello";
  c.updater = {.name = "adam", .momentum = 0.9};
  EXPECT_DOUBLE_EQ(server_momentum(c, 4), 0.9) << "only the momentum updater";
}

TEST(Updater, SgdAndMomentumMatchOptimSgd) {
  Tensor p = start();
  optim::SGD sgd({p}, {.lr = 0.05, .weight_decay = 0.01});
  expect_same_trajectory({.name = "sgd", .weight_decay = 0.01}, sgd, p);
  Tensor q = start();
  optim::SGD mom({q}, {.lr = 0.05, .momentum = 0.9});
  expect_same_trajectory({.name = "momentum", .momentum = 0.9}, mom, q);
}

TEST(Updater, AdaGradMatchesOptimAdaGrad) {
  Tensor p = start();
  optim::AdaGrad opt({p}, {.lr = 0.05});
  expect_same_trajectory({.name = "adagrad"}, opt, p);
}

TEST(Updater, AdamMatchesOptimAdam) {
  Tensor p = start();
  optim::Adam opt({p}, {.lr = 0.05});
  expect_same_trajectory({.name = "adam"}, opt, p);
}

TEST(Updater, UnknownNameIsAConfigError) {
  EXPECT_THROW(make_updater({.name = "lbfgs"}), ConfigError);
}

}  // namespace
}  // namespace braid::ps
