// Timeout-hybrid synchronisation via all-reduce (parallel/hybrid/
// deadline_allreduce.h) on in-process ranks: without a deadline it is
// synchronous SGD; a gradient that misses its step is dropped or applied
// stale and counted; every aggregate is the weighted mean its record names;
// a straggler neither paces the others nor falls more than max_lag behind;
// and the replicas stay bit-identical throughout.
#include <gtest/gtest.h>

#include <thread>

#include "braid/parallel/hybrid/deadline_allreduce.h"
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

HybridOptions via_allreduce(HybridOptions o) {
  o.via = Via::allreduce;
  return o;
}

// One trainer step as braid train takes it: skipped when already decided.
template <class Compute>
bool step(DeadlineAllreduce& h, ToyReplica& m, Compute compute) {
  h.before_forward();
  const bool decided = h.step_decided();
  if (!decided) compute();
  h.combine_gradients();
  m.sgd(kLr);
  h.after_step();
  return !decided;
}

class ViaAllreduceWaitForAll : public ::testing::TestWithParam<int> {};

TEST_P(ViaAllreduceWaitForAll, EqualsSynchronousSgdAndKeepsReplicasIdentical) {
  parallel::testing::expect_synchronous_sgd<DeadlineAllreduce>(GetParam(), via_allreduce({.wait = 0ms}));
}

INSTANTIATE_TEST_SUITE_P(Worlds, ViaAllreduceWaitForAll, ::testing::Range(1, 10));

struct LateCase {
  Late late;
  int64_t max_staleness;
  const char* name;
};

class ViaAllreduceLateGradient : public ::testing::TestWithParam<LateCase> {};

// Deadline 300 ms after the previous aggregate. Rank 1 is held 450 ms before
// its gradient of step 2: step 2 closes without it at 300 ms, and the late
// gradient is handed before step 3's deadline, so step 3 takes it with
// staleness 1 (or it is dropped), beside rank 1's own gradient of step 3.
TEST_P(ViaAllreduceLateGradient, IsDroppedOrAppliedStaleCountedAndReplicasStayIdentical) {
  const LateCase c = GetParam();
  const int world = 3;
  const int64_t steps = 6;
  const double lambda = 0.5;
  std::vector<std::vector<std::vector<double>>> local(steps, std::vector<std::vector<double>>(world)), applied = local;
  std::vector<std::vector<StepRecord>> records(steps, std::vector<StepRecord>(world));
  std::vector<HybridTotals> totals(world);
  std::vector<std::vector<double>> final_values(world);
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    DeadlineAllreduce h(comm, via_allreduce({.wait = 300ms, .late = c.late, .stale_weight = lambda,
                                             .max_staleness = c.max_staleness, .timeout = 20s}));
    h.setup(m.params, {}, {});
    for (int64_t s = 0; s < steps; ++s) {
      h.before_forward();
      ASSERT_FALSE(h.step_decided()) << "rank " << rank << " step " << s;
      local[s][rank] = m.backward_rows(s, rank, world);
      if (s == 2 && rank == 1) std::this_thread::sleep_for(450ms);
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
    const HybridTotals& t = totals[r];
    EXPECT_EQ(t.steps, steps);
    EXPECT_EQ(t.arrived, world * steps - 1);
    EXPECT_EQ(t.late, 1);
    EXPECT_EQ(t.stale, stale ? 1 : 0);
    EXPECT_EQ(t.dropped, stale ? 0 : 1);
    EXPECT_EQ(t.max_staleness, stale ? 1 : 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, ViaAllreduceLateGradient,
                         ::testing::Values(LateCase{Late::drop, 4, "drop"}, LateCase{Late::stale, 4, "stale"},
                                           LateCase{Late::stale, 0, "stale_none_allowed"}),
                         [](const auto& info) { return std::string(info.param.name); });

// Rank 2 takes 150 ms a step where the others take 20 ms and a step closes
// 40 ms after the previous one: the fast ranks go at the deadline's pace, and
// the straggler skips the steps that closed while it computed.
TEST(ViaAllreduce, AStragglerThatSkipsDecidedStepsDoesNotPaceTheOthers) {
  const int world = 3;
  const int64_t steps = 12;
  std::vector<HybridTotals> totals(world);
  std::vector<std::vector<double>> final_values(world);
  std::vector<int64_t> computed(world, 0);
  std::vector<double> seconds(world, 0);
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    DeadlineAllreduce h(comm, via_allreduce({.wait = 40ms, .late = Late::drop, .max_lag = 20}));
    h.setup(m.params, {}, {});
    const auto start = Clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      computed[static_cast<size_t>(rank)] += step(h, m, [&] {
        m.backward_rows(s, rank, world);
        std::this_thread::sleep_for(rank == 2 ? 150ms : 20ms);
      });
    }
    seconds[static_cast<size_t>(rank)] = seconds_since(start);
    h.finish();
    totals[static_cast<size_t>(rank)] = h.totals();
    final_values[static_cast<size_t>(rank)] = m.values();
  });
  for (int r = 1; r < world; ++r) EXPECT_EQ(final_values[static_cast<size_t>(r)], final_values[0]) << "rank " << r;
  EXPECT_EQ(computed[0], steps);
  EXPECT_EQ(computed[1], steps);
  EXPECT_LT(computed[2], steps / 2) << "the straggler computes only the steps still open when it starts them";
  for (int r = 0; r < world; ++r) {
    const HybridTotals& t = totals[static_cast<size_t>(r)];
    EXPECT_EQ(t.skipped, steps - computed[2]) << "rank " << r;
    EXPECT_EQ(t.arrived + t.late, world * steps);
    EXPECT_EQ(t.late, t.dropped);
    EXPECT_GE(t.late, t.skipped);
  }
  // Paced by the straggler it would take >= 12 x 150 ms.
  EXPECT_LT(seconds[0], 1.2) << "the fast ranks went at the straggler's pace";
}

// The same straggler computing every step (catch_up = compute) is held to
// max_lag: past it the others' steps wait for its gradient.
TEST(ViaAllreduce, APersistentStragglerFallsAtMostMaxLagStepsBehind) {
  const int world = 2;
  const int64_t steps = 8, max_lag = 2;
  std::vector<HybridTotals> totals(world);
  std::vector<std::vector<double>> final_values(world);
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    DeadlineAllreduce h(comm, via_allreduce({.wait = 10ms, .late = Late::drop, .max_lag = max_lag,
                                             .catch_up = CatchUp::compute}));
    h.setup(m.params, {}, {});
    for (int64_t s = 0; s < steps; ++s) {
      step(h, m, [&] {
        m.backward_rows(s, rank, world);
        if (rank == 1) std::this_thread::sleep_for(150ms);
      });
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

// A deadline shorter than every rank's compute closes a step before any
// gradient is in (the first step waits for all: it holds the warm-up): its
// aggregate is zero on every rank and its record says so.
TEST(ViaAllreduce, ADeadlineShorterThanTheComputeClosesAnEmptyStep) {
  const int world = 2;
  std::vector<StepRecord> second(world);
  std::vector<std::vector<double>> applied(world);
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    DeadlineAllreduce h(comm, via_allreduce({.wait = 10ms, .late = Late::drop}));
    h.setup(m.params, {}, {});
    for (int64_t s = 0; s < 3; ++s) {
      step(h, m, [&] {
        m.backward_rows(s, rank, world);
        std::this_thread::sleep_for(80ms);
      });
      if (s == 1) second[rank] = h.last(), applied[rank] = m.grads();
    }
    h.finish();
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(second[r].arrived, 0) << "rank " << r;
    EXPECT_EQ(second[r].late, world);
    EXPECT_EQ(second[r].weight, 0.0);
    EXPECT_EQ(applied[r], std::vector<double>(applied[r].size(), 0.0));
  }
}

TEST(ViaAllreduce, FinishAveragesFloatBuffersAndResumesItsStepCount) {
  const int world = 3;
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    const Tensor stats = Tensor::zeros({4}, DType::f64);
    DeadlineAllreduce h(comm, via_allreduce({.wait = 0ms}));
    h.setup(m.params, {{"bn.running_mean", stats}}, {});
    stats.fill(rank);
    for (int64_t s = 0; s < 2; ++s) step(h, m, [&] { m.backward_rows(s, rank, world); });
    EXPECT_EQ(h.state_dict()["steps"], 2);
    h.finish();
    EXPECT_EQ(stats.to_vector<double>(), std::vector<double>(4, 1.0));
    DeadlineAllreduce again(comm, via_allreduce({.wait = 0ms}));
    again.setup(m.params, {}, {});
    again.load_state_dict(h.state_dict());
    step(again, m, [&] { m.backward_rows(2, rank, world); });
    EXPECT_EQ(again.last().step, 2);
    EXPECT_EQ(again.last().arrived, world);
    again.finish();
  });
}

TEST(ViaAllreduce, AWaitThatTimesOutNamesRankOperationAndStep) {
  std::string message;
  on_ranks(2, [&](int rank, comm::Communicator comm) {
    ToyReplica m(7);
    DeadlineAllreduce h(comm, via_allreduce({.wait = 0ms, .timeout = 200ms}));
    h.setup(m.params, {}, {});
    h.before_forward();
    m.backward_rows(0, rank, 2);
    if (rank == 1) {  // alive, but its gradient never comes
      std::this_thread::sleep_for(1500ms);
      return;
    }
    message = test::message_of<TimeoutError>([&] { h.combine_gradients(); });
  });
  for (const char* part : {"rank 0 of 2 on the data axis", "timeout-hybrid (via all-reduce)", "of step 1", "waited"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  }
}

}  // namespace
}  // namespace braid::parallel::hybrid
