// Timeout-hybrid synchronisation (parallel/hybrid/) on in-process ranks:
// waiting for every gradient is synchronous SGD (N ranks x batch b against
// one process x batch N b); a rank held past the deadline has its gradient
// dropped, or applied one step later with weight lambda, and counted; every
// aggregate is the weighted mean its record says, and the replicas stay
// bit-identical throughout.
#include <gtest/gtest.h>

#include <thread>

#include "braid/parallel/hybrid/hybrid.h"
#include "tests/parallel/hybrid_records.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/parallel/toy_replica.h"
#include "tests/testing/error_message.h"

namespace braid::parallel::hybrid {
namespace {

using parallel::testing::kLr;
using parallel::testing::kSteps;
using parallel::testing::on_ranks;
using parallel::testing::ToyReplica;
using namespace std::chrono_literals;

class WaitForAll : public ::testing::TestWithParam<int> {};

TEST_P(WaitForAll, EqualsSynchronousSgdAndKeepsReplicasIdentical) {
  parallel::testing::expect_synchronous_sgd<TimeoutHybrid>(GetParam(), {.wait = 0ms, .late = Late::drop});
}

INSTANTIATE_TEST_SUITE_P(Worlds, WaitForAll, ::testing::Range(1, 10));

struct LateCase {
  Late late;
  int64_t max_staleness;
  const char* name;
};

class LateGradient : public ::testing::TestWithParam<LateCase> {};

// Rank 1 is held 600 ms before its gradient of step 3 (deadline 200 ms), and
// rank 0 800 ms before its own of step 4, so rank 1's late gradient is in by
// step 4's deadline: dropped, or applied at step 4 with staleness 1.
TEST_P(LateGradient, IsDroppedOrAppliedStaleCountedAndReplicasStayIdentical) {
  const LateCase c = GetParam();
  const int world = 3;
  const int64_t steps = 6;
  const double lambda = 0.5;
  // [step][rank] the gradient each rank computed, the aggregate it applied, the record it got.
  std::vector<std::vector<std::vector<double>>> local(steps, std::vector<std::vector<double>>(world)), applied = local;
  std::vector<std::vector<StepRecord>> records(steps, std::vector<StepRecord>(world));
  std::vector<HybridTotals> totals(world);
  std::vector<std::vector<double>> final_values(world);
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    TimeoutHybrid h(comm, {.wait = 200ms, .late = c.late, .stale_weight = lambda, .max_staleness = c.max_staleness,
                           .timeout = 20s});
    h.setup(m.params, {}, {});
    for (int64_t s = 0; s < steps; ++s) {
      h.before_forward();
      local[s][rank] = m.backward_rows(s, rank, world);
      if (s == 2 && rank == 1) std::this_thread::sleep_for(600ms);
      if (s == 3 && rank == 0) std::this_thread::sleep_for(800ms);
      h.combine_gradients();
      applied[s][rank] = m.grads();
      records[s][rank] = h.last();
      m.sgd(kLr);
      h.after_step();
    }
    h.finish();
    totals[rank] = h.totals();
    final_values[rank] = m.values();
  });
  const bool stale = c.late == Late::stale && c.max_staleness >= 1;
  parallel::testing::expect_weighted_means_of_their_records(local, applied, records, lambda);
  for (int64_t s = 0; s < steps; ++s) {
    const StepRecord& rec = records[s][0];
    const uint64_t expected_rank1 = s == 2 ? 0 : s == 3 && stale ? 0b11 : 1;
    EXPECT_EQ(rec.included, (std::vector<uint64_t>{1, expected_rank1, 1})) << "step " << s;
    EXPECT_EQ(rec.arrived, s == 2 ? world - 1 : world) << "step " << s;
    EXPECT_EQ(rec.late, s == 2 ? 1 : 0) << "step " << s;
    EXPECT_EQ(rec.stale, s == 3 && stale ? 1 : 0) << "step " << s;
  }
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(final_values[r], final_values[0]) << "rank " << r;
    const HybridTotals& t = totals[r];  // the coordinator's, on every rank
    EXPECT_EQ(t.steps, steps);
    EXPECT_EQ(t.arrived, world * steps - 1);
    EXPECT_EQ(t.late, 1);
    EXPECT_EQ(t.stale, stale ? 1 : 0);
    EXPECT_EQ(t.dropped, stale ? 0 : 1);
    EXPECT_EQ(t.max_staleness, stale ? 1 : 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, LateGradient,
                         ::testing::Values(LateCase{Late::drop, 4, "drop"}, LateCase{Late::stale, 4, "stale"},
                                           LateCase{Late::stale, 0, "stale_none_allowed"}),
                         [](const auto& info) { return std::string(info.param.name); });

// Rank 1 is 150 ms slower every step than a 10 ms deadline allows: without a
// bound it would fall one more step behind each step.
TEST(TimeoutHybrid, APersistentStragglerFallsAtMostMaxLagStepsBehind) {
  const int world = 2;
  const int64_t steps = 8, max_lag = 2;
  std::vector<HybridTotals> totals(world);
  std::vector<std::vector<double>> final_values(world);
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    TimeoutHybrid h(comm, {.wait = 10ms, .late = Late::drop, .max_lag = max_lag, .catch_up = CatchUp::compute});
    h.setup(m.params, {}, {});
    for (int64_t s = 0; s < steps; ++s) {
      h.before_forward();
      m.backward_rows(s, rank, world);
      if (rank == 1) std::this_thread::sleep_for(150ms);
      h.combine_gradients();
      m.sgd(kLr);
      h.after_step();
    }
    h.finish();
    totals[rank] = h.totals();
    final_values[rank] = m.values();
  });
  EXPECT_EQ(final_values[1], final_values[0]);
  EXPECT_EQ(totals[0].max_lag, max_lag);
  EXPECT_GE(totals[0].late, steps - 1);
  EXPECT_EQ(totals[0].late, totals[0].dropped);
  EXPECT_EQ(totals[0].arrived + totals[0].late, world * steps);
}

// The same straggler with catch_up = skip: at each step whose aggregate is
// already waiting it skips the gradient (and the 150 ms that stand for its
// compute), so the coordinator goes at its own pace, and the straggler's
// header tells it which gradients never come.
TEST(TimeoutHybrid, AStragglerThatSkipsDecidedStepsKeepsUpAndStaysIdentical) {
  const int world = 3;
  const int64_t steps = 12;
  std::vector<HybridTotals> totals(world);
  std::vector<std::vector<double>> final_values(world);
  std::vector<int64_t> computed(world, 0);
  double coordinator_s = 0;
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    TimeoutHybrid h(comm, {.wait = 10ms, .late = Late::drop, .max_lag = 20, .catch_up = CatchUp::skip});
    h.setup(m.params, {}, {});
    const auto start = Clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      h.before_forward();
      if (!h.step_decided()) {
        m.backward_rows(s, rank, world);
        ++computed[static_cast<size_t>(rank)];
        std::this_thread::sleep_for(rank == 2 ? 150ms : 20ms);
      }
      h.combine_gradients();
      m.sgd(kLr);
      h.after_step();
    }
    if (rank == 0) coordinator_s = seconds_since(start);
    h.finish();
    totals[static_cast<size_t>(rank)] = h.totals();
    final_values[static_cast<size_t>(rank)] = m.values();
  });
  for (int r = 1; r < world; ++r) EXPECT_EQ(final_values[static_cast<size_t>(r)], final_values[0]) << "rank " << r;
  EXPECT_EQ(computed[0], steps);
  EXPECT_EQ(computed[1], steps);
  EXPECT_LT(computed[2], steps / 2) << "the straggler computes only the steps still open when it starts them";
  const HybridTotals& t = totals[0];
  EXPECT_EQ(t.skipped, steps - computed[2]);
  EXPECT_EQ(t.arrived + t.late, world * steps);
  EXPECT_EQ(t.late, t.dropped);
  EXPECT_GE(t.late, t.skipped);
  // Paced by the straggler it would take >= 12 x 150 ms; the coordinator
  // does not wait for it while it still owes an earlier step (max_lag 20 never binds).
  EXPECT_LT(coordinator_s, 1.0) << "the coordinator went at the straggler's pace";
}

TEST(TimeoutHybrid, FinishAveragesFloatBuffersAndResumesItsStepCount) {
  const int world = 3;
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    const Tensor stats = Tensor::zeros({4}, DType::f64);
    TimeoutHybrid h(comm, {.wait = 0ms});
    h.setup(m.params, {{"bn.running_mean", stats}}, {});
    stats.fill(rank);
    for (int64_t s = 0; s < 2; ++s) {
      h.before_forward();
      m.backward_rows(s, rank, world);
      h.combine_gradients();
      m.sgd(kLr);
      h.after_step();
    }
    EXPECT_EQ(h.state_dict()["steps"], 2);
    h.finish();
    EXPECT_EQ(stats.to_vector<double>(), std::vector<double>(4, 1.0));
    // A resumed run goes on with the next step's tags on every rank.
    TimeoutHybrid again(comm, {.wait = 0ms});
    again.load_state_dict(h.state_dict());
    again.setup(m.params, {}, {});
    again.before_forward();
    m.backward_rows(2, rank, world);
    again.combine_gradients();
    EXPECT_EQ(again.last().step, 2);
    EXPECT_EQ(again.last().arrived, world);
    again.after_step();
    again.finish();
  });
}

TEST(TimeoutHybrid, WaitsThatTimeOutNameRankOperationAndWait) {
  std::string coordinator, worker;
  on_ranks(2, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    TimeoutHybrid h(comm, {.wait = 0ms, .timeout = 200ms});
    h.setup(m.params, {}, {});
    h.before_forward();
    m.backward_rows(0, rank, 2);
    if (rank == 1) {  // alive, but its gradient never comes
      std::this_thread::sleep_for(1500ms);
      return;
    }
    coordinator = test::message_of<TimeoutError>([&] { h.combine_gradients(); });
  });
  on_ranks(2, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    TimeoutHybrid h(comm, {.wait = 0ms, .timeout = 200ms});
    h.setup(m.params, {}, {});
    h.before_forward();
    m.backward_rows(0, rank, 2);
    if (rank == 0) {  // the coordinator never aggregates
      std::this_thread::sleep_for(1500ms);
      return;
    }
    worker = test::message_of<TimeoutError>([&] { h.combine_gradients(); });
  });
  for (const char* part : {"rank 0 of 2 on the data axis", "coordinator waiting for rank 1's gradient of step 1",
                           "waited"}) {
    EXPECT_NE(coordinator.find(part), std::string::npos) << part << " in: " << coordinator;
  }
  for (const char* part : {"rank 1 of 2 on the data axis", "receive of the aggregate from the coordinator (data rank 0)",
                           "of step 1", "waited"}) {
    EXPECT_NE(worker.find(part), std::string::npos) << part << " in: " << worker;
  }
}

TEST(TimeoutHybrid, RefusesOptionsOutOfRange) {
  auto one = comm::InprocWorld::create(1);
  comm::Communicator c(std::shared_ptr<comm::Transport>(one->transport(0)));
  EXPECT_THROW(TimeoutHybrid(c, {.stale_weight = 0}), ConfigError);
  EXPECT_THROW(TimeoutHybrid(c, {.max_staleness = 63}), ConfigError);
  EXPECT_THROW(TimeoutHybrid(c, {.max_lag = 0}), ConfigError);
  EXPECT_THROW(TimeoutHybrid(c, {.wait = -1ms}), ConfigError);
  EXPECT_THROW(parse_late("wait"), ConfigError);
  EXPECT_THROW(parse_catch_up("never"), ConfigError);
}

}  // namespace
}  // namespace braid::parallel::hybrid
