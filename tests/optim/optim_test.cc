// Optimizers against PyTorch's trajectories (tests/optim/torch_optim_ref.py)
// on a least-squares problem, plus state_dict round trips, schedules and
// clipping against closed forms.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "braid/base/rng.h"
#include "braid/optim/adagrad.h"
#include "braid/optim/adam.h"
#include "braid/optim/clip.h"
#include "braid/optim/lamb.h"
#include "braid/optim/lars.h"
#include "braid/optim/lbfgs.h"
#include "braid/optim/rmsprop.h"
#include "braid/optim/schedule.h"
#include "braid/optim/sgd.h"

namespace braid::optim {
namespace {

using nlohmann::json;

constexpr int kN = 16, kIn = 5, kOut = 3, kSteps = 20;

// loss = 0.5 * mean((X W + b - Y)^2) with its gradient written by hand, so
// this test needs nothing above the tensor layer.
struct Problem {
  std::vector<float> X, Y, W0, b0;
  Problem() {
    Generator gen(7);
    auto fill = [&](std::vector<float>& v, size_t n, float scale) {
      for (size_t i = 0; i < n; ++i) v.push_back(static_cast<float>(gen.normal()) * scale);
    };
    fill(X, kN * kIn, 1.0f);
    fill(Y, kN * kOut, 1.0f);
    fill(W0, kIn * kOut, 0.5f);
    fill(b0, kOut, 0.5f);
  }
  std::vector<Tensor> fresh_params() const {
    Tensor W = Tensor::from_vector(W0, {kIn, kOut}), b = Tensor::from_vector(b0, {kOut});
    W.set_requires_grad(), b.set_requires_grad();
    return {W, b};
  }
  // Sets the gradients of {W, b} and returns the loss.
  double loss_and_grad(const std::vector<Tensor>& p) const {
    const float* W = p[0].data<float>();
    const float* b = p[1].data<float>();
    std::vector<float> gW(kIn * kOut, 0), gb(kOut, 0);
    double loss = 0;
    const double scale = 1.0 / (kN * kOut);
    for (int n = 0; n < kN; ++n) {
      for (int o = 0; o < kOut; ++o) {
        double r = b[o] - Y[n * kOut + o];
        for (int i = 0; i < kIn; ++i) r += X[n * kIn + i] * W[i * kOut + o];
        loss += 0.5 * r * r * scale;
        for (int i = 0; i < kIn; ++i) gW[i * kOut + o] += static_cast<float>(X[n * kIn + i] * r * scale);
        gb[o] += static_cast<float>(r * scale);
      }
    }
    p[0].set_grad(Tensor::from_vector(gW, {kIn, kOut}));
    p[1].set_grad(Tensor::from_vector(gb, {kOut}));
    return loss;
  }
};

std::vector<float> flat(const std::vector<Tensor>& p) {
  std::vector<float> v = p[0].to_vector<float>();
  for (float x : p[1].to_vector<float>()) v.push_back(x);
  return v;
}

bool torch_available() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

// Runs the reference script once for all cases.
std::vector<std::vector<std::vector<float>>> torch_trajectories(const Problem& pr, const json& cases) {
  auto rows = [](const std::vector<float>& v, int r, int c) {
    json m = json::array();
    for (int i = 0; i < r; ++i) m.push_back(std::vector<float>(v.begin() + i * c, v.begin() + (i + 1) * c));
    return m;
  };
  json req = {{"X", rows(pr.X, kN, kIn)}, {"Y", rows(pr.Y, kN, kOut)}, {"W", rows(pr.W0, kIn, kOut)},
              {"b", pr.b0}, {"cases", cases}};
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("braid_optim_{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "in.json") << req.dump();
  const auto script = std::filesystem::path(BRAID_TESTS_DIR) / "optim/torch_optim_ref.py";
  const std::string cmd = fmt::format("/usr/bin/python3 {} < {} > {}", script.string(), (dir / "in.json").string(),
                                      (dir / "out.json").string());
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir / "out.json");
  json out = json::parse(in);
  std::filesystem::remove_all(dir);
  return out.at("trajectories").get<std::vector<std::vector<std::vector<float>>>>();
}

struct Case {
  json torch;  // {"name":..., "options":...}
  std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>, const Problem&)> make;
  double rtol = 2e-5;
  double atol = 1e-5;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  auto plain = [](auto make) {
    return [make](std::vector<Tensor> p, const Problem&) -> std::unique_ptr<Optimizer> { return make(std::move(p)); };
  };
  c.push_back({{{"name", "sgd"}, {"options", {{"lr", 0.1}}}},
               plain([](auto p) { return std::make_unique<SGD>(p, SGDOptions{.lr = 0.1}); })});
  c.push_back({{{"name", "sgd"}, {"options", {{"lr", 0.05}, {"momentum", 0.9}, {"weight_decay", 0.01}, {"dampening", 0.1}}}},
               plain([](auto p) {
                 return std::make_unique<SGD>(p, SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
               })});
  c.push_back({{{"name", "sgd"}, {"options", {{"lr", 0.05}, {"momentum", 0.9}, {"nesterov", true}}}},
               plain([](auto p) { return std::make_unique<SGD>(p, SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true}); })});
  json adam_o = {{"lr", 0.05}, {"beta1", 0.8}, {"beta2", 0.95}, {"eps", 1e-6}, {"weight_decay", 0.1}};
  c.push_back({{{"name", "adam"}, {"options", adam_o}}, plain([](auto p) {
                 return std::make_unique<Adam>(p, AdamOptions{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1});
               })});
  c.push_back({{{"name", "adamw"}, {"options", adam_o}}, plain([](auto p) {
                 return std::make_unique<AdamW>(p, AdamWOptions{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1});
               })});
  c.push_back({{{"name", "adagrad"}, {"options", {{"lr", 0.2}, {"lr_decay", 0.01}, {"weight_decay", 0.05}, {"initial_accumulator_value", 0.1}}}},
               plain([](auto p) {
                 return std::make_unique<AdaGrad>(p, AdaGradOptions{.lr = 0.2, .lr_decay = 0.01, .weight_decay = 0.05, .initial_accumulator_value = 0.1});
               })});
  c.push_back({{{"name", "rmsprop"}, {"options", {{"lr", 0.01}}}},
               plain([](auto p) { return std::make_unique<RMSProp>(p, RMSPropOptions{.lr = 0.01}); })});
  c.push_back({{{"name", "rmsprop"}, {"options", {{"lr", 0.01}, {"alpha", 0.9}, {"momentum", 0.5}, {"centered", true}, {"weight_decay", 0.02}}}},
               plain([](auto p) {
                 return std::make_unique<RMSProp>(p, RMSPropOptions{.lr = 0.01, .alpha = 0.9, .weight_decay = 0.02, .momentum = 0.5, .centered = true});
               })});
  c.push_back({{{"name", "lars"}, {"options", {{"lr", 2.0}, {"momentum", 0.9}, {"weight_decay", 0.01}, {"eta", 0.02}}}},
               plain([](auto p) { return std::make_unique<LARS>(p, LARSOptions{.lr = 2.0, .momentum = 0.9, .weight_decay = 0.01, .eta = 0.02}); })});
  c.push_back({{{"name", "lamb"}, {"options", {{"lr", 0.02}, {"beta1", 0.9}, {"beta2", 0.99}, {"weight_decay", 0.01}}}},
               plain([](auto p) {
                 return std::make_unique<LAMB>(p, LAMBOptions{.lr = 0.02, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.01});
               })});
  // L-BFGS: one iteration per step so the 20 steps are 20 comparable iterates.
  // Looser tolerance: braid runs the two-loop recursion in double, torch in
  // float32, and the line search amplifies the difference.
  c.push_back({{{"name", "lbfgs"}, {"options", {{"lr", 1.0}, {"max_iter", 1}, {"line_search_fn", "strong_wolfe"}}}},
               [](std::vector<Tensor> p, const Problem& pr) -> std::unique_ptr<Optimizer> {
                 auto closure = [p, &pr] { return pr.loss_and_grad(p); };
                 return std::make_unique<LBFGS>(p, closure, LBFGSOptions{.lr = 1.0, .max_iter = 1});
               },
               1e-3, 1e-4});
  c.push_back({{{"name", "lbfgs"}, {"options", {{"lr", 0.5}, {"max_iter", 1}}}},
               [](std::vector<Tensor> p, const Problem& pr) -> std::unique_ptr<Optimizer> {
                 auto closure = [p, &pr] { return pr.loss_and_grad(p); };
                 return std::make_unique<LBFGS>(p, closure, LBFGSOptions{.lr = 0.5, .max_iter = 1, .strong_wolfe = false});
               },
               1e-3, 1e-4});
  return c;
}

std::vector<std::vector<float>> braid_trajectory(const Case& c, const Problem& pr) {
  std::vector<Tensor> params = pr.fresh_params();
  auto opt = c.make(params, pr);
  const bool has_closure = opt->name() == "lbfgs";
  std::vector<std::vector<float>> traj;
  for (int s = 0; s < kSteps; ++s) {
    if (!has_closure) pr.loss_and_grad(params);
    opt->step();
    traj.push_back(flat(params));
  }
  return traj;
}

TEST(Optim, MatchesPyTorchTrajectories) {
  if (!torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  Problem pr;
  const std::vector<Case> cs = cases();
  json torch_cases = json::array();
  for (const Case& c : cs) {
    json tc = c.torch;
    tc["steps"] = kSteps;
    torch_cases.push_back(tc);
  }
  const auto ref = torch_trajectories(pr, torch_cases);
  ASSERT_EQ(ref.size(), cs.size());
  for (size_t i = 0; i < cs.size(); ++i) {
    const auto got = braid_trajectory(cs[i], pr);
    ASSERT_EQ(got.size(), ref[i].size());
    for (int s = 0; s < kSteps; ++s) {
      for (size_t k = 0; k < got[s].size(); ++k) {
        const double want = ref[i][s][k];
        ASSERT_NEAR(got[s][k], want, cs[i].atol + cs[i].rtol * std::abs(want))
            << cs[i].torch.dump() << " step " << s + 1 << " element " << k;
      }
    }
    // The problem is well posed: every optimizer must have moved the params.
    EXPECT_NE(got.back(), flat(pr.fresh_params())) << cs[i].torch.dump();
  }
}

// Saving after 10 steps and loading into a fresh optimizer continues exactly.
TEST(Optim, StateDictResumesExactly) {
  Problem pr;
  for (const Case& c : cases()) {
    if (c.torch.at("name") == "lbfgs") continue;  // L-BFGS history is not checkpointed
    std::vector<Tensor> a = pr.fresh_params();
    auto oa = c.make(a, pr);
    for (int s = 0; s < kSteps; ++s) pr.loss_and_grad(a), oa->step();

    std::vector<Tensor> b = pr.fresh_params();
    auto ob = c.make(b, pr);
    for (int s = 0; s < kSteps / 2; ++s) pr.loss_and_grad(b), ob->step();
    OptimizerState st = ob->state_dict();
    std::vector<Tensor> b2 = {b[0].clone().set_requires_grad(), b[1].clone().set_requires_grad()};
    auto ob2 = c.make(b2, pr);
    ob2->set_lr(123);  // restored by load_state_dict
    ob2->load_state_dict(st);
    EXPECT_EQ(ob2->steps(), kSteps / 2);
    for (int s = kSteps / 2; s < kSteps; ++s) pr.loss_and_grad(b2), ob2->step();
    EXPECT_EQ(flat(a), flat(b2)) << c.torch.dump();
  }
}

TEST(Optim, LoadStateDictRejectsMismatch) {
  Problem pr;
  std::vector<Tensor> p = pr.fresh_params();
  SGD sgd(p, {.lr = 0.1, .momentum = 0.9});
  pr.loss_and_grad(p);
  sgd.step();
  OptimizerState st = sgd.state_dict();
  Adam adam(p, {});
  EXPECT_THROW(adam.load_state_dict(st), ValueError);
  OptimizerState bad = st;
  bad.tensors[0].second = Tensor::zeros({2, 2});
  SGD sgd2(p, {.lr = 0.1, .momentum = 0.9});
  EXPECT_THROW(sgd2.load_state_dict(bad), ValueError);
  OptimizerState few = st;
  few.scalars["num_params"] = 1;
  EXPECT_THROW(sgd2.load_state_dict(few), ValueError);
}

TEST(Optim, ZeroGradAndSkipsParamsWithoutGrad) {
  Problem pr;
  std::vector<Tensor> p = pr.fresh_params();
  SGD sgd(p, {.lr = 0.1});
  pr.loss_and_grad(p);
  sgd.zero_grad(false);
  EXPECT_EQ(p[0].grad().to_vector<float>(), std::vector<float>(kIn * kOut, 0.0f));
  sgd.zero_grad();
  EXPECT_FALSE(p[0].grad().defined());
  const auto before = flat(p);
  sgd.step();  // no gradients: nothing moves
  EXPECT_EQ(flat(p), before);
  EXPECT_THROW(SGD(p, {.lr = -1}), ValueError);
  EXPECT_THROW(SGD(p, {.lr = 0.1, .nesterov = true}), ValueError);
}

TEST(Optim, ClipGradNormMatchesClosedForm) {
  Tensor a = Tensor::zeros({2}), b = Tensor::zeros({1});
  a.set_grad(Tensor::from_vector<float>({3, 0}, {2}));
  b.set_grad(Tensor::from_vector<float>({4}, {1}));
  EXPECT_DOUBLE_EQ(grad_norm({a, b}), 5.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm({a, b}, 10.0), 5.0);  // below max: untouched
  EXPECT_FLOAT_EQ(a.grad().to_vector<float>()[0], 3.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm({a, b}, 1.0), 5.0);
  EXPECT_NEAR(grad_norm({a, b}), 1.0, 1e-6);
  EXPECT_NEAR(b.grad().to_vector<float>()[0], 0.8f, 1e-6);
  b.set_grad(Tensor::from_vector<float>({NAN}, {1}));
  EXPECT_TRUE(std::isnan(clip_grad_norm({a, b}, 1.0)));
}

TEST(Optim, SchedulesMatchClosedForms) {
  StepLR step(0.1, 10, 0.5);
  EXPECT_DOUBLE_EQ(step.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(step.lr_at(9), 0.1);
  EXPECT_DOUBLE_EQ(step.lr_at(10), 0.05);
  EXPECT_DOUBLE_EQ(step.lr_at(25), 0.025);
  CosineLR cos(1.0, 100, 0.1);
  EXPECT_DOUBLE_EQ(cos.lr_at(0), 1.0);
  EXPECT_NEAR(cos.lr_at(50), 0.55, 1e-12);
  EXPECT_NEAR(cos.lr_at(100), 0.1, 1e-12);
  EXPECT_NEAR(cos.lr_at(500), 0.1, 1e-12);
  auto warm = make_schedule({.name = "cosine", .base_lr = 0.4, .total_steps = 110, .warmup_steps = 10});
  EXPECT_DOUBLE_EQ(warm->lr_at(0), 0.0);
  EXPECT_NEAR(warm->lr_at(5), 0.2, 1e-12);
  EXPECT_NEAR(warm->lr_at(10), 0.4, 1e-12);
  EXPECT_NEAR(warm->lr_at(60), 0.2, 1e-12);  // half-way through the 100 cosine steps
  EXPECT_THROW(make_schedule({.name = "cosinus"}), ConfigError);
  EXPECT_THROW(StepLR(0.1, 0, 0.5), ValueError);
}

}  // namespace
}  // namespace braid::optim
