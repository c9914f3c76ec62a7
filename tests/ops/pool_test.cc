// Pooling beyond the op table (cases_conv.cc): NaN in max_pool2d, and error
// messages.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/ops/pool.h"

namespace braid {
namespace {

TEST(Pool2d, MaxPoolPropagatesNaN) {
  Tensor x = Tensor::from_vector<float>({1, std::nanf(""), 3, 4}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(max_pool2d(x).item()));
}

TEST(Pool2d, BadInputRaisesValueError) {
  try {
    max_pool2d(Tensor::zeros({1, 1, 3, 3}), {.kernel = {4, 4}});
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("max_pool2d"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[1, 1, 3, 3]"), std::string::npos);
  }
  EXPECT_THROW(avg_pool2d(Tensor::zeros({4, 4})), ValueError);
  EXPECT_THROW(avg_pool2d(Tensor::zeros({1, 1, 4, 4}, DType::i64)), ValueError);
  EXPECT_THROW(max_pool2d(Tensor::zeros({1, 1, 4, 4}), {.kernel = {2, 2}, .padding = {2, 0}}), ValueError);
  EXPECT_THROW(max_pool2d(Tensor::zeros({1, 1, 4, 4}), {.kernel = {2, 2}, .stride = {-1, 1}}), ValueError);
}

}  // namespace
}  // namespace braid
