// softmax / log_softmax: what the op table (cases_softmax.cc) cannot express —
// rows sum to one and huge logits stay finite.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/ops/softmax.h"

namespace braid {
namespace {

TEST(Softmax, RowsSumToOneAndLargeLogitsStayFinite) {
  Tensor x = Tensor::from_vector<float>({1000, 1001, 1002, -5, 0, 5}, {2, 3});
  Tensor y = softmax(x, 1);
  auto v = y.to_vector<float>();
  EXPECT_NEAR(v[0] + v[1] + v[2], 1.0, 1e-6);
  EXPECT_NEAR(v[2], 1.0 / (1 + std::exp(-1.0) + std::exp(-2.0)), 1e-6);
  auto l = log_softmax(x, -1).to_vector<float>();
  EXPECT_NEAR(l[2], -std::log(1 + std::exp(-1.0) + std::exp(-2.0)), 1e-5);
  for (float e : l) EXPECT_TRUE(std::isfinite(e));
}

}  // namespace
}  // namespace braid
