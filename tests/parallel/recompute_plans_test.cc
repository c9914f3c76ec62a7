// Activation recompute under every plan, in one process (nn/recompute.h):
// full and selective recompute give the parameters of no recompute bit for
// bit after SGD steps, with dropout on, under data parallelism,
// tensor, pipeline and context parallelism (ZeRO-3, which needs its own
// optimizer, and the trainer-level runs are in
// tests/models/gpt_recompute.sh).
#include <gtest/gtest.h>

#include "braid/tensor/cpu/autotune.h"
#include "tests/parallel/model_parallel_util.h"

namespace braid::parallel {
namespace {

struct PlanCase {
  std::string name;
  PlanOptions options;
  int world;
  double dropout;
};

std::vector<testing::RankResult> train(const PlanCase& s, nn::Recompute mode) {
  PlanOptions o = s.options;
  o.recompute = {.mode = mode};
  // Every rank's dropout masks from its own generator, the same state for
  // every mode.
  return testing::train_planned(
      s.world, o,
      [&] {
        thread_local Generator drop(42, 9);
        drop.set_state({42, 9, 0});
        return testing::char_transformer(5, 4, s.dropout, &drop);
      },
      true, 2, 4, 0.2);
}

TEST(RecomputePlans, FullAndSelectiveEqualNoRecomputeUnderEveryAxis) {
  cpu::set_deterministic_kernels(true);
  const std::vector<PlanCase> setups{
      {"DP 2", {.strategy = "allreduce", .mesh = {.data = 2}}, 2, 0.2},
      {"TP 2", {.mesh = {.tensor = 2}}, 2, 0.2},
      {"PP 2, 2 micro-batches", {.mesh = {.pipeline = 2}, .microbatches = 2}, 2, 0.2},
      {"CP 2 ring", {.mesh = {.context = 2}}, 2, 0},  // context parallelism refuses attention dropout
      {"CP 2 ulysses", {.mesh = {.context = 2}, .context_mode = "ulysses"}, 2, 0},
      {"TP 2 x CP 2", {.mesh = {.tensor = 2, .context = 2}}, 4, 0},
  };
  for (const PlanCase& s : setups) {
    SCOPED_TRACE(s.name);
    const auto none = train(s, nn::Recompute::none);
    for (nn::Recompute mode : {nn::Recompute::full, nn::Recompute::selective}) {
      const auto got = train(s, mode);
      for (int r = 0; r < s.world; ++r) {
        for (const auto& [name, v] : none[static_cast<size_t>(r)].params) {
          EXPECT_EQ(got[static_cast<size_t>(r)].params.at(name), v) << nn::name(mode) << " rank " << r << " " << name;
        }
      }
    }
  }
  cpu::set_deterministic_kernels(false);
}

}  // namespace
}  // namespace braid::parallel
