// Checks the timeout-hybrid tests (coordinator and all-reduce forms) share:
// waiting for every gradient is synchronous SGD (N ranks x batch b against
// one process x batch N b); in every step every rank applied the same
// aggregate and holds the same record, and the aggregate is the weighted mean
// of the gradients its record names (bit s of rank r's mask: its gradient of
// step k - s, weight lambda^s).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "braid/parallel/hybrid/replicas.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/parallel/toy_replica.h"

namespace braid::parallel::testing {

// [step][rank]: the gradient each rank computed, the aggregate it applied, the record it got.
using PerStepRank = std::vector<std::vector<std::vector<double>>>;

inline void expect_weighted_means_of_their_records(const PerStepRank& local, const PerStepRank& applied,
                                                   const std::vector<std::vector<hybrid::StepRecord>>& records,
                                                   double lambda) {
  const auto steps = static_cast<int64_t>(records.size());
  for (int64_t s = 0; s < steps; ++s) {
    const hybrid::StepRecord& rec = records[s][0];
    const int world = static_cast<int>(records[s].size());
    for (int r = 1; r < world; ++r) {
      ASSERT_EQ(applied[s][r], applied[s][0]) << "step " << s << ": every rank applies the same aggregate";
      EXPECT_EQ(records[s][r].encode(), rec.encode()) << "step " << s;
    }
    std::vector<double> sum(applied[s][0].size(), 0.0);
    double weight = 0;
    for (int r = 0; r < world; ++r) {
      for (int64_t age = 0; age <= s; ++age) {
        if (!(rec.included[r] >> age & 1)) continue;
        const double w = std::pow(lambda, static_cast<double>(age));
        for (size_t e = 0; e < sum.size(); ++e) sum[e] += w * local[s - age][r][e];
        weight += w;
      }
    }
    EXPECT_DOUBLE_EQ(rec.weight, weight) << "step " << s;
    for (size_t e = 0; e < sum.size(); ++e) ASSERT_NEAR(applied[s][0][e], sum[e] / weight, 1e-12) << "step " << s;
  }
}

// `world` ranks of H (TimeoutHybrid or DeadlineAllreduce) with `options`
// waiting for every gradient train kSteps like one process.
template <class H>
void expect_synchronous_sgd(int world, const hybrid::HybridOptions& options) {
  const auto expected = train_single<double>(world);
  std::vector<std::vector<double>> got(static_cast<size_t>(world));
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    ToyReplica m(rank == 0 ? 7 : 100 + static_cast<uint64_t>(rank));  // setup() copies rank 0's
    H h(comm, options);
    h.setup(m.params, {}, {{"lr", kLr}});
    for (int64_t s = 0; s < kSteps; ++s) {
      h.before_forward();
      EXPECT_FALSE(h.step_decided()) << "step " << s;
      m.backward_rows(s, rank, world);
      h.combine_gradients();
      m.sgd(kLr);
      h.after_step();
      EXPECT_EQ(h.last().arrived, world) << "step " << s;
      EXPECT_EQ(h.last().step, s);
    }
    h.finish();  // checks the replicas are bit-identical
    got[static_cast<size_t>(rank)] = m.values();
    EXPECT_EQ(h.totals().arrived, world * kSteps);
    EXPECT_EQ(h.totals().late + h.totals().dropped + h.totals().stale, 0);
  });
  std::vector<double> want;
  for (const auto& part : expected) want.insert(want.end(), part.begin(), part.end());
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(got[static_cast<size_t>(r)], got[0]) << "rank " << r;
    for (size_t e = 0; e < want.size(); ++e) ASSERT_NEAR(got[static_cast<size_t>(r)][e], want[e], 1e-12) << e;
  }
}

}  // namespace braid::parallel::testing
