// Reductions: closed-form values, finite-difference gradients, PyTorch.
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/autograd/gradcheck.h"
#include "braid/ops/reduce.h"
#include "gradcheck_util.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::expect_matches_torch;
using testing::OpCheck;
using testing::random_tensor;
using testing::strided_copy;
using testing::Fn;
using testing::leaf;
using testing::expect_gradcheck;

TEST(Reduce, SmallValues) {
  Tensor x = Tensor::from_vector<float>({1, 5, 3, 4, 2, 6}, {2, 3});
  EXPECT_EQ(sum(x).item(), 21);
  EXPECT_EQ(sum(x).ndim(), 0);
  EXPECT_EQ(sum(x, {0}).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(mean(x, {-1}).to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(max(x).item(), 6);
  auto m = max(x, 1);
  EXPECT_EQ(m.values.to_vector<float>(), (std::vector<float>{5, 6}));
  EXPECT_EQ(m.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(argmax(x).item(), 5);
  EXPECT_EQ(argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_FLOAT_EQ(var(x).item(), 3.5f);                // mean 3.5, sum of squares 17.5, / 5
  EXPECT_FLOAT_EQ(var(x, {}, false).item(), 17.5f / 6);
  Tensor i = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  EXPECT_EQ(sum(i).item(), 6);
  EXPECT_EQ(sum(i).dtype(), DType::i64);
}

TEST(Reduce, NonAdjacentDimsAndEmpty) {
  Generator gen(1);
  Tensor x = random_tensor({3, 4, 5, 2}, DType::f64, gen);
  // Reducing dims 0 and 2 (not one run) goes through a permuted copy.
  Tensor s = sum(x, {0, 2});
  auto v = x.to_vector<double>();
  for (int64_t j = 0; j < 4; ++j) {
    for (int64_t l = 0; l < 2; ++l) {
      double ref = 0;
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t k = 0; k < 5; ++k) ref += v[((i * 4 + j) * 5 + k) * 2 + l];
      EXPECT_NEAR(s.to_vector<double>()[j * 2 + l], ref, 1e-12);
    }
  }
  EXPECT_EQ(sum(Tensor::zeros({0, 3})).item(), 0);
  EXPECT_EQ(sum(Tensor::zeros({0, 3}), {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_THROW(max(Tensor::zeros({0})), ValueError);
  EXPECT_THROW(sum(x, {1, 1}), ValueError);
  EXPECT_THROW(sum(x, {4}), IndexError);
}

TEST(Reduce, LongSumsSplitAcrossThreadsAreExact) {
  // Long enough for the per-thread partial sums path; integers below 2^53 are exact in double.
  const int64_t n = 300001;
  EXPECT_EQ(sum(Tensor::arange(n, DType::f64)).item(), static_cast<double>(n * (n - 1) / 2));
  EXPECT_EQ(sum(Tensor::arange(n, DType::i64)).item(), static_cast<double>(n * (n - 1) / 2));
  EXPECT_EQ(mean(Tensor::ones({n})).item(), 1.0);
}

TEST(Reduce, Gradcheck) {
  Generator gen(2);
  Tensor x = leaf(random_tensor({3, 4, 5}, DType::f64, gen));
  Tensor s = leaf(strided_copy(random_tensor({4, 6}, DType::f64, gen)));
  expect_gradcheck([](const auto& in) { return sum(in[0]); }, {x}, "sum all");
  expect_gradcheck([](const auto& in) { return sum(in[0], {0, 2}); }, {x}, "sum 0,2");
  expect_gradcheck([](const auto& in) { return sum(in[0], {1}, true); }, {x}, "sum keepdim");
  expect_gradcheck([](const auto& in) { return mean(in[0], {-1}); }, {x}, "mean");
  expect_gradcheck([](const auto& in) { return mean(in[0]); }, {s}, "mean strided");
  expect_gradcheck([](const auto& in) { return var(in[0], {1}); }, {x}, "var");
  expect_gradcheck([](const auto& in) { return var(in[0], {0, 2}, false, true); }, {x}, "var biased keepdim");
  expect_gradcheck([](const auto& in) { return max(in[0], 1).values; }, {x}, "max dim");
  expect_gradcheck([](const auto& in) { return max(in[0], 0, true).values; }, {s}, "max strided");
  expect_gradcheck([](const auto& in) { return max(in[0]); }, {x}, "max all");
}

TEST(Reduce, MatchesTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(3);
  Tensor x = random_tensor({4, 5, 6}, DType::f32, gen);
  Tensor s = strided_copy(random_tensor({7, 3, 8}, DType::f32, gen));
  Tensor big = random_tensor({300, 70}, DType::f32, gen);  // long rows and columns
  std::vector<OpCheck> checks;
  for (const Tensor& t : {x, s, big}) {
    const std::vector<std::pair<std::string, Fn>> ops = {
        {"x.sum()", [](const auto& in) { return sum(in[0]); }},
        {"x.sum(0)", [](const auto& in) { return sum(in[0], {0}); }},
        {"x.sum(-1, keepdim=True)", [](const auto& in) { return sum(in[0], {-1}, true); }},
        {"x.mean()", [](const auto& in) { return mean(in[0]); }},
        {"x.mean(0)", [](const auto& in) { return mean(in[0], {0}); }},
        {"x.var(-1)", [](const auto& in) { return var(in[0], {-1}); }},
        {"x.var(0, unbiased=False, keepdim=True)", [](const auto& in) { return var(in[0], {0}, false, true); }},
        {"x.var()", [](const auto& in) { return var(in[0]); }},
        {"x.max()", [](const auto& in) { return max(in[0]); }},
        {"x.max(0)[0]", [](const auto& in) { return max(in[0], 0).values; }},
        {"x.max(-1, keepdim=True)[0]", [](const auto& in) { return max(in[0], -1, true).values; }},
        {"x.max(0)[1]", [](const auto& in) { return max(in[0], 0).indices; }},
        {"x.argmax()", [](const auto& in) { return argmax(in[0]); }},
        {"x.argmax(-1)", [](const auto& in) { return argmax(in[0], -1); }},
    };
    for (const auto& [expr, fn] : ops) {
      const bool indices = expr.find("[1]") != std::string::npos || expr.find("argmax") != std::string::npos;
      checks.push_back({expr, {{"x", t}}, fn, indices ? std::vector<std::string>{} : std::vector<std::string>{"x"}});
    }
  }
  checks.push_back({"x.sum((0, 2))", {{"x", x}}, [](const auto& in) { return sum(in[0], {0, 2}); }, {"x"}});
  checks.push_back({"x.mean((-1, 0), keepdim=True)", {{"x", s}},
                    [](const auto& in) { return mean(in[0], {-1, 0}, true); }, {"x"}});
  expect_matches_torch(checks);
}

}  // namespace
}  // namespace braid
