// LossScaler (dynamic loss scaling, torch.cuda.amp.GradScaler's rule) on CPU
// f32 gradients: overflow skips the step and halves the scale, clean steps
// grow it after the interval, unscaled gradients equal the unscaled
// backward's, and the state survives a checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "braid/autograd/engine.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/optim/loss_scaler.h"
#include "braid/optim/sgd.h"

namespace braid::optim {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor param_with_grad(const std::vector<float>& grad) {
  Tensor p = Tensor::ones({static_cast<int64_t>(grad.size())}).set_requires_grad();
  p.set_grad(Tensor::from_vector(grad, {static_cast<int64_t>(grad.size())}));
  return p;
}

TEST(LossScaler, DefaultsArePyTorchs) {
  const LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  const nlohmann::json st = s.state_dict();
  EXPECT_EQ(st.at("growth_factor").get<double>(), 2.0);
  EXPECT_EQ(st.at("backoff_factor").get<double>(), 0.5);
  EXPECT_EQ(st.at("growth_interval").get<int64_t>(), 2000);
  EXPECT_EQ(st.at("growth_tracker").get<int64_t>(), 0);
}

TEST(LossScaler, OverflowSkipsTheStepAndHalvesTheScale) {
  for (float bad : {kInf, -kInf, kNaN}) {
    LossScaler scaler;
    const Tensor a = param_with_grad({1, 2, 3}), b = param_with_grad({4, bad});
    SGD sgd({a, b}, {.lr = 0.1});
    for (int i = 0; i < 5; ++i) scaler.update(false);  // some clean steps, reset below
    const bool found_inf = scaler.unscale_and_check({a, b});
    EXPECT_TRUE(found_inf) << bad;
    if (!found_inf) sgd.step();
    scaler.update(found_inf);
    EXPECT_EQ(scaler.scale(), 32768.0) << bad;
    EXPECT_EQ(scaler.growth_tracker(), 0) << bad;
    EXPECT_EQ(a.to_vector<float>(), std::vector<float>({1, 1, 1})) << bad << ": the step ran";
    EXPECT_EQ(b.to_vector<float>(), std::vector<float>({1, 1})) << bad << ": the step ran";
  }
}

TEST(LossScaler, GrowsAfterTheIntervalOfCleanSteps) {
  LossScaler scaler;  // interval 2000
  const Tensor a = param_with_grad({65536, -131072});
  for (int i = 0; i < 1999; ++i) scaler.update(false);
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_FALSE(scaler.unscale_and_check({a}));
  scaler.update(false);  // the 2000th
  EXPECT_EQ(scaler.scale(), 131072.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);

  // An overflow restarts the count.
  LossScaler small({.growth_interval = 3});
  small.update(false);
  small.update(false);
  small.update(true);
  EXPECT_EQ(small.scale(), 32768.0);
  small.update(false);
  small.update(false);
  EXPECT_EQ(small.scale(), 32768.0);
  small.update(false);
  EXPECT_EQ(small.scale(), 65536.0);
}

TEST(LossScaler, UnscaledGradientsEqualTheTrueOnes) {
  // loss = sum(w^2 * x) / 3 + mean(w): its gradient through autograd, once
  // plain and once scaled; the scale is a power of two, so unscaling is exact.
  const Tensor x = Tensor::from_vector<float>({0.5f, -1.25f, 3.0f, 1e-3f}, {4});
  auto grad_of = [&](LossScaler* scaler) {
    const Tensor w = Tensor::from_vector<float>({0.1f, 2.0f, -0.7f, 5.0f}, {4}).set_requires_grad();
    const Tensor loss = add(div(sum(mul(mul(w, w), x)), 3.0), mean(w));
    if (scaler == nullptr) {
      backward(loss);
    } else {
      backward(scaler->scale(loss));
      EXPECT_FALSE(scaler->unscale_and_check({w}));
    }
    return w.grad().to_vector<float>();
  };
  LossScaler scaler;
  const std::vector<float> want = grad_of(nullptr);
  EXPECT_EQ(grad_of(&scaler), want);
}

TEST(LossScaler, UnscalesGradientViewsInPlace) {
  // A data-parallel bucket: the gradients are views of one flat buffer,
  // which must see the unscaled values. Undefined gradients are skipped.
  const Tensor flat = Tensor::from_vector<float>({8, 16, -32, 64, 1024}, {5});
  const Tensor a = Tensor::zeros({2}).set_requires_grad(), b = Tensor::zeros({3}).set_requires_grad();
  const Tensor unused = Tensor::zeros({7}).set_requires_grad();
  a.set_grad(flat.as_strided({2}, {1}, 0));
  b.set_grad(flat.as_strided({3}, {1}, 2));
  LossScaler scaler({.init_scale = 8});
  EXPECT_FALSE(scaler.unscale_and_check({a, unused, b}));
  EXPECT_EQ(flat.to_vector<float>(), std::vector<float>({1, 2, -4, 8, 128}));
}

TEST(LossScaler, UnscalesGradientTensorsGivenDirectly) {
  // As a plan hands them over (Plan::gradients(), ZeRO's slices).
  const Tensor g0 = Tensor::from_vector<float>({4, -8}, {2}), g1 = Tensor::from_vector<float>({2}, {1});
  LossScaler scaler({.init_scale = 4});
  EXPECT_FALSE(scaler.unscale_gradients_and_check({g0, Tensor(), g1}));
  EXPECT_EQ(g0.to_vector<float>(), std::vector<float>({1, -2}));
  EXPECT_EQ(g1.to_vector<float>(), std::vector<float>({0.5f}));
  scaler.update(false);
  EXPECT_TRUE(scaler.unscale_gradients_and_check({g1, Tensor::from_vector<float>({kNaN}, {1})}));
}

TEST(LossScaler, FlagsOverflowCausedByUnscaling) {
  // After many backoffs the scale is below 1: dividing by it can overflow
  // a finite f32 gradient, and that step must be skipped too.
  LossScaler scaler({.init_scale = 0.25});
  const Tensor a = param_with_grad({3e38f});
  EXPECT_TRUE(scaler.unscale_and_check({a}));
}

TEST(LossScaler, LargeFiniteGradientsAreNotOverflow) {
  // Their sum would overflow f32; the check sums zeros, not the values.
  LossScaler scaler({.init_scale = 1});
  const Tensor a = param_with_grad(std::vector<float>(64, 3e38f));
  EXPECT_FALSE(scaler.unscale_and_check({a}));
}

TEST(LossScaler, UnscalingTwiceBeforeUpdateIsAnError) {
  LossScaler scaler;
  const Tensor a = param_with_grad({1});
  EXPECT_FALSE(scaler.unscale_and_check({a}));
  EXPECT_THROW(scaler.unscale_and_check({a}), ValueError);
  EXPECT_EQ(a.grad().to_vector<float>()[0], 1.0f / 65536);  // divided once
  scaler.update(false);
  EXPECT_NO_THROW(scaler.unscale_and_check({a}));
}

TEST(LossScaler, ScaleMultipliesTheLoss) {
  LossScaler scaler({.init_scale = 1024});
  EXPECT_EQ(scaler.scale(Tensor::scalar(0.75)).item(), 768.0);
}

TEST(LossScaler, StateDictRoundTrip) {
  LossScaler a({.init_scale = 1024, .growth_interval = 5});
  for (bool inf : {false, true, false, false}) a.update(inf);  // scale 512, tracker 2
  const nlohmann::json saved = nlohmann::json::parse(a.state_dict().dump());
  LossScaler b;
  b.load_state_dict(saved);
  EXPECT_EQ(b.state_dict(), a.state_dict());
  EXPECT_EQ(b.scale(), 512.0);
  EXPECT_EQ(b.growth_tracker(), 2);
  // Both continue identically: three more clean steps grow the scale.
  for (int i = 0; i < 3; ++i) {
    a.update(false);
    b.update(false);
    EXPECT_EQ(b.scale(), a.scale());
  }
  EXPECT_EQ(b.scale(), 1024.0);
}

TEST(LossScaler, RejectsBadOptionsAndStates) {
  EXPECT_THROW(LossScaler({.init_scale = 0}), ValueError);
  EXPECT_THROW(LossScaler({.growth_factor = 1}), ValueError);
  EXPECT_THROW(LossScaler({.backoff_factor = 1}), ValueError);
  EXPECT_THROW(LossScaler({.growth_interval = 0}), ValueError);
  LossScaler s;
  nlohmann::json st = s.state_dict();
  st.erase("scale");
  EXPECT_THROW(s.load_state_dict(st), ValueError);
  st = s.state_dict();
  st["growth_tracker"] = 2000;
  EXPECT_THROW(s.load_state_dict(st), ValueError);
  st = s.state_dict();
  st["growth_interval"] = 1.5;
  EXPECT_THROW(s.load_state_dict(st), ValueError);
  EXPECT_EQ(s.scale(), 65536.0);  // a rejected state changes nothing
}

}  // namespace
}  // namespace braid::optim
