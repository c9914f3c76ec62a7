// Sparse matrices, datasets and the sparsity figures.
#include <gtest/gtest.h>

#include <filesystem>

#include "braid/linear/datasets.h"
#include "braid/linear/objective.h"
#include "tests/linear/problems.h"
#include "tests/testing/temp_dir.h"

namespace braid::linear_model {
namespace {

SparseMatrix small() {
  // [[1 0 2], [0 0 3], [4 5 0]]
  SparseMatrix x;
  x.append(std::vector<int32_t>{0, 2}, std::vector<float>{1, 2});
  x.append(std::vector<int32_t>{2}, std::vector<float>{3});
  x.append(std::vector<int32_t>{0, 1}, std::vector<float>{4, 5});
  return x;
}

TEST(SparseMatrix, TransposeAndColumnBlocks) {
  const SparseMatrix x = small();
  const SparseMatrix t = x.transpose();
  EXPECT_EQ(t.start, (std::vector<int64_t>{0, 2, 3, 5}));
  EXPECT_EQ(t.index, (std::vector<int32_t>{0, 2, 2, 0, 1}));
  EXPECT_EQ(t.value, (std::vector<float>{1, 4, 5, 2, 3}));
  const SparseMatrix b = x.column_block(1, 3);
  EXPECT_EQ(b.cols, 2);
  EXPECT_EQ(b.start, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(b.index, (std::vector<int32_t>{1, 1, 0}));
  EXPECT_EQ(b.value, (std::vector<float>{2, 3, 5}));
}

TEST(Sparsity, FiguresOfTheHogwildPaper) {
  const auto s = sparsity_stats(small());
  EXPECT_EQ(s.omega, 2);
  EXPECT_DOUBLE_EQ(s.delta, 2.0 / 3);  // features 0 and 2 are in two rows each
  EXPECT_DOUBLE_EQ(s.rho, 1.0);        // row 0 meets rows 1 and 2 (and itself)
  EXPECT_FALSE(s.rho_sampled);
  const auto sampled = sparsity_stats(testing::random_problem(2000, 500, 5, false, 1).x, 1000);
  EXPECT_TRUE(sampled.rho_sampled);
  EXPECT_GT(sampled.rho, 0);
}

TEST(Libsvm, RoundTripsAndMapsBinaryLabels) {
  test::TempDir dir;
  Examples e{small(), {2, 1, 2}};
  write_libsvm(e, dir.file("a.svm"));
  const Examples back = read_libsvm(dir.file("a.svm"));
  EXPECT_EQ(back.x.index, e.x.index);
  EXPECT_EQ(back.x.value, e.x.value);
  EXPECT_EQ(back.y, (std::vector<double>{1, -1, 1}));
  EXPECT_EQ(read_libsvm(dir.file("a.svm"), 0, false).y, e.y);
}

TEST(Libsvm, ATestFileWiderThanTrainingWidensTheModel) {
  test::TempDir dir;
  write_libsvm(Examples{small(), {1, -1, 1}}, dir.file("train.svm"));
  SparseMatrix wide;
  wide.append(std::vector<int32_t>{0, 4}, std::vector<float>{1, 1});
  wide.append(std::vector<int32_t>{1}, std::vector<float>{1});
  write_libsvm(Examples{wide, {1, -1}}, dir.file("test.svm"));
  const auto [train, test] = load_task(dir.file("train.svm"), dir.file("test.svm"), true);
  EXPECT_EQ(train.x.cols, 5) << "feature 5 of the test file gets a (zero) weight";
  EXPECT_EQ(test.x.cols, 5);
  EXPECT_EQ(score(Loss::logistic, test, std::vector<double>{1, -1, 0, 0, 0}), 1.0);
}

TEST(Objective, LiblinearsLossesAndTheirDerivatives) {
  for (Loss loss : {Loss::squared, Loss::logistic, Loss::squared_hinge}) {
    for (double y : {-1.0, 1.0})
      for (double z : {-3.0, -0.5, 0.2, 0.9, 2.5}) {
        const double h = 1e-6;
        const double numeric = (loss_value(loss, y, z + h) - loss_value(loss, y, z - h)) / (2 * h);
        EXPECT_NEAR(loss_derivative(loss, y, z), numeric, 1e-6) << loss_name(loss);
      }
  }
  EXPECT_DOUBLE_EQ(loss_value(Loss::hinge, 1, 0.25), 0.75);
  EXPECT_DOUBLE_EQ(loss_value(Loss::logistic, 1, 800), 0);  // no overflow
  EXPECT_NEAR(loss_value(Loss::logistic, 1, -800), 800, 1e-9);
}

TEST(Fortunes, CategoriesBecomeAHashedBagOfWordsTask) {
  if (!std::filesystem::exists("/usr/share/games/fortunes/computers")) GTEST_FAIL() << "scripts/setup installs fortunes";
  const auto [train, test] = fortunes_task({.buckets = 1 << 16});
  EXPECT_GT(train.size(), 10000);
  EXPECT_NEAR(static_cast<double>(test.size()) / static_cast<double>(train.size() + test.size()), 0.2, 0.01);
  int positive = 0;
  for (double y : train.y) positive += y > 0;
  EXPECT_GT(positive, 1000);
  EXPECT_LT(positive, train.size() / 2);
  for (double n : train.x.row_norms_squared()) ASSERT_TRUE(n == 0 || std::abs(n - 1) < 1e-5);
  const auto [pruned, pruned_test] = fortunes_task({.buckets = 1 << 16, .max_df = 0.05});
  EXPECT_LT(pruned.x.nonzeros(), train.x.nonzeros());
  EXPECT_LE(sparsity_stats(pruned.x).delta, 0.05);
}

TEST(Synthetic, PowerLawFeaturesAndBothLabels) {
  const auto [train, test] = synthetic_task({.rows = 5000, .cols = 1 << 14, .nonzeros_per_row = 10});
  EXPECT_EQ(train.size(), 5000);
  EXPECT_EQ(test.size(), 1000);
  const auto s = sparsity_stats(train.x);
  EXPECT_LE(s.omega, 10);
  EXPECT_GT(s.delta, 10.0 / (1 << 14)) << "skew 2 makes some features popular";
  int positive = 0;
  for (double y : train.y) positive += y > 0;
  EXPECT_GT(positive, 1500);
  EXPECT_LT(positive, 3500);
}

}  // namespace
}  // namespace braid::linear_model
