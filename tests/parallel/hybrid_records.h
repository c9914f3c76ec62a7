// Checks the timeout-hybrid tests (coordinator and all-reduce forms) share:
// in every step every rank applied the same aggregate and holds the same
// record, and the aggregate is the weighted mean of the gradients its record
// names (bit s of rank r's mask: its gradient of step k - s, weight lambda^s).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "braid/parallel/hybrid/inbox.h"

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

}  // namespace braid::parallel::testing
