// The distributed solvers against their one-process counterparts: feature
// partitioning and Sandblaster run L-BFGS's iterates; CoCoA+ with one rank
// is SDCA.
#include <gtest/gtest.h>

#include "braid/linear/sandblaster.h"
#include "braid/linear/solvers.h"
#include "tests/linear/problems.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/testing/error_message.h"

namespace braid::linear_model {
namespace {

using parallel::testing::on_ranks;

std::vector<Result> run_on_ranks(int ranks, const std::string& solver, const Problem& p, const Examples& train,
                                 const SolverOptions& o) {
  std::vector<Result> results(static_cast<size_t>(ranks));
  on_ranks(ranks, [&](int r, comm::Communicator comm) { results[r] = solve(solver, p, train, nullptr, o, &comm); });
  return results;
}

void expect_same_iterates(const Result& got, const Result& want, const std::string& what) {
  ASSERT_EQ(got.history.size(), want.history.size()) << what;
  for (size_t k = 0; k < want.history.size(); ++k)
    EXPECT_NEAR(got.history[k].primal, want.history[k].primal, 1e-10 * std::abs(want.history[k].primal))
        << what << ", iteration " << k + 1;
  ASSERT_EQ(got.w.size(), want.w.size());
  double diff = 0, norm = 0;
  for (size_t j = 0; j < want.w.size(); ++j) diff = std::max(diff, std::abs(got.w[j] - want.w[j])), norm = std::max(norm, std::abs(want.w[j]));
  // The ranks sum their partial dot products in the all-reduce's order, which
  // the communicator picks from its measured cost model (so it can change from
  // machine to machine); over 25 iterations that moves w by a few 1e-8
  // relative, while a wrong step would move it by far more than 1e-7.
  EXPECT_LE(diff, 1e-7 * norm) << what;
}

TEST(FeaturePartition, RunsTheIteratesOfOneProcessLbfgs) {
  const Examples train = testing::random_problem(800, 301, 10, false, 4);
  const Problem p{.loss = Loss::logistic, .reg = {1e-3, 0}};
  SolverOptions o;
  o.epochs = 25;
  const Result single = solve("lbfgs", p, train, nullptr, o, nullptr);
  for (int ranks : {1, 2, 3}) {
    const auto results = run_on_ranks(ranks, "features", p, train, o);
    for (int r = 0; r < ranks; ++r)
      expect_same_iterates(results[r], single, fmt::format("{} ranks, rank {}", ranks, r));
  }
}

TEST(Sandblaster, RunsTheIteratesOfOneProcessLbfgs) {
  const Examples train = testing::random_problem(900, 257, 10, false, 6);
  const Problem p{.loss = Loss::squared_hinge, .reg = {1e-3, 0}};
  SolverOptions o;
  o.epochs = 25;
  const Result single = solve("lbfgs", p, train, nullptr, o, nullptr);
  for (auto [ranks, shards, portion] : {std::tuple{3, 1, 0}, {4, 2, 37}, {6, 2, 100}, {5, 3, 1000}}) {
    o.shards = shards;
    o.portion = portion;
    const auto results = run_on_ranks(ranks, "sandblaster", p, train, o);
    for (int r = 0; r < ranks; ++r)
      expect_same_iterates(results[r], single,
                           fmt::format("{} ranks, {} shards, portion {}, rank {}", ranks, shards, portion, r));
  }
}

TEST(Sandblaster, HandsEveryPortionOutOncePerEvaluation) {
  const Examples train = testing::random_problem(300, 50, 5, false, 8);
  const Problem p{.loss = Loss::logistic, .reg = {1e-2, 0}};
  SolverOptions o;
  o.shards = 1;
  o.portion = 7;  // 43 portions of 7 rows (the last has 6)
  std::vector<int64_t> done;
  on_ranks(4, [&](int r, comm::Communicator comm) {
    SandblasterSpace space(p, train, o, comm);
    std::vector<double> w(space.size(), 0.0), g(space.size());
    for (int e = 0; e < 3; ++e) space.evaluate(w, g);
    if (r == 0) done = space.portions_done();
  });
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0] + done[1], 3 * 43);
}

TEST(Sandblaster, NamesTheRolesItLacks) {
  const Examples train = testing::random_problem(50, 10, 3, false, 1);
  SolverOptions o;
  o.shards = 2;
  on_ranks(3, [&](int, comm::Communicator comm) {
    EXPECT_EQ(test::message_of<ConfigError>([&] { SandblasterSpace(Problem{}, train, o, comm); }),
              "sandblaster needs a coordinator, 2 shard(s) and at least one worker: 4 ranks, have 3");
  });
}

TEST(Cocoa, WithOneRankIsSdca) {
  const Examples train = testing::random_problem(600, 200, 8, false, 3);
  const Problem p{.loss = Loss::logistic, .reg = {1e-3, 0}};
  SolverOptions o;
  o.epochs = 15;
  const Result sdca = solve("sdca", p, train, nullptr, o, nullptr);
  const auto cocoa = run_on_ranks(1, "cocoa", p, train, o);
  ASSERT_EQ(cocoa[0].history.size(), sdca.history.size());
  for (size_t k = 0; k < sdca.history.size(); ++k) {
    EXPECT_NEAR(cocoa[0].history[k].primal, sdca.history[k].primal, 1e-9);
    EXPECT_NEAR(cocoa[0].history[k].gap, sdca.history[k].gap, 1e-9);
  }
}

TEST(Cocoa, GapShrinksOnEveryWorldSize) {
  const Examples train = testing::random_problem(700, 150, 8, false, 12);
  const Problem p{.loss = Loss::hinge, .reg = {1e-2, 0}};
  SolverOptions o;
  o.epochs = 60;
  for (int k : {1, 2, 3, 5}) {
    const auto results = run_on_ranks(k, "cocoa", p, train, o);
    const auto& h = results[0].history;
    EXPECT_LT(h.back().gap, 1e-2 * h.front().gap) << k << " ranks";
    EXPECT_GE(h.back().gap, -1e-12) << "a duality gap is never negative";
  }
}

}  // namespace
}  // namespace braid::linear_model
