// Expert parallelism with ZeRO and with gradient clipping, on in-process
// ranks: DP=2 x EP=2 (4 ranks) under all-reduce, ZeRO-1 and ZeRO-2 trains
// like one process holding every expert, the clip's global norm counting
// every expert once, micro-batches accumulating before ZeRO's reductions; a ZeRO-2 x EP checkpoint (momentum buffers included)
// resumes under ZeRO-1 x EP and under plain EP as one process continues.
#include <gtest/gtest.h>

#include "braid/nn/moe.h"
#include "braid/optim/lamb.h"
#include "braid/optim/sgd.h"
#include "tests/parallel/model_parallel_util.h"

namespace braid::parallel {
namespace {

using testing::Params;

constexpr int64_t kRows = 16;
constexpr double kLr = 0.2;

// in 6 -> 12 -> MoE of 4 GELU experts (top-2, width 8) -> 5 classes. No
// auxiliary losses: a batch's routing is then the same whole or split by rows.
std::shared_ptr<nn::Sequential> moe_mlp() {
  Generator g(21);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(6, 12, g));
  m->push_back(std::make_shared<nn::MoE>(12, 8, nn::MlpKind::gelu,
                                         nn::MoeOptions{.experts = 4, .top_k = 2, .aux_loss = 0, .z_loss = 0}, g));
  m->push_back(std::make_shared<nn::Linear>(12, 5, g));
  return m;
}

std::unique_ptr<optim::Optimizer> sgd(std::vector<Tensor> params) {
  return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions{.lr = kLr, .momentum = 0.9});
}

// LAMB's trust ratio reads each parameter's whole norm: an expert tensor's
// over every expert, as one process holding them all has it.
std::unique_ptr<optim::Optimizer> lamb(std::vector<Tensor> params) {
  return std::make_unique<optim::LAMB>(std::move(params), optim::LAMBOptions{.lr = 0.1});
}

using MakeOptimizer = std::unique_ptr<optim::Optimizer> (*)(std::vector<Tensor>);
MakeOptimizer make_optimizer = sgd;

// One process, whole batches: `steps` clipped SGD steps; the first step's norm.
Params train_whole(nn::Module& model, int steps, double clip, double* first_norm) {
  auto opt = make_optimizer(model.parameters());
  for (int s = 0; s < steps; ++s) {
    opt->zero_grad(false);
    auto [x, t] = testing::batch(false, s, kRows);
    backward(nn::cross_entropy_loss(model.forward(x), t));
    const double norm = optim::grad_norm(model.parameters());
    if (s == 0 && first_norm) *first_norm = norm;
    if (clip > 0) optim::clip_grads_to(model.parameters(), norm, clip);
    opt->step();
  }
  return testing::values(model);
}

PlanOptions ep_options(const std::string& strategy, int stage, int microbatches = 1) {
  PlanOptions o;
  o.strategy = strategy;
  o.mesh = {.data = 4};
  o.expert = 2;
  o.microbatches = microbatches;
  o.zero = {.stage = stage, .bucket_bytes = 256, .timeout = std::chrono::seconds(20)};
  return o;
}

struct Saved {
  nn::NamedTensors model;
  optim::OptimizerState optimizer;
};

struct RankRun {
  Params params;  // every expert gathered (Plan::model_state)
  double first_norm = 0;
};

// Steps [from, to) on 4 ranks under `options`, each rank its quarter of the
// rows; starts from `resume` when given, saves into `save` (data rank 0's).
std::vector<RankRun> train_ep(const PlanOptions& options, int from, int to, double clip, const Saved* resume,
                              Saved* save) {
  std::vector<RankRun> got(4);
  testing::on_ranks(4, [&](int rank, comm::Communicator comm) {
    PlannedModel pm = make_plan(options, comm, nullptr, moe_mlp(), nn::cross_entropy_loss);
    auto opt = make_optimizer(pm.plan->optimizer_parameters(*pm.model));
    pm.plan->setup(*pm.model, {}, opt.get());
    if (resume) {
      pm.plan->load_model_state(*pm.model, resume->model);
      pm.plan->load_optimizer_state(*opt, resume->optimizer);
    }
    const int64_t per = kRows / pm.plan->data_world(), first = per * pm.plan->data_rank();
    RankRun& mine = got[static_cast<size_t>(rank)];
    for (int s = from; s < to; ++s) {
      opt->zero_grad(false);
      auto [x, t] = testing::batch(false, s, kRows);
      pm.plan->forward_backward(*pm.model, pm.loss, slice(x, 0, first, first + per), slice(t, 0, first, first + per));
      pm.plan->finish_gradients();
      const double norm = clip > 0 ? pm.plan->clip_grad_norm(clip) : pm.plan->grad_norm();
      if (s == from) mine.first_norm = norm;
      opt->step();
      pm.plan->after_step();
    }
    const nn::NamedTensors state = pm.plan->model_state(*pm.model);
    for (const auto& [name, t] : state) mine.params[name] = t.to_vector<float>();
    optim::OptimizerState ostate = pm.plan->optimizer_state(*opt);
    if (save && rank == 0) *save = {state, ostate};
  });
  return got;
}

void expect_whole(const std::vector<RankRun>& got, const Params& want, const std::string& where) {
  for (size_t r = 0; r < got.size(); ++r) {
    for (const auto& [name, w] : want) {
      ASSERT_TRUE(got[r].params.count(name)) << where << " rank " << r << ": no " << name;
      const auto& v = got[r].params.at(name);
      ASSERT_EQ(v.size(), w.size()) << where << ": " << name;
      for (size_t i = 0; i < v.size(); ++i) ASSERT_NEAR(v[i], w[i], 2e-5) << where << " rank " << r << ": " << name << "[" << i << "]";
    }
  }
}

TEST(ExpertZero, AllreduceAndZeroWithClippingEqualOneProcess) {
  set_num_threads(1);
  double whole_norm = 0;
  {
    auto probe = moe_mlp();
    train_whole(*probe, 1, 0, &whole_norm);
  }
  for (const double clip : {0.0, whole_norm / 3}) {  // the second binds on the first step
    auto whole = moe_mlp();
    const Params want = train_whole(*whole, 4, clip, nullptr);
    for (const auto& [strategy, stage] : std::vector<std::pair<std::string, int>>{{"allreduce", 1}, {"zero", 1}, {"zero", 2}}) {
      const std::string where = fmt::format("{} stage {} clip {}", strategy, stage, clip);
      const auto got = train_ep(ep_options(strategy, stage), 0, 4, clip, nullptr, nullptr);
      for (const RankRun& r : got) EXPECT_NEAR(r.first_norm, whole_norm, 1e-5 * whole_norm) << where;
      expect_whole(got, want, where);
    }
  }
}

TEST(ExpertZero, PerParameterNormsCoverEveryExpert) {
  set_num_threads(1);
  make_optimizer = lamb;
  auto whole = moe_mlp();
  const Params want = train_whole(*whole, 4, 0, nullptr);
  for (const auto& [strategy, stage] : std::vector<std::pair<std::string, int>>{{"allreduce", 1}, {"zero", 2}}) {
    expect_whole(train_ep(ep_options(strategy, stage), 0, 4, 0, nullptr, nullptr), want,
                 fmt::format("lamb, {} stage {}", strategy, stage));
  }
  make_optimizer = sgd;
}

// Two micro-batches a step: both groups accumulate, and reduce after the last.
TEST(ExpertZero, MicrobatchesAccumulateBeforeTheReduction) {
  set_num_threads(1);
  auto whole = moe_mlp();
  const Params want = train_whole(*whole, 4, 0, nullptr);
  for (const int stage : {1, 2}) {
    expect_whole(train_ep(ep_options("zero", stage, 2), 0, 4, 0, nullptr, nullptr), want,
                 fmt::format("zero stage {}, 2 micro-batches", stage));
  }
}

TEST(ExpertZero, CheckpointsReshardBetweenStagesAndPlans) {
  set_num_threads(1);
  auto whole = moe_mlp();
  const Params want = train_whole(*whole, 4, 0, nullptr);
  Saved saved;
  train_ep(ep_options("zero", 2), 0, 2, 0, nullptr, &saved);
  bool momentum = false;
  for (const auto& [key, t] : saved.optimizer.tensors) momentum = momentum || key.find("momentum") != std::string::npos;
  EXPECT_TRUE(momentum) << "the checkpoint carries no momentum buffer";
  expect_whole(train_ep(ep_options("zero", 1), 2, 4, 0, &saved, nullptr), want, "ZeRO-2 -> ZeRO-1");
  expect_whole(train_ep(ep_options("allreduce", 1), 2, 4, 0, &saved, nullptr), want, "ZeRO-2 -> all-reduce");
}

TEST(ExpertZero, RefusesStage3) {
  testing::on_ranks(4, [&](int, comm::Communicator comm) {
    EXPECT_THROW(make_plan(ep_options("zero", 3), comm, nullptr, moe_mlp(), nn::cross_entropy_loss), ConfigError);
  });
}

}  // namespace
}  // namespace braid::parallel
