// softmax / log_softmax along every dim: finite differences and PyTorch.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/autograd/gradcheck.h"
#include "braid/ops/softmax.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::expect_matches_torch;
using testing::OpCheck;
using testing::random_tensor;
using testing::strided_copy;

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

TEST(Softmax, Gradcheck) {
  Generator gen(1);
  Tensor x = random_tensor({3, 4, 5}, DType::f64, gen, -2, 2);
  x.set_requires_grad();
  for (int64_t dim : {0, 1, 2}) {
    auto r = autograd::gradcheck([dim](const auto& in) { return softmax(in[0], dim); }, {x});
    EXPECT_TRUE(r.ok) << "softmax dim " << dim << "\n" << r.report;
    r = autograd::gradcheck([dim](const auto& in) { return log_softmax(in[0], dim); }, {x});
    EXPECT_TRUE(r.ok) << "log_softmax dim " << dim << "\n" << r.report;
  }
}

TEST(Softmax, MatchesTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(2);
  Tensor x = random_tensor({4, 6, 5}, DType::f32, gen, -4, 4);
  Tensor s = strided_copy(random_tensor({3, 7, 9}, DType::f32, gen, -4, 4));
  Tensor wide = random_tensor({8, 1000}, DType::f32, gen, -10, 10);
  std::vector<OpCheck> checks;
  for (const Tensor& t : {x, s, wide}) {
    for (int64_t dim = -1; dim < t.ndim(); ++dim) {
      checks.push_back({fmt::format("F.softmax(x, {})", dim), {{"x", t}},
                        [dim](const auto& in) { return softmax(in[0], dim); }, {"x"}});
      checks.push_back({fmt::format("F.log_softmax(x, {})", dim), {{"x", t}},
                        [dim](const auto& in) { return log_softmax(in[0], dim); }, {"x"}});
    }
  }
  expect_matches_torch(checks);
}

}  // namespace
}  // namespace braid
