// A captured training step run K times equals K eager steps: the MLP, CNN and
// character transformer `braid train` builds, under SGD with momentum and
// under Adam. Both runs start from the same weights; the captured run takes
// its first step eagerly (the optimizer's buffers must exist to be inputs).
#include <gtest/gtest.h>

#include "braid/graph/step.h"
#include "braid/graph/work_depth.h"
#include "braid/ops/ops.h"
#include "braid/optim/adam.h"
#include "braid/optim/rmsprop.h"
#include "braid/optim/sgd.h"
#include "models.h"

namespace braid::graph {
namespace {

using namespace testing;

std::unique_ptr<optim::Optimizer> optimizer(bool adam, const std::vector<Tensor>& params) {
  if (adam) return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 1e-2, .weight_decay = 1e-3});
  return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4});
}

TEST(TrainingStep, CapturedStepsEqualEagerStepsForEveryModelAndOptimizer) {
  PinnedKernels pinned;
  constexpr int kSteps = 4;
  for (const ModelCase& m : kModels) {
    settle_autotuner(m);
    for (bool adam : {false, true}) {
      SCOPED_TRACE(std::string(m.name) + (adam ? " adam" : " sgd"));
      auto eager_model = build(m, 7);
      auto eager_opt = optimizer(adam, eager_model->parameters());
      std::vector<double> eager_losses;
      for (int s = 0; s < kSteps; ++s) {
        auto [x, y] = batch(m, s);
        eager_opt->zero_grad(true);
        Tensor loss = loss_of((*eager_model)(x), y);
        backward(loss);
        eager_opt->step();
        eager_losses.push_back(loss.item());
      }

      auto model = build(m, 7);
      auto opt = optimizer(adam, model->parameters());
      auto [x0, y0] = batch(m, 0);
      auto [x1, y1] = batch(m, 1);
      // Steps 0 (eager, the optimizer's first) and 1 (recorded) happen here.
      optim::Optimizer& o = *opt;
      std::unique_ptr<TrainingStep> step;
      {
        // The first eager step is on batch 0; the constructor captures on the
        // batch it is given, so take step 0 ourselves and capture on batch 1.
        o.zero_grad(true);
        backward(loss_of((*model)(x0), y0));
        o.step();
        step = std::make_unique<TrainingStep>(*model, o, loss_of, x1, y1);
      }
      for (int s = 2; s < kSteps; ++s) {
        auto [x, y] = batch(m, s);
        EXPECT_EQ(step->run(x, y).item(), eager_losses[static_cast<size_t>(s)]) << "step " << s;
      }
      EXPECT_EQ(o.steps(), kSteps);
      const auto eager_params = eager_model->named_parameters();
      const auto params = model->named_parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_EQ(params[i].second.to_vector<float>(), eager_params[i].second.to_vector<float>()) << params[i].first;
      }
    }
  }
}

TEST(TrainingStep, AnOptimizerThatUpdatesOutsideTheRegistryIsRefused) {
  const ModelCase& m = kModels[0];
  auto model = build(m);
  optim::RMSProp opt(model->parameters(), optim::RMSPropOptions{});
  auto [x, y] = batch(m, 0);
  EXPECT_THROW(TrainingStep(*model, opt, loss_of, x, y), ValueError);
}

TEST(TrainingStep, AMetaCaptureLeavesTheModelAndOptimizerAsTheyWere) {
  const ModelCase& m = kModels[1];
  auto model = build(m, 3);
  auto opt = optimizer(false, model->parameters());
  const std::vector<float> before = model->parameters()[0].to_vector<float>();
  const Graph g = capture_training_step_meta(*model, *opt, loss_of, m.x_shape, DType::f32, {m.x_shape[0]}, DType::i64);
  EXPECT_FALSE(model->parameters()[0].is_meta());
  EXPECT_EQ(model->parameters()[0].to_vector<float>(), before);
  EXPECT_EQ(opt->steps(), 0);
  const WorkDepth wd = work_depth(g);
  EXPECT_GT(wd.work, 0);
  EXPECT_GT(wd.parallelism(), 1);
  EXPECT_EQ(wd.families.count("optimizer"), 1u);
}

}  // namespace
}  // namespace braid::graph
