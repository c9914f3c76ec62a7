// Plans: the factory by name, micro-batches (gradient accumulation) against
// the whole batch, and micro-batches under the data axis's all-reduce
// against one process with the whole global batch.
#include <gtest/gtest.h>

#include <tuple>

#include "braid/autograd/engine.h"
#include "braid/comm/transport/inproc.h"
#include "braid/nn/module.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/linear.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/parallel/plan_factory.h"
#include "tests/parallel/toy_model.h"
#include "tests/testing/first_error.h"

namespace braid::parallel {
namespace {

using testing::kBatch;
using testing::kSteps;
using testing::mse;
using testing::ToyNet;

comm::Communicator one_rank() {
  return comm::Communicator(std::shared_ptr<comm::Transport>(comm::InprocWorld::create(1)->transport(0)));
}

TEST(PlanFactory, BuildsPartsByName) {
  auto net = std::make_shared<ToyNet>(7);
  PlannedModel local = make_plan({.strategy = "auto"}, comm::Communicator(), nullptr, net, mse);
  EXPECT_NE(local.plan->describe().find("grad sync none"), std::string::npos) << local.plan->describe();
  EXPECT_EQ(local.plan->data_world(), 1);
  EXPECT_TRUE(local.plan->is_leader());
  EXPECT_EQ(local.plan->shard_name(), "");
  PlannedModel dp = make_plan({.strategy = "allreduce"}, one_rank(), nullptr, net, mse);
  EXPECT_NE(dp.plan->describe().find("grad sync allreduce"), std::string::npos) << dp.plan->describe();
  EXPECT_EQ(dp.model.get(), net.get());  // nothing to shard
}

TEST(PlanFactory, UnknownNameListsKnownOnes) {
  try {
    make_plan({.strategy = "allreduse"}, comm::Communicator(), nullptr, std::make_shared<ToyNet>(7), mse);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce"), std::string::npos) << e.what();
  }
}

TEST(Microbatches, RowsCoverTheBatchInOrder) {
  for (int64_t n : {1, 4, 7, 64}) {
    for (int m = 1; m <= std::min<int64_t>(n, 5); ++m) {
      int64_t next = 0;
      for (int i = 0; i < m; ++i) {
        const auto [b, e] = microbatch_rows(n, m, i);
        EXPECT_EQ(b, next);
        EXPECT_GE(e - b, n / m);
        EXPECT_LE(e - b, n / m + 1);
        next = e;
      }
      EXPECT_EQ(next, n);
    }
  }
  EXPECT_THROW(microbatch_rows(3, 4, 0), ValueError);
}

// Gradient accumulation over M slices equals the whole batch's gradient
// (f64: the only difference is the order of the sums, ~1e-16 relative).
TEST(Microbatches, AccumulatedGradientEqualsTheWholeBatchGradient) {
  const auto [x, t] = testing::global_batch<double>(0, 3 * kBatch);
  ToyNet whole(7);
  LocalSchedule(1).run(whole, mse, x, t, [](bool) {});
  for (int m : {2, 3, 5}) {
    ToyNet net(7);
    std::vector<bool> syncs;
    const double loss = LocalSchedule(m).run(net, mse, x, t, [&](bool on) { syncs.push_back(on); });
    EXPECT_NEAR(loss, mse(whole.forward(x), t).item(), 1e-12);
    ASSERT_EQ(syncs.size(), static_cast<size_t>(m));
    for (int i = 0; i < m; ++i) EXPECT_EQ(syncs[static_cast<size_t>(i)], i + 1 == m) << "micro-batch " << i;
    const auto got = net.parameters(), want = whole.parameters();
    for (size_t k = 0; k < got.size(); ++k) {
      const auto a = got[k].grad().to_vector<double>(), b = want[k].grad().to_vector<double>();
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << "M " << m << " param " << k;
    }
  }
}

// A cap on the rows run at once cuts a batch into ceil(rows / cap) slices
// (at least `microbatches`), and the accumulated gradient is still the whole
// batch's.
TEST(Microbatches, ARowCapAccumulatesLargerBatchesOverMoreSlices) {
  const int64_t rows = 3 * kBatch;
  const auto [x, t] = testing::global_batch<double>(0, rows);
  ToyNet whole(7);
  LocalSchedule(1).run(whole, mse, x, t, [](bool) {});
  for (const auto& [micro, cap, slices] : std::vector<std::tuple<int, int64_t, size_t>>{
           {1, rows, 1}, {1, rows - 1, 2}, {1, (rows + 3) / 4, 4}, {5, rows, 5}}) {
    ToyNet net(7);
    size_t calls = 0;
    LocalSchedule(micro, cap).run(net, mse, x, t, [&](bool) { ++calls; });
    EXPECT_EQ(calls, slices) << "cap " << cap;
    const auto got = net.parameters(), want = whole.parameters();
    for (size_t k = 0; k < got.size(); ++k) {
      const auto a = got[k].grad().to_vector<double>(), b = want[k].grad().to_vector<double>();
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << "cap " << cap << " param " << k;
    }
  }
  EXPECT_THROW(LocalSchedule(1, -1), ConfigError);
}

// N ranks x M micro-batches under the bucketed all-reduce for K steps equal
// one process with the global batch N * b (f64, tolerance as above).
TEST(Microbatches, UnderDataParallelEqualOneProcess) {
  constexpr int kWorld = 2, kMicro = 2;
  const auto expected = testing::train_single<double>(kWorld);
  auto inproc = comm::InprocWorld::create(kWorld);
  std::vector<std::vector<std::vector<double>>> got(kWorld);
  test::run_threads_first_error(
      kWorld,
      [&](int rank) {
        comm::Communicator world(std::shared_ptr<comm::Transport>(inproc->transport(rank)),
                                 {.timeout = std::chrono::seconds(20)});
        auto net = std::make_shared<ToyNet>(7);
        PlannedModel pm = make_plan({.strategy = "auto", .microbatches = kMicro,
                                     .data_parallel = {.bucket_bytes = 64}},
                                    world, nullptr, net, mse);
        pm.plan->setup(*pm.model, {});
        for (int64_t s = 0; s < kSteps; ++s) {
          auto [x, t] = testing::global_batch<double>(s, kWorld * kBatch);
          const Tensor xs = slice(x, 0, rank * kBatch, (rank + 1) * kBatch);
          const Tensor ts = slice(t, 0, rank * kBatch, (rank + 1) * kBatch);
          pm.plan->forward_backward(*pm.model, pm.loss, xs, ts);
          pm.plan->finish_gradients();
          net->toy().sgd_step();
          pm.plan->after_step();
        }
        got[static_cast<size_t>(rank)] = net->toy().values();
      },
      [&] { inproc->shutdown("a rank failed"); });
  for (int r = 0; r < kWorld; ++r) {
    for (size_t k = 0; k < expected.size(); ++k) {
      for (size_t i = 0; i < expected[k].size(); ++i) {
        EXPECT_NEAR(got[static_cast<size_t>(r)][k][i], expected[k][i], 1e-10) << "rank " << r << " param " << k;
      }
    }
  }
}

}  // namespace
}  // namespace braid::parallel
