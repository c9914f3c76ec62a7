// Reductions: what the op table (cases_reduce.cc) cannot express — integer
// sums keep their dtype, empty inputs, bad dims, and the threaded long-sum
// path's exactness.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/ops/reduce.h"

namespace braid {
namespace {

TEST(Reduce, IntegerSumsKeepTheirDtype) {
  Tensor i = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  EXPECT_EQ(sum(i).item(), 6);
  EXPECT_EQ(sum(i).dtype(), DType::i64);
  EXPECT_EQ(max(i).item(), 3);
  EXPECT_EQ(argmax(i).item(), 2);
}

TEST(Reduce, EmptyInputsAndBadDims) {
  EXPECT_EQ(sum(Tensor::zeros({0, 3})).item(), 0);
  EXPECT_EQ(sum(Tensor::zeros({0, 3}), {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_TRUE(std::isnan(mean(Tensor::zeros({0, 3})).item()));
  EXPECT_THROW(max(Tensor::zeros({0})), ValueError);
  EXPECT_THROW(argmax(Tensor::zeros({2, 0}), 1), ValueError);
  const Tensor x = Tensor::zeros({3, 4, 5, 2});
  EXPECT_THROW(sum(x, {1, 1}), ValueError);
  EXPECT_THROW(sum(x, {4}), IndexError);
  EXPECT_THROW(mean(Tensor::zeros({3}, DType::i64)), ValueError);
}

TEST(Reduce, LongSumsSplitAcrossThreadsAreExact) {
  // Long enough for the per-thread partial sums path; integers below 2^53 are exact in double.
  const int64_t n = 300001;
  EXPECT_EQ(sum(Tensor::arange(n, DType::f64)).item(), static_cast<double>(n * (n - 1) / 2));
  EXPECT_EQ(sum(Tensor::arange(n, DType::i64)).item(), static_cast<double>(n * (n - 1) / 2));
  EXPECT_EQ(mean(Tensor::ones({n})).item(), 1.0);
}

}  // namespace
}  // namespace braid
