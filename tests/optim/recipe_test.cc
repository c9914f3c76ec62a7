// The language-model recipe's optimizer parts: weight decay for the matrices
// only (a decay mask), and cosine decay with warmup and a floor, against
// nanoGPT's get_lr.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <numbers>

#include "braid/base/rng.h"
#include "braid/optim/adagrad.h"
#include "braid/optim/adam.h"
#include "braid/optim/lamb.h"
#include "braid/optim/lars.h"
#include "braid/optim/rmsprop.h"
#include "braid/optim/schedule.h"
#include "braid/optim/sgd.h"

namespace braid::optim {
namespace {

using Make = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>, double weight_decay)>;

struct Kind {
  const char* name;
  Make make;
};

std::vector<Kind> kinds() {
  return {
      {"sgd", [](auto p, double wd) { return std::make_unique<SGD>(p, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = wd}); }},
      {"adam", [](auto p, double wd) { return std::make_unique<Adam>(p, AdamOptions{.lr = 0.01, .weight_decay = wd}); }},
      {"adamw", [](auto p, double wd) { return std::make_unique<AdamW>(p, AdamWOptions{.lr = 0.01, .weight_decay = wd}); }},
      {"adagrad", [](auto p, double wd) { return std::make_unique<AdaGrad>(p, AdaGradOptions{.lr = 0.1, .weight_decay = wd}); }},
      {"rmsprop", [](auto p, double wd) { return std::make_unique<RMSProp>(p, RMSPropOptions{.lr = 0.01, .weight_decay = wd}); }},
      {"lars", [](auto p, double wd) { return std::make_unique<LARS>(p, LARSOptions{.lr = 0.1, .weight_decay = wd}); }},
      {"lamb", [](auto p, double wd) { return std::make_unique<LAMB>(p, LAMBOptions{.lr = 0.01, .weight_decay = wd}); }},
  };
}

// A weight [5, 3] and a bias [3] with fixed values, and step s's gradients.
std::vector<Tensor> fresh() {
  Generator g(3);
  std::vector<float> w(15), b(3);
  for (float& v : w) v = static_cast<float>(g.normal());
  for (float& v : b) v = static_cast<float>(g.normal()) + 1.0f;  // away from 0: decay shows
  return {Tensor::from_vector(w, {5, 3}), Tensor::from_vector(b, {3})};
}

void set_grads(const std::vector<Tensor>& params, int step) {
  Generator g(100 + static_cast<uint64_t>(step));
  for (const Tensor& p : params) {
    std::vector<float> v(static_cast<size_t>(p.numel()));
    for (float& x : v) x = static_cast<float>(g.normal()) * 0.1f;
    p.set_grad(Tensor::from_vector(v, p.shape()));
  }
}

TEST(DecayMask, MatricesDecayVectorsDoNot) {
  // Masked: the weight moves as under decay, the bias as without it; the
  // per-tensor figures (LARS's and LAMB's trust ratios) are per parameter,
  // so two optimizers over one parameter each are the reference.
  for (const Kind& k : kinds()) {
    SCOPED_TRACE(k.name);
    const std::vector<Tensor> masked = fresh(), decayed = fresh(), plain = fresh(), unmasked = fresh();
    auto a = k.make(masked, 0.1);
    a->set_decay_mask(matrix_decay_mask(masked));
    auto w_ref = k.make({decayed[0]}, 0.1);
    auto b_ref = k.make({plain[1]}, 0.0);
    auto all = k.make(unmasked, 0.1);
    for (int s = 0; s < 5; ++s) {
      set_grads(masked, s), set_grads(decayed, s), set_grads(plain, s), set_grads(unmasked, s);
      a->step(), w_ref->step(), b_ref->step(), all->step();
    }
    const auto w = masked[0].to_vector<float>(), b = masked[1].to_vector<float>();
    const auto w_want = decayed[0].to_vector<float>(), b_want = plain[1].to_vector<float>();
    for (size_t i = 0; i < w.size(); ++i) EXPECT_FLOAT_EQ(w[i], w_want[i]) << "weight " << i;
    for (size_t i = 0; i < b.size(); ++i) EXPECT_FLOAT_EQ(b[i], b_want[i]) << "bias " << i;
    // Without the mask the bias decays too, and ends elsewhere.
    const auto b_all = unmasked[1].to_vector<float>();
    double diff = 0;
    for (size_t i = 0; i < b.size(); ++i) diff += std::abs(b_all[i] - b[i]);
    EXPECT_GT(diff, 1e-5);
  }
}

TEST(DecayMask, ByNumberOfDimensions) {
  const std::vector<Tensor> p = {Tensor::zeros({4, 3}), Tensor::zeros({3}), Tensor::zeros({}),
                                 Tensor::zeros({8, 3, 3, 3}), Tensor::zeros({100, 16})};
  EXPECT_EQ(matrix_decay_mask(p), (std::vector<bool>{true, false, false, true, true}));
  // A flat slice is judged by its whole parameter's dimensions.
  EXPECT_EQ(matrix_decay_mask(std::vector<int64_t>{2, 1, 4}), (std::vector<bool>{true, false, true}));
  SGD sgd(fresh(), {.lr = 0.1, .weight_decay = 0.1});
  EXPECT_THROW(sgd.set_decay_mask({true}), ValueError);
  sgd.set_decay_mask({});  // back to every parameter
  EXPECT_TRUE(sgd.decay_mask().empty());
}

// nanoGPT's train.py get_lr for `it` at or after the warmup (its warmup
// ramps as (it + 1) / (warmup + 1); braid's as it / warmup, from 0).
double nanogpt_lr(int64_t it, double lr, double min_lr, int64_t warmup, int64_t decay_iters) {
  if (it > decay_iters) return min_lr;
  const double ratio = static_cast<double>(it - warmup) / static_cast<double>(decay_iters - warmup);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return min_lr + coeff * (lr - min_lr);
}

TEST(CosineSchedule, WarmupThenDecayToTheFloor) {
  const double lr = 6e-4, min_lr = 6e-5;
  const int64_t warmup = 20, decay = 200;
  auto s = make_schedule({.name = "cosine", .base_lr = lr, .total_steps = decay, .min_lr = min_lr,
                          .warmup_steps = warmup});
  EXPECT_DOUBLE_EQ(s->lr_at(0), 0.0);
  EXPECT_NEAR(s->lr_at(10), lr / 2, 1e-15);
  for (int64_t it = warmup; it <= decay + 50; ++it) {
    EXPECT_NEAR(s->lr_at(it), nanogpt_lr(it, lr, min_lr, warmup, decay), 1e-15) << "step " << it;
  }
  EXPECT_NEAR(s->lr_at(warmup), lr, 1e-15);
  EXPECT_NEAR(s->lr_at((warmup + decay) / 2), (lr + min_lr) / 2, 1e-15);
  EXPECT_NEAR(s->lr_at(decay), min_lr, 1e-15);
  EXPECT_NEAR(s->lr_at(10 * decay), min_lr, 1e-15);
}

}  // namespace
}  // namespace braid::optim
