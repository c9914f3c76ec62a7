// Hogwild! and Cyclades against serial SGD.
#include <gtest/gtest.h>

#include "braid/linear/sgd.h"
#include "tests/linear/problems.h"

namespace braid::linear_model {
namespace {

SolverOptions sgd_options(int threads, int64_t batch) {
  SolverOptions o;
  o.epochs = 4;
  o.threads = threads;
  o.batch = batch;
  o.step = 0.5;
  o.seed = 3;
  return o;
}

// Cyclades' point: components of a batch's conflict graph share no
// coordinate, so any thread count gives serial SGD's bits.
TEST(Cyclades, IsBitIdenticalToSerialSgdOverTheSamePermutation) {
  const Examples data = testing::random_problem(3000, 2000, 8, false, 11);
  for (Loss loss : {Loss::logistic, Loss::hinge, Loss::squared_hinge}) {
    for (Regularizer reg : {Regularizer{1e-3, 0}, Regularizer{1e-4, 1e-4}}) {
      const Problem p{.loss = loss, .reg = reg};
      const Result serial = solve_sgd(p, data, nullptr, sgd_options(1, 1));
      for (int threads : {1, 2, 3}) {
        for (int64_t batch : {1, 64, 500, 3000}) {
          const Result cyc = solve_cyclades(p, data, nullptr, sgd_options(threads, batch));
          ASSERT_EQ(cyc.w, serial.w) << loss_name(loss) << " l1 " << reg.l1 << ", " << threads << " threads, batch "
                                     << batch;
          ASSERT_EQ(cyc.history.back().primal, serial.history.back().primal);
        }
      }
    }
  }
}

TEST(Cyclades, SplitsASparseBatchIntoManyComponentsAndStillDescends) {
  // A dense conflict graph (every row shares feature 0) is one component:
  // still correct, just serial.
  Examples data = testing::random_problem(500, 300, 5, false, 5);
  SparseMatrix x;
  x.cols = data.x.cols + 1;
  for (int64_t r = 0; r < data.size(); ++r) {
    std::vector<int32_t> idx{0};
    std::vector<float> val{1.0f};
    for (size_t k = 0; k < data.x.row(r).index.size(); ++k) {
      idx.push_back(data.x.row(r).index[k] + 1);
      val.push_back(data.x.row(r).value[k]);
    }
    x.append(idx, val);
  }
  data.x = std::move(x);
  const Problem p{.loss = Loss::logistic, .reg = {1e-3, 0}};
  EXPECT_EQ(solve_cyclades(p, data, nullptr, sgd_options(3, 100)).w, solve_sgd(p, data, nullptr, sgd_options(1, 1)).w);
}

TEST(Hogwild, ReachesTheSerialObjectiveWithinNoise) {
  const Examples data = testing::random_problem(20000, 20000, 10, false, 9);
  const Problem p{.loss = Loss::logistic, .reg = {1e-4, 0}};
  SolverOptions o = sgd_options(1, 1);
  o.epochs = 8;
  const double serial = solve_sgd(p, data, nullptr, o).history.back().primal;
  const double start = primal_objective(p, data, std::vector<double>(static_cast<size_t>(data.x.cols), 0.0));
  for (int threads : {2, 4}) {
    o.threads = threads;
    const double hog = solve_hogwild(p, data, nullptr, o).history.back().primal;
    // Within 1 % of serial SGD's distance travelled from the start.
    EXPECT_NEAR(hog, serial, 0.01 * (start - serial)) << threads << " threads";
  }
}

TEST(Sgd, L1SoftThresholdMakesTheSolutionSparse) {
  const Examples data = testing::random_problem(400, 100, 4, false, 2);
  auto zeros_with = [&](double l1) {
    const Problem p{.loss = Loss::logistic, .reg = {0, l1}};
    const Result r = solve_sgd(p, data, nullptr, sgd_options(1, 1));
    EXPECT_LT(r.history.back().primal, primal_objective(p, data, std::vector<double>(100, 0.0))) << "l1 " << l1;
    return std::count(r.w.begin(), r.w.end(), 0.0);
  };
  const auto dense = zeros_with(0), sparse = zeros_with(0.005);
  EXPECT_GT(sparse, dense + 10) << "l1 zeroes coordinates: " << dense << " zeros without it, " << sparse << " with";
}

}  // namespace
}  // namespace braid::linear_model
