// ZeRO on the data axis: the layout, every stage against one process for
// every optimizer and N = 1-4, beside tensor and pipeline parallelism,
// global-norm clipping across slices, checkpoints that reshard between world
// sizes and stages, and the memory each stage keeps per rank.
#include <gtest/gtest.h>

#include <functional>

#include "braid/optim/adagrad.h"
#include "braid/optim/adam.h"
#include "braid/optim/lamb.h"
#include "braid/optim/lars.h"
#include "braid/optim/lbfgs.h"
#include "braid/optim/rmsprop.h"
#include "braid/optim/sgd.h"
#include "braid/parallel/zero/layout.h"
#include "tests/parallel/model_parallel_util.h"

namespace braid::parallel {
namespace {

using testing::Params;

// ---------------------------------------------------------------- layout

TEST(ZeroLayout, SlicesTileEveryParameterOnce) {
  const std::vector<int64_t> numels{7, 1, 12, 5, 30, 2};
  for (int ranks = 1; ranks <= 5; ++ranks) {
    for (size_t bucket_bytes : {size_t{4}, size_t{40}, size_t{1} << 20}) {
      const zero::Layout layout(numels, zero::buckets_by_size(numels, bucket_bytes), ranks);
      std::vector<std::vector<int>> hits(numels.size());
      for (size_t i = 0; i < numels.size(); ++i) hits[i].assign(static_cast<size_t>(numels[i]), 0);
      for (int r = 0; r < ranks; ++r) {
        int64_t held = 0;
        for (const zero::OwnedSlice& s : layout.owned(r)) {
          const zero::Bucket& b = layout.buckets()[s.bucket];
          // The slice sits where the bucket's flat order puts it.
          EXPECT_EQ(b.piece * r + s.at, layout.offset_of(s.param) + s.begin);
          EXPECT_LE(s.at + s.numel(), b.piece);
          for (int64_t k = s.begin; k < s.end; ++k) hits[s.param][static_cast<size_t>(k)]++;
          held += s.numel();
        }
        EXPECT_LE(held, layout.piece_elements());
      }
      for (size_t i = 0; i < numels.size(); ++i) {
        for (int h : hits[i]) ASSERT_EQ(h, 1) << "ranks " << ranks << " param " << i;
      }
      for (const zero::Bucket& b : layout.buckets()) {
        EXPECT_EQ(b.padded % ranks, 0);
        EXPECT_LT(b.padded - b.numel, ranks);
      }
    }
  }
}

TEST(ZeroLayout, SizeBucketsFollowBackwardOrder) {
  const auto groups = zero::buckets_by_size({10, 10, 10, 10}, 80);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<size_t>{3, 2}));
  EXPECT_EQ(groups[1], (std::vector<size_t>{1, 0}));
}

// ---------------------------------------------------------------- training

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

struct NamedOptimizer {
  std::string name;
  MakeOptimizer make;
};

std::vector<NamedOptimizer> optimizers() {
  return {
      {"sgd", [](auto p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3}); }},
      {"adam", [](auto p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions{.lr = 0.01}); }},
      {"adamw", [](auto p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.05}); }},
      {"adagrad", [](auto p) { return std::make_unique<optim::AdaGrad>(p, optim::AdaGradOptions{.lr = 0.05}); }},
      {"rmsprop", [](auto p) { return std::make_unique<optim::RMSProp>(p, optim::RMSPropOptions{.lr = 0.005, .momentum = 0.5}); }},
      {"lars", [](auto p) { return std::make_unique<optim::LARS>(p, optim::LARSOptions{.lr = 0.5, .momentum = 0.9, .weight_decay = 1e-3}); }},
      {"lamb", [](auto p) { return std::make_unique<optim::LAMB>(p, optim::LAMBOptions{.lr = 0.01, .weight_decay = 0.01}); }},
  };
}

constexpr int kSteps = 3;
constexpr int64_t kRows = 12;  // divides by 1, 2, 3, 4

// One process, whole batches, `steps` steps from step `first`.
Params train_one(nn::Module& model, const MakeOptimizer& make, bool tokens, int steps, double clip = 0) {
  auto opt = make(model.parameters());
  set_num_threads(1);
  for (int s = 0; s < steps; ++s) {
    opt->zero_grad(false);
    auto [x, t] = testing::batch(tokens, s, kRows);
    autograd::backward(nn::cross_entropy_loss(model.forward(x), t));
    if (clip > 0) optim::clip_grad_norm(model.parameters(), clip);
    opt->step();
  }
  return testing::values(model);
}

struct RankRun {
  Params params;  // the whole parameters of this rank's shard, from model_state
  ShardSpecs specs;
  double norm = 0;  // clip_grad_norm's figure on the first step
};

// The step a trainer runs, on one rank.
void step(Plan& plan, PlannedModel& pm, optim::Optimizer& opt, bool tokens, int s, double clip, double* norm) {
  const int64_t per = kRows / plan.data_world(), first = per * plan.data_rank();
  opt.zero_grad(false);
  auto [x, t] = testing::batch(tokens, s, kRows);
  plan.forward_backward(*pm.model, pm.loss, slice(x, 0, first, first + per), slice(t, 0, first, first + per));
  plan.finish_gradients();
  if (clip > 0) {
    const double n = plan.clip_grad_norm(clip);
    if (norm && s == 0) *norm = n;
  }
  opt.step();
  plan.after_step();
}

Params parameters_of(Plan& plan, const nn::Module& model) {
  Params out;
  const nn::NamedTensors state = plan.model_state(model);
  for (const auto& [name, t] : model.named_parameters()) {
    for (const auto& [sname, st] : state) {
      if (sname == name) out[name] = st.to_vector<float>();
    }
  }
  return out;
}

template <class Build>
std::vector<RankRun> train_zero(int world, PlanOptions options, Build build, const MakeOptimizer& make, bool tokens,
                                double clip = 0) {
  std::vector<RankRun> got(static_cast<size_t>(world));
  testing::on_ranks(world, [&](int rank, comm::Communicator comm) {
    PlannedModel pm = make_plan(options, comm, nullptr, build(), nn::cross_entropy_loss);
    auto opt = make(pm.plan->optimizer_parameters(*pm.model));
    pm.plan->setup(*pm.model, {}, opt.get());
    RankRun& mine = got[static_cast<size_t>(rank)];
    for (int s = 0; s < kSteps; ++s) step(*pm.plan, pm, *opt, tokens, s, clip, &mine.norm);
    mine.params = parameters_of(*pm.plan, *pm.model);
    mine.specs = pm.plan->shards();
  });
  return got;
}

PlanOptions zero_options(int stage, MeshShape mesh = {}, int microbatches = 1) {
  return {.strategy = "zero", .mesh = mesh, .microbatches = microbatches,
          .zero = {.stage = stage, .bucket_bytes = 256, .timeout = std::chrono::seconds(20)}};
}

TEST(Zero, EveryStageEqualsOneProcessForEveryOptimizer) {
  for (const NamedOptimizer& o : optimizers()) {
    auto whole = testing::mlp(3);
    const Params expected = train_one(*whole, o.make, /*tokens=*/false, kSteps);
    for (int stage = 1; stage <= 3; ++stage) {
      for (int n = 1; n <= 4; ++n) {
        const auto got = train_zero(n, zero_options(stage), [] { return testing::mlp(3); }, o.make, false);
        for (int r = 0; r < n; ++r) {
          testing::expect_matches_whole({got[static_cast<size_t>(r)].params, {}, 0}, expected, 2e-5,
                                        fmt::format("{} stage {} N={} rank {}", o.name, stage, n, r));
        }
      }
    }
  }
}

TEST(Zero, TransformerWithTensorAndPipelineAxes) {
  // Attention's key bias has an exactly-zero gradient (softmax ignores a
  // per-row shift), so its computed gradient is rounding noise that Adam
  // would blow up to a full step; a larger eps keeps noise a small step.
  const NamedOptimizer adam{"adam", [](auto p) {
                              return std::make_unique<optim::Adam>(p, optim::AdamOptions{.lr = 0.01, .eps = 1e-3});
                            }};
  auto whole = testing::char_transformer(5, /*heads=*/2);
  const Params expected = train_one(*whole, adam.make, /*tokens=*/true, kSteps);
  const std::vector<std::pair<std::string, MeshShape>> meshes{
      {"D2", {.data = 2}}, {"D2xT2", {.data = 2, .tensor = 2}}, {"D2xP2", {.data = 2, .pipeline = 2}},
      {"D3", {.data = 3}}, {"D2xT2xP2", {.data = 2, .tensor = 2, .pipeline = 2}}};
  for (const auto& [label, mesh] : meshes) {
    const int world = mesh.data * mesh.tensor * mesh.pipeline;
    for (int stage = 1; stage <= 3; ++stage) {
      const auto got = train_zero(world, zero_options(stage, mesh, mesh.pipeline > 1 ? 2 : 1),
                                  [] { return testing::char_transformer(5, 2); }, adam.make, true);
      for (int r = 0; r < world; ++r) {
        const RankRun& g = got[static_cast<size_t>(r)];
        testing::expect_matches_whole({g.params, g.specs, 0}, expected, 3e-5,
                                      fmt::format("{} stage {} rank {}", label, stage, r));
      }
    }
  }
}

TEST(Zero, GlobalNormClippingAcrossSlices) {
  // LAMB and a clip that binds: the clip's norm is the whole model's, and the
  // clipped steps equal one process's.
  const auto& lamb = optimizers()[6];
  auto whole = testing::mlp(9);
  double whole_norm = 0;
  {
    auto probe = testing::mlp(9);
    auto [x, t] = testing::batch(false, 0, kRows);
    autograd::backward(nn::cross_entropy_loss(probe->forward(x), t));
    whole_norm = optim::grad_norm(probe->parameters());
  }
  const double clip = whole_norm / 3;
  const Params expected = train_one(*whole, lamb.make, false, kSteps, clip);
  for (int stage = 1; stage <= 3; ++stage) {
    for (const MeshShape mesh : {MeshShape{.data = 3}, MeshShape{.data = 2, .tensor = 2}}) {
      const int world = mesh.data * mesh.tensor;
      const auto got = train_zero(world, zero_options(stage, mesh), [] { return testing::mlp(9); }, lamb.make, false, clip);
      for (int r = 0; r < world; ++r) {
        const RankRun& g = got[static_cast<size_t>(r)];
        EXPECT_NEAR(g.norm, whole_norm, 1e-5 * whole_norm) << "stage " << stage << " rank " << r;
        testing::expect_matches_whole({g.params, g.specs, 0}, expected, 2e-5, fmt::format("stage {} rank {}", stage, r));
      }
    }
  }
}

TEST(Zero, MicrobatchesAccumulateBeforeTheReduction) {
  const auto& adam = optimizers()[1];
  auto whole = testing::mlp(4);
  const Params expected = train_one(*whole, adam.make, false, kSteps);
  for (int stage = 1; stage <= 3; ++stage) {
    const auto got = train_zero(2, zero_options(stage, {}, 3), [] { return testing::mlp(4); }, adam.make, false);
    for (int r = 0; r < 2; ++r) {
      testing::expect_matches_whole({got[static_cast<size_t>(r)].params, {}, 0}, expected, 2e-5,
                                    fmt::format("stage {} rank {}", stage, r));
    }
  }
}

TEST(Zero, RefusesOptimizersThatCannotRunOnSlices) {
  testing::on_ranks(2, [&](int, comm::Communicator comm) {
    PlannedModel pm = make_plan(zero_options(1), comm, nullptr, testing::mlp(1), nn::cross_entropy_loss);
    optim::LBFGS lbfgs(pm.plan->optimizer_parameters(*pm.model), [] { return 0.0; }, {});
    try {
      pm.plan->setup(*pm.model, {}, &lbfgs);
      ADD_FAILURE() << "L-BFGS was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("lbfgs"), std::string::npos) << e.what();
    }
  });
}

TEST(Zero, Stage3NeedsASequential) {
  struct Bare : nn::Module {
    Bare() { register_parameter("w", Tensor::ones({3})); }
    Tensor forward(const Tensor& x) override { return x; }
  };
  testing::on_ranks(1, [&](int, comm::Communicator comm) {
    EXPECT_THROW(make_plan(zero_options(3), comm, nullptr, std::make_shared<Bare>(), nn::cross_entropy_loss),
                 ConfigError);
  });
}

// ---------------------------------------------------------------- resharding

struct Saved {
  nn::NamedTensors model;
  optim::OptimizerState optimizer;
};

// `steps` steps from step `first` under `options` on `world` ranks, starting
// from `from` when given; returns data rank 0's whole state afterwards.
Saved run_and_save(int world, const PlanOptions& options, const MakeOptimizer& make, int first, int steps,
                   const Saved* from) {
  Saved out;
  testing::on_ranks(world, [&](int rank, comm::Communicator comm) {
    PlannedModel pm = make_plan(options, comm, nullptr, testing::mlp(6), nn::cross_entropy_loss);
    auto opt = make(pm.plan->optimizer_parameters(*pm.model));
    if (from) {  // as the trainer resumes: before setup
      pm.plan->load_model_state(*pm.model, from->model);
      pm.plan->load_optimizer_state(*opt, from->optimizer);
    }
    pm.plan->setup(*pm.model, {}, opt.get());
    for (int s = first; s < first + steps; ++s) step(*pm.plan, pm, *opt, false, s, 0, nullptr);
    nn::NamedTensors model = pm.plan->model_state(*pm.model);
    optim::OptimizerState state = pm.plan->optimizer_state(*opt);
    if (rank == 0) {
      for (auto& [n, t] : model) t = t.clone();
      out = {model, state};
    }
  });
  return out;
}

TEST(Zero, CheckpointsReshardAcrossWorldSizesAndStages) {
  const auto& adam = optimizers()[1];
  auto whole = testing::mlp(6);
  const Params expected = train_one(*whole, adam.make, false, 2 * kSteps);
  struct Case {
    int w1, stage1, w2, stage2;
  };
  for (const Case c : {Case{2, 1, 3, 1}, Case{4, 2, 2, 2}, Case{3, 3, 1, 0}, Case{2, 3, 4, 1}, Case{1, 0, 3, 3}}) {
    auto options = [](int stage) {
      return stage == 0 ? PlanOptions{.strategy = "none"} : zero_options(stage);
    };
    const Saved mid = run_and_save(c.w1, options(c.stage1), adam.make, 0, kSteps, nullptr);
    const Saved end = run_and_save(c.w2, options(c.stage2), adam.make, kSteps, kSteps, &mid);
    Params got;
    for (const auto& [name, t] : end.model) got[name] = t.to_vector<float>();
    testing::expect_matches_whole({got, {}, 0}, expected, 2e-5,
                                  fmt::format("{} ranks stage {} -> {} ranks stage {}", c.w1, c.stage1, c.w2, c.stage2));
  }
}

// ---------------------------------------------------------------- memory

// Bytes in use per category, summed over the in-process ranks (they share
// the process's allocator), once every rank has taken `steps` steps.
std::array<int64_t, kMemoryCategories> model_state_bytes(int world, const PlanOptions& options) {
  std::array<int64_t, kMemoryCategories> out{};
  const AllocatorStats before = CachingAllocator::host().stats();
  testing::on_ranks(world, [&](int rank, comm::Communicator comm) {
    PlannedModel pm = make_plan(options, comm, nullptr, testing::mlp(2), nn::cross_entropy_loss);
    auto opt = optimizers()[1].make(pm.plan->optimizer_parameters(*pm.model));
    pm.plan->setup(*pm.model, {}, opt.get());
    for (int s = 0; s < 2; ++s) step(*pm.plan, pm, *opt, false, s, 0, nullptr);
    comm.barrier().wait(Deadline::after(std::chrono::seconds(20)));
    if (rank == 0) {
      const AllocatorStats now = CachingAllocator::host().stats();
      for (size_t c = 0; c < kMemoryCategories; ++c) {
        out[c] = static_cast<int64_t>(now.categories[c].in_use) - static_cast<int64_t>(before.categories[c].in_use);
      }
    }
    comm.barrier().wait(Deadline::after(std::chrono::seconds(20)));
  });
  return out;
}

TEST(Zero, MemoryPerRankFollowsThePapersFormulas) {
  // f32: 4 bytes of parameters and 4 of gradients per element, K = 8 bytes of
  // Adam state. Plain data parallelism keeps (4 + 4 + K) Psi per rank; stage 1
  // (4 + 4) Psi + K Psi / N; stage 2 4 Psi + (4 + K) Psi / N; stage 3
  // (4 + 4 + K) Psi / N. Each bucket pads to a multiple of N (< N elements).
  int64_t psi = 0;
  for (const Tensor& p : testing::mlp(2)->parameters()) psi += p.numel();
  const int64_t buckets_bound = 8;  // buckets of 256 B over the MLP's 5 tensors + slack
  for (int n = 2; n <= 4; ++n) {
    const auto dp = model_state_bytes(n, {.strategy = "allreduce", .data_parallel = {.bucket_bytes = 256}});
    EXPECT_EQ(dp[1], n * 4 * psi);
    EXPECT_EQ(dp[2], n * 4 * psi);
    EXPECT_EQ(dp[3], n * 8 * psi);
    for (int stage = 1; stage <= 3; ++stage) {
      const auto z = model_state_bytes(n, zero_options(stage));
      const int64_t pad = 4 * n * buckets_bound * n;  // bytes over all ranks, at most
      const double params = stage == 3 ? 4.0 * psi / n : 4.0 * psi;
      const double grads = stage >= 2 ? 4.0 * psi / n : 4.0 * psi;
      const double state = 8.0 * psi / n;
      const std::string where = fmt::format("stage {} N={}", stage, n);
      // Per rank = total / N.
      EXPECT_GE(z[1], n * params) << where;
      EXPECT_LE(z[1], n * params + pad) << where;
      EXPECT_GE(z[2], n * grads) << where;
      EXPECT_LE(z[2], n * grads + pad) << where;
      EXPECT_EQ(z[3], n * state) << where;  // slices hold no padding
    }
  }
}

}  // namespace
}  // namespace braid::parallel
