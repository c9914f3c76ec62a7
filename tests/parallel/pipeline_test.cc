// Pipeline parallelism: schedules against their definitions, cuts, and P
// stages on in-process ranks against one process with the whole model.
#include <gtest/gtest.h>

#include "braid/parallel/pipeline/partition.h"
#include "braid/parallel/pipeline/schedule.h"
#include "braid/parallel/pipeline/stage.h"
#include "braid/tensor/cpu/gemm.h"
#include "tests/parallel/model_parallel_util.h"

namespace braid::parallel {
namespace {

using pipeline::Action;
using pipeline::Schedule;
using namespace testing;

TEST(PipelineSchedule, OrdersFollowTheDefinitions) {
  EXPECT_EQ(pipeline::to_string(pipeline::actions(Schedule::gpipe, 3, 1, 3)), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(pipeline::to_string(pipeline::actions(Schedule::one_f_one_b, 3, 0, 4)), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(pipeline::to_string(pipeline::actions(Schedule::one_f_one_b, 3, 1, 4)), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(pipeline::to_string(pipeline::actions(Schedule::one_f_one_b, 3, 2, 4)), "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(pipeline::to_string(pipeline::actions(Schedule::one_f_one_b, 4, 0, 2)), "F0 F1 B0 B1");
  for (int p = 1; p <= 4; ++p) {
    for (int s = 0; s < p; ++s) {
      for (int m = 1; m <= 8; ++m) {
        for (Schedule k : {Schedule::gpipe, Schedule::one_f_one_b}) {
          const auto order = pipeline::actions(k, p, s, m);
          EXPECT_EQ(pipeline::check_actions(order, m), "") << pipeline::to_string(order);
          EXPECT_EQ(pipeline::max_live(order), k == Schedule::gpipe ? m : std::min(p - s, m))
              << pipeline::name(k) << " P " << p << " s " << s << " M " << m;
        }
      }
    }
  }
  EXPECT_NE(pipeline::check_actions({{Action::backward, 0}, {Action::forward, 0}}, 1), "");
  EXPECT_THROW(pipeline::parse_schedule("pipedream"), ConfigError);
}

TEST(PipelinePartition, BalancedCutsMinimiseTheLargestStage) {
  EXPECT_EQ(pipeline::balanced_starts({1, 1, 1, 1}, 2), (std::vector<int>{0, 2}));
  EXPECT_EQ(pipeline::balanced_starts({10, 1, 1, 1, 1}, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(pipeline::balanced_starts({1, 2, 3, 4, 5, 6}, 3), (std::vector<int>{0, 3, 5}));  // 6 | 9 | 6
  EXPECT_EQ(pipeline::balanced_starts({1, 1, 1}, 3), (std::vector<int>{0, 1, 2}));
  EXPECT_THROW(pipeline::balanced_starts({1, 1}, 3), ConfigError);
  EXPECT_EQ(pipeline::starts_from_boundaries({2, 4}, 5, 3), (std::vector<int>{0, 2, 4}));
  EXPECT_THROW(pipeline::starts_from_boundaries({4, 2}, 5, 3), ConfigError);
  EXPECT_THROW(pipeline::starts_from_boundaries({2}, 5, 3), ConfigError);
  auto m = mlp(1);
  auto stage = pipeline::cut_stage(*m, {0, 2}, 1);
  ASSERT_EQ(stage->size(), 3u);
  EXPECT_EQ(stage->named_parameters().front().first, "2.weight");  // names of the whole model
}

struct Case {
  int stages, microbatches;
  Schedule schedule;
  bool tokens;
  bool recompute = false;
};

std::string describe(const Case& c) {
  const char* schedule = c.schedule == Schedule::gpipe         ? "gpipe"
                         : c.schedule == Schedule::zero_bubble ? "zero_bubble"
                                                               : "1f1b";
  return fmt::format("P{}_M{}_{}_{}{}", c.stages, c.microbatches, schedule,
                     c.tokens ? "transformer" : "mlp", c.recompute ? "_recompute" : "");
}

class PipelineEquivalence : public ::testing::TestWithParam<Case> {};

// P stages x M micro-batches for 3 SGD steps equal one process with the
// whole model and batch. f32 throughout; a stage cut changes nothing in the
// arithmetic, but micro-batches sum each gradient in M parts and weight the
// losses by n_i / N, so values differ in the last bits: 2e-5 absolute on
// parameters of order 0.1-1 after 3 steps.
TEST_P(PipelineEquivalence, StagesEqualOneProcess) {
  const Case c = GetParam();
  constexpr int kSteps = 3;
  constexpr int64_t kRows = 7;  // not divisible by 2 or 4: micro-batches of unequal rows
  auto build = [&] { return c.tokens ? std::static_pointer_cast<nn::Sequential>(char_transformer(3)) : mlp(3); };
  const Params expected = train_single(build(), c.tokens, kSteps, kRows, 0.1);
  PlanOptions o{.strategy = "auto", .mesh = {.pipeline = c.stages}, .microbatches = c.microbatches,
                .schedule = std::string(pipeline::name(c.schedule)),
                .recompute = {.mode = c.recompute ? nn::Recompute::full : nn::Recompute::none}};
  const auto got = train_planned(c.stages, o, build, c.tokens, kSteps, kRows, 0.1);
  size_t seen = 0;
  for (int r = 0; r < c.stages; ++r) {
    EXPECT_FALSE(got[static_cast<size_t>(r)].params.empty()) << "stage " << r << " holds no parameters";
    seen += got[static_cast<size_t>(r)].params.size();
    expect_matches_whole(got[static_cast<size_t>(r)], expected, 2e-5, "stage " + std::to_string(r));
  }
  EXPECT_EQ(seen, expected.size()) << "the stages together hold every parameter once";
}

INSTANTIATE_TEST_SUITE_P(
    Pipelines, PipelineEquivalence,
    ::testing::Values(Case{2, 1, Schedule::gpipe, false}, Case{2, 2, Schedule::gpipe, false},
                      Case{2, 4, Schedule::one_f_one_b, false}, Case{3, 3, Schedule::one_f_one_b, false},
                      Case{3, 2, Schedule::gpipe, false}, Case{2, 2, Schedule::one_f_one_b, true},
                      Case{3, 4, Schedule::gpipe, true}, Case{3, 4, Schedule::one_f_one_b, true},
                      Case{2, 3, Schedule::one_f_one_b, true, /*recompute=*/true},
                      // Recomputed blocks back-propagate inside B: their weights' gradients are not deferred to W.
                      Case{2, 4, Schedule::zero_bubble, true, /*recompute=*/true}),
    [](const ::testing::TestParamInfo<Case>& i) { return describe(i.param); });

// Each stage runs exactly its schedule's order and holds at most
// min(P - s, M) micro-batches' activations under 1F1B, M under GPipe.
TEST(PipelineStage, RunsTheScheduleAndCountsLiveActivations) {
  constexpr int kStages = 3, kMicro = 5;
  for (Schedule k : {Schedule::gpipe, Schedule::one_f_one_b}) {
    auto inproc = comm::InprocWorld::create(kStages);
    test::run_threads_first_error(
        kStages,
        [&](int rank) {
          comm::Communicator comm(std::shared_ptr<comm::Transport>(inproc->transport(rank)),
                                  {.timeout = std::chrono::seconds(20)});
          auto model = pipeline::cut_stage(*mlp(3), {0, 2, 4}, rank);
          pipeline::Stage stage(comm, {.schedule = k, .microbatches = kMicro});
          auto [x, t] = batch(false, 0, 10);
          stage.run(*model, nn::cross_entropy_loss, x, t, [](bool) {});
          EXPECT_EQ(stage.last_order(), pipeline::actions(k, kStages, rank, kMicro));
          EXPECT_EQ(stage.last_max_live(), k == Schedule::gpipe ? kMicro : std::min(kStages - rank, kMicro));
          EXPECT_GT(stage.stats().at("busy_ms").get<double>(), 0);
        },
        [&] { inproc->shutdown("a rank failed"); });
  }
}

// The blocks' recompute (nn/recompute.h) inside a stage replays the dropout
// draws: gradients bit-equal to keeping the activations, with dropout on.
// (The GEMM library is pinned: while the autotuner is still trying
// libraries, a recompute's extra products would meet a different library
// than the same product without recompute.)
TEST(PipelineStage, RecomputeGivesBitEqualGradients) {
  cpu::set_default_gemm_backend(cpu::GemmBackend::openblas);
  std::vector<std::map<std::string, std::vector<float>>> grads[2];
  for (int recompute = 0; recompute < 2; ++recompute) {
    auto inproc = comm::InprocWorld::create(2);
    grads[recompute].resize(2);
    test::run_threads_first_error(
        2,
        [&](int rank) {
          set_num_threads(1);
          comm::Communicator comm(std::shared_ptr<comm::Transport>(inproc->transport(rank)),
                                  {.timeout = std::chrono::seconds(20)});
          Generator drop(42, 9);
          auto whole = char_transformer(3, 3, 0.2, &drop);
          nn::apply_recompute(*whole, {.mode = recompute == 1 ? nn::Recompute::full : nn::Recompute::none});
          auto model = pipeline::cut_stage(*whole, {0, 2}, rank);
          pipeline::Stage stage(comm, {.schedule = Schedule::one_f_one_b, .microbatches = 3});
          auto [x, t] = batch(true, 0, 6);
          stage.run(*model, nn::cross_entropy_loss, x, t, [](bool) {});
          for (const auto& [name, p] : model->named_parameters()) {
            grads[recompute][static_cast<size_t>(rank)][name] = p.grad().to_vector<float>();
          }
        },
        [&] { inproc->shutdown("a rank failed"); });
  }
  cpu::set_default_gemm_backend(cpu::GemmBackend::automatic);
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(grads[0][static_cast<size_t>(r)].empty());
    for (const auto& [name, g] : grads[0][static_cast<size_t>(r)]) {
      EXPECT_EQ(grads[1][static_cast<size_t>(r)].at(name), g) << name << " on stage " << r;
    }
  }
}

// A stage that never runs its part: its neighbour fails within the timeout,
// naming itself, the missing stage and what it waited for.
TEST(PipelineStage, AMissingStageIsNamedWithinTheTimeout) {
  auto inproc = comm::InprocWorld::create(2);
  std::string message;
  std::thread idle([&] { std::this_thread::sleep_for(std::chrono::milliseconds(1500)); });
  try {
    comm::Communicator comm(std::shared_ptr<comm::Transport>(inproc->transport(0)), {.timeout = std::chrono::seconds(1)});
    auto model = pipeline::cut_stage(*mlp(3), {0, 2}, 0);
    pipeline::Stage stage(comm, {.microbatches = 2, .timeout = std::chrono::seconds(1)});
    auto [x, t] = batch(false, 0, 4);
    const auto t0 = std::chrono::steady_clock::now();
    stage.run(*model, nn::cross_entropy_loss, x, t, [](bool) {});
    ADD_FAILURE() << "no error";
    (void)t0;
  } catch (const TimeoutError& e) {
    message = e.what();
  }
  idle.join();
  inproc->shutdown("done");
  EXPECT_NE(message.find("pipeline stage 0 of 2"), std::string::npos) << message;
  EXPECT_NE(message.find("gradient of micro-batch 0 from stage 1"), std::string::npos) << message;
}

}  // namespace
}  // namespace braid::parallel
