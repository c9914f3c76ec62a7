// braid's solvers against LIBLINEAR (liblinear-train) on the same data and
// regularisation: each reaches LIBLINEAR's primal objective to 1e-4 relative.
#include <gtest/gtest.h>

#include "braid/linear/solvers.h"
#include "tests/linear/problems.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/testing/temp_dir.h"

namespace braid::linear_model {
namespace {

struct Case {
  std::string name;
  std::string data;  // "heart", "sparse" (classification) or "regression"
  Loss loss;
  bool l1;            // l1 instead of l2
  int liblinear;      // -s
  std::string solver;
  int epochs;
  int ranks = 1;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

class LiblinearReference : public ::testing::TestWithParam<Case> {};

TEST_P(LiblinearReference, ReachesLiblinearsObjective) {
  const Case& c = GetParam();
  test::TempDir dir;
  std::string file = testing::kHeartScale;
  Examples train;
  if (c.data == "heart") {
    train = read_libsvm(file);
  } else {
    train = testing::random_problem(1500, 400, 12, c.data == "regression", 7);
    file = dir.file("train.svm");
    write_libsvm(train, file);
    train = read_libsvm(file, 400, c.data != "regression");  // exactly the f32 values LIBLINEAR reads
  }
  const double cost = 1.0;
  const double lambda = 1 / (cost * static_cast<double>(train.size()));
  Problem p{.loss = c.loss, .reg = {}};
  (c.l1 ? p.reg.l1 : p.reg.l2) = lambda;
  const std::string extra = c.liblinear == 11 ? "-p 0" : "";
  const std::vector<double> reference = testing::liblinear_weights(file, dir.str(), c.liblinear, cost, 1e-8, train.x.cols, extra);
  const double target = primal_objective(p, train, reference);

  SolverOptions o;
  o.epochs = c.epochs;
  o.gap_tolerance = 1e-7;
  std::vector<double> w;
  if (!is_distributed(c.solver)) {
    w = solve(c.solver, p, train, nullptr, o, nullptr).w;
  } else {
    std::vector<std::vector<double>> ws(static_cast<size_t>(c.ranks));
    parallel::testing::on_ranks(c.ranks, [&](int r, comm::Communicator comm) {
      ws[r] = solve(c.solver, p, train, nullptr, o, &comm).w;
    });
    for (const auto& other : ws) EXPECT_EQ(other, ws[0]) << "every rank ends with the same w";
    w = ws[0];
  }
  const double ours = primal_objective(p, train, w);
  EXPECT_NEAR(ours, target, 1e-4 * target) << c.name << ": braid " << ours << ", LIBLINEAR " << target;
}

INSTANTIATE_TEST_SUITE_P(
    Solvers, LiblinearReference,
    ::testing::Values(
        Case{"sdca_hinge_heart", "heart", Loss::hinge, false, 3, "sdca", 5000},
        Case{"sdca_squared_hinge_heart", "heart", Loss::squared_hinge, false, 1, "sdca", 2000},
        Case{"sdca_logistic_heart", "heart", Loss::logistic, false, 7, "sdca", 2000},
        Case{"sdca_logistic_sparse", "sparse", Loss::logistic, false, 0, "sdca", 2000},
        Case{"sdca_squared_regression", "regression", Loss::squared, false, 11, "sdca", 2000},
        Case{"cd_logistic_l1_heart", "heart", Loss::logistic, true, 6, "cd", 3000},
        Case{"cd_squared_hinge_l1_heart", "heart", Loss::squared_hinge, true, 5, "cd", 3000},
        Case{"cd_logistic_l1_sparse", "sparse", Loss::logistic, true, 6, "cd", 3000},
        Case{"cd_logistic_l2_heart", "heart", Loss::logistic, false, 0, "cd", 3000},
        Case{"cd_squared_regression", "regression", Loss::squared, false, 11, "cd", 2000},
        Case{"lbfgs_logistic_heart", "heart", Loss::logistic, false, 0, "lbfgs", 300},
        Case{"lbfgs_squared_hinge_heart", "heart", Loss::squared_hinge, false, 2, "lbfgs", 300},
        Case{"lbfgs_logistic_sparse", "sparse", Loss::logistic, false, 0, "lbfgs", 300},
        Case{"lbfgs_squared_regression", "regression", Loss::squared, false, 11, "lbfgs", 300},
        Case{"cocoa1_hinge_heart", "heart", Loss::hinge, false, 3, "cocoa", 5000, 1},
        Case{"cocoa2_hinge_heart", "heart", Loss::hinge, false, 3, "cocoa", 5000, 2},
        Case{"cocoa4_hinge_heart", "heart", Loss::hinge, false, 3, "cocoa", 5000, 4},
        Case{"cocoa2_logistic_sparse", "sparse", Loss::logistic, false, 0, "cocoa", 3000, 2},
        Case{"cocoa4_logistic_sparse", "sparse", Loss::logistic, false, 0, "cocoa", 3000, 4},
        Case{"features3_logistic_sparse", "sparse", Loss::logistic, false, 0, "features", 300, 3},
        Case{"sandblaster4_logistic_sparse", "sparse", Loss::logistic, false, 0, "sandblaster", 300, 4}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace braid::linear_model
